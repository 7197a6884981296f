/*
 * bounds.h - every bound of the kernel's two protocols: the Jupyter wire
 * (clients) and the runner's frames and pipes (the sandbox), with the
 * budgets and rates that cap what one session's sandbox can make the
 * kernel hold or do.  docs/SECURITY.md lists them with their defaults.
 * Sizes are in bytes unless the name says otherwise.
 */
#ifndef CB_KERNEL_BOUNDS_H
#define CB_KERNEL_BOUNDS_H

/* ---- Jupyter wire (clients) ------------------------------------------------ */
#define CB_WIRE_DELIM           "<IDS|MSG>"  /* identity/message delimiter */
#define CB_WIRE_MAX_IDENTS      1024         /* routing identities (ROUTER proxy chains) */
#define CB_WIRE_MAX_IDENT_BYTES 1024         /* bytes of one identity frame */
#define CB_WIRE_MAX_BUFFERS     64           /* binary buffers after content */
#define CB_WIRE_MAX_FRAME_BYTES (64u << 20)  /* one frame (also ZMQ_MAXMSGSIZE) */
#define CB_WIRE_MAX_MSG_BYTES   (128u << 20) /* a whole multipart message */
#define CB_WIRE_SIG_HEX_LEN     64           /* hmac-sha256 hex digest */
#define CB_REPLAY_HISTORY       65536        /* signatures remembered */
#define CB_SHELL_QUEUE_MAX      4096         /* shell requests held while aborting */
#define CB_JSON_DEPTH_MAX       64           /* nesting of any JSON we accept, either side */
/* iopub pacing (server.c; docs/SECURITY.md): a queue per subscriber, the
 * sandbox paced by the slowest reader, subscribers that read nothing left
 * behind when there are others, a cap on what ZMQ holds in all. */
#define CB_IOPUB_SUB_HWM        64          /* ZMQ_SNDHWM: messages queued per subscriber */
#define CB_IOPUB_LAG_MSGS       16          /* the slowest reader this far behind: pause */
#define CB_IOPUB_LAG_BYTES      (4u << 20)  /* ... or this many bytes behind */
#define CB_IOPUB_STUCK_MS       1000        /* paused, nothing read: go on without them */
#define CB_IOPUB_SUBS_MAX       1000000     /* subscribers counted (saturates) */
#define CB_IOPUB_INFLIGHT_MSGS  4096        /* iopub messages ZMQ holds that pause the sandbox */
#define CB_IOPUB_INFLIGHT_BYTES (96u << 20) /* iopub bytes ZMQ holds that pause the sandbox */
#define CB_IOPUB_STALL_MS       10000       /* nothing read, or over the cap: drop sandbox output */
#define CB_CONGESTION_POLL_MS   2           /* recheck of a congested iopub */
#define CB_COMMS_MAX            4096        /* open comms a session tracks (comm_info) */
#define CB_COMM_ID_MAX          128         /* bytes of a comm_id */
#define CB_COMM_TARGET_MAX      256         /* bytes of a target_name */

/* ---- history ---------------------------------------------------------------- */
#define CB_HISTORY_MAX_ENTRIES 100000      /* cells remembered */
#define CB_HISTORY_MAX_BYTES   (32u << 20) /* code + outputs remembered, oldest go first */
#define CB_HISTORY_OUTPUT_MAX  (64u << 10) /* text/plain of one result remembered */

/* ---- runner frames (fd 3) ------------------------------------------------------ */
#define CB_RUNNER_PROTOCOL_VERSION 2           /* docs/RUNNER_PROTOCOL.md */
#define CB_RUNNER_FRAME_HDR        4           /* big-endian u32 length prefix */
#define CB_FRAME_TEXT_MAX          128         /* a frame made from a format (cb_frame_format) */
#define CB_RUNNER_FRAME_MAX        (8u << 20)  /* largest frame either way */
#define CB_RUNNER_FRAME_NODES_MAX  100000      /* JSON values + keys in one frame */
#define CB_FRAME_SMALL_MAX         (4u << 10)  /* hello, clear_output, bad_request */
#define CB_FRAME_INPUT_MAX         (64u << 10) /* input_request (its prompt) */
#define CB_FRAME_META_MAX          (64u << 10) /* metadata of a display or result */
#define CB_FRAME_TRANSIENT_MAX     (4u << 10)  /* transient of a display */
#define CB_FRAME_REPLY_MAX         (4u << 20)  /* done, complete/inspect replies, error */
#define CB_FRAME_IN_CHUNK          65536       /* event bytes read per read(2) */
#define CB_FRAME_IN_KEEP           (4 * CB_FRAME_IN_CHUNK) /* an emptied input buffer over this is freed */
#define CB_RUNNER_HELLO_TIMEOUT_MS 30000       /* runner must say hello by then */
#define CB_RUNNER_WAIT_MAX_MS      600000      /* ... plus what a "waiting MS" report asks */
#define CB_ASSIST_TIMEOUT_MS       10000       /* complete/inspect/is_complete answer by then */
#define CB_ACK_RECHECK_MS          1           /* an unread ack: look again after this */
#define CB_ACK_BACKOFF_MAX         7           /* ... doubling up to 128 ms */

/* ---- runner stdout/stderr (fd 1/2) ------------------------------------------- */
#define CB_STREAM_CHUNK       65536        /* bytes read from a pipe at once */
#define CB_STREAM_FLUSH_MS    20           /* coalesce stdout/stderr this long */
#define CB_STREAM_FLUSH_BYTES (256u << 10) /* ... or this many bytes */
#define CB_STREAM_FIRST_MS    5            /* first bytes after a quiet period wait this long */
#define CB_PIPE_READ_ROUNDS   8            /* chunks read per wake-up */
#define CB_PIPE_DRAIN_ROUNDS  17           /* before a frame: a full pipe (1 MiB max) + 1 */

/* ---- what one session's sandbox may cost the kernel ------------------------------ */
#define CB_SESSION_FRAME_RATE    5000         /* frames per second */
#define CB_SESSION_FRAME_BURST   1000         /* ... taken at once */
#define CB_SESSION_BYTE_RATE     (64u << 20)  /* bytes per second, frames and pipes */
#define CB_SESSION_BYTE_BURST    (16u << 20)  /* ... taken at once */
#define CB_SESSION_IDLE_OUTPUT   (1u << 20)   /* output between requests, per idle period */
#define CB_SESSION_OUTPUT_MAX    (4ull << 30) /* output over a sandbox's whole life */
#define CB_SESSION_START_TRIES   3            /* failed starts in a row before giving up */
#define CB_SESSION_BACKOFF_MS    500          /* first retry after a failed start (doubles) */
#define CB_SESSION_RETRY_IDLE_MS 30000 /* after giving up: one new try per cell, this apart */
#define CB_SESSION_REAP_MS       2000  /* wait this long for the sandbox to go at exit */
#define CB_NOTICE_MAX            512   /* one notice to the user */

/* ---- the debugger's channel (fd 4 of the runner; kernel/debug*.c) ----------------- */
#define CB_DAP_FRAME_MAX          (8u << 20)  /* one DAP message either way */
#define CB_DAP_EVENT_MAX          (1u << 20)  /* one event from the runner */
#define CB_DAP_OUT_MAX            (16u << 20) /* requests queued for the runner */
#define CB_DAP_DRAIN_MAX          (4u << 20)  /* a replaced runner's unread bytes, discarded */
#define CB_DEBUG_PENDING_MAX      64          /* debug requests waiting for the runner */
#define CB_DEBUG_REPLY_TIMEOUT_MS 30000       /* the runner answers a debug request by then */
#define CB_DEBUG_START_TIMEOUT_MS 180000      /* ... initialize (debugpy loads; a micro-VM boots) */
#define CB_DEBUG_INFO_WAIT_MS     CB_RUNNER_HELLO_TIMEOUT_MS /* debugInfo waits for a starting sandbox's hello */
#define CB_DEBUG_SOURCES_MAX      256         /* files with breakpoints in debugInfo's mirror */
#define CB_DEBUG_BREAKPOINTS_MAX  (1u << 20)  /* bytes of the breakpoints mirrored */
#define CB_DEBUG_STOPPED_MAX      64          /* stopped threads mirrored */
#define CB_DEBUG_HOLD_MAX_MS      3600000     /* a cell's --timeout paused at breakpoints, at most */
#define CB_DEBUG_HASH_SEED        3339675911u /* 0xC70F6907: ipykernel's murmur2 seed */
#define CB_CELL_PREFIX_MAX        256         /* bytes of the cells' file prefix (hello) */

#endif
