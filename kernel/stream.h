/*
 * stream.h - one of the runner's output pipes (stdout or stderr): bytes
 * read as they come, published as text in batches.
 *
 * The bytes are the sandbox's: any of them may be invalid UTF-8, and a
 * character may be split across two reads.  cb_stream_take hands out only
 * whole, valid characters (invalid bytes become U+FFFD) and keeps an
 * incomplete tail for the next read, so nothing is ever replaced by '?' and
 * no character is cut in two.  Batching: the first bytes after a quiet
 * period wait CB_STREAM_FIRST_MS (print() writes its pieces separately),
 * a flood is batched up to CB_STREAM_FLUSH_MS or CB_STREAM_FLUSH_BYTES.
 */
#ifndef CB_STREAM_H
#define CB_STREAM_H

#include "kernel/bounds.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    uint8_t buf[CB_STREAM_FLUSH_BYTES + CB_STREAM_CHUNK]; /* bytes not yet taken */
    size_t len;                                           /* bytes in buf */
    int64_t due_ms;                                       /* when to publish, 0 = nothing due */
    int64_t last_ms;                                      /* when text was last taken */
} cb_stream_t;

void cb_stream_reset(cb_stream_t *s);
/* Reads up to CB_STREAM_CHUNK bytes from fd (non-blocking) into the buffer.
 * Returns bytes read (> 0), 0 when nothing is there or the buffer is full,
 * or -1 at EOF or on an error (the caller closes fd). */
ssize_t cb_stream_fill(cb_stream_t *s, int fd, int64_t now_ms);
/* True when the buffered bytes should be published now. */
bool cb_stream_due(const cb_stream_t *s, int64_t now_ms);
/* Takes the buffered text: a new NUL-terminated UTF-8 string of *len bytes,
 * or NULL when there is none.  Unless final, an incomplete character at the
 * end stays for the next call. */
char *cb_stream_take(cb_stream_t *s, bool final, size_t *len, int64_t now_ms);
/* Repairs in[0..len) into valid UTF-8 (invalid bytes -> U+FFFD); an
 * incomplete sequence at the end is left unconsumed unless final.
 * *used = bytes consumed; returns a new string of *out_len bytes, or NULL. */
char *cb_utf8_clean(const uint8_t *in, size_t len, bool final, size_t *used, size_t *out_len);
/* The longest prefix of valid UTF-8 text[0..len) that ends on a character
 * boundary and is at most max bytes. */
size_t cb_utf8_prefix(const char *text, size_t len, size_t max);

#endif
