/*
 * debug_kernel.c - the debugger's glue (see debug_kernel.h): debug.c knows
 * only its cb_debug_io_t; here those are the server's sockets and
 * dispatch's status messages.
 */
#include "kernel/debug_kernel.h"

#include "kernel/debug.h"
#include "kernel/dispatch.h"

static void s_reply(void *ud, const cb_msg_t *req, json_t *content) {
    cb_kernel_t *k = ud;
    cb_server_reply(k->srv, CB_CH_CONTROL, req, "debug_reply", NULL, content);
}

static void s_status(void *ud, const json_t *parent, const char *state) {
    cb_dispatch_status(ud, parent, state);
}

/* events come from the sandbox: paced and droppable as its other output */
static void s_event(void *ud, const json_t *parent, json_t *content) {
    cb_kernel_t *k = ud;
    cb_server_publish_output(k->srv, "debug_event", parent, NULL, content, NULL, 0);
}

static const cb_debug_io_t s_io = {s_reply, s_status, s_event};

int cb_debug_kernel_init(cb_kernel_t *k) {
    k->debug = cb_debug_new(k->session, &s_io, k, cb_server_loop(k->srv));
    return k->debug ? 0 : -1;
}

void cb_debug_kernel_fini(cb_kernel_t *k) { cb_debug_destroy(&k->debug); }

void cb_debug_kernel_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    if (k->debug) {
        cb_debug_request(k->debug, m);
        return;
    }
    cb_dispatch_answer(k, ch, m,
                       json_pack("{s:s, s:b, s:s}", "type", "response", "success", 0, "message",
                                 "the kernel's debugger could not be set up"));
}

void cb_debug_kernel_on_message(void *ud, const cb_dap_msg_t *m) {
    cb_kernel_t *k = ud;
    if (k->debug) cb_debug_on_message(k->debug, m);
}

void cb_debug_kernel_on_ready(void *ud) {
    cb_kernel_t *k = ud;
    if (k->debug) cb_debug_ready(k->debug);
}

bool cb_debug_kernel_available(const cb_kernel_t *k) {
    return k->debug && cb_debug_available(k->debug);
}
