/*
 * jsonstr.h - the JSON of a stream message's content, built in bulk.
 *
 * A stdout flood is almost all ASCII text, and jansson escapes strings one
 * code point at a time (half of the kernel's CPU on a flood).  Here runs of
 * bytes that need no escape are found eight at a time and copied whole;
 * the output is byte for byte what json_dumps(JSON_COMPACT) makes of the
 * same object (tests/unit/test_jsonstr.c checks that), so nothing else
 * changes: '"', '\\' and the C0 controls are escaped as jansson does
 * (\b \f \n \r \t, else \u00XX), all else is copied as it is.  The text
 * must be valid UTF-8 (stream.c's cb_utf8_clean made it so).
 */
#ifndef CB_JSONSTR_H
#define CB_JSONSTR_H

#include <stddef.h>

/* Writes the JSON string literal of text (len bytes, valid UTF-8), quotes
 * included, to out, which has room for CB_JSON_QUOTED_MAX(len) bytes;
 * returns the bytes written (no NUL). */
#define CB_JSON_QUOTED_MAX(len) (2 + 6 * (len))
size_t cb_json_quote(char *out, const char *text, size_t len);

/* {"name":NAME,"text":TEXT} as json_dumps(JSON_COMPACT) writes it: malloc'd,
 * NUL-terminated, its length in *out_len.  NULL if out of memory or len is
 * too large to escape. */
char *cb_json_stream_content(const char *name, const char *text, size_t len, size_t *out_len);

#endif
