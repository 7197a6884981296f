/*
 * core.h - the kernel's state, shared by its three parts (after xeus's
 * kernel core):
 *
 *   server.c    sockets, heartbeat thread, signals, the zloop, iopub
 *               congestion, start-up and teardown;
 *   dispatch.c  one table from msg_type to handler, the shell queue and
 *               every request handler (execute, kernel_info, history, ...);
 *   relay.c     the session's callbacks: runner output and request ends
 *               turned into Jupyter messages with the right parent.
 *
 * Only these three files include it; everything else reaches the kernel
 * through kernel.h (cb_kernel_main) or not at all.
 */
#ifndef CB_CORE_H
#define CB_CORE_H

#include "isolate/cb_limits.h"
#include "kernel/auth.h"
#include "kernel/bounds.h"
#include "kernel/comms.h"
#include "kernel/conn.h"
#include "kernel/history.h"
#include "kernel/options.h"
#include "kernel/session.h"
#include "kernel/wire.h"

#include <czmq.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#define CB_RECENT_PARENTS 16   /* executes whose parent late output can still find */
#define CB_PARENT_POLL_MS 1000 /* how often the parent's life is checked */
#define CB_ZMQ_LINGER_MS  1000 /* let final replies leave on exit */
#define CB_BANNER_MAX     2048 /* bytes of kernel_info's banner */

typedef struct {
    cb_msg_t msg; /* the queued request */
    bool abort;   /* execute_request to be aborted (stop_on_error) */
} cb_queued_t;

typedef struct cb_kernel {
    cb_opts_t *opts; /* parsed command line (borrowed) */
    /* server */
    cb_conn_t conn;                   /* connection file */
    cb_auth_t *auth;                  /* HMAC + replay history */
    cb_wire_ctx_t wire;               /* session id, queued-bytes counters */
    zsock_t *sock[CB_CH_COUNT];       /* hb is used by the heartbeat thread only */
    pthread_t hb_thread;              /* heartbeat echo */
    bool hb_running;                  /* hb_thread was started */
    zsock_t *hb_stop_tx, *hb_stop_rx; /* inproc pair: a message ends the heartbeat thread */
    int sigfd;                        /* signalfd for INT, TERM, CHLD, HUP */
    zloop_t *loop;                    /* the one event loop */
    bool shell_read;                  /* shell is registered on the loop */
    pid_t parent_pid;                 /* JPY_PARENT_PID or our parent at start */
    bool exiting;                     /* leave the loop */
    bool exit_after_reply;            /* a cell called exit(): shut down after its reply */
    /* iopub congestion */
    bool congested;          /* ZMQ holds too much of iopub: the sandbox is paused */
    int64_t congested_since; /* when it started, for the stall rule */
    bool stalled;            /* congested too long: sandbox output is dropped */
    uint64_t stall_dropped;  /* messages dropped that way */
    int congestion_timer;    /* zloop timer id, -1 when none */
    /* the sandbox */
    char launcher_path[CB_PATH_MAX]; /* cellblock-launcher */
    char runner_path[CB_PATH_MAX];   /* runner.py */
    cb_session_cfg_t scfg;           /* the session's configuration */
    cb_session_t *session;           /* the driver */
    struct cb_artifacts *artifacts;  /* collector, NULL when disabled */
    char python_version[32];         /* before the runner's hello: from the interpreter's name */
    /* requests */
    cb_queued_t *queue;     /* ring of queued shell requests */
    size_t q_head, q_len;   /* ring position and length */
    cb_msg_t cur;           /* the shell request in flight */
    cb_req_kind_t cur_kind; /* its kind, CB_REQ_NONE when idle */
    bool ex_silent;         /* execute flags of cur */
    bool ex_store;          /* ... store_history */
    bool ex_stdin;          /* ... allow_stdin */
    bool ex_stop_on_error;  /* ... stop_on_error */
    bool ex_waiting_input;  /* an input_request is out to the client */
    int ex_shown;           /* execution count shown for this cell */
    char ex_started[32];    /* ISO time the cell started */
    bool ex_have_result;    /* an execute_result was published */
    int exec_count;         /* execution counter */
    json_t *last_parent;    /* header of the last execute (late output) */
    struct {
        json_int_t seq; /* the session's sequence number of an execute */
        json_t *header; /* its request header (owned) */
    } recent[CB_RECENT_PARENTS];
    size_t recent_next;    /* next slot of recent to reuse */
    cb_history_t *history; /* cells run */
    cb_comms_t *comms;     /* comms open between frontends and the sandbox */
} cb_kernel_t;

/* server.c */
void cb_server_publish(cb_kernel_t *k, const char *msg_type, const json_t *parent, json_t *content);
void cb_server_status(cb_kernel_t *k, const json_t *parent, const char *state);
void cb_server_reply(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *req, const char *type,
                     json_t *metadata, json_t *content);
/* Publishes a message that comes from the sandbox: dropped (and counted)
 * while iopub is stalled; pauses the session when ZMQ holds too much. */
void cb_server_publish_output(cb_kernel_t *k, const char *msg_type, const json_t *parent,
                              json_t *content);
/* The same with metadata (stolen, NULL = {}) and binary buffers after the
 * content (borrowed). */
void cb_server_publish_buffers(cb_kernel_t *k, const char *msg_type, const json_t *parent,
                               json_t *metadata, json_t *content, const cb_wire_buf_t *buffers,
                               size_t n_buffers);
/* Ends the kernel from inside a handler: the loop stops at its next turn. */
void cb_server_stop(cb_kernel_t *k);
/* Reads shell only when no request is in flight and iopub is not congested. */
void cb_server_sync_shell(cb_kernel_t *k);
/* Receives one verified message: 1 got one, 0 none waiting, -1 dropped.
 * A message too deep to read is answered with an error here (returns -1). */
int cb_server_recv(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *out);
/* Handles every control request waiting (until the kernel is exiting). */
void cb_server_serve_control(cb_kernel_t *k);

/* dispatch.c */
void cb_dispatch(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort);
/* Takes shell requests (queued first) while idle. */
void cb_dispatch_pump_shell(cb_kernel_t *k);
void cb_dispatch_pump_stdin(cb_kernel_t *k);
/* Replies to a request whose content could not be read (too deep). */
void cb_dispatch_refuse(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *m, const char *why);
/* Ends the shell request in flight (reply sent): idle, next request. */
void cb_dispatch_done(cb_kernel_t *k);
/* stop_on_error: marks what has arrived on shell by now for abort. */
void cb_dispatch_abort_queued(cb_kernel_t *k);
json_t *cb_dispatch_kernel_info(cb_kernel_t *k);

/* relay.c */
extern const cb_session_cbs_t cb_relay_callbacks;
/* Remembers the parent of the execute just handed to the session. */
void cb_relay_remember(cb_kernel_t *k, json_int_t seq, const json_t *header);
void cb_relay_forget_all(cb_kernel_t *k);

#endif
