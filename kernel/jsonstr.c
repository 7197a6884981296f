/*
 * jsonstr.c - the JSON of a stream message's content, built in bulk (see
 * jsonstr.h).
 */
#include "kernel/jsonstr.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define S_ONES 0x0101010101010101ull /* 1 in every byte */
#define S_HIGH 0x8080808080808080ull /* the top bit of every byte */

/* Any byte of w below 0x20, or '"', or '\\'?  (The classic "has a byte
 * less than n" and "has a zero byte" tests, exact for n <= 0x80.) */
static inline bool s_word_escapes(uint64_t w) {
    uint64_t ctl = (w - S_ONES * 0x20) & ~w & S_HIGH;
    uint64_t q = w ^ (S_ONES * '"');
    uint64_t b = w ^ (S_ONES * '\\');
    return (ctl | ((q - S_ONES) & ~q & S_HIGH) | ((b - S_ONES) & ~b & S_HIGH)) != 0;
}

static inline bool s_byte_escapes(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }

/* The escape of one byte that needs one; returns its length. */
static size_t s_escape(char *out, unsigned char c) {
    static const char hex[] = "0123456789ABCDEF";
    char e = 0;
    switch (c) {
    case '"': e = '"'; break;
    case '\\': e = '\\'; break;
    case '\b': e = 'b'; break;
    case '\f': e = 'f'; break;
    case '\n': e = 'n'; break;
    case '\r': e = 'r'; break;
    case '\t': e = 't'; break;
    default: break;
    }
    out[0] = '\\';
    if (e) {
        out[1] = e;
        return 2;
    }
    memcpy(out + 1, "u00", 3);
    out[4] = hex[c >> 4];
    out[5] = hex[c & 0xf];
    return 6;
}

size_t cb_json_quote(char *out, const char *text, size_t len) {
    const unsigned char *in = (const unsigned char *) text;
    size_t o = 0, i = 0;
    out[o++] = '"';
    while (i < len) {
        size_t end = i;
        uint64_t w;
        while (end + sizeof w <= len) {
            memcpy(&w, in + end, sizeof w);
            if (s_word_escapes(w)) break;
            end += sizeof w;
        }
        while (end < len && !s_byte_escapes(in[end]))
            end++;
        memcpy(out + o, in + i, end - i); /* the run: copied whole */
        o += end - i;
        i = end;
        if (i < len) o += s_escape(out + o, in[i++]);
    }
    out[o++] = '"';
    return o;
}

char *cb_json_stream_content(const char *name, const char *text, size_t len, size_t *out_len) {
    static const char k_name[] = "{\"name\":", k_text[] = ",\"text\":";
    size_t nlen = strlen(name), cap;
    *out_len = 0;
    if (len > (SIZE_MAX - 64 - 6 * nlen) / 6) return NULL;
    cap = sizeof k_name + CB_JSON_QUOTED_MAX(nlen) + sizeof k_text + CB_JSON_QUOTED_MAX(len) + 2;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    size_t o = sizeof k_name - 1;
    memcpy(out, k_name, o);
    o += cb_json_quote(out + o, name, nlen);
    memcpy(out + o, k_text, sizeof k_text - 1);
    o += sizeof k_text - 1;
    o += cb_json_quote(out + o, text, len);
    out[o++] = '}';
    out[o] = '\0';
    *out_len = o;
    /* ZMQ holds it until every subscriber has it: give back the room no
     * escape took (a shrink, in place) */
    char *fit = realloc(out, o + 1);
    return fit ? fit : out;
}
