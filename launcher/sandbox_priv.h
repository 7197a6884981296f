/*
 * sandbox_priv.h - what the parts of the namespaces sandbox share:
 *
 *   sandbox.c         the launcher side: start, supervision, teardown
 *   sandbox_plan.c    planning: mounts, ids, exec plan, seccomp, cgroup, banner
 *   sandbox_init.c    inside: the sandbox's init and the runner's last steps
 *                     before execve (no malloc, no stdio, no logging)
 *   sandbox_snap.c    checkpoints in place: init as their agent, and the
 *                     launcher relaying the kernel's commands to it
 *   sandbox_criu.c    --pausable: pause into an image and resume from one (CRIU)
 *   warm.c, warm_tpl.c  a warm start: the runner from a template (warm.h)
 *
 * Only these files include it.
 */
#ifndef CB_LAUNCHER_SANDBOX_PRIV_H
#define CB_LAUNCHER_SANDBOX_PRIV_H

#include <stdbool.h>
#include <sys/types.h>

#include "isolate/caps.h"
#include "isolate/cgroup.h"
#include "isolate/idpool.h"
#include "isolate/mount.h"
#include "isolate/overlay.h"
#include "isolate/seccomp_filter.h"
#include "launcher/child.h"
#include "launcher/netproxy.h"
#include "launcher/report.h"
#include "launcher/sandbox.h"
#include "isolate/snap_limits.h"
#include "launcher/warm.h"
#include "tiers/tier.h"

#define CB_SB_GO            'g' /* launcher -> init: ids and cgroup are set */
#define CB_SB_STR(x)        CB_SB_STR2(x)
#define CB_SB_STR2(x)       #x
#define CB_SB_CHILDREN_BUF  64 /* bytes of /proc/PID/task/PID/children read */
#define CB_SB_ISOLATION_MAX CB_REPORT_LINE_MAX
#define CB_SB_CAUSE_MAX     200 /* bytes of the no-cgroup cause in the banner */

enum {
    CB_SB_MSG_ERR = 1,
    CB_SB_MSG_WORKDIR = 2,
    CB_SB_MSG_STATUS = 3,
    CB_SB_MSG_SNAP = 4,
    CB_SB_MSG_CHANNEL = 5 /* --pausable: the kernel's end of a channel made inside */
};
/* --pausable: the runner's channels init makes in the sandbox's network
 * namespace (CRIU dumps a socket only from the dumped task's namespace) */
enum { CB_SB_CHAN_EVENT = 0, CB_SB_CHAN_DEBUG = 1, CB_SB_CHANS = 2 };
/* their ends are kept at fds from here on, clear of the fds 0-5 the runner's
 * last steps arrange (a free fd 5 would otherwise pass for the debugger's) */
#define CB_SB_CHAN_FD_MIN 10

typedef struct {
    int type;               /* CB_SB_MSG_* */
    cb_child_err_t err;     /* CB_SB_MSG_ERR */
    int status;             /* CB_SB_MSG_STATUS: the runner's wait status */
    int chan;               /* CB_SB_MSG_CHANNEL: CB_SB_CHAN_* */
    bool runner_end;        /* CB_SB_MSG_CHANNEL: the runner's end (the launcher keeps it) */
    cb_overlay_stats_t ovl; /* CB_SB_MSG_WORKDIR: what --workdir-source's walk hid */
    char text[CB_SNAP_LINE_MAX]; /* CB_SB_MSG_SNAP: a line of the checkpoint agent */
} cb_sb_msg_t;

struct cb_sandbox {
    const cb_options_t *opts;                  /* borrowed */
    bool userns;                               /* a user namespace (always, in full mode) */
    bool root;                                 /* launched as root: ids from the pool */
    pid_t kernel_pid;                          /* our parent (parent-death checks) */
    cb_idlease_t lease;                        /* root: the sandbox's own host id */
    cb_idlease_t root_lease;                   /* --pausable: the host id of uid 0 inside */
    uid_t uid;                                 /* runner's uid (inside) */
    gid_t gid;                                 /* runner's gid (inside) */
    int last_cap;                              /* cap_last_cap */
    int landlock_abi;                          /* 0 = unavailable */
    cb_mount_plan_t mounts;                    /* the filesystem */
    cb_exec_plan_t exec;                       /* argv/envp of the runner */
    cb_seccomp_t filter;                       /* exported BPF */
    cb_rlimits_t rlimits;                      /* applied in the runner */
    cb_cgroup_t *cg;                           /* NULL: degraded to rlimits */
    char limits_desc[CB_SB_ISOLATION_MAX / 2]; /* how limits are enforced */
    pid_t init;                                /* host pid of the sandbox's init */
    pid_t runner;                              /* host pid of the runner, or init's */
    int ctl;                                   /* socket to init, -1 when closed */
    bool have_status;                          /* init reported the runner's status */
    int runner_status;                         /* that status */
    char error[CB_REPORT_LINE_MAX];            /* cause and fix of the last failure */
    cb_netproxy_t *np;                         /* --network allow: the egress proxy (borrowed) */
    char wd_source[CB_PATH_MAX];               /* --workdir-source, resolved ("" = none) */
    cb_overlay_stats_t ovl;                    /* its walk, as init reported it */
    cb_tier_t *tier;                           /* --isolation gvisor|microvm; NULL: namespaces */
    bool oom_unwatched;                        /* gvisor: its OOM kills cannot be watched (said) */
    cb_warm_t *warm;                           /* a warm start (warm.h); NULL: cold */
    int chan_keep[2];                          /* --pausable: the runner's ends of its channels,
                                                * kept as the kernel's own were: the kernel sees
                                                * them close when the launcher ends */
    int resume_fd;                             /* --resume-image (namespaces): the verified
                                                * image until the restore takes it, or -1 */
};

/* Sets sb->error (the cause and the fix of the last failure). */
void cb_sb_err(cb_sandbox_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* sandbox_plan.c: everything the children will need, prepared beforehand
 * (tier, host id, mounts, exec plan, seccomp, rlimits, cgroup).  0 ok, -1
 * with sb->error set. */
int cb_sb_plan(cb_sandbox_t *sb);
/* The seccomp filter, unless built already (a warm start builds it after
 * clone).  0 ok, -1 with sb->error set. */
int cb_sb_plan_filter(cb_sandbox_t *sb);
/* A warm-start template's filesystem: the sandbox's, less one kernel's
 * --ro-bind and --workdir-source (warm_tpl.c).  0 ok, -1 errno. */
int cb_sb_plan_template_mounts(cb_sandbox_t *sb, cb_mount_plan_t *p);
/* The banner's isolation line. */
void cb_sb_describe(const cb_sandbox_t *sb, char *buf, size_t len);

/* sandbox_snap.c, inside init: the checkpoint store and park directory
 * (-1 each, with the reason, where there are none); then init's supervision
 * loop with the checkpoint agent (never returns). */
void cb_sb_snap_prepare(const cb_sandbox_t *sb, int *store, int *park, const char **why);
/* Closes every fd of init but ctl and tier (moved to ctl + 1); returns tier's number. */
int cb_sb_snap_keep_fds(int ctl, int tier);
/* tier: the tier supervisor's channel (-1 none): commands go there, not to an agent here. */
__attribute__((noreturn)) void cb_sb_init_supervise(const cb_sandbox_t *sb, int ctl, int tier,
                                                    pid_t runner, int store, int park,
                                                    const char *why);

/* sandbox_criu.c: a --resume-image of this tier (the first runner is a placeholder) */
bool cb_sb_criu_resuming(const cb_sandbox_t *sb);
/* Resuming: the resync frame with the wake's nonce into the kernel's end of
 * the event channel, before the kernel has it.  0 ok (or not resuming), -1. */
int cb_sb_criu_resync(cb_sandbox_t *sb, int kernel_end);
/* Resuming, once the sandbox runs: the restore starts (imgfd is taken). */
void cb_sb_criu_resume_begin(cb_sandbox_t *sb, int imgfd);
/* A line of the agent: true when it belongs to a pause or resume of ours. */
bool cb_sb_criu_line(cb_sandbox_t *sb, const char *line);

/* sandbox_init.c: the sandbox's pid 1 (never returns). */
__attribute__((noreturn)) void cb_sb_init_main(const cb_sandbox_t *sb, int ctl, int errfd);

#endif
