/*
 * relay.h - the session's callbacks, turned into Jupyter messages (the top
 * of the kernel's layers, above dispatch.c and the session driver).
 */
#ifndef CB_RELAY_H
#define CB_RELAY_H

#include "kernel/core.h"

/* The session's callbacks (ud: the cb_kernel_t). */
extern const cb_session_cbs_t cb_relay_callbacks;
/* What dispatch calls up into relay (k->up). */
extern const cb_upcalls_t cb_relay_upcalls;
/* Forgets the parents late output could still find. */
void cb_relay_forget_all(cb_kernel_t *k);

#endif
