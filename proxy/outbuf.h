/*
 * outbuf.h - a bounded output buffer for the heads the proxy writes (the
 * forwarded head, a head with its secrets put in): every write checks the
 * room left, and one that does not fit marks the whole output as overflowed
 * instead of truncating it.
 */
#ifndef CB_PROXY_OUTBUF_H
#define CB_PROXY_OUTBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct {
    char *p;       /* output */
    size_t len;    /* its size */
    size_t used;   /* bytes written */
    bool overflow; /* something did not fit */
} cb_outbuf_t;

static inline void cb_outbuf_put(cb_outbuf_t *o, const char *s, size_t n) {
    if (o->overflow || n > o->len - o->used) {
        o->overflow = true;
        return;
    }
    memcpy(o->p + o->used, s, n);
    o->used += n;
}

#endif
