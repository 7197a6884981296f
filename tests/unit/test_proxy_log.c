/* test_proxy_log.c - what the sandbox names reaches the proxy's log escaped.
 *
 * The host of a request is the sandbox's choice: the parser lets through
 * bytes 0x80-0xff (C1 controls in UTF-8, bidi controls, invalid UTF-8), and
 * the deny and close lines log it with the method and the reason.  The log
 * sink (isolate/log.c) escapes every line with names.c's escaper, so this
 * drives the proxy's own calls (cb_px_deny, cb_px_close) on a hostile
 * request, with a control byte put into the normalised host too, and reads
 * the lines back: no control byte (but the newline), no C1 or bidi control
 * and no invalid UTF-8 may come out raw. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/names.h"
#include "proxy/proxy_priv.h"
#include "tap.h"

#define LOG_READ_MAX 8192 /* bytes of log read back */

/* Every byte of p (n) is printable ASCII or a well-formed UTF-8 sequence
 * that is neither a C1 control nor a bidi control; the newline ends lines. */
static bool clean(const char *p, size_t n, size_t *bad_at) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char) p[i];
        if (c == '\n' || (c >= 0x20 && c < 0x7f)) {
            i++;
            continue;
        }
        uint32_t cp = 0;
        size_t k = c < 0x80 ? 0 : cb_names_utf8_seq((const uint8_t *) p + i, n - i, &cp);
        if (k == 0 || (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
            (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f) {
            *bad_at = i;
            return false;
        }
        i += k;
    }
    return true;
}

int main(void) {
    static const char head[] = "GET http://ex\xc2\x9b"
                               "31m\xe2\x80\xae"
                               "moc.\xff\xfe.test:8080/ HTTP/1.1\r\n\r\n";
    cb_proxy_t *p = calloc(1, sizeof *p);
    cb_pconn_t *c = calloc(1, sizeof *c);
    p->cfg.max_conns = 1;
    p->slots = calloc(1, sizeof *p->slots);
    p->gens = calloc(1, sizeof *p->gens);
    p->log_tokens = CB_PROXY_LOG_BURST;
    p->log_refill = cb_now_ms();
    p->slots[0] = c;
    p->n_open = 1;
    c->cfd = c->ufd = c->hs = c->rule = -1;
    const char *why;
    TAP_EQ_INT(cb_http_parse(head, sizeof head - 1, &c->req, &why), CB_HTTP_OK,
               "a host with C1, bidi and invalid UTF-8 bytes parses");
    TAP_OK(strchr(c->req.host, '\xff') != NULL, "... and keeps them (a later step refuses it)");

    int fds[2];
    TAP_EQ_INT(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0, "pipe");
    int old = cb_log_get_fd();
    cb_log_level_t old_level = cb_log_threshold;
    cb_log_set_fd(fds[1]);
    cb_log_threshold = CB_LOG_INFO;
    cb_px_deny(p, c, 403, "%s is not allowed", c->req.host);
    /* the normalised host, as if a control byte had got past normalising */
    memcpy(c->host, "ev\x1b]2;il\x07\x7f.test", sizeof "ev\x1b]2;il\x07\x7f.test");
    c->state = CB_PX_TUNNEL;
    cb_px_close(p, c);
    cb_log_set_fd(old);
    cb_log_threshold = old_level;
    close(fds[1]);

    char got[LOG_READ_MAX + 1];
    ssize_t n = read(fds[0], got, LOG_READ_MAX);
    close(fds[0]);
    got[n > 0 ? n : 0] = '\0';
    size_t len = n > 0 ? (size_t) n : 0, bad = 0;
    TAP_OK(strstr(got, "deny GET ex\\302\\23331m\\342\\200\\256moc.\\377\\376.test:8080: 403 ") !=
               NULL,
           "the deny line names the host escaped");
    TAP_OK(strstr(got, "ev\\033]2;il\\a\\177.test:8080 closed") != NULL,
           "the close line names the host escaped");
    TAP_OK(clean(got, len, &bad), "nothing raw in %zu bytes of log (first at %zu)", len, bad);
    if (!clean(got, len, &bad)) printf("# %s", got);
    TAP_EQ_INT(p->n_open, 0, "the connection is closed");
    free(p->slots);
    free(p->gens);
    free(p);
    TAP_DONE();
}
