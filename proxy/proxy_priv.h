/*
 * proxy_priv.h - the egress proxy's state, shared by its files:
 *   proxy.c    the loop: accept, the poll set, deadlines, closing, errors
 *   resolve.c  c-ares: the host's /etc/hosts, then DNS, inside the loop
 *   route.c    a request head: parse, rule, addresses, connect, check the peer
 *   relay.c    bytes both ways within the buffers and the byte budget
 *   bump.c     TLS termination for hosts with secrets, and their requests
 *   ctl.c      the launcher's control socket: listeners, policy, per-host costs
 * Nothing else includes it.
 */
#ifndef CB_PROXY_PRIV_H
#define CB_PROXY_PRIV_H

#include <ares.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "isolate/log.h"
#include "isolate/util.h" /* cb_now_ms */
#include "proxy/body.h"
#include "proxy/http.h"
#include "proxy/proxy.h"
#include "proxy/tls.h"

#define CB_PX_ARES_SOCKS_MAX 16 /* sockets c-ares holds at once (ARES_GETSOCK_MAXNUM) */
#define CB_PX_ESTABLISHED                                                                          \
    "HTTP/1.1 200 Connection established\r\nProxy-Agent: cellblock-proxy\r\n\r\n"

typedef enum {
    CB_PX_HEAD,    /* a request head is being read (also between requests) */
    CB_PX_RESOLVE, /* its host is being resolved */
    CB_PX_CONNECT, /* connect(2) to a candidate address */
    CB_PX_TLS,     /* a host with secrets: TLS upstream, then with the sandbox (bump.c) */
    CB_PX_TUNNEL,  /* CONNECT: bytes both ways, unread */
    CB_PX_FORWARD, /* one request forwarded, its response relayed */
    CB_PX_REPLY,   /* an error reply being sent */
    CB_PX_LINGER   /* draining the sandbox side before close */
} cb_pstate_t;

typedef enum {
    CB_TLS_WAIT,  /* for a handshake slot */
    CB_TLS_UP,    /* the upstream handshake, verifying the server */
    CB_TLS_OK200, /* "200 Connection established" to the sandbox */
    CB_TLS_DOWN,  /* the sandbox's handshake, with our leaf */
} cb_tls_phase_t;

enum { CB_SIDE_SANDBOX = 0, CB_SIDE_UPSTREAM = 1 };

typedef struct {
    char *data;   /* CB_PROXY_BUF bytes */
    size_t off;   /* first byte not yet written */
    size_t ready; /* end of the bytes that may be written (framed); off <= ready <= len */
    size_t len;   /* end of the bytes held (after ready: the next message) */
} cb_pbuf_t;

typedef struct {
    uint64_t id;                                       /* serial, for the log */
    size_t slot;                                       /* index in the table */
    cb_pstate_t state;                                 /* see proxy.c */
    int cfd;                                           /* the sandbox side */
    int ufd;                                           /* the upstream, -1 before CONNECT */
    SSL *ssl[2];                                       /* TLS per side (bumped), else NULL */
    short want[2];                                     /* poll events TLS waits for per side */
    cb_tls_phase_t tls;                                /* CB_PX_TLS: where it is */
    bool hs_slot;                                      /* holds one of the handshake slots */
    bool bump;                                         /* TLS terminated: requests are read */
    cb_http_req_t req;                                 /* the request head being served */
    size_t head_seen;                                  /* bytes of the next head already seen */
    char *hout;                                        /* its head as sent (CB_PROXY_HOUT_MAX) */
    size_t hout_len, hout_off;                         /* its bytes, bytes sent */
    cb_body_t req_body;                                /* FORWARD: where the request ends */
    cb_secrets_scan_t body_scan;                       /* FORWARD: its body's placeholder window */
    cb_secrets_scan_t frame_scan;                      /* ...its chunked bytes' (exts, trailers) */
    cb_body_t resp_body;                               /* FORWARD: where the response ends */
    bool resp_head;                                    /* its final head is parsed */
    size_t resp_seen;                                  /* bytes of its next head already seen */
    bool resp_started;                                 /* bytes of it are ready for the sandbox */
    bool resp_done;                                    /* it is complete */
    bool close_after;                                  /* end the connection after it */
    uint64_t n_req;                                    /* requests served on this connection */
    bool forward;                                      /* accepted on a forward listener */
    char host[CB_PROXY_NAME_MAX + 1];                  /* normalised target host */
    bool is_ip;                                        /* host is an IP literal... */
    cb_ipaddr_t ip;                                    /* ...this one */
    uint16_t port;                                     /* the target's port */
    int rule;                                          /* the rule that allowed it, -1 */
    int hs;                                            /* its host's stats slot, -1 */
    bool trusted;                                      /* addresses named by the operator */
    struct sockaddr_storage addrs[CB_PROXY_ADDRS_MAX]; /* candidates, port set */
    size_t n_addrs;                                    /* used entries */
    size_t next_addr;                                  /* the one to try next */
    char refusal[CB_PROXY_REASON_MAX];                 /* why addresses were skipped */
    int last_err;                                      /* errno of the last connect */
    cb_pbuf_t c2u;                                     /* sandbox -> upstream */
    cb_pbuf_t u2c;                                     /* upstream -> sandbox */
    bool c_eof;                                        /* the sandbox side sent EOF */
    bool u_eof;                                        /* the upstream sent EOF */
    bool u_shut;                                       /* we sent EOF upstream */
    char reply[CB_PROXY_REPLY_MAX];                    /* an error reply */
    size_t reply_len, reply_off;                       /* its bytes, bytes sent */
    int64_t deadline;                                  /* state deadline (ms, monotonic) */
    int64_t started;                                   /* accept time */
    uint64_t up, down;                                 /* bytes relayed each way */
} cb_pconn_t;

typedef struct {
    int fd;    /* a c-ares socket */
    bool r, w; /* what it waits for */
} cb_pares_sock_t;

typedef enum {
    CB_PPF_LISTEN,   /* the proxy's own listener */
    CB_PPF_FORWARD,  /* a forward listener (a loopback pair) */
    CB_PPF_CLIENT,   /* a connection's sandbox side */
    CB_PPF_UPSTREAM, /* its upstream */
    CB_PPF_ARES,     /* a c-ares socket */
    CB_PPF_CTL       /* the launcher's control socket */
} cb_ppf_kind_t;

typedef struct {
    cb_ppf_kind_t kind; /* what this pollfd is */
    size_t idx;         /* listener, slot or c-ares index */
} cb_ppf_ref_t;

/* What one host (and port) cost, since the proxy started (ctl.c). */
typedef struct {
    char key[CB_PROXY_NAME_MAX + 16]; /* "host:port", "" = free */
    uint64_t conns;                   /* upstream connections made */
    uint64_t up, down;                /* bytes relayed each way */
    uint64_t refused;                 /* requests answered with an error */
} cb_phost_t;

struct cb_proxy {
    cb_proxy_cfg_t cfg;                                    /* copy */
    struct sockaddr_storage fwd_to[CB_PROXY_FORWARDS_MAX]; /* each forward listener's address */
    cb_pconn_t **slots;                                    /* max_conns entries */
    uint32_t *gens;                               /* per slot, bumped on close (stale callbacks) */
    size_t n_open;                                /* live connections */
    uint64_t next_id;                             /* next serial */
    ares_channel files;                           /* lookups "f": the host's /etc/hosts */
    ares_channel dns;                             /* lookups "b": DNS */
    bool ares_init;                               /* ares_library_init done */
    cb_pares_sock_t asocks[CB_PX_ARES_SOCKS_MAX]; /* c-ares sockets */
    size_t n_asocks;                              /* used entries */
    struct pollfd *pfds;                          /* poll set */
    cb_ppf_ref_t *refs;                           /* what each pollfd is */
    size_t pf_cap;                                /* entries of both */
    bool at_cap_logged;                           /* "connection limit" logged this episode */
    bool budget_logged;                           /* "byte budget" logged */
    double log_tokens;                            /* log rate limit */
    int64_t log_refill;                           /* last refill (ms) */
    cb_proxy_stats_t st;                          /* counters */
    cb_tls_t *tls;                                /* the session CA and contexts, NULL: none */
    size_t n_handshakes;                          /* TLS handshakes in flight */
    char *scratch;                                /* a head being rewritten (CB_PROXY_HOUT_MAX) */
    cb_phost_t hosts[CB_PROXY_HOSTS_MAX];         /* per-host costs; the last: all others */
};

/* Log through the rate limit of cb_px_log_ok. */
#define PX_LOG(p, lvl, ...)                                                                        \
    do {                                                                                           \
        if (cb_px_log_ok((p), (lvl))) CB_LOG_((lvl), false, __VA_ARGS__);                          \
    } while (0)

/* proxy.c */
bool cb_px_log_ok(cb_proxy_t *p, cb_log_level_t lvl);          /* within the log rate limit */
void cb_px_target(const cb_pconn_t *c, char *buf, size_t len); /* "host:port" for the log */
void cb_px_close_fd(int *fd);                                  /* closes, sets -1 */
void cb_px_close(cb_proxy_t *p, cb_pconn_t *c);                /* ends and frees c */
/* Adds listeners (borrowed; made non-blocking): the proxy's own and
 * forward ones.  0 ok, -1 with why. */
int cb_px_listeners(cb_proxy_t *p, const int *listen, size_t n_listen, const int *fwd, size_t n_fwd,
                    char *why, size_t why_len);
/* Counts and logs a refusal, then queues the error reply (c ends once sent). */
void cb_px_deny(cb_proxy_t *p, cb_pconn_t *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* resolve.c */
/* A c-ares channel: lookups "f" (hosts file) or "b" (DNS); watch: its
 * sockets join our poll set.  ARES_SUCCESS or a c-ares error. */
int cb_px_channel(cb_proxy_t *p, ares_channel *ch, char *lookups, bool watch);
/* Resolves c->host (state RESOLVE); the answer continues in cb_px_set_addrs. */
void cb_px_resolve(cb_proxy_t *p, cb_pconn_t *c);

/* route.c */
/* Reads from the sandbox side until a whole head is there, then routes it. */
void cb_px_on_head(cb_proxy_t *p, cb_pconn_t *c);
/* Parses the head at the start of what the sandbox sent (state HEAD) and
 * routes it; waits for more when it is not complete. */
void cb_px_next_head(cb_proxy_t *p, cb_pconn_t *c);
/* A connection accepted on a forward listener: to the same loopback address
 * and port on the host, if a rule still names it. */
void cb_px_forward(cb_proxy_t *p, cb_pconn_t *c, const struct sockaddr_storage *to);
/* Candidate addresses (trusted: named by the operator): keeps the allowed
 * ones and connects, or refuses. */
void cb_px_set_addrs(cb_proxy_t *p, cb_pconn_t *c, const cb_ipaddr_t *ips, size_t n, bool trusted);
/* Connects to the next candidate, or refuses with the last error. */
void cb_px_try_connect(cb_proxy_t *p, cb_pconn_t *c);
/* The upstream socket became writable: check whom it reached, then relay. */
void cb_px_connected(cb_proxy_t *p, cb_pconn_t *c);

/* relay.c */
/* Allocates b's CB_PROXY_BUF bytes (once) and empties it.  0 ok, -1 ENOMEM. */
int cb_px_buf_alloc(cb_pbuf_t *b);
/* Reads from side (CB_SIDE_*) into its buffer within the session's byte
 * budget, through TLS when the side has it.  1 progress, 0 nothing now, -1
 * EOF, -2 error or budget exhausted. */
int cb_px_pull(cb_proxy_t *p, cb_pconn_t *c, int side);
/* Writes n bytes of s to side: how many, 0 not now, -2 error. */
long cb_px_send(cb_pconn_t *c, int side, const char *s, size_t n);
/* Closes the upstream (its TLS first). */
void cb_px_close_up(cb_pconn_t *c);
/* The upstream is connected and checked: start relaying c's request. */
void cb_px_start(cb_proxy_t *p, cb_pconn_t *c);
/* Moves bytes both ways for the events seen (crev: sandbox side, urev:
 * upstream); may close c. */
void cb_px_relay(cb_proxy_t *p, cb_pconn_t *c, short crev, short urev);

/* bump.c */
/* After the upstream is connected for a CONNECT to a host with secrets:
 * the TLS handshakes, then requests read one by one. */
void cb_px_bump_begin(cb_proxy_t *p, cb_pconn_t *c);
/* Events on either side while in CB_PX_TLS. */
void cb_px_bump_step(cb_proxy_t *p, cb_pconn_t *c);
/* A connection waiting for a handshake slot gets one if there is one. */
void cb_px_bump_retry(cb_proxy_t *p, cb_pconn_t *c);
/* A head was parsed on a bumped connection (at the start of c2u): checked
 * against the CONNECT target, secrets put in, forwarded. */
void cb_px_bump_request(cb_proxy_t *p, cb_pconn_t *c);
/* The head of a plain request (or CONNECT) through the secrets: the
 * placeholders of secrets bound to c->host are put in (FORWARD), any other
 * refuses it.  in/n: the head as it would be sent; written to c->hout.
 * 0 ok, -1 refused (c is answered). */
int cb_px_secrets_head(cb_proxy_t *p, cb_pconn_t *c, const char *in, size_t n);
/* The request (what: "request" or "request's body") carries the placeholder
 * of x, a secret not bound to c->host: refused with a 403 while no response
 * has begun (the upstream, if it got the head, is closed: a request cut
 * short, never the placeholder), else the connection is closed both ways;
 * logged either way. */
void cb_px_foreign(cb_proxy_t *p, cb_pconn_t *c, const cb_secret_t *x, const char *what);

/* ctl.c */
/* The control socket is readable: one request, answered. */
void cb_px_ctl(cb_proxy_t *p);
/* The stats slot of host:port (the last slot once the table is full). */
int cb_px_host_slot(cb_proxy_t *p, const char *host, uint16_t port);

#endif
