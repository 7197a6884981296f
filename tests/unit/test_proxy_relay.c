/* test_proxy_relay.c - the response side of relay.c's framing, driven through
 * the proxy's own cb_px_start and cb_px_relay on socketpairs (the sandbox
 * side and the upstream), as test_proxy_log.c drives cb_px_deny.
 *
 * An upstream's head is parsed again only when a line feed came since the
 * proxy last looked (c->resp_seen, cb_http_new_line).  What was seen belongs
 * to one head: it starts again with the head's verdict and with each
 * response, so a short head that arrives whole with a body without line
 * feeds, after a long head, is parsed at once; and it counts from the head's
 * start (u2c.ready), so it stays right when the buffer is compacted under a
 * head not yet whole.  The integration test (test_proxy_requests.py, response
 * heads a byte at a time) cannot see the first: there the proxy always looks
 * at an empty buffer before a response comes, which starts what was seen
 * again anyway; here the next upstream answers before the proxy looks. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isolate/log.h"
#include "proxy/proxy_priv.h"
#include "tap.h"

#define PUMP_ROUNDS  64                    /* cb_px_relay calls before giving up */
#define GOT_MAX      (CB_PROXY_BUF + 4096) /* bytes the sandbox side may get here */
#define INTERIM_SIZE 8000                  /* bytes of one padded 103 head */

static const char s_request[] = "GET http://a.test/x HTTP/1.1\r\n\r\n";

/* A proxy with just what relay.c and cb_px_close use. */
static cb_proxy_t *s_proxy(void) {
    cb_proxy_t *p = calloc(1, sizeof *p);
    p->cfg.max_conns = 1;
    p->cfg.max_bytes = (uint64_t) 1 << 40;
    p->cfg.idle_timeout_ms = p->cfg.head_timeout_ms = 60000;
    p->slots = calloc(1, sizeof *p->slots);
    p->gens = calloc(1, sizeof *p->gens);
    p->log_tokens = CB_PROXY_LOG_BURST;
    p->log_refill = cb_now_ms();
    return p;
}

/* A connection in slot 0 whose request (s_request) was parsed; *sbx is the
 * sandbox's end of it (non-blocking). */
static cb_pconn_t *s_conn(cb_proxy_t *p, int *sbx) {
    cb_pconn_t *c = calloc(1, sizeof *c);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) abort();
    c->cfd = sv[0];
    *sbx = sv[1];
    c->ufd = c->hs = c->rule = -1;
    c->state = CB_PX_CONNECT;
    const char *why;
    if (cb_px_buf_alloc(&c->c2u) < 0 ||
        cb_http_parse(s_request, sizeof s_request - 1, &c->req, &why) != CB_HTTP_OK)
        abort();
    p->slots[0] = c;
    p->n_open = 1;
    return c;
}

/* A new upstream for c, as route.c connects one for each request: the
 * proxy's end becomes c->ufd, the upstream's end is returned. */
static int s_upstream(cb_pconn_t *c) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) abort();
    c->ufd = sv[0];
    c->state = CB_PX_CONNECT;
    return sv[1];
}

static void s_send(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EAGAIN) {
            (void) poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, 1000);
            continue;
        }
        if (w <= 0) abort();
        s += w;
        n -= (size_t) w;
    }
}

/* What the sandbox side has got so far, appended to got (*n bytes). */
static void s_take(int sbx, char *got, size_t *n) {
    ssize_t r;
    while (*n < GOT_MAX && (r = recv(sbx, got + *n, GOT_MAX - *n, MSG_DONTWAIT)) > 0)
        *n += (size_t) r;
}

/* Relays while c forwards a response (it is back at HEAD once the response
 * is delivered), taking what the sandbox side gets, until want bytes came. */
static void s_pump(cb_proxy_t *p, cb_pconn_t *c, int sbx, char *got, size_t *n, size_t want) {
    for (int i = 0; i < PUMP_ROUNDS && *n < want; i++) {
        if (c->state == CB_PX_FORWARD) cb_px_relay(p, c, POLLIN | POLLOUT, POLLIN | POLLOUT);
        s_take(sbx, got, n);
    }
}

static bool s_same(const char *got, size_t n, const char *want, size_t want_len) {
    return n == want_len && memcmp(got, want, n) == 0;
}

/* A long head a byte at a time, then the next response on the same
 * connection: a short head and a body without line feeds, all there before
 * the proxy first looks. */
static void s_next_response(cb_proxy_t *p) {
    static char got[GOT_MAX];
    static char head1[512];
    int sbx;
    cb_pconn_t *c = s_conn(p, &sbx);
    int ups = s_upstream(c);
    cb_px_start(p, c);
    TAP_EQ_INT(c->state, CB_PX_FORWARD, "plain http: the response is framed");
    int w = snprintf(head1, sizeof head1,
                     "HTTP/1.1 200 OK\r\nX-Pad: %0300d\r\n"
                     "Content-Length: 4\r\n\r\n",
                     0);
    size_t len1 = (size_t) w, n = 0;
    bool quiet = true, seen_all = true;
    for (size_t i = 0; i < len1; i++) {
        s_send(ups, head1 + i, 1);
        cb_px_relay(p, c, POLLIN | POLLOUT, POLLIN | POLLOUT);
        s_take(sbx, got, &n);
        if (i + 1 < len1) {
            quiet = quiet && n == 0 && !c->resp_head;
            seen_all = seen_all && c->resp_seen == i + 1;
        }
    }
    TAP_OK(quiet, "a head a byte at a time: nothing for the sandbox until it is whole");
    TAP_OK(seen_all, "... each byte seen once: the next parse waits for a line feed after it");
    TAP_OK(c->resp_head, "its last line feed ends it");
    TAP_EQ_INT(c->resp_seen, 0, "what was seen starts again with the head's verdict");
    s_send(ups, "long", 4);
    memcpy(head1 + len1, "long", 4);
    s_pump(p, c, sbx, got, &n, len1 + 4);
    TAP_OK(s_same(got, n, head1, len1 + 4), "the sandbox gets it whole (%zu of %zu)", n, len1 + 4);
    TAP_EQ_INT(c->state, CB_PX_HEAD, "and the connection waits for the next request");
    close(ups);

    /* the next request, to an upstream that answers before the proxy looks;
     * resp_seen as the long head left it had its verdict not started it
     * again (the reset in cb_px_start is what then keeps it right) */
    static char resp2[512];
    int w2 =
        snprintf(resp2, sizeof resp2, "HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n%0400d", 0);
    size_t len2 = (size_t) w2;
    TAP_OK(memchr(resp2 + len1, '\n', len2 - len1) == NULL,
           "(the short head's line feeds are all before where the long one ended)");
    ups = s_upstream(c);
    s_send(ups, resp2, len2);
    c->resp_seen = len1;
    cb_px_start(p, c);
    n = 0;
    s_pump(p, c, sbx, got, &n, len2);
    TAP_OK(s_same(got, n, resp2, len2), "the next response reaches the sandbox whole (%zu of %zu)",
           n, len2);
    close(ups);
    close(sbx);
    cb_px_close(p, c);
}

/* Fills the socket from fd towards its peer: the sandbox does not read.
 * Returns the bytes written. */
static size_t s_fill(int fd) {
    static const char junk[4096] = {0};
    size_t n = 0;
    ssize_t w;
    while ((w = send(fd, junk, sizeof junk, MSG_NOSIGNAL | MSG_DONTWAIT)) > 0)
        n += (size_t) w;
    return n;
}

/* u2c full of interim (103) heads the sandbox has not taken yet and the
 * start of the final head, all but its last line feed: the buffer is
 * compacted once the sandbox reads, and then that one line feed ends it. */
static void s_compaction(cb_proxy_t *p) {
    static const char final_head[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    static char want[CB_PROXY_BUF + 64], got[GOT_MAX], sink[256 * 1024];
    size_t part = sizeof final_head - 2; /* all of it but its last '\n' */
    size_t t = CB_PROXY_BUF - part, len = 0;
    size_t bare = sizeof "HTTP/1.1 103 Early Hints\r\nX-Pad: \r\n\r\n" - 1;
    while (len < t) { /* padded 103 heads, exactly t bytes */
        size_t k = t - len > INTERIM_SIZE + bare ? INTERIM_SIZE : t - len;
        int w = snprintf(want + len, sizeof want - len,
                         "HTTP/1.1 103 Early Hints\r\nX-Pad: %0*d\r\n\r\n", (int) (k - bare), 0);
        if (w < 0 || (size_t) w != k) abort();
        len += (size_t) w;
    }
    memcpy(want + len, final_head, sizeof final_head - 1);
    len += sizeof final_head - 1;
    memcpy(want + len, "hello", 5);
    len += 5;
    TAP_EQ_INT(len, CB_PROXY_BUF + 1 + 5, "(the buffer ends before the head's last line feed)");

    int sbx;
    cb_pconn_t *c = s_conn(p, &sbx);
    size_t filled = s_fill(c->cfd);
    int ups = s_upstream(c);
    cb_px_start(p, c);
    size_t sent = 0;
    for (int i = 0; i < PUMP_ROUNDS && c->u2c.len < CB_PROXY_BUF; i++) {
        ssize_t w = send(ups, want + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) sent += (size_t) w;
        cb_px_relay(p, c, POLLIN | POLLOUT, POLLIN | POLLOUT);
    }
    s_send(ups, want + sent, len - sent);
    cb_px_relay(p, c, POLLIN | POLLOUT, POLLIN | POLLOUT);
    TAP_OK(c->u2c.len == CB_PROXY_BUF && c->u2c.off == 0 && c->u2c.ready == t,
           "u2c full, the interim heads framed, none sent (len %zu off %zu ready %zu)", c->u2c.len,
           c->u2c.off, c->u2c.ready);
    TAP_OK(!c->resp_head && c->resp_seen == part,
           "the final head waits, all of it seen (%zu of %zu bytes)", c->resp_seen, part);

    /* the sandbox reads: the proxy sends, compacts, reads the last byte */
    size_t n = 0, drained = 0;
    for (int i = 0; i < PUMP_ROUNDS * 64 && drained < filled; i++) {
        ssize_t r = recv(sbx, sink, filled - drained < sizeof sink ? filled - drained : sizeof sink,
                         MSG_DONTWAIT);
        if (r > 0) drained += (size_t) r;
    }
    TAP_EQ_INT(drained, filled, "(what filled the sandbox's socket is read)");
    s_pump(p, c, sbx, got, &n, len);
    TAP_OK(s_same(got, n, want, len),
           "after compaction one line feed ends the head: the sandbox gets all (%zu of %zu)", n,
           len);
    close(ups);
    close(sbx);
    cb_px_close(p, c);
}

int main(void) {
    cb_log_threshold = CB_LOG_WARNING;
    cb_proxy_t *p = s_proxy();
    s_next_response(p);
    s_compaction(p);
    TAP_EQ_INT(p->n_open, 0, "every connection closed");
    free(p->slots);
    free(p->gens);
    free(p);
    TAP_DONE();
}
