/*
 * vm_demux.h - the host's end of the micro-VM's channel cb.io (tiers/vm_mux.h),
 * in the supervisor (runner slot of the namespaces sandbox; fixed buffers,
 * no malloc).
 *
 * Records from the guest go, one after the other and each whole before the
 * next, to the kernel's stdout pipe, stderr pipe or event socket: output
 * written before a frame is in the kernel's pipe before the frame is on its
 * socket, so the kernel's drain before each frame finds it.  While a
 * destination is full nothing more is read from the port (QEMU then holds
 * the guest's queue, and the runner blocks, as on a full pipe in the
 * namespaces tier).  The kernel's bytes go to the guest the other way,
 * paced by the port.  Everything from the guest is untrusted: a length over
 * CB_VM_MUX_PAYLOAD_MAX breaks the channel (nothing more is read), a record
 * of an unknown type or a malformed exit record is dropped and noted once
 * on the runner's stderr.
 */
#ifndef CB_TIERS_VM_DEMUX_H
#define CB_TIERS_VM_DEMUX_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tiers/vm_mux.h"

enum { CB_VM_DEMUX_NFDS = 4 }; /* pollfds: the port, stdout, stderr, events */

typedef struct {
    int fd[CB_VM_DEMUX_NFDS];         /* [0] the port, then the destinations by record type */
    bool gone[CB_VM_DEMUX_NFDS];      /* a destination the kernel closed: its bytes are dropped */
    uint8_t in[CB_VM_DEMUX_BUF];      /* read from the port, not yet delivered */
    size_t in_len, in_off;            /* bytes in `in` / delivered */
    uint8_t hdr[CB_VM_REC_HDR];       /* the next record's header, as far as read */
    size_t hdr_used;                  /* bytes of it */
    bool in_rec;                      /* a record's payload is being delivered */
    unsigned type;                    /* its type */
    size_t len, left;                 /* its payload length, and what is still to go */
    uint8_t exit[CB_VM_REC_EXIT_LEN]; /* an exit record's payload */
    int blocked;                      /* the destination waiting for POLLOUT, -1 none */
    uint8_t down[CB_VM_MUX_DOWN_BUF]; /* the kernel's event bytes for the guest */
    size_t down_len, down_off;        /* bytes in it / sent */
    bool kernel_eof;       /* the kernel closed its socket: the port is shut for writing */
    bool port_eof;         /* the port ended (QEMU closed it) */
    bool broken;           /* a record over the bound: nothing more is read */
    bool have_exit;        /* the guest's exit record arrived (after all its output) */
    int status;            /* the runner's wait status in the guest */
    bool oom;              /* the guest's OOM killer ended it */
    unsigned long dropped; /* records dropped (unknown type, bad exit record) */
    bool noted;            /* the drop was noted on the runner's stderr */
} cb_vm_demux_t;

/* port: the supervisor's end of QEMU's socket chardev; out/err: the kernel's
 * pipes (non-blocking); ev: the kernel's event socket. */
void cb_vm_demux_init(cb_vm_demux_t *d, int port, int out, int err, int ev);
/* A new QEMU on a new port: no record in flight (the kernel's bytes not yet
 * sent are kept). */
void cb_vm_demux_restart(cb_vm_demux_t *d, int port);
/* What to wait for: pf[0] the port, pf[1..3] stdout, stderr, events. */
void cb_vm_demux_poll(const cb_vm_demux_t *d, struct pollfd pf[CB_VM_DEMUX_NFDS]);
/* Moves what moves without blocking, both ways.  True when bytes read from
 * the port are still waiting without a full destination to blame (call
 * again without sleeping). */
bool cb_vm_demux_pump(cb_vm_demux_t *d);
/* True once nothing more will come from the guest: its exit record is in
 * (and everything before it delivered), the channel broke, or the port ended
 * and all it gave is delivered. */
bool cb_vm_demux_over(const cb_vm_demux_t *d);

#endif
