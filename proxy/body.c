/*
 * body.c - message body framing (see body.h).  One pass over the bytes as
 * they arrive, state kept between calls, lines bounded by
 * CB_PROXY_CHUNK_LINE_MAX.  Refused: chunk sizes that are not 1-15 hex
 * digits, anything but CRLF ending a framing line, chunk data not followed
 * by CRLF, control bytes in a chunk extension or trailer, folded or
 * nameless trailer lines, more than CB_PROXY_HEADERS_MAX trailer lines.
 */
#include "proxy/body.h"
#include "proxy/http.h" /* cb_http_tchar */

#include <ctype.h>
#include <string.h>

void cb_body_length(cb_body_t *b, uint64_t n) {
    memset(b, 0, sizeof *b);
    b->state = n > 0 ? CB_BODY_LENGTH : CB_BODY_DONE;
    b->left = n;
}

void cb_body_chunked(cb_body_t *b) {
    memset(b, 0, sizeof *b);
    b->state = CB_BODY_CHUNK_SIZE;
}

void cb_body_eof(cb_body_t *b) {
    memset(b, 0, sizeof *b);
    b->state = CB_BODY_EOF;
}

/* A chunk-size line without its CRLF: 0 ok (*size set), -1 malformed. */
static int s_chunk_size(const char *l, size_t n, uint64_t *size) {
    size_t i = 0;
    uint64_t v = 0;
    while (i < n && isxdigit((unsigned char) l[i])) {
        if (i >= CB_PROXY_CHUNK_HEX_MAX) return -1;
        unsigned char c = (unsigned char) l[i++];
        v = v * 16 + (uint64_t) (isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
    }
    if (i == 0) return -1;
    /* chunk-ext: ";" and then any visible bytes, spaces or tabs (the
     * extension itself is passed on, never interpreted) */
    if (i < n && l[i] != ';') return -1;
    *size = v;
    return 0;
}

/* A trailer line without its CRLF: 0 ok, -1 malformed. */
static int s_trailer(const char *l, size_t n) {
    size_t i = 0;
    while (i < n && cb_http_tchar((unsigned char) l[i]))
        i++;
    return i > 0 && i < n && l[i] == ':' ? 0 : -1;
}

/* Ends the line in b->line: the next state, or -1. */
static int s_line_done(cb_body_t *b, const char **why) {
    if (b->line_len == 0 || b->line[b->line_len - 1] != '\r') {
        *why = "a chunked body line not ended by CRLF";
        return -1;
    }
    size_t n = b->line_len - 1;
    b->line_len = 0;
    if (b->state == CB_BODY_CHUNK_SIZE) {
        uint64_t size = 0;
        if (s_chunk_size(b->line, n, &size) < 0) {
            *why = "a malformed chunk size";
            return -1;
        }
        b->state = size > 0 ? CB_BODY_CHUNK_DATA : CB_BODY_TRAILER;
        b->left = size;
        return 0;
    }
    if (n == 0) {
        b->state = CB_BODY_DONE;
        return 0;
    }
    if (++b->lines > CB_PROXY_HEADERS_MAX || s_trailer(b->line, n) < 0) {
        *why = "a malformed trailer";
        return -1;
    }
    return 0;
}

long cb_body_scan(cb_body_t *b, const char *p, size_t n, const char **why) {
    return cb_body_scan_data(b, p, n, why, NULL, NULL);
}

long cb_body_scan_data(cb_body_t *b, const char *p, size_t n, const char **why, cb_body_data_fn fn,
                       void *ud) {
    size_t i = 0;
    *why = "";
    while (i < n && b->state != CB_BODY_DONE) {
        size_t rem = n - i;
        switch (b->state) {
        case CB_BODY_EOF:
            if (fn != NULL) fn(ud, p + i, rem);
            i = n;
            break;
        case CB_BODY_LENGTH:
        case CB_BODY_CHUNK_DATA: {
            size_t k = b->left < rem ? (size_t) b->left : rem;
            if (fn != NULL && k > 0) fn(ud, p + i, k);
            i += k;
            b->left -= k;
            if (b->left == 0) {
                bool chunk = b->state == CB_BODY_CHUNK_DATA;
                b->state = chunk ? CB_BODY_CHUNK_CRLF : CB_BODY_DONE;
                b->left = chunk ? 2 : 0;
            }
            break;
        }
        case CB_BODY_CHUNK_CRLF:
            if (p[i] != (b->left == 2 ? '\r' : '\n')) {
                *why = "chunk data longer than its size";
                return -1;
            }
            i++;
            if (--b->left == 0) b->state = CB_BODY_CHUNK_SIZE;
            break;
        case CB_BODY_CHUNK_SIZE:
        case CB_BODY_TRAILER: {
            unsigned char c = (unsigned char) p[i++];
            if (c == '\n') {
                if (s_line_done(b, why) < 0) return -1;
                break;
            }
            bool cr_ok = c == '\r'; /* only as the last byte: checked at the LF */
            if ((c < 0x20 && c != '\t' && !cr_ok) || c == 0x7f ||
                (b->line_len > 0 && b->line[b->line_len - 1] == '\r')) {
                *why = "control bytes in a chunked body line";
                return -1;
            }
            if (b->line_len >= sizeof b->line) {
                *why = "a chunked body line too long";
                return -1;
            }
            b->line[b->line_len++] = (char) c;
            break;
        }
        case CB_BODY_DONE: break;
        }
    }
    return (long) i;
}
