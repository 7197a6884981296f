/*
 * stream.c - batching and UTF-8 repair of the runner's stdout/stderr (see
 * stream.h).
 */
#include "kernel/stream.h"

#include "isolate/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_REPLACEMENT     "\xef\xbf\xbd" /* U+FFFD */
#define S_REPLACEMENT_LEN 3
#define S_UTF8_EXPANSION  3 /* an invalid byte becomes 3 bytes of U+FFFD */
#define S_HIGH_BITS       0x8080808080808080ull /* the top bit of each of 8 bytes */

void cb_stream_reset(cb_stream_t *s) {
    s->len = 0;
    s->due_ms = 0;
}

char *cb_utf8_clean(const uint8_t *in, size_t len, bool final, size_t *used, size_t *out_len) {
    size_t cap;
    *used = len;
    *out_len = 0;
    if (__builtin_mul_overflow(len, (size_t) S_UTF8_EXPANSION, &cap) ||
        __builtin_add_overflow(cap, (size_t) 1, &cap))
        return NULL;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    size_t o = 0, i = 0;
    while (i < len) {
        uint8_t c = in[i];
        size_t need;
        uint32_t min;
        if (c < 0x80) {
            size_t run = 1;
            uint64_t w;
            while (i + run + sizeof w <= len) { /* eight at a time */
                memcpy(&w, in + i + run, sizeof w);
                if (w & S_HIGH_BITS) break;
                run += sizeof w;
            }
            while (i + run < len && in[i + run] < 0x80)
                run++;
            memcpy(out + o, in + i, run); /* ASCII runs: the common case */
            o += run;
            i += run;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            need = 1, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            need = 2, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            need = 3, min = 0x10000;
        } else {
            goto bad;
        }
        if (i + need >= len) {
            /* not all continuation bytes are here yet, or the input ends early */
            bool prefix_ok = true;
            for (size_t j = i + 1; j < len; j++)
                if ((in[j] & 0xc0) != 0x80) prefix_ok = false;
            if (prefix_ok && !final) break;
            goto bad;
        }
        {
            uint32_t cp = c & (0x3f >> need);
            size_t j;
            for (j = 1; j <= need; j++) {
                if ((in[i + j] & 0xc0) != 0x80) break;
                cp = (cp << 6) | (in[i + j] & 0x3f);
            }
            if (j <= need || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto bad;
            memcpy(out + o, in + i, need + 1);
            o += need + 1;
            i += need + 1;
            continue;
        }
    bad:
        memcpy(out + o, S_REPLACEMENT, S_REPLACEMENT_LEN);
        o += S_REPLACEMENT_LEN;
        i++;
    }
    out[o] = '\0';
    *used = i;
    *out_len = o;
    return out;
}

size_t cb_utf8_prefix(const char *text, size_t len, size_t max) {
    if (len <= max) return len;
    size_t n = max;
    while (n > 0 && ((unsigned char) text[n] & 0xc0) == 0x80)
        n--; /* text[n] is the first byte not taken: never a continuation */
    return n;
}

ssize_t cb_stream_fill(cb_stream_t *s, int fd, int64_t now_ms) {
    if (sizeof s->buf - s->len < CB_STREAM_CHUNK) return 0;
    ssize_t n;
    do
        n = read(fd, s->buf + s->len, CB_STREAM_CHUNK);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n <= 0) return -1;
    s->len += (size_t) n;
    if (s->due_ms == 0)
        /* after a quiet period wait only a moment; under a flood batch up to FLUSH_MS */
        s->due_ms = now_ms - s->last_ms >= CB_STREAM_FLUSH_MS ? now_ms + CB_STREAM_FIRST_MS
                                                              : s->last_ms + CB_STREAM_FLUSH_MS;
    return n;
}

bool cb_stream_due(const cb_stream_t *s, int64_t now_ms) {
    return s->len > 0 &&
           (s->len >= CB_STREAM_FLUSH_BYTES || (s->due_ms != 0 && now_ms >= s->due_ms));
}

char *cb_stream_take(cb_stream_t *s, bool final, size_t *len, int64_t now_ms) {
    *len = 0;
    if (s->len == 0) return NULL;
    size_t used = 0;
    char *text = cb_utf8_clean(s->buf, s->len, final, &used, len);
    if (text == NULL) {
        LOG_W("out of memory: %zu bytes of output dropped", s->len);
        used = s->len;
    }
    memmove(s->buf, s->buf + used, s->len - used);
    s->len -= used;
    s->due_ms = 0;
    s->last_ms = now_ms;
    if (text != NULL && *len == 0) {
        free(text);
        return NULL;
    }
    return text;
}
