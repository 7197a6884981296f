/*
 * tls.c - the session CA, leaf certificates and TLS on both sides (see
 * tls.h), the way mitmproxy and Squid's ssl-bump do it: mint a leaf per
 * host from a CA of our own, and verify the real server upstream ourselves.
 * Keys are P-256 (fast to make; one key for every leaf); certificates carry
 * what strict verifiers ask for (critical basicConstraints and keyUsage,
 * subject and authority key ids, subjectAltName), and the CA a critical
 * nameConstraints so it is good for the bound hosts only.
 */
#include "proxy/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launcher/netproxy_limits.h"

#define S_SERIAL_BYTES 16             /* random serial numbers */
#define S_BACKDATE_S   3600           /* notBefore: an hour ago (clock skew) */
#define S_ALPN         "\x08http/1.1" /* the one protocol spoken */
#define S_EXT_MAX      (CB_PROXY_NAME_MAX + 16) * CB_PROXY_BOUND_HOSTS_MAX /* nameConstraints */

typedef struct {
    char host[CB_PROXY_NAME_MAX + 1]; /* a bound host */
    X509 *cert;                       /* its leaf, NULL until first use */
} s_leaf_t;

struct cb_tls {
    EVP_PKEY *ca_key;                          /* the CA's key: only in this process */
    X509 *ca;                                  /* its certificate */
    char ca_pem[CB_PROXY_CA_PEM_MAX];          /* ... as PEM */
    size_t ca_pem_len;                         /* its bytes */
    EVP_PKEY *leaf_key;                        /* the key of every leaf */
    SSL_CTX *server;                           /* the sandbox side */
    SSL_CTX *client;                           /* the upstream side, verifying */
    s_leaf_t leaves[CB_PROXY_BOUND_HOSTS_MAX]; /* one per bound host */
    size_t n_leaves;                           /* used entries */
};

static int s_ex_host = -1; /* SSL ex_data index: the host an SSL is for */

/* The first queued OpenSSL error as text (and the queue emptied). */
static void s_err(char *why, size_t len, const char *what) {
    unsigned long e = ERR_get_error();
    char buf[256] = "unknown error";
    if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    (void) snprintf(why, len, "%s: %s", what, buf);
}

static int s_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL) return -1;
    int rc = X509_add_ext(cert, ext, -1) == 1 ? 0 : -1;
    X509_EXTENSION_free(ext);
    return rc;
}

/* A certificate for subject cn with key pub, issued by issuer (NULL: self)
 * and signed with sign_key; its extensions next, by the caller. */
static X509 *s_cert(const char *cn, EVP_PKEY *pub, X509 *issuer) {
    X509 *x = X509_new();
    unsigned char serial[S_SERIAL_BYTES];
    BIGNUM *bn = NULL;
    if (x == NULL || RAND_bytes(serial, sizeof serial) != 1) goto fail;
    serial[0] &= 0x7f; /* positive */
    bn = BN_bin2bn(serial, sizeof serial, NULL);
    X509_NAME *name = X509_get_subject_name(x);
    if (bn == NULL || BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL ||
        X509_set_version(x, 2) != 1 ||
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *) "cellblock", -1,
                                   -1, 0) != 1 ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *) cn, -1, -1,
                                   0) != 1 ||
        X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) != 1 ||
        X509_gmtime_adj(X509_getm_notBefore(x), -S_BACKDATE_S) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(x), (long) CB_PROXY_CA_DAYS * 86400) == NULL ||
        X509_set_pubkey(x, pub) != 1)
        goto fail;
    BN_free(bn);
    return x;
fail:
    BN_free(bn);
    X509_free(x);
    return NULL;
}

static int s_make_ca(cb_tls_t *t, const char *const *hosts, size_t n, char *why, size_t len) {
    char cn[64], nc[S_EXT_MAX] = "critical";
    (void) snprintf(cn, sizeof cn, "cellblock session CA (proxy %ld)", (long) getpid());
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(nc);
        int w = snprintf(nc + used, sizeof nc - used, ",permitted;DNS:%s", hosts[i]);
        if (w < 0 || (size_t) w >= sizeof nc - used) {
            (void) snprintf(why, len, "too many bound hosts for the CA's name constraints");
            return -1;
        }
    }
    t->ca_key = EVP_EC_gen("P-256");
    t->leaf_key = EVP_EC_gen("P-256");
    if (t->ca_key == NULL || t->leaf_key == NULL || (t->ca = s_cert(cn, t->ca_key, NULL)) == NULL ||
        s_ext(t->ca, t->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
        s_ext(t->ca, t->ca, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
        s_ext(t->ca, t->ca, NID_subject_key_identifier, "hash") < 0 ||
        s_ext(t->ca, t->ca, NID_name_constraints, nc) < 0 ||
        X509_sign(t->ca, t->ca_key, EVP_sha256()) <= 0) {
        s_err(why, len, "making the session CA");
        return -1;
    }
    BIO *b = BIO_new(BIO_s_mem());
    char *data = NULL;
    long bl = 0;
    if (b == NULL || PEM_write_bio_X509(b, t->ca) != 1 || (bl = BIO_get_mem_data(b, &data)) <= 0 ||
        (size_t) bl >= sizeof t->ca_pem) {
        BIO_free(b);
        s_err(why, len, "writing the session CA");
        return -1;
    }
    memcpy(t->ca_pem, data, (size_t) bl);
    t->ca_pem_len = (size_t) bl;
    BIO_free(b);
    return 0;
}

static X509 *s_leaf(cb_tls_t *t, const char *host) {
    s_leaf_t *l = NULL;
    for (size_t i = 0; i < t->n_leaves && l == NULL; i++)
        if (strcmp(t->leaves[i].host, host) == 0) l = &t->leaves[i];
    if (l == NULL) return NULL; /* not a bound host: never minted */
    if (l->cert != NULL) return l->cert;
    char san[CB_PROXY_NAME_MAX + 8];
    (void) snprintf(san, sizeof san, "DNS:%s", host);
    X509 *x = s_cert(host, t->leaf_key, t->ca);
    if (x == NULL || s_ext(x, t->ca, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        s_ext(x, t->ca, NID_key_usage, "critical,digitalSignature") < 0 ||
        s_ext(x, t->ca, NID_ext_key_usage, "serverAuth") < 0 ||
        s_ext(x, t->ca, NID_subject_key_identifier, "hash") < 0 ||
        s_ext(x, t->ca, NID_authority_key_identifier, "keyid:always") < 0 ||
        s_ext(x, t->ca, NID_subject_alt_name, san) < 0 ||
        X509_sign(x, t->ca_key, EVP_sha256()) <= 0) {
        X509_free(x);
        return NULL;
    }
    l->cert = x;
    return x;
}

/* The sandbox must ask for the host it CONNECTed to (or for nothing). */
static int s_on_sni(SSL *s, int *alert, void *arg) {
    (void) arg;
    const char *want = SSL_get_ex_data(s, s_ex_host);
    const char *got = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    if (got == NULL || want == NULL || strcasecmp(got, want) == 0) return SSL_TLSEXT_ERR_OK;
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* HTTP/1.1 is what the proxy reads; a client that offers only h2 fails. */
static int s_on_alpn(SSL *s, const unsigned char **out, unsigned char *outlen,
                     const unsigned char *in, unsigned int inlen, void *arg) {
    (void) s;
    (void) arg;
    for (unsigned i = 0; i < inlen && in[i] > 0 && i + 1 + in[i] <= inlen; i += 1u + in[i])
        if (in[i] == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = 8;
            return SSL_TLSEXT_ERR_OK;
        }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static SSL_CTX *s_ctx(const SSL_METHOD *m) {
    SSL_CTX *c = SSL_CTX_new(m);
    if (c == NULL) return NULL;
    (void) SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(c, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                               SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    return c;
}

cb_tls_t *cb_tls_new(const char *const *hosts, size_t n, const char *upstream_ca, char *why,
                     size_t why_len) {
    if (n == 0 || n > CB_PROXY_BOUND_HOSTS_MAX) {
        (void) snprintf(why, why_len, "1 to %d bound hosts", CB_PROXY_BOUND_HOSTS_MAX);
        return NULL;
    }
    if (OPENSSL_init_ssl(0, NULL) != 1) {
        s_err(why, why_len, "OPENSSL_init_ssl");
        return NULL;
    }
    if (s_ex_host < 0) s_ex_host = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    cb_tls_t *t = OPENSSL_zalloc(sizeof *t);
    if (t == NULL) {
        (void) snprintf(why, why_len, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        (void) snprintf(t->leaves[t->n_leaves++].host, sizeof t->leaves[0].host, "%s", hosts[i]);
    if (s_make_ca(t, hosts, n, why, why_len) < 0) goto fail;
    t->server = s_ctx(TLS_server_method());
    t->client = s_ctx(TLS_client_method());
    if (t->server == NULL || t->client == NULL) {
        s_err(why, why_len, "SSL_CTX_new");
        goto fail;
    }
    SSL_CTX_set_tlsext_servername_callback(t->server, s_on_sni);
    SSL_CTX_set_alpn_select_cb(t->server, s_on_alpn, NULL);
    SSL_CTX_set_verify(t->client, SSL_VERIFY_PEER, NULL);
    /* the whole store now: after confinement no file can be read */
    const char *store = upstream_ca ? upstream_ca : X509_get_default_cert_file();
    if (SSL_CTX_load_verify_locations(t->client, store, NULL) != 1) {
        char what[CB_PROXY_NAME_MAX + 64];
        (void) snprintf(what, sizeof what, "loading the upstream trust store %s", store);
        s_err(why, why_len, what);
        goto fail;
    }
    if (SSL_CTX_set_alpn_protos(t->client, (const unsigned char *) S_ALPN, sizeof S_ALPN - 1) !=
        0) {
        s_err(why, why_len, "SSL_CTX_set_alpn_protos");
        goto fail;
    }
    return t;
fail:
    cb_tls_destroy(&t);
    return NULL;
}

void cb_tls_destroy(cb_tls_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_tls_t *t = *self_p;
    *self_p = NULL;
    for (size_t i = 0; i < t->n_leaves; i++)
        X509_free(t->leaves[i].cert);
    SSL_CTX_free(t->server);
    SSL_CTX_free(t->client);
    X509_free(t->ca);
    EVP_PKEY_free(t->ca_key);
    EVP_PKEY_free(t->leaf_key);
    OPENSSL_clear_free(t, sizeof *t);
}

const char *cb_tls_ca_pem(const cb_tls_t *t, size_t *len) {
    *len = t->ca_pem_len;
    return t->ca_pem;
}

SSL *cb_tls_server(cb_tls_t *t, int fd, const char *host, char *why, size_t why_len) {
    X509 *leaf = s_leaf(t, host);
    SSL *s = leaf ? SSL_new(t->server) : NULL;
    if (s == NULL || SSL_set_fd(s, fd) != 1 || SSL_use_certificate(s, leaf) != 1 ||
        SSL_use_PrivateKey(s, t->leaf_key) != 1 ||
        SSL_set_ex_data(s, s_ex_host, (void *) host) != 1) {
        s_err(why, why_len, leaf ? "the sandbox side's TLS" : "making a leaf certificate");
        SSL_free(s);
        return NULL;
    }
    SSL_set_accept_state(s);
    return s;
}

SSL *cb_tls_client(cb_tls_t *t, int fd, const char *host, char *why, size_t why_len) {
    SSL *s = SSL_new(t->client);
    if (s == NULL || SSL_set_fd(s, fd) != 1 || SSL_set_tlsext_host_name(s, host) != 1 ||
        SSL_set1_host(s, host) != 1 || SSL_set_ex_data(s, s_ex_host, (void *) host) != 1) {
        s_err(why, why_len, "the upstream's TLS");
        SSL_free(s);
        return NULL;
    }
    SSL_set_hostflags(s, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set_connect_state(s);
    return s;
}

int cb_tls_handshake(SSL *s, short *want, char *why, size_t why_len) {
    ERR_clear_error();
    int r = SSL_do_handshake(s);
    if (r == 1) return 1;
    int e = SSL_get_error(s, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    long v = SSL_get_verify_result(s);
    if (!SSL_is_server(s) && v == X509_V_ERR_HOSTNAME_MISMATCH)
        (void) snprintf(why, why_len, "the server's certificate is not for %s",
                        (const char *) SSL_get_ex_data(s, s_ex_host));
    else if (!SSL_is_server(s) && v != X509_V_OK)
        (void) snprintf(why, why_len, "the server's certificate is not trusted (%s)",
                        X509_verify_cert_error_string(v));
    else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
        (void) snprintf(why, why_len, "the connection closed during the TLS handshake");
    else
        s_err(why, why_len, "TLS handshake");
    ERR_clear_error();
    return -1;
}

/* After SSL_read_ex or SSL_write_ex failed: 0 with *want set when TLS waits
 * for the socket, eof after the peer's close_notify, else -2. */
static long s_io_failed(SSL *s, short *want, long eof) {
    int e = SSL_get_error(s, 0);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    return e == SSL_ERROR_ZERO_RETURN ? eof : -2;
}

long cb_tls_read(SSL *s, char *buf, size_t n, short *want) {
    size_t got = 0;
    ERR_clear_error();
    if (SSL_read_ex(s, buf, n, &got) == 1) return (long) got;
    return s_io_failed(s, want, -1);
}

long cb_tls_write(SSL *s, const char *buf, size_t n, short *want) {
    size_t put = 0;
    ERR_clear_error();
    if (SSL_write_ex(s, buf, n, &put) == 1) return (long) put;
    return s_io_failed(s, want, -2); /* nothing more can be written: an error to the caller */
}

void cb_tls_free(SSL **s) {
    if (s == NULL || *s == NULL) return;
    if (SSL_is_init_finished(*s)) (void) SSL_shutdown(*s); /* close_notify, no waiting */
    ERR_clear_error();
    SSL_free(*s);
    *s = NULL;
}
