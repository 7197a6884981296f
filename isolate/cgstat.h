/*
 * cgstat.h - what a sandbox's cgroup has counted: CPU time, memory now, its
 * peak and its limit, on cgroup v2 and v1 (issue 22: the costs of a cell,
 * usage_request).
 *
 * The group is found from one of its processes (the runner, as the
 * launcher reports it): /proc/PID/cgroup names its place in each
 * hierarchy, and a place whose last component is a cellblock group
 * ("cellblock-<pid>-<start>", isolate/cgroup.h) is the sandbox's.  Read
 * only, apart from resetting the peak:
 *   v2: cpu.stat usage_usec; memory.current, memory.max; memory.peak, whose
 *       peak an open file can reset for itself (Linux 6.12+; older kernels
 *       give the peak since the sandbox started, and say so);
 *   v1: cpuacct.usage when the sandbox has a cpuacct group, else the CPU
 *       time of its processes (their own and their reaped children's, from
 *       /proc/PID/stat); memory.usage_in_bytes, memory.limit_in_bytes,
 *       memory.max_usage_in_bytes (reset by writing 0).
 */
#ifndef CB_CGSTAT_H
#define CB_CGSTAT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    int version;        /* 2 or 1; 0: not open (no sandbox cgroup) */
    int mem_dir;        /* O_PATH fd of the memory group (v2: the group), -1 */
    int cpu_dir;        /* v2: the group; v1: the cpuacct group, -1: from the processes */
    int peak_fd;        /* v2: memory.peak, opened for a cell's peak, -1 */
    bool peak_per_cell; /* the peak was reset at the cell's start */
    pid_t member;       /* the process the group was found from */
} cb_cgstat_t;

/* An unopened one. */
void cb_cgstat_init(cb_cgstat_t *s);
/* Finds and opens the sandbox group of process member.  0 ok, -1 none (no
 * cgroup limits in force, or the process is gone). */
int cb_cgstat_open(cb_cgstat_t *s, pid_t member);
/* Closes it (init state again). */
void cb_cgstat_close(cb_cgstat_t *s);
/* CPU time of the group so far, ns; *from_procs when summed over its
 * processes.  0 ok, -1 errno. */
int cb_cgstat_cpu(const cb_cgstat_t *s, uint64_t *ns, bool *from_procs);
/* Memory charged now and the limit (0: none).  0 ok, -1 errno. */
int cb_cgstat_memory(const cb_cgstat_t *s, uint64_t *current, uint64_t *limit);
/* A cell starts: its peak is measured from now where the kernel can. */
void cb_cgstat_peak_start(cb_cgstat_t *s);
/* The peak since cb_cgstat_peak_start (s->peak_per_cell), else since the
 * sandbox started.  0 ok, -1 errno. */
int cb_cgstat_peak(const cb_cgstat_t *s, uint64_t *bytes);

#endif
