/*
 * criu_dump.h - the launcher's dump of a --pausable sandbox's parked copy
 * with CRIU (docs/SNAPSHOTS.md "Pause, resume and fork (namespaces)").
 *
 * The copy is a checkpoint in place: a fork of the runner, init's child,
 * stopped reading its park fifo.  criu runs as root in every namespace of
 * the sandbox but its user namespace (so the image holds that user
 * namespace and nothing else of the sandbox: a restore makes the others as
 * the launcher makes any sandbox's), with the copy's sockets declared
 * external (their peers are the kernel's and the launcher's) and the copy
 * left where it is (--leave-running: the checkpoint stays usable in place).
 *
 * criu probes the kernel's features at start, by writing in /tmp, unless
 * it finds its feature cache in /run (criu.kdat, which `criu check`
 * writes).  The sandbox's /tmp is the code's, so the launcher makes the
 * cache in its own /run, and for the dump mounts a tmpfs of its own (0700,
 * of the initial user namespace's root) over the sandbox's empty /run (a
 * directory of the read-only root, --pausable only), copies the cache into
 * it and takes it away afterwards.  criu is executed from a descriptor
 * opened in the launcher's mount namespace, with a fixed environment.
 */
#ifndef CB_CRIU_DUMP_H
#define CB_CRIU_DUMP_H

#include <stddef.h>
#include <sys/types.h>

#include "tiers/tier_impl.h"

#define CB_CRIU_EXT_MAX    16               /* sockets of the copy declared external */
#define CB_CRIU_DEFAULT    "/usr/sbin/criu" /* Debian's, named when none is found */
#define CB_CRIU_KDAT       "/run/criu.kdat" /* criu's feature cache (criu check writes it) */
#define CB_CRIU_KDAT_MAX   (64u << 10)      /* bytes of it we copy */
#define CB_CRIU_RUN_OPTS   "mode=0700,size=1m,nr_inodes=16" /* the tmpfs over the sandbox's /run */
#define CB_CRIU_TIMEOUT_MS 600000      /* a dump or a check longer than this is killed */
#define CB_CRIU_RESUME_WAIT_MS 300000  /* the kernel's extra wait for a restored runner's hello */
#define CB_CRIU_LOG        "dump.log"  /* criu's log, in the image directory */
#define CB_CRIU_LOG_SCAN   (64u << 10) /* bytes of criu's log searched for its first error */

#define CB_CRIU_FDS      "fds.txt" /* the image's list of what the copy's pipes and sockets were */
#define CB_CRIU_FDS_MAX  16        /* its pipes and sockets listed */
#define CB_CRIU_LINK_MAX 32        /* bytes of one's name ("socket:[N]", "pipe:[N]") */

/* What the dump of one process needs, read from the host's /proc. */
typedef struct {
    pid_t vpid;                                   /* its pid in the sandbox's pid namespace */
    uid_t uid;                                    /* its host uid (real = effective = saved) */
    gid_t gid;                                    /* ... and gid; both -1 when they differ */
    size_t n_ext;                                 /* its sockets */
    unsigned long ext_ino[CB_CRIU_EXT_MAX];       /* ... their inodes */
    size_t n_fds;                                 /* its pipes and sockets */
    int fd[CB_CRIU_FDS_MAX];                      /* ... their numbers */
    char link[CB_CRIU_FDS_MAX][CB_CRIU_LINK_MAX]; /* ... and names, as criu's --inherit-fd */
} cb_criu_target_t;

/* criu's path on this host (Debian's), NULL when it is not installed. */
const char *cb_criu_path(void);

#define CB_CRIU_VDSO_FIXED  401 /* criu 4.1 reads the vDSO layout of kernels from ... */
#define CB_CRIU_VDSO_KERNEL 613 /* ... 6.13 on (criu#2532) */

/* 0 when criu is installed and can dump on this kernel; -1 with the cause
 * and the fix in why (a criu older than 4.1 on a kernel from 6.13 on). */
int cb_criu_usable(char *why, size_t why_len);

/* The process host_pid as criu must name it.  0 ok, -1 with why. */
int cb_criu_target(pid_t host_pid, cb_criu_target_t *t, char *why, size_t why_len);

/* Where the launcher runs without CAP_SYS_RESOURCE (root in a container
 * that dropped it), the kernel lets criu read and restore a process's
 * rlimits only when criu's real ids are that process's (prlimit's check):
 * then criu runs with uid and gid as its real ids, its effective and saved
 * ids root, so its capabilities are root's across the exec.  Does nothing
 * where the launcher has CAP_SYS_RESOURCE or uid/gid is -1.  Async-signal-
 * safe.  0 ok, -1 errno. */
int cb_criu_real_ids(uid_t uid, gid_t gid);

/* criu's command line for a dump of t into the directory at descriptor
 * dirfd (named /proc/self/fd/N, as criu sees it in the sandbox's /proc), in
 * a (cleared first).  0 ok, -1 when it does not fit. */
int cb_criu_dump_argv(const cb_criu_target_t *t, int dirfd, cb_tier_argv_t *a);

/* Writes t's pipes and sockets into dirfd's CB_CRIU_FDS, one "FD NAME" line
 * each: a restore hands criu the new sandbox's ends in their places
 * (--inherit-fd fd[N]:NAME).  0 ok, -1 with errno. */
int cb_criu_write_fds(const cb_criu_target_t *t, int dirfd);

/* An open descriptor of criu's feature cache, made by `criu check` first
 * when there is none: in the host's /run where that is a tmpfs, else in a
 * tmpfs of a private mount namespace, kept in memory for the launcher's
 * life.  -1 with why. */
int cb_criu_kdat(char *why, size_t why_len);

/* Dumps the process copy (a host pid) of the sandbox whose init is init (a
 * host pid) into dirfd, from every namespace of the sandbox but its user
 * namespace.  Root only.  0 ok; -1 with why (criu's first error). */
int cb_criu_dump(pid_t init, pid_t copy, int dirfd, char *why, size_t why_len);

/* ---- shared with the restore (launcher/criu_restore.c) ---- */
#define CB_CRIU_NS 6 /* the sandbox's namespaces criu joins: all but the user one */
/* Opens init's namespaces (fds: CB_CRIU_NS of them).  0 ok, -1 with why. */
int cb_criu_open_ns(pid_t init, int *fds, char *why, size_t why_len);
void cb_criu_close_ns(int *fds);
/* Joins them, the mount namespace last (single-threaded callers only). */
int cb_criu_join_ns(const int *fds, char *why, size_t why_len);
/* In the sandbox's mount namespace: the tmpfs over /run with the cache kdat
 * (an fd) copied into it; cb_criu_run_cache_end takes it away. */
int cb_criu_run_cache(int kdat, char *why, size_t why_len);
void cb_criu_run_cache_end(void);
/* why criu failed: the first error in its log (in dirfd), else its exit code */
void cb_criu_log_why(int dirfd, const char *log, const char *what, int code, char *why,
                     size_t why_len);
/* what a helper wrote on fd up to its end ("" for nothing), NUL-terminated */
void cb_criu_read_reason(int fd, char *buf, size_t len);
/* criu opened for fexecve, /dev/null and the helper's report pipe (the
 * caller closes what was opened, also on failure).  0 ok, -1 with why. */
int cb_criu_prepare(const char *criu, int *criu_fd, int *null, int rep[2], char *why,
                    size_t why_len);
/* In a helper: criu (pid c, -1 when its fork failed) waited for within the
 * bound, the feature cache taken away, and the helper ended with criu's
 * status, or with the reason on rep when criu could not run. */
__attribute__((noreturn)) void cb_criu_helper_end(pid_t c, const char *what, int rep);
/* In a helper: the reason on rep, and the helper ends (status 1). */
__attribute__((noreturn)) void cb_criu_helper_fail(int rep, const char *why);
/* A helper's end: its reason on rep, or criu's failure from its log in
 * logdir, or 0 when criu succeeded (the helper waited for at most the
 * bound) */
int cb_criu_helper_result(pid_t h, int rep, int logdir, const char *log, const char *what,
                          char *why, size_t why_len);
/* criu's environment */
extern char *const cb_criu_env[];

#endif
