/*
 * fuzz_proxy_body.c - where a message body ends (proxy/body.c), as the
 * proxy sees it: in whatever pieces reads, TLS records and the relay
 * buffer happen to cut it.
 *
 * The input: a mode byte, a seed byte, then the stream's bytes.  Mode bits
 * 0-1: 0 or 3 chunked, 1 a Content-Length body (bits 2-7 and the seed give
 * its length, up to 16383 bytes), 2 until the peer closes.  The seed picks
 * where the stream is cut (1 to 64 bytes a piece, or each byte alone); every
 * piece is an exact-size copy, so ASan sees a read past it.
 *
 * Properties: the stream in one piece and in pieces gives the same result:
 * the same bytes taken, the same verdict (done, going on, or the same
 * refusal), the same data handed on; a call takes no more than it is given
 * and stops taking once the message is done; a refusal has a reason; the
 * line buffer never holds more than its size.  Content-Length and EOF
 * bodies hand on exactly their bytes.  A chunked body taken whole is
 * decoded again by a small reference decoder here: the data handed on are
 * the chunks' data, and what was taken ends with the empty line of the
 * last chunk or trailer.
 */
#include "fuzz/common.h"
#include "proxy/body.h"

#define FZ_PIECE_MAX 64 /* bytes of one piece at most */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    fz_quiet_log();
    return 0;
}

typedef struct {
    uint8_t *p; /* data handed on */
    size_t n;   /* its bytes */
    size_t cap; /* room */
} s_sink_t;

static void s_data(void *ud, const char *p, size_t n) {
    s_sink_t *s = ud;
    FZ_CHECK(n > 0, "an empty piece of data");
    FZ_CHECK(s->n + n <= s->cap, "more data than bytes given");
    memcpy(s->p + s->n, p, n);
    s->n += n;
}

typedef struct {
    long taken;      /* bytes that belong to the body, or -1 */
    bool done;       /* the message is complete */
    const char *why; /* the refusal */
} s_result_t;

static void s_start(cb_body_t *b, unsigned mode, uint64_t length) {
    switch (mode) {
    case 1: cb_body_length(b, length); break;
    case 2: cb_body_eof(b); break;
    default: cb_body_chunked(b); break;
    }
}

static uint8_t s_next(uint32_t *x) {
    *x = *x * 1103515245u + 12345u;
    return (uint8_t) (*x >> 16);
}

/* The stream through cb_body_scan_data, in one piece or in pieces. */
static s_result_t s_run(unsigned mode, uint64_t length, const uint8_t *d, size_t n, uint32_t seed,
                        bool pieces, s_sink_t *sink) {
    cb_body_t b;
    s_start(&b, mode, length);
    s_result_t r = {0, cb_body_done(&b), ""};
    size_t at = 0;
    bool each_byte = (seed & 0xffu) == 0;
    do {
        size_t k = n - at;
        if (pieces && k > 0) {
            size_t want = each_byte ? 1 : 1 + s_next(&seed) % FZ_PIECE_MAX;
            if (want < k) k = want;
        }
        char *piece = malloc(k ? k : 1);
        memcpy(piece, d + at, k);
        const char *why = NULL;
        bool was_done = cb_body_done(&b);
        long t = cb_body_scan_data(&b, piece, k, &why, s_data, sink);
        free(piece);
        FZ_CHECK(why != NULL, "a reason, even if empty");
        FZ_CHECK(b.line_len <= sizeof b.line, "line of %zu", b.line_len);
        if (t < 0) {
            FZ_CHECK(t == -1 && why[0] != '\0', "a refusal (%ld) with a reason", t);
            r.taken = -1;
            r.why = why;
            return r;
        }
        FZ_CHECK((size_t) t <= k, "took %ld of %zu", t, k);
        FZ_CHECK(!was_done || t == 0, "took %ld after the end", t);
        FZ_CHECK((size_t) t == k || cb_body_done(&b), "stopped at %ld of %zu, not done", t, k);
        r.taken += t;
        at += (size_t) t;
        r.done = cb_body_done(&b);
        if ((size_t) t < k) break;
    } while (at < n);
    return r;
}

/* A lenient chunked decoder for bytes body.c accepted: the data. */
static size_t s_reference(const uint8_t *d, size_t n, uint8_t *out) {
    size_t i = 0, o = 0;
    for (;;) {
        uint64_t size = 0;
        while (i < n && d[i] != ';' && d[i] != '\r') {
            uint8_t c = d[i++];
            size = size * 16 + (uint64_t) (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        while (i < n && d[i] != '\n')
            i++;
        i++;
        if (size == 0) break;
        FZ_CHECK(i + size + 2 <= n, "a chunk of %llu past what was taken",
                 (unsigned long long) size);
        memcpy(out + o, d + i, size);
        o += size;
        i += size;
        FZ_CHECK(d[i] == '\r' && d[i + 1] == '\n', "CRLF after chunk data");
        i += 2;
    }
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    unsigned mode = data[0] & 3u;
    uint64_t length = ((uint64_t) (data[0] >> 2) << 8) | data[1];
    uint32_t seed = data[1] | ((uint32_t) data[0] << 8);
    const uint8_t *d = data + 2;
    size_t n = size - 2;

    uint8_t *one = malloc(n + 1), *many = malloc(n + 1);
    s_sink_t s1 = {one, 0, n}, s2 = {many, 0, n};
    s_result_t whole = s_run(mode, length, d, n, seed, false, &s1);
    s_result_t cut = s_run(mode, length, d, n, seed, true, &s2);

    FZ_CHECK(whole.taken == cut.taken && whole.done == cut.done,
             "whole: took %ld (done %d), in pieces: %ld (done %d)", whole.taken, whole.done,
             cut.taken, cut.done);
    FZ_CHECK(strcmp(whole.why, cut.why) == 0, "whole: '%s', in pieces: '%s'", whole.why, cut.why);
    if (whole.taken >= 0)
        FZ_CHECK(s1.n == s2.n && memcmp(one, many, s1.n) == 0, "the same data handed on");

    if (whole.taken >= 0) {
        size_t t = (size_t) whole.taken;
        if (mode == 1) {
            size_t want = length < n ? (size_t) length : n;
            FZ_CHECK(t == want && whole.done == (length <= n), "a length body of %llu",
                     (unsigned long long) length);
            FZ_CHECK(s1.n == t && memcmp(one, d, t) == 0, "its bytes handed on");
        } else if (mode == 2) {
            FZ_CHECK(t == n && !whole.done && s1.n == n && memcmp(one, d, n) == 0,
                     "an EOF body takes everything");
        } else if (whole.done) {
            FZ_CHECK(t >= 5 && memcmp(d + t - 4, "\r\n\r\n", 4) == 0,
                     "ends with the last chunk's or trailer's empty line");
            uint8_t *ref = malloc(t + 1);
            size_t rn = s_reference(d, t, ref);
            FZ_CHECK(rn == s1.n && memcmp(ref, one, rn) == 0,
                     "data handed on (%zu) is the chunks' data (%zu)", s1.n, rn);
            free(ref);
        } else {
            FZ_CHECK(t == n, "a chunked body not done took everything");
        }
    }
    free(one);
    free(many);
    return 0;
}
