/*
 * snap_proc.h - what the checkpoint agent (snap_agent.c) reads and writes of
 * the sandbox's processes in /proc: which process holds a park fifo, which
 * are past running their code, every process a rollback must end, and a
 * copy's oom_score_adj.  Nothing a process says is believed: its open fds,
 * its parent and its kernel flags are the only evidence.
 *
 * libc only, no allocation (static buffers, one user at a time): linked into
 * the launcher's init and into the static cellblock-init of the other tiers.
 */
#ifndef CB_SNAP_PROC_H
#define CB_SNAP_PROC_H

#include <stdbool.h>
#include <sys/types.h>

#include "tiers/snap_agent.h"

/* Writes value to /proc/PID/file.  0 ok, -1. */
int cb_snap_proc_write(pid_t pid, const char *file, const char *value);
/* Whether pid holds open the file fd is open on (a park fifo; its fds are
 * the only proof).  false for fd < 0. */
bool cb_snap_proc_holds(pid_t pid, int fd);
/* True when every thread of pid is past running its code (PF_EXITING), or
 * pid is gone. */
bool cb_snap_proc_exiting(pid_t pid);

/* Called for one process with its state letter; < 0 stops the walk. */
typedef int (*cb_snap_pid_fn)(cb_snap_agent_t *a, pid_t pid, char state, void *arg);
/* Calls fn for every process of this pid namespace but init, the ones a
 * keeps (its parked copies, a->keep) and kernel threads.  0, or -1 when
 * /proc cannot be read or fn stopped the walk. */
int cb_snap_proc_each(cb_snap_agent_t *a, cb_snap_pid_fn fn, void *arg);

#endif
