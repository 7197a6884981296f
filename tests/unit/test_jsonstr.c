/*
 * test_jsonstr.c - the stream content built in bulk is byte for byte what
 * jansson's json_dumps(JSON_COMPACT) makes of the same object: every byte
 * value that needs an escape, at every position against the 8-byte words,
 * multi-byte UTF-8, empty text, and random valid UTF-8 of many lengths.
 */
#include "kernel/jsonstr.h"

#include "tap.h"

#include <jansson.h>
#include <stdint.h>

static char *s_jansson(const char *name, const char *text, size_t len) {
    json_t *o = json_pack("{s:s, s:s%}", "name", name, "text", text, len);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* 0 if ours equals jansson's for this text; else 1 (and says where). */
static int s_same(const char *name, const char *text, size_t len) {
    size_t n = 0;
    char *mine = cb_json_stream_content(name, text, len, &n);
    char *want = s_jansson(name, text, len);
    int bad = mine == NULL || want == NULL || n != strlen(want) || memcmp(mine, want, n) != 0;
    if (bad) printf("#   %zu bytes of text: got %.80s\n#   want %.80s\n", len, mine, want);
    free(mine);
    free(want);
    return bad;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint32_t s_rand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t) (g_rng >> 32);
}

/* Appends one random code point's UTF-8 (valid: no surrogates). */
static size_t s_put_cp(char *out) {
    uint32_t r = s_rand() % 100, cp;
    if (r < 70) cp = 0x20 + s_rand() % 0x60;     /* printable ASCII and DEL */
    else if (r < 80) cp = s_rand() % 0x20;       /* C0 controls */
    else if (r < 84) cp = r < 82 ? '"' : '\\';   /* the two escaped printables */
    else if (r < 90) cp = 0x80 + s_rand() % 0x780; /* 2 bytes */
    else if (r < 97) {
        do
            cp = 0x800 + s_rand() % 0xf800; /* 3 bytes */
        while (cp >= 0xd800 && cp <= 0xdfff);
    } else cp = 0x10000 + s_rand() % 0x100000; /* 4 bytes */
    if (cp < 0x80) {
        out[0] = (char) cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char) (0xc0 | cp >> 6), out[1] = (char) (0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char) (0xe0 | cp >> 12), out[1] = (char) (0x80 | (cp >> 6 & 0x3f));
        out[2] = (char) (0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char) (0xf0 | cp >> 18), out[1] = (char) (0x80 | (cp >> 12 & 0x3f));
    out[2] = (char) (0x80 | (cp >> 6 & 0x3f)), out[3] = (char) (0x80 | (cp & 0x3f));
    return 4;
}

int main(void) {
    int bad = 0;
    bad += s_same("stdout", "", 0);
    TAP_EQ_INT(bad, 0, "empty text");

    /* every byte below 0x80 (NUL included), alone and at each offset of two words */
    bad = 0;
    for (int c = 0; c < 0x80; c++)
        for (size_t at = 0; at < 17; at++) {
            char buf[24];
            memset(buf, 'a', sizeof buf);
            buf[at] = (char) c;
            bad += s_same("stderr", buf, sizeof buf);
            bad += s_same("stdout", buf + at, 1);
        }
    TAP_EQ_INT(bad, 0, "each ASCII byte at each position of a word: as jansson escapes it");

    /* every byte value at once, high bytes as parts of valid sequences */
    const char *mixed = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x7f \x1b[1m\"q\"\\ \t\r\n\b\f"
                        "\xe2\x80\xae rtl \xc2\x9b csi";
    TAP_EQ_INT(s_same("stdout", mixed, strlen(mixed)), 0,
               "multi-byte UTF-8, DEL, C1 and bidi copied, controls escaped");

    /* a long ASCII run with a newline each KiB, as a print() flood makes */
    size_t big_len = 1u << 20;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = i % 1024 == 1023 ? '\n' : (char) ('a' + i % 26);
    TAP_EQ_INT(s_same("stdout", big, big_len), 0, "1 MiB of 1 KiB lines");

    /* random valid UTF-8 of many lengths */
    bad = 0;
    for (int t = 0; t < 2000; t++) {
        size_t n = 0, want = s_rand() % (t < 1000 ? 40 : 4000);
        while (n + 4 < big_len && n < want)
            n += s_put_cp(big + n);
        bad += s_same(t % 2 ? "stdout" : "stderr", big, n);
    }
    TAP_EQ_INT(bad, 0, "2000 random UTF-8 texts: byte for byte jansson's output");
    free(big);

    /* the room a worst case needs */
    char out[CB_JSON_QUOTED_MAX(4)];
    TAP_EQ_INT(cb_json_quote(out, "\x01\x02\x03\x04", 4), sizeof out, "worst case: 6 bytes each");
    size_t n = 1;
    TAP_OK(cb_json_stream_content("stdout", "", SIZE_MAX / 2, &n) == NULL && n == 0,
           "a length too large to escape is refused");
    TAP_DONE();
}
