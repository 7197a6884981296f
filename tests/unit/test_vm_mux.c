/* test_vm_mux.c - the micro-VM's one ordered channel (tiers/vm_mux.h): the
 * guest's multiplexer (tiers/init_mux.c, linked in directly: it is part of
 * cellblock-init) and the host's demultiplexer (tiers/vm_demux.c), joined by
 * a socketpair where the virtio port would be.  Output written before a
 * frame is in the kernel's pipe before the frame is on its socket, also
 * while that pipe is full; the kernel's bytes reach the runner; records the
 * guest may not send are dropped (noted once), an oversized one breaks the
 * channel; the exit record comes after all output. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiers/init_mux.h"
#include "tiers/vm_demux.h"
#include "tap.h"

typedef struct {
    int port[2];          /* [0] the guest's end (the virtio port), [1] the supervisor's */
    int kout[2], kerr[2]; /* the kernel's pipes: [0] it reads, [1] the supervisor writes */
    int kev[2];           /* the kernel's event socket: [0] the kernel, [1] the supervisor */
    int run[3];           /* the runner's fds 1, 2, 3 */
    cb_init_mux_t mux;    /* guest */
    cb_vm_demux_t dmx;    /* host */
} rig_t;

static void nonblock(int fd) { (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static int rig_open(rig_t *r) {
    memset(r, 0, sizeof *r);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r->port) < 0 ||
        pipe2(r->kout, O_CLOEXEC) < 0 || pipe2(r->kerr, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r->kev) < 0)
        return -1;
    nonblock(r->port[0]);
    nonblock(r->kout[1]); /* as the supervisor sets them */
    nonblock(r->kerr[1]);
    nonblock(r->kout[0]);
    nonblock(r->kerr[0]);
    nonblock(r->kev[0]);
    if (cb_init_mux_open(&r->mux, r->port[0], r->run) < 0) return -1;
    for (int i = 0; i < 3; i++)
        nonblock(r->run[i]);
    cb_vm_demux_init(&r->dmx, r->port[1], r->kout[1], r->kerr[1], r->kev[1]);
    return 0;
}

static void rig_close(rig_t *r) {
    int fds[] = {r->port[0], r->port[1], r->kout[0], r->kout[1], r->kerr[0], r->kerr[1],
                 r->kev[0],  r->kev[1],  r->run[0],  r->run[1],  r->run[2]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    for (int i = 0; i < 3; i++)
        if (r->mux.src[i] >= 0) close(r->mux.src[i]);
}

/* Both sides pump until nothing moves. */
static void settle(rig_t *r) {
    for (int i = 0; i < 1000; i++) {
        bool a = cb_init_mux_pump(&r->mux);
        bool b = cb_vm_demux_pump(&r->dmx);
        bool c = cb_init_mux_pump(&r->mux);
        if (!a && !b && !c && !r->mux.more) return;
    }
}

static size_t slurp(int fd, char *buf, size_t cap) {
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - got);
        if (n <= 0) return got;
        got += (size_t) n;
        if (got == cap) return got;
    }
}

static void put(int fd, const char *s) { (void) !write(fd, s, strlen(s)); }

/* Fills a non-blocking pipe; returns the bytes it took. */
static size_t fill(int fd) {
    static char junk[4096];
    memset(junk, 'j', sizeof junk);
    size_t n = 0;
    for (;;) {
        ssize_t w = write(fd, junk, sizeof junk);
        if (w <= 0) return n;
        n += (size_t) w;
    }
}

/* Raw records from the guest side, bypassing the multiplexer (a hostile guest). */
static void raw(rig_t *r, unsigned type, size_t len, const void *p, size_t plen) {
    uint8_t h[CB_VM_REC_HDR];
    cb_vm_rec_header(h, type, len);
    (void) !write(r->port[0], h, sizeof h);
    if (plen) (void) !write(r->port[0], p, plen);
}

static void test_order_and_backpressure(void) {
    rig_t r;
    TAP_OK(rig_open(&r) == 0, "rig");
    put(r.run[0], "out-1\n");
    put(r.run[1], "err-1\n");
    put(r.run[2], "FRAME-1");
    settle(&r);
    char buf[256] = "";
    size_t n = slurp(r.kev[0], buf, sizeof buf - 1);
    buf[n] = '\0';
    TAP_EQ_STR(buf, "FRAME-1", "the frame reached the kernel's socket");
    n = slurp(r.kout[0], buf, sizeof buf - 1);
    buf[n] = '\0';
    TAP_EQ_STR(buf, "out-1\n", "and the stdout written before it was in the pipe");
    n = slurp(r.kerr[0], buf, sizeof buf - 1);
    buf[n] = '\0';
    TAP_EQ_STR(buf, "err-1\n", "and the stderr");

    /* the kernel's stdout pipe is full: the frame written after more output waits */
    size_t filled = fill(r.kout[1]);
    put(r.run[0], "out-2\n");
    put(r.run[2], "FRAME-2");
    settle(&r);
    n = slurp(r.kev[0], buf, sizeof buf - 1);
    TAP_EQ_INT(n, 0, "a frame stays behind the output a full pipe holds back");
    TAP_EQ_INT(r.dmx.blocked, CB_VM_REC_STDOUT, "the demux waits for the stdout pipe");
    static char big[1 << 20];
    size_t got = slurp(r.kout[0], big, sizeof big);
    settle(&r);
    got += slurp(r.kout[0], big + got, sizeof big - got);
    TAP_EQ_INT(got, filled + 6, "the pipe drained: the held output follows");
    TAP_OK(got >= 6 && memcmp(big + got - 6, "out-2\n", 6) == 0, "the output arrived last");
    n = slurp(r.kev[0], buf, sizeof buf - 1);
    buf[n] = '\0';
    TAP_EQ_STR(buf, "FRAME-2", "and then the frame");
    rig_close(&r);
}

/* 1 MiB of stdout through pipes of 64 KiB each side, interleaved with frames:
 * every byte, in order, each frame after the output before it. */
static void test_bulk(void) {
    rig_t r;
    TAP_OK(rig_open(&r) == 0, "rig (bulk)");
    static char out[1 << 20], got[1 << 20];
    for (size_t i = 0; i < sizeof out; i++)
        out[i] = (char) ('a' + i % 26);
    size_t sent = 0, recvd = 0, frames = 0;
    bool in_order = true;
    for (int guard = 0; guard < 100000 && recvd < sizeof out; guard++) {
        if (sent < sizeof out) {
            size_t chunk = sizeof out - sent < 10007 ? sizeof out - sent : 10007;
            ssize_t w = write(r.run[0], out + sent, chunk);
            if (w > 0) {
                sent += (size_t) w;
                char f[32]; /* a frame naming how much output came before it */
                int fl = snprintf(f, sizeof f, "F%zu;", sent);
                if (write(r.run[2], f, (size_t) fl) == fl) frames++;
            }
        }
        (void) cb_init_mux_pump(&r.mux);
        (void) cb_vm_demux_pump(&r.dmx);
        char ev[4096];
        ssize_t e = guard % 16 == 0 ? read(r.kev[0], ev, sizeof ev - 1) : -1;
        /* a slow kernel (its pipe is mostly full) that drains stdout before
         * handling what the socket brought */
        ssize_t k;
        size_t step = e > 0 ? sizeof got - recvd : 1024;
        while (step > 0 && (k = read(r.kout[0], got + recvd, step)) > 0) {
            recvd += (size_t) k;
            step -= e > 0 ? 0 : (size_t) k;
        }
        if (e > 0) {
            ev[e] = '\0';
            for (char *p = ev; (p = strchr(p, 'F')) != NULL; p++)
                if ((size_t) strtoul(p + 1, NULL, 10) > recvd) in_order = false;
        }
    }
    TAP_EQ_INT(recvd, sizeof out, "1 MiB of output arrived");
    TAP_OK(memcmp(out, got, sizeof out) == 0, "byte for byte");
    TAP_OK(frames > 0 && in_order, "no frame before the output written ahead of it (%zu frames)",
           frames);
    rig_close(&r);
}

static void test_down_and_hangup(void) {
    rig_t r;
    TAP_OK(rig_open(&r) == 0, "rig (down)");
    put(r.kev[0], "REQUEST");
    settle(&r);
    char buf[64] = "";
    size_t n = slurp(r.run[2], buf, sizeof buf - 1);
    buf[n] = '\0';
    TAP_EQ_STR(buf, "REQUEST", "the kernel's bytes reach the runner's fd 3");
    shutdown(r.kev[0], SHUT_WR); /* the kernel hangs up */
    settle(&r);
    TAP_OK(r.dmx.kernel_eof && r.mux.host_gone, "the hang-up reaches the guest");
    TAP_EQ_INT(read(r.run[2], buf, sizeof buf), 0, "the runner reads EOF on fd 3");
    rig_close(&r);
}

static void test_untrusted_records(void) {
    rig_t r;
    TAP_OK(rig_open(&r) == 0, "rig (records)");
    raw(&r, 9, 3, "abc", 3);
    raw(&r, CB_VM_REC_STDOUT, 3, "ok\n", 3);
    raw(&r, 200, 0, NULL, 0);
    raw(&r, CB_VM_REC_EXIT, 4, "\0\0\0\0", 4); /* not 5 bytes: dropped */
    (void) cb_vm_demux_pump(&r.dmx);
    char buf[512] = "";
    size_t n = slurp(r.kout[0], buf, sizeof buf - 1);
    buf[n] = '\0';
    TAP_EQ_STR(buf, "ok\n", "the stdout record between unknown ones is delivered");
    TAP_EQ_INT(r.dmx.dropped, 3, "unknown types and a short exit record dropped");
    TAP_OK(!r.dmx.have_exit, "a malformed exit record is no status");
    n = slurp(r.kerr[0], buf, sizeof buf - 1);
    buf[n] = '\0';
    TAP_OK(strstr(buf, "type 9") != NULL && strstr(buf, "type 200") == NULL,
           "noted once on the runner's stderr: %s", buf);
    raw(&r, CB_VM_REC_STDOUT, CB_VM_MUX_PAYLOAD_MAX + 1, "x", 1);
    raw(&r, CB_VM_REC_STDOUT, 3, "no\n", 3);
    (void) cb_vm_demux_pump(&r.dmx);
    TAP_OK(r.dmx.broken && cb_vm_demux_over(&r.dmx), "a record over the bound breaks the channel");
    TAP_EQ_INT(slurp(r.kout[0], buf, sizeof buf), 0, "and nothing after it is delivered");
    struct pollfd pf[CB_VM_DEMUX_NFDS];
    cb_vm_demux_poll(&r.dmx, pf);
    TAP_EQ_INT(pf[0].fd, -1, "the port is no longer read");
    rig_close(&r);
}

static void test_exit_after_output(void) {
    rig_t r;
    TAP_OK(rig_open(&r) == 0, "rig (exit)");
    put(r.run[0], "last words\n");
    put(r.run[2], "DONE");
    for (int i = 0; i < 3; i++) { /* the runner is gone */
        close(r.run[i]);
        r.run[i] = -1;
    }
    pid_t host = fork(); /* the host's side, while the guest ends */
    if (host == 0) {
        for (int i = 0; i < 100000 && !cb_vm_demux_over(&r.dmx); i++) {
            struct pollfd pf[CB_VM_DEMUX_NFDS];
            cb_vm_demux_poll(&r.dmx, pf);
            (void) poll(pf, CB_VM_DEMUX_NFDS, 100);
            (void) cb_vm_demux_pump(&r.dmx);
        }
        char out[64] = "", ev[64] = "";
        size_t a = slurp(r.kout[0], out, sizeof out - 1), b = slurp(r.kev[0], ev, sizeof ev - 1);
        out[a] = ev[b] = '\0';
        bool ok = r.dmx.have_exit && r.dmx.status == 0x0900 && !r.dmx.oom &&
                  strcmp(out, "last words\n") == 0 && strcmp(ev, "DONE") == 0;
        _exit(ok ? 0 : 1);
    }
    cb_init_mux_end(&r.mux, 0x0900, false);
    int st = -1;
    (void) waitpid(host, &st, 0);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "the exit record arrives after the output and the last frame, status intact");
    rig_close(&r);
}

int main(void) {
    test_order_and_backpressure();
    test_bulk();
    test_down_and_hangup();
    test_untrusted_records();
    test_exit_after_output();
    TAP_DONE();
}
