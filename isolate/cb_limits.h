/*
 * cb_limits.h - the bounds and defaults shared by every layer (named so no
 * header here shares a system header's name).
 *
 * Modules add their constants here (grouped by the module that uses them)
 * instead of writing
 * numbers in code.  Sizes are in bytes unless the name says otherwise.
 */
#ifndef CB_LIMITS_H
#define CB_LIMITS_H

/* ---- shared ---------------------------------------------------------- */
#define CB_LOG_LINE_MAX 2048 /* one log line, truncated beyond */
#define CB_PATH_MAX     4096 /* any path we build */
#define CB_SCM_FDS_MAX  32   /* fds one of our unix-socket messages carries (SCM_RIGHTS) */

/* ---- names from the sandbox (isolate/names.c) ------------------------ */
#define CB_NAMES_NAME_MAX      255  /* bytes of one name (NAME_MAX) */
#define CB_NAMES_PATH_MAX      2048 /* bytes of a relative path saved on the host */
#define CB_NAMES_ESCAPE_FACTOR 4    /* escaped bytes per raw byte at most ("\ooo") */
#define CB_NAMES_REASON_MAX    160  /* one refusal sentence */

/* ---- launcher reports (read by the kernel) ---------------------------- */
#define CB_REPORT_LINE_MAX 1024 /* one launcher report line */

/* ---- defaults of kernel options (shown in --help) -------------------- */
#define CB_DEFAULT_MEMORY_MB        1024
#define CB_DEFAULT_PIDS             128
#define CB_DEFAULT_CPUS             1.0
#define CB_DEFAULT_DISK_MB          1024
#define CB_DEFAULT_OPEN_FILES       1024
#define CB_DEFAULT_TIMEOUT_S        60
#define CB_DEFAULT_MAX_OUTPUT_MB    64
#define CB_OPT_MAX_TIMEOUT_S        (7L * 24 * 3600) /* --timeout upper bound */
#define CB_OPT_MAX_OUTPUT_MB        (1L << 20)       /* --max-output upper bound */
#define CB_DEFAULT_ARTIFACT_FILE_MB 10               /* --artifact-max-file */
#define CB_DEFAULT_ARTIFACT_CELL_MB 25               /* --artifact-max-cell */
#define CB_DEFAULT_ARTIFACT_FILES   50               /* --artifact-max-files */
#define CB_OPT_MAX_ARTIFACT_FILE_MB 256              /* their upper bounds */
#define CB_OPT_MAX_ARTIFACT_CELL_MB 512
#define CB_OPT_MAX_ARTIFACT_FILES   10000
#define CB_INTERRUPT_GRACE_MS       2000  /* SIGINT then kill after this */
#define CB_SANDBOX_UID              65534 /* unprivileged id when root */

#endif
