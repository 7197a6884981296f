/*
 * auth.h - message signing and replay protection.
 *
 * HMAC-SHA256 over header|parent|metadata|content (OpenSSL's libcrypto; the
 * key, hex and compare with libsodium), verified in
 * constant time on the raw 32-byte digest, before any JSON is parsed.  A
 * bounded history of accepted signatures rejects replays (jupyter_client
 * Session.digest_history).  An empty key disables signing, as the spec says.
 */
#ifndef CB_AUTH_H
#define CB_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cb_auth cb_auth_t;

#define CB_AUTH_DIGEST 32 /* bytes of an hmac-sha256 digest */

/* A part of the signed message: bytes with their length. */
typedef struct {
    const void *data; /* borrowed */
    size_t len;       /* bytes */
} cb_auth_part_t;

/* Copies key. key_len 0 = signing disabled. history = replay slots. NULL on failure. */
cb_auth_t *cb_auth_new(const uint8_t *key, size_t key_len, size_t history);
void cb_auth_destroy(cb_auth_t **self_p);
bool cb_auth_enabled(const cb_auth_t *self);
/* Writes the lowercase hex signature of the 4 parts into hex (65 bytes incl.
 * NUL); "" when signing is disabled. */
void cb_auth_sign(const cb_auth_t *self, const cb_auth_part_t parts[4], char hex[65]);
/* Verifies hex (hex_len bytes, not NUL-terminated) over parts.
 * 0 ok (and remembered), -1 bad/missing signature, -2 replayed. */
int cb_auth_verify(cb_auth_t *self, const char *hex, size_t hex_len, const cb_auth_part_t parts[4]);

#endif
