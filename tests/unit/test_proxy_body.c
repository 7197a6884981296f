/* test_proxy_body.c - where a message ends (proxy/body.c) and what the
 * parsers say about it (proxy/http.c): request framing fields, response
 * heads, Content-Length and chunked bodies fed whole and byte by byte, the
 * malformed chunk shapes request smuggling relies on, and a bounded fuzz
 * run (the scanner never takes more than it is given). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/body.h"
#include "proxy/http.h"
#include "fuzz_rng.h"
#include "tap.h"

#define FUZZ_ROUNDS 100000 /* random bodies per run */
#define FUZZ_MAX    256    /* bytes of one */

/* Scans s as a chunked body, whole (step 0) or step bytes at a time:
 * bytes taken, -1 malformed; *done whether it ended. */
static long chunked(const char *s, size_t step, bool *done) {
    cb_body_t b;
    cb_body_chunked(&b);
    size_t n = strlen(s), at = 0;
    const char *why;
    while (at < n && !cb_body_done(&b)) {
        size_t k = step == 0 || n - at < step ? n - at : step;
        char *buf = malloc(k); /* exact size: ASan sees a read past it */
        memcpy(buf, s + at, k);
        long r = cb_body_scan(&b, buf, k, &why);
        free(buf);
        if (r < 0) return -1;
        at += (size_t) r;
        if ((size_t) r < k) break;
    }
    *done = cb_body_done(&b);
    return (long) at;
}

static int req(const char *s, cb_http_req_t *r) {
    const char *why;
    return cb_http_parse(s, strlen(s), r, &why);
}

static int resp(const char *s, cb_http_resp_t *r) {
    const char *why;
    return cb_http_parse_response(s, strlen(s), r, &why);
}

/* The data pieces cb_body_scan_data hands over, joined. */
typedef struct {
    char buf[256]; /* the data so far */
    size_t len;    /* its bytes */
    size_t calls;  /* pieces */
} data_t;

static void on_data(void *ud, const char *p, size_t n) {
    data_t *d = ud;
    if (d->len + n <= sizeof d->buf) memcpy(d->buf + d->len, p, n);
    d->len += n;
    d->calls++;
}

/* A chunked body fed step bytes at a time: its data, without the framing,
 * is exactly want. */
static bool data_is(const char *s, size_t step, const char *want) {
    cb_body_t b;
    cb_body_chunked(&b);
    data_t d = {.len = 0};
    const char *why;
    for (size_t at = 0, n = strlen(s); at < n;) {
        size_t k = n - at < step ? n - at : step;
        long r = cb_body_scan_data(&b, s + at, k, &why, on_data, &d);
        if (r <= 0) return false;
        at += (size_t) r;
    }
    return cb_body_done(&b) && d.len == strlen(want) && memcmp(d.buf, want, d.len) == 0;
}

static uint64_t s_rng = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void) { return fuzz_rnd(&s_rng); }

int main(void) {
    /* ---- Content-Length ---- */
    cb_body_t b;
    const char *why;
    cb_body_length(&b, 5);
    TAP_EQ_INT(cb_body_scan(&b, "hel", 3, &why), 3, "length: all of a short piece");
    TAP_EQ_INT(cb_body_scan(&b, "loGET /", 7, &why), 2, "length: stops at the end");
    TAP_OK(cb_body_done(&b), "length: done");
    TAP_EQ_INT(cb_body_scan(&b, "x", 1, &why), 0, "nothing more belongs to a done body");
    cb_body_length(&b, 0);
    TAP_OK(cb_body_done(&b), "length 0: done at once");
    cb_body_eof(&b);
    TAP_EQ_INT(cb_body_scan(&b, "abc", 3, &why), 3, "eof: takes everything");
    TAP_OK(!cb_body_done(&b), "eof: never done by itself");

    /* ---- the data of a body, without its framing ---- */
    data_t d = {.len = 0};
    cb_body_length(&b, 5);
    TAP_EQ_INT(cb_body_scan_data(&b, "helloGET", 8, &why, on_data, &d), 5, "data: length");
    TAP_OK(d.len == 5 && memcmp(d.buf, "hello", 5) == 0, "data: the body's bytes only");
    static const char ck[] = "3;ext=1\r\ncb-\r\n4\r\nsecr\r\n3\r\net-\r\n0\r\nT: x\r\n\r\n";
    bool all = true;
    for (size_t step = 1; step <= sizeof ck; step++)
        all = all && data_is(ck, step, "cb-secret-");
    TAP_OK(all, "data: a chunked body's data, joined, whatever the pieces");

    /* ---- chunked, valid ---- */
    static const char *const good[] = {
        "0\r\n\r\n",
        "5\r\nhello\r\n0\r\n\r\n",
        "5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n",
        "3\r\nabc\r\n0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n",
        "00000f\r\n0123456789abcde\r\n0;last\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        bool done1 = false, done2 = false;
        long whole = chunked(good[i], 0, &done1), bytes = chunked(good[i], 1, &done2);
        TAP_OK(whole == (long) strlen(good[i]) && done1, "chunked %zu: taken whole", i);
        TAP_OK(bytes == whole && done2, "chunked %zu: the same byte by byte", i);
    }
    bool done = false;
    const char *two = "3\r\nabc\r\n0\r\n\r\nGET http://evil.test/ HTTP/1.1\r\n\r\n";
    TAP_EQ_INT(chunked(two, 0, &done), 13, "chunked: ends before what follows");
    TAP_OK(done, "chunked: done");

    /* ---- chunked, refused ---- */
    static const struct {
        const char *body;
        const char *what;
    } bad[] = {
        {"0x5\r\nhello\r\n0\r\n\r\n", "0x prefix"},
        {" 5\r\nhello\r\n0\r\n\r\n", "leading space"},
        {"5 \r\nhello\r\n0\r\n\r\n", "trailing space"},
        {"5\nhello\r\n0\r\n\r\n", "bare LF after the size"},
        {"5\r\nhello\n0\r\n\r\n", "bare LF after the data"},
        {"5\r\nhelloXX\r\n0\r\n\r\n", "data longer than the size"},
        {"-5\r\nhello\r\n0\r\n\r\n", "negative size"},
        {"+5\r\nhello\r\n0\r\n\r\n", "signed size"},
        {"1000000000000000005\r\nx\r\n", "more than 15 hex digits"},
        {"\r\n", "empty size line"},
        {"5\r\r\nhello\r\n", "CR inside the size line"},
        {"5;a\x01\r\nhello\r\n", "control byte in an extension"},
        {"0\r\n folded: x\r\n\r\n", "folded trailer"},
        {"0\r\nno colon\r\n\r\n", "trailer without a colon"},
        {"0\r\n: value\r\n\r\n", "trailer without a name"},
        {"0\r\nX: 1\n\r\n", "trailer ended by a bare LF"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TAP_EQ_INT(chunked(bad[i].body, 0, &done), -1, bad[i].what);
        TAP_EQ_INT(chunked(bad[i].body, 1, &done), -1, "(byte by byte)");
    }
    char longline[CB_PROXY_CHUNK_LINE_MAX + 8];
    memset(longline, 'a', sizeof longline);
    longline[0] = '1';
    longline[1] = ';';
    longline[sizeof longline - 1] = '\0';
    TAP_EQ_INT(chunked(longline, 0, &done), -1, "a chunk line longer than CB_PROXY_CHUNK_LINE_MAX");

    /* ---- request framing ---- */
    cb_http_req_t r;
    TAP_EQ_INT(req("POST http://a.test/ HTTP/1.1\r\nContent-Length: 12\r\n\r\n", &r), CB_HTTP_OK,
               "Content-Length parses");
    TAP_OK(r.has_length && r.length == 12 && !r.chunked && !r.close, "length 12, kept alive");
    TAP_EQ_INT(req("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", &r),
               CB_HTTP_OK, "chunked (any case) parses");
    TAP_OK(r.chunked && !r.has_length, "chunked");
    TAP_EQ_INT(req("GET http://a.test/ HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n", &r),
               CB_HTTP_OK, "Connection list");
    TAP_OK(r.close, "close among the tokens");
    TAP_EQ_INT(req("GET http://a.test/ HTTP/1.0\r\n\r\n", &r), CB_HTTP_OK, "HTTP/1.0");
    TAP_OK(r.close, "HTTP/1.0 closes by default");
    TAP_EQ_INT(req("GET http://a.test/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r), CB_HTTP_OK,
               "HTTP/1.0 keep-alive");
    TAP_OK(!r.close, "... stays open");
    static const struct {
        const char *head;
        int status;
        const char *what;
    } badreq[] = {
        {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
         "gzip, chunked"},
        {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 501,
         "chunked, gzip"},
        {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", 501, "xchunked"},
        {"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
         "chunked\r\n\r\n",
         400, "two Transfer-Encoding headers"},
        {"POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "TE in HTTP/1.0"},
        {"POST http://a/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400, "signed length"},
        {"POST http://a/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", 400, "a list of lengths"},
        {"POST http://a/ HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n", 400,
         "19 digits"},
        {"POST http://a/ HTTP/1.1\r\nContent-Length:\r\n\r\n", 400, "empty length"},
    };
    for (size_t i = 0; i < sizeof badreq / sizeof badreq[0]; i++)
        TAP_EQ_INT(req(badreq[i].head, &r), badreq[i].status, badreq[i].what);

    /* ---- response heads ---- */
    cb_http_resp_t rs;
    TAP_EQ_INT(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", &rs), CB_HTTP_OK,
               "a response parses");
    TAP_OK(rs.status == 200 && rs.has_length && rs.length == 5 && !rs.close, "200, length 5");
    TAP_EQ_INT(rs.head_len, 38, "its head length");
    TAP_EQ_INT(
        resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
             &rs),
        CB_HTTP_OK, "TE over two headers");
    TAP_OK(rs.chunked && !rs.other_coding, "the last coding (chunked) decides");
    TAP_EQ_INT(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", &rs), CB_HTTP_OK,
               "chunked not last");
    TAP_OK(!rs.chunked && rs.other_coding, "... ends at close");
    TAP_EQ_INT(
        resp("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", &rs),
        CB_HTTP_OK, "CL and TE in a response");
    TAP_OK(rs.chunked && !rs.has_length && rs.close, "TE wins, the connection ends after");
    TAP_EQ_INT(resp("HTTP/1.0 204\r\n\r\n", &rs), CB_HTTP_OK, "no reason phrase, 1.0");
    TAP_OK(rs.status == 204 && rs.close, "204, closes");
    TAP_EQ_INT(resp("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", &rs), CB_HTTP_OK,
               "interim head");
    TAP_OK(rs.status == 100 && rs.head_len == 25, "only the interim head");
    TAP_EQ_INT(resp("HTTP/1.1 200 OK\r\nX: y\r\n", &rs), CB_HTTP_INCOMPLETE, "incomplete");
    static const char *const badresp[] = {
        "HTTP/2 200\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 099 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX\x01: a\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof badresp / sizeof badresp[0]; i++)
        TAP_OK(resp(badresp[i], &rs) == 502, "refused response head %zu", i);

    /* ---- fuzz: the scanner takes at most what it is given ---- */
    static const char alphabet[] = "0123456789abcdefABCDEF;=\r\n\t :xX-";
    long weird = 0, ended = 0, refused = 0;
    for (long i = 0; i < FUZZ_ROUNDS; i++) {
        size_t len = (size_t) (rnd() % FUZZ_MAX) + 1;
        char *buf = malloc(FUZZ_MAX + 1);
        if (i % 2 == 0) {
            for (size_t k = 0; k < len; k++)
                buf[k] = rnd() % 8 ? alphabet[rnd() % (sizeof alphabet - 1)] : (char) rnd();
        } else { /* a valid body with one byte changed (or none) */
            const char *s = good[rnd() % (sizeof good / sizeof good[0])];
            len = strlen(s);
            memcpy(buf, s, len < FUZZ_MAX ? len : FUZZ_MAX);
            if (rnd() % 4) buf[rnd() % len] = (char) rnd();
        }
        cb_body_chunked(&b);
        size_t at = 0;
        long r1 = 0;
        while (at < len && r1 >= 0 && !cb_body_done(&b)) {
            size_t k = 1 + (size_t) (rnd() % (len - at));
            r1 = cb_body_scan(&b, buf + at, k, &why);
            if (r1 > (long) k) weird++;
            if (r1 >= 0) at += (size_t) r1;
            if (r1 >= 0 && (size_t) r1 < k && !cb_body_done(&b)) weird++;
        }
        if (r1 < 0 && why[0] == '\0') weird++;
        ended += cb_body_done(&b);
        refused += r1 < 0;
        free(buf);
    }
    TAP_EQ_INT(weird, 0, "fuzz: never more than given, short only at the end, reasons given");
    TAP_OK(refused > 0 && ended > 0, "fuzz: refusals (%ld) and ends (%ld)", refused, ended);
    TAP_DONE();
}
