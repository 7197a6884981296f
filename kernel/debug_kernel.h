/*
 * debug_kernel.h - the debugger (debug.h) in the kernel's layers: the
 * debug_request handler of dispatch's table, the session's on_debug for
 * relay's callbacks, and the debugger's way to the sockets.
 */
#ifndef CB_DEBUG_KERNEL_H
#define CB_DEBUG_KERNEL_H

#include "kernel/core.h"
#include "kernel/debug_dap.h"

/* Makes k->debug (after the session).  0 ok, -1 out of memory. */
int cb_debug_kernel_init(cb_kernel_t *k);
/* Frees it (idempotent). */
void cb_debug_kernel_fini(cb_kernel_t *k);
/* dispatch's handler of debug_request (control). */
void cb_debug_kernel_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort);
/* The session's on_debug (ud: the cb_kernel_t). */
void cb_debug_kernel_on_message(void *ud, const cb_dap_msg_t *m);
/* The session's on_ready (ud: the cb_kernel_t). */
void cb_debug_kernel_on_ready(void *ud);
/* kernel_info's `debugger`. */
bool cb_debug_kernel_available(const cb_kernel_t *k);

#endif
