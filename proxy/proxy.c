/*
 * proxy.c - the egress proxy's loop: accept on the listeners, one poll(2)
 * for every connection, c-ares socket and deadline, then each connection's
 * next step (route.c reads and routes a head, relay.c moves bytes,
 * resolve.c answers names); errors are replied here, and connections end
 * here.  Resolution happens in the proxy, never in the sandbox, so a name
 * whose DNS answer changes (rebinding) cannot lead to an address the checks
 * refuse (route.c).  Everything a connection holds is bounded by the
 * configuration (proxy.h) and freed in cb_px_close.
 *
 *   HEAD ─▶ RESOLVE ─▶ CONNECT ─┬▶ TUNNEL ─▶ closed               (CONNECT)
 *    ▲                          ├▶ TLS ─▶ HEAD, bumped (CONNECT to a host with secrets: bump.c)
 *    │                          └▶ FORWARD ─▶ the next HEAD, or closed (plain http)
 *    └──────────┴──────────┴──▶ REPLY (an error) ─▶ LINGER ─▶ closed
 */
#include "proxy/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "isolate/util.h"
#include "proxy/proxy_priv.h"

/* ---- time and logging -------------------------------------------------- */


/* Token bucket: a sandbox that makes the proxy refuse in a loop must not
 * flood the kernel's log.  Suppressed lines are counted and reported. */
bool cb_px_log_ok(cb_proxy_t *p, cb_log_level_t lvl) {
    if (lvl < cb_log_threshold) return false;
    int64_t now = cb_now_ms();
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

/* ---- small helpers ---------------------------------------------------------- */

void cb_px_target(const cb_pconn_t *c, char *buf, size_t len) {
    bool v6 = strchr(c->host, ':') != NULL;
    (void) snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", c->host[0] ? c->host : c->req.host,
                    v6 ? "]" : "", (unsigned) c->req.port);
}

void cb_px_close_fd(int *fd) {
    if (*fd >= 0) (void) close(*fd);
    *fd = -1;
}

void cb_px_close(cb_proxy_t *p, cb_pconn_t *c) {
    if (c->state == CB_PX_TUNNEL || c->state == CB_PX_FORWARD || c->n_req > 0) {
        char t[CB_PROXY_NAME_MAX + 16];
        cb_px_target(c, t, sizeof t);
        PX_LOG(p, CB_LOG_INFO,
               "proxy: #%llu %s closed: %llu B up, %llu B down, %llu requests, %lld ms",
               (unsigned long long) c->id, t, (unsigned long long) c->up,
               (unsigned long long) c->down,
               (unsigned long long) c->n_req + (c->state == CB_PX_FORWARD),
               (long long) (cb_now_ms() - c->started));
    }
    if (c->hs_slot) p->n_handshakes--;
    cb_tls_free(&c->ssl[CB_SIDE_SANDBOX]);
    cb_px_close_fd(&c->cfd);
    cb_px_close_up(c);
    if (c->hout != NULL && p->cfg.secrets != NULL && p->cfg.secrets->n > 0)
        OPENSSL_cleanse(c->hout, CB_PROXY_HOUT_MAX); /* heads with values put in */
    free(c->hout);
    free(c->c2u.data);
    free(c->u2c.data);
    p->slots[c->slot] = NULL;
    p->gens[c->slot]++;
    p->n_open--;
    free(c);
}

/* Queue an error reply; the connection ends once it is sent. */
static void s_reply(cb_proxy_t *p, cb_pconn_t *c, int status, const char *text) {
    (void) p;
    cb_px_close_up(c);
    c->reply_len = cb_http_error(status, text, c->reply, sizeof c->reply);
    c->reply_off = 0;
    c->state = CB_PX_REPLY;
    c->deadline = cb_now_ms() + CB_PROXY_LINGER_MS;
}

void cb_px_deny(cb_proxy_t *p, cb_pconn_t *c, int status, const char *fmt, ...) {
    char text[CB_PROXY_REASON_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (status == 403)
        p->st.denied++;
    else
        p->st.failed++;
    if (c->hs < 0)
        c->hs = cb_px_host_slot(p,
                                c->host[0]       ? c->host
                                : c->req.host[0] ? c->req.host
                                                 : "-",
                                c->port ? c->port : c->req.port);
    p->hosts[c->hs].refused++;
    PX_LOG(p, CB_LOG_WARNING, "proxy: #%llu deny %s %s:%u: %d %s", (unsigned long long) c->id,
           c->req.method[0] ? c->req.method : "-", c->req.host[0] ? c->req.host : "-",
           (unsigned) c->req.port, status, text);
    s_reply(p, c, status, text);
}

/* ---- accept, timeouts, the poll set ----------------------------------------- */

/* fwd: index of a forward listener, or -1 for the proxy's own. */
static void s_accept(cb_proxy_t *p, int lfd, int fwd) {
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
        cb_pconn_t *c = calloc(1, sizeof *c);
        if (c == NULL || cb_px_buf_alloc(&c->c2u) < 0) {
            free(c);
            (void) close(fd);
            LOG_E("proxy: out of memory");
            return;
        }
        c->id = ++p->next_id;
        c->slot = slot;
        c->cfd = fd;
        c->ufd = -1;
        c->rule = -1;
        c->hs = -1;
        c->state = CB_PX_HEAD;
        c->started = cb_now_ms();
        c->deadline = c->started + p->cfg.head_timeout_ms;
        p->slots[slot] = c;
        p->n_open++;
        if (fwd >= 0) cb_px_forward(p, c, &p->fwd_to[fwd]); /* may close c */
    }
    if (p->n_open >= (size_t) p->cfg.max_conns && !p->at_cap_logged) {
        p->at_cap_logged = true;
        LOG_W("proxy: %ld connections open (the limit): new ones wait", p->cfg.max_conns);
    }
}

static void s_timeout(cb_proxy_t *p, cb_pconn_t *c) {
    char t[CB_PROXY_NAME_MAX + 16];
    switch (c->state) {
    case CB_PX_HEAD:
        if (c->n_req > 0 && c->c2u.off == c->c2u.len) { /* an idle kept-alive connection */
            cb_px_close(p, c);
            break;
        }
        cb_px_deny(p, c, 408, "no complete request head within %ld ms", p->cfg.head_timeout_ms);
        break;
    case CB_PX_RESOLVE: cb_px_deny(p, c, 504, "resolving %s timed out", c->host); break;
    case CB_PX_CONNECT:
        c->last_err = ETIMEDOUT;
        cb_px_try_connect(p, c);
        break;
    case CB_PX_TLS:
        cb_px_target(c, t, sizeof t);
        if (c->tls == CB_TLS_WAIT || c->tls == CB_TLS_UP)
            cb_px_deny(p, c, 504, "TLS with %s did not complete within %ld ms", t,
                       p->cfg.tls_timeout_ms);
        else
            cb_px_close(p, c); /* the sandbox did not finish its handshake */
        break;
    case CB_PX_TUNNEL:
    case CB_PX_FORWARD:
        cb_px_target(c, t, sizeof t);
        PX_LOG(p, CB_LOG_INFO, "proxy: #%llu %s idle for %ld ms: closing",
               (unsigned long long) c->id, t, p->cfg.idle_timeout_ms);
        cb_px_close(p, c);
        break;
    case CB_PX_REPLY:
    case CB_PX_LINGER: cb_px_close(p, c); break;
    }
}

/* TLS holds bytes for side that its buffer has room for (poll cannot tell). */
static bool s_tls_hot(const cb_pconn_t *c, int side) {
    const cb_pbuf_t *b = side == CB_SIDE_SANDBOX ? &c->c2u : &c->u2c;
    bool reading = c->state == CB_PX_TUNNEL || c->state == CB_PX_FORWARD ||
                   (c->state == CB_PX_HEAD && side == CB_SIDE_SANDBOX);
    return reading && c->ssl[side] != NULL && b->len < CB_PROXY_BUF &&
           SSL_has_pending(c->ssl[side]) == 1;
}

static void s_add_pf(cb_proxy_t *p, size_t *n, int fd, short ev, cb_ppf_kind_t kind, size_t idx) {
    if (*n >= p->pf_cap) return;
    p->pfds[*n] = (struct pollfd){.fd = fd, .events = ev};
    p->refs[*n] = (cb_ppf_ref_t){.kind = kind, .idx = idx};
    (*n)++;
}

static void s_conn_events(const cb_pconn_t *c, short *cev, short *uev) {
    *cev = *uev = 0;
    switch (c->state) {
    case CB_PX_HEAD:
        *cev = POLLIN;
        if (c->bump && c->ufd >= 0) *uev = POLLIN; /* an upstream that closes meanwhile */
        break;
    case CB_PX_TLS:
        if (c->tls == CB_TLS_UP) *uev = c->want[CB_SIDE_UPSTREAM];
        if (c->tls == CB_TLS_OK200) *cev = POLLOUT;
        if (c->tls == CB_TLS_DOWN) *cev = c->want[CB_SIDE_SANDBOX];
        break;
    case CB_PX_RESOLVE: break;
    case CB_PX_CONNECT: *uev = POLLOUT; break;
    case CB_PX_TUNNEL:
    case CB_PX_FORWARD:
        if (!c->c_eof && c->c2u.len < CB_PROXY_BUF) *cev |= POLLIN;
        if (c->u2c.off < c->u2c.ready) *cev |= POLLOUT;
        if (!c->u_eof && c->u2c.len < CB_PROXY_BUF) *uev |= POLLIN;
        if (c->c2u.off < c->c2u.ready || c->hout_off < c->hout_len) *uev |= POLLOUT;
        *cev |= c->want[CB_SIDE_SANDBOX]; /* what TLS asked for */
        *uev |= c->want[CB_SIDE_UPSTREAM];
        break;
    case CB_PX_REPLY: *cev = POLLOUT; break;
    case CB_PX_LINGER: *cev = POLLIN; break;
    }
}

static void s_on_client(cb_proxy_t *p, cb_pconn_t *c, short rev) {
    if (c->state == CB_PX_HEAD) {
        cb_px_on_head(p, c);
    } else if (c->state == CB_PX_TLS) {
        cb_px_bump_step(p, c);
    } else if (c->state == CB_PX_REPLY) {
        /* inside TLS when the sandbox's side is terminated here */
        long w =
            cb_px_send(c, CB_SIDE_SANDBOX, c->reply + c->reply_off, c->reply_len - c->reply_off);
        if (w < 0) {
            cb_px_close(p, c);
            return;
        }
        c->reply_off += (size_t) w;
        if (c->reply_off == c->reply_len) {
            /* drain what the client still sends so close() does not reset
             * the connection before it read the reply */
            if (c->ssl[CB_SIDE_SANDBOX] != NULL) (void) SSL_shutdown(c->ssl[CB_SIDE_SANDBOX]);
            (void) shutdown(c->cfd, SHUT_WR);
            c->state = CB_PX_LINGER;
        }
    } else if (c->state == CB_PX_LINGER) {
        char sink[CB_PROXY_REPLY_MAX];
        ssize_t r = recv(c->cfd, sink, sizeof sink, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) cb_px_close(p, c);
    } else if (c->state == CB_PX_TUNNEL || c->state == CB_PX_FORWARD) {
        if ((rev & (POLLHUP | POLLERR)) && c->c_eof) {
            cb_px_close(p, c); /* the sandbox side is gone both ways */
            return;
        }
        cb_px_relay(p, c, rev, 0);
    } else if (rev & (POLLHUP | POLLERR)) {
        cb_px_close(p, c); /* gone while we resolved or connected */
    }
}

/* A bumped upstream between requests: TLS records of its own (session
 * tickets) are taken in; its close, or bytes nobody asked for, end the
 * connection, and the sandbox's client reconnects. */
static void s_on_idle_upstream(cb_proxy_t *p, cb_pconn_t *c) {
    int r = cb_px_pull(p, c, CB_SIDE_UPSTREAM);
    if (r == 0) return;
    PX_LOG(p, CB_LOG_DEBUG, "proxy: #%llu the upstream %s between requests: closing",
           (unsigned long long) c->id, r > 0 ? "sent bytes" : "closed");
    cb_px_close(p, c);
}

static void s_on_upstream(cb_proxy_t *p, cb_pconn_t *c, short rev) {
    if (c->state == CB_PX_CONNECT)
        cb_px_connected(p, c);
    else if (c->state == CB_PX_TLS)
        cb_px_bump_step(p, c);
    else if (c->state == CB_PX_HEAD && c->bump)
        s_on_idle_upstream(p, c);
    else if (c->state == CB_PX_TUNNEL || c->state == CB_PX_FORWARD)
        cb_px_relay(p, c, 0, rev);
}

int cb_proxy_step(cb_proxy_t *p, int max_wait_ms) {
    size_t n = 0;
    bool accepting = p->n_open < (size_t) p->cfg.max_conns;
    if (accepting) p->at_cap_logged = false;
    for (size_t i = 0; i < p->cfg.n_listen && accepting; i++)
        s_add_pf(p, &n, p->cfg.listen_fds[i], POLLIN, CB_PPF_LISTEN, i);
    for (size_t i = 0; i < p->cfg.n_fwd && accepting; i++)
        s_add_pf(p, &n, p->cfg.fwd_fds[i], POLLIN, CB_PPF_FORWARD, i);
    int64_t now = cb_now_ms(), next = -1;
    for (size_t s = 0; s < (size_t) p->cfg.max_conns; s++) {
        cb_pconn_t *c = p->slots[s];
        if (c == NULL) continue;
        short cev, uev;
        s_conn_events(c, &cev, &uev);
        /* the sandbox side is always watched for hang-ups (poll reports
         * POLLHUP/POLLERR even with no events asked) */
        if (cev != 0 || !c->c_eof) s_add_pf(p, &n, c->cfd, cev, CB_PPF_CLIENT, s);
        /* an upstream that sent EOF and has nothing to take would report
         * POLLHUP on every poll: leave it out until there is work */
        if (c->ufd >= 0 && (uev != 0 || !c->u_eof))
            s_add_pf(p, &n, c->ufd, uev, CB_PPF_UPSTREAM, s);
        if (next < 0 || c->deadline < next) next = c->deadline;
        if (s_tls_hot(c, CB_SIDE_SANDBOX) || s_tls_hot(c, CB_SIDE_UPSTREAM)) next = now;
    }
    if (p->cfg.ctl_fd >= 0) s_add_pf(p, &n, p->cfg.ctl_fd, POLLIN, CB_PPF_CTL, 0);
    for (size_t i = 0; i < p->n_asocks; i++)
        s_add_pf(p, &n, p->asocks[i].fd,
                 (short) ((p->asocks[i].r ? POLLIN : 0) | (p->asocks[i].w ? POLLOUT : 0)),
                 CB_PPF_ARES, i);
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
    int ares_fds[CB_PX_ARES_SOCKS_MAX][2];
    size_t n_ares = 0;
    for (size_t i = 0; i < n; i++) {
        short rev = p->pfds[i].revents;
        if (rev == 0) continue;
        const cb_ppf_ref_t *ref = &p->refs[i];
        if (ref->kind == CB_PPF_ARES) {
            if (n_ares < CB_PX_ARES_SOCKS_MAX) {
                ares_fds[n_ares][0] = (rev & (POLLIN | POLLERR | POLLHUP)) ? p->pfds[i].fd : -1;
                ares_fds[n_ares][1] = (rev & POLLOUT) ? p->pfds[i].fd : -1;
                n_ares++;
            }
            continue;
        }
        if (ref->kind == CB_PPF_LISTEN || ref->kind == CB_PPF_FORWARD || ref->kind == CB_PPF_CTL)
            continue;
        cb_pconn_t *c = p->slots[ref->idx];
        /* the slot may have been closed, or reused, by an earlier entry */
        if (c == NULL) continue;
        int fd = ref->kind == CB_PPF_CLIENT ? c->cfd : c->ufd;
        if (fd != p->pfds[i].fd) continue;
        if (ref->kind == CB_PPF_CLIENT)
            s_on_client(p, c, rev);
        else
            s_on_upstream(p, c, rev);
    }
    for (size_t i = 0; i < n_ares; i++)
        ares_process_fd(p->dns, ares_fds[i][0] >= 0 ? ares_fds[i][0] : ARES_SOCKET_BAD,
                        ares_fds[i][1] >= 0 ? ares_fds[i][1] : ARES_SOCKET_BAD);
    ares_process_fd(p->dns, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* c-ares timeouts */
    /* bytes TLS already holds decrypted wake no poll: take them now (only a
     * proxy with secrets terminates TLS) */
    for (size_t s = 0; p->tls != NULL && s < (size_t) p->cfg.max_conns; s++) {
        if (p->slots[s] != NULL && s_tls_hot(p->slots[s], CB_SIDE_SANDBOX))
            s_on_client(p, p->slots[s], POLLIN);
        if (p->slots[s] != NULL && s_tls_hot(p->slots[s], CB_SIDE_UPSTREAM))
            s_on_upstream(p, p->slots[s], POLLIN);
        if (p->slots[s] != NULL && p->slots[s]->state == CB_PX_TLS &&
            p->slots[s]->tls == CB_TLS_WAIT)
            cb_px_bump_retry(p, p->slots[s]);
    }
    now = cb_now_ms();
    for (size_t s = 0; s < (size_t) p->cfg.max_conns; s++) {
        cb_pconn_t *c = p->slots[s];
        if (c != NULL && c->deadline <= now) s_timeout(p, c);
    }
    for (size_t i = 0; i < n; i++)
        if (p->refs[i].kind == CB_PPF_LISTEN && (p->pfds[i].revents & POLLIN))
            s_accept(p, p->pfds[i].fd, -1);
        else if (p->refs[i].kind == CB_PPF_FORWARD && (p->pfds[i].revents & POLLIN))
            s_accept(p, p->pfds[i].fd, (int) p->refs[i].idx);
        else if (p->refs[i].kind == CB_PPF_CTL && p->pfds[i].revents)
            cb_px_ctl(p); /* last: it may change the listeners and the policy */
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
    cfg->tls_timeout_ms = CB_PROXY_TLS_TIMEOUT_MS;
    cfg->ctl_fd = -1;
}

int cb_px_listeners(cb_proxy_t *p, const int *listen, size_t n_listen, const int *fwd, size_t n_fwd,
                    char *why, size_t why_len) {
    if (p->cfg.n_listen + n_listen > CB_PROXY_LISTENERS ||
        p->cfg.n_fwd + n_fwd > CB_PROXY_FORWARDS_MAX) {
        cb_fmt_why(why, why_len, "more listeners than %d and %d", CB_PROXY_LISTENERS,
                   CB_PROXY_FORWARDS_MAX);
        return -1;
    }
    /* every fd checked before any joins the poll set: on failure the caller
     * closes them all (ctl.c), so none may stay behind in it */
    struct sockaddr_storage to[CB_PROXY_FORWARDS_MAX];
    for (size_t i = 0; i < n_listen; i++)
        if (cb_set_nonblock(listen[i], 1) < 0) {
            cb_fmt_why(why, why_len, "listener fd %d: %s", listen[i], strerror(errno));
            return -1;
        }
    for (size_t i = 0; i < n_fwd; i++) {
        /* where it listens inside is where it leads on the host */
        socklen_t sl = sizeof to[i];
        if (cb_set_nonblock(fwd[i], 1) < 0 ||
            getsockname(fwd[i], (struct sockaddr *) &to[i], &sl) < 0 ||
            (to[i].ss_family != AF_INET && to[i].ss_family != AF_INET6)) {
            cb_fmt_why(why, why_len, "forward fd %d: not a TCP listener", fwd[i]);
            return -1;
        }
    }
    for (size_t i = 0; i < n_listen; i++)
        p->cfg.listen_fds[p->cfg.n_listen++] = listen[i];
    for (size_t i = 0; i < n_fwd; i++) {
        p->fwd_to[p->cfg.n_fwd] = to[i];
        p->cfg.fwd_fds[p->cfg.n_fwd++] = fwd[i];
    }
    return 0;
}

cb_proxy_t *cb_proxy_new(const cb_proxy_cfg_t *cfg, char *why, size_t why_len) {
    cb_proxy_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        return NULL;
    }
    p->cfg = *cfg;
    p->log_tokens = CB_PROXY_LOG_BURST;
    p->log_refill = cb_now_ms();
    size_t mc = (size_t) cfg->max_conns;
    p->pf_cap = CB_PROXY_LISTENERS + CB_PROXY_FORWARDS_MAX + 2 * mc + CB_PX_ARES_SOCKS_MAX + 1;
    p->slots = calloc(mc, sizeof *p->slots);
    p->gens = calloc(mc, sizeof *p->gens);
    p->pfds = calloc(p->pf_cap, sizeof *p->pfds);
    p->refs = calloc(p->pf_cap, sizeof *p->refs);
    if (p->slots == NULL || p->gens == NULL || p->pfds == NULL || p->refs == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        goto out;
    }
    p->cfg.n_listen = p->cfg.n_fwd = 0;
    if (cb_px_listeners(p, cfg->listen_fds, cfg->n_listen, cfg->fwd_fds, cfg->n_fwd, why, why_len) <
        0)
        goto out;
    if ((p->scratch = malloc(CB_PROXY_HOUT_MAX)) == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        goto out;
    }
    if (cfg->secrets != NULL && cfg->secrets->n > 0) {
        const char *hosts[CB_PROXY_BOUND_HOSTS_MAX];
        size_t nh = cb_secrets_hosts(cfg->secrets, hosts, CB_PROXY_BOUND_HOSTS_MAX);
        if ((p->tls = cb_tls_new(hosts, nh, cfg->upstream_ca, why, why_len)) == NULL) goto out;
    }
    int rc = ares_library_init(ARES_LIB_INIT_ALL);
    if (rc != ARES_SUCCESS) {
        cb_fmt_why(why, why_len, "ares_library_init: %s", ares_strerror(rc));
        goto out;
    }
    p->ares_init = true;
    if ((rc = cb_px_channel(p, &p->files, "f", false)) != ARES_SUCCESS ||
        (rc = cb_px_channel(p, &p->dns, "b", true)) != ARES_SUCCESS) {
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
        if (p->slots[s] != NULL) cb_px_close(p, p->slots[s]);
    /* destroying the channels runs pending callbacks with ARES_EDESTRUCTION */
    if (p->files) ares_destroy(p->files);
    if (p->dns) ares_destroy(p->dns);
    if (p->ares_init) ares_library_cleanup();
    cb_tls_destroy(&p->tls);
    free(p->scratch);
    free(p->slots);
    free(p->gens);
    free(p->pfds);
    free(p->refs);
    free(p);
}

const char *cb_proxy_ca_pem(const cb_proxy_t *p, size_t *len) {
    *len = 0;
    return p->tls ? cb_tls_ca_pem(p->tls, len) : NULL;
}

void cb_proxy_stats(const cb_proxy_t *p, cb_proxy_stats_t *out) {
    *out = p->st;
    out->open = p->n_open;
}
