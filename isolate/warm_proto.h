/*
 * warm_proto.h - what a launcher sends a warm-start template (issue 21), and
 * what the template's fork (isolate/warm_enter.c, in libcellblock-warm.so)
 * reads from it.
 *
 * One request per connection, on a SOCK_SEQPACKET unix socket in a 0700
 * runtime directory, both peers checked with SO_PEERCRED, in two messages.
 * The first, sent as soon as the sandbox's namespaces exist: the fixed
 * header below (cb_warm_req_t, nothing after it), and the fds in the order
 * of cb_warm_fd_t, then the runner's fds (slots 0..n_runner_fds-1), then
 * one cgroup.procs file per hierarchy.  The second, once init has built the
 * file system and rooted its cgroup namespace: a cb_warm_fs_t followed by
 * the seccomp filter's instructions (built by the launcher meanwhile), with
 * the two namespaces that then exist as they will stay (cb_warm_fs_fd_t).
 * So the fork into the pid namespace happens while init is still building
 * the file system.  The launcher and the shared
 * object are built from the same tree and the key names the build (it hashes
 * the shared object's identity), so the layout is checked by magic, version
 * and sizes, never negotiated.  The reply is a cb_warm_reply_t.
 */
#ifndef CB_ISOLATE_WARM_PROTO_H
#define CB_ISOLATE_WARM_PROTO_H

#include <linux/filter.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>

#include "isolate/caps.h"

#define CB_WARM_MAGIC       0x63627731u /* "cbw1" */
#define CB_WARM_VERSION     1u          /* bump with any change below */
#define CB_WARM_KEY_LEN     32          /* hex digits of a template's key */
#define CB_WARM_FILTER_MAX  4096        /* BPF_MAXINSNS */
#define CB_WARM_RUNNER_FDS  8           /* runner fd slots a request may fill */
#define CB_WARM_CGROUP_FDS  8           /* cgroup.procs files (hierarchies) */
#define CB_WARM_REASON_MAX  240         /* bytes of a refusal's reason */
#define CB_WARM_RLIMITS_ALL 16          /* >= RLIM_NLIMITS: the launcher's own limits */

/* The fixed fds of a request, in order. */
typedef enum {
    CB_WARM_FD_ERR = 0, /* error pipe to the launcher: (step, errno) or EOF = runner ready */
    CB_WARM_FD_INIT,    /* socket to the sandbox's init: the adoption handshake */
    CB_WARM_FD_NET,     /* /proc/INIT/ns/net (joined first: it may be the host's) */
    CB_WARM_FD_USER,    /* /proc/INIT/ns/user */
    CB_WARM_FD_IPC,     /* /proc/INIT/ns/ipc */
    CB_WARM_FD_UTS,     /* /proc/INIT/ns/uts */
    CB_WARM_FD_PID,     /* /proc/INIT/ns/pid */
    CB_WARM_FD_FIXED    /* count of the above */
} cb_warm_fd_t;

/* The fds of the second message, in order. */
typedef enum {
    CB_WARM_FS_MNT = 0, /* /proc/INIT/ns/mnt, after pivot_root */
    CB_WARM_FS_CGROUP,  /* /proc/INIT/ns/cgroup, after init's unshare */
    CB_WARM_FS_FDS      /* count of the above */
} cb_warm_fs_fd_t;

#define CB_WARM_FS_MAGIC 0x63627732u /* "cbw2" */

typedef struct {
    uint32_t magic;      /* CB_WARM_FS_MAGIC */
    uint32_t filter_len; /* seccomp instructions following it */
} cb_warm_fs_t;

#define CB_WARM_FS_MAX (sizeof(cb_warm_fs_t) + CB_WARM_FILTER_MAX * sizeof(struct sock_filter))

#define CB_WARM_FDS_MAX (CB_WARM_FD_FIXED + CB_WARM_RUNNER_FDS + CB_WARM_CGROUP_FDS)

typedef struct {
    uint32_t magic;                /* CB_WARM_MAGIC */
    uint32_t version;              /* CB_WARM_VERSION */
    uint32_t header_size;          /* sizeof(cb_warm_req_t) */
    char key[CB_WARM_KEY_LEN + 1]; /* the template's key, NUL-terminated */
    uint8_t clear_groups;          /* setgroups(0) when becoming the runner's ids */
    uint8_t pad[2];                /* zero */
    uint32_t n_runner_fds;         /* runner fds attached after the fixed ones */
    uint32_t n_cgroup_fds;         /* cgroup.procs files attached after those */
    uint32_t uid, gid;             /* the runner's ids inside the user namespace */
    int32_t last_cap;              /* /proc/sys/kernel/cap_last_cap */
    int32_t landlock_abi;          /* 0: no Landlock */
    uint32_t umask;                /* the launcher's umask (a cold runner inherits it) */
    int32_t nice;                  /* the launcher's nice value */
    int32_t oom_score_adj;         /* the launcher's oom_score_adj */
    uint32_t n_limits;             /* used entries of limits (the launcher's own) */
    struct rlimit limits[CB_WARM_RLIMITS_ALL]; /* getrlimit(i) of the launcher, i < n_limits */
    cb_rlimits_t rlimits;                      /* the sandbox's own, applied on top (as cold) */
    cpu_set_t affinity;                        /* the launcher's CPU affinity */
    int32_t init_pid; /* host pid of the sandbox's init to move into the cgroup first, 0: it
                       * is there already (clone3 into the cgroup) */
} cb_warm_req_t;

typedef struct {
    uint32_t magic;                  /* CB_WARM_MAGIC */
    int32_t ok;                      /* 1 accepted (errors follow on the error pipe), 0 refused */
    int32_t pid;                     /* host pid of the fork that serves it */
    char reason[CB_WARM_REASON_MAX]; /* refused: why, NUL-terminated */
} cb_warm_reply_t;

#endif
