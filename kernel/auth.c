/*
 * auth.c - HMAC-SHA256 signing and the replay history (see auth.h).
 *
 * The history is a ring of the last N accepted digests plus an
 * open-addressing index (linear probing, backward-shift deletion), so lookup,
 * insert and eviction of the oldest are O(1) and memory is fixed at start.
 * Digests are HMAC outputs, i.e. uniformly random, so their first 8 bytes
 * serve as the hash.
 *
 * The HMAC itself is OpenSSL's (libcrypto's SHA-256 uses the CPU's SHA
 * instructions where it has them; libsodium's is portable C, a quarter of
 * the kernel's CPU on a stdout flood): a context keyed once at start,
 * duplicated per message.  libsodium keeps the key's own copy (guarded
 * memory, zeroed on free), the hex and the constant-time compare.
 */
#include "kernel/auth.h"

#include "isolate/log.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct cb_auth {
    uint8_t *key;                    /* HMAC key bytes, sodium_malloc'd (guarded, zeroed on free) */
    size_t key_len;                  /* 0 = no signing */
    EVP_MAC *mac;                    /* OpenSSL's HMAC */
    EVP_MAC_CTX *keyed;              /* HMAC-SHA256 keyed with key: duplicated per message */
    uint8_t (*ring)[CB_AUTH_DIGEST]; /* accepted digests, oldest at ring_head when full */
    size_t ring_cap;                 /* slots in ring */
    size_t ring_len;                 /* used slots */
    size_t ring_head;                /* next slot to write */
    uint32_t *index;                 /* open addressing: ring slot + 1, 0 = empty */
    size_t index_cap;                /* power of two, >= 2 * ring_cap */
};

/* The HMAC-SHA256 context keyed once, which each message's duplicates. */
static int s_keyed_new(cb_auth_t *self) {
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    self->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (self->mac) self->keyed = EVP_MAC_CTX_new(self->mac);
    if (self->keyed == NULL || !EVP_MAC_init(self->keyed, self->key, self->key_len, params)) {
        LOG_E("OpenSSL HMAC-SHA256: %s", ERR_reason_error_string(ERR_get_error()));
        return -1;
    }
    return 0;
}

cb_auth_t *cb_auth_new(const uint8_t *key, size_t key_len, size_t history) {
    if (sodium_init() < 0) {
        LOG_E("sodium_init failed");
        return NULL;
    }
    cb_auth_t *self = calloc(1, sizeof *self);
    if (self == NULL) return NULL;
    if (key_len > 0) {
        self->key = sodium_malloc(key_len);
        if (self->key == NULL) goto fail;
        memcpy(self->key, key, key_len);
        self->key_len = key_len;
        if (s_keyed_new(self) < 0) goto fail;
    }
    if (history == 0) history = 1;
    self->ring_cap = history;
    self->ring = calloc(history, CB_AUTH_DIGEST);
    size_t cap = 1;
    while (cap < 2 * history)
        cap <<= 1;
    self->index_cap = cap;
    self->index = calloc(cap, sizeof *self->index);
    if (self->ring == NULL || self->index == NULL) goto fail;
    return self;
fail:
    cb_auth_destroy(&self);
    return NULL;
}

void cb_auth_destroy(cb_auth_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_auth_t *self = *self_p;
    if (self->key) sodium_free(self->key);
    EVP_MAC_CTX_free(self->keyed); /* OpenSSL cleanses its copy of the key */
    EVP_MAC_free(self->mac);
    free(self->ring);
    free(self->index);
    free(self);
    *self_p = NULL;
}

bool cb_auth_enabled(const cb_auth_t *self) { return self->key_len > 0; }

/* HMAC-SHA256 of the 4 parts' concatenation; false (logged) if OpenSSL fails. */
static bool s_hmac(const cb_auth_t *self, const cb_auth_part_t parts[4],
                   uint8_t out[CB_AUTH_DIGEST]) {
    EVP_MAC_CTX *c = EVP_MAC_CTX_dup(self->keyed);
    bool ok = c != NULL;
    for (int i = 0; ok && i < 4; i++)
        ok = EVP_MAC_update(c, parts[i].data, parts[i].len);
    size_t n = 0;
    ok = ok && EVP_MAC_final(c, out, &n, CB_AUTH_DIGEST) && n == CB_AUTH_DIGEST;
    EVP_MAC_CTX_free(c);
    if (!ok) {
        LOG_E("OpenSSL HMAC-SHA256 failed: %s", ERR_reason_error_string(ERR_get_error()));
        sodium_memzero(out, CB_AUTH_DIGEST);
    }
    return ok;
}

void cb_auth_sign(const cb_auth_t *self, const cb_auth_part_t parts[4], char hex[65]) {
    if (self->key_len == 0) {
        hex[0] = '\0';
        return;
    }
    uint8_t mac[CB_AUTH_DIGEST];
    if (!s_hmac(self, parts, mac)) {
        hex[0] = '\0'; /* no valid signature: every client refuses the message */
        return;
    }
    sodium_bin2hex(hex, 65, mac, sizeof mac);
}

static size_t s_hash(const cb_auth_t *self, const uint8_t d[CB_AUTH_DIGEST]) {
    uint64_t h;
    memcpy(&h, d, sizeof h);
    return (size_t) (h & (self->index_cap - 1));
}

static bool s_seen(const cb_auth_t *self, const uint8_t d[CB_AUTH_DIGEST]) {
    for (size_t i = s_hash(self, d);; i = (i + 1) & (self->index_cap - 1)) {
        uint32_t slot = self->index[i];
        if (slot == 0) return false;
        if (memcmp(self->ring[slot - 1], d, CB_AUTH_DIGEST) == 0) return true;
    }
}

static void s_index_remove(cb_auth_t *self, size_t ring_slot) {
    const uint8_t *d = self->ring[ring_slot];
    size_t mask = self->index_cap - 1, i = s_hash(self, d);
    while (self->index[i] != ring_slot + 1) {
        if (self->index[i] == 0) return; /* not indexed: nothing to do */
        i = (i + 1) & mask;
    }
    /* backward-shift deletion keeps probe chains intact */
    size_t j = i;
    for (;;) {
        self->index[i] = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (self->index[j] == 0) return;
            size_t k = s_hash(self, self->ring[self->index[j] - 1]);
            /* can entry j move to i? only if k is cyclically outside (i, j] */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
            break;
        }
        self->index[i] = self->index[j];
        i = j;
    }
}

static void s_remember(cb_auth_t *self, const uint8_t d[CB_AUTH_DIGEST]) {
    size_t slot = self->ring_head;
    if (self->ring_len == self->ring_cap)
        s_index_remove(self, slot); /* evict oldest */
    else
        self->ring_len++;
    memcpy(self->ring[slot], d, CB_AUTH_DIGEST);
    size_t i = s_hash(self, d);
    while (self->index[i] != 0)
        i = (i + 1) & (self->index_cap - 1);
    self->index[i] = (uint32_t) (slot + 1);
    self->ring_head = (slot + 1) % self->ring_cap;
}

int cb_auth_verify(cb_auth_t *self, const char *hex, size_t hex_len,
                   const cb_auth_part_t parts[4]) {
    if (self->key_len == 0) return 0;
    if (hex_len != 2 * CB_AUTH_DIGEST) return -1;
    uint8_t want[CB_AUTH_DIGEST];
    if (!s_hmac(self, parts, want)) return -1;
    /* the exact lowercase hex the reference Session (hmac.hexdigest) sends:
     * an uppercase digest is a different signature */
    char want_hex[2 * CB_AUTH_DIGEST + 1];
    sodium_bin2hex(want_hex, sizeof want_hex, want, CB_AUTH_DIGEST);
    if (sodium_memcmp(hex, want_hex, 2 * CB_AUTH_DIGEST) != 0) return -1;
    if (s_seen(self, want)) return -2;
    s_remember(self, want);
    return 0;
}
