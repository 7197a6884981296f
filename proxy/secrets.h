/*
 * secrets.h - `--secret NAME@HOST,...`: the values the sandbox never holds.
 *
 * Inside, NAME holds a random placeholder ("cb-secret-" and 32 hex digits).
 * For a request to a host the secret is bound to, the proxy puts the value
 * where the placeholder stands in a request header (any header; inside
 * `Authorization: Basic` credentials too, which clients base64-encode);
 * the request line, bodies and every other host keep the useless
 * placeholder, and a request whose head or body carries the placeholder of
 * a secret not bound to its host is refused (a body is looked at as it
 * passes, with a window across the pieces it arrives in: cb_secrets_scan;
 * a body's own encodings, gzip or base64, are not undone).  The table
 * arrives from the launcher through a pipe, one line per secret: NAME TAB
 * PLACEHOLDER TAB HOST[,HOST] TAB VALUE; values are printable (no control
 * bytes), so putting one in cannot end a header line.
 *
 * Pure code, no I/O: the unit test drives it directly.
 */
#ifndef CB_PROXY_SECRETS_H
#define CB_PROXY_SECRETS_H

#include <stdbool.h>
#include <stddef.h>

#include "launcher/netproxy_limits.h"

#define CB_PROXY_PLACEHOLDER_LEN (sizeof CB_PROXY_PLACEHOLDER_PREFIX - 1 + CB_PROXY_PLACEHOLDER_HEX)

typedef struct {
    char name[CB_PROXY_SECRET_NAME_MAX + 1];                      /* the variable */
    char placeholder[CB_PROXY_PLACEHOLDER_LEN + 1];               /* what the sandbox holds */
    char value[CB_PROXY_SECRET_VALUE_MAX + 1];                    /* what the host gets */
    size_t value_len;                                             /* its bytes */
    char hosts[CB_PROXY_SECRET_HOSTS_MAX][CB_PROXY_NAME_MAX + 1]; /* lower-case names */
    size_t n_hosts;                                               /* used entries */
} cb_secret_t;

typedef struct {
    cb_secret_t s[CB_PROXY_SECRETS_MAX]; /* in the order given */
    size_t n;                            /* used entries */
} cb_secrets_t;

/* Parses the launcher's table (len bytes) into s.  0 ok, -1 with why. */
int cb_secrets_parse(cb_secrets_t *s, const char *buf, size_t len, char *why, size_t why_len);
/* Zeroes every value (and the rest). */
void cb_secrets_wipe(cb_secrets_t *s);
/* Is a secret bound to host (normalised)? */
bool cb_secrets_bound(const cb_secrets_t *s, const char *host);
/* Every distinct bound host into out (at most max): how many. */
size_t cb_secrets_hosts(const cb_secrets_t *s, const char **out, size_t max);

enum { CB_SECRETS_TOO_LARGE = -1, CB_SECRETS_FOREIGN = -2 };
/* Copies the request head in (n bytes, blank line included) to out,
 * putting the values of the secrets bound to host (NULL: none) in for their
 * placeholders in header lines.  Returns the bytes written, TOO_LARGE when
 * out_len is short, or FOREIGN with *foreign set when the head carries the
 * placeholder of a secret that is not bound to host.  *put: values put in. */
long cb_secrets_apply(const cb_secrets_t *s, const char *host, const char *in, size_t n, char *out,
                      size_t out_len, const cb_secret_t **foreign, size_t *put);

/* A body looked at piece by piece: the last CB_PROXY_PLACEHOLDER_LEN - 1
 * bytes of data seen, so that a placeholder split by a read, a TLS record or
 * a chunk boundary is found as well.  Zero it for each body. */
typedef struct {
    char tail[CB_PROXY_PLACEHOLDER_LEN - 1]; /* the last bytes seen */
    size_t tail_len;                         /* how many */
} cb_secrets_scan_t;

/* The next n bytes of a body going to host (p; the data only, without a
 * chunked body's framing): the secret whose placeholder they carry, with
 * what came before, while it is not bound to host; else NULL.  A bound
 * secret's placeholder is left alone (a body is never changed).  Keeps no
 * more than the window in w. */
const cb_secret_t *cb_secrets_scan(const cb_secrets_t *s, const char *host, cb_secrets_scan_t *w,
                                   const char *p, size_t n);

#endif
