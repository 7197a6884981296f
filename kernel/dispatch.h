/*
 * dispatch.h - Jupyter requests: the table from msg_type to handler, the
 * shell queue, and what a handler needs to answer.
 *
 * A new request type is a handler in a file of its own plus one row of
 * s_table in dispatch.c:
 *
 *     // kernel/debug.h
 *     void cb_debug_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort);
 *     // kernel/debug.c
 *     void cb_debug_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
 *         (void) abort;
 *         cb_dispatch_answer(k, ch, m, json_pack("{s:s}", "status", "ok"));
 *     }
 *     // dispatch.c's table
 *     {"debug_request", CB_ON_CONTROL, cb_debug_request},
 *
 * docs/ARCHITECTURE.md says more (handlers that wait for the sandbox).
 */
#ifndef CB_DISPATCH_H
#define CB_DISPATCH_H

#include "kernel/core.h"

/* Channels a table row accepts its type on. */
#define CB_ON_SHELL   (1u << CB_CH_SHELL)
#define CB_ON_CONTROL (1u << CB_CH_CONTROL)

/* A handler: m (owned by the caller; a handler may take it by moving it out
 * and zeroing *m) arrived on ch.  abort: an execute_request stop_on_error
 * aborted.  A handler that answers at once publishes busy, replies, then
 * idle (cb_dispatch_answer does the three). */
typedef void cb_handler_fn(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort);

/* Routes m by the table (unknown types: busy/idle, no reply). */
void cb_dispatch(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort);
/* Handles what waits on ch: shell requests (queued first) while idle,
 * every control request, stdin's input replies. */
void cb_dispatch_serve(cb_kernel_t *k, cb_channel_t ch);
/* Ends the shell request in flight (reply sent): idle, next request. */
void cb_dispatch_done(cb_kernel_t *k);
/* stop_on_error: marks what has arrived on shell by now for abort. */
void cb_dispatch_abort_queued(cb_kernel_t *k);
/* Shuts the kernel down: no more requests, the loop ends. */
void cb_dispatch_stop(cb_kernel_t *k);
/* Tells the server whether shell is to be read (idle and not exiting). */
void cb_dispatch_sync_shell(cb_kernel_t *k);

/* Publishes status execution_state state with parent (borrowed). */
void cb_dispatch_status(cb_kernel_t *k, const json_t *parent, const char *state);
/* busy, then the reply to m ("x_request" -> "x_reply"; content stolen), then idle. */
void cb_dispatch_answer(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *m, json_t *content);
/* Makes m the request in flight (taking it) and hands frame (stolen) to the
 * session; its end comes through the session's on_end.  When the sandbox
 * cannot take it, it ends at once with the cause. */
void cb_dispatch_to_session(cb_kernel_t *k, cb_msg_t *m, cb_req_kind_t kind, json_t *frame);
/* kernel_info_reply's content (a new reference). */
json_t *cb_dispatch_kernel_info(cb_kernel_t *k);

#endif
