/* test_proxy_http.c - the proxy's request-head parser: what it accepts,
 * what it refuses and with which status, the head it forwards, and a
 * bounded fuzz run (random and mutated heads must never crash it, read
 * past the given length, or return anything but a status). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/http.h"
#include "fuzz_rng.h"
#include "tap.h"

#define FUZZ_ROUNDS 200000 /* random heads per run (about a second) */
#define FUZZ_MAX    512    /* bytes of one */

static int parse(const char *s, cb_http_req_t *r) {
    const char *why;
    /* an exact-size heap copy: ASan catches any read past the end */
    size_t n = strlen(s);
    char *buf = malloc(n ? n : 1);
    memcpy(buf, s, n);
    int rc = cb_http_parse(buf, n, r, &why);
    free(buf);
    return rc;
}

static uint64_t s_rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) { return fuzz_rnd(&s_rng); }

/* A head that arrives a byte at a time, parsed as route.c does: only when a
 * line feed came since the last INCOMPLETE.  Once per line, same verdicts. */
static void s_byte_at_a_time(void) {
    const char *heads[] = {"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: y\r\n\r\n",
                           "GET http://a.test/ HTTP/1.1\nHost: a.test\r\n\r\n",
                           "get / HTTP/1.1\r\n\r\n"};
    const int want[] = {CB_HTTP_OK, 400, 400};
    const size_t lines[] = {4, 1, 1};
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++) {
        size_t n = strlen(heads[h]), seen = 0, parses = 0;
        int rc = CB_HTTP_INCOMPLETE;
        cb_http_req_t r;
        for (size_t got = 1; got <= n && rc == CB_HTTP_INCOMPLETE; got++) {
            bool gate = cb_http_new_line(heads[h], got, &seen);
            const char *why;
            int direct = cb_http_parse(heads[h], got, &r, &why);
            if (!gate) {
                TAP_OK(direct == rc, "head %zu: no new line at %zu, no new verdict", h, got);
                continue;
            }
            parses++;
            rc = direct;
        }
        TAP_EQ_INT(rc, want[h], "head a byte at a time: the whole head's verdict");
        TAP_EQ_INT(parses, lines[h], "parsed once per line, not once per byte");
    }
}

int main(void) {
    cb_http_req_t r;
    TAP_EQ_INT(parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", &r), CB_HTTP_OK,
               "CONNECT parses");
    TAP_EQ_INT(r.kind, CB_HTTP_CONNECT, "as a tunnel");
    TAP_EQ_STR(r.host, "pypi.org", "host");
    TAP_EQ_INT(r.port, 443, "port");
    TAP_EQ_INT(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &r), CB_HTTP_OK, "CONNECT to IPv6");
    TAP_EQ_STR(r.host, "[::1]", "IPv6 host keeps its brackets");
    TAP_EQ_INT(parse("CONNECT pypi.org HTTP/1.1\r\n\r\n", &r), 400, "CONNECT needs a port");
    TAP_EQ_INT(parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: x\r\n", &r), CB_HTTP_INCOMPLETE,
               "no blank line yet: incomplete");
    TAP_EQ_INT(parse("CONNECT pypi.org:443 HT", &r), CB_HTTP_INCOMPLETE, "partial request line");

    const char *get = "GET http://Example.test:8080/a/b?c=1 HTTP/1.1\r\n"
                      "Host: ignored.test\r\nUser-Agent: t\r\nProxy-Connection: keep-alive\r\n"
                      "Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\r\nBODY";
    TAP_EQ_INT(parse(get, &r), CB_HTTP_OK, "absolute-form GET parses");
    TAP_EQ_INT(r.kind, CB_HTTP_FORWARD, "as a forward");
    TAP_EQ_STR(r.host, "Example.test", "host from the URL, not the Host header");
    TAP_EQ_INT(r.port, 8080, "port from the URL");
    TAP_EQ_INT(r.head_len, strlen(get) - 4, "head ends before the body");
    char out[1024];
    long n = cb_http_forward_head(get, &r, out, sizeof out);
    TAP_OK(n > 0, "forwarded head built");
    out[n > 0 ? n : 0] = '\0';
    TAP_OK(strncmp(out, "GET /a/b?c=1 HTTP/1.1\r\nHost: Example.test:8080\r\n", 48) == 0,
           "origin-form request line and Host of the target");
    TAP_OK(strstr(out, "User-Agent: t\r\n") != NULL, "end-to-end headers kept");
    TAP_OK(strstr(out, "ignored.test") == NULL, "the client's Host header is replaced");
    TAP_OK(strstr(out, "Proxy-") == NULL && strstr(out, "keep-alive") == NULL,
           "hop-by-hop headers dropped");
    TAP_OK(strstr(out, "Connection: close\r\n\r\n") != NULL, "Connection: close upstream");
    TAP_OK(cb_http_forward_head(get, &r, out, 20) < 0, "a short output buffer is refused");

    TAP_EQ_INT(parse("GET http://a.test HTTP/1.0\r\n\r\n", &r), CB_HTTP_OK, "URL without a path");
    n = cb_http_forward_head("GET http://a.test HTTP/1.0\r\n\r\n", &r, out, sizeof out);
    out[n > 0 ? n : 0] = '\0';
    TAP_OK(strncmp(out, "GET / HTTP/1.0\r\nHost: a.test\r\n", 30) == 0, "path '/' and HTTP/1.0");
    TAP_EQ_INT(parse("GET /x HTTP/1.1\r\nHost: a.test:81\r\n\r\n", &r), CB_HTTP_OK,
               "origin-form with Host (curl --unix-socket)");
    TAP_EQ_STR(r.host, "a.test", "host from Host");
    TAP_EQ_INT(r.port, 81, "port from Host");

    static const struct {
        const char *head;
        int status;
        const char *what;
    } bad[] = {
        {"GET /x HTTP/1.1\r\n\r\n", 400, "origin-form without Host"},
        {"GET https://a.test/ HTTP/1.1\r\n\r\n", 400, "https:// without CONNECT"},
        {"GET ftp://a.test/ HTTP/1.1\r\n\r\n", 400, "another scheme"},
        {"GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", 400, "credentials in the URL"},
        {"GET http://a.test/#f HTTP/1.1\r\n\r\n", 400, "fragment"},
        {"GET http://a.test/ HTTP/2.0\r\n\r\n", 505, "HTTP/2 request line"},
        {"GET http://a.test/ FOO/1.1\r\n\r\n", 400, "not HTTP"},
        {"GET  http://a.test/ HTTP/1.1\r\n\r\n", 400, "double space"},
        {"get http://a.test/ HTTP/1.1\r\n\r\n", 400, "lower-case method"},
        {"GET http://a.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400, "obs-fold"},
        {"GET http://a.test/ HTTP/1.1\r\nX : a\r\n\r\n", 400, "space before the colon"},
        {"GET http://a.test/ HTTP/1.1\r\nX\x01: a\r\n\r\n", 400, "control byte in a name"},
        {"GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n", 400, "bare CR in a value"},
        {"GET http://a.test/ HTTP/1.1\n\n", 400, "a head of bare LFs"},
        {"GET /x HTTP/1.1\r\nHost: a.test\r\nX: a\nContent-Length: 5\r\n\r\n", 400,
         "a bare LF inside a header line (an upstream would read one header there)"},
        {"GET /x HTTP/1.1\r\nHost: a.test\r\n\n", 400, "a head ended by a bare LF"},
        {"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "two Host headers"},
        {"POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400,
         "two Content-Length"},
        {"POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
         400, "Content-Length with Transfer-Encoding"},
        {"POST http://a.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "negative length"},
        {"CONNECT a.test:0 HTTP/1.1\r\n\r\n", 400, "port 0"},
        {"CONNECT a.test:99999 HTTP/1.1\r\n\r\n", 400, "port too large"},
        {"CONNECT a test:443 HTTP/1.1\r\n\r\n", 400, "space in the target"},
        {"CONNECT [::1:443 HTTP/1.1\r\n\r\n", 400, "unclosed bracket"},
        {"\r\nGET http://a.test/ HTTP/1.1\r\n\r\n", 400, "leading empty line"},
        {"GARBAGE\r\n\r\n", 400, "no target"},
        {"OPTIONS * HTTP/1.1\r\n\r\n", 400, "asterisk-form"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TAP_EQ_INT(parse(bad[i].head, &r), bad[i].status, bad[i].what);

    /* too many header lines */
    char many[CB_PROXY_HEAD_MAX];
    size_t used = (size_t) snprintf(many, sizeof many, "GET http://a.test/ HTTP/1.1\r\n");
    for (int i = 0; i <= CB_PROXY_HEADERS_MAX; i++)
        used += (size_t) snprintf(many + used, sizeof many - used, "X-%d: y\r\n", i);
    snprintf(many + used, sizeof many - used, "\r\n");
    TAP_EQ_INT(parse(many, &r), 431, "more than CB_PROXY_HEADERS_MAX header lines");

    char reply[CB_PROXY_REPLY_MAX];
    size_t rl =
        cb_http_error(403, "evil.test:443 is not\r\nin the allowlist\x01", reply, sizeof reply);
    reply[rl] = '\0';
    TAP_OK(strncmp(reply, "HTTP/1.1 403 Forbidden (cellblock proxy: evil.test:443 is not??in",
                   65) == 0,
           "the reason phrase names the refusal; CR/LF/controls neutralised");
    TAP_OK(strstr(reply, "\r\n\r\ncellblock proxy: evil.test") != NULL, "the body says it too");

    /* fuzz: random bytes, and mutations of valid heads */
    static const char *const seeds[] = {
        "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
        "GET http://a.test:80/x?y HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
        "GET /p HTTP/1.0\r\nHost: [::1]:8080\r\n\r\n",
    };
    static const char alphabet[] = "GET CONNECT http://[]:/.?#@\r\n\t 0123456789abcHost:";
    long ok = 0, incomplete = 0, errors = 0, weird = 0;
    for (long i = 0; i < FUZZ_ROUNDS; i++) {
        size_t len = (size_t) (rnd() % FUZZ_MAX);
        char *buf = malloc(len ? len : 1);
        if (i % 2 == 0) {
            for (size_t k = 0; k < len; k++)
                buf[k] = rnd() % 4 ? alphabet[rnd() % (sizeof alphabet - 1)] : (char) rnd();
        } else {
            const char *s = seeds[rnd() % 3];
            size_t sl = strlen(s);
            if (len > sl) len = sl;
            memcpy(buf, s, len);
            for (int m = 0; m < 3 && len > 0; m++)
                buf[rnd() % len] = (char) rnd();
        }
        const char *why = NULL;
        int rc = cb_http_parse(buf, len, &r, &why);
        if (rc == CB_HTTP_OK) {
            ok++;
            if (r.head_len > len || r.path_off + r.path_len > len) weird++;
            char fwd[CB_PROXY_HEAD_MAX + CB_PROXY_FWD_EXTRA];
            if (r.kind == CB_HTTP_FORWARD) (void) cb_http_forward_head(buf, &r, fwd, sizeof fwd);
        } else if (rc == CB_HTTP_INCOMPLETE) {
            incomplete++;
        } else if (rc >= 400 && rc <= 505 && why != NULL && why[0] != '\0') {
            errors++;
        } else {
            weird++;
        }
        free(buf);
    }
    TAP_EQ_INT(weird, 0, "fuzz: every result is OK, incomplete, or a status with a reason");
    TAP_OK(ok > 0 && incomplete > 0 && errors > 0,
           "fuzz reached all outcomes (ok %ld, incomplete %ld, errors %ld)", ok, incomplete,
           errors);
    s_byte_at_a_time();
    TAP_DONE();
}
