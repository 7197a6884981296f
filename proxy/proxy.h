/*
 * proxy.h - the egress proxy's event loop: accept on the listeners the
 * launcher created inside the sandbox, read each request head, decide by the
 * allowlist, resolve (c-ares), connect (non-blocking), then relay bytes both
 * ways.  Connections accepted on a forward listener (a loopback pair of the
 * allowlist, netrules.h) go to the same address and port on the host.  Single-threaded, one poll(2) per step, every resource bounded by
 * the configuration below (docs/SECURITY.md "Network by allowlist").
 */
#ifndef CB_PROXY_PROXY_H
#define CB_PROXY_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/netproxy_limits.h"
#include "launcher/netrules.h"
#include "proxy/secrets.h"

typedef struct {
    cb_netrules_t rules;                /* what is allowed (copied) */
    int listen_fds[CB_PROXY_LISTENERS]; /* listening sockets (borrowed, non-blocking set here) */
    size_t n_listen;                    /* used entries */
    int fwd_fds[CB_PROXY_FORWARDS_MAX]; /* loopback pairs listened on inside (borrowed) */
    size_t n_fwd;                       /* used entries */
    long max_conns;                     /* concurrent connections */
    long max_total;                     /* connections per session */
    uint64_t max_bytes;                 /* bytes relayed per session (both directions) */
    long head_timeout_ms;               /* request head must arrive within */
    long resolve_timeout_ms;            /* name resolution */
    long connect_timeout_ms;            /* one connect attempt */
    long idle_timeout_ms;               /* tunnel without traffic */
    long tls_timeout_ms;                /* a TLS handshake (hosts with secrets) */
    const char *dns_servers;            /* "IP[:PORT],..." or NULL: /etc/resolv.conf */
    const cb_secrets_t *secrets;        /* --secret table (borrowed), NULL: no TLS termination */
    const char *upstream_ca;            /* CAs upstream servers are checked against, NULL: system */
    bool restarted;                     /* a restart: the sandbox trusts an earlier session CA */
    int ctl_fd;                         /* the launcher's control socket, -1 none */
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

/* Fills cfg with the defaults of netproxy_limits.h (no listeners, no rules). */
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
/* The session CA's certificate (PEM, borrowed) when secrets are set, else NULL. */
const char *cb_proxy_ca_pem(const cb_proxy_t *self, size_t *len);

#endif
