/*
 * warm_limits.h - the bounds and fixed values of warm starts (launcher/warm.h).
 */
#ifndef CB_LAUNCHER_WARM_LIMITS_H
#define CB_LAUNCHER_WARM_LIMITS_H

#define CB_WARM_DIR_PARENT    "/run/cellblock"       /* made if need be (root, 0700) */
#define CB_WARM_DIR           "/run/cellblock/warm"  /* runtime dir (root, 0700) */
#define CB_WARM_DIR_MODE      0700                   /* and its parent's */
#define CB_WARM_FILE_MODE     0600                   /* the files in it */
#define CB_WARM_SO_NAME       "libcellblock-warm.so" /* next to the launcher */
#define CB_WARM_MEMFD_NAME    "cellblock-warm"       /* what /proc/PID/maps shows for it */
#define CB_WARM_SUPERVISOR    "cellblock-warm"       /* comm of a template's supervisor */
#define CB_WARM_KEY_BYTES     16                     /* BLAKE2b digest of a configuration */
#define CB_WARM_REPLY_MS      3000                   /* the template answers a request */
#define CB_WARM_READY_MS      10000                  /* its fork's runner is up */
#define CB_WARM_WAIT_MS       180000                 /* --warm wait: a template's first build */
#define CB_WARM_WAIT_POLL_MS  20                     /* between connects while waiting */
#define CB_WARM_BUILD_MS      180000                 /* the supervisor waits for "ready" */
#define CB_WARM_IDLE_S        600                    /* a template with no request ends */
#define CB_WARM_MAX_AGE_S     3600                   /* and any template after this */
#define CB_WARM_RETRY_S       60                     /* after a failed build, no new one */
#define CB_WARM_SPARES        2                      /* forks waiting for a request */
#define CB_WARM_BACKLOG       128                    /* listen() backlog */
#define CB_WARM_MEMORY_MB     2048L                  /* the template's cgroup */
#define CB_WARM_PIDS          64L                    /* template, spares, forks serving */
#define CB_WARM_CPUS          1.0                    /* its CPU share */
#define CB_WARM_TERM_GRACE_MS 2000                   /* SIGTERM, then SIGKILL */
#define CB_WARM_CONFIG_MAX    8192                   /* bytes of the template's config */
#define CB_WARM_FILE_MAX      128                    /* bytes of a pid file */
#define CB_WARM_COPY_CHUNK    65536                  /* copying the shared object */
#define CB_WARM_LOG_MAX       (1u << 20)             /* bytes of a template's output logged */
#define CB_WARM_SO_MAX        (16u << 20)            /* bytes of the shared object */
#define CB_WARM_KEY_DEPTH     2                      /* runner dir levels hashed */
#define CB_WARM_ENDED_MAX     160                    /* bytes of <key>.ended: how the last ended */
#define CB_WARM_EXIT_STALE    75                     /* a template's exit: its Python tree changed */
#define CB_WARM_TRUST_ENTRIES_MAX 65536                /* entries whose owner is checked (warm_trust.c) */
#define CB_WARM_SWEEP_AGE_S   86400                  /* files of keys untouched this long are removed */

/* The template's fds at exec (runner/runner.py tells a template by fd 3). */
#define CB_WARM_TPL_FD_CONFIG 3 /* pipe: its configuration, then EOF */
#define CB_WARM_TPL_FD_LISTEN 4 /* the listening socket */
#define CB_WARM_TPL_FD_SO     5 /* memfd of libcellblock-warm.so */
#define CB_WARM_TPL_FD_READY  6 /* pipe: one byte once it serves */

#endif
