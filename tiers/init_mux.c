/*
 * init_mux.c - see init_mux.h.  Part of the static cellblock-init: libc only,
 * fixed buffers, nothing logged (the host reads cb.io as untrusted anyway).
 *
 * Why the order holds: the runner writes its output to a pipe and then a
 * frame to its socket, so when init has read the frame's bytes the output
 * is already in the pipe; FIONREAD right after that read counts it (and
 * perhaps some written later, which may go either way, as in the
 * namespaces tier).  Those bytes become records ahead of the event record,
 * the port keeps the records' order, the host delivers each record whole
 * before the next: the output is in the kernel's pipe before the frame is
 * on its socket, and the kernel drains the pipes before it handles a frame.
 */
#include "tiers/init_mux.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define S_ROUNDS  64 /* records made, or reads of the port, per pump */
#define S_WAIT_MS 5  /* between looks for the host's end of the port */

enum { S_OUT = 0, S_ERR = 1, S_EV = 2 };

static int64_t s_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int s_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int cb_init_mux_open(cb_init_mux_t *m, int port, int runner[3]) {
    memset(m, 0, sizeof *m);
    m->port = port;
    m->src[S_OUT] = m->src[S_ERR] = m->src[S_EV] = -1;
    /* a port the host has not opened yet reads as ended: wait for it */
    int waited = 0;
    for (;;) {
        struct pollfd pf = {.fd = port, .events = POLLOUT};
        if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT) && !(pf.revents & POLLHUP)) break;
        if (waited >= CB_VM_PORT_WAIT_MS) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct timespec nap = {.tv_sec = 0, .tv_nsec = S_WAIT_MS * 1000000L};
        nanosleep(&nap, NULL);
        waited += S_WAIT_MS;
    }
    int out[2], err[2], ev[2];
    if (pipe2(out, O_CLOEXEC) < 0) return -1;
    if (pipe2(err, O_CLOEXEC) < 0) return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ev) < 0) return -1;
    m->src[S_OUT] = out[0];
    m->src[S_ERR] = err[0];
    m->src[S_EV] = ev[0];
    runner[0] = out[1];
    runner[1] = err[1];
    runner[2] = ev[1];
    for (int i = 0; i < 3; i++)
        if (s_nonblock(m->src[i]) < 0) return -1;
    return 0;
}

void cb_init_mux_poll(const cb_init_mux_t *m, struct pollfd pf[CB_INIT_MUX_NFDS]) {
    bool gone = m->host_gone;
    bool up = m->up_len > m->up_off;
    bool room = sizeof m->up - m->up_len >= CB_VM_REC_HDR + CB_VM_MUX_PAYLOAD_MAX;
    bool down = m->down_len > m->down_off;
    short port = (short) ((up ? POLLOUT : 0) | (!down ? POLLIN : 0));
    pf[0] = (struct pollfd){.fd = gone || port == 0 ? -1 : m->port, .events = port};
    /* with a chunk of events held, the pipes are read only for what it owes */
    bool read_src = !gone && (room || !up);
    for (int w = S_OUT; w <= S_ERR; w++)
        pf[1 + w] =
            (struct pollfd){.fd = read_src && m->ev_len == 0 ? m->src[w] : -1, .events = POLLIN};
    short ev = (short) ((read_src && m->ev_len == 0 ? POLLIN : 0) | (down ? POLLOUT : 0));
    pf[1 + S_EV] = (struct pollfd){.fd = ev ? m->src[S_EV] : -1, .events = ev};
}

static void s_close_src(cb_init_mux_t *m, int w) {
    if (m->src[w] >= 0) close(m->src[w]);
    m->src[w] = -1;
    if (w < S_EV) m->owed[w] = 0;
}

/* Writes what the port takes; makes room for a whole record when it can. */
static bool s_flush(cb_init_mux_t *m) {
    bool moved = false;
    while (m->up_off < m->up_len && !m->host_gone) {
        ssize_t w = write(m->port, m->up + m->up_off, m->up_len - m->up_off);
        if (w > 0) {
            m->up_off += (size_t) w;
            moved = true;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            /* full, or the host hung up (a port without its host only waits) */
            struct pollfd pf = {.fd = m->port, .events = POLLOUT};
            if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL)))
                m->host_gone = true;
            break;
        } else {
            m->host_gone = true; /* the port went away */
        }
    }
    if (m->host_gone || m->up_off == m->up_len) {
        m->up_off = m->up_len = 0; /* (nobody to take them when the host is gone) */
    } else if (m->up_off > 0 && sizeof m->up - m->up_len < CB_VM_REC_HDR + CB_VM_MUX_PAYLOAD_MAX) {
        memmove(m->up, m->up + m->up_off, m->up_len - m->up_off);
        m->up_len -= m->up_off;
        m->up_off = 0;
    }
    return moved;
}

static bool s_room(cb_init_mux_t *m) {
    if (sizeof m->up - m->up_len >= CB_VM_REC_HDR + CB_VM_MUX_PAYLOAD_MAX) return true;
    (void) s_flush(m);
    return sizeof m->up - m->up_len >= CB_VM_REC_HDR + CB_VM_MUX_PAYLOAD_MAX;
}

static void s_record(cb_init_mux_t *m, unsigned type, const void *p, size_t n) {
    cb_vm_rec_header(m->up + m->up_len, type, n);
    memcpy(m->up + m->up_len + CB_VM_REC_HDR, p, n);
    m->up_len += CB_VM_REC_HDR + n;
}

/* A record of up to max bytes read from pipe w (room checked): what read(2)
 * returned. */
static ssize_t s_read_pipe(cb_init_mux_t *m, int w, size_t max) {
    if (max > CB_VM_MUX_PAYLOAD_MAX) max = CB_VM_MUX_PAYLOAD_MAX;
    ssize_t n;
    do
        n = read(m->src[w], m->up + m->up_len + CB_VM_REC_HDR, max);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        cb_vm_rec_header(m->up + m->up_len, w == S_OUT ? CB_VM_REC_STDOUT : CB_VM_REC_STDERR,
                         (size_t) n);
        m->up_len += CB_VM_REC_HDR + (size_t) n;
    }
    return n;
}

/* Bytes in pipe w now (0 if it cannot say). */
static size_t s_queued(const cb_init_mux_t *m, int w) {
    int n = 0;
    if (m->src[w] < 0 || ioctl(m->src[w], FIONREAD, &n) < 0 || n < 0) return 0;
    return (size_t) n;
}

/* One step of runner -> host.  False when nothing could be done. */
static bool s_up_step(cb_init_mux_t *m) {
    if (m->ev_len > 0) { /* first what was written before these events */
        int w = m->owed[S_OUT] > 0 ? S_OUT : m->owed[S_ERR] > 0 ? S_ERR : -1;
        if (w >= 0) {
            ssize_t n = s_read_pipe(m, w, m->owed[w]);
            if (n > 0)
                m->owed[w] -= (size_t) n;
            else if (n == 0 || errno != EAGAIN)
                s_close_src(m, w);
            else
                m->owed[w] = 0; /* (cannot happen: FIONREAD counted them) */
            return true;
        }
        s_record(m, CB_VM_REC_EVENTS, m->ev, m->ev_len);
        m->ev_len = 0;
        return true;
    }
    if (m->src[S_EV] >= 0) {
        ssize_t n = read(m->src[S_EV], m->ev, sizeof m->ev);
        if (n > 0) {
            m->ev_len = (size_t) n;
            m->owed[S_OUT] = s_queued(m, S_OUT);
            m->owed[S_ERR] = s_queued(m, S_ERR);
            return true;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            s_close_src(m, S_EV);
            return true;
        }
    }
    bool any = false;
    for (int w = S_OUT; w <= S_ERR; w++) {
        if (m->src[w] < 0 || !s_room(m)) continue;
        ssize_t n = s_read_pipe(m, w, CB_VM_MUX_PAYLOAD_MAX);
        if (n > 0) {
            any = true;
        } else if (n == 0 || errno != EAGAIN) {
            s_close_src(m, w);
            any = true;
        }
    }
    return any;
}

static bool s_up(cb_init_mux_t *m) {
    bool moved = s_flush(m);
    for (int round = 0; round < S_ROUNDS; round++) {
        if (m->host_gone || !s_room(m)) return moved;
        if (!s_up_step(m)) return moved;
        moved = true;
    }
    m->more = true;
    return moved;
}

/* host -> runner, paced by the runner's reading. */
static bool s_down(cb_init_mux_t *m) {
    bool moved = false;
    for (int round = 0; round < S_ROUNDS; round++) {
        if (m->down_off == m->down_len) {
            m->down_off = m->down_len = 0;
            if (m->host_gone) return moved;
            ssize_t n = read(m->port, m->down, sizeof m->down);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) return moved;
            if (n <= 0) { /* the host hung up: the runner reads EOF on fd 3 */
                m->host_gone = true;
                if (m->src[S_EV] >= 0) (void) shutdown(m->src[S_EV], SHUT_WR);
                return true;
            }
            m->down_len = (size_t) n;
            moved = true;
        }
        if (m->src[S_EV] < 0) { /* the runner is gone: its bytes go nowhere */
            m->down_off = m->down_len;
            continue;
        }
        ssize_t w = send(m->src[S_EV], m->down + m->down_off, m->down_len - m->down_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) return moved;
        if (w <= 0) {
            m->down_off = m->down_len;
            continue;
        }
        m->down_off += (size_t) w;
        moved = true;
    }
    m->more = true;
    return moved;
}

bool cb_init_mux_pump(cb_init_mux_t *m) {
    m->more = false;
    bool moved = s_down(m);
    return s_up(m) || moved;
}

static void s_wait(cb_init_mux_t *m, int timeout_ms) {
    struct pollfd pf[CB_INIT_MUX_NFDS];
    cb_init_mux_poll(m, pf);
    (void) poll(pf, CB_INIT_MUX_NFDS, m->more ? 0 : timeout_ms);
}

/* Until the port takes more (or its host is gone). */
static void s_wait_port(cb_init_mux_t *m) {
    struct pollfd pf = {.fd = m->port, .events = POLLOUT};
    if (poll(&pf, 1, -1) == 1 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL))) m->host_gone = true;
}

void cb_init_mux_end(cb_init_mux_t *m, int status, bool oom) {
    int64_t quiet_until = s_now_ms() + CB_VM_END_QUIET_MS;
    for (;;) {
        bool moved = cb_init_mux_pump(m);
        bool ended = m->src[S_OUT] < 0 && m->src[S_ERR] < 0 && m->src[S_EV] < 0 && m->ev_len == 0;
        if (m->host_gone || ended) break;
        int64_t now = s_now_ms();
        if (moved || m->up_len > m->up_off)
            quiet_until = now + CB_VM_END_QUIET_MS; /* the host's pace */
        if (now >= quiet_until) break; /* a writer outlived the cgroup's kill: give up on it */
        s_wait(m, (int) (quiet_until - now));
    }
    while (!m->host_gone && !s_room(m))
        s_wait_port(m);
    if (m->host_gone) return;
    uint8_t rec[CB_VM_REC_EXIT_LEN] = {
        (uint8_t) ((unsigned) status >> 24), (uint8_t) ((unsigned) status >> 16),
        (uint8_t) ((unsigned) status >> 8), (uint8_t) status, oom ? 1 : 0};
    s_record(m, CB_VM_REC_EXIT, rec, sizeof rec);
    while (!m->host_gone && m->up_len > m->up_off) {
        (void) s_flush(m);
        if (m->up_len > m->up_off) s_wait_port(m);
    }
}
