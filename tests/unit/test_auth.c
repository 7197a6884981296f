/*
 * test_auth.c - HMAC-SHA256 against RFC 4231 and Python's hmac module, and
 * the replay history (duplicates rejected, oldest evicted).
 */
#include "kernel/auth.h"

#include <ctype.h>
#include "tap.h"

#include <sodium.h>

static void s_rfc(const char *name, const uint8_t *key, size_t klen, const void *data, size_t dlen,
                  const char *want) {
    cb_auth_t *a = cb_auth_new(key, klen, 16);
    /* split the data across the four parts: the MAC is over their concatenation */
    size_t q = dlen / 3;
    cb_auth_part_t parts[4] = {{data, q},
                               {(const char *) data + q, q},
                               {(const char *) data + 2 * q, dlen - 2 * q},
                               {"", 0}};
    char hex[65];
    cb_auth_sign(a, parts, hex);
    TAP_EQ_STR(hex, want, name);
    TAP_EQ_INT(cb_auth_verify(a, want, 64, parts), 0, "verify accepts the RFC digest");
    TAP_EQ_INT(cb_auth_verify(a, want, 64, parts), -2, "the same signature again is a replay");
    cb_auth_destroy(&a);
    TAP_OK(a == NULL, "destroy nulls the pointer");
}

int main(void) {
    uint8_t k1[20], k3[20], k4[25], d3[50], d4[50], k6[131];
    memset(k1, 0x0b, sizeof k1);
    memset(k3, 0xaa, sizeof k3);
    memset(d3, 0xdd, sizeof d3);
    for (int i = 0; i < 25; i++)
        k4[i] = (uint8_t) (i + 1);
    memset(d4, 0xcd, sizeof d4);
    memset(k6, 0xaa, sizeof k6);
    s_rfc("RFC 4231 case 1", k1, 20, "Hi There", 8,
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    s_rfc("RFC 4231 case 2", (const uint8_t *) "Jefe", 4, "what do ya want for nothing?", 28,
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    s_rfc("RFC 4231 case 3", k3, 20, d3, 50,
          "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    s_rfc("RFC 4231 case 4", k4, 25, d4, 50,
          "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    s_rfc("RFC 4231 case 6", k6, 131, d6, strlen(d6),
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    const char *d7 =
        "This is a test using a larger than block-size key and a larger than block-size "
        "data. The key needs to be hashed before being used by the HMAC algorithm.";
    s_rfc("RFC 4231 case 7", k6, 131, d7, strlen(d7),
          "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");

    /* Against Python's hmac, the way jupyter_client's Session signs. */
    const char *key = "a0436f6c-1916-498b-8eb9-e81ab9368e84";
    const char *p[4] = {"{\"msg_id\":\"1\",\"msg_type\":\"x\"}", "{}", "{}",
                        "{\"code\":\"print(1)\"}"};
    cb_auth_t *a = cb_auth_new((const uint8_t *) key, strlen(key), 8);
    cb_auth_part_t parts[4];
    for (int i = 0; i < 4; i++)
        parts[i] = (cb_auth_part_t){p[i], strlen(p[i])};
    char mine[65];
    cb_auth_sign(a, parts, mine);
    FILE *f = popen(
        "python3 -c 'import hmac,hashlib,sys; h=hmac.new(sys.argv[1].encode(), "
        "digestmod=hashlib.sha256);"
        " [h.update(x.encode()) for x in sys.argv[2:]]; print(h.hexdigest())' "
        "'a0436f6c-1916-498b-8eb9-e81ab9368e84' '{\"msg_id\":\"1\",\"msg_type\":\"x\"}' '{}' '{}' "
        "'{\"code\":\"print(1)\"}'",
        "r");
    char py[80] = "";
    if (f) {
        if (fgets(py, sizeof py, f) == NULL) py[0] = '\0';
        pclose(f);
    }
    py[strcspn(py, "\n")] = '\0';
    TAP_EQ_STR(mine, py, "same digest as Python's hmac.new(key, sha256)");

    /* A wrong or malformed signature fails, and so does the upper-case hex of
     * the right one: the reference Session compares hexdigest() strings. */
    char upper[65];
    for (int i = 0; i < 65; i++)
        upper[i] = (char) toupper((unsigned char) mine[i]);
    TAP_OK(strcmp(upper, mine) != 0, "the digest has letters to change case");
    TAP_EQ_INT(cb_auth_verify(a, upper, 64, parts), -1, "an upper-case digest is rejected");
    char bad[65];
    memcpy(bad, mine, 65);
    bad[0] = bad[0] == 'a' ? 'b' : 'a';
    TAP_EQ_INT(cb_auth_verify(a, bad, 64, parts), -1, "one changed hex digit is rejected");
    TAP_EQ_INT(cb_auth_verify(a, mine, 63, parts), -1, "a truncated signature is rejected");
    TAP_EQ_INT(cb_auth_verify(a, "", 0, parts), -1,
               "an empty signature is rejected when a key is set");
    TAP_EQ_INT(cb_auth_verify(a, "zz", 2, parts), -1, "non-hex is rejected");
    parts[3] = (cb_auth_part_t){"{\"code\":\"print(2)\"}", 19};
    TAP_EQ_INT(cb_auth_verify(a, mine, 64, parts), -1, "a changed content is rejected");

    /* Replay history of 8: the 9th distinct message evicts the first. */
    char sigs[10][65];
    char bodies[10][32];
    for (int i = 0; i < 10; i++) {
        snprintf(bodies[i], sizeof bodies[i], "{\"n\":%d}", i);
        cb_auth_part_t pp[4] = {{bodies[i], strlen(bodies[i])}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
        cb_auth_sign(a, pp, sigs[i]);
        TAP_EQ_INT(cb_auth_verify(a, sigs[i], 64, pp), 0, "fresh message accepted");
    }
    cb_auth_part_t p0[4] = {{bodies[0], strlen(bodies[0])}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    cb_auth_part_t p9[4] = {{bodies[9], strlen(bodies[9])}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    TAP_EQ_INT(cb_auth_verify(a, sigs[9], 64, p9), -2, "recent signature is a replay");
    TAP_EQ_INT(cb_auth_verify(a, sigs[0], 64, p0), 0,
               "the oldest was evicted from the bounded history");
    cb_auth_destroy(&a);

    /* Many insertions and evictions keep the index consistent. */
    a = cb_auth_new((const uint8_t *) "k", 1, 64);
    int fails = 0;
    for (int i = 0; i < 5000; i++) {
        char b[40];
        snprintf(b, sizeof b, "{\"i\":%d}", i);
        cb_auth_part_t pp[4] = {{b, strlen(b)}, {"", 0}, {"", 0}, {"", 0}};
        char s[65];
        cb_auth_sign(a, pp, s);
        if (cb_auth_verify(a, s, 64, pp) != 0) fails++;
        if (cb_auth_verify(a, s, 64, pp) != -2) fails++;
        if (i >= 63) { /* the one 63 back is still remembered */
            char b2[40];
            snprintf(b2, sizeof b2, "{\"i\":%d}", i - 63);
            cb_auth_part_t p2[4] = {{b2, strlen(b2)}, {"", 0}, {"", 0}, {"", 0}};
            char s2[65];
            cb_auth_sign(a, p2, s2);
            if (cb_auth_verify(a, s2, 64, p2) != -2) fails++;
        }
    }
    TAP_EQ_INT(fails, 0, "5000 messages through a 64-slot history: no false accepts or rejects");
    cb_auth_destroy(&a);

    /* OpenSSL's HMAC against libsodium's (the previous implementation) on
     * random keys and parts of every length class, up to a 1 MiB content. */
    if (sodium_init() < 0) return 1;
    static uint8_t big[1 << 20];
    randombytes_buf(big, sizeof big);
    int differ = 0;
    for (int t = 0; t < 64; t++) {
        uint8_t k[200];
        size_t klen = 1 + randombytes_uniform(sizeof k); /* past the 64-byte block too */
        randombytes_buf(k, klen);
        size_t len[4];
        for (int i = 0; i < 4; i++)
            len[i] = randombytes_uniform(t % 8 == 0 ? sizeof big / 4 : 300);
        cb_auth_part_t pp[4];
        crypto_auth_hmacsha256_state st;
        crypto_auth_hmacsha256_init(&st, k, klen);
        size_t off = 0;
        for (int i = 0; i < 4; i++) {
            pp[i] = (cb_auth_part_t){big + off, len[i]};
            crypto_auth_hmacsha256_update(&st, big + off, len[i]);
            off += len[i];
        }
        uint8_t want[32];
        char want_hex[65], got[65];
        crypto_auth_hmacsha256_final(&st, want);
        sodium_bin2hex(want_hex, sizeof want_hex, want, sizeof want);
        a = cb_auth_new(k, klen, 4);
        cb_auth_sign(a, pp, got);
        differ += strcmp(got, want_hex) != 0;
        differ += cb_auth_verify(a, want_hex, 64, pp) != 0;
        cb_auth_destroy(&a);
    }
    TAP_EQ_INT(differ, 0, "64 random keys and messages: the same digest as libsodium's");

    /* Empty key: signing disabled. */
    a = cb_auth_new(NULL, 0, 4);
    char none[65];
    cb_auth_sign(a, parts, none);
    TAP_EQ_STR(none, "", "no key: empty signature");
    TAP_EQ_INT(cb_auth_verify(a, "", 0, parts), 0, "no key: anything verifies");
    TAP_OK(!cb_auth_enabled(a), "no key: signing reported disabled");
    cb_auth_destroy(&a);
    cb_auth_destroy(&a);
    TAP_OK(1, "destroy is idempotent");
    TAP_DONE();
}
