/*
 * netsecrets.c - the launcher's part of `--secret` (see netsecrets.h).
 *
 * Values are read here once, put in a table that only the proxy's pipe
 * sees, and wiped when the proxy is no longer restarted.  A value the proxy
 * could not put in a header (control bytes, non-ASCII, longer than
 * CB_PROXY_SECRET_VALUE_MAX) is refused with its name, never echoed.
 */
#include "launcher/netsecrets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "isolate/log.h"
#include "isolate/util.h"
#include "launcher/flags.h"
#include "launcher/netrules.h"

#define S_CA_TMPFS_SLACK_KB 16 /* the CA tmpfs: the files plus this */

/* The system CA bundle, where Debian, Fedora and Alpine keep it. */
static const char *const s_bundles[] = {"/etc/ssl/certs/ca-certificates.crt",
                                        "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"};

int cb_secret_spec_parse(const char *v, cb_secret_spec_t *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    const char *at = strchr(v, '@');
    size_t nl = at ? (size_t) (at - v) : 0;
    char buf[CB_PROXY_SECRET_NAME_MAX + 1];
    if (at == NULL || nl == 0 || nl > CB_PROXY_SECRET_NAME_MAX || at[1] == '\0') {
        (void) snprintf(why, why_len, "'%.80s' is not NAME@HOST[,HOST...]", v);
        return -1;
    }
    memcpy(buf, v, nl);
    buf[nl] = '\0';
    if (cb_flags_env_check(buf, why, why_len) < 0) return -1;
    memcpy(out->name, buf, nl + 1);
    for (const char *h = at + 1;;) {
        const char *comma = strchr(h, ',');
        size_t hl = comma ? (size_t) (comma - h) : strlen(h);
        bool is_ip = false;
        cb_ipaddr_t ip;
        if (out->n_hosts >= CB_PROXY_SECRET_HOSTS_MAX) {
            (void) snprintf(why, why_len, "%s: more than %d hosts", out->name,
                            CB_PROXY_SECRET_HOSTS_MAX);
            return -1;
        }
        char *dst = out->hosts[out->n_hosts];
        if (cb_netrules_norm_host(h, hl, dst, sizeof out->hosts[0], &is_ip, &ip) < 0 || is_ip ||
            strcmp(dst, "localhost") == 0) {
            (void) snprintf(why, why_len,
                            "%s: '%.*s' is not a host name (addresses and localhost cannot carry "
                            "a secret: pin a name with --network-resolve NAME=ADDR)",
                            out->name, (int) hl, h);
            return -1;
        }
        out->n_hosts++;
        if (comma == NULL) break;
        h = comma + 1;
    }
    return 0;
}

/* Does a rule of r name host (any port)? */
static bool s_listed(const cb_netrules_t *r, const char *host) {
    for (size_t i = 0; i < r->n_rules; i++) {
        const cb_netrule_t *ru = &r->rules[i];
        uint16_t port = ru->port ? ru->port : 443;
        if (!ru->is_ip && cb_netrules_match(r, host, false, NULL, port) >= 0) return true;
    }
    return false;
}

int cb_secret_specs_check(const char *allow, const char *const *specs, size_t n,
                          const char *const *env, size_t n_env, char *why, size_t why_len) {
    if (n == 0) return 0;
    if (allow == NULL) {
        (void) snprintf(why, why_len, "--secret needs --network allow: listing its hosts");
        return -1;
    }
    if (n > CB_PROXY_SECRETS_MAX) {
        (void) snprintf(why, why_len, "more than %d --secret flags", CB_PROXY_SECRETS_MAX);
        return -1;
    }
    static cb_netrules_t r; /* large: off the stack */
    static cb_secret_spec_t sp[CB_PROXY_SECRETS_MAX];
    cb_netrules_init(&r);
    char rwhy[CB_FLAG_ERR_MAX];
    if (cb_netrules_parse(&r, allow, rwhy, sizeof rwhy) < 0) {
        (void) snprintf(why, why_len, "--network allow: %s", rwhy);
        return -1;
    }
    size_t bound = 0;
    for (size_t i = 0; i < n; i++) {
        if (cb_secret_spec_parse(specs[i], &sp[i], why, why_len) < 0) return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(sp[j].name, sp[i].name) == 0) {
                (void) snprintf(why, why_len, "--secret %s is given twice", sp[i].name);
                return -1;
            }
        size_t nl = strlen(sp[i].name);
        for (size_t j = 0; j < n_env; j++)
            if (strncmp(env[j], sp[i].name, nl) == 0 && (env[j][nl] == '\0' || env[j][nl] == '=')) {
                (void) snprintf(why, why_len,
                                "--env %s and --secret %s: --env would put the value in the "
                                "sandbox; keep only --secret",
                                sp[i].name, sp[i].name);
                return -1;
            }
        for (size_t h = 0; h < sp[i].n_hosts; h++) {
            if (!s_listed(&r, sp[i].hosts[h])) {
                (void) snprintf(why, why_len,
                                "--secret %s: %s is not in the allowlist (add it to --network "
                                "allow:)",
                                sp[i].name, sp[i].hosts[h]);
                return -1;
            }
            bool seen = false;
            for (size_t j = 0; j <= i && !seen; j++)
                for (size_t k = 0; k < (j == i ? h : sp[j].n_hosts) && !seen; k++)
                    seen = strcmp(sp[j].hosts[k], sp[i].hosts[h]) == 0;
            if (!seen && ++bound > CB_PROXY_BOUND_HOSTS_MAX) {
                (void) snprintf(why, why_len, "secrets for more than %d hosts",
                                CB_PROXY_BOUND_HOSTS_MAX);
                return -1;
            }
        }
    }
    return 0;
}

int cb_netenv_add(cb_exec_plan_t *p, const char *name, const char *value) {
    size_t n = 0;
    while (n < CB_ENV_MAX && p->envp[n] != NULL)
        n++;
    if (n >= CB_ENV_MAX) {
        errno = E2BIG;
        return -1;
    }
    int w = snprintf(p->env_buf[n], CB_ENV_ENTRY_MAX, "%s=%s", name, value);
    if (w < 0 || (size_t) w >= CB_ENV_ENTRY_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    p->envp[n] = p->env_buf[n];
    p->envp[n + 1] = NULL;
    return 0;
}

static int s_placeholder(char *out, size_t len) {
    unsigned char rnd[CB_PROXY_PLACEHOLDER_HEX / 2];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t r = getrandom(rnd + got, sizeof rnd - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        got += (size_t) r;
    }
    size_t w = (size_t) snprintf(out, len, "%s", CB_PROXY_PLACEHOLDER_PREFIX);
    for (size_t i = 0; i < sizeof rnd && w + 2 < len; i++, w += 2)
        (void) snprintf(out + w, len - w, "%02x", rnd[i]);
    return 0;
}

/* Was host bound by one of the first i specs (checked already)? */
static bool s_bound_before(const cb_netsecrets_t *s, const char *const *specs, size_t i,
                           const char *host) {
    (void) s;
    for (size_t j = 0; j < i; j++) {
        cb_secret_spec_t sp;
        char why[8];
        if (cb_secret_spec_parse(specs[j], &sp, why, sizeof why) < 0) continue;
        for (size_t h = 0; h < sp.n_hosts; h++)
            if (strcmp(sp.hosts[h], host) == 0) return true;
    }
    return false;
}

int cb_netsecrets_load(cb_netsecrets_t *s, const char *const *specs, size_t n, pid_t parent,
                       char *why, size_t why_len) {
    memset(s, 0, sizeof *s);
    if (n == 0) return 0;
    size_t blk_len = 0;
    cb_autofree char *blk = cb_env_read(parent, &blk_len);
    if (blk == NULL) {
        (void) snprintf(why, why_len, "--secret: cannot read the kernel's environment: %s",
                        strerror(errno));
        return -1;
    }
    if ((s->table = malloc(CB_PROXY_SECRETS_BYTES_MAX)) == NULL) {
        (void) snprintf(why, why_len, "out of memory");
        return -1;
    }
    int rc = -1;
    for (size_t i = 0; i < n && i < CB_PROXY_SECRETS_MAX; i++) {
        cb_secret_spec_t sp;
        if (cb_secret_spec_parse(specs[i], &sp, why, why_len) < 0) goto out;
        const char *v = cb_env_lookup(blk, blk_len, sp.name, strlen(sp.name));
        size_t vl = v ? strlen(v) : 0;
        bool printable = vl > 0;
        for (size_t k = 0; k < vl && printable; k++)
            printable = (unsigned char) v[k] >= 0x20 && (unsigned char) v[k] <= 0x7e;
        if (v == NULL || vl == 0) {
            (void) snprintf(why, why_len,
                            "--secret %s: %s is not set in the kernel's environment (set it "
                            "where Jupyter or the client starts the kernel)",
                            sp.name, sp.name);
            goto out;
        }
        if (vl > CB_PROXY_SECRET_VALUE_MAX || !printable) {
            (void) snprintf(why, why_len,
                            "--secret %s: its value must be 1 to %d printable ASCII characters",
                            sp.name, CB_PROXY_SECRET_VALUE_MAX);
            goto out;
        }
        cb_secret_env_t *e = &s->env[s->n];
        (void) snprintf(e->name, sizeof e->name, "%s", sp.name);
        if (s_placeholder(e->placeholder, sizeof e->placeholder) < 0) {
            (void) snprintf(why, why_len, "getrandom: %s", strerror(errno));
            goto out;
        }
        char hosts[CB_PROXY_SECRET_HOSTS_MAX * (CB_PROXY_NAME_MAX + 1)] = "";
        for (size_t h = 0; h < sp.n_hosts; h++) {
            size_t used = strlen(hosts);
            (void) snprintf(hosts + used, sizeof hosts - used, "%s%s", h ? "," : "", sp.hosts[h]);
            if (s_bound_before(s, specs, i, sp.hosts[h])) continue;
            used = strlen(s->hosts);
            (void) snprintf(s->hosts + used, sizeof s->hosts - used, "%s%s", used ? ", " : "",
                            sp.hosts[h]);
        }
        int w = snprintf(s->table + s->table_len, CB_PROXY_SECRETS_BYTES_MAX - s->table_len,
                         "%s\t%s\t%s\t%s\n", e->name, e->placeholder, hosts, v);
        if (w < 0 || (size_t) w >= CB_PROXY_SECRETS_BYTES_MAX - s->table_len) {
            (void) snprintf(why, why_len, "--secret: the secrets are too long in all");
            goto out;
        }
        s->table_len += (size_t) w;
        s->n++;
    }
    rc = 0;
out:
    explicit_bzero(blk, blk_len);
    if (rc < 0) cb_netsecrets_wipe(s);
    return rc;
}

void cb_netsecrets_wipe(cb_netsecrets_t *s) {
    if (s->table != NULL) {
        explicit_bzero(s->table, CB_PROXY_SECRETS_BYTES_MAX);
        free(s->table);
    }
    s->table = NULL;
    s->table_len = 0;
}

/* Reads the regular file at path (at most max bytes) into a new buffer.
 * NULL with errno. */
static char *s_slurp(const char *path, size_t max, size_t *len) {
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) return NULL;
    if (!S_ISREG(st.st_mode) || (size_t) st.st_size > max) {
        errno = S_ISREG(st.st_mode) ? E2BIG : EINVAL;
        return NULL;
    }
    cb_autofree char *buf = malloc((size_t) st.st_size + 1);
    if (buf == NULL) return NULL;
    *len = 0;
    while (*len < (size_t) st.st_size) { /* a file that grows meanwhile is cut at its size */
        ssize_t r = read(fd, buf + *len, (size_t) st.st_size - *len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return NULL;
        if (r == 0) break;
        *len += (size_t) r;
    }
    return steal_pointer(&buf);
}

/* Appends the regular file at path (at most max - *len bytes) to buf. */
static int s_append_file(const char *path, char *buf, size_t *len, size_t max) {
    size_t n = 0;
    cb_autofree char *data = s_slurp(path, max - *len - 1, &n);
    if (data == NULL) return -1;
    memcpy(buf + *len, data, n);
    *len += n;
    if (*len > 0 && buf[*len - 1] != '\n') buf[(*len)++] = '\n';
    return 0;
}

/* The certificates of the PEM file at path, written anew as PEM to out:
 * only its CERTIFICATE blocks, so that a key kept in the same file (a
 * combined cert+key PEM) never reaches the sandbox's bundle.  *n: how
 * many.  0 ok, -1 with why (unreadable, malformed, no certificate). */
static int s_certs(const char *path, BIO *out, size_t *n, char *why, size_t why_len) {
    *n = 0;
    size_t len = 0;
    cb_autofree char *data = s_slurp(path, CB_PROXY_BUNDLE_MAX, &len);
    if (data == NULL) {
        (void) snprintf(why, why_len, "--network-upstream-ca %s: %s", path, strerror(errno));
        return -1;
    }
    BIO *in = BIO_new_mem_buf(data, (int) len); /* len <= CB_PROXY_BUNDLE_MAX */
    int rc = in != NULL ? 0 : -1;
    ERR_clear_error();
    for (X509 *x; rc == 0 && (x = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL; (*n)++) {
        if (out != NULL && PEM_write_bio_X509(out, x) != 1) rc = -1;
        X509_free(x);
    }
    /* the loop ends at the end of the file (no further PEM start line), or
     * at a block that does not parse */
    unsigned long e = ERR_peek_last_error();
    bool at_end = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
    ERR_clear_error();
    BIO_free(in);
    OPENSSL_cleanse(data, len); /* it may hold a key */
    if (rc < 0) {
        (void) snprintf(why, why_len, "--network-upstream-ca %s: out of memory", path);
        return -1;
    }
    if (!at_end) {
        (void) snprintf(why, why_len, "--network-upstream-ca %s: a malformed certificate (PEM)",
                        path);
        return -1;
    }
    if (*n == 0) {
        (void) snprintf(why, why_len,
                        "--network-upstream-ca %s: no certificate in it (PEM, -----BEGIN "
                        "CERTIFICATE-----)",
                        path);
        return -1;
    }
    return 0;
}

int cb_netsecrets_ca_check(const char *path, char *why, size_t why_len) {
    size_t n = 0;
    return s_certs(path, NULL, &n, why, why_len);
}

/* Appends the certificates of path (s_certs) to buf. */
static int s_append_certs(const char *path, char *buf, size_t *len, size_t max, char *why,
                          size_t why_len) {
    BIO *mem = BIO_new(BIO_s_mem());
    size_t n = 0;
    if (mem == NULL) {
        (void) snprintf(why, why_len, "out of memory");
        return -1;
    }
    int rc = s_certs(path, mem, &n, why, why_len);
    char *pem = NULL;
    long pl = BIO_get_mem_data(mem, &pem);
    if (rc == 0 && (pl < 0 || (size_t) pl > max - *len)) {
        (void) snprintf(why, why_len, "the CA bundle is larger than %d bytes", CB_PROXY_BUNDLE_MAX);
        rc = -1;
    }
    if (rc == 0) {
        memcpy(buf + *len, pem, (size_t) pl);
        *len += (size_t) pl;
    }
    BIO_free(mem);
    return rc;
}

static int s_blob(cb_mount_plan_t *m, const char *path, const char *data, size_t len) {
    cb_mount_op_t *op = cb_mount_plan_add(m, CB_MNT_BLOB, path);
    char *copy = malloc(len ? len : 1);
    if (op == NULL || copy == NULL) {
        free(copy);
        return -1;
    }
    memcpy(copy, data, len);
    op->data = copy;
    op->data_len = len;
    op->mode = 0644;
    (void) clock_gettime(CLOCK_REALTIME, &op->mtime);
    return 0;
}

int cb_netsecrets_plan(const cb_netsecrets_t *s, const char *ca, size_t ca_len,
                       const char *upstream_ca, cb_mount_plan_t *m, cb_exec_plan_t *e, char *why,
                       size_t why_len) {
    if (s->n == 0) return 0;
    cb_autofree char *bundle = malloc(CB_PROXY_BUNDLE_MAX);
    size_t len = 0;
    if (bundle == NULL) {
        (void) snprintf(why, why_len, "out of memory");
        return -1;
    }
    const char *sys = NULL;
    for (size_t i = 0; i < sizeof s_bundles / sizeof s_bundles[0] && sys == NULL; i++)
        if (s_append_file(s_bundles[i], bundle, &len, CB_PROXY_BUNDLE_MAX) == 0) sys = s_bundles[i];
    if (sys == NULL)
        LOG_W("--secret: no system CA bundle found: the sandbox trusts the session CA only");
    if (upstream_ca != NULL &&
        s_append_certs(upstream_ca, bundle, &len, CB_PROXY_BUNDLE_MAX, why, why_len) < 0)
        return -1;
    if (ca_len > CB_PROXY_BUNDLE_MAX - len) {
        (void) snprintf(why, why_len, "the CA bundle is larger than %d bytes", CB_PROXY_BUNDLE_MAX);
        return -1;
    }
    memcpy(bundle + len, ca, ca_len);
    len += ca_len;
    char opts[64];
    (void) snprintf(opts, sizeof opts, "mode=0755,size=%zuk,nr_inodes=8",
                    (len + ca_len) / 1024 + S_CA_TMPFS_SLACK_KB);
    static const char *const vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT",
                                       "CURL_CA_BUNDLE"};
    if (cb_mount_plan_tmpfs(m, CB_PROXY_CA_DIR, opts) < 0 ||
        s_blob(m, CB_PROXY_CA_BUNDLE, bundle, len) < 0 ||
        s_blob(m, CB_PROXY_CA_SESSION, ca, ca_len) < 0 ||
        cb_mount_plan_rdonly(m, CB_PROXY_CA_DIR) < 0)
        goto fail;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (cb_netenv_add(e, vars[i], CB_PROXY_CA_BUNDLE) < 0) goto fail;
    if (cb_netenv_add(e, "NODE_EXTRA_CA_CERTS", CB_PROXY_CA_SESSION) < 0) goto fail;
    for (size_t i = 0; i < s->n; i++)
        if (cb_netenv_add(e, s->env[i].name, s->env[i].placeholder) < 0) goto fail;
    return 0;
fail:
    (void) snprintf(why, why_len, "planning the secrets' CA bundle and variables: %s",
                    strerror(errno));
    return -1;
}
