/*
 * netctl.c - the proxy's control socket, and the kernel's network requests
 * relayed to it (docs/RUNNER_PROTOCOL.md section 2).
 *
 * The kernel writes requests on the report socket, one datagram each:
 *
 *   net SEQ policy SPEC   the allowlist becomes SPEC (allow:'s grammar)
 *   net SEQ stats         what each host cost so far
 *
 * and gets report datagrams back: "net SEQ ok closed=N" or "net SEQ error
 * WHY" for a policy, "net SEQ host KEY CONNS UP DOWN REFUSED" lines then
 * "net SEQ end" for stats.  The launcher keeps the allowlist in force, so a
 * proxy restarted after a crash enforces the same one, never the wider one
 * it started with.  Every exchange with the proxy waits at most
 * CB_PROXY_CTL_MS.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/util.h"
#include "launcher/netproxy_priv.h"
#include "launcher/report.h"

#define S_SEQ_MAX 24 /* digits of a request's sequence number */

long cb_np_call(cb_netproxy_t *np, const char *req, const int *fds, size_t n_fds, char *reply,
                size_t cap, char *why, size_t why_len) {
    if (np->ctl < 0 || np->pid <= 0) {
        cb_fmt_why(why, why_len, "the egress proxy is not running");
        return -1;
    }
    char stale[CB_PROXY_CA_PEM_MAX + 8];
    while (recv(np->ctl, stale, sizeof stale, MSG_DONTWAIT) > 0) {
        /* an answer that came too late, or a restarted proxy's CA: dropped */
    }
    if (cb_send_with_fds(np->ctl, req, strlen(req), fds, n_fds) < 0) {
        cb_fmt_why(why, why_len, "the egress proxy's control socket: %s", strerror(errno));
        return -1;
    }
    struct pollfd pf = {.fd = np->ctl, .events = POLLIN};
    int64_t end = cb_now_ms() + CB_PROXY_CTL_MS;
    for (;;) {
        int64_t left = end - cb_now_ms();
        int r = left > 0 ? poll(&pf, 1, (int) left) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            cb_fmt_why(why, why_len, "the egress proxy did not answer within %d ms",
                       CB_PROXY_CTL_MS);
            return -1;
        }
        ssize_t n = recv(np->ctl, reply, cap - 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
            cb_fmt_why(why, why_len, "the egress proxy closed its control socket");
            return -1;
        }
        reply[n] = '\0';
        if (strncmp(reply, "ca ", 3) == 0) continue; /* a restarted proxy's CA */
        return (long) n;
    }
}

int cb_np_send_listeners(cb_netproxy_t *np, char *why, size_t why_len) {
    int fds[CB_PROXY_LISTENERS + CB_PROXY_FORWARDS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < np->n_listen; i++)
        fds[n++] = np->listen[i];
    for (size_t i = 0; i < np->n_fwd_fd; i++)
        fds[n++] = np->fwd_fd[i];
    char req[64], reply[CB_PROXY_ERR_MAX];
    (void) snprintf(req, sizeof req, "listen %zu %zu", np->n_listen, np->n_fwd_fd);
    if (cb_np_call(np, req, fds, n, reply, sizeof reply, why, why_len) < 0) return -1;
    if (strcmp(reply, "ok") != 0) {
        cb_fmt_why(why, why_len, "the egress proxy refused its listeners: %s", reply);
        return -1;
    }
    np->listening = true;
    return 0;
}

/* A policy request: the proxy applies it, we remember it. */
static void s_policy(cb_netproxy_t *np, const char *seq, const char *spec) {
    char reply[CB_PROXY_ERR_MAX], why[CB_PROXY_ERR_MAX];
    if (strlen(spec) > CB_PROXY_SPEC_MAX) {
        (void) cb_report("net %s error the allowlist is longer than %d bytes", seq,
                         CB_PROXY_SPEC_MAX);
        return;
    }
    char req[CB_PROXY_SPEC_MAX + 16];
    (void) snprintf(req, sizeof req, "policy %s", spec);
    if (cb_np_call(np, req, NULL, 0, reply, sizeof reply, why, sizeof why) < 0) {
        (void) cb_report("net %s error %s", seq, why);
        return;
    }
    if (strncmp(reply, "ok", 2) == 0) {
        (void) snprintf(np->allow_now, sizeof np->allow_now, "%s", spec);
        LOG_I("network policy now: allow:%s (%s)", spec, reply);
    }
    (void) cb_report("net %s %s", seq, reply);
}

static void s_stats(cb_netproxy_t *np, const char *seq) {
    static char reply[CB_PROXY_CTL_MAX + 1];
    char why[CB_PROXY_ERR_MAX];
    long n = cb_np_call(np, "stats", NULL, 0, reply, sizeof reply, why, sizeof why);
    if (n >= 0 && strncmp(reply, "stats\n", 6) != 0)
        (void) snprintf(why, sizeof why, "the egress proxy answered: %.200s", reply);
    if (n < 0 || strncmp(reply, "stats\n", 6) != 0) {
        (void) cb_report("net %s error %s", seq, why);
        return;
    }
    for (char *line = reply + 6; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (*line) (void) cb_report("net %s host %s", seq, line);
        if (nl == NULL) break;
        line = nl + 1;
    }
    (void) cb_report("net %s end", seq);
}

void cb_netproxy_kernel_line(cb_netproxy_t *np, const char *buf, size_t r) {
    char seq[S_SEQ_MAX + 1] = "?";
    const char *p = buf + 4;
    size_t sl = strspn(p, "0123456789");
    if (strncmp(buf, "net ", 4) != 0 || sl == 0 || sl > S_SEQ_MAX || p[sl] != ' ' ||
        strlen(buf) != r) {
        LOG_W("a request from the kernel that is not 'net SEQ ...': dropped");
        return;
    }
    memcpy(seq, p, sl);
    seq[sl] = '\0';
    const char *cmd = p + sl + 1;
    if (np == NULL) {
        (void) cb_report("net %s error this sandbox has no egress proxy (start the kernel with "
                         "--network allow:...)",
                         seq);
    } else if (strncmp(cmd, "policy ", 7) == 0) {
        s_policy(np, seq, cmd + 7);
    } else if (strcmp(cmd, "stats") == 0) {
        s_stats(np, seq);
    } else {
        (void) cb_report("net %s error unknown request", seq);
    }
}
