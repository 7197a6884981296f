/*
 * tls.h - TLS termination for the hosts a secret is bound to (OpenSSL).
 *
 * Per proxy process (= per session): a CA whose private key exists only in
 * this process's memory, valid for CB_PROXY_CA_DAYS and, by a critical
 * name constraint, only for the bound hosts; one leaf certificate per bound
 * host, made on first use; the sandbox side speaks TLS 1.2+ with ALPN
 * http/1.1 only and must name the CONNECT host in its SNI.  Upstream, the
 * proxy verifies the real server: the chain against the host's trust store
 * (the system bundle file, loaded before confinement) or the operator's
 * --network-upstream-ca FILE instead, and the name with SSL_set1_host.
 */
#ifndef CB_PROXY_TLS_H
#define CB_PROXY_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct cb_tls cb_tls_t;

/* The CA (for hosts[0..n)) and both contexts.  upstream_ca: a PEM file of
 * the CAs upstream servers are checked against, NULL for the system's.
 * NULL on failure with why. */
cb_tls_t *cb_tls_new(const char *const *hosts, size_t n, const char *upstream_ca, char *why,
                     size_t why_len);
/* Frees everything; the CA's key is cleansed by OpenSSL.  Nulls *self_p. */
void cb_tls_destroy(cb_tls_t **self_p);
/* The CA certificate, PEM (borrowed). */
const char *cb_tls_ca_pem(const cb_tls_t *self, size_t *len);
/* A server-side SSL on fd (the sandbox's connection) presenting host's
 * leaf; host must outlive it.  NULL with why. */
SSL *cb_tls_server(cb_tls_t *self, int fd, const char *host, char *why, size_t why_len);
/* A client-side SSL on fd (the upstream) that verifies host (which must
 * outlive it).  NULL + why. */
SSL *cb_tls_client(cb_tls_t *self, int fd, const char *host, char *why, size_t why_len);
/* Drives a handshake: 1 done, 0 more to do (*want: POLLIN or POLLOUT), -1
 * failed with why (an untrusted or misnamed certificate says so). */
int cb_tls_handshake(SSL *s, short *want, char *why, size_t why_len);
/* Reads up to n bytes: how many, 0 not now (*want set), -1 closed, -2 error. */
long cb_tls_read(SSL *s, char *buf, size_t n, short *want);
/* Writes up to n bytes: how many, 0 not now (*want set), -2 error. */
long cb_tls_write(SSL *s, const char *buf, size_t n, short *want);
/* Sends close_notify (without waiting) and frees.  Nulls *s. */
void cb_tls_free(SSL **s);

#endif
