/*
 * main.c - cellblock-proxy: the egress proxy of one sandbox started with
 * `--network allow:...` (docs/SECURITY.md "Network by allowlist").
 *
 * The launcher creates the listening sockets inside the sandbox's network
 * namespace (127.0.0.1:3128, [::1]:3128, /run/cellblock/proxy.sock), hands
 * them over as inherited fds, and starts this program on the host side with
 * the allowlist; connections come from the sandbox's loopback and leave from
 * the host.  It confines itself before it accepts anything, closes
 * --ready-fd to say it is up (or writes why it is not), then serves until it
 * is killed: the launcher kills it with the sandbox, and PDEATHSIG covers a
 * launcher that dies.  Its stderr is the launcher's log relay, so every
 * decision lands in the kernel's log.
 *
 *   cellblock-proxy --listen-fd N... [--forward-fd N]... --allow SPEC [--resolve NAME=ADDR]...
 *                   [--max-conns N] [--max-total N] [--max-bytes BYTES]
 *                   [--idle-timeout-ms MS] [--head-timeout-ms MS]
 *                   [--connect-timeout-ms MS] [--resolve-timeout-ms MS] [--tls-timeout-ms MS]
 *                   [--dns-server IP[:PORT],...] [--ready-fd N] [--log-level L]
 *                   [--ctl-fd N] [--secrets-fd N] [--upstream-ca FILE] [--restarted 0|1]
 *
 * --ctl-fd is the launcher's control socket (proxy/ctl.c): the listeners
 * arrive there once the sandbox's init made them, and policy and cost
 * requests later.  --secrets-fd is a pipe with the --secret table, read
 * whole before anything else; with it the proxy makes its session CA and
 * sends the CA's certificate (never its key) on --ctl-fd before it says it
 * is ready.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "isolate/log.h"
#include "proxy/confine.h"
#include "proxy/proxy.h"
#include "isolate/util.h"

#define S_EXIT_USAGE 2 /* bad command line */
#define S_EXIT_SETUP 3 /* could not start */

static int s_ready_fd = -1;

static void s_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void s_fail(const char *fmt, ...) {
    char buf[CB_PROXY_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    LOG_E("proxy: %s", buf);
    if (s_ready_fd >= 0) (void) cb_write_all(s_ready_fd, buf, strlen(buf));
}

static int s_num(const char *opt, const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi) {
        s_fail("%s: '%s' is not an integer in %ld..%ld", opt, v, lo, hi);
        return -1;
    }
    *out = (long) n;
    return 0;
}

static cb_secrets_t s_secrets; /* large: off the stack; wiped before exit */

/* The launcher's table of secrets, read whole from fd (then closed). */
static int s_read_secrets(int fd) {
    static char buf[CB_PROXY_SECRETS_BYTES_MAX + 1];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof buf - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t) r;
        if (got == sizeof buf) break;
    }
    (void) close(fd);
    char why[CB_PROXY_ERR_MAX];
    int rc = got < sizeof buf ? cb_secrets_parse(&s_secrets, buf, got, why, sizeof why) : -1;
    OPENSSL_cleanse(buf, sizeof buf);
    if (rc < 0) s_fail("--secrets-fd: %s", got < sizeof buf ? why : "the table is too long");
    return rc;
}

static int s_parse(int argc, char **argv, cb_proxy_cfg_t *cfg) {
    char why[CB_PROXY_ERR_MAX];
    bool have_allow = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            s_fail("%s: unknown option or missing value", a);
            return -1;
        }
        const char *v = argv[++i];
        long n = 0;
        if (strcmp(a, "--listen-fd") == 0) {
            struct stat st;
            if (s_num(a, v, 0, CB_PROXY_FD_ARG_MAX, &n) < 0) return -1;
            if (cfg->n_listen >= CB_PROXY_LISTENERS || fstat((int) n, &st) < 0 ||
                !S_ISSOCK(st.st_mode)) {
                s_fail("--listen-fd %ld: not a socket (or more than %d)", n, CB_PROXY_LISTENERS);
                return -1;
            }
            cfg->listen_fds[cfg->n_listen++] = (int) n;
        } else if (strcmp(a, "--forward-fd") == 0) {
            struct stat st;
            if (s_num(a, v, 0, CB_PROXY_FD_ARG_MAX, &n) < 0) return -1;
            if (cfg->n_fwd >= CB_PROXY_FORWARDS_MAX || fstat((int) n, &st) < 0 ||
                !S_ISSOCK(st.st_mode)) {
                s_fail("--forward-fd %ld: not a socket (or more than %d)", n,
                       CB_PROXY_FORWARDS_MAX);
                return -1;
            }
            cfg->fwd_fds[cfg->n_fwd++] = (int) n;
        } else if (strcmp(a, "--allow") == 0) {
            if (cb_netrules_parse(&cfg->rules, v, why, sizeof why) < 0) {
                s_fail("--allow: %s", why);
                return -1;
            }
            have_allow = true;
        } else if (strcmp(a, "--resolve") == 0) {
            if (cb_netrules_add_pin(&cfg->rules, v, why, sizeof why) < 0) {
                s_fail("--resolve: %s", why);
                return -1;
            }
        } else if (strcmp(a, "--max-conns") == 0) {
            if (s_num(a, v, 1, CB_PROXY_MAX_CONNS_LIMIT, &cfg->max_conns) < 0) return -1;
        } else if (strcmp(a, "--max-total") == 0) {
            if (s_num(a, v, 1, CB_PROXY_MAX_TOTAL_LIMIT, &cfg->max_total) < 0) return -1;
        } else if (strcmp(a, "--max-bytes") == 0) {
            if (s_num(a, v, 1, CB_PROXY_MAX_MB_LIMIT << 20, &n) < 0) return -1;
            cfg->max_bytes = (uint64_t) n;
        } else if (strcmp(a, "--idle-timeout-ms") == 0) {
            if (s_num(a, v, 1, CB_PROXY_TIMEOUT_S_LIMIT * 1000L, &cfg->idle_timeout_ms) < 0)
                return -1;
        } else if (strcmp(a, "--head-timeout-ms") == 0) {
            if (s_num(a, v, 1, CB_PROXY_TIMEOUT_S_LIMIT * 1000L, &cfg->head_timeout_ms) < 0)
                return -1;
        } else if (strcmp(a, "--connect-timeout-ms") == 0) {
            if (s_num(a, v, 1, CB_PROXY_TIMEOUT_S_LIMIT * 1000L, &cfg->connect_timeout_ms) < 0)
                return -1;
        } else if (strcmp(a, "--tls-timeout-ms") == 0) {
            if (s_num(a, v, 1, CB_PROXY_TIMEOUT_S_LIMIT * 1000L, &cfg->tls_timeout_ms) < 0)
                return -1;
        } else if (strcmp(a, "--resolve-timeout-ms") == 0) {
            if (s_num(a, v, 1, CB_PROXY_TIMEOUT_S_LIMIT * 1000L, &cfg->resolve_timeout_ms) < 0)
                return -1;
        } else if (strcmp(a, "--ctl-fd") == 0) {
            struct stat st;
            if (s_num(a, v, 0, CB_PROXY_FD_ARG_MAX, &n) < 0) return -1;
            if (fstat((int) n, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                s_fail("--ctl-fd %ld: not a socket", n);
                return -1;
            }
            cfg->ctl_fd = (int) n;
        } else if (strcmp(a, "--secrets-fd") == 0) {
            if (s_num(a, v, 0, CB_PROXY_FD_ARG_MAX, &n) < 0 || s_read_secrets((int) n) < 0)
                return -1;
            cfg->secrets = &s_secrets;
        } else if (strcmp(a, "--upstream-ca") == 0) {
            cfg->upstream_ca = v;
        } else if (strcmp(a, "--restarted") == 0) {
            cfg->restarted = strcmp(v, "1") == 0;
        } else if (strcmp(a, "--dns-server") == 0) {
            cfg->dns_servers = v;
        } else if (strcmp(a, "--ready-fd") == 0) {
            if (s_num(a, v, 0, CB_PROXY_FD_ARG_MAX, &n) < 0) return -1;
            s_ready_fd = (int) n;
        } else if (strcmp(a, "--log-level") == 0) {
            if (cb_log_parse_level(v, &cb_log_threshold) < 0) {
                s_fail("--log-level: '%s' is not debug|info|warning|error", v);
                return -1;
            }
        } else {
            s_fail("unknown option '%s'", a);
            return -1;
        }
    }
    if (!have_allow || (cfg->n_listen == 0 && cfg->ctl_fd < 0)) {
        s_fail("--allow SPEC and at least one --listen-fd (or --ctl-fd) are required");
        return -1;
    }
    return 0;
}

static void s_rlimit(int res, rlim_t v) {
    struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
    if (setrlimit(res, &rl) < 0) PLOG_W("proxy: setrlimit(%d)", res);
}

int main(int argc, char **argv) {
    (void) signal(SIGPIPE, SIG_IGN);
    (void) signal(SIGINT, SIG_IGN); /* a terminal's ^C is for the kernel, not us */
    (void) signal(SIGHUP, SIG_IGN);
    cb_log_set_ident("cellblock-proxy");
    /* --ready-fd first, so that argument errors reach the launcher */
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--ready-fd") == 0) s_ready_fd = atoi(argv[i + 1]);
    static cb_proxy_cfg_t cfg; /* large (the rules): off the stack */
    cb_proxy_cfg_default(&cfg);
    if (s_parse(argc, argv, &cfg) < 0) return S_EXIT_USAGE;

    s_rlimit(RLIMIT_NOFILE, (rlim_t) (2 * cfg.max_conns + CB_PROXY_FD_SLACK));
    s_rlimit(RLIMIT_CORE, 0);
#if !defined(__SANITIZE_ADDRESS__)
    s_rlimit(RLIMIT_AS, (rlim_t) CB_PROXY_AS_MB << 20);
#endif
    char why[CB_PROXY_ERR_MAX] = "";
    cb_proxy_t *p = cb_proxy_new(&cfg, why, sizeof why);
    if (p == NULL) {
        s_fail("%s", why);
        return S_EXIT_SETUP;
    }
    int ll = 0;
    if (cb_proxy_confine(&ll, why, sizeof why) < 0) {
        s_fail("confining the proxy: %s", why);
        cb_proxy_destroy(&p);
        return S_EXIT_SETUP;
    }
    char rules[CB_PROXY_ERR_MAX];
    cb_netrules_describe(&cfg.rules, rules, sizeof rules);
    LOG_I("proxy: up (uid %lu, seccomp, %s); allow %s; bounds: %ld connections (%ld per session), "
          "%llu MiB, idle %ld ms, head %ld ms",
          (unsigned long) getuid(), ll > 0 ? "Landlock" : "no Landlock", rules, cfg.max_conns,
          cfg.max_total, (unsigned long long) (cfg.max_bytes >> 20), cfg.idle_timeout_ms,
          cfg.head_timeout_ms);
    size_t pem_len = 0;
    const char *pem = cb_proxy_ca_pem(p, &pem_len);
    if (pem != NULL && cfg.ctl_fd >= 0) {
        /* the session CA's certificate, for the sandbox's trust (its key stays here) */
        char msg[CB_PROXY_CA_PEM_MAX + 8];
        int w = snprintf(msg, sizeof msg, "ca %.*s", (int) pem_len, pem);
        if (w < 0 || (size_t) w >= sizeof msg ||
            send(cfg.ctl_fd, msg, (size_t) w, MSG_NOSIGNAL) != (ssize_t) w) {
            s_fail("sending the session CA to the launcher failed");
            cb_proxy_destroy(&p);
            return S_EXIT_SETUP;
        }
    }
    if (s_ready_fd >= 0) {
        (void) close(s_ready_fd); /* EOF = ready */
        s_ready_fd = -1;
    }
    for (;;) {
        if (cb_proxy_step(p, -1) < 0) {
            PLOG_E("proxy: poll");
            break;
        }
    }
    cb_proxy_destroy(&p);
    cb_secrets_wipe(&s_secrets);
    return S_EXIT_SETUP;
}
