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
 *   cellblock-proxy --listen-fd N... --allow SPEC [--resolve NAME=ADDR]...
 *                   [--max-conns N] [--max-total N] [--max-bytes BYTES]
 *                   [--idle-timeout-ms MS] [--head-timeout-ms MS]
 *                   [--connect-timeout-ms MS] [--resolve-timeout-ms MS]
 *                   [--dns-server IP[:PORT],...] [--ready-fd N] [--log-level L]
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
            if (s_num(a, v, 0, 65535, &n) < 0) return -1;
            if (cfg->n_listen >= CB_PROXY_LISTENERS || fstat((int) n, &st) < 0 ||
                !S_ISSOCK(st.st_mode)) {
                s_fail("--listen-fd %ld: not a socket (or more than %d)", n, CB_PROXY_LISTENERS);
                return -1;
            }
            cfg->listen_fds[cfg->n_listen++] = (int) n;
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
            if (s_num(a, v, 1, 1L << 30, &cfg->max_total) < 0) return -1;
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
        } else if (strcmp(a, "--resolve-timeout-ms") == 0) {
            if (s_num(a, v, 1, CB_PROXY_TIMEOUT_S_LIMIT * 1000L, &cfg->resolve_timeout_ms) < 0)
                return -1;
        } else if (strcmp(a, "--dns-server") == 0) {
            cfg->dns_servers = v;
        } else if (strcmp(a, "--ready-fd") == 0) {
            if (s_num(a, v, 0, 65535, &n) < 0) return -1;
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
    if (!have_allow || cfg->n_listen == 0) {
        s_fail("--allow SPEC and at least one --listen-fd are required");
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
    return S_EXIT_SETUP;
}
