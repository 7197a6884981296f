/*
 * http.h - the proxy's request-head parser and the head it forwards.
 *
 * Input is untrusted bytes from the sandbox.  The parser never allocates,
 * reads only within the given length, and accepts a deliberately small
 * grammar (RFC 9110/9112): CONNECT host:port, or a method with an
 * absolute http:// URI (or an origin-form path plus Host, as sent to a unix
 * socket by `curl --unix-socket`).  Anything ambiguous is refused with the
 * status a client understands: obs-fold, whitespace before a colon, control
 * bytes, a line ended by a bare LF, two Host, Content-Length or
 * Transfer-Encoding headers,
 * Content-Length together with Transfer-Encoding, any transfer coding but
 * chunked alone, Transfer-Encoding in HTTP/1.0, userinfo in the URI,
 * https:// without CONNECT.
 */
#ifndef CB_PROXY_HTTP_H
#define CB_PROXY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/netproxy_limits.h"

typedef enum {
    CB_HTTP_CONNECT = 1, /* CONNECT host:port: a tunnel */
    CB_HTTP_FORWARD = 2, /* a plain-http request forwarded with a rewritten head */
} cb_http_kind_t;

typedef struct {
    cb_http_kind_t kind;              /* what to do */
    char method[CB_PROXY_METHOD_MAX]; /* "GET", "CONNECT", ... */
    char host[CB_PROXY_NAME_MAX + 3]; /* host as sent (IPv6 keeps its brackets) */
    uint16_t port;                    /* explicit or 80 */
    bool port_given;                  /* the port was explicit */
    bool origin_form;                 /* FORWARD: a path and a Host header, no URL */
    int minor;                        /* HTTP/1.<minor> */
    size_t head_len;                  /* bytes of the head, blank line included */
    size_t path_off, path_len;        /* FORWARD: origin-form target in the buffer */
    bool chunked;                     /* Transfer-Encoding: chunked */
    bool has_length;                  /* Content-Length given */
    uint64_t length;                  /* its value */
    bool close;                       /* the client ends after this one (close, or 1.0) */
} cb_http_req_t;

typedef struct {
    int status;        /* 100..999 */
    size_t head_len;   /* bytes of the head, blank line included */
    bool chunked;      /* chunked is the final transfer coding */
    bool other_coding; /* a Transfer-Encoding without chunked last: the body ends at close */
    bool has_length;   /* Content-Length given */
    uint64_t length;   /* its value */
    bool close;        /* Connection: close, or HTTP/1.0 */
} cb_http_resp_t;

enum { CB_HTTP_INCOMPLETE = 0, CB_HTTP_OK = 1 };

/* Parses the head at the start of buf (len bytes).  Returns CB_HTTP_OK with
 * req filled, CB_HTTP_INCOMPLETE when more bytes are needed (the caller
 * bounds the head at CB_PROXY_HEAD_MAX and answers 431 past it), or an HTTP
 * error status (400, 431, 501, 505) with a short reason in *why. */
int cb_http_parse(const char *buf, size_t len, cb_http_req_t *req, const char **why);
/* Parses a response head from an upstream at the start of buf: CB_HTTP_OK,
 * CB_HTTP_INCOMPLETE, or 502 with *why (not HTTP/1.x, control bytes, folded
 * or malformed lines, two Content-Length headers, a malformed one). */
int cb_http_parse_response(const char *buf, size_t len, cb_http_resp_t *resp, const char **why);
/* Both parsers reach a verdict only where a line ends: whether buf (len
 * bytes, the head so far) has a line feed past *seen, the length at the last
 * INCOMPLETE.  Sets *seen = len.  A head sent a byte at a time is then
 * parsed once per line, not once per byte, with the same verdicts. */
bool cb_http_new_line(const char *buf, size_t len, size_t *seen);
/* Writes the head sent upstream for a FORWARD request: "METHOD path
 * HTTP/1.x", Host = the target, the client's headers minus hop-by-hop ones
 * (Connection, Proxy-*, Keep-Alive, TE, Trailer, Upgrade) and Host, then
 * "Connection: close".  Returns bytes written, or -1 if out_len is short. */
long cb_http_forward_head(const char *buf, const cb_http_req_t *req, char *out, size_t out_len);
/* A token character (RFC 9110 5.6.2): header and trailer names. */
bool cb_http_tchar(unsigned char c);
/* Formats a complete error response (status, reason phrase = text, same
 * text as the body, Connection: close) into out.  Non-printable bytes of
 * text become '?'.  Returns its length. */
size_t cb_http_error(int status, const char *text, char *out, size_t out_len);

#endif
