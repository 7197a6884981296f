/*
 * http.c - request heads in, forwarded heads and error replies out (see
 * http.h).  Every read is bounded by the caller's length; the head is walked
 * line by line with memchr, never with str* functions on the raw buffer.
 */
#include "proxy/http.h"
#include "proxy/outbuf.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *p; /* start of the line */
    size_t len;    /* without CR LF */
} s_line_t;

bool cb_http_tchar(unsigned char c) {
    return isalnum(c) || (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Next line of [*pos, end): 1 got one, 0 no newline yet, -1 bad bytes. */
static int s_next_line(const char **pos, const char *end, s_line_t *line) {
    const char *p = *pos;
    const char *nl = memchr(p, '\n', (size_t) (end - p));
    if (nl == NULL) return 0;
    size_t len = (size_t) (nl - p);
    if (len > 0 && p[len - 1] == '\r') len--;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) p[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) return -1;
    }
    line->p = p;
    line->len = len;
    *pos = nl + 1;
    return 1;
}

/* The next line of a request head: CRLF only, so that an upstream behind
 * the proxy (it gets a bumped head as sent) cannot split it elsewhere.  As
 * s_next_line, and -2 for a line ended by a bare LF. */
static int s_next_req_line(const char **pos, const char *end, s_line_t *line) {
    int r = s_next_line(pos, end, line);
    if (r == 1 && (size_t) (*pos - line->p) != line->len + 2) return -2;
    return r;
}

static bool s_ieq(const char *a, size_t al, const char *lit) {
    size_t ll = strlen(lit);
    return al == ll && strncasecmp(a, lit, ll) == 0;
}

static bool s_iprefix(const char *a, size_t al, const char *lit) {
    size_t ll = strlen(lit);
    return al >= ll && strncasecmp(a, lit, ll) == 0;
}

/* "host[:port]" or "[v6][:port]" -> req->host, req->port (default when
 * absent, 0 = required).  0 ok, -1 malformed. */
static int s_authority(const char *a, size_t len, uint16_t dflt, cb_http_req_t *req) {
    const char *h = a, *port = NULL;
    size_t hl = len, pl = 0;
    if (len > 0 && a[0] == '[') {
        const char *close = memchr(a, ']', len);
        if (close == NULL) return -1;
        hl = (size_t) (close - a) + 1;
        if (hl < len) {
            if (close[1] != ':') return -1;
            port = close + 2;
            pl = len - hl - 1;
        }
    } else {
        const char *colon = memchr(a, ':', len);
        if (colon != NULL) {
            hl = (size_t) (colon - a);
            port = colon + 1;
            pl = len - hl - 1;
        }
    }
    if (hl == 0 || hl >= sizeof req->host) return -1;
    for (size_t i = 0; i < hl; i++)
        if (isspace((unsigned char) h[i]) || h[i] == '@' || h[i] == '/' || h[i] == '\\') return -1;
    memcpy(req->host, h, hl);
    req->host[hl] = '\0';
    if (port == NULL) {
        if (dflt == 0) return -1;
        req->port = dflt;
        return 0;
    }
    if (pl == 0 || pl > 5) return -1;
    unsigned long v = 0;
    for (size_t i = 0; i < pl; i++) {
        if (!isdigit((unsigned char) port[i])) return -1;
        v = v * 10 + (unsigned long) (port[i] - '0');
    }
    if (v < 1 || v > 65535) return -1;
    req->port = (uint16_t) v;
    req->port_given = true;
    return 0;
}

static int s_bad(const char **why, const char *text, int status) {
    *why = text;
    return status;
}

/* Content-Length: 1-18 digits.  0 ok, -1 malformed. */
static int s_length(const char *v, size_t n, uint64_t *out) {
    if (n == 0 || n > CB_PROXY_CL_DIGITS_MAX) return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char) v[i])) return -1;
        x = x * 10 + (uint64_t) (v[i] - '0');
    }
    *out = x;
    return 0;
}

/* Does the comma-separated list v (n bytes) hold token lit? */
static bool s_has_token(const char *v, size_t n, const char *lit) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e > s && s_ieq(v + s, e - s, lit)) return true;
    }
    return false;
}

/* The last coding of a Transfer-Encoding list is chunked. */
static bool s_chunked_last(const char *v, size_t n) {
    size_t e = n;
    while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t'))
        e--;
    size_t s = e;
    while (s > 0 && v[s - 1] != ',')
        s--;
    while (s < e && (v[s] == ' ' || v[s] == '\t'))
        s++;
    return s_ieq(v + s, e - s, "chunked");
}

/* One header line: the name's length and the trimmed value.  0 ok, -1 not
 * "token: value". */
static int s_field(const s_line_t *h, size_t *nl, const char **v, size_t *vlen) {
    if (h->p[0] == ' ' || h->p[0] == '\t') return -1;
    const char *colon = memchr(h->p, ':', h->len);
    if (colon == NULL || colon == h->p) return -1;
    *nl = (size_t) (colon - h->p);
    for (size_t i = 0; i < *nl; i++)
        if (!cb_http_tchar((unsigned char) h->p[i])) return -1;
    *v = colon + 1;
    *vlen = h->len - *nl - 1;
    while (*vlen > 0 && (**v == ' ' || **v == '\t'))
        (*v)++, (*vlen)--;
    while (*vlen > 0 && ((*v)[*vlen - 1] == ' ' || (*v)[*vlen - 1] == '\t'))
        (*vlen)--;
    return 0;
}

bool cb_http_new_line(const char *buf, size_t len, size_t *seen) {
    size_t from = *seen <= len ? *seen : 0;
    *seen = len;
    return memchr(buf + from, '\n', len - from) != NULL;
}

int cb_http_parse(const char *buf, size_t len, cb_http_req_t *req, const char **why) {
    memset(req, 0, sizeof *req);
    *why = "";
    const char *pos = buf, *end = buf + len;
    s_line_t rl;
    int r = s_next_req_line(&pos, end, &rl);
    if (r == 0) return CB_HTTP_INCOMPLETE;
    if (r == -2) return s_bad(why, "a line not ended by CRLF", 400);
    if (r < 0) return s_bad(why, "control bytes in the request line", 400);
    /* METHOD SP TARGET SP HTTP/1.x, single spaces */
    const char *sp1 = memchr(rl.p, ' ', rl.len);
    if (sp1 == NULL) return s_bad(why, "malformed request line", 400);
    size_t ml = (size_t) (sp1 - rl.p);
    if (ml == 0 || ml >= sizeof req->method) return s_bad(why, "malformed method", 400);
    for (size_t i = 0; i < ml; i++)
        if (!isupper((unsigned char) rl.p[i])) return s_bad(why, "malformed method", 400);
    memcpy(req->method, rl.p, ml);
    req->method[ml] = '\0';
    const char *tgt = sp1 + 1;
    size_t rest = rl.len - ml - 1;
    const char *sp2 = memchr(tgt, ' ', rest);
    if (sp2 == NULL || sp2 == tgt) return s_bad(why, "malformed request line", 400);
    size_t tl = (size_t) (sp2 - tgt);
    const char *ver = sp2 + 1;
    size_t vl = rest - tl - 1;
    if (vl != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1')) {
        if (vl >= 5 && memcmp(ver, "HTTP/", 5) == 0)
            return s_bad(why, "only HTTP/1.0 and HTTP/1.1", 505);
        return s_bad(why, "malformed request line", 400);
    }
    req->minor = ver[7] - '0';
    for (size_t i = 0; i < tl; i++)
        if (isspace((unsigned char) tgt[i])) return s_bad(why, "malformed request target", 400);

    bool need_host = false;
    if (strcmp(req->method, "CONNECT") == 0) {
        req->kind = CB_HTTP_CONNECT;
        if (s_authority(tgt, tl, 0, req) < 0) return s_bad(why, "CONNECT needs HOST:PORT", 400);
    } else {
        req->kind = CB_HTTP_FORWARD;
        if (s_iprefix(tgt, tl, "http://")) {
            const char *a = tgt + 7;
            size_t al = 0;
            while (al < tl - 7 && a[al] != '/' && a[al] != '?')
                al++;
            if (memchr(tgt, '#', tl) != NULL) return s_bad(why, "fragment in the URL", 400);
            if (memchr(a, '@', al) != NULL)
                return s_bad(why, "credentials in the URL are not forwarded", 400);
            if (s_authority(a, al, 80, req) < 0) return s_bad(why, "malformed URL authority", 400);
            req->path_off = (size_t) (a + al - buf);
            req->path_len = tl - 7 - al;
        } else if (s_iprefix(tgt, tl, "https://")) {
            return s_bad(why, "https:// URLs go through CONNECT", 400);
        } else if (tgt[0] == '/') {
            need_host = true; /* origin-form: the Host header names the target */
            req->origin_form = true;
            req->path_off = (size_t) (tgt - buf);
            req->path_len = tl;
        } else {
            return s_bad(why, "only http:// URLs, CONNECT, or a path with Host", 400);
        }
    }

    size_t n_headers = 0;
    bool have_host = false, have_cl = false, have_te = false, keep_alive = false;
    for (;;) {
        s_line_t h;
        r = s_next_req_line(&pos, end, &h);
        if (r == 0) return CB_HTTP_INCOMPLETE;
        if (r == -2) return s_bad(why, "a line not ended by CRLF", 400);
        if (r < 0) return s_bad(why, "control bytes in a header", 400);
        if (h.len == 0) break;
        if (++n_headers > CB_PROXY_HEADERS_MAX) return s_bad(why, "too many header lines", 431);
        if (h.p[0] == ' ' || h.p[0] == '\t') return s_bad(why, "folded header line", 400);
        size_t nl = 0, vlen = 0;
        const char *v = NULL;
        if (s_field(&h, &nl, &v, &vlen) < 0) return s_bad(why, "malformed header line", 400);
        if (s_ieq(h.p, nl, "host")) {
            if (have_host) return s_bad(why, "two Host headers", 400);
            have_host = true;
            if (need_host && s_authority(v, vlen, 80, req) < 0)
                return s_bad(why, "malformed Host header", 400);
        } else if (s_ieq(h.p, nl, "content-length")) {
            if (have_cl) return s_bad(why, "two Content-Length headers", 400);
            have_cl = true;
            if (s_length(v, vlen, &req->length) < 0)
                return s_bad(why, "malformed Content-Length", 400);
        } else if (s_ieq(h.p, nl, "transfer-encoding")) {
            if (have_te) return s_bad(why, "two Transfer-Encoding headers", 400);
            have_te = true;
            if (!s_ieq(v, vlen, "chunked"))
                return s_bad(why, "a transfer coding other than chunked alone", 501);
        } else if (s_ieq(h.p, nl, "connection")) {
            if (s_has_token(v, vlen, "close")) req->close = true;
            if (s_has_token(v, vlen, "keep-alive")) keep_alive = true;
        }
    }
    if (have_cl && have_te) return s_bad(why, "Content-Length with Transfer-Encoding", 400);
    if (have_te && req->minor == 0) return s_bad(why, "Transfer-Encoding in HTTP/1.0", 400);
    if (need_host && !have_host) return s_bad(why, "a path without a Host header", 400);
    if (req->minor == 0 && !keep_alive) req->close = true;
    req->chunked = have_te;
    req->has_length = have_cl;
    req->head_len = (size_t) (pos - buf);
    return CB_HTTP_OK;
}

int cb_http_parse_response(const char *buf, size_t len, cb_http_resp_t *resp, const char **why) {
    memset(resp, 0, sizeof *resp);
    *why = "";
    const char *pos = buf, *end = buf + len;
    s_line_t sl;
    int r = s_next_line(&pos, end, &sl);
    if (r == 0) return CB_HTTP_INCOMPLETE;
    /* HTTP/1.x SP 3DIGIT [SP reason] */
    if (r < 0 || sl.len < 12 || memcmp(sl.p, "HTTP/1.", 7) != 0 ||
        (sl.p[7] != '0' && sl.p[7] != '1') || sl.p[8] != ' ' || !isdigit((unsigned char) sl.p[9]) ||
        !isdigit((unsigned char) sl.p[10]) || !isdigit((unsigned char) sl.p[11]) ||
        (sl.len > 12 && sl.p[12] != ' ') || sl.p[9] == '0')
        return s_bad(why, "the upstream sent no valid HTTP/1.x status line", 502);
    resp->status = (sl.p[9] - '0') * 100 + (sl.p[10] - '0') * 10 + (sl.p[11] - '0');
    if (sl.p[7] == '0') resp->close = true;
    bool have_cl = false, have_te = false;
    size_t n_headers = 0;
    for (;;) {
        s_line_t h;
        r = s_next_line(&pos, end, &h);
        if (r == 0) return CB_HTTP_INCOMPLETE;
        if (r < 0) return s_bad(why, "the upstream sent control bytes in a header", 502);
        if (h.len == 0) break;
        size_t nl = 0, vlen = 0;
        const char *v = NULL;
        if (++n_headers > CB_PROXY_HEADERS_MAX || s_field(&h, &nl, &v, &vlen) < 0)
            return s_bad(why, "the upstream sent a malformed header line", 502);
        if (s_ieq(h.p, nl, "content-length")) {
            if (have_cl || s_length(v, vlen, &resp->length) < 0)
                return s_bad(why, "the upstream sent an ambiguous Content-Length", 502);
            have_cl = true;
        } else if (s_ieq(h.p, nl, "transfer-encoding")) {
            /* several headers form one list: its last coding decides */
            have_te = true;
            resp->chunked = s_chunked_last(v, vlen);
        } else if (s_ieq(h.p, nl, "connection") && s_has_token(v, vlen, "close")) {
            resp->close = true;
        }
    }
    resp->other_coding = have_te && !resp->chunked;
    resp->has_length = have_cl && !have_te;     /* RFC 9112 6.3: Transfer-Encoding wins... */
    if (have_cl && have_te) resp->close = true; /* ...and the connection ends after it */
    resp->head_len = (size_t) (pos - buf);
    return CB_HTTP_OK;
}

static bool s_hop_by_hop(const char *name, size_t len) {
    static const char *const hop[] = {"host",
                                      "connection",
                                      "proxy-connection",
                                      "keep-alive",
                                      "proxy-authorization",
                                      "proxy-authenticate",
                                      "te",
                                      "trailer",
                                      "upgrade"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        if (s_ieq(name, len, hop[i])) return true;
    return false;
}

static void s_puts(cb_outbuf_t *o, const char *s) { cb_outbuf_put(o, s, strlen(s)); }

long cb_http_forward_head(const char *buf, const cb_http_req_t *req, char *out, size_t out_len) {
    cb_outbuf_t o = {.p = out, .len = out_len};
    s_puts(&o, req->method);
    s_puts(&o, " ");
    if (req->path_len == 0 || buf[req->path_off] != '/') s_puts(&o, "/");
    cb_outbuf_put(&o, buf + req->path_off, req->path_len);
    s_puts(&o, req->minor == 0 ? " HTTP/1.0\r\nHost: " : " HTTP/1.1\r\nHost: ");
    s_puts(&o, req->host);
    if (req->port != 80) {
        char port[8];
        (void) snprintf(port, sizeof port, ":%u", (unsigned) req->port);
        s_puts(&o, port);
    }
    s_puts(&o, "\r\n");
    const char *pos = buf, *end = buf + req->head_len;
    s_line_t line;
    (void) s_next_line(&pos, end, &line); /* the request line */
    while (s_next_line(&pos, end, &line) == 1 && line.len > 0) {
        const char *colon = memchr(line.p, ':', line.len);
        if (colon == NULL || s_hop_by_hop(line.p, (size_t) (colon - line.p))) continue;
        cb_outbuf_put(&o, line.p, line.len);
        s_puts(&o, "\r\n");
    }
    s_puts(&o, "Connection: close\r\n\r\n");
    return o.overflow ? -1 : (long) o.used;
}

static const char *s_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

size_t cb_http_error(int status, const char *text, char *out, size_t out_len) {
    char clean[CB_PROXY_REASON_MAX];
    size_t n = 0;
    for (; text[n] != '\0' && n + 1 < sizeof clean; n++) {
        unsigned char c = (unsigned char) text[n];
        clean[n] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
    }
    clean[n] = '\0';
    int w = snprintf(out, out_len,
                     "HTTP/1.1 %d %s (cellblock proxy: %s)\r\n"
                     "Content-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n"
                     "Proxy-Agent: cellblock-proxy\r\n"
                     "\r\n"
                     "cellblock proxy: %s\n",
                     status, s_phrase(status), clean, strlen("cellblock proxy: \n") + n, clean);
    if (w < 0) return 0;
    return (size_t) w < out_len ? (size_t) w : out_len - 1;
}
