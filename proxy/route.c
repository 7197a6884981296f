/*
 * route.c - one request head, from the sandbox's bytes to a checked
 * upstream connection:
 *
 *   head ──parse──▶ rule? ──no──▶ 403
 *                     │ yes
 *                     ├─ IP literal / --network-resolve pin ─┐ (trusted)
 *                     └─ resolve.c: /etc/hosts, then DNS ────┤
 *                                                            ▼
 *               connect (non-blocking, the next address on failure)
 *                     │ getpeername == the checked address
 *                     ▼
 *               relay.c: the tunnel, or the rewritten head and what follows
 *
 * Every address is checked immediately before connect(2), and the one
 * actually reached is checked again afterwards.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolate/util.h"
#include "proxy/proxy_priv.h"

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

/* ---- connecting ------------------------------------------------------------- */

/* Is this address acceptable for this connection?  NULL yes, else why. */
static const char *s_addr_refused(const cb_pconn_t *c, const cb_ipaddr_t *ip) {
    bool always = false;
    const char *what = cb_addr_special(ip, &always);
    if (what == NULL) return NULL;
    if (always || !c->trusted) return what;
    return NULL;
}

void cb_px_set_addrs(cb_proxy_t *p, cb_pconn_t *c, const cb_ipaddr_t *ips, size_t n, bool trusted) {
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
            cb_px_deny(p, c, 403, "%s", c->refusal);
        else
            cb_px_deny(p, c, 502, "%s has no address", c->host);
        return;
    }
    cb_px_try_connect(p, c);
}

void cb_px_try_connect(cb_proxy_t *p, cb_pconn_t *c) {
    cb_px_close_fd(&c->ufd);
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
            c->state = CB_PX_CONNECT;
            c->deadline = cb_now_ms() + p->cfg.connect_timeout_ms;
            return;
        }
        c->last_err = errno;
        (void) close(fd);
    }
    char t[CB_PROXY_NAME_MAX + 16];
    cb_px_target(c, t, sizeof t);
    cb_px_deny(p, c, 502, "cannot connect to %s: %s", t,
               c->last_err == ETIMEDOUT ? "timed out" : strerror(c->last_err));
}

/* The upstream answered connect(2): check whom we reached, then relay. */
void cb_px_connected(cb_proxy_t *p, cb_pconn_t *c) {
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
    if (err != 0) {
        c->last_err = err;
        cb_px_try_connect(p, c);
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
        cb_px_try_connect(p, c);
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
        cb_px_deny(p, c, 403, "%s led to %s, %s", c->host, a,
                   why ? why : "an address of this host (not allowed unless listed)");
        return;
    }
    char rule[CB_PROXY_NAME_MAX + 16], t[CB_PROXY_NAME_MAX + 16], a[INET6_ADDRSTRLEN + 16];
    cb_netrules_format(&p->cfg.rules, (size_t) c->rule, rule, sizeof rule);
    cb_px_target(c, t, sizeof t);
    s_sa_str(&peer, a, sizeof a);
    PX_LOG(p, CB_LOG_INFO, "proxy: #%llu allow %s %s by rule %s -> %s%s",
           (unsigned long long) c->id, c->req.method, t, rule, a,
           c->trusted ? " (named by the operator)" : "");
    p->st.allowed++;
    cb_px_start(p, c);
}

/* ---- the request ------------------------------------------------------------ */

static void s_budget_spent(cb_proxy_t *p, cb_pconn_t *c);

/* c->host is the normalised target (an address when is_ip). */
static void s_route(cb_proxy_t *p, cb_pconn_t *c, bool is_ip, cb_ipaddr_t ip) {
    if (p->st.bytes >= p->cfg.max_bytes) {
        s_budget_spent(p, c);
        return;
    }
    c->is_ip = is_ip;
    c->ip = ip;
    c->port = c->req.port;
    c->hs = cb_px_host_slot(p, c->host, c->port);
    p->hosts[c->hs].up += c->req.head_len; /* the head; its body as it is framed (relay.c) */
    char t[CB_PROXY_NAME_MAX + 16];
    cb_px_target(c, t, sizeof t);
    c->rule = cb_netrules_match(&p->cfg.rules, c->host, is_ip, &ip, c->req.port);
    if (c->rule < 0) {
        cb_px_deny(p, c, 403, "%s is not in the allowlist (--network allow:...)", t);
        return;
    }
    if (is_ip) {
        cb_px_set_addrs(p, c, &ip, 1, true);
        return;
    }
    cb_ipaddr_t pins[CB_PROXY_ADDRS_MAX];
    size_t n = cb_netrules_pins(&p->cfg.rules, c->host, pins, CB_PROXY_ADDRS_MAX);
    if (n > 0) {
        cb_px_set_addrs(p, c, pins, n, true);
        return;
    }
    cb_px_resolve(p, c); /* may finish (and close c) before it returns */
}

/* The session's byte budget is spent: no new request. */
static void s_budget_spent(cb_proxy_t *p, cb_pconn_t *c) {
    cb_px_deny(p, c, 403, "the session's network byte budget (%llu MiB) is used up",
               (unsigned long long) (p->cfg.max_bytes >> 20));
}

void cb_px_next_head(cb_proxy_t *p, cb_pconn_t *c) {
    cb_pbuf_t *b = &c->c2u;
    size_t avail = b->len - b->off;
    if (avail == 0) return;
    const char *buf = b->data + b->off;
    size_t n = avail < CB_PROXY_HEAD_MAX ? avail : CB_PROXY_HEAD_MAX;
    const char *why = "";
    if (n < CB_PROXY_HEAD_MAX && !c->c_eof && !cb_http_new_line(buf, n, &c->head_seen))
        return; /* no new line: the verdict cannot have changed */
    int rc = cb_http_parse(buf, n, &c->req, &why);
    if (rc != CB_HTTP_INCOMPLETE) c->head_seen = 0;
    if (rc == CB_HTTP_INCOMPLETE) {
        if (n >= CB_PROXY_HEAD_MAX)
            cb_px_deny(p, c, 431, "request head larger than %d bytes", CB_PROXY_HEAD_MAX);
        else if (c->c_eof)
            cb_px_close(p, c); /* ended inside a head: nothing to answer */
        return;
    }
    if (rc != CB_HTTP_OK) {
        cb_px_deny(p, c, rc, "%s", why);
        return;
    }
    c->hout_len = c->hout_off = 0;
    if (c->hout == NULL && (c->hout = malloc(CB_PROXY_HOUT_MAX)) == NULL) {
        cb_px_deny(p, c, 502, "out of memory");
        return;
    }
    if (c->bump) {
        cb_px_bump_request(p, c); /* a request inside TLS terminated here */
        return;
    }
    bool is_ip = false;
    cb_ipaddr_t ip;
    if (cb_netrules_norm_host(c->req.host, strlen(c->req.host), c->host, sizeof c->host, &is_ip,
                              &ip) < 0) {
        cb_px_deny(p, c, 400, "'%s' is not a valid host", c->req.host);
        return;
    }
    /* rewritten now: what follows the head may move in the buffer */
    const char *head = buf;
    size_t hl = c->req.head_len;
    if (c->req.kind == CB_HTTP_FORWARD) {
        long w = cb_http_forward_head(buf, &c->req, p->scratch, CB_PROXY_HOUT_MAX);
        if (w < 0) {
            cb_px_deny(p, c, 431, "request head too large to forward");
            return;
        }
        head = p->scratch;
        hl = (size_t) w;
    }
    if (cb_px_secrets_head(p, c, head, hl) < 0) return;
    b->off += c->req.head_len; /* the head itself never goes upstream */
    b->ready = b->off;
    s_route(p, c, is_ip, ip);
}

void cb_px_forward(cb_proxy_t *p, cb_pconn_t *c, const struct sockaddr_storage *to) {
    cb_ipaddr_t ip;
    cb_ipaddr_from_sa(&ip, (const struct sockaddr *) to);
    uint16_t port = ntohs(to->ss_family == AF_INET
                              ? ((const struct sockaddr_in *) (const void *) to)->sin_port
                              : ((const struct sockaddr_in6 *) (const void *) to)->sin6_port);
    c->forward = true;
    c->req.kind = CB_HTTP_CONNECT; /* a tunnel, without the CONNECT */
    (void) snprintf(c->req.method, sizeof c->req.method, "TCP");
    cb_ipaddr_str(&ip, c->host, sizeof c->host);
    (void) snprintf(c->req.host, sizeof c->req.host, "%s", c->host);
    c->req.port = c->port = port;
    c->is_ip = true;
    c->ip = ip;
    c->hs = cb_px_host_slot(p, c->host, port);
    if (p->st.bytes >= p->cfg.max_bytes) {
        s_budget_spent(p, c);
        return;
    }
    c->rule = cb_netrules_match_loopback(&p->cfg.rules, &ip, port);
    if (c->rule < 0) {
        char t[CB_PROXY_NAME_MAX + 16];
        cb_px_target(c, t, sizeof t);
        cb_px_deny(p, c, 403, "%s is not in the allowlist (--network allow:...)", t);
        return;
    }
    /* "localhost" names both loopbacks: a host service on one of them is
     * reached whichever the sandbox's client tried first */
    cb_ipaddr_t ips[2] = {ip, {.family = ip.family == AF_INET ? AF_INET6 : AF_INET}};
    if (ips[1].family == AF_INET) {
        ips[1].a[0] = 127;
        ips[1].a[3] = 1;
    } else {
        ips[1].a[15] = 1;
    }
    cb_px_set_addrs(p, c, ips, p->cfg.rules.rules[c->rule].is_ip ? 1 : 2, true);
}

void cb_px_on_head(cb_proxy_t *p, cb_pconn_t *c) {
    int r = cb_px_pull(p, c, CB_SIDE_SANDBOX);
    if (r == 0) return;
    if (r == -2 && p->st.bytes >= p->cfg.max_bytes) {
        s_budget_spent(p, c);
        return;
    }
    if (r < 0) { /* EOF or reset before a whole head: nothing to answer */
        PX_LOG(p, CB_LOG_DEBUG, "proxy: #%llu the sandbox %s before a whole head",
               (unsigned long long) c->id, r == -1 ? "closed" : "failed");
        cb_px_close(p, c);
        return;
    }
    cb_px_next_head(p, c);
}
