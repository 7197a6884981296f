/*
 * debug.h - the Jupyter debug protocol (debug_request / debug_reply on
 * control, debug_event on iopub), served through the sandbox.
 *
 * Frontends (JupyterLab's debugger panel, VS Code) send Debug Adapter
 * Protocol requests as debug_request content.  The kernel answers what it
 * can alone, from its own mirror of the debugger's state: debugInfo (also
 * while the sandbox is busy, stopped at a breakpoint, restarting or gone),
 * configurationDone (however often it comes); it completes DAP's handshake
 * itself during attach (waits for the `initialized` event, sends
 * configurationDone, then answers attach).  Everything else goes to the
 * runner's debugger (runner/cb_debug.py) on the debugger's channel, under
 * the kernel's own sequence numbers, kept in a bounded table of outstanding
 * requests; responses may come in any order, and one whose request_seq is
 * not in the table is dropped.  Every request gets its reply (a failure
 * that says why when the sandbox cannot answer, or does not in time) and an
 * iopub busy/idle pair whose parent is the request.  Events become
 * debug_event, paced as sandbox output.  When the sandbox ends, the table
 * is answered and the mirror reset.
 *
 * The module reaches the rest of the kernel only through cb_debug_io_t
 * (dispatch.c and relay.c hold the glue).
 */
#ifndef CB_DEBUG_H
#define CB_DEBUG_H

#include "kernel/debug_dap.h"
#include "kernel/session.h"
#include "kernel/wire.h"

#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>

typedef struct cb_debug_io {
    /* Sends debug_reply to req (content stolen). */
    void (*reply)(void *ud, const cb_msg_t *req, json_t *content);
    /* Publishes iopub status `state` with parent (borrowed). */
    void (*status)(void *ud, const json_t *parent, const char *state);
    /* Publishes a debug_event that comes from the sandbox (content stolen;
     * paced and droppable like sandbox output). */
    void (*event)(void *ud, const json_t *parent, json_t *content);
} cb_debug_io_t;

typedef struct cb_debug cb_debug_t;

/* NULL on out of memory.  session, io and loop are borrowed. */
cb_debug_t *cb_debug_new(cb_session_t *session, const cb_debug_io_t *io, void *ud, zloop_t *loop);
/* Answers what is outstanding (unless the kernel is going away) and frees; nulls *self_p. */
void cb_debug_destroy(cb_debug_t **self_p);
/* A debug_request from control: m is taken (left empty). */
void cb_debug_request(cb_debug_t *d, cb_msg_t *m);
/* What the session's debugger channel delivered (cbs.on_debug). */
void cb_debug_on_message(cb_debug_t *d, const cb_dap_msg_t *m);
/* The sandbox said hello (cbs.on_ready): the debugInfo requests that waited
 * for its cell prefix are answered. */
void cb_debug_ready(cb_debug_t *d);
/* Whether the kernel offers the debugger (kernel_info): false once a
 * sandbox said it cannot run it (no debugpy in the sandbox's Python). */
bool cb_debug_available(const cb_debug_t *d);
/* Checkpoints (docs/SNAPSHOTS.md): NULL when a checkpoint or pause
 * (rollback false), or a rollback (true), may go ahead, else why not (the
 * debugger has run in this runner: debugpy's threads are not in a fork; a
 * request is outstanding; a rollback under an attached debugger). */
const char *cb_debug_snapshot_why(const cb_debug_t *d, bool rollback);
/* A rollback replaced the runner: what was outstanding is answered, the
 * mirror forgotten; the channel stays. */
void cb_debug_runner_replaced(cb_debug_t *d);

#endif
