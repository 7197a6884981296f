/*
 * core.h - the kernel's state above the server (after xeus's kernel core).
 * The kernel is four layers, each calling only those below it:
 *
 *   kernel.c    the wiring: start-up and teardown, the server's callbacks
 *   relay.c     the session's callbacks: runner output and request ends
 *               turned into Jupyter messages with the right parent
 *   dispatch.c  one table from msg_type to handler, the shell queue and
 *               the request handlers (execute, kernel_info, history, ...)
 *   server.c    sockets, heartbeat, signals, the zloop, verified messages
 *               in and out, iopub pacing; no message types, no session
 *
 * Where a lower layer must reach a higher one it calls a function pointer
 * registered at start: the server's cb_server_cbs_t, the session's
 * cb_session_cbs_t, and cb_upcalls_t below (dispatch -> relay).  This
 * state is shared by dispatch.c, relay.c, kernel.c and the handler files
 * that dispatch's table names; the server never sees it.
 */
#ifndef CB_CORE_H
#define CB_CORE_H

#include "isolate/cb_limits.h"
#include "kernel/bounds.h"
#include "kernel/comms.h"
#include "kernel/conn.h"
#include "kernel/history.h"
#include "kernel/options.h"
#include "kernel/server.h"
#include "kernel/session.h"
#include "kernel/snapshot.h"
#include "kernel/wire.h"

#include <jansson.h>
#include <stdbool.h>

#define CB_RECENT_PARENTS 16   /* executes whose parent late output can still find */
#define CB_BANNER_MAX     2048 /* bytes of kernel_info's banner */

typedef struct cb_kernel cb_kernel_t;

typedef struct {
    cb_msg_t msg; /* the queued request */
    bool abort;   /* execute_request to be aborted (stop_on_error) */
} cb_queued_t;

/* What dispatch calls in the layer above it (relay.c), registered at start
 * by kernel.c, so dispatch never includes relay.h. */
typedef struct {
    /* The request in flight went to the session as seq (execute, comm). */
    void (*sent)(cb_kernel_t *k, json_int_t seq, const json_t *header);
    /* The request in flight ends without the session (it could not take it,
     * or the request could not be read): end it as a session end would. */
    void (*end)(cb_kernel_t *k, const cb_req_end_t *e);
} cb_upcalls_t;

struct cb_kernel {
    const cb_opts_t *opts;  /* parsed command line (borrowed) */
    cb_server_t *srv;       /* sockets and loop */
    const cb_upcalls_t *up; /* relay's entries for dispatch */
    int ports[CB_CH_COUNT]; /* the connection file's ports (connect_reply) */
    bool exiting;           /* shutting down: take no more requests */
    bool exit_after_reply;  /* a cell called exit(): shut down after its reply */
    /* the sandbox */
    char launcher_path[CB_PATH_MAX]; /* cellblock-launcher */
    char runner_path[CB_PATH_MAX];   /* runner.py */
    cb_session_cfg_t scfg;           /* the session's configuration */
    cb_session_t *session;           /* the driver */
    struct cb_artifacts *artifacts;  /* collector, NULL when disabled */
    char python_version[32];         /* before the runner's hello: from the interpreter's name */
    /* requests (dispatch.c) */
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
    /* parents of late output (relay.c) */
    struct {
        json_int_t seq; /* the session's sequence number of an execute */
        json_t *header; /* its request header (owned) */
    } recent[CB_RECENT_PARENTS];
    size_t recent_next;    /* next slot of recent to reuse */
    cb_history_t *history;    /* cells run */
    cb_comms_t *comms;        /* comms open between frontends and the sandbox */
    cb_snapshots_t *snaps;    /* checkpoints in place (snapshot.c) */
    struct cb_debug *debug;   /* the debugger (debug.c, glue in debug_kernel.c) */
    struct cb_policy *policy; /* network policy in force, the cells' costs (policy.c) */
};

#endif
