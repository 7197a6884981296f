/*
 * bump.c - TLS termination for the hosts a secret is bound to, and the
 * secrets on every request head (see secrets.h, tls.h).
 *
 *   CONNECT host:443 (host has secrets) ─▶ route.c: rule, addresses, connect
 *     ─▶ WAIT for a handshake slot (at most CB_PROXY_HANDSHAKES_MAX at once)
 *     ─▶ UP: TLS to the real server, its certificate verified; failure: 502
 *        with the reason, which the sandbox's client shows
 *     ─▶ OK200: "200 Connection established"
 *     ─▶ DOWN: TLS with the sandbox, our leaf for host
 *     ─▶ HEAD, bumped: each request read, its Host checked against the
 *        CONNECT target, the placeholders of host's secrets replaced by the
 *        values in its headers, forwarded on the one upstream connection,
 *        its response framed (relay.c) before the next request is read.
 *
 * Hosts without secrets keep the unread CONNECT tunnel.  Every head that
 * passes the proxy, bumped or plain, is checked for placeholders of secrets
 * not bound to its host, and so is every request body (relay.c, as it
 * passes): such a request is refused and logged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/proxy_priv.h"

static void s_release(cb_proxy_t *p, cb_pconn_t *c) {
    if (!c->hs_slot) return;
    c->hs_slot = false;
    p->n_handshakes--;
}

void cb_px_bump_begin(cb_proxy_t *p, cb_pconn_t *c) {
    char t[CB_PROXY_NAME_MAX + 16];
    cb_px_target(c, t, sizeof t);
    if (p->cfg.restarted) {
        cb_px_deny(p, c, 503,
                   "the egress proxy restarted, and with it the session CA this sandbox trusts: "
                   "TLS to %s cannot carry its secrets; restart the kernel",
                   t);
        return;
    }
    if (c->c2u.len > c->c2u.off) {
        cb_px_deny(p, c, 400, "bytes sent to %s before the tunnel was established", t);
        return;
    }
    c->state = CB_PX_TLS;
    c->tls = CB_TLS_WAIT;
    c->deadline = cb_now_ms() + p->cfg.tls_timeout_ms;
    cb_px_bump_retry(p, c);
}

void cb_px_bump_retry(cb_proxy_t *p, cb_pconn_t *c) {
    /* waits, within its deadline; one whose time is up is refused, not started */
    if (p->n_handshakes >= CB_PROXY_HANDSHAKES_MAX || cb_now_ms() >= c->deadline) return;
    char why[CB_PROXY_REASON_MAX];
    c->ssl[CB_SIDE_UPSTREAM] = cb_tls_client(p->tls, c->ufd, c->host, why, sizeof why);
    if (c->ssl[CB_SIDE_UPSTREAM] == NULL) {
        cb_px_deny(p, c, 502, "%s", why);
        return;
    }
    p->n_handshakes++;
    c->hs_slot = true;
    c->tls = CB_TLS_UP;
    cb_px_bump_step(p, c);
}

void cb_px_bump_step(cb_proxy_t *p, cb_pconn_t *c) {
    char why[CB_PROXY_REASON_MAX], t[CB_PROXY_NAME_MAX + 16];
    cb_px_target(c, t, sizeof t);
    if (c->tls == CB_TLS_UP) {
        int r =
            cb_tls_handshake(c->ssl[CB_SIDE_UPSTREAM], &c->want[CB_SIDE_UPSTREAM], why, sizeof why);
        if (r == 0) return;
        if (r < 0) {
            s_release(p, c);
            cb_px_deny(p, c, 502, "TLS with %s: %s", t, why);
            return;
        }
        c->want[CB_SIDE_UPSTREAM] = 0;
        memcpy(c->reply, CB_PX_ESTABLISHED, sizeof CB_PX_ESTABLISHED - 1);
        c->reply_len = sizeof CB_PX_ESTABLISHED - 1;
        c->reply_off = 0;
        c->tls = CB_TLS_OK200;
    }
    if (c->tls == CB_TLS_OK200) {
        ssize_t w =
            send(c->cfd, c->reply + c->reply_off, c->reply_len - c->reply_off, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            cb_px_close(p, c);
            return;
        }
        if (w > 0) c->reply_off += (size_t) w;
        if (c->reply_off < c->reply_len) return;
        c->ssl[CB_SIDE_SANDBOX] = cb_tls_server(p->tls, c->cfd, c->host, why, sizeof why);
        if (c->ssl[CB_SIDE_SANDBOX] == NULL) {
            LOG_E("proxy: #%llu %s: %s", (unsigned long long) c->id, t, why);
            cb_px_close(p, c);
            return;
        }
        c->tls = CB_TLS_DOWN;
    }
    int r = cb_tls_handshake(c->ssl[CB_SIDE_SANDBOX], &c->want[CB_SIDE_SANDBOX], why, sizeof why);
    if (r == 0) return;
    s_release(p, c);
    if (r < 0) {
        p->st.failed++;
        PX_LOG(p, CB_LOG_WARNING, "proxy: #%llu the sandbox's TLS for %s failed: %s: closing",
               (unsigned long long) c->id, t, why);
        cb_px_close(p, c);
        return;
    }
    c->want[CB_SIDE_SANDBOX] = 0;
    c->bump = true;
    c->state = CB_PX_HEAD;
    c->deadline = cb_now_ms() + p->cfg.head_timeout_ms;
    PX_LOG(p, CB_LOG_INFO, "proxy: #%llu TLS ends here for %s (a host with secrets)",
           (unsigned long long) c->id, t);
}

void cb_px_bump_request(cb_proxy_t *p, cb_pconn_t *c) {
    cb_pbuf_t *b = &c->c2u;
    const char *buf = b->data + b->off;
    char t[CB_PROXY_NAME_MAX + 16], h[CB_PROXY_NAME_MAX + 1];
    bool is_ip = false;
    cb_ipaddr_t ip;
    cb_px_target(c, t, sizeof t);
    if (c->hs >= 0) p->hosts[c->hs].up += c->req.head_len; /* its body as it is framed (relay.c) */
    if (c->req.kind != CB_HTTP_FORWARD || !c->req.origin_form) {
        cb_px_deny(p, c, 400, "inside TLS to %s a request names a path and a Host", t);
        return;
    }
    if (cb_netrules_norm_host(c->req.host, strlen(c->req.host), h, sizeof h, &is_ip, &ip) < 0 ||
        strcmp(h, c->host) != 0 || (c->req.port_given && c->req.port != c->port)) {
        cb_px_deny(p, c, 403, "the request names the host %s, but this connection is to %s",
                   c->req.host, t);
        return;
    }
    if (p->st.bytes >= p->cfg.max_bytes) {
        cb_px_deny(p, c, 403, "the session's network byte budget (%llu MiB) is used up",
                   (unsigned long long) (p->cfg.max_bytes >> 20));
        return;
    }
    /* the new policy may have closed this host meanwhile: ctl.c closes such
     * connections, so a request here is still allowed */
    if (cb_px_secrets_head(p, c, buf, c->req.head_len) < 0) return;
    b->off += c->req.head_len;
    b->ready = b->off;
    c->req.port = c->port;
    (void) snprintf(c->req.host, sizeof c->req.host, "%s", c->host);
    p->st.allowed++;
    PX_LOG(p, CB_LOG_INFO, "proxy: #%llu %s %s (inside TLS, request %llu)",
           (unsigned long long) c->id, c->req.method, t, (unsigned long long) c->n_req + 1);
    cb_px_start(p, c);
}

int cb_px_secrets_head(cb_proxy_t *p, cb_pconn_t *c, const char *in, size_t n) {
    const cb_secrets_t *s = p->cfg.secrets;
    bool fwd = c->req.kind == CB_HTTP_FORWARD;
    if (s == NULL || s->n == 0) {
        if (fwd) memcpy(c->hout, in, n); /* n <= CB_PROXY_HOUT_MAX: the callers' bound */
        c->hout_len = fwd ? n : 0;
        return 0;
    }
    const cb_secret_t *foreign = NULL;
    size_t put = 0;
    long w = cb_secrets_apply(s, c->host, in, n, c->hout, CB_PROXY_HOUT_MAX, &foreign, &put);
    char t[CB_PROXY_NAME_MAX + 16];
    cb_px_target(c, t, sizeof t);
    if (w == CB_SECRETS_FOREIGN) {
        cb_px_foreign(p, c, foreign, "request");
        return -1;
    }
    if (w < 0) {
        cb_px_deny(p, c, 431, "request head too large with its secrets put in");
        return -1;
    }
    c->hout_len = fwd ? (size_t) w : 0;
    if (put > 0)
        PX_LOG(p, CB_LOG_INFO, "proxy: #%llu %zu secret value%s put in for %s",
               (unsigned long long) c->id, put, put == 1 ? "" : "s", t);
    return 0;
}

void cb_px_foreign(cb_proxy_t *p, cb_pconn_t *c, const cb_secret_t *x, const char *what) {
    char hosts[CB_PROXY_REASON_MAX / 2] = "", t[CB_PROXY_NAME_MAX + 16];
    for (size_t i = 0; i < x->n_hosts; i++) {
        size_t used = strlen(hosts);
        (void) snprintf(hosts + used, sizeof hosts - used, "%s%s", i ? ", " : "", x->hosts[i]);
    }
    cb_px_target(c, t, sizeof t);
    if (!c->resp_started) { /* no response yet: the sandbox gets the refusal */
        cb_px_deny(p, c, 403,
                   "the %s carries the placeholder of the secret %s, which is only for %s, not "
                   "for %s%s",
                   what, x->name, hosts, t,
                   c->hout_off > 0 ? " (cut short upstream)" : ""); /* s_reply closes it */
        return;
    }
    p->st.denied++;
    if (c->hs >= 0) p->hosts[c->hs].refused++;
    PX_LOG(p, CB_LOG_WARNING,
           "proxy: #%llu deny %s %s: the %s carries the placeholder of the secret %s, which is "
           "only for %s: closing (a response had begun)",
           (unsigned long long) c->id, c->req.method, t, what, x->name, hosts);
    cb_px_close(p, c);
}
