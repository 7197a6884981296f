/*
 * netctl.c - network requests to the launcher (see netctl.h).  The answer
 * is parsed within its bounds: the launcher is trusted, but its lines are
 * still checked for shape, as every input of the kernel is.
 */
#include "kernel/netctl.h"

#include "isolate/log.h"
#include "isolate/names.h"
#include "launcher/netproxy_limits.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static long long s_seq; /* the last request's number */

/* Sends req and waits for its answer: the first line, NULL with why. */
static const char *s_call(cb_launch_t *l, const char *req, char *why, size_t why_len) {
    if (l == NULL || l->rep_fd < 0) {
        snprintf(why, why_len, "the sandbox is not running");
        return NULL;
    }
    char msg[CB_PROXY_SPEC_MAX + 64];
    l->net_seq = ++s_seq;
    l->net_len = 0;
    l->net_done = false;
    int n = snprintf(msg, sizeof msg, "net %lld %s", l->net_seq, req);
    if (n < 0 || (size_t) n >= sizeof msg) {
        snprintf(why, why_len, "the request is too long");
        return NULL;
    }
    if (send(l->rep_fd, msg, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
        snprintf(why, why_len, "the launcher does not take requests: %s", strerror(errno));
        return NULL;
    }
    int64_t end = cb_now_ms() + CB_NETCTL_MS;
    while (!l->net_done) {
        int64_t left = end - cb_now_ms();
        struct pollfd pf = {.fd = l->rep_fd, .events = POLLIN};
        int r = left > 0 ? poll(&pf, 1, (int) left) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(why, why_len, "the launcher did not answer within %d ms", CB_NETCTL_MS);
            return NULL;
        }
        if (cb_launch_read_reports(l) < 0 && !l->net_done) {
            snprintf(why, why_len, "the launcher ended");
            return NULL;
        }
    }
    if (l->net_len == 0) l->net_buf[0] = '\0'; /* "end" alone: no lines */
    return l->net_buf;
}

int cb_netctl_policy(cb_launch_t *l, const char *spec, long *closed, char *why, size_t why_len) {
    char req[CB_PROXY_SPEC_MAX + 16];
    snprintf(req, sizeof req, "policy %s", spec);
    const char *a = s_call(l, req, why, why_len);
    if (a == NULL) return -1;
    if (strncmp(a, "error ", 6) == 0) {
        snprintf(why, why_len, "%s", a + 6);
        return -1;
    }
    const char *c = strstr(a, "closed=");
    *closed = c ? strtol(c + 7, NULL, 10) : 0;
    return strncmp(a, "ok", 2) == 0 ? 0 : (snprintf(why, why_len, "%.200s", a), -1);
}

json_t *cb_netctl_stats(cb_launch_t *l, char *why, size_t why_len) {
    const char *a = s_call(l, "stats", why, why_len);
    if (a == NULL) return NULL;
    if (strncmp(a, "error ", 6) == 0) {
        snprintf(why, why_len, "%s", a + 6);
        return NULL;
    }
    json_t *out = json_object();
    for (size_t off = 0; out && off < l->net_len;) {
        const char *line = l->net_buf + off;
        off += strlen(line) + 1;
        char key[CB_PROXY_NAME_MAX + 16];
        uint64_t v[4];
        if (sscanf(line, "host %268s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, key, &v[0],
                   &v[1], &v[2], &v[3]) != 5) {
            LOG_W("network stats: a line of the wrong shape: dropped");
            continue;
        }
        /* the host is the sandbox's: a refused one may be any bytes, which
         * jansson would drop as a key that is not UTF-8 (and its count with it) */
        char shown[sizeof key * CB_NAMES_ESCAPE_FACTOR];
        (void) cb_names_escape(key, strlen(key), shown, sizeof shown, false);
        json_object_set_new(out, shown,
                            json_pack("{s:I, s:I, s:I, s:I}", "connections", (json_int_t) v[0],
                                      "bytes_up", (json_int_t) v[1], "bytes_down",
                                      (json_int_t) v[2], "refused", (json_int_t) v[3]));
    }
    return out;
}
