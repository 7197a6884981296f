/*
 * net.h - the sandbox's network namespace: loopback only.
 */
#ifndef CB_NET_H
#define CB_NET_H

/* Async-signal-safe: brings "lo" up in the current network namespace.
 * 0 ok, -1 errno. */
int cb_net_lo_up(void);

#endif
