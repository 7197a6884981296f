/*
 * cgroup.h - per-sandbox control groups, v2 or v1, and their cleanup.
 *
 * Layout, under the cgroup the kernel (and so the launcher) runs in, in
 * every hierarchy used:
 *
 *   <own cgroup>/cellblock-k<kernel pid>-<start>/      one per kernel (parent)
 *                 cellblock-<launcher pid>-<start>/    one per sandbox (limits)
 *
 * A pid plus its start time (cb_proc_start_time) names one process for good,
 * so a group whose owner is gone is recognised even after pid reuse, and
 * groups of live owners (other kernels on the host) are never touched.
 *
 * v2: the parent's subtree_control gets memory, pids and cpu (the v2 rule:
 * only a group without processes can hand controllers down, so the kernel's
 * own cgroup must be a delegated, process-free one or the root);
 * memory.max with memory.swap.max=0, pids.max, cpu.max; teardown through
 * cgroup.kill.  v1: one directory per hierarchy (memory with memsw so there
 * is no swap, pids, cpu, freezer); teardown freezes, SIGKILLs and thaws.
 * Every path is built from a root given by the caller, so the unit test runs
 * the same file-level logic against a fake tree in a temp dir.
 *
 * Files: cgroup.c (common: files, add, kill, OOM, teardown, names),
 * cgroup_v2.c and cgroup_v1.c (creation), cgroup_sweep.c (stale groups);
 * cgroup_priv.h is what they share.
 *
 * Who removes what: the launcher removes its own group (and the parent, when
 * it is left empty) when it ends, also on SIGTERM, which is its parent-death
 * signal.  Groups whose owner died by SIGKILL (or is a zombie) are removed
 * by the next launcher that starts (cb_cgroup_sweep; also `cellblock-kernel
 * sweep`), and by the kernel through
 * cb_cgroup_cleanup_launcher / cb_cgroup_cleanup_kernel.
 */
#ifndef CB_CGROUP_H
#define CB_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum {
    CB_CGROUP_V1 = 1, /* legacy hierarchies */
    CB_CGROUP_V2 = 2, /* unified hierarchy */
} cb_cgroup_version_t;

typedef struct {
    long memory_mb; /* memory limit, also memory+swap limit */
    long pids;      /* pids.max */
    double cpus;    /* cfs quota in CPUs */
} cb_cgroup_limits_t;

typedef enum {
    CB_OWNER_UNKNOWN = 0, /* not a name we make: never touched */
    CB_OWNER_ALIVE = 1,   /* its owner runs: never touched */
    CB_OWNER_GONE = 2,    /* its owner is gone: stale, may be removed */
} cb_cgroup_owner_t;

typedef struct cb_cgroup cb_cgroup_t;

/* "cellblock-k<pid>-<start time>": the parent group of every sandbox of the
 * kernel `pid`.  0 ok, -1 no such process or buf too small. */
int cb_cgroup_kernel_name(pid_t pid, char *buf, size_t len);
/* "cellblock-w<pid>-<start time>": the group of a warm-start template whose
 * supervisor is `pid` (launcher/warm_tpl.c). */
int cb_cgroup_warm_name(pid_t pid, char *buf, size_t len);
/* "cellblock-<pid>-<start time>": the group of the launcher `pid`. */
int cb_cgroup_launcher_name(pid_t pid, char *buf, size_t len);
/* Whether the owner of the group called `name` (a directory name, no
 * slash) is alive.  Names of the first cellblock release,
 * "cellblock-<pid>", count as alive while that pid is a cellblock-launcher. */
cb_cgroup_owner_t cb_cgroup_owner(const char *name);

/* BASE is the root of our cgroup namespace (a container's whole cgroup). */
#define CB_CGROUP_NS_ROOT 1u

/* v2: creates BASE/PARENT/NAME (PARENT may be NULL: BASE/NAME) in a
 * delegated BASE and sets the limits.  A BASE that holds processes is
 * vacated into BASE/cellblock-leaf when it is delegated (owned by our euid,
 * marked by systemd, or CB_CGROUP_NS_ROOT in flags), see cgroup_v2.c.
 * NULL with a reason (cause and fix) in why. */
cb_cgroup_t *cb_cgroup_new_v2(const char *base, unsigned flags, const char *parent,
                              const char *name, const cb_cgroup_limits_t *lim, char *why,
                              size_t why_len);
/* v1: ROOT is where the hierarchies are mounted (/sys/fs/cgroup); SELF is a
 * /proc/self/cgroup-format file naming our place in each; the group is
 * PARENT/NAME below that place (PARENT may be NULL).  NULL + why. */
cb_cgroup_t *cb_cgroup_new_v1(const char *root, const char *self, const char *parent,
                              const char *name, const cb_cgroup_limits_t *lim, char *why,
                              size_t why_len);
/* Tries v2 (when this machine's unified hierarchy is delegated to us), then
 * v1.  NULL + why when neither can be used. */
cb_cgroup_t *cb_cgroup_new_auto(const char *parent, const char *name, const cb_cgroup_limits_t *lim,
                                char *why, size_t why_len);
/* v2: an O_RDONLY fd of the group's directory, for clone3(CLONE_INTO_CGROUP);
 * -1 on v1 (nothing to clone into) or failure.  The caller closes it. */
int cb_cgroup_dirfd(const cb_cgroup_t *self);
/* Moves pid into the cgroup(s).  0 ok, -1 errno. */
int cb_cgroup_add(cb_cgroup_t *self, pid_t pid);
/* Opens the group's cgroup.procs file in every hierarchy (O_WRONLY,
 * O_CLOEXEC) into fds[0..max): a warm start's fork joins the group by
 * writing "0" there (the kernel checks the opener's credentials).  The
 * count, -1 errno (E2BIG: more hierarchies than max). */
int cb_cgroup_procs_fds(const cb_cgroup_t *self, int *fds, size_t max);
/* SIGKILLs every process in it (v2 cgroup.kill, else freeze/kill/thaw or
 * a kill loop) and waits until it is empty.  0 ok, -1 something stayed. */
int cb_cgroup_kill(cb_cgroup_t *self);
/* True when the memory controller OOM-killed something in it. */
bool cb_cgroup_oom(const cb_cgroup_t *self);
/* An fd to poll for the group's OOM kills (events: what to poll for: v1 an
 * eventfd on memory.oom_control, POLLIN; v2 memory.events, POLLPRI).  Made
 * at the first call, owned by the group.  -1 errno when the host has none. */
int cb_cgroup_oom_watch(cb_cgroup_t *self, short *events);
/* After that fd fired: takes the event; true when the OOM killer ran in the
 * group (v1: it is about to; v2: oom_kill went up). */
bool cb_cgroup_oom_fired(cb_cgroup_t *self);
/* One line: "cgroup v1: memory 1024 MiB (no swap), pids 128, cpu 1.00". */
void cb_cgroup_describe(const cb_cgroup_t *self, char *buf, size_t len);
cb_cgroup_version_t cb_cgroup_version(const cb_cgroup_t *self);
/* Kills, removes the group's directories, then the parent's when that is
 * left empty.  Idempotent, NULL ok. */
void cb_cgroup_destroy(cb_cgroup_t **self_p);

/* ---- cleanup of groups whose owner is gone ------------------------------ */

/* In one directory of one hierarchy: every cellblock-* group whose owner is
 * gone is emptied (cgroup.kill, else SIGKILL of its members) and removed,
 * children first; a stale parent keeps any child whose owner still runs.
 * Returns how many groups were removed, -1 when a stale one stayed. */
int cb_cgroup_sweep_dir(const char *dir);
/* DIR/PARENT: sweeps it, then removes it if it is left empty (for the
 * owner itself: the group's owner is the caller).  0 removed or absent,
 * -1 it stayed (a live child, or an error). */
int cb_cgroup_remove_parent_dir(const char *dir, const char *parent);

/* The same over every hierarchy this process is in (v2 and v1), below its
 * own cgroup.  The launcher calls cb_cgroup_sweep once its sandbox runs. */
int cb_cgroup_sweep(void);
/* For the kernel, after it reaped a launcher that did not end by itself
 * (SIGKILL, crash): removes that launcher's group below the kernel's parent
 * group, if it is still there and its owner really is gone.  Cheap when
 * there is nothing to do.  0 ok (or nothing), -1 a group stayed. */
int cb_cgroup_cleanup_launcher(pid_t launcher_pid);
/* For the kernel at exit, after its launcher was reaped: removes the
 * kernel's parent group ("cellblock-k<getpid()>-<start>") in every
 * hierarchy, with any stale child.  0 ok, -1 something stayed. */
int cb_cgroup_cleanup_kernel(void);

/* File helpers, exposed for the test: read a small file / write a string. */
int cb_cgroup_read(const char *dir, const char *file, char *buf, size_t len);
int cb_cgroup_write(const char *dir, const char *file, const char *value);

#endif
