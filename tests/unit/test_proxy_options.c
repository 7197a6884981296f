/* test_proxy_options.c - the launcher's --network allow: flags: parsed,
 * validated with the proxy's own grammar, and refused in combinations that
 * would leave the allowlist unenforced; --network-upstream-ca: only its
 * certificates reach the sandbox's CA bundle. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/netproxy_limits.h"
#include "launcher/netsecrets.h"
#include "launcher/options.h"
#include "tap.h"

static int parse(cb_options_t *o, char *err, size_t n, int argc, const char **argv) {
    return cb_options_parse(argc, (char **) argv, o, err, n);
}

#define BASE "x", "--python", "/usr/bin/python3", "--runner", "/r/runner.py"

/* A self-signed certificate and its key, made here: the PEM of each. */
static void make_cert(char **cert, char **key) {
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *) "cb test CA", -1, -1,
                               0);
    X509_set_issuer_name(x, n);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, k);
    X509_sign(x, k, EVP_sha256());
    BIO *bc = BIO_new(BIO_s_mem()), *bk = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bc, x);
    PEM_write_bio_PrivateKey(bk, k, NULL, NULL, 0, NULL, NULL);
    char *p = NULL;
    long l = BIO_get_mem_data(bc, &p);
    *cert = strndup(p, (size_t) l);
    l = BIO_get_mem_data(bk, &p);
    *key = strndup(p, (size_t) l);
    BIO_free(bc);
    BIO_free(bk);
    X509_free(x);
    EVP_PKEY_free(k);
}

/* A file in dir holding the concatenation of parts (NULL-terminated). */
static void write_file(char *path, size_t len, const char *dir, const char *name,
                       const char *const *parts) {
    (void) snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; parts[i] != NULL; i++)
        fputs(parts[i], f);
    fclose(f);
}

/* The bytes of the plan's file at sandbox path, or NULL. */
static const cb_mount_op_t *blob(const cb_mount_plan_t *m, const char *path) {
    for (size_t i = 0; i < m->n; i++) {
        const char *d = m->ops[i].dst;
        size_t dl = d ? strlen(d) : 0, pl = strlen(path);
        if (m->ops[i].kind == CB_MNT_BLOB && dl >= pl && strcmp(d + dl - pl, path) == 0)
            return &m->ops[i];
    }
    return NULL;
}

static bool has(const cb_mount_op_t *op, const char *needle) {
    return op != NULL && memmem(op->data, op->data_len, needle, strlen(needle)) != NULL;
}

static char dir[] = "/tmp/cb-upca-XXXXXX";         /* the files below */
static char combined[64], keyonly[64], broken[64]; /* key+cert, key, a garbled cert */
static char *cert, *key, *garbled;                 /* their PEM */

static void files_make(void) {
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    make_cert(&cert, &key);
    write_file(combined, sizeof combined, dir, "combined.pem",
               (const char *const[]){key, "\n", cert, NULL});
    write_file(keyonly, sizeof keyonly, dir, "key.pem", (const char *const[]){key, NULL});
    garbled = strdup(cert);
    garbled[strlen(garbled) / 2] = '!'; /* a byte that is not base64, in the middle */
    write_file(broken, sizeof broken, dir, "broken.pem", (const char *const[]){garbled, NULL});
}

static void files_remove(void) {
    unlink(combined);
    unlink(keyonly);
    unlink(broken);
    rmdir(dir);
    free(garbled);
    free(cert);
    free(key);
}

/* --network-upstream-ca: checked for a certificate, and only its
 * certificates copied into the sandbox's bundle (a combined cert+key file
 * must not put the key inside). */
static void test_upstream_ca(void) {
    char err[256];

    TAP_OK(cb_netsecrets_ca_check(combined, err, sizeof err) == 0, "cert+key: accepted: %s", err);
    TAP_OK(cb_netsecrets_ca_check(keyonly, err, sizeof err) < 0 && strstr(err, "no certificate") &&
               strstr(err, keyonly),
           "a key alone is refused, naming the file: %s", err);
    TAP_OK(cb_netsecrets_ca_check("/etc/hosts", err, sizeof err) < 0 &&
               strstr(err, "--network-upstream-ca /etc/hosts: no certificate"),
           "a file without a certificate is refused: %s", err);
    TAP_OK(cb_netsecrets_ca_check(broken, err, sizeof err) < 0 && strstr(err, "malformed"),
           "a malformed certificate is refused: %s", err);
    TAP_OK(cb_netsecrets_ca_check("/nonexistent/ca.pem", err, sizeof err) < 0 &&
               strstr(err, "/nonexistent/ca.pem"),
           "a missing file is refused: %s", err);
    TAP_OK(cb_netsecrets_ca_check("/etc", err, sizeof err) < 0, "a directory is refused: %s", err);

    static cb_netsecrets_t s;
    static cb_mount_plan_t m;
    static cb_exec_plan_t e;
    memset(&s, 0, sizeof s);
    memset(&e, 0, sizeof e);
    s.n = 1;
    (void) snprintf(s.env[0].name, sizeof s.env[0].name, "API_KEY");
    (void) snprintf(s.env[0].placeholder, sizeof s.env[0].placeholder, "%s%032d",
                    CB_PROXY_PLACEHOLDER_PREFIX, 0);
    static const char session[] =
        "-----BEGIN CERTIFICATE-----\nSESSION\n-----END CERTIFICATE-----\n";
    cb_mount_plan_init(&m);
    int rc = cb_netsecrets_plan(&s, session, sizeof session - 1, combined, &m, &e, err, sizeof err);
    TAP_OK(rc == 0, "the plan with a cert+key upstream CA: %s", rc == 0 ? "" : err);
    const cb_mount_op_t *b = blob(&m, CB_PROXY_CA_BUNDLE);
    TAP_OK(b != NULL, "the bundle is planned");
    TAP_OK(b != NULL && !has(b, "PRIVATE KEY"), "no private key in the sandbox's bundle");
    TAP_OK(has(b, cert), "the upstream CA's certificate is in it");
    TAP_OK(b != NULL && b->data_len >= sizeof session - 1 &&
               memcmp(b->data + b->data_len - (sizeof session - 1), session, sizeof session - 1) ==
                   0,
           "the session CA last");
    cb_mount_plan_fini(&m);
    cb_mount_plan_init(&m);
    TAP_OK(cb_netsecrets_plan(&s, session, sizeof session - 1, keyonly, &m, &e, err, sizeof err) <
                   0 &&
               strstr(err, "no certificate"),
           "a plan with a key alone as upstream CA fails: %s", err);
    cb_mount_plan_fini(&m);
}

int main(void) {
    char err[256];
    cb_options_t o;
    files_make();
    const char *a1[] = {BASE,
                        "--network",
                        "allow:pypi.org,*.corp.example:8443,[::1]:9000",
                        "--network-resolve",
                        "pypi.org=127.0.0.1",
                        "--network-max-conns=8",
                        "--network-max-bytes",
                        "16"};
    TAP_EQ_INT(parse(&o, err, sizeof err, (int) (sizeof a1 / sizeof a1[0]), a1), 0,
               "allow: with pins and bounds parses");
    TAP_EQ_STR(o.network_allow, "pypi.org,*.corp.example:8443,[::1]:9000",
               "the spec, without allow:");
    TAP_OK(!o.network_host, "not the host's network");
    TAP_EQ_INT(o.n_network_resolve, 1, "one pin");
    TAP_EQ_INT(o.network_max_conns, 8, "max conns");
    TAP_EQ_INT(o.network_max_mb, 16, "max MiB");
    cb_options_fini(&o);

    const char *a2[] = {BASE};
    TAP_EQ_INT(parse(&o, err, sizeof err, 5, a2), 0, "defaults");
    TAP_OK(o.network_allow == NULL, "no allowlist by default");
    TAP_EQ_INT(o.network_max_conns, CB_PROXY_DEFAULT_MAX_CONNS, "default max conns");
    TAP_EQ_INT(o.network_max_mb, CB_PROXY_DEFAULT_MAX_MB, "default max MiB");
    cb_options_fini(&o);

    static const struct {
        const char *flag, *value, *needle;
    } bad[] = {
        {"--network", "allow:", "empty"},
        {"--network", "allow:a.org:0", "port"},
        {"--network", "allow:::1", "IPv6"},
        {"--network", "allowed:a.org", "none|host|allow"},
        {"--network-resolve", "a.org=not-an-address", "ADDRESS"},
        {"--network-max-conns", "0", "out of range"},
        {"--network-max-bytes", "x", "not a size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a[] = {BASE, "--network", "allow:a.org", bad[i].flag, bad[i].value};
        int rc = parse(&o, err, sizeof err, 9, a);
        TAP_OK(rc < 0 && strstr(err, bad[i].needle) != NULL, "%s %s refused: %s", bad[i].flag,
               bad[i].value, err);
        cb_options_fini(&o);
    }
    const char *a3[] = {BASE, "--network-resolve", "a.org=127.0.0.1"};
    TAP_OK(parse(&o, err, sizeof err, 7, a3) < 0 && strstr(err, "needs --network allow"),
           "a pin without an allowlist is refused: %s", err);
    cb_options_fini(&o);
    const char *a4[] = {BASE, "--network", "allow:a.org", "--sandbox", "none"};
    TAP_OK(parse(&o, err, sizeof err, 9, a4) < 0 && strstr(err, "needs --sandbox full"),
           "an allowlist without a sandbox is refused: %s", err);
    cb_options_fini(&o);

    /* --secret and --network-upstream-ca */
    const char *a5[] = {BASE,
                        "--network",
                        "allow:api.example,*.cdn.example:8443",
                        "--secret",
                        "KEY@Api.Example.,x.cdn.example",
                        "--network-upstream-ca",
                        combined};
    TAP_OK(parse(&o, err, sizeof err, 11, a5) == 0, "a secret bound to listed hosts: %s", err);
    TAP_OK(o.n_secret == 1 && strcmp(o.secret[0], "KEY@Api.Example.,x.cdn.example") == 0 &&
               strcmp(o.network_upstream_ca, combined) == 0,
           "the secret and the upstream CA reach the launcher's options");
    cb_secret_spec_t sp;
    TAP_OK(cb_secret_spec_parse("KEY@Api.Example.,x.cdn.example", &sp, err, sizeof err) == 0 &&
               sp.n_hosts == 2 && strcmp(sp.hosts[0], "api.example") == 0,
           "hosts normalised");
    cb_options_fini(&o);
    static const struct {
        const char *secret, *needle;
    } sbad[] = {
        {"KEY@other.example", "not in the allowlist"},
        {"KEY", "is not NAME@HOST"},
        {"KEY@", "is not NAME@HOST"},
        {"@api.example", "is not NAME@HOST"},
        {"K-1@api.example", "is not a variable name"},
        {"LD_PRELOAD@api.example", "may not be set"},
        {"KEY@1.2.3.4", "is not a host name"},
        {"KEY@[::1]", "is not a host name"},
        {"KEY@localhost", "is not a host name"},
        {"KEY@a.example,b.example,c.example,d.example,e.example,f.example,g.example,h.example,"
         "i.example",
         "more than 8 hosts"},
    };
    for (size_t i = 0; i < sizeof sbad / sizeof sbad[0]; i++) {
        const char *a[] = {BASE, "--network", "allow:api.example", "--secret", sbad[i].secret};
        TAP_OK(parse(&o, err, sizeof err, 9, a) < 0 && strstr(err, sbad[i].needle) != NULL,
               "--secret %.40s refused: %s", sbad[i].secret, err);
        cb_options_fini(&o);
    }
    const char *a6[] = {BASE,           "--network",     "allow:api.example",
                        "--secret",     "K@api.example", "--secret",
                        "K@api.example"};
    TAP_OK(parse(&o, err, sizeof err, 11, a6) < 0 && strstr(err, "given twice"), "twice: %s", err);
    cb_options_fini(&o);
    const char *a7[] = {BASE,    "--network", "allow:api.example", "--secret", "K@api.example",
                        "--env", "K=v"};
    TAP_OK(parse(&o, err, sizeof err, 11, a7) < 0 && strstr(err, "--env would put the value"),
           "--env of the same name: %s", err);
    cb_options_fini(&o);
    const char *a8[] = {BASE,        "--network",     "allow:api.example",
                        "--secret",  "K@api.example", "--network-upstream-ca",
                        "/etc/hosts"};
    TAP_OK(parse(&o, err, sizeof err, 11, a8) < 0 && strstr(err, "/etc/hosts: no certificate"),
           "an upstream CA without a certificate: %s", err);
    cb_options_fini(&o);
    test_upstream_ca();
    files_remove();
    TAP_DONE();
}
