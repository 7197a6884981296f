/*
 * proxy.c - the egress proxy's connections, from accept to close.
 *
 *   HEAD ──parse──▶ route ──rule?──no──▶ REPLY 403 ─▶ LINGER ─▶ closed
 *                      │ yes
 *                      ├─ IP literal / --network-resolve pin ─┐ (trusted)
 *                      ├─ host's /etc/hosts (c-ares "f") ─────┤ (trusted)
 *                      └─ DNS (c-ares "b") ───────────────────┤ (special addresses refused)
 *                                                             ▼
 *                                  CONNECT (non-blocking, next address on failure)
 *                                       │ getpeername == the checked address
 *                                       ▼
 *                                    TUNNEL ◀──▶ relay both ways, byte budget, idle timeout
 *
 * Every address is checked immediately before connect(2), the one we
 * actually reach is checked again afterwards, and resolution happens here,
 * never in the sandbox, so a name whose DNS answer changes (rebinding)
 * cannot lead to an address the checks refuse.  c-ares runs in this loop
 * (its sockets are polled with ours; ARES_OPT_SOCK_STATE_CB), so there is
 * no thread and a slow resolver stalls nothing but the request waiting for
 * it.  The relay has one buffer per direction; a side whose buffer is full
 * is simply not read (backpressure), so memory per connection is fixed.
 */
#include "proxy/proxy.h"

#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "isolate/log.h"
#include "proxy/http.h"
#include "isolate/util.h"

#define S_ARES_SOCKS_MAX 16 /* sockets c-ares holds at once (ARES_GETSOCK_MAXNUM) */
#define S_ESTABLISHED    "HTTP/1.1 200 Connection established\r\nProxy-Agent: cellblock-proxy\r\n\r\n"

typedef enum { S_HEAD, S_RESOLVE, S_CONNECT, S_TUNNEL, S_REPLY, S_LINGER } s_state_t;

typedef struct {
    char *data; /* CB_PROXY_BUF bytes, allocated when the tunnel opens */
    size_t off; /* first byte not yet written */
    size_t len; /* end of the bytes held */
} s_buf_t;

typedef struct {
    uint64_t id;                                       /* serial, for the log */
    size_t slot;                                       /* index in the table */
    s_state_t state;                                   /* see the diagram */
    int cfd;                                           /* the sandbox side */
    int ufd;                                           /* the upstream, -1 before CONNECT */
    char head[CB_PROXY_HEAD_MAX + 1];                  /* request head (NUL after the bytes) */
    size_t head_len;                                   /* bytes in head */
    cb_http_req_t req;                                 /* the parsed head */
    char host[CB_PROXY_NAME_MAX + 1];                  /* normalised target host */
    int rule;                                          /* the rule that allowed it, -1 */
    bool trusted;                                      /* addresses named by the operator */
    struct sockaddr_storage addrs[CB_PROXY_ADDRS_MAX]; /* candidates, port set */
    size_t n_addrs;                                    /* used entries */
    size_t next_addr;                                  /* the one to try next */
    char refusal[CB_PROXY_REASON_MAX];                 /* why addresses were skipped */
    int last_err;                                      /* errno of the last connect */
    s_buf_t c2u;                                       /* sandbox -> upstream */
    s_buf_t u2c;                                       /* upstream -> sandbox */
    bool c_eof;                                        /* the sandbox side sent EOF */
    bool u_eof;                                        /* the upstream sent EOF */
    bool u_shut;                                       /* we sent EOF upstream */
    char reply[CB_PROXY_REPLY_MAX];                    /* an error reply */
    size_t reply_len, reply_off;                       /* its bytes, bytes sent */
    int64_t deadline;                                  /* state deadline (ms, monotonic) */
    int64_t started;                                   /* accept time */
    uint64_t up, down;                                 /* bytes relayed each way */
} s_conn_t;

typedef struct {
    int fd;    /* a c-ares socket */
    bool r, w; /* what it waits for */
} s_ares_sock_t;

typedef enum { S_PF_LISTEN, S_PF_CLIENT, S_PF_UPSTREAM, S_PF_ARES } s_pf_kind_t;

typedef struct {
    s_pf_kind_t kind; /* what this pollfd is */
    size_t idx;       /* listener, slot or c-ares index */
} s_pf_ref_t;

struct cb_proxy {
    cb_proxy_cfg_t cfg;                     /* copy */
    s_conn_t **slots;                       /* max_conns entries */
    uint32_t *gens;                         /* per slot, bumped on close (stale callbacks) */
    size_t n_open;                          /* live connections */
    uint64_t next_id;                       /* next serial */
    ares_channel files;                     /* lookups "f": the host's /etc/hosts */
    ares_channel dns;                       /* lookups "b": DNS */
    bool ares_init;                         /* ares_library_init done */
    s_ares_sock_t asocks[S_ARES_SOCKS_MAX]; /* c-ares sockets */
    size_t n_asocks;                        /* used entries */
    struct pollfd *pfds;                    /* poll set */
    s_pf_ref_t *refs;                       /* what each pollfd is */
    size_t pf_cap;                          /* entries of both */
    bool at_cap_logged;                     /* "connection limit" logged this episode */
    bool budget_logged;                     /* "byte budget" logged */
    double log_tokens;                      /* log rate limit */
    int64_t log_refill;                     /* last refill (ms) */
    cb_proxy_stats_t st;                    /* counters */
};

/* ---- time and logging -------------------------------------------------- */

static int64_t s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Token bucket: a sandbox that makes the proxy refuse in a loop must not
 * flood the kernel's log.  Suppressed lines are counted and reported. */
static bool s_log_ok(cb_proxy_t *p, cb_log_level_t lvl) {
    if (lvl < cb_log_threshold) return false;
    int64_t now = s_now();
    p->log_tokens += (double) (now - p->log_refill) * CB_PROXY_LOG_PER_S / 1000.0;
    p->log_refill = now;
    if (p->log_tokens > CB_PROXY_LOG_BURST) p->log_tokens = CB_PROXY_LOG_BURST;
    if (p->log_tokens < 1.0) {
        p->st.log_suppressed++;
        return false;
    }
    p->log_tokens -= 1.0;
    if (p->st.log_suppressed > 0 && p->log_tokens >= 1.0) {
        p->log_tokens -= 1.0;
        LOG_W("proxy: %llu log lines suppressed (rate limit)",
              (unsigned long long) p->st.log_suppressed);
        p->st.log_suppressed = 0;
    }
    return true;
}

#define PX_LOG(p, lvl, ...)                                                                        \
    do {                                                                                           \
        if (s_log_ok((p), (lvl))) CB_LOG_((lvl), false, __VA_ARGS__);                              \
    } while (0)

/* ---- small helpers ---------------------------------------------------------- */

static void s_target(const s_conn_t *c, char *buf, size_t len) {
    bool v6 = strchr(c->host, ':') != NULL;
    (void) snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", c->host[0] ? c->host : c->req.host,
                    v6 ? "]" : "", (unsigned) c->req.port);
}

static void s_sa_str(const struct sockaddr_storage *ss, char *buf, size_t len) {
    cb_ipaddr_t ip;
    cb_ipaddr_from_sa(&ip, (const struct sockaddr *) ss);
    char a[INET6_ADDRSTRLEN];
    cb_ipaddr_str(&ip, a, sizeof a);
    unsigned port = ss->ss_family == AF_INET
                        ? ntohs(((const struct sockaddr_in *) (const void *) ss)->sin_port)
                        : ntohs(((const struct sockaddr_in6 *) (const void *) ss)->sin6_port);
    (void) snprintf(buf, len, ss->ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, port);
}

static void s_close_fd(int *fd) {
    if (*fd >= 0) (void) close(*fd);
    *fd = -1;
}

static void s_close(cb_proxy_t *p, s_conn_t *c) {
    if (c->state == S_TUNNEL) {
        char t[CB_PROXY_NAME_MAX + 16];
        s_target(c, t, sizeof t);
        PX_LOG(p, CB_LOG_INFO, "proxy: #%llu %s closed: %llu B up, %llu B down, %lld ms",
               (unsigned long long) c->id, t, (unsigned long long) c->up,
               (unsigned long long) c->down, (long long) (s_now() - c->started));
    }
    s_close_fd(&c->cfd);
    s_close_fd(&c->ufd);
    free(c->c2u.data);
    free(c->u2c.data);
    p->slots[c->slot] = NULL;
    p->gens[c->slot]++;
    p->n_open--;
    free(c);
}

/* Queue an error reply; the connection ends once it is sent. */
static void s_reply(cb_proxy_t *p, s_conn_t *c, int status, const char *text) {
    (void) p;
    s_close_fd(&c->ufd);
    c->reply_len = cb_http_error(status, text, c->reply, sizeof c->reply);
    c->reply_off = 0;
    c->state = S_REPLY;
    c->deadline = s_now() + CB_PROXY_LINGER_MS;
}

static void s_deny(cb_proxy_t *p, s_conn_t *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_deny(cb_proxy_t *p, s_conn_t *c, int status, const char *fmt, ...) {
    char text[CB_PROXY_REASON_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (status == 403)
        p->st.denied++;
    else
        p->st.failed++;
    PX_LOG(p, CB_LOG_WARNING, "proxy: #%llu deny %s %s:%u: %d %s", (unsigned long long) c->id,
           c->req.method[0] ? c->req.method : "-", c->req.host[0] ? c->req.host : "-",
           (unsigned) c->req.port, status, text);
    s_reply(p, c, status, text);
}

/* ---- connecting ------------------------------------------------------------- */

static void s_try_connect(cb_proxy_t *p, s_conn_t *c);

/* Is this address acceptable for this connection?  NULL yes, else why. */
static const char *s_addr_refused(const s_conn_t *c, const cb_ipaddr_t *ip) {
    bool always = false;
    const char *what = cb_addr_special(ip, &always);
    if (what == NULL) return NULL;
    if (always || !c->trusted) return what;
    return NULL;
}

static void s_set_addrs(cb_proxy_t *p, s_conn_t *c, const cb_ipaddr_t *ips, size_t n,
                        bool trusted) {
    c->trusted = trusted;
    c->n_addrs = c->next_addr = 0;
    c->refusal[0] = '\0';
    for (size_t i = 0; i < n && c->n_addrs < CB_PROXY_ADDRS_MAX; i++) {
        const char *why = s_addr_refused(c, &ips[i]);
        if (why != NULL) {
            char a[INET6_ADDRSTRLEN];
            cb_ipaddr_str(&ips[i], a, sizeof a);
            (void) snprintf(c->refusal, sizeof c->refusal,
                            "%.100s resolves to %s, a %.40s address: not allowed unless listed as "
                            "an address or pinned with --network-resolve",
                            c->host, a, why);
            continue;
        }
        struct sockaddr_storage *ss = &c->addrs[c->n_addrs++];
        memset(ss, 0, sizeof *ss);
        if (ips[i].family == AF_INET) {
            struct sockaddr_in *sin = (struct sockaddr_in *) (void *) ss;
            sin->sin_family = AF_INET;
            sin->sin_port = htons(c->req.port);
            memcpy(&sin->sin_addr, ips[i].a, 4);
        } else {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) (void *) ss;
            sin6->sin6_family = AF_INET6;
            sin6->sin6_port = htons(c->req.port);
            memcpy(&sin6->sin6_addr, ips[i].a, 16);
        }
    }
    if (c->n_addrs == 0) {
        if (c->refusal[0] != '\0')
            s_deny(p, c, 403, "%s", c->refusal);
        else
            s_deny(p, c, 502, "%s has no address", c->host);
        return;
    }
    s_try_connect(p, c);
}

static void *s_cb_arg(const s_conn_t *c, const cb_proxy_t *p) {
    return (void *) (uintptr_t) (((uint64_t) p->gens[c->slot] << 16) | c->slot);
}

static s_conn_t *s_cb_conn(cb_proxy_t *p, void *arg) {
    uint64_t v = (uint64_t) (uintptr_t) arg;
    size_t slot = (size_t) (v & 0xffff);
    uint32_t gen = (uint32_t) (v >> 16);
    if (slot >= (size_t) p->cfg.max_conns || p->slots[slot] == NULL || p->gens[slot] != gen)
        return NULL;
    s_conn_t *c = p->slots[slot];
    return c->state == S_RESOLVE ? c : NULL;
}

static size_t s_ai_addrs(const struct ares_addrinfo *res, cb_ipaddr_t *out, size_t max) {
    size_t n = 0;
    for (const struct ares_addrinfo_node *nd = res ? res->nodes : NULL; nd && n < max;
         nd = nd->ai_next) {
        if (nd->ai_family != AF_INET && nd->ai_family != AF_INET6) continue;
        cb_ipaddr_from_sa(&out[n++], nd->ai_addr);
    }
    return n;
}

/* A resolver callback's common part: frees the context and the answer,
 * copies the addresses (at most CB_PROXY_ADDRS_MAX) to ips.  NULL when the
 * connection is gone or the query was cancelled. */
static s_conn_t *s_on_answer(void *arg, int status, struct ares_addrinfo *res, cb_proxy_t **pp,
                             cb_ipaddr_t *ips, size_t *n) {
    cb_proxy_t *p = *pp = *(cb_proxy_t **) arg;
    void *key = ((void **) arg)[1];
    free(arg);
    s_conn_t *c = s_cb_conn(p, key);
    bool dead = c == NULL || status == ARES_EDESTRUCTION || status == ARES_ECANCELLED;
    *n = !dead && status == ARES_SUCCESS ? s_ai_addrs(res, ips, CB_PROXY_ADDRS_MAX) : 0;
    if (res) ares_freeaddrinfo(res);
    return dead ? NULL : c;
}

static void s_on_dns(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
    (void) timeouts;
    cb_proxy_t *p;
    cb_ipaddr_t ips[CB_PROXY_ADDRS_MAX];
    size_t n;
    s_conn_t *c = s_on_answer(arg, status, res, &p, ips, &n);
    if (c == NULL) return;
    if (status == ARES_ETIMEOUT) {
        s_deny(p, c, 504, "resolving %s timed out", c->host);
        return;
    }
    if (status != ARES_SUCCESS || n == 0) {
        s_deny(p, c, 502, "cannot resolve %s: %s", c->host,
               status == ARES_SUCCESS ? "no address" : ares_strerror(status));
        return;
    }
    s_set_addrs(p, c, ips, n, false);
}

static void s_resolve_dns(cb_proxy_t *p, s_conn_t *c);

static void s_on_files(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
    (void) timeouts;
    cb_proxy_t *p;
    cb_ipaddr_t ips[CB_PROXY_ADDRS_MAX];
    size_t n;
    s_conn_t *c = s_on_answer(arg, status, res, &p, ips, &n);
    if (c == NULL) return;
    if (n > 0)
        s_set_addrs(p, c, ips, n, true); /* the host's own /etc/hosts: operator config */
    else
        s_resolve_dns(p, c);
}

/* The callback context: the proxy and the (slot, generation) key. */
static void **s_cb_ctx(cb_proxy_t *p, s_conn_t *c) {
    void **ctx = malloc(2 * sizeof *ctx);
    if (ctx == NULL) return NULL;
    ctx[0] = p;
    ctx[1] = s_cb_arg(c, p);
    return ctx;
}

static void s_resolve_dns(cb_proxy_t *p, s_conn_t *c) {
    void **ctx = s_cb_ctx(p, c);
    if (ctx == NULL) {
        s_deny(p, c, 502, "out of memory");
        return;
    }
    struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT};
    ares_getaddrinfo(p->dns, c->host, NULL, &hints, s_on_dns, ctx);
}

static void s_resolve(cb_proxy_t *p, s_conn_t *c) {
    void **ctx = s_cb_ctx(p, c);
    if (ctx == NULL) {
        s_deny(p, c, 502, "out of memory");
        return;
    }
    c->state = S_RESOLVE;
    c->deadline = s_now() + p->cfg.resolve_timeout_ms;
    struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT};
    ares_getaddrinfo(p->files, c->host, NULL, &hints, s_on_files, ctx);
}

static void s_try_connect(cb_proxy_t *p, s_conn_t *c) {
    s_close_fd(&c->ufd);
    while (c->next_addr < c->n_addrs) {
        const struct sockaddr_storage *ss = &c->addrs[c->next_addr++];
        socklen_t sl =
            ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            c->last_err = errno;
            continue;
        }
        if (connect(fd, (const struct sockaddr *) ss, sl) == 0 || errno == EINPROGRESS) {
            c->ufd = fd;
            c->state = S_CONNECT;
            c->deadline = s_now() + p->cfg.connect_timeout_ms;
            return;
        }
        c->last_err = errno;
        (void) close(fd);
    }
    char t[CB_PROXY_NAME_MAX + 16];
    s_target(c, t, sizeof t);
    s_deny(p, c, 502, "cannot connect to %s: %s", t,
           c->last_err == ETIMEDOUT ? "timed out" : strerror(c->last_err));
}

static int s_buf_alloc(s_buf_t *b) {
    if (b->data == NULL && (b->data = malloc(CB_PROXY_BUF)) == NULL) return -1;
    b->off = b->len = 0;
    return 0;
}

static void s_buf_put(s_buf_t *b, const char *s, size_t n) {
    /* callers stay within CB_PROXY_BUF: a head plus what followed it */
    memcpy(b->data + b->len, s, n);
    b->len += n;
}

/* The upstream answered connect(2): check whom we reached, then tunnel. */
static void s_connected(cb_proxy_t *p, s_conn_t *c) {
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
    if (err != 0) {
        c->last_err = err;
        s_try_connect(p, c);
        return;
    }
    /* the address actually connected to: checked again, and never this
     * host's own address (a source equal to the peer means a local route) */
    struct sockaddr_storage peer, self;
    socklen_t pl = sizeof peer, sl = sizeof self;
    const struct sockaddr_storage *want = &c->addrs[c->next_addr - 1];
    cb_ipaddr_t pip, sip, wip;
    if (getpeername(c->ufd, (struct sockaddr *) &peer, &pl) < 0 ||
        getsockname(c->ufd, (struct sockaddr *) &self, &sl) < 0) {
        c->last_err = errno;
        s_try_connect(p, c);
        return;
    }
    cb_ipaddr_from_sa(&pip, (struct sockaddr *) &peer);
    cb_ipaddr_from_sa(&sip, (struct sockaddr *) &self);
    cb_ipaddr_from_sa(&wip, (const struct sockaddr *) want);
    const char *why = s_addr_refused(c, &pip);
    if (!cb_ipaddr_equal(&pip, &wip) || why != NULL ||
        (!c->trusted && cb_ipaddr_equal(&pip, &sip))) {
        char a[INET6_ADDRSTRLEN];
        cb_ipaddr_str(&pip, a, sizeof a);
        s_deny(p, c, 403, "%s led to %s, %s", c->host, a,
               why ? why : "an address of this host (not allowed unless listed)");
        return;
    }
    if (s_buf_alloc(&c->c2u) < 0 || s_buf_alloc(&c->u2c) < 0) {
        s_deny(p, c, 502, "out of memory");
        return;
    }
    const char *extra = c->head + c->req.head_len;
    size_t extra_len = c->head_len - c->req.head_len;
    if (c->req.kind == CB_HTTP_CONNECT) {
        s_buf_put(&c->u2c, S_ESTABLISHED, sizeof S_ESTABLISHED - 1);
    } else {
        long n = cb_http_forward_head(c->head, &c->req, c->c2u.data, CB_PROXY_BUF - extra_len);
        if (n < 0) {
            s_deny(p, c, 431, "request head too large to forward");
            return;
        }
        c->c2u.len = (size_t) n;
        c->up += (uint64_t) n; /* the rewritten head counts like the bytes after it */
        p->st.bytes += (uint64_t) n;
    }
    s_buf_put(&c->c2u, extra, extra_len);
    char rule[CB_PROXY_NAME_MAX + 16], t[CB_PROXY_NAME_MAX + 16], a[INET6_ADDRSTRLEN + 16];
    cb_netrules_format(&p->cfg.rules, (size_t) c->rule, rule, sizeof rule);
    s_target(c, t, sizeof t);
    s_sa_str(&peer, a, sizeof a);
    PX_LOG(p, CB_LOG_INFO, "proxy: #%llu allow %s %s by rule %s -> %s%s",
           (unsigned long long) c->id, c->req.method, t, rule, a,
           c->trusted ? " (named by the operator)" : "");
    p->st.allowed++;
    c->state = S_TUNNEL;
    c->deadline = s_now() + p->cfg.idle_timeout_ms;
}

/* ---- the request ------------------------------------------------------------ */

static void s_route(cb_proxy_t *p, s_conn_t *c) {
    bool is_ip = false;
    cb_ipaddr_t ip;
    if (cb_netrules_norm_host(c->req.host, strlen(c->req.host), c->host, sizeof c->host, &is_ip,
                              &ip) < 0) {
        s_deny(p, c, 400, "'%s' is not a valid host", c->req.host);
        return;
    }
    if (p->st.bytes >= p->cfg.max_bytes) {
        s_deny(p, c, 403, "the session's network byte budget (%llu MiB) is used up",
               (unsigned long long) (p->cfg.max_bytes >> 20));
        return;
    }
    char t[CB_PROXY_NAME_MAX + 16];
    s_target(c, t, sizeof t);
    c->rule = cb_netrules_match(&p->cfg.rules, c->host, is_ip, &ip, c->req.port);
    if (c->rule < 0) {
        s_deny(p, c, 403, "%s is not in the allowlist (--network allow:...)", t);
        return;
    }
    if (is_ip) {
        s_set_addrs(p, c, &ip, 1, true);
        return;
    }
    cb_ipaddr_t pins[CB_PROXY_ADDRS_MAX];
    size_t n = cb_netrules_pins(&p->cfg.rules, c->host, pins, CB_PROXY_ADDRS_MAX);
    if (n > 0) {
        s_set_addrs(p, c, pins, n, true);
        return;
    }
    s_resolve(p, c); /* may finish (and close c) before it returns */
}

static void s_on_head(cb_proxy_t *p, s_conn_t *c) {
    size_t room = CB_PROXY_HEAD_MAX - c->head_len;
    ssize_t r = recv(c->cfd, c->head + c->head_len, room, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) { /* EOF or reset before a whole head: nothing to answer */
        s_close(p, c);
        return;
    }
    bool newline = memchr(c->head + c->head_len, '\n', (size_t) r) != NULL;
    c->head_len += (size_t) r;
    c->head[c->head_len] = '\0';
    if (!newline && c->head_len < CB_PROXY_HEAD_MAX) return; /* nothing new to parse */
    const char *why = "";
    int rc = cb_http_parse(c->head, c->head_len, &c->req, &why);
    if (rc == CB_HTTP_INCOMPLETE) {
        if (c->head_len >= CB_PROXY_HEAD_MAX)
            s_deny(p, c, 431, "request head larger than %d bytes", CB_PROXY_HEAD_MAX);
        return;
    }
    if (rc != CB_HTTP_OK) {
        s_deny(p, c, rc, "%s", why);
        return;
    }
    s_route(p, c);
}

/* ---- relaying ------------------------------------------------------------ */

/* Reads from fd into b within the session's byte budget.  1 progress,
 * 0 nothing now, -1 EOF, -2 error or budget exhausted. */
static int s_pull(cb_proxy_t *p, int fd, s_buf_t *b, uint64_t *count) {
    if (b->off > 0 && b->off == b->len) b->off = b->len = 0;
    if (b->off > 0 && b->len == CB_PROXY_BUF) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    size_t room = CB_PROXY_BUF - b->len;
    if (room == 0) return 0;
    uint64_t left = p->cfg.max_bytes - p->st.bytes;
    if (left == 0) return -2;
    if (room > left) room = (size_t) left;
    ssize_t r = recv(fd, b->data + b->len, room, 0);
    if (r < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -2;
    if (r == 0) return -1;
    b->len += (size_t) r;
    *count += (uint64_t) r;
    p->st.bytes += (uint64_t) r;
    return 1;
}

/* Writes what b holds to fd.  1 progress, 0 nothing now, -2 error. */
static int s_push(int fd, s_buf_t *b) {
    if (b->off == b->len) return 0;
    ssize_t w = send(fd, b->data + b->off, b->len - b->off, MSG_NOSIGNAL);
    if (w < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -2;
    b->off += (size_t) w;
    if (b->off == b->len) b->off = b->len = 0; /* drained: all of it is free again */
    return 1;
}

static void s_relay(cb_proxy_t *p, s_conn_t *c, short crev, short urev) {
    bool progress = false;
    for (int round = 0; round < CB_PROXY_IO_ROUNDS; round++) {
        int r1 = 0, r2 = 0, r3 = 0, r4 = 0;
        if (!c->c_eof && (crev & (POLLIN | POLLHUP | POLLERR)))
            r1 = s_pull(p, c->cfd, &c->c2u, &c->up);
        if (!c->u_eof && (urev & (POLLIN | POLLHUP | POLLERR)))
            r2 = s_pull(p, c->ufd, &c->u2c, &c->down);
        r3 = s_push(c->ufd, &c->c2u);
        r4 = s_push(c->cfd, &c->u2c);
        if (r1 == -2 || r2 == -2 || r3 == -2 || r4 == -2) {
            if (p->st.bytes >= p->cfg.max_bytes && !p->budget_logged) {
                p->budget_logged = true;
                LOG_W("proxy: the session's network byte budget (%llu bytes) is used up: "
                      "closing tunnels, refusing new requests",
                      (unsigned long long) p->cfg.max_bytes);
            }
            s_close(p, c);
            return;
        }
        if (r1 == -1) c->c_eof = true;
        if (r2 == -1) c->u_eof = true;
        if (r1 > 0 || r2 > 0 || r3 > 0 || r4 > 0)
            progress = true;
        else
            break;
    }
    if (c->c_eof && c->c2u.off == c->c2u.len && !c->u_shut) {
        (void) shutdown(c->ufd, SHUT_WR);
        c->u_shut = true;
    }
    /* the upstream is done and everything reached the sandbox: finished */
    if (c->u_eof && c->u2c.off == c->u2c.len) {
        s_close(p, c);
        return;
    }
    if (progress) c->deadline = s_now() + p->cfg.idle_timeout_ms;
}

/* ---- accept, timeouts, the poll set ----------------------------------------- */

static void s_accept(cb_proxy_t *p, int lfd) {
    for (int i = 0; i < CB_PROXY_ACCEPT_BATCH && p->n_open < (size_t) p->cfg.max_conns; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                PLOG_W("proxy: accept4");
            return;
        }
        p->st.accepted++;
        if (p->st.accepted > (uint64_t) p->cfg.max_total) {
            /* answered at once: there will be no slot for it */
            char buf[CB_PROXY_REPLY_MAX];
            char text[CB_PROXY_REASON_MAX];
            (void) snprintf(text, sizeof text,
                            "the session's limit of %ld proxied connections is reached",
                            p->cfg.max_total);
            size_t n = cb_http_error(503, text, buf, sizeof buf);
            (void) send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void) shutdown(fd, SHUT_WR);
            (void) close(fd);
            p->st.failed++;
            PX_LOG(p, CB_LOG_WARNING, "proxy: deny: %s", text);
            continue;
        }
        size_t slot = 0;
        while (slot < (size_t) p->cfg.max_conns && p->slots[slot] != NULL)
            slot++;
        s_conn_t *c = calloc(1, sizeof *c);
        if (c == NULL) {
            (void) close(fd);
            LOG_E("proxy: out of memory");
            return;
        }
        c->id = ++p->next_id;
        c->slot = slot;
        c->cfd = fd;
        c->ufd = -1;
        c->rule = -1;
        c->state = S_HEAD;
        c->started = s_now();
        c->deadline = c->started + p->cfg.head_timeout_ms;
        p->slots[slot] = c;
        p->n_open++;
    }
    if (p->n_open >= (size_t) p->cfg.max_conns && !p->at_cap_logged) {
        p->at_cap_logged = true;
        LOG_W("proxy: %ld connections open (the limit): new ones wait", p->cfg.max_conns);
    }
}

static void s_timeout(cb_proxy_t *p, s_conn_t *c) {
    char t[CB_PROXY_NAME_MAX + 16];
    switch (c->state) {
    case S_HEAD:
        s_deny(p, c, 408, "no complete request head within %ld ms", p->cfg.head_timeout_ms);
        break;
    case S_RESOLVE: s_deny(p, c, 504, "resolving %s timed out", c->host); break;
    case S_CONNECT:
        c->last_err = ETIMEDOUT;
        s_try_connect(p, c);
        break;
    case S_TUNNEL:
        s_target(c, t, sizeof t);
        PX_LOG(p, CB_LOG_INFO, "proxy: #%llu %s idle for %ld ms: closing",
               (unsigned long long) c->id, t, p->cfg.idle_timeout_ms);
        s_close(p, c);
        break;
    case S_REPLY:
    case S_LINGER: s_close(p, c); break;
    }
}

static void s_sock_state(void *data, ares_socket_t fd, int readable, int writable) {
    cb_proxy_t *p = data;
    size_t i = 0;
    while (i < p->n_asocks && p->asocks[i].fd != fd)
        i++;
    if (!readable && !writable) {
        if (i < p->n_asocks) p->asocks[i] = p->asocks[--p->n_asocks];
        return;
    }
    if (i == p->n_asocks) {
        if (p->n_asocks >= S_ARES_SOCKS_MAX) {
            LOG_E("proxy: c-ares opened more than %d sockets", S_ARES_SOCKS_MAX);
            return;
        }
        p->n_asocks++;
    }
    p->asocks[i] = (s_ares_sock_t){.fd = fd, .r = readable != 0, .w = writable != 0};
}

static void s_add_pf(cb_proxy_t *p, size_t *n, int fd, short ev, s_pf_kind_t kind, size_t idx) {
    if (*n >= p->pf_cap) return;
    p->pfds[*n] = (struct pollfd){.fd = fd, .events = ev};
    p->refs[*n] = (s_pf_ref_t){.kind = kind, .idx = idx};
    (*n)++;
}

static void s_conn_events(const s_conn_t *c, short *cev, short *uev) {
    *cev = *uev = 0;
    switch (c->state) {
    case S_HEAD: *cev = POLLIN; break;
    case S_RESOLVE: break;
    case S_CONNECT: *uev = POLLOUT; break;
    case S_TUNNEL:
        if (!c->c_eof && c->c2u.len < CB_PROXY_BUF) *cev |= POLLIN;
        if (c->u2c.off < c->u2c.len) *cev |= POLLOUT;
        if (!c->u_eof && c->u2c.len < CB_PROXY_BUF) *uev |= POLLIN;
        if (c->c2u.off < c->c2u.len) *uev |= POLLOUT;
        break;
    case S_REPLY: *cev = POLLOUT; break;
    case S_LINGER: *cev = POLLIN; break;
    }
}

static void s_on_client(cb_proxy_t *p, s_conn_t *c, short rev) {
    if (c->state == S_HEAD) {
        s_on_head(p, c);
    } else if (c->state == S_REPLY) {
        ssize_t w =
            send(c->cfd, c->reply + c->reply_off, c->reply_len - c->reply_off, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            s_close(p, c);
            return;
        }
        if (w > 0) c->reply_off += (size_t) w;
        if (c->reply_off == c->reply_len) {
            /* drain what the client still sends so close() does not reset
             * the connection before it read the reply */
            (void) shutdown(c->cfd, SHUT_WR);
            c->state = S_LINGER;
        }
    } else if (c->state == S_LINGER) {
        char sink[CB_PROXY_REPLY_MAX];
        ssize_t r = recv(c->cfd, sink, sizeof sink, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) s_close(p, c);
    } else if (c->state == S_TUNNEL) {
        if ((rev & (POLLHUP | POLLERR)) && c->c_eof) {
            s_close(p, c); /* the sandbox side is gone both ways */
            return;
        }
        s_relay(p, c, rev, 0);
    } else if (rev & (POLLHUP | POLLERR)) {
        s_close(p, c); /* gone while we resolved or connected */
    }
}

static void s_on_upstream(cb_proxy_t *p, s_conn_t *c, short rev) {
    if (c->state == S_CONNECT)
        s_connected(p, c);
    else if (c->state == S_TUNNEL)
        s_relay(p, c, 0, rev);
}

int cb_proxy_step(cb_proxy_t *p, int max_wait_ms) {
    size_t n = 0;
    bool accepting = p->n_open < (size_t) p->cfg.max_conns;
    if (accepting) p->at_cap_logged = false;
    for (size_t i = 0; i < p->cfg.n_listen && accepting; i++)
        s_add_pf(p, &n, p->cfg.listen_fds[i], POLLIN, S_PF_LISTEN, i);
    int64_t now = s_now(), next = -1;
    for (size_t s = 0; s < (size_t) p->cfg.max_conns; s++) {
        s_conn_t *c = p->slots[s];
        if (c == NULL) continue;
        short cev, uev;
        s_conn_events(c, &cev, &uev);
        /* the sandbox side is always watched for hang-ups (poll reports
         * POLLHUP/POLLERR even with no events asked) */
        if (cev != 0 || !c->c_eof) s_add_pf(p, &n, c->cfd, cev, S_PF_CLIENT, s);
        /* an upstream that sent EOF and has nothing to take would report
         * POLLHUP on every poll: leave it out until there is work */
        if (c->ufd >= 0 && (uev != 0 || !c->u_eof)) s_add_pf(p, &n, c->ufd, uev, S_PF_UPSTREAM, s);
        if (next < 0 || c->deadline < next) next = c->deadline;
    }
    for (size_t i = 0; i < p->n_asocks; i++)
        s_add_pf(p, &n, p->asocks[i].fd,
                 (short) ((p->asocks[i].r ? POLLIN : 0) | (p->asocks[i].w ? POLLOUT : 0)),
                 S_PF_ARES, i);
    int wait = next < 0 ? -1 : (int) (next > now ? next - now : 0);
    struct timeval tv, *tvp = ares_timeout(p->dns, NULL, &tv);
    if (tvp != NULL) {
        int aw = (int) (tvp->tv_sec * 1000 + tvp->tv_usec / 1000);
        if (wait < 0 || aw < wait) wait = aw;
    }
    if (max_wait_ms >= 0 && (wait < 0 || max_wait_ms < wait)) wait = max_wait_ms;
    int r = poll(p->pfds, n, wait);
    if (r < 0) {
        if (errno == EINTR) return 0;
        return -1;
    }
    /* connections first, then c-ares (its callbacks may close connections
     * whose pollfd entries are already handled), then new ones */
    int ares_fds[S_ARES_SOCKS_MAX][2];
    size_t n_ares = 0;
    for (size_t i = 0; i < n; i++) {
        short rev = p->pfds[i].revents;
        if (rev == 0) continue;
        const s_pf_ref_t *ref = &p->refs[i];
        if (ref->kind == S_PF_ARES) {
            if (n_ares < S_ARES_SOCKS_MAX) {
                ares_fds[n_ares][0] = (rev & (POLLIN | POLLERR | POLLHUP)) ? p->pfds[i].fd : -1;
                ares_fds[n_ares][1] = (rev & POLLOUT) ? p->pfds[i].fd : -1;
                n_ares++;
            }
            continue;
        }
        if (ref->kind == S_PF_LISTEN) continue;
        s_conn_t *c = p->slots[ref->idx];
        /* the slot may have been closed, or reused, by an earlier entry */
        if (c == NULL) continue;
        int fd = ref->kind == S_PF_CLIENT ? c->cfd : c->ufd;
        if (fd != p->pfds[i].fd) continue;
        if (ref->kind == S_PF_CLIENT)
            s_on_client(p, c, rev);
        else
            s_on_upstream(p, c, rev);
    }
    for (size_t i = 0; i < n_ares; i++)
        ares_process_fd(p->dns, ares_fds[i][0] >= 0 ? ares_fds[i][0] : ARES_SOCKET_BAD,
                        ares_fds[i][1] >= 0 ? ares_fds[i][1] : ARES_SOCKET_BAD);
    ares_process_fd(p->dns, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* c-ares timeouts */
    now = s_now();
    for (size_t s = 0; s < (size_t) p->cfg.max_conns; s++) {
        s_conn_t *c = p->slots[s];
        if (c != NULL && c->deadline <= now) s_timeout(p, c);
    }
    for (size_t i = 0; i < n; i++)
        if (p->refs[i].kind == S_PF_LISTEN && (p->pfds[i].revents & POLLIN))
            s_accept(p, p->pfds[i].fd);
    return 0;
}

/* ---- construction ----------------------------------------------------------- */

void cb_proxy_cfg_default(cb_proxy_cfg_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cb_netrules_init(&cfg->rules);
    cfg->max_conns = CB_PROXY_DEFAULT_MAX_CONNS;
    cfg->max_total = CB_PROXY_DEFAULT_MAX_TOTAL;
    cfg->max_bytes = (uint64_t) CB_PROXY_DEFAULT_MAX_MB << 20;
    cfg->head_timeout_ms = CB_PROXY_HEAD_TIMEOUT_MS;
    cfg->resolve_timeout_ms = CB_PROXY_RESOLVE_TIMEOUT_MS;
    cfg->connect_timeout_ms = CB_PROXY_CONNECT_TIMEOUT_MS;
    cfg->idle_timeout_ms = CB_PROXY_IDLE_TIMEOUT_MS;
}

static int s_channel(cb_proxy_t *p, ares_channel *ch, char *lookups, bool watch) {
    struct ares_options o;
    memset(&o, 0, sizeof o);
    int mask = ARES_OPT_LOOKUPS | ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
    o.lookups = lookups;
    o.flags = ARES_FLAG_NOSEARCH; /* the name asked is the name resolved */
    o.timeout = CB_PROXY_DNS_TIMEOUT_MS;
    o.tries = CB_PROXY_DNS_TRIES;
    if (watch) {
        mask |= ARES_OPT_SOCK_STATE_CB;
        o.sock_state_cb = s_sock_state;
        o.sock_state_cb_data = p;
    }
    return ares_init_options(ch, &o, mask);
}

cb_proxy_t *cb_proxy_new(const cb_proxy_cfg_t *cfg, char *why, size_t why_len) {
    cb_proxy_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        return NULL;
    }
    p->cfg = *cfg;
    p->log_tokens = CB_PROXY_LOG_BURST;
    p->log_refill = s_now();
    size_t mc = (size_t) cfg->max_conns;
    p->pf_cap = CB_PROXY_LISTENERS + 2 * mc + S_ARES_SOCKS_MAX;
    p->slots = calloc(mc, sizeof *p->slots);
    p->gens = calloc(mc, sizeof *p->gens);
    p->pfds = calloc(p->pf_cap, sizeof *p->pfds);
    p->refs = calloc(p->pf_cap, sizeof *p->refs);
    if (p->slots == NULL || p->gens == NULL || p->pfds == NULL || p->refs == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < cfg->n_listen; i++)
        if (cb_set_nonblock(cfg->listen_fds[i], 1) < 0) {
            cb_fmt_why(why, why_len, "listener fd %d: %s", cfg->listen_fds[i], strerror(errno));
            goto out;
        }
    int rc = ares_library_init(ARES_LIB_INIT_ALL);
    if (rc != ARES_SUCCESS) {
        cb_fmt_why(why, why_len, "ares_library_init: %s", ares_strerror(rc));
        goto out;
    }
    p->ares_init = true;
    if ((rc = s_channel(p, &p->files, "f", false)) != ARES_SUCCESS ||
        (rc = s_channel(p, &p->dns, "b", true)) != ARES_SUCCESS) {
        cb_fmt_why(why, why_len, "ares_init_options: %s", ares_strerror(rc));
        goto out;
    }
    if (cfg->dns_servers != NULL &&
        (rc = ares_set_servers_ports_csv(p->dns, cfg->dns_servers)) != ARES_SUCCESS) {
        cb_fmt_why(why, why_len, "DNS servers '%s': %s", cfg->dns_servers, ares_strerror(rc));
        goto out;
    }
    return p;
out:
    cb_proxy_destroy(&p);
    return NULL;
}

void cb_proxy_destroy(cb_proxy_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_proxy_t *p = *self_p;
    *self_p = NULL;
    for (size_t s = 0; p->slots != NULL && s < (size_t) p->cfg.max_conns; s++)
        if (p->slots[s] != NULL) s_close(p, p->slots[s]);
    /* destroying the channels runs pending callbacks with ARES_EDESTRUCTION */
    if (p->files) ares_destroy(p->files);
    if (p->dns) ares_destroy(p->dns);
    if (p->ares_init) ares_library_cleanup();
    free(p->slots);
    free(p->gens);
    free(p->pfds);
    free(p->refs);
    free(p);
}

void cb_proxy_stats(const cb_proxy_t *p, cb_proxy_stats_t *out) {
    *out = p->st;
    out->open = p->n_open;
}
