/*
 * vm_mux.h - the micro-VM's one ordered channel, the virtio port cb.io: what
 * cellblock-init in the guest (tiers/init_mux.c) and the supervisor on the
 * host (tiers/vm_demux.c) both speak.
 *
 * Why one port: the runner's stdout, stderr and event socket used to be
 * three ports, each with its own virtqueue, and QEMU services the queues of
 * different ports in no fixed order (and a full host pipe holds one queue
 * back while the others move), so a `done` frame could reach the kernel
 * before the output written ahead of it, which then missed its cell.  In one
 * queue bytes keep the order they were written in.
 *
 * Guest -> host: records, each a 4-byte header -- type (1 byte), payload
 * length (3 bytes, big-endian, at most CB_VM_MUX_PAYLOAD_MAX) -- and the
 * payload.  init writes the output that was in the runner's pipes when it
 * read a chunk of the event socket before that chunk (the kernel's ordering
 * rule, docs/RUNNER_PROTOCOL.md), and the runner's status last, after every
 * byte of output.  The host trusts none of it: a length over the bound ends
 * the channel, a record of an unknown type is dropped.
 *
 * Host -> guest: the kernel's event bytes (requests, acks), raw: one stream,
 * nothing to tell apart, and init trusts its host.
 */
#ifndef CB_TIERS_VM_MUX_H
#define CB_TIERS_VM_MUX_H

#include <stddef.h>
#include <stdint.h>

#include "tiers/tier_limits.h"

enum {
    CB_VM_REC_STDOUT = 1, /* bytes for the kernel's stdout pipe */
    CB_VM_REC_STDERR = 2, /* ... its stderr pipe */
    CB_VM_REC_EVENTS = 3, /* ... its event socket (frames, not necessarily whole) */
    CB_VM_REC_EXIT = 4,   /* the runner ended: wait status (u32, big-endian), OOM (u8) */
};

#define CB_VM_REC_HDR      4 /* type + 24-bit length */
#define CB_VM_REC_EXIT_LEN 5 /* an exit record's payload */

_Static_assert(CB_VM_MUX_PAYLOAD_MAX < (1u << 24), "a payload length fits 24 bits");

static inline void cb_vm_rec_header(uint8_t h[CB_VM_REC_HDR], unsigned type, size_t len) {
    h[0] = (uint8_t) type;
    h[1] = (uint8_t) (len >> 16);
    h[2] = (uint8_t) (len >> 8);
    h[3] = (uint8_t) len;
}

static inline size_t cb_vm_rec_len(const uint8_t h[CB_VM_REC_HDR]) {
    return ((size_t) h[1] << 16) | ((size_t) h[2] << 8) | (size_t) h[3];
}

#endif
