/*
 * proxy.h - the egress proxy's event loop: accept on the listeners the
 * launcher created inside the sandbox, read one request head, decide by the
 * allowlist, resolve (c-ares), connect (non-blocking), then relay bytes both
 * ways.  Single-threaded, one poll(2) per step, every resource bounded by
 * the configuration below (docs/SECURITY.md "Network by allowlist").
 */
#ifndef CB_PROXY_PROXY_H
#define CB_PROXY_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/netproxy_limits.h"
#include "launcher/netrules.h"

typedef struct {
    cb_netrules_t rules;                /* what is allowed (copied) */
    int listen_fds[CB_PROXY_LISTENERS]; /* listening sockets (borrowed, non-blocking set here) */
    size_t n_listen;                    /* used entries */
    long max_conns;                     /* concurrent connections */
    long max_total;                     /* connections per session */
    uint64_t max_bytes;                 /* bytes relayed per session (both directions) */
    long head_timeout_ms;               /* request head must arrive within */
    long resolve_timeout_ms;            /* name resolution */
    long connect_timeout_ms;            /* one connect attempt */
    long idle_timeout_ms;               /* tunnel without traffic */
    const char *dns_servers;            /* "IP[:PORT],..." or NULL: /etc/resolv.conf */
} cb_proxy_cfg_t;

typedef struct {
    uint64_t accepted;       /* connections accepted */
    uint64_t allowed;        /* requests that reached an upstream */
    uint64_t denied;         /* refused by policy (403) */
    uint64_t failed;         /* malformed, unresolvable, unreachable, timed out */
    uint64_t bytes;          /* relayed, both directions */
    uint64_t log_suppressed; /* log lines dropped by the rate limit */
    size_t open;             /* connections open now */
} cb_proxy_stats_t;

typedef struct cb_proxy cb_proxy_t;

/* Fills cfg with the defaults of proxy_limits.h (no listeners, no rules). */
void cb_proxy_cfg_default(cb_proxy_cfg_t *cfg);
/* Sets up c-ares and the tables.  NULL on failure, with why. */
cb_proxy_t *cb_proxy_new(const cb_proxy_cfg_t *cfg, char *why, size_t why_len);
/* Closes every connection; the listeners stay the caller's.  Nulls *p. */
void cb_proxy_destroy(cb_proxy_t **self_p);
/* One poll and everything it made ready, waiting at most max_wait_ms
 * (-1: until the next deadline).  0 ok, -1 poll failed (errno). */
int cb_proxy_step(cb_proxy_t *self, int max_wait_ms);
/* Counters so far. */
void cb_proxy_stats(const cb_proxy_t *self, cb_proxy_stats_t *out);

#endif
