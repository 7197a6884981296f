/*
 * childstep.h - what a freshly cloned child of the launcher may do before
 * execve, shared by the namespaces sandbox (launcher/) and the tiers'
 * supervisors (tiers/): the setup steps, the error pipe that reports the
 * failing one (libuv style), and the async-signal-safe resets.  No malloc,
 * no stdio, no logging in any of it.
 */
#ifndef CB_ISOLATE_CHILDSTEP_H
#define CB_ISOLATE_CHILDSTEP_H

/* Setup steps, in the order they run; each has a name and a hint. */
typedef enum {
    CB_STEP_NONE = 0,
    CB_STEP_CLONE,     /* clone(CLONE_NEW*) */
    CB_STEP_IDMAP,     /* uid_map/gid_map */
    CB_STEP_SYNC,      /* waiting for the parent */
    CB_STEP_CGROUP_NS, /* unshare(CLONE_NEWCGROUP) */
    CB_STEP_HOSTNAME,  /* sethostname */
    CB_STEP_NET,       /* loopback up */
    CB_STEP_MOUNT,     /* building the root */
    CB_STEP_PROC,      /* mounting /proc */
    CB_STEP_PIVOT,     /* pivot_root */
    CB_STEP_WORKDIR,   /* sending the workdir fd */
    CB_STEP_FORK,      /* init forking the runner */
    CB_STEP_SETSID,    /* setsid */
    CB_STEP_CHDIR,     /* chdir to the workdir */
    CB_STEP_RLIMIT,    /* setrlimit */
    CB_STEP_CAPS,      /* dropping capabilities / ids */
    CB_STEP_NNP,       /* no_new_privs */
    CB_STEP_LANDLOCK,  /* landlock_restrict_self */
    CB_STEP_FDS,       /* close_range */
    CB_STEP_SECCOMP,   /* loading the filter */
    CB_STEP_EXEC,      /* execve */
    CB_STEP_TIER,      /* starting the isolation tier (tiers/tier.h) */
    CB_STEP_WARM,      /* a warm start's own steps (isolate/warm_enter.h; arg: the stage) */
    CB_STEP_COUNT
} cb_step_t;

typedef struct {
    int step; /* cb_step_t */
    int err;  /* errno at the failing call */
    int arg;  /* index into the mount plan etc., -1 if none */
} cb_child_err_t;

/* Async-signal-safe: unblock all signals, default dispositions. */
void cb_child_reset_signals(void);
/* Async-signal-safe: report (step, errno, arg) on errfd and _exit(127). */
__attribute__((noreturn)) void cb_child_fail(int errfd, cb_step_t step, int arg);
/* Async-signal-safe: mark every fd >= 4 close-on-exec, clear it on 0..3;
 * when fd CB_FD_LAUNCHER_DEBUG is a socket (the debugger's channel), it
 * becomes fd CB_FD_DEBUG (in place of the report socket).  0 ok, -1 errno. */
int cb_child_prepare_fds(void);
/* Reads one cb_child_err_t from fd.  1 got one, 0 EOF (exec happened),
 * -1 errno. */
int cb_child_read_err(int fd, cb_child_err_t *out);

#endif
