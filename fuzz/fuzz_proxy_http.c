/*
 * fuzz_proxy_http.c - the proxy's head parsers (proxy/http.c): the request
 * head the sandbox sends, the response head an upstream sends back, the
 * head forwarded upstream and the error reply.
 *
 * The input: a mode byte, then the head's bytes (at most CB_PROXY_HEAD_MAX,
 * as route.c and relay.c bound them).  Mode bit 0: 0 a request head, 1 a
 * response head.
 *
 * Request properties: a known result (OK, INCOMPLETE, 400, 431, 501, 505)
 * with a reason for an error; an accepted head ends with its blank line
 * within the buffer, names a method and a host that fit, a port, no
 * Content-Length beside chunked, an origin-form path within the head; the
 * bytes after the head change nothing; every cut of the buffer before the
 * head's end is INCOMPLETE or the same error (the proxy parses what has
 * arrived so far: a read boundary must never change the verdict).  The head
 * forwarded upstream fits CB_PROXY_HOUT_MAX, holds no control byte but its
 * CRLFs, has no second Host, Connection or Proxy-* header, and parsed again
 * is the same request (target, framing, version): what the upstream sees is
 * what the proxy checked.  Into any smaller buffer it fails or fits exactly.
 * The error reply for the reason is within its buffer and clean.
 *
 * Response properties: a known result (OK, INCOMPLETE, 502), a status of
 * 100..999, the head within the buffer, framing that is one of length,
 * chunked, another coding or none; cuts as for requests.
 */
#include "fuzz/common.h"
#include "proxy/http.h"

#include <strings.h>

#define FZ_CUTS_MAX 24 /* cuts of one head tried */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    fz_quiet_log();
    return 0;
}

/* The head in an exact-size copy, so that ASan sees a read past len. */
static int s_parse(const uint8_t *d, size_t len, cb_http_req_t *req, const char **why) {
    char *b = malloc(len ? len : 1);
    memcpy(b, d, len);
    int rc = cb_http_parse(b, len, req, why);
    free(b);
    return rc;
}

static int s_parse_resp(const uint8_t *d, size_t len, cb_http_resp_t *resp, const char **why) {
    char *b = malloc(len ? len : 1);
    memcpy(b, d, len);
    int rc = cb_http_parse_response(b, len, resp, why);
    free(b);
    return rc;
}

/* Offsets to cut at before end: each line's end (the first FZ_CUTS_MAX) and
 * a few in between. */
static size_t s_cuts(const uint8_t *d, size_t end, size_t *cuts) {
    size_t k = 0;
    for (size_t i = 0; i < end && k < FZ_CUTS_MAX - 3; i++)
        if (d[i] == '\n') cuts[k++] = i;
    cuts[k++] = end / 2;
    cuts[k++] = end > 0 ? end - 1 : 0;
    cuts[k++] = end > 1 ? end - 2 : 0;
    return k;
}

static bool s_line_is(const char *l, size_t n, const char *name) {
    size_t nl = strlen(name);
    return n > nl && l[nl] == ':' && strncasecmp(l, name, nl) == 0;
}

static void s_check_forward(const char *buf, const cb_http_req_t *req) {
    static char out[CB_PROXY_HOUT_MAX];
    long w = cb_http_forward_head(buf, req, out, sizeof out);
    FZ_CHECK(w > 0 && (size_t) w <= sizeof out, "a head of %zu bytes forwards within %d (%ld)",
             req->head_len, CB_PROXY_HOUT_MAX, w);
    size_t n = (size_t) w;
    FZ_CHECK(n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0, "ends with its blank line");
    size_t hosts = 0, conns = 0, lines = 0;
    for (size_t i = 0, start = 0; i < n; i++) {
        unsigned char c = (unsigned char) out[i];
        FZ_CHECK((c >= 0x20 && c != 0x7f) || c == '\t' ||
                     (c == '\r' && i + 1 < n && out[i + 1] == '\n') ||
                     (c == '\n' && i > 0 && out[i - 1] == '\r'),
                 "byte 0x%02x at %zu of the forwarded head", c, i);
        if (c != '\n') continue;
        lines++;
        const char *l = out + start;
        size_t ll = i - 1 - start;
        hosts += s_line_is(l, ll, "host");
        conns += s_line_is(l, ll, "connection");
        FZ_CHECK(!s_line_is(l, ll, "proxy-authorization") &&
                     !s_line_is(l, ll, "proxy-connection") && !s_line_is(l, ll, "upgrade") &&
                     !s_line_is(l, ll, "keep-alive"),
                 "a hop-by-hop header forwarded");
        start = i + 1;
    }
    FZ_CHECK(hosts == 1 && conns == 1, "one Host (%zu) and one Connection (%zu)", hosts, conns);
    /* parsed again: the same request (but for the count of header lines:
     * Host and Connection added to a head at the limit go over it) */
    cb_http_req_t again;
    const char *why;
    int rc = s_parse((const uint8_t *) out, n, &again, &why);
    if (rc == 431 && lines - 2 > CB_PROXY_HEADERS_MAX) return;
    FZ_CHECK(rc == CB_HTTP_OK, "the forwarded head is refused: %d %s", rc, why);
    FZ_CHECK(again.kind == CB_HTTP_FORWARD && again.origin_form && again.head_len == n,
             "an origin-form head, whole");
    FZ_CHECK(strcmp(again.method, req->method) == 0, "method");
    FZ_CHECK(strcmp(again.host, req->host) == 0 && again.port == req->port,
             "target %s:%u, was %s:%u", again.host, again.port, req->host, req->port);
    FZ_CHECK(again.minor == req->minor && again.chunked == req->chunked &&
                 again.has_length == req->has_length && again.length == req->length,
             "version and framing");
    FZ_CHECK(again.close, "Connection: close upstream");
    /* any smaller buffer: refused, or written within it */
    const size_t smaller[] = {n - 1, n / 2, req->head_len % n};
    for (size_t i = 0; i < sizeof smaller / sizeof smaller[0]; i++) {
        char *small = malloc(smaller[i] ? smaller[i] : 1); /* exact size: ASan sees past it */
        long s = cb_http_forward_head(buf, req, small, smaller[i]);
        FZ_CHECK(s == -1, "%zu bytes into %zu: %ld", n, smaller[i], s);
        free(small);
    }
}

/* Where the bytes up to n end their last line (0: no line feed). */
static size_t s_line_end(const uint8_t *d, size_t n) {
    while (n > 0 && d[n - 1] != '\n')
        n--;
    return n;
}

/* A parser's verdict on the first len bytes (the head it fills is dropped). */
typedef int (*s_verdict_fn)(const uint8_t *d, size_t len, const char **why);

static int s_req_verdict(const uint8_t *d, size_t len, const char **why) {
    cb_http_req_t req;
    return s_parse(d, len, &req, why);
}

static int s_resp_verdict(const uint8_t *d, size_t len, const char **why) {
    cb_http_resp_t resp;
    return s_parse_resp(d, len, &resp, why);
}

/* Cuts before the head's end (end of len bytes; the whole gave rc, why):
 * INCOMPLETE or the same error (a read boundary never changes the verdict),
 * and the same verdict as the bytes up to the cut's last line feed (what
 * comes after it changes nothing: cb_http_new_line). */
static void s_check_cuts(const uint8_t *d, size_t len, size_t end, int rc, const char *why,
                         s_verdict_fn verdict) {
    size_t cuts[FZ_CUTS_MAX];
    size_t k = s_cuts(d, end, cuts);
    for (size_t i = 0; i < k; i++) {
        if (cuts[i] >= end) continue;
        const char *pw;
        int prc = verdict(d, cuts[i], &pw);
        FZ_CHECK(prc == CB_HTTP_INCOMPLETE || (prc == rc && strcmp(pw, why) == 0),
                 "%zu of %zu bytes: %d (%s), whole: %d (%s)", cuts[i], len, prc, pw, rc, why);
        size_t line_end = s_line_end(d, cuts[i]);
        const char *lw;
        int lrc = verdict(d, line_end, &lw);
        FZ_CHECK(lrc == prc && strcmp(lw, pw) == 0,
                 "%zu bytes: %d (%s), to its last line feed (%zu): %d (%s)", cuts[i], prc, pw,
                 line_end, lrc, lw);
        size_t seen = line_end;
        FZ_CHECK(!cb_http_new_line((const char *) d, cuts[i], &seen) && seen == cuts[i],
                 "no line feed after %zu in %zu", line_end, cuts[i]);
    }
}

static void s_request(const uint8_t *d, size_t len) {
    cb_http_req_t req;
    const char *why = NULL;
    int rc = s_parse(d, len, &req, &why);
    FZ_CHECK(why != NULL, "a reason, even if empty");
    FZ_CHECK(rc == CB_HTTP_OK || rc == CB_HTTP_INCOMPLETE || rc == 400 || rc == 431 || rc == 501 ||
                 rc == 505,
             "known result %d", rc);
    if (rc >= 400) FZ_CHECK(why[0] != '\0', "an error has a reason");
    size_t end = len;
    if (rc == CB_HTTP_OK) {
        FZ_CHECK(req.head_len >= 4 && req.head_len <= len, "head of %zu in %zu", req.head_len, len);
        FZ_CHECK(memcmp(d + req.head_len - 4, "\r\n\r\n", 4) == 0, "ends with a blank line");
        FZ_CHECK(req.kind == CB_HTTP_CONNECT || req.kind == CB_HTTP_FORWARD, "kind %d", req.kind);
        size_t ml = strnlen(req.method, sizeof req.method);
        size_t hl = strnlen(req.host, sizeof req.host);
        FZ_CHECK(ml > 0 && ml < sizeof req.method, "method");
        FZ_CHECK(hl > 0 && hl < sizeof req.host, "host");
        FZ_CHECK(req.port > 0, "port");
        FZ_CHECK(req.minor == 0 || req.minor == 1, "minor %d", req.minor);
        FZ_CHECK(!(req.chunked && req.has_length), "Content-Length beside chunked");
        FZ_CHECK(!req.chunked || req.minor == 1, "chunked in HTTP/1.0");
        FZ_CHECK(req.kind != CB_HTTP_CONNECT || req.port_given, "CONNECT names its port");
        if (req.kind == CB_HTTP_FORWARD) {
            FZ_CHECK(req.path_off + req.path_len <= req.head_len, "path within the head");
            FZ_CHECK(!req.origin_form || (req.path_len > 0 && d[req.path_off] == '/'),
                     "an origin-form path starts with '/'");
        }
        for (size_t i = 0; i < hl; i++) {
            unsigned char c = (unsigned char) req.host[i];
            FZ_CHECK(c > ' ' && c != 0x7f && c != '/' && c != '@' && c != '\\', "host byte 0x%02x",
                     c);
        }
        /* the bytes after the head change nothing */
        cb_http_req_t head_only;
        const char *w2;
        FZ_CHECK(s_parse(d, req.head_len, &head_only, &w2) == CB_HTTP_OK &&
                     memcmp(&head_only, &req, sizeof req) == 0,
                 "the head alone parses the same");
        end = req.head_len;
        if (req.kind == CB_HTTP_FORWARD) {
            char *b = malloc(len);
            memcpy(b, d, len);
            s_check_forward(b, &req);
            free(b);
        }
    }
    s_check_cuts(d, len, end, rc, why, s_req_verdict); /* whatever has arrived so far */
    /* the error reply for the reason */
    if (rc >= 400) {
        char reply[CB_PROXY_REPLY_MAX];
        size_t n = cb_http_error(rc, why, reply, sizeof reply);
        FZ_CHECK(n > 0 && n < sizeof reply, "reply of %zu", n);
    }
}

static void s_response(const uint8_t *d, size_t len) {
    cb_http_resp_t resp;
    const char *why = NULL;
    int rc = s_parse_resp(d, len, &resp, &why);
    FZ_CHECK(why != NULL, "a reason, even if empty");
    FZ_CHECK(rc == CB_HTTP_OK || rc == CB_HTTP_INCOMPLETE || rc == 502, "known result %d", rc);
    size_t end = len;
    if (rc == CB_HTTP_OK) {
        FZ_CHECK(resp.status >= 100 && resp.status <= 999, "status %d", resp.status);
        FZ_CHECK(resp.head_len >= 2 && resp.head_len <= len, "head of %zu in %zu", resp.head_len,
                 len);
        FZ_CHECK(d[resp.head_len - 1] == '\n', "ends with a line");
        FZ_CHECK(resp.chunked + resp.other_coding + resp.has_length <= 1, "one framing");
        end = resp.head_len;
    } else if (rc == 502) {
        FZ_CHECK(why[0] != '\0', "an error has a reason");
    }
    s_check_cuts(d, len, end, rc, why, s_resp_verdict);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t len = size - 1;
    if (len > CB_PROXY_HEAD_MAX) len = CB_PROXY_HEAD_MAX;
    if ((data[0] & 1u) == 0)
        s_request(data + 1, len);
    else
        s_response(data + 1, len);
    return 0;
}
