/*
 * relay.c - bytes both ways between the sandbox side and the upstream.
 *
 * One buffer per direction; a side whose buffer is full is simply not read
 * (backpressure), so memory per connection is fixed; every byte read is
 * charged to the session's budget before it is taken.
 *
 * TUNNEL (CONNECT): everything read is passed on, unread.
 * FORWARD (plain http): exactly one request goes upstream: its rewritten
 * head (route.c), then the body bytes body.c frames (Content-Length or
 * chunked), each piece of its data (and a chunked body's framing, for its
 * extensions and trailers) looked at for the placeholders of secrets not
 * bound to the host before it may go (secrets.h); what the
 * sandbox sends after it stays in the buffer, unsent.
 * The response is framed the same way (its head parsed, interim 1xx heads
 * passed on, HEAD/204/304 without a body), and the sandbox gets exactly its
 * bytes.  Then the upstream is closed (a bumped one stays, for the next
 * request to the same host: bump.c) and, unless either side asked to close,
 * the response ends only at EOF or the request was not all sent, the next
 * head in the buffer goes through route.c like the first: each request is
 * parsed, checked against the allowlist and rewritten, and connects anew
 * (issue 18, finding 3).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxy/proxy_priv.h"

int cb_px_buf_alloc(cb_pbuf_t *b) {
    if (b->data == NULL && (b->data = malloc(CB_PROXY_BUF)) == NULL) return -1;
    b->off = b->ready = b->len = 0;
    return 0;
}

/* One read from side into buf: bytes, 0 not now, -1 EOF, -2 error. */
static long s_recv(cb_pconn_t *c, int side, char *buf, size_t n) {
    if (c->ssl[side] != NULL) {
        c->want[side] = 0;
        return cb_tls_read(c->ssl[side], buf, n, &c->want[side]);
    }
    ssize_t r = recv(side == CB_SIDE_SANDBOX ? c->cfd : c->ufd, buf, n, 0);
    if (r < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -2;
    return r == 0 ? -1 : (long) r;
}

long cb_px_send(cb_pconn_t *c, int side, const char *s, size_t n) {
    if (n == 0) return 0;
    if (c->ssl[side] != NULL) {
        c->want[side] = 0;
        return cb_tls_write(c->ssl[side], s, n, &c->want[side]);
    }
    ssize_t w = send(side == CB_SIDE_SANDBOX ? c->cfd : c->ufd, s, n, MSG_NOSIGNAL);
    if (w < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -2;
    return (long) w;
}

void cb_px_close_up(cb_pconn_t *c) {
    cb_tls_free(&c->ssl[CB_SIDE_UPSTREAM]);
    cb_px_close_fd(&c->ufd);
}

int cb_px_pull(cb_proxy_t *p, cb_pconn_t *c, int side) {
    cb_pbuf_t *b = side == CB_SIDE_SANDBOX ? &c->c2u : &c->u2c;
    if (b->off > 0 && b->off == b->len) b->off = b->ready = b->len = 0;
    if (b->off > 0 && b->len == CB_PROXY_BUF) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->ready -= b->off;
        b->off = 0;
    }
    size_t room = CB_PROXY_BUF - b->len;
    if (room == 0) return 0;
    uint64_t left = p->cfg.max_bytes - p->st.bytes;
    if (left == 0) return -2;
    if (room > left) room = (size_t) left;
    long r = s_recv(c, side, b->data + b->len, room);
    if (r <= 0) return (int) r;
    b->len += (size_t) r;
    uint64_t n = (uint64_t) r;
    *(side == CB_SIDE_SANDBOX ? &c->up : &c->down) += n;
    p->st.bytes += n;
    /* a host's bytes up are counted as they are framed for it (s_frame_up,
     * route.c for heads): what is read here may belong to the next request */
    if (c->hs >= 0 && side == CB_SIDE_UPSTREAM) p->hosts[c->hs].down += n;
    return 1;
}

/* Writes what b holds ready to side.  1 progress, 0 nothing now, -2 error. */
static int s_push(cb_pconn_t *c, int side, cb_pbuf_t *b) {
    long w = cb_px_send(c, side, b->data + b->off, b->ready - b->off);
    if (w <= 0) return (int) w;
    b->off += (size_t) w;
    if (b->off == b->len) b->off = b->ready = b->len = 0; /* drained: all of it is free again */
    return 1;
}

/* The rewritten head first, then the framed body.  As s_push. */
static int s_push_up(cb_pconn_t *c) {
    if (c->hout_off < c->hout_len) {
        long w = cb_px_send(c, CB_SIDE_UPSTREAM, c->hout + c->hout_off, c->hout_len - c->hout_off);
        if (w <= 0) return (int) w;
        c->hout_off += (size_t) w;
        if (c->hout_off < c->hout_len) return 1;
    }
    return s_push(c, CB_SIDE_UPSTREAM, &c->c2u);
}

static void s_body_error(cb_proxy_t *p, cb_pconn_t *c, const char *what, const char *why) {
    PX_LOG(p, CB_LOG_WARNING, "proxy: #%llu %s: %s: closing", (unsigned long long) c->id, what,
           why);
    p->st.failed++;
    cb_px_close(p, c);
}

/* A request body's data looked at for placeholders (cb_body_data_fn). */
typedef struct {
    const cb_secrets_t *secrets; /* the table */
    cb_pconn_t *c;               /* whose body */
    const cb_secret_t *foreign;  /* the first secret found that is not c->host's */
} s_look_t;

static void s_look(void *ud, const char *d, size_t n) {
    s_look_t *l = ud;
    if (l->foreign == NULL)
        l->foreign = cb_secrets_scan(l->secrets, l->c->host, &l->c->body_scan, d, n);
}

/* Extends c2u's ready mark over the request's body, once its data is found
 * free of placeholders of secrets not bound to the host (bytes past the
 * mark are never sent).  0 ok, -1 c closed or answered. */
static int s_frame_up(cb_proxy_t *p, cb_pconn_t *c) {
    cb_pbuf_t *b = &c->c2u;
    if (c->state == CB_PX_TUNNEL) {
        if (c->hs >= 0) p->hosts[c->hs].up += b->len - b->ready;
        b->ready = b->len;
        return 0;
    }
    const char *why = "";
    s_look_t look = {.secrets = p->cfg.secrets, .c = c};
    bool scan = look.secrets != NULL && look.secrets->n > 0;
    long k = cb_body_scan_data(&c->req_body, b->data + b->ready, b->len - b->ready, &why,
                               scan ? s_look : NULL, &look);
    if (k < 0) {
        s_body_error(p, c, "malformed request body", why);
        return -1;
    }
    /* a chunked body's extensions and trailer fields are text too, which
     * its data pieces leave out: its bytes as framed are looked at as well */
    if (look.foreign == NULL && scan && c->req.chunked && k > 0)
        look.foreign =
            cb_secrets_scan(look.secrets, c->host, &c->frame_scan, b->data + b->ready, (size_t) k);
    if (look.foreign != NULL) {
        cb_px_foreign(p, c, look.foreign, "request's body");
        return -1;
    }
    b->ready += (size_t) k;
    if (c->hs >= 0) p->hosts[c->hs].up += (uint64_t) k;
    return 0;
}

/* The response's final head is parsed: how its body ends. */
static void s_resp_body(cb_pconn_t *c, const cb_http_resp_t *r) {
    if (r->close) c->close_after = true;
    if (r->status == 101) { /* we never forward Upgrade; if it happens, the rest is raw */
        cb_body_eof(&c->resp_body);
        c->close_after = true;
    } else if (strcmp(c->req.method, "HEAD") == 0 || r->status == 204 || r->status == 304) {
        cb_body_length(&c->resp_body, 0);
    } else if (r->chunked) {
        cb_body_chunked(&c->resp_body);
    } else if (r->has_length) {
        cb_body_length(&c->resp_body, r->length);
    } else { /* delimited by the upstream's close: so is our connection to the sandbox */
        cb_body_eof(&c->resp_body);
        c->close_after = true;
    }
}

/* Extends u2c's ready mark over the response.  0 ok, -1 c closed or
 * answered with an error. */
static int s_frame_down(cb_proxy_t *p, cb_pconn_t *c) {
    cb_pbuf_t *b = &c->u2c;
    if (c->state == CB_PX_TUNNEL) {
        b->ready = b->len;
        return 0;
    }
    while (!c->resp_done) {
        const char *why = "";
        if (!c->resp_head) {
            size_t avail = b->len - b->ready;
            size_t n = avail < CB_PROXY_HEAD_MAX ? avail : CB_PROXY_HEAD_MAX;
            cb_http_resp_t r;
            if (n < CB_PROXY_HEAD_MAX && !c->u_eof &&
                !cb_http_new_line(b->data + b->ready, n, &c->resp_seen))
                return 0; /* no new line: the verdict cannot have changed */
            int rc = cb_http_parse_response(b->data + b->ready, n, &r, &why);
            if (rc != CB_HTTP_INCOMPLETE) c->resp_seen = 0;
            if (rc == CB_HTTP_INCOMPLETE) {
                if (n < CB_PROXY_HEAD_MAX && !c->u_eof) return 0;
                why = n >= CB_PROXY_HEAD_MAX ? "the upstream's response head is too large"
                                             : "the upstream closed without a response";
                rc = 502;
            }
            if (rc != CB_HTTP_OK) {
                if (c->resp_started) {
                    s_body_error(p, c, "malformed response", why);
                } else {
                    char t[CB_PROXY_NAME_MAX + 16];
                    cb_px_target(c, t, sizeof t);
                    cb_px_deny(p, c, 502, "%s: %s", t, why);
                }
                return -1;
            }
            b->ready += r.head_len;
            c->resp_started = true;
            if (r.status >= 200 || r.status == 101) {
                c->resp_head = true;
                s_resp_body(c, &r);
            }
            continue; /* an interim 1xx: the next head follows */
        }
        long k = cb_body_scan(&c->resp_body, b->data + b->ready, b->len - b->ready, &why);
        if (k < 0) {
            s_body_error(p, c, "malformed response body", why);
            return -1;
        }
        b->ready += (size_t) k;
        if (cb_body_done(&c->resp_body) || (c->resp_body.state == CB_BODY_EOF && c->u_eof)) {
            c->resp_done = true;
            b->len = b->ready; /* whatever the upstream sent after it is dropped */
            if (!c->bump || c->u_eof || c->close_after) {
                cb_px_close_up(c); /* a bumped upstream stays for the next request */
                c->u_eof = true;
            }
        }
        break;
    }
    return 0;
}

void cb_px_start(cb_proxy_t *p, cb_pconn_t *c) {
    if (cb_px_buf_alloc(&c->u2c) < 0) {
        cb_px_deny(p, c, 502, "out of memory");
        return;
    }
    if (!c->bump) c->c_eof = c->u_eof = c->u_shut = false;
    c->resp_head = c->resp_started = c->resp_done = false;
    c->resp_seen = 0;
    if (c->hs >= 0 && !c->bump) p->hosts[c->hs].conns++;
    c->deadline = cb_now_ms() + p->cfg.idle_timeout_ms;
    if (c->req.kind == CB_HTTP_CONNECT && !c->forward && p->tls != NULL &&
        cb_secrets_bound(p->cfg.secrets, c->host)) {
        cb_px_bump_begin(p, c); /* the hosts with secrets: TLS ends here */
        return;
    }
    if (c->req.kind == CB_HTTP_CONNECT) {
        if (!c->forward) { /* a forwarded loopback pair has no CONNECT to answer */
            memcpy(c->u2c.data, CB_PX_ESTABLISHED, sizeof CB_PX_ESTABLISHED - 1);
            c->u2c.ready = c->u2c.len = sizeof CB_PX_ESTABLISHED - 1;
        }
        c->state = CB_PX_TUNNEL;
    } else {
        c->close_after = c->req.close;
        memset(&c->body_scan, 0, sizeof c->body_scan);
        memset(&c->frame_scan, 0, sizeof c->frame_scan);
        if (c->req.chunked)
            cb_body_chunked(&c->req_body);
        else
            cb_body_length(&c->req_body, c->req.has_length ? c->req.length : 0);
        c->state = CB_PX_FORWARD;
    }
    (void) s_frame_up(p, c); /* what came with the head */
}

/* The response is complete and delivered: the next request, or the end. */
static void s_finish(cb_proxy_t *p, cb_pconn_t *c) {
    c->n_req++;
    if (!c->bump || c->u_eof) cb_px_close_up(c);
    /* an early answer (a 413, say) can complete before the request is all
     * sent: what is left of it is no next head, nor is the upstream ready
     * for one */
    bool unsent = c->hout_off < c->hout_len || c->c2u.off < c->c2u.ready;
    if (c->close_after || unsent || !cb_body_done(&c->req_body) || (c->bump && c->ufd < 0)) {
        if (c->ssl[CB_SIDE_SANDBOX] != NULL) (void) SSL_shutdown(c->ssl[CB_SIDE_SANDBOX]);
        (void) shutdown(c->cfd, SHUT_WR); /* then drain what the sandbox still sends */
        c->state = CB_PX_LINGER;
        c->deadline = cb_now_ms() + CB_PROXY_LINGER_MS;
        return;
    }
    c->state = CB_PX_HEAD;
    if (!c->bump) { /* a bumped connection stays bound to its CONNECT target */
        c->rule = -1;
        c->host[0] = '\0';
        c->hs = -1; /* the next request's host is its own */
    }
    c->deadline = cb_now_ms() + p->cfg.head_timeout_ms;
    cb_px_next_head(p, c); /* a pipelined one may be here already */
}

void cb_px_relay(cb_proxy_t *p, cb_pconn_t *c, short crev, short urev) {
    bool progress = false;
    for (int round = 0; round < CB_PROXY_IO_ROUNDS; round++) {
        int r1 = 0, r2 = 0, r3 = 0, r4 = 0;
        if (!c->c_eof && (crev & (POLLIN | POLLOUT | POLLHUP | POLLERR)))
            r1 = cb_px_pull(p, c, CB_SIDE_SANDBOX);
        if (c->ufd >= 0 && !c->u_eof && (urev & (POLLIN | POLLOUT | POLLHUP | POLLERR)))
            r2 = cb_px_pull(p, c, CB_SIDE_UPSTREAM);
        if (r1 == -1) c->c_eof = true;
        if (r2 == -1) c->u_eof = true;
        if (r1 != -2 && r2 != -2) {
            if (s_frame_up(p, c) < 0 || s_frame_down(p, c) < 0) return;
            if (c->ufd >= 0) r3 = s_push_up(c);
            r4 = s_push(c, CB_SIDE_SANDBOX, &c->u2c);
        }
        if (r1 == -2 || r2 == -2 || r3 == -2 || r4 == -2) {
            if (p->st.bytes >= p->cfg.max_bytes && !p->budget_logged) {
                p->budget_logged = true;
                LOG_W("proxy: the session's network byte budget (%llu bytes) is used up: "
                      "closing tunnels, refusing new requests",
                      (unsigned long long) p->cfg.max_bytes);
            }
            cb_px_close(p, c);
            return;
        }
        if (r1 > 0 || r2 > 0 || r3 > 0 || r4 > 0)
            progress = true;
        else
            break;
    }
    if (progress) c->deadline = cb_now_ms() + p->cfg.idle_timeout_ms;
    bool up_sent = c->hout_off == c->hout_len && c->c2u.off == c->c2u.ready;
    if (c->c_eof && c->ufd >= 0 && up_sent && !c->u_shut) {
        if (c->ssl[CB_SIDE_UPSTREAM] != NULL) (void) SSL_shutdown(c->ssl[CB_SIDE_UPSTREAM]);
        (void) shutdown(c->ufd, SHUT_WR);
        c->u_shut = true;
    }
    if (c->u2c.off != c->u2c.len) return; /* the sandbox has not got everything yet */
    if (c->state == CB_PX_FORWARD && c->resp_done)
        s_finish(p, c);
    else if (c->u_eof) /* the tunnel is over, or the response was cut short */
        cb_px_close(p, c);
}
