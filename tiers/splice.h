/*
 * splice.h - bytes copied both ways between two stream sockets without
 * being read (fixed buffers, no malloc: the gvisor supervisor's slot and
 * cellblock-init use it for the debugger's channel).  Each direction waits
 * while its buffer is full, so neither side can make the copy grow.
 */
#ifndef CB_TIERS_SPLICE_H
#define CB_TIERS_SPLICE_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "tiers/tier_limits.h"

typedef struct {
    char buf[CB_GVISOR_RELAY_BUF]; /* bytes read, not yet written */
    size_t len, off;               /* held / written */
} cb_splice_dir_t;

typedef struct {
    cb_splice_dir_t ab, ba; /* a -> b, b -> a */
} cb_splice_t;

/* pf[0] for a, pf[1] for b (fd -1 when either is -1). */
void cb_splice_events(const cb_splice_t *s, int a, int b, struct pollfd pf[2]);
/* After poll: moves what fits.  False when an end closed or broke. */
bool cb_splice_step(cb_splice_t *s, int a, int b, const struct pollfd pf[2]);
/* Drops what is held (an end is gone: its bytes go nowhere). */
void cb_splice_clear(cb_splice_t *s);

#endif
