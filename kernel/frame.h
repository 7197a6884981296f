/*
 * frame.h - length-prefixed JSON frames between kernel and runner
 * (docs/RUNNER_PROTOCOL.md section 3).
 *
 * The runner is untrusted: cb_frame_extract bounds the length, parses with
 * json_loadb, and insists on an object with a string "type".  A length over
 * the limit or of zero is fatal for the stream (it cannot be re-synchronised);
 * a frame with bad JSON or shape is skippable.
 */
#ifndef CB_FRAME_H
#define CB_FRAME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    CB_FRAME_OK = 0,     /* *out holds a new reference */
    CB_FRAME_NEED = 1,   /* not enough bytes yet */
    CB_FRAME_BAD = -1,   /* one frame consumed, but it is not a valid object: drop it */
    CB_FRAME_FATAL = -2, /* length prefix out of range: the stream is unusable */
};

/* Tries to take one frame from buf[0..len).  On OK/BAD *consumed is the
 * number of bytes used; *out is a new reference (OK only). */
int cb_frame_extract(const uint8_t *buf, size_t len, size_t max, size_t *consumed, json_t **out);
/* Encodes v (borrowed) as one frame into a new malloc'd buffer *out of *out_len
 * bytes. 0 ok, -1 too large or out of memory. */
int cb_frame_encode(const json_t *v, size_t max, uint8_t **out, size_t *out_len);

/* True for frames the runner waits on with an ack (they must keep their
 * place among stdout/stderr): display, update_display, execute_result,
 * clear_output, error.  f is borrowed. */
bool cb_frame_needs_ack(const json_t *f);

#endif
