/*
 * init_mux.h - cellblock-init's side of the micro-VM's channel cb.io
 * (tiers/vm_mux.h): the runner's stdout and stderr are pipes and its fd 3 a
 * socketpair, all read here and written as records onto the one port, in
 * the kernel's ordering rule: once a chunk of the event socket is read, the
 * output that was in the pipes at that moment (FIONREAD: bounded by the
 * pipes' size, however fast the runner writes) goes out before the chunk.
 * What the host sends is the kernel's event bytes, passed to the runner.
 *
 * Both ways are paced: while the port does not take records nothing more is
 * read from the runner (its writes block, as on a full pipe on the host),
 * while the runner does not read nothing more is read from the port.
 * Static, libc only, no allocation (part of cellblock-init).
 */
#ifndef CB_TIERS_INIT_MUX_H
#define CB_TIERS_INIT_MUX_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tiers/vm_mux.h"

enum { CB_INIT_MUX_NFDS = 4 }; /* pollfds: the port, stdout, stderr, the event socket */

typedef struct {
    int port;                     /* cb.io, non-blocking */
    int src[3];                   /* init's ends: stdout, stderr pipes, event socket; -1 ended */
    uint8_t up[CB_VM_MUX_UP_BUF]; /* records the port has not taken */
    size_t up_len, up_off;        /* bytes in up / written */
    uint8_t ev[CB_VM_MUX_PAYLOAD_MAX]; /* event bytes read, waiting for the output before them */
    size_t ev_len;                     /* bytes in ev (0: none held) */
    size_t owed[2];                    /* stdout/stderr bytes that go before ev */
    uint8_t down[CB_VM_MUX_DOWN_BUF];  /* the kernel's bytes for the runner */
    size_t down_len, down_off;         /* bytes in down / sent */
    bool host_gone;                    /* the port hung up: nothing more goes either way */
    bool more;                         /* the last pump stopped at its round limit */
} cb_init_mux_t;

/* Takes the port (opened O_RDWR | O_NONBLOCK), waits until the host is
 * connected to it, and makes the runner's channels: runner[0..2] are the
 * ends for its fds 1, 2 and 3 (close-on-exec; init closes them once the
 * runner has its copies).  0 ok, -1 errno. */
int cb_init_mux_open(cb_init_mux_t *m, int port, int runner[3]);
/* What to wait for: pf[0] the port, pf[1..3] stdout, stderr, events. */
void cb_init_mux_poll(const cb_init_mux_t *m, struct pollfd pf[CB_INIT_MUX_NFDS]);
/* Moves what moves without blocking, both ways (m->more: call again
 * without sleeping).  True when any byte moved. */
bool cb_init_mux_pump(cb_init_mux_t *m);
/* The runner is gone (and its cgroup killed): reads its pipes and socket to
 * their end (given up after CB_VM_END_QUIET_MS with nothing to read while
 * the port was free), then sends the exit record after everything and waits
 * until the port has taken it (or the host is gone). */
void cb_init_mux_end(cb_init_mux_t *m, int status, bool oom);

#endif
