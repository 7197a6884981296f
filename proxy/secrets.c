/*
 * secrets.c - the placeholder table and its use on request heads and
 * bodies (see secrets.h).  A head is walked line by line within its length; a
 * placeholder is the fixed prefix and exactly CB_PROXY_PLACEHOLDER_HEX
 * lower-case hex digits, compared with every secret's in full, so text that
 * merely starts like one is left alone.  Basic credentials are decoded,
 * looked at and re-encoded with libcrypto's base64.
 */
#include "proxy/secrets.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "launcher/netrules.h"
#include "proxy/outbuf.h"

#define S_PREFIX     CB_PROXY_PLACEHOLDER_PREFIX
#define S_PREFIX_LEN (sizeof S_PREFIX - 1)
#define S_BASIC      "basic "

static int s_fail(char *why, size_t len, const char *what, size_t line) {
    (void) snprintf(why, len, "secret table, line %zu: %s", line, what);
    return -1;
}

static bool s_name_ok(const char *p, size_t n) {
    if (n == 0 || n > CB_PROXY_SECRET_NAME_MAX || isdigit((unsigned char) p[0])) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char) p[i]) && p[i] != '_') return false;
    return true;
}

static bool s_placeholder_ok(const char *p, size_t n) {
    if (n != CB_PROXY_PLACEHOLDER_LEN || memcmp(p, S_PREFIX, S_PREFIX_LEN) != 0) return false;
    for (size_t i = S_PREFIX_LEN; i < n; i++)
        if (!isxdigit((unsigned char) p[i]) || isupper((unsigned char) p[i])) return false;
    return true;
}

/* One field of a line: up to the next tab (last: to the end). */
static const char *s_field(const char **pos, const char *end, bool last, size_t *n) {
    const char *p = *pos;
    const char *tab = last ? NULL : memchr(p, '\t', (size_t) (end - p));
    if (!last && tab == NULL) return NULL;
    *n = (size_t) ((last ? end : tab) - p);
    *pos = last ? end : tab + 1;
    return p;
}

static int s_hosts(cb_secret_t *x, const char *p, size_t n) {
    while (n > 0) {
        const char *comma = memchr(p, ',', n);
        size_t hl = comma ? (size_t) (comma - p) : n;
        bool is_ip = false;
        cb_ipaddr_t ip;
        if (x->n_hosts >= CB_PROXY_SECRET_HOSTS_MAX ||
            cb_netrules_norm_host(p, hl, x->hosts[x->n_hosts], sizeof x->hosts[0], &is_ip, &ip) <
                0 ||
            is_ip)
            return -1;
        x->n_hosts++;
        if (comma == NULL) break;
        p += hl + 1;
        n -= hl + 1;
    }
    return x->n_hosts > 0 ? 0 : -1;
}

int cb_secrets_parse(cb_secrets_t *s, const char *buf, size_t len, char *why, size_t why_len) {
    memset(s, 0, sizeof *s);
    if (len > CB_PROXY_SECRETS_BYTES_MAX) return s_fail(why, why_len, "too long", 0);
    const char *pos = buf, *end = buf + len;
    for (size_t line = 1; pos < end; line++) {
        const char *nl = memchr(pos, '\n', (size_t) (end - pos));
        const char *le = nl ? nl : end;
        if (s->n >= CB_PROXY_SECRETS_MAX) return s_fail(why, why_len, "too many secrets", line);
        cb_secret_t *x = &s->s[s->n];
        size_t nn, pn, hn, vn;
        const char *name = s_field(&pos, le, false, &nn), *ph = NULL, *hosts = NULL, *v = NULL;
        if (name) ph = s_field(&pos, le, false, &pn);
        if (ph) hosts = s_field(&pos, le, false, &hn);
        if (hosts) v = s_field(&pos, le, true, &vn);
        if (v == NULL) return s_fail(why, why_len, "not NAME, PLACEHOLDER, HOSTS, VALUE", line);
        if (!s_name_ok(name, nn)) return s_fail(why, why_len, "a malformed name", line);
        if (!s_placeholder_ok(ph, pn)) return s_fail(why, why_len, "a malformed placeholder", line);
        if (s_hosts(x, hosts, hn) < 0) return s_fail(why, why_len, "malformed hosts", line);
        if (vn == 0 || vn > CB_PROXY_SECRET_VALUE_MAX)
            return s_fail(why, why_len, "an empty or too long value", line);
        for (size_t i = 0; i < vn; i++)
            if ((unsigned char) v[i] < 0x20 || (unsigned char) v[i] > 0x7e)
                return s_fail(why, why_len, "control or non-ASCII bytes in the value", line);
        memcpy(x->name, name, nn);
        memcpy(x->placeholder, ph, pn);
        memcpy(x->value, v, vn);
        x->value_len = vn;
        s->n++;
        pos = nl ? nl + 1 : end;
    }
    return 0;
}

void cb_secrets_wipe(cb_secrets_t *s) { OPENSSL_cleanse(s, sizeof *s); }

static bool s_bound_to(const cb_secret_t *x, const char *host) {
    for (size_t i = 0; host != NULL && i < x->n_hosts; i++)
        if (strcmp(x->hosts[i], host) == 0) return true;
    return false;
}

bool cb_secrets_bound(const cb_secrets_t *s, const char *host) {
    for (size_t i = 0; i < s->n; i++)
        if (s_bound_to(&s->s[i], host)) return true;
    return false;
}

size_t cb_secrets_hosts(const cb_secrets_t *s, const char **out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->s[i].n_hosts; j++) {
            bool seen = false;
            for (size_t k = 0; k < n && !seen; k++)
                seen = strcmp(out[k], s->s[i].hosts[j]) == 0;
            if (!seen && n < max) out[n++] = s->s[i].hosts[j];
        }
    return n;
}

/* The secret whose placeholder starts at p (n bytes available), or NULL. */
static const cb_secret_t *s_at(const cb_secrets_t *s, const char *p, size_t n) {
    if (n < CB_PROXY_PLACEHOLDER_LEN) return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (memcmp(p, s->s[i].placeholder, CB_PROXY_PLACEHOLDER_LEN) == 0) return &s->s[i];
    return NULL;
}

/* The first placeholder in p (n bytes) of a secret not bound to host, or NULL. */
static const cb_secret_t *s_foreign_in(const cb_secrets_t *s, const char *host, const char *p,
                                       size_t n) {
    for (size_t i = 0; i + CB_PROXY_PLACEHOLDER_LEN <= n; i++) {
        const char *hit = memchr(p + i, S_PREFIX[0], n - i - CB_PROXY_PLACEHOLDER_LEN + 1);
        if (hit == NULL) break;
        i = (size_t) (hit - p);
        const cb_secret_t *x =
            memcmp(hit, S_PREFIX, S_PREFIX_LEN) == 0 ? s_at(s, hit, n - i) : NULL;
        if (x != NULL && !s_bound_to(x, host)) return x;
    }
    return NULL;
}

const cb_secret_t *cb_secrets_scan(const cb_secrets_t *s, const char *host, cb_secrets_scan_t *w,
                                   const char *p, size_t n) {
    enum { W = sizeof w->tail };
    if (s->n == 0 || n == 0) return NULL;
    /* across the boundary: the window, then the first W bytes of p (a
     * placeholder wholly inside either is not here: W is one short of it) */
    char join[2 * W];
    size_t head = n < W ? n : W;
    memcpy(join, w->tail, w->tail_len);
    memcpy(join + w->tail_len, p, head);
    const cb_secret_t *x = s_foreign_in(s, host, join, w->tail_len + head);
    if (x == NULL) x = s_foreign_in(s, host, p, n);
    /* the window moves on: the last W bytes of what was seen */
    if (n >= W) {
        memcpy(w->tail, p + n - W, W);
        w->tail_len = W;
    } else {
        size_t keep = w->tail_len < W - n ? w->tail_len : W - n;
        memmove(w->tail, w->tail + w->tail_len - keep, keep);
        memcpy(w->tail + keep, p, n);
        w->tail_len = keep + n;
    }
    return x;
}

/* Copies p (n bytes) to o, putting values in for the placeholders of
 * secrets bound to host when subst.  0 ok, CB_SECRETS_FOREIGN. */
static int s_span(const cb_secrets_t *s, const char *host, const char *p, size_t n, bool subst,
                  cb_outbuf_t *o, const cb_secret_t **foreign, size_t *put) {
    size_t i = 0, copied = 0;
    while (i + S_PREFIX_LEN <= n) {
        const char *hit = memchr(p + i, S_PREFIX[0], n - i - S_PREFIX_LEN + 1);
        if (hit == NULL) break;
        i = (size_t) (hit - p);
        const cb_secret_t *x =
            memcmp(hit, S_PREFIX, S_PREFIX_LEN) == 0 ? s_at(s, hit, n - i) : NULL;
        if (x == NULL) {
            i++;
            continue;
        }
        if (!s_bound_to(x, host)) {
            *foreign = x;
            return CB_SECRETS_FOREIGN;
        }
        if (subst) {
            cb_outbuf_put(o, p + copied, i - copied);
            cb_outbuf_put(o, x->value, x->value_len);
            copied = i + CB_PROXY_PLACEHOLDER_LEN;
            (*put)++;
        }
        i += CB_PROXY_PLACEHOLDER_LEN;
    }
    cb_outbuf_put(o, p + copied, n - copied);
    return 0;
}

/* "Authorization: Basic B64": the credentials decoded, looked at, and
 * encoded again.  1 handled (written to o), 0 not such a line, FOREIGN. */
static int s_basic(const cb_secrets_t *s, const char *host, const char *p, size_t n, cb_outbuf_t *o,
                   const cb_secret_t **foreign, size_t *put) {
    static const char name[] = "authorization:";
    if (n <= sizeof name || strncasecmp(p, name, sizeof name - 1) != 0) return 0;
    size_t i = sizeof name - 1;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (n - i <= sizeof S_BASIC - 1 || strncasecmp(p + i, S_BASIC, sizeof S_BASIC - 1) != 0)
        return 0;
    size_t b64 = i + sizeof S_BASIC - 1, bl = n - b64;
    while (bl > 0 && (p[b64 + bl - 1] == ' ' || p[b64 + bl - 1] == '\t' || p[b64 + bl - 1] == '\r'))
        bl--;
    unsigned char dec[CB_PROXY_HEAD_MAX], sub[CB_PROXY_HEAD_MAX];
    unsigned char enc[(sizeof sub + 2) / 3 * 4 + 1]; /* sub encoded, with EVP's NUL */
    if (bl == 0 || bl % 4 != 0 || bl / 4 * 3 > sizeof dec) return 0;
    int dl = EVP_DecodeBlock(dec, (const unsigned char *) p + b64, (int) bl);
    if (dl < 0) return 0; /* not base64: an ordinary line */
    dl -= (p[b64 + bl - 1] == '=') + (p[b64 + bl - 2] == '=');
    cb_outbuf_t so = {.p = (char *) sub, .len = sizeof sub};
    int rc = s_span(s, host, (const char *) dec, (size_t) dl, true, &so, foreign, put);
    OPENSSL_cleanse(dec, sizeof dec);
    if (rc < 0 || so.overflow) {
        OPENSSL_cleanse(sub, sizeof sub); /* values put in before the refusal */
        if (rc < 0) return rc;
        o->overflow = true;
        return 1;
    }
    cb_outbuf_put(o, p, b64);
    int el = EVP_EncodeBlock(enc, sub, (int) so.used);
    cb_outbuf_put(o, (const char *) enc, (size_t) el);
    cb_outbuf_put(o, p + b64 + bl, n - b64 - bl); /* the line's end as it was */
    OPENSSL_cleanse(sub, sizeof sub);
    OPENSSL_cleanse(enc, sizeof enc);
    return 1;
}

long cb_secrets_apply(const cb_secrets_t *s, const char *host, const char *in, size_t n, char *out,
                      size_t out_len, const cb_secret_t **foreign, size_t *put) {
    cb_outbuf_t o = {.p = out, .len = out_len};
    *foreign = NULL;
    *put = 0;
    const char *pos = in, *end = in + n;
    for (bool first = true; pos < end; first = false) {
        const char *nl = memchr(pos, '\n', (size_t) (end - pos));
        size_t ll = nl ? (size_t) (nl - pos) + 1 : (size_t) (end - pos);
        /* the request line is never changed, only checked */
        int rc = first ? 0 : s_basic(s, host, pos, ll - (nl != NULL), &o, foreign, put);
        if (rc == 1 && nl != NULL) cb_outbuf_put(&o, "\n", 1);
        if (rc == 0) rc = s_span(s, host, pos, ll, !first, &o, foreign, put);
        if (rc < 0) {
            OPENSSL_cleanse(out, out_len); /* no value left behind in the caller's buffer */
            return CB_SECRETS_FOREIGN;
        }
        pos += ll;
    }
    if (o.overflow) {
        OPENSSL_cleanse(out, out_len);
        return CB_SECRETS_TOO_LARGE;
    }
    return (long) o.used;
}
