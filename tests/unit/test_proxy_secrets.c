/* test_proxy_secrets.c - the placeholder table (proxy/secrets.c): what the
 * launcher's table may hold, values put in header lines only, Basic
 * credentials decoded and encoded again, a placeholder for another host
 * refused, and a bounded fuzz run (never a value for a host it is not
 * bound to, never more than the output holds). */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/secrets.h"
#include "fuzz_rng.h"
#include "tap.h"

#define FUZZ_ROUNDS 50000 /* random heads per run */

#define PH_A "cb-secret-0123456789abcdef0123456789abcdef"
#define PH_B "cb-secret-fedcba9876543210fedcba9876543210"

static cb_secrets_t S;

static long apply(const char *host, const char *in, char *out, size_t cap, const char **foreign) {
    const cb_secret_t *f = NULL;
    size_t put = 0;
    long n = cb_secrets_apply(&S, host, in, strlen(in), out, cap, &f, &put);
    if (n >= 0 && (size_t) n < cap) out[n] = '\0';
    *foreign = f ? f->name : NULL;
    return n;
}

static uint64_t s_rng = 0x853c49e6748fea9bULL;
static uint64_t rnd(void) { return fuzz_rnd(&s_rng); }

/* Scans body (n bytes) for host, cut at the offsets cuts[0..k) (ascending):
 * the name of the foreign secret found, or NULL. */
static const char *scan_cut(const char *host, const char *body, size_t n, const size_t *cuts,
                            size_t k) {
    cb_secrets_scan_t w = {0};
    const cb_secret_t *f = NULL;
    size_t at = 0;
    for (size_t i = 0; i <= k && f == NULL; i++) {
        size_t end = i < k ? cuts[i] : n;
        char *piece = malloc(end - at + 1); /* exact size: ASan sees a read past it */
        memcpy(piece, body + at, end - at);
        f = cb_secrets_scan(&S, host, &w, piece, end - at);
        free(piece);
        if (w.tail_len > sizeof w.tail) return "WINDOW OVERFLOW";
        at = end;
    }
    return f ? f->name : NULL;
}

/* Bodies: a placeholder of a secret not bound to the host is found whole,
 * split at every place across two pieces, byte by byte, and in a fuzz run
 * against a plain memmem; a bound one and look-alikes pass. */
static void test_scan(void) {
    static const char body[] = "{\"key\": \"" PH_B "\", \"x\": 1}";
    size_t n = sizeof body - 1;
    TAP_EQ_STR(scan_cut("api.test", body, n, NULL, 0), "TOKEN", "body: found whole");
    TAP_OK(scan_cut("tok.test", body, n, NULL, 0) == NULL, "body: the bound host's own passes");
    TAP_OK(scan_cut("api.test", "cb-secret-0123456789abcdef0123456789abcdeX", 42, NULL, 0) == NULL,
           "body: text that only looks like a placeholder passes");
    size_t missed = 0;
    for (size_t c = 0; c <= n; c++)
        if (scan_cut("api.test", body, n, &c, 1) == NULL) missed++;
    TAP_EQ_INT(missed, 0, "body: found when split in two at every place");
    size_t cuts[sizeof body];
    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    TAP_EQ_STR(scan_cut("api.test", body, n, cuts, n - 1), "TOKEN", "body: found byte by byte");

    static const char *const bits[] = {PH_A, PH_B, "cb-secret-", "0123456789abcdef", "c", "x"};
    long wrong = 0;
    for (long r = 0; r < FUZZ_ROUNDS / 10; r++) {
        char in[400];
        size_t len = 0;
        while (len < 300) {
            const char *b = bits[rnd() % (sizeof bits / sizeof bits[0])];
            size_t bl = rnd() % 4 ? 1 + rnd() % strlen(b) : strlen(b);
            memcpy(in + len, b, bl);
            len += bl;
        }
        size_t k = rnd() % 8, cut[8];
        for (size_t i = 0; i < k; i++)
            cut[i] = rnd() % (len + 1);
        for (size_t i = 1; i < k; i++) /* sorted */
            for (size_t j = i; j > 0 && cut[j - 1] > cut[j]; j--) {
                size_t t = cut[j];
                cut[j] = cut[j - 1];
                cut[j - 1] = t;
            }
        /* api.test: API_KEY is its own, TOKEN is not */
        bool want = memmem(in, len, PH_B, strlen(PH_B)) != NULL;
        const char *got = scan_cut("api.test", in, len, cut, k);
        if (want != (got != NULL) || (got && strcmp(got, "TOKEN") != 0)) wrong++;
    }
    TAP_EQ_INT(wrong, 0, "body fuzz: found exactly when there, however it is cut");
}

/* Basic credentials that grow, with the value put in, to the most the
 * proxy decodes: encoded again whole (their base64, with EVP's NUL, is
 * longer than the decoded buffer; once it was written there, a byte past it). */
static void test_basic_large(void) {
    static cb_secrets_t big;
    static char table[CB_PROXY_SECRET_VALUE_MAX + 128], plain[CB_PROXY_HEAD_MAX],
        wplain[CB_PROXY_HEAD_MAX];
    static unsigned char b64[CB_PROXY_HEAD_MAX], want[2 * CB_PROXY_HEAD_MAX];
    static char head[CB_PROXY_HEAD_MAX + 256], out[4 * CB_PROXY_HEAD_MAX];
    char value[CB_PROXY_SECRET_VALUE_MAX + 1], why[256];
    memset(value, 'v', CB_PROXY_SECRET_VALUE_MAX);
    value[CB_PROXY_SECRET_VALUE_MAX] = '\0';
    snprintf(table, sizeof table, "BIG\t" PH_A "\tbig.test\t%s\n", value);
    TAP_EQ_INT(cb_secrets_parse(&big, table, strlen(table), why, sizeof why), 0,
               "a table with a value of the largest size");
    for (size_t used = 12286; used <= 12288; used++) { /* 3 * 4096 - 2 .. 3 * 4096 */
        size_t pad = used - CB_PROXY_SECRET_VALUE_MAX - 2;
        int pl = snprintf(plain, sizeof plain, "u:" PH_A "%0*d", (int) pad, 0);
        int wl = snprintf(wplain, sizeof wplain, "u:%s%0*d", value, (int) pad, 0);
        EVP_EncodeBlock(b64, (unsigned char *) plain, pl);
        EVP_EncodeBlock(want, (unsigned char *) wplain, wl);
        snprintf(head, sizeof head,
                 "GET / HTTP/1.1\r\nHost: big.test\r\nAuthorization: Basic %s\r\n\r\n", b64);
        const cb_secret_t *f = NULL;
        size_t put = 0;
        long n = cb_secrets_apply(&big, "big.test", head, strlen(head), out, sizeof out, &f, &put);
        if (n >= 0) out[n] = '\0';
        TAP_OK(n > 0 && put == 1 && strstr(out, (char *) want) != NULL,
               "Basic credentials of %zu bytes with the value in: encoded again whole", used);
    }
    cb_secrets_wipe(&big);
}

int main(void) {
    char why[256];
    const char *table = "API_KEY\t" PH_A "\tapi.test,Other.Test.\tsk-live-AAAA\n"
                        "TOKEN\t" PH_B "\ttok.test\tt0k3n value\n";
    TAP_EQ_INT(cb_secrets_parse(&S, table, strlen(table), why, sizeof why), 0, "the table parses");
    TAP_EQ_INT(S.n, 2, "two secrets");
    TAP_EQ_STR(S.s[0].hosts[1], "other.test", "hosts are normalised");
    TAP_OK(cb_secrets_bound(&S, "api.test") && !cb_secrets_bound(&S, "x.test"), "bound()");
    const char *hosts[8];
    TAP_EQ_INT(cb_secrets_hosts(&S, hosts, 8), 3, "three distinct bound hosts");

    static const struct {
        const char *table, *what;
    } bad[] = {
        {"K\tcb-secret-00\ta.test\tv\n", "a short placeholder"},
        {"K\t" PH_A "\ta.test\tv\x01x\n", "a control byte in a value"},
        {"K\t" PH_A "\ta.test\t\n", "an empty value"},
        {"1K\t" PH_A "\ta.test\tv\n", "a name starting with a digit"},
        {"K\t" PH_A "\t10.0.0.1\tv\n", "an address for a host"},
        {"K\t" PH_A "\ta.test\n", "a missing field"},
        {"K\tcb-secret-0123456789ABCDEF0123456789abcdef\ta.test\tv\n", "upper-case hex"},
    };
    cb_secrets_t scratch;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TAP_EQ_INT(cb_secrets_parse(&scratch, bad[i].table, strlen(bad[i].table), why, sizeof why),
                   -1, bad[i].what);

    char out[4096];
    const char *foreign = NULL;
    const char *head = "GET /v1?k=" PH_A " HTTP/1.1\r\nHost: api.test\r\n"
                       "Authorization: Bearer " PH_A "\r\nX-Api-Key: " PH_A "\r\n\r\n";
    long n = apply("api.test", head, out, sizeof out, &foreign);
    TAP_OK(n > 0 && foreign == NULL, "a head for a bound host");
    TAP_OK(strstr(out, "Authorization: Bearer sk-live-AAAA\r\n") != NULL &&
               strstr(out, "X-Api-Key: sk-live-AAAA\r\n") != NULL,
           "values put in every header");
    TAP_OK(strncmp(out, "GET /v1?k=" PH_A " HTTP/1.1\r\n", 55) == 0,
           "the request line keeps the placeholder");
    TAP_OK(strstr(out, "\r\n\r\n") == out + n - 4, "the blank line ends it");

    n = apply("x.test", head, out, sizeof out, &foreign);
    TAP_OK(n == CB_SECRETS_FOREIGN && foreign && strcmp(foreign, "API_KEY") == 0,
           "another host: refused, naming the secret");
    TAP_OK(strstr(out, "sk-live") == NULL, "...and no value left in the output buffer");
    n = apply("api.test", "GET / HTTP/1.1\r\nHost: api.test\r\nX: " PH_B "\r\n\r\n", out,
              sizeof out, &foreign);
    TAP_OK(n == CB_SECRETS_FOREIGN && foreign && strcmp(foreign, "TOKEN") == 0,
           "a bound host, another secret's placeholder: refused");
    n = apply(NULL, "GET http://a/ HTTP/1.1\r\nX: cb-secret-nothex\r\n\r\n", out, sizeof out,
              &foreign);
    TAP_OK(n > 0 && foreign == NULL, "text that only looks like a placeholder passes");

    /* Basic: pip's __token__:PLACEHOLDER, base64 */
    unsigned char b64[256], plain[] = "__token__:" PH_B;
    EVP_EncodeBlock(b64, plain, (int) strlen((char *) plain));
    char basic[512];
    snprintf(basic, sizeof basic,
             "GET /simple/ HTTP/1.1\r\nHost: tok.test\r\nAuthorization: Basic %s\r\n\r\n", b64);
    n = apply("tok.test", basic, out, sizeof out, &foreign);
    unsigned char want[256], wplain[] = "__token__:t0k3n value";
    EVP_EncodeBlock(want, wplain, (int) strlen((char *) wplain));
    char wline[300];
    snprintf(wline, sizeof wline, "Authorization: Basic %s\r\n", want);
    TAP_OK(n > 0 && strstr(out, wline) != NULL, "Basic credentials: decoded, put in, encoded");
    n = apply("api.test", basic, out, sizeof out, &foreign);
    TAP_OK(n == CB_SECRETS_FOREIGN, "Basic credentials for another host: refused");
    n = apply("tok.test", basic, out, 40, &foreign);
    TAP_EQ_INT(n, CB_SECRETS_TOO_LARGE, "a short output buffer");

    /* fuzz: heads of placeholders, their pieces and noise */
    static const char *const bits[] = {PH_A,  PH_B, "cb-secret-", "\r\n",   "Authorization: Basic ",
                                       "X: ", "=",  "Y2Itc2Vj",   "sk-live"};
    long weird = 0;
    for (long i = 0; i < FUZZ_ROUNDS; i++) {
        char in[600];
        size_t len = (size_t) snprintf(in, sizeof in, "GET / HTTP/1.1\r\n");
        while (len < 500) {
            const char *b = bits[rnd() % (sizeof bits / sizeof bits[0])];
            size_t bl = rnd() % 3 ? strlen(b) : 1 + rnd() % strlen(b);
            memcpy(in + len, b, bl);
            len += bl;
        }
        const cb_secret_t *f = NULL;
        size_t put = 0;
        size_t cap = 64 + rnd() % 2048;
        char *o = malloc(cap);
        long r = cb_secrets_apply(&S, "tok.test", in, len, o, cap, &f, &put);
        if (r > (long) cap || (r == CB_SECRETS_FOREIGN && f == NULL)) weird++;
        if (r >= 0 && memmem(o, (size_t) r, "sk-live-AAAA", 12) != NULL) weird++; /* API_KEY's */
        free(o);
    }
    TAP_EQ_INT(weird, 0, "fuzz: bounded, and never another host's value");
    test_scan();
    test_basic_large();
    cb_secrets_wipe(&S);
    TAP_EQ_INT(S.n, 0, "wiped");
    TAP_DONE();
}
