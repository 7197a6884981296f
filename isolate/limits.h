/*
 * limits.h - every bound and default in cellblock, in one place.
 *
 * Modules add their constants here (grouped by owner) instead of writing
 * numbers in code.  Sizes are in bytes unless the name says otherwise.
 */
#ifndef CB_LIMITS_H
#define CB_LIMITS_H

/* ---- shared ---------------------------------------------------------- */
#define CB_LOG_LINE_MAX 2048 /* one log line, truncated beyond */
#define CB_PATH_MAX     4096 /* any path we build */

/* ---- kernel: wire ----------------------------------------------------- */
#define CB_WIRE_DELIM           "<IDS|MSG>"  /* identity/message delimiter */
#define CB_WIRE_MAX_IDENTS      16           /* routing identities accepted */
#define CB_WIRE_MAX_IDENT_BYTES 1024         /* bytes of one identity frame */
#define CB_WIRE_MAX_BUFFERS     64           /* binary buffers after content */
#define CB_WIRE_MAX_FRAME_BYTES (64u << 20)  /* one frame (also ZMQ_MAXMSGSIZE) */
#define CB_WIRE_MAX_MSG_BYTES   (128u << 20) /* a whole multipart message */
#define CB_WIRE_SIG_HEX_LEN     64           /* hmac-sha256 hex digest */
#define CB_REPLAY_HISTORY       65536        /* signatures remembered */
#define CB_SHELL_QUEUE_MAX      4096         /* shell requests held while aborting */
#define CB_KERNEL_HISTORY_MAX   100000       /* history entries kept */

/* ---- kernel <-> runner frames ---------------------------------------- */
#define CB_RUNNER_PROTOCOL_VERSION 1            /* docs/RUNNER_PROTOCOL.md */
#define CB_RUNNER_FRAME_HDR        4            /* big-endian u32 length prefix */
#define CB_RUNNER_FRAME_MAX        (48u << 20)  /* largest frame either way */
#define CB_RUNNER_HELLO_TIMEOUT_MS 30000        /* runner must say hello by then */
#define CB_STREAM_CHUNK            65536        /* bytes read from a pipe at once */
#define CB_STREAM_FLUSH_MS         20           /* coalesce stdout/stderr this long */
#define CB_STREAM_FLUSH_BYTES      (256u << 10) /* ... or this many bytes */
#define CB_STREAM_FIRST_MS         5    /* first bytes after a quiet period wait this long */
#define CB_REPORT_LINE_MAX         1024 /* one launcher report line */

/* ---- defaults of kernel options (shown in --help) -------------------- */
#define CB_DEFAULT_MEMORY_MB     1024
#define CB_DEFAULT_PIDS          128
#define CB_DEFAULT_CPUS          1.0
#define CB_DEFAULT_DISK_MB       1024
#define CB_DEFAULT_OPEN_FILES    1024
#define CB_DEFAULT_TIMEOUT_S     60
#define CB_DEFAULT_MAX_OUTPUT_MB 64
#define CB_INTERRUPT_GRACE_MS    2000  /* SIGINT then kill after this */
#define CB_SANDBOX_UID           65534 /* unprivileged id when root */

#endif
