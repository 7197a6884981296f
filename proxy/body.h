/*
 * body.h - where an HTTP/1.1 message body ends (RFC 9112 6-7), for both
 * directions of a forwarded request: the request's body from the sandbox,
 * the response's from the upstream.  The proxy forwards exactly the bytes of
 * the current message and keeps what follows for the next head, so a second
 * request can never reach an upstream without being parsed and checked.
 *
 * Pure code: no I/O, no allocation; the chunked grammar is strict (hex
 * digits only, CRLF only, bounded lines), so that the proxy and any
 * compliant parser behind it agree on where a body ends.
 */
#ifndef CB_PROXY_BODY_H
#define CB_PROXY_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/netproxy_limits.h"

typedef enum {
    CB_BODY_DONE = 0,   /* the message is complete */
    CB_BODY_LENGTH,     /* `left` bytes of a Content-Length body */
    CB_BODY_CHUNK_SIZE, /* a chunk-size line (in `line`) */
    CB_BODY_CHUNK_DATA, /* `left` bytes of chunk data */
    CB_BODY_CHUNK_CRLF, /* the CRLF after chunk data (`left` of 2 bytes) */
    CB_BODY_TRAILER,    /* trailer lines until an empty one */
    CB_BODY_EOF,        /* until the peer closes (a response without framing) */
} cb_body_state_t;

typedef struct {
    cb_body_state_t state;              /* see above */
    uint64_t left;                      /* LENGTH, CHUNK_DATA, CHUNK_CRLF: bytes to go */
    char line[CB_PROXY_CHUNK_LINE_MAX]; /* a chunk-size or trailer line so far */
    size_t line_len;                    /* its bytes */
    size_t lines;                       /* trailer lines seen */
} cb_body_t;

/* A body of n bytes (0: already complete). */
void cb_body_length(cb_body_t *b, uint64_t n);
/* A chunked body. */
void cb_body_chunked(cb_body_t *b);
/* A body that ends when the peer closes. */
void cb_body_eof(cb_body_t *b);
/* Takes bytes of the body from the start of p (n bytes): returns how many
 * belong to it (all of them unless it ended inside p), or -1 with *why when
 * the framing is malformed. */
long cb_body_scan(cb_body_t *b, const char *p, size_t n, const char **why);
/* Each piece of a body's data: a Content-Length or EOF body's bytes, a
 * chunk's data (never the chunked framing: chunk sizes, CRLFs, trailers). */
typedef void (*cb_body_data_fn)(void *ud, const char *p, size_t n);
/* cb_body_scan, handing each piece of data among the bytes taken to fn
 * (in order; NULL: none), e.g. to look for what must not pass. */
long cb_body_scan_data(cb_body_t *b, const char *p, size_t n, const char **why, cb_body_data_fn fn,
                       void *ud);
/* The message is complete. */
static inline bool cb_body_done(const cb_body_t *b) { return b->state == CB_BODY_DONE; }

#endif
