/*
 * options.h - the launcher's command line (docs/RUNNER_PROTOCOL.md section 1).
 *
 * Parsing is pure: it fills a struct and, on error, a message for the user;
 * it never exits or logs, so the unit test can drive it.
 */
#ifndef CB_LAUNCHER_OPTIONS_H
#define CB_LAUNCHER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "launcher/flags.h"

typedef enum {
    CB_SANDBOX_FULL = 0, /* all confinement (default) */
    CB_SANDBOX_NONE = 1, /* nothing: debugging only */
} cb_sandbox_mode_t;

/* --isolation: what the runner's code talks to (docs/SECURITY.md "Isolation tiers") */
typedef enum {
    CB_ISOLATION_NAMESPACES = 0, /* the host kernel, behind namespaces/seccomp/Landlock (default) */
    CB_ISOLATION_GVISOR = 1,     /* gVisor's user-space kernel (runsc) inside those namespaces */
    CB_ISOLATION_MICROVM = 2,    /* a guest kernel in a QEMU micro-VM inside those namespaces */
} cb_isolation_t;

/* --warm: whether the runner starts as a template's fork (launcher/warm.h) */
typedef enum {
    CB_WARM_AUTO = 0, /* when a template is there; start one when not (default) */
    CB_WARM_OFF = 1,  /* always cold */
    CB_WARM_WAIT = 2, /* start the template if need be and wait for it */
} cb_warm_mode_t;

typedef struct {
    const char *host;    /* absolute host path (argv memory, borrowed) */
    const char *sandbox; /* absolute path inside the sandbox (borrowed) */
    char *buf;           /* owned copy of "HOST:SANDBOX" split at ':' */
} cb_ro_bind_t;

typedef struct {
    cb_sandbox_mode_t sandbox;                 /* --sandbox */
    cb_isolation_t isolation;                  /* --isolation */
    long memory_mb;                            /* --memory */
    long pids;                                 /* --pids */
    double cpus;                               /* --cpus */
    long disk_mb;                              /* --disk */
    long open_files;                           /* --open-files */
    bool network_host;                         /* --network host */
    uid_t uid;                                 /* --uid: the runner's id inside */
    gid_t gid;                                 /* --gid */
    unsigned long uid_first;                   /* --uid-range FIRST: host ids, one per sandbox */
    unsigned long uid_count;                   /* --uid-range :COUNT */
    bool require_limits;                       /* --require-limits */
    bool no_clone_into_cgroup;                 /* --no-clone-into-cgroup */
    cb_log_level_t log_level;                  /* --log-level */
    const char *python;                        /* --python (borrowed from argv) */
    const char *runner;                        /* --runner (borrowed from argv) */
    cb_ro_bind_t ro_binds[CB_FLAG_REPEAT_MAX]; /* --ro-bind */
    size_t n_ro_binds;                         /* used entries of ro_binds */
    bool help;                                 /* --help was given */

    /* --network allow: the egress proxy (launcher/netproxy.c) */
    const char *network_allow;                       /* SPEC after "allow:" (argv), else NULL */
    const char *network_resolve[CB_FLAG_REPEAT_MAX]; /* --network-resolve NAME=ADDR (argv) */
    size_t n_network_resolve;                        /* used entries */
    long network_max_conns;                          /* --network-max-conns */
    long network_max_mb;                             /* --network-max-bytes, MiB */
    const char *secret[CB_FLAG_REPEAT_MAX];          /* --secret NAME@HOST,... (argv, checked) */
    size_t n_secret;                                 /* used entries */
    const char *network_upstream_ca;                 /* --network-upstream-ca FILE, or NULL */

    /* issue 11: notebook folders and environment */
    const char *workdir_source;          /* --workdir-source DIR or "cwd" (argv), else NULL */
    const char *env[CB_FLAG_REPEAT_MAX]; /* --env NAME or NAME=VALUE (argv, checked) */
    size_t n_env;                        /* used entries of env */

    /* issue 21: warm start */
    cb_warm_mode_t warm;  /* --warm */
    const char *preload;  /* --preload (argv), NULL = none: what the template imports */

    const char *resume_image; /* --resume-image: a verified image to restore (argv), or NULL */
    bool pausable;            /* --pausable: uid 0 mapped, channels made in the sandbox */

    /* issue 23: the debugger's channel, not a flag (main.c sets it) */
    bool debug_channel; /* fd CB_FD_LAUNCHER_DEBUG is the kernel's debug socket */
} cb_options_t;

/* Parses argv.  0 ok (opts filled; opts->help may be set), -1 bad usage with
 * a one-line reason in err.  Call cb_options_fini afterwards either way. */
int cb_options_parse(int argc, char **argv, cb_options_t *opts, char *err, size_t err_len);
/* Frees what parse allocated. */
void cb_options_fini(cb_options_t *opts);
/* Writes the --help text to fd. */
void cb_options_usage(int fd);

#endif
