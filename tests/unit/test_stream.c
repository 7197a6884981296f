/*
 * test_stream.c - the runner's stdout/stderr as the kernel reads them:
 * UTF-8 repaired, never cut inside a character (a character split across
 * two reads comes out whole), invalid bytes as U+FFFD, batching, and the
 * prefix used to cut output at a budget on a character boundary.
 */
#include "kernel/stream.h"
#include "tap.h"

#include <fcntl.h>
#include <unistd.h>

static char *s_take(cb_stream_t *s, bool final, size_t *len) {
    return cb_stream_take(s, final, len, 1000);
}

int main(void) {
    static cb_stream_t s;
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) return 1;
    cb_stream_reset(&s);

    /* "a" + "é" * 3, the é of the middle split across two reads */
    const char *all = "a\xc3\xa9\xc3\xa9\xc3\xa9";
    TAP_EQ_INT(write(p[1], all, 4), 4, "write the first 4 bytes");
    TAP_EQ_INT(cb_stream_fill(&s, p[0], 0), 4, "read 4 bytes");
    size_t len;
    char *t = s_take(&s, false, &len);
    TAP_OK(t && len == 3 && memcmp(t, "a\xc3\xa9", 3) == 0, "only whole characters come out");
    TAP_EQ_INT(s.len, 1, "the split character's first byte waits");
    free(t);
    TAP_EQ_INT(write(p[1], all + 4, 3), 3, "write the rest");
    TAP_EQ_INT(cb_stream_fill(&s, p[0], 0), 3, "read it");
    t = s_take(&s, false, &len);
    TAP_OK(t && len == 4 && memcmp(t, "\xc3\xa9\xc3\xa9", 4) == 0,
           "the split character comes out whole, nothing became '?'");
    free(t);

    /* the bug cellblock run --json had: 100000 é with reads of any size */
    size_t n = 200001;
    char *big = malloc(n);
    big[0] = 'a';
    for (size_t i = 1; i < n; i += 2)
        big[i] = '\xc3', big[i + 1] = '\xa9';
    size_t out_bytes = 0, bad = 0;
    for (size_t off = 0; off < n;) {
        size_t chunk = n - off < 4099 ? n - off : 4099; /* odd: splits characters */
        memcpy(s.buf + s.len, big + off, chunk);
        s.len += chunk;
        off += chunk;
        t = s_take(&s, off == n, &len);
        for (size_t i = 0; t && i < len; i++)
            bad += t[i] == '?' || (unsigned char) t[i] == 0xef;
        out_bytes += len;
        free(t);
    }
    TAP_EQ_INT(out_bytes, n, "every byte of 'a' + 'é' * 100000 comes out");
    TAP_EQ_INT(bad, 0, "no replacement characters");
    free(big);

    /* invalid bytes and a truncated sequence at the end */
    memcpy(s.buf,
           "x\xff"
           "y\xe2\x82",
           5);
    s.len = 5;
    t = s_take(&s, false, &len);
    TAP_OK(t && len == 5 && memcmp(t, "x\xef\xbf\xbdy", 5) == 0, "an invalid byte becomes U+FFFD");
    free(t);
    t = s_take(&s, true, &len);
    TAP_OK(t && len == 6 && memcmp(t, "\xef\xbf\xbd\xef\xbf\xbd", 6) == 0,
           "at the end, an incomplete sequence is replaced, not kept");
    free(t);
    const char *overlong = "\xc0\xaf\xed\xa0\x80";
    size_t used, olen;
    t = cb_utf8_clean((const uint8_t *) overlong, 5, true, &used, &olen);
    TAP_OK(t && strstr(t, "\xc0") == NULL && strstr(t, "\xed\xa0") == NULL,
           "overlong forms and surrogates are refused");
    free(t);

    /* batching */
    cb_stream_reset(&s);
    s.last_ms = 0;
    TAP_EQ_INT(write(p[1], "hi", 2), 2, "write after a quiet period");
    cb_stream_fill(&s, p[0], 1000);
    TAP_OK(!cb_stream_due(&s, 1000) && cb_stream_due(&s, 1000 + CB_STREAM_FIRST_MS),
           "the first bytes after a quiet period wait CB_STREAM_FIRST_MS");
    free(s_take(&s, false, &len));

    /* the budget cut */
    const char *txt = "ab\xc3\xa9"
                      "cd";
    TAP_EQ_INT(cb_utf8_prefix(txt, 6, 3), 2, "a cut inside a character moves before it");
    TAP_EQ_INT(cb_utf8_prefix(txt, 6, 4), 4, "a cut after it keeps it");
    TAP_EQ_INT(cb_utf8_prefix(txt, 6, 100), 6, "no cut when it fits");
    close(p[0]);
    close(p[1]);
    TAP_DONE();
}
