/*
 * fuzz_proxy_secrets.c - secret values put in for their placeholders
 * (proxy/secrets.c): request heads, `Authorization: Basic` credentials
 * decoded and encoded again, bodies looked at piece by piece, and the
 * launcher's table.
 *
 * The table is fixed (three secrets, two hosts share one); every value holds
 * a '~', which the harness takes out of the input, so a value in the output
 * can only have been put there.  The input: a mode byte, then text.
 *   bit 7 set: the text is a table for cb_secrets_parse.
 *   else bits 0-1 the host (api.test, tok.test, an unbound one, none),
 *   bits 2-6 the output's size (0: CB_PROXY_HOUT_MAX, as bump.c gives; else
 *   that many 32ths of the head, plus a little), and the text is a head in
 *   which bytes 0x01-0x03 stand for the placeholders of the three secrets
 *   and text between two 0x04 bytes is base64-encoded (so the fuzzer can
 *   write Basic credentials holding placeholders).
 *
 * Properties of cb_secrets_apply: a known result; a refusal names a secret
 * not bound to the host and leaves the output zeroed, as does an output too
 * small; an accepted head fits, keeps its request line, has no placeholder
 * left after it (plain or inside Basic credentials), carries no value of a
 * secret not bound to the host (plain or inside Basic credentials), and as
 * many values as *put says; it fits a buffer of exactly its size and not
 * one byte less.  cb_secrets_scan, with the head as a body in pieces, finds
 * a foreign placeholder exactly when one is in it.  cb_secrets_parse: an
 * accepted table's every field is well-formed, a refused one has a reason.
 */
#include "fuzz/common.h"
#include "proxy/secrets.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <strings.h>

#define PH_A "cb-secret-0123456789abcdef0123456789abcdef"
#define PH_B "cb-secret-fedcba9876543210fedcba9876543210"
#define PH_C "cb-secret-00000000000000000000000000000000"

#define FZ_MARK_B64   0x04                    /* starts and ends text to base64-encode */
#define FZ_VALUE_MARK '~'                     /* in every value, never in the input */
#define FZ_HEAD_MAX   (4 * CB_PROXY_HEAD_MAX) /* an expanded head */

static cb_secrets_t S;
static const char *const s_hosts[] = {"api.test", "tok.test", "nope.test", NULL};
static const char *const s_ph[] = {PH_A, PH_B, PH_C};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    fz_quiet_log();
    static const char table[] = "API_KEY\t" PH_A "\tapi.test,Other.Test.\tsk~live~AAAA\n"
                                "TOKEN\t" PH_B "\ttok.test\tt0k~3n value\n"
                                "PASS\t" PH_C "\tapi.test\tp:a~ss";
    char why[256];
    if (cb_secrets_parse(&S, table, sizeof table - 1, why, sizeof why) < 0 || S.n != 3) {
        fprintf(stderr, "fuzz_proxy_secrets: the table: %s\n", why);
        abort();
    }
    return 0;
}

static bool s_bound(const cb_secret_t *x, const char *host) {
    for (size_t i = 0; host != NULL && i < x->n_hosts; i++)
        if (strcmp(x->hosts[i], host) == 0) return true;
    return false;
}

static size_t s_count(const char *p, size_t n, const char *what, size_t wn) {
    size_t c = 0;
    for (const char *q = p; (q = memmem(q, n - (size_t) (q - p), what, wn)) != NULL; q += wn)
        c++;
    return c;
}

/* The input as a head: placeholders for 0x01-0x03, base64 between 0x04s, no '~'. */
static size_t s_expand(const uint8_t *d, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = d[i];
        if (c >= 1 && c <= 3) {
            memcpy(out + o, s_ph[c - 1], CB_PROXY_PLACEHOLDER_LEN);
            o += CB_PROXY_PLACEHOLDER_LEN;
        } else if (c == FZ_MARK_B64) {
            const uint8_t *end = memchr(d + i + 1, FZ_MARK_B64, n - i - 1);
            size_t k = end ? (size_t) (end - d) - i - 1 : n - i - 1;
            static char plain[FZ_HEAD_MAX];
            size_t pn = s_expand(d + i + 1, k, plain);
            if (pn > CB_PROXY_HEAD_MAX) pn = CB_PROXY_HEAD_MAX;
            o += (size_t) EVP_EncodeBlock((unsigned char *) out + o, (unsigned char *) plain,
                                          (int) pn);
            i += k + (end != NULL);
        } else if (c != FZ_VALUE_MARK) {
            out[o++] = (char) c;
        }
        if (o > CB_PROXY_HEAD_MAX) return o; /* the proxy's heads are no larger */
    }
    return o;
}

/* Basic credentials of the line p (n bytes, without its LF) decoded into
 * dec, as secrets.c reads them: their length, or -1 (not such a line). */
static long s_basic(const char *p, size_t n, unsigned char *dec) {
    static const char name[] = "authorization:";
    if (n <= sizeof name || strncasecmp(p, name, sizeof name - 1) != 0) return -1;
    size_t i = sizeof name - 1;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (n - i <= 6 || strncasecmp(p + i, "basic ", 6) != 0) return -1;
    size_t b = i + 6, bl = n - b;
    while (bl > 0 && (p[b + bl - 1] == ' ' || p[b + bl - 1] == '\t' || p[b + bl - 1] == '\r'))
        bl--;
    if (bl == 0 || bl % 4 != 0 || bl / 4 * 3 > CB_PROXY_HEAD_MAX) return -1;
    int dl = EVP_DecodeBlock(dec, (const unsigned char *) p + b, (int) bl);
    if (dl < 0) return -1;
    return dl - (p[b + bl - 1] == '=') - (p[b + bl - 2] == '=');
}

typedef struct {
    size_t placeholders;                 /* any secret's, after the first line */
    size_t values[CB_PROXY_SECRETS_MAX]; /* each secret's value, anywhere */
} s_seen_t;

/* What a head holds, plain and inside Basic credentials. */
static void s_look(const char *p, size_t n, s_seen_t *seen) {
    static unsigned char dec[CB_PROXY_HEAD_MAX];
    memset(seen, 0, sizeof *seen);
    const char *first_end = memchr(p, '\n', n);
    size_t rest = first_end ? (size_t) (first_end - p) : n;
    for (size_t j = 0; j < S.n; j++) {
        seen->placeholders +=
            s_count(p + rest, n - rest, S.s[j].placeholder, CB_PROXY_PLACEHOLDER_LEN);
        seen->values[j] = s_count(p, n, S.s[j].value, S.s[j].value_len);
    }
    for (const char *pos = p, *end = p + n; pos < end;) {
        const char *nl = memchr(pos, '\n', (size_t) (end - pos));
        size_t ll = nl ? (size_t) (nl - pos) : (size_t) (end - pos);
        long dl = pos == p ? -1 : s_basic(pos, ll, dec);
        for (size_t j = 0; dl > 0 && j < S.n; j++) {
            seen->placeholders +=
                s_count((char *) dec, (size_t) dl, S.s[j].placeholder, CB_PROXY_PLACEHOLDER_LEN);
            seen->values[j] += s_count((char *) dec, (size_t) dl, S.s[j].value, S.s[j].value_len);
        }
        pos += ll + (nl != NULL);
    }
}

static bool s_zeroed(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0) return false;
    return true;
}

static void s_table(const uint8_t *d, size_t n) {
    static cb_secrets_t t;
    char why[128];
    memset(why, 0x55, sizeof why);
    if (cb_secrets_parse(&t, (const char *) d, n, why, sizeof why) < 0) {
        FZ_CHECK(memchr(why, '\0', sizeof why) != NULL && why[0] != '\0', "a reason");
        return;
    }
    FZ_CHECK(t.n <= CB_PROXY_SECRETS_MAX, "%zu secrets", t.n);
    for (size_t i = 0; i < t.n; i++) {
        const cb_secret_t *x = &t.s[i];
        size_t nl = strnlen(x->name, sizeof x->name);
        FZ_CHECK(nl > 0 && nl < sizeof x->name, "name");
        FZ_CHECK(strlen(x->placeholder) == CB_PROXY_PLACEHOLDER_LEN &&
                     memcmp(x->placeholder, CB_PROXY_PLACEHOLDER_PREFIX,
                            sizeof CB_PROXY_PLACEHOLDER_PREFIX - 1) == 0,
                 "placeholder");
        FZ_CHECK(x->value_len > 0 && x->value_len <= CB_PROXY_SECRET_VALUE_MAX &&
                     strlen(x->value) == x->value_len,
                 "value of %zu", x->value_len);
        for (size_t k = 0; k < x->value_len; k++)
            FZ_CHECK(x->value[k] >= 0x20 && x->value[k] < 0x7f, "a printable value");
        FZ_CHECK(x->n_hosts > 0 && x->n_hosts <= CB_PROXY_SECRET_HOSTS_MAX, "hosts");
        for (size_t h = 0; h < x->n_hosts; h++) {
            size_t hl = strnlen(x->hosts[h], sizeof x->hosts[h]);
            FZ_CHECK(hl > 0 && hl < sizeof x->hosts[h], "a host");
            for (size_t k = 0; k < hl; k++)
                FZ_CHECK(x->hosts[h][k] < 'A' || x->hosts[h][k] > 'Z', "a lower-case host");
        }
    }
    cb_secrets_wipe(&t);
}

/* The head as a body, cut in pieces of 1..16 bytes by its own bytes. */
static void s_scan(const char *host, const char *p, size_t n) {
    const cb_secret_t *want = NULL;
    for (size_t i = 0; i + CB_PROXY_PLACEHOLDER_LEN <= n && want == NULL; i++)
        for (size_t j = 0; j < S.n && want == NULL; j++)
            if (memcmp(p + i, S.s[j].placeholder, CB_PROXY_PLACEHOLDER_LEN) == 0 &&
                !s_bound(&S.s[j], host))
                want = &S.s[j];
    cb_secrets_scan_t w = {0};
    const cb_secret_t *got = NULL;
    for (size_t at = 0; at < n && got == NULL;) {
        size_t k = 1 + (unsigned char) p[at] % 16;
        if (k > n - at) k = n - at;
        char *piece = malloc(k);
        memcpy(piece, p + at, k);
        got = cb_secrets_scan(&S, host, &w, piece, k);
        free(piece);
        FZ_CHECK(w.tail_len <= sizeof w.tail, "window of %zu", w.tail_len);
        at += k;
    }
    FZ_CHECK((got != NULL) == (want != NULL), "scan found %s, a foreign placeholder is %s",
             got ? got->name : "none", want ? want->name : "none");
    FZ_CHECK(got == NULL || !s_bound(got, host), "found a bound secret");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if (data[0] & 0x80u) {
        s_table(data + 1, size - 1);
        return 0;
    }
    const char *host = s_hosts[data[0] & 3u];
    unsigned frac = (data[0] >> 2) & 31u;
    static char in[FZ_HEAD_MAX];
    size_t n = s_expand(data + 1, size - 1, in);
    if (n > CB_PROXY_HEAD_MAX) return 0;
    size_t out_len = frac == 0 ? CB_PROXY_HOUT_MAX : n * frac / 32 + frac;
    char *out = malloc(out_len); /* exact size: ASan sees a write past it */
    memset(out, 0x55, out_len);
    const cb_secret_t *foreign = (const cb_secret_t *) 1;
    size_t put = 12345;
    long rc = cb_secrets_apply(&S, host, in, n, out, out_len, &foreign, &put);

    if (rc == CB_SECRETS_FOREIGN) {
        FZ_CHECK(foreign != NULL && foreign >= S.s && foreign < S.s + S.n, "names a secret");
        FZ_CHECK(!s_bound(foreign, host), "refused %s, which is bound to the host", foreign->name);
        FZ_CHECK(s_zeroed(out, out_len), "a refused head leaves nothing behind");
    } else if (rc == CB_SECRETS_TOO_LARGE) {
        FZ_CHECK(s_zeroed(out, out_len), "a head too large leaves nothing behind");
    } else {
        FZ_CHECK(rc >= 0 && (size_t) rc <= out_len, "known result %ld (room %zu)", rc, out_len);
        FZ_CHECK(foreign == NULL, "no foreign secret when accepted");
        size_t m = (size_t) rc;
        const char *nl = memchr(in, '\n', n);
        size_t first = nl ? (size_t) (nl - in) + 1 : n;
        FZ_CHECK(m >= first && memcmp(out, in, first) == 0, "the request line is kept");
        s_seen_t before, after;
        s_look(in, n, &before);
        s_look(out, m, &after);
        FZ_CHECK(after.placeholders == 0, "%zu placeholders left", after.placeholders);
        size_t values = 0, given = 0;
        for (size_t j = 0; j < S.n; j++)
            given += before.values[j]; /* base64 the fuzzer wrote that decodes to one */
        for (size_t j = 0; j < S.n && given == 0; j++) {
            FZ_CHECK(s_bound(&S.s[j], host) || after.values[j] == 0,
                     "%s's value sent to %s, which it is not bound to", S.s[j].name,
                     host ? host : "(none)");
            values += after.values[j];
        }
        FZ_CHECK(given > 0 || values == put, "%zu values put in, %zu in the output", put, values);
        /* exactly its size fits, one byte less does not */
        char *exact = malloc(m ? m : 1);
        long again = cb_secrets_apply(&S, host, in, n, exact, m, &foreign, &put);
        FZ_CHECK(again == rc && memcmp(exact, out, m) == 0, "the same head in %zu bytes", m);
        if (m > 0) {
            long less = cb_secrets_apply(&S, host, in, n, exact, m - 1, &foreign, &put);
            FZ_CHECK(less == CB_SECRETS_TOO_LARGE, "%zu bytes in %zu: %ld", m, m - 1, less);
        }
        OPENSSL_cleanse(exact, m ? m : 1);
        free(exact);
    }
    free(out);
    s_scan(host, in, n);
    return 0;
}
