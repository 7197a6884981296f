/*
 * vm_demux.c - see vm_demux.h.  A state machine over fixed buffers: the
 * supervisor polls what cb_vm_demux_poll asks for and calls cb_vm_demux_pump
 * after every wake-up; nothing here blocks, allocates or logs (the
 * supervisor runs between clone and exec, for good).
 */
#include "tiers/vm_demux.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { S_PORT = 0 };

void cb_vm_demux_init(cb_vm_demux_t *d, int port, int out, int err, int ev) {
    memset(d, 0, sizeof *d);
    d->fd[S_PORT] = port;
    d->fd[CB_VM_REC_STDOUT] = out;
    d->fd[CB_VM_REC_STDERR] = err;
    d->fd[CB_VM_REC_EVENTS] = ev;
    d->blocked = -1;
}

void cb_vm_demux_restart(cb_vm_demux_t *d, int port) {
    d->fd[S_PORT] = port;
    d->in_len = d->in_off = d->hdr_used = 0;
    d->in_rec = false;
    d->blocked = -1;
    d->port_eof = false;
    d->down_off = 0; /* the old guest ran no runner: what it took, the new one gets */
}

void cb_vm_demux_poll(const cb_vm_demux_t *d, struct pollfd pf[CB_VM_DEMUX_NFDS]) {
    bool read_port = d->in_off == d->in_len && !d->port_eof && !cb_vm_demux_over(d);
    bool write_port = d->down_len > d->down_off && !d->port_eof;
    pf[S_PORT] =
        (struct pollfd){.fd = read_port || write_port ? d->fd[S_PORT] : -1,
                        .events = (short) ((read_port ? POLLIN : 0) | (write_port ? POLLOUT : 0))};
    for (int t = CB_VM_REC_STDOUT; t <= CB_VM_REC_EVENTS; t++) {
        short ev = 0;
        if (d->blocked == t) ev |= POLLOUT;
        if (t == CB_VM_REC_EVENTS && d->down_len == 0 && !d->kernel_eof) ev |= POLLIN;
        pf[t] = (struct pollfd){.fd = ev ? d->fd[t] : -1, .events = ev};
    }
}

/* Once, on the runner's stderr, without waiting (one write below PIPE_BUF:
 * all of it or nothing).  Records are whole before the next starts, so the
 * note never cuts into the guest's own stderr bytes. */
static void s_note(cb_vm_demux_t *d) {
    d->dropped++;
    if (d->noted || d->gone[CB_VM_REC_STDERR]) return;
    d->noted = true;
    char note[160];
    int n = snprintf(note, sizeof note,
                     "[cellblock] the micro-VM sent a record it may not (type %u, %zu bytes): "
                     "dropped\n",
                     d->type, d->len);
    if (n > 0 && (size_t) n < sizeof note) (void) !write(d->fd[CB_VM_REC_STDERR], note, (size_t) n);
}

static void s_record_end(cb_vm_demux_t *d) {
    d->in_rec = false;
    d->hdr_used = 0;
    if (d->type < CB_VM_REC_STDOUT || d->type > CB_VM_REC_EXIT) s_note(d);
    if (d->type != CB_VM_REC_EXIT) return;
    if (d->len != CB_VM_REC_EXIT_LEN || d->exit[4] > 1) {
        s_note(d);
        return;
    }
    uint32_t st = ((uint32_t) d->exit[0] << 24) | ((uint32_t) d->exit[1] << 16) |
                  ((uint32_t) d->exit[2] << 8) | (uint32_t) d->exit[3];
    d->status = (int) (st & 0xffff); /* a wait status; cb_tier_exit_like trusts no more */
    d->oom = d->exit[4] == 1;
    d->have_exit = true;
}

/* Delivers some of the current payload: bytes consumed, or -1 when the
 * destination is full (d->blocked says which). */
static ssize_t s_deliver(cb_vm_demux_t *d, const uint8_t *p, size_t n) {
    unsigned t = d->type;
    if (t == CB_VM_REC_EXIT) {
        size_t at = d->len - d->left;
        for (size_t i = 0; i < n && at + i < sizeof d->exit; i++)
            d->exit[at + i] = p[i];
        return (ssize_t) n;
    }
    if (t < CB_VM_REC_STDOUT || t > CB_VM_REC_EVENTS || d->gone[t]) return (ssize_t) n;
    for (;;) {
        ssize_t w = t == CB_VM_REC_EVENTS
                        ? send(d->fd[t], p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                        : write(d->fd[t], p, n); /* the kernel's pipes are non-blocking */
        if (w > 0) return w;
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            d->blocked = (int) t;
            return -1;
        }
        d->gone[t] = true; /* the kernel closed it: nobody reads these bytes */
        return (ssize_t) n;
    }
}

/* Delivers what `in` holds, record by record.  0 all of it, -1 blocked. */
static int s_deliver_in(cb_vm_demux_t *d) {
    d->blocked = -1;
    while (d->in_off < d->in_len && !d->have_exit && !d->broken) {
        if (!d->in_rec) {
            d->hdr[d->hdr_used++] = d->in[d->in_off++];
            if (d->hdr_used < CB_VM_REC_HDR) continue;
            d->type = d->hdr[0];
            d->len = d->left = cb_vm_rec_len(d->hdr);
            if (d->len > CB_VM_MUX_PAYLOAD_MAX) {
                d->broken = true;
                return 0;
            }
            d->in_rec = true;
            if (d->left == 0) s_record_end(d);
            continue;
        }
        size_t n = d->in_len - d->in_off;
        if (n > d->left) n = d->left;
        ssize_t used = s_deliver(d, d->in + d->in_off, n);
        if (used < 0) return -1;
        d->in_off += (size_t) used;
        d->left -= (size_t) used;
        if (d->left == 0) s_record_end(d);
    }
    return 0;
}

/* Guest -> kernel.  True when bytes wait that no full destination holds up. */
static bool s_up(cb_vm_demux_t *d) {
    for (int round = 0; round < CB_VM_DEMUX_ROUNDS; round++) {
        if (s_deliver_in(d) < 0 || cb_vm_demux_over(d)) return false;
        if (d->port_eof) return false;
        ssize_t n = recv(d->fd[S_PORT], d->in, sizeof d->in, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
        if (n <= 0) {
            d->port_eof = true;
            return false;
        }
        d->in_len = (size_t) n;
        d->in_off = 0;
    }
    return d->in_off < d->in_len;
}

/* Kernel -> guest, paced by the port. */
static void s_down(cb_vm_demux_t *d) {
    for (;;) {
        if (d->down_off == d->down_len) {
            d->down_off = d->down_len = 0;
            if (d->kernel_eof) return;
            ssize_t n = recv(d->fd[CB_VM_REC_EVENTS], d->down, sizeof d->down, MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
            if (n <= 0) { /* the kernel hung up: so does the guest's runner (EOF on fd 3) */
                d->kernel_eof = true;
                (void) shutdown(d->fd[S_PORT], SHUT_WR);
                return;
            }
            d->down_len = (size_t) n;
        }
        if (d->port_eof) return;
        ssize_t w = send(d->fd[S_PORT], d->down + d->down_off, d->down_len - d->down_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (w <= 0) { /* QEMU is gone: the guest with it */
            d->down_off = d->down_len;
            return;
        }
        d->down_off += (size_t) w;
    }
}

bool cb_vm_demux_pump(cb_vm_demux_t *d) {
    s_down(d);
    return s_up(d);
}

bool cb_vm_demux_over(const cb_vm_demux_t *d) {
    return d->have_exit || d->broken || (d->port_eof && d->in_off == d->in_len);
}
