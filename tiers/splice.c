/*
 * splice.c - see splice.h.
 */
#include "tiers/splice.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

void cb_splice_events(const cb_splice_t *s, int a, int b, struct pollfd pf[2]) {
    bool on = a >= 0 && b >= 0;
    pf[0] = (struct pollfd){.fd = on ? a : -1,
                            .events = (short) ((s->ab.len == 0 ? POLLIN : 0) |
                                               (s->ba.len ? POLLOUT : 0))};
    pf[1] = (struct pollfd){.fd = on ? b : -1,
                            .events = (short) ((s->ba.len == 0 ? POLLIN : 0) |
                                               (s->ab.len ? POLLOUT : 0))};
}

/* Moves what fits from `from` through d to `to`; false when `from` ended
 * (EOF or an error), or `to` broke. */
static bool s_move(cb_splice_dir_t *d, int from, int to, short from_ev) {
    if (d->len == d->off && (from_ev & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) {
        ssize_t n = read(from, d->buf, sizeof d->buf);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
        if (n > 0) d->len = (size_t) n, d->off = 0;
    }
    if (d->len > d->off) { /* nonblocking: EAGAIN waits for POLLOUT */
        ssize_t n = send(to, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
        if (n > 0) d->off += (size_t) n;
        if (d->off == d->len) d->len = d->off = 0;
    }
    return true;
}

bool cb_splice_step(cb_splice_t *s, int a, int b, const struct pollfd pf[2]) {
    if (a < 0 || b < 0) return true;
    return s_move(&s->ab, a, b, pf[0].revents) && s_move(&s->ba, b, a, pf[1].revents);
}

void cb_splice_clear(cb_splice_t *s) { s->ab.len = s->ab.off = s->ba.len = s->ba.off = 0; }
