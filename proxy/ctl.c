/*
 * ctl.c - the launcher's control socket (SOCK_SEQPACKET, one request per
 * datagram, one answer each), and what each host cost.
 *
 *   listen P F + SCM_RIGHTS  the proxy's own listeners (P) and the forward
 *                            ones (F), once init made them   -> ok | error WHY
 *   policy SPEC              replaces the allowlist (pins stay); connections
 *                            it no longer allows are closed  -> ok closed=N | error WHY
 *   stats                    -> stats, then one line per host:
 *                               HOST:PORT CONNECTIONS BYTES_UP BYTES_DOWN REFUSED
 *
 * The launcher is trusted, but its requests are still parsed within their
 * length.  Per-host counters grow from the start (the kernel takes
 * differences per cell); at most CB_PROXY_HOSTS_MAX hosts are counted apart,
 * the rest together as "(other)".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/proxy_priv.h"

#define S_OTHER "(other)"

int cb_px_host_slot(cb_proxy_t *p, const char *host, uint16_t port) {
    char key[sizeof p->hosts[0].key];
    bool v6 = strchr(host, ':') != NULL;
    (void) snprintf(key, sizeof key, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
                    (unsigned) port);
    int free_slot = -1;
    for (int i = 0; i < CB_PROXY_HOSTS_MAX - 1; i++) {
        if (strcmp(p->hosts[i].key, key) == 0) return i;
        if (free_slot < 0 && p->hosts[i].key[0] == '\0') free_slot = i;
    }
    int last = CB_PROXY_HOSTS_MAX - 1;
    if (free_slot < 0) {
        (void) snprintf(p->hosts[last].key, sizeof p->hosts[last].key, "%s", S_OTHER);
        return last;
    }
    (void) snprintf(p->hosts[free_slot].key, sizeof p->hosts[free_slot].key, "%s", key);
    return free_slot;
}

static void s_answer(cb_proxy_t *p, const char *text, size_t len) {
    if (send(p->cfg.ctl_fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        PLOG_W("proxy: answering the launcher");
}

static void s_answerf(cb_proxy_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_answerf(cb_proxy_t *p, const char *fmt, ...) {
    char buf[CB_PROXY_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s_answer(p, buf, n < 0 ? 0 : (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1);
}

/* Is the loopback pair one the sandbox has a listener for? */
static bool s_has_forward(const cb_proxy_t *p, const cb_lofwd_t *f) {
    for (size_t i = 0; i < p->cfg.n_fwd; i++) {
        const struct sockaddr_storage *to = &p->fwd_to[i];
        cb_ipaddr_t ip;
        cb_ipaddr_from_sa(&ip, (const struct sockaddr *) to);
        uint16_t port = ntohs(to->ss_family == AF_INET
                                  ? ((const struct sockaddr_in *) (const void *) to)->sin_port
                                  : ((const struct sockaddr_in6 *) (const void *) to)->sin6_port);
        if (port == f->port && cb_ipaddr_equal(&ip, &f->ip)) return true;
    }
    return false;
}

static void s_policy(cb_proxy_t *p, const char *spec) {
    char why[CB_PROXY_ERR_MAX];
    cb_netrules_t *nr = malloc(sizeof *nr);
    if (nr == NULL) {
        s_answerf(p, "error out of memory");
        return;
    }
    cb_netrules_init(nr);
    if (cb_netrules_parse(nr, spec, why, sizeof why) < 0) {
        s_answerf(p, "error %s", why);
        free(nr);
        return;
    }
    cb_lofwd_t fw[CB_PROXY_FORWARDS_MAX];
    size_t nf = cb_netrules_loopback(nr, fw, CB_PROXY_FORWARDS_MAX); /* parse checked the count */
    for (size_t i = 0; i < nf; i++)
        if (!s_has_forward(p, &fw[i])) {
            char a[INET6_ADDRSTRLEN];
            cb_ipaddr_str(&fw[i].ip, a, sizeof a);
            bool v6 = fw[i].ip.family == AF_INET6;
            s_answerf(p,
                      "error %s%s%s:%u is a loopback pair the sandbox was not started with (its "
                      "listener inside is made at start); name the host's loopback instead: "
                      "--network-resolve NAME=%s with allow:NAME:%u",
                      v6 ? "[" : "", a, v6 ? "]" : "", (unsigned) fw[i].port, a,
                      (unsigned) fw[i].port);
            free(nr);
            return;
        }
    memcpy(nr->pins, p->cfg.rules.pins, sizeof nr->pins); /* the operator's pins stay */
    nr->n_pins = p->cfg.rules.n_pins;
    p->cfg.rules = *nr;
    free(nr);
    size_t closed = 0;
    for (size_t s = 0; s < (size_t) p->cfg.max_conns; s++) {
        cb_pconn_t *c = p->slots[s];
        if (c == NULL || c->rule < 0) continue; /* not routed (yet): its next head is checked */
        c->rule = c->forward ? cb_netrules_match_loopback(&p->cfg.rules, &c->ip, c->port)
                             : cb_netrules_match(&p->cfg.rules, c->host, c->is_ip, &c->ip, c->port);
        if (c->rule >= 0) continue;
        char t[CB_PROXY_NAME_MAX + 16];
        cb_px_target(c, t, sizeof t);
        PX_LOG(p, CB_LOG_INFO, "proxy: #%llu %s is not allowed by the new policy: closing",
               (unsigned long long) c->id, t);
        cb_px_close(p, c);
        closed++;
    }
    char desc[CB_PROXY_ERR_MAX / 2];
    cb_netrules_describe(&p->cfg.rules, desc, sizeof desc);
    LOG_I("proxy: new policy: allow %s (%zu connection%s closed)", desc, closed,
          closed == 1 ? "" : "s");
    s_answerf(p, "ok closed=%zu", closed);
}

static void s_stats(cb_proxy_t *p) {
    static char out[CB_PROXY_CTL_MAX];
    size_t used = (size_t) snprintf(out, sizeof out, "stats\n");
    for (size_t i = 0; i < CB_PROXY_HOSTS_MAX; i++) {
        const cb_phost_t *h = &p->hosts[i];
        if (h->key[0] == '\0') continue;
        int w = snprintf(out + used, sizeof out - used, "%s %llu %llu %llu %llu\n", h->key,
                         (unsigned long long) h->conns, (unsigned long long) h->up,
                         (unsigned long long) h->down, (unsigned long long) h->refused);
        if (w < 0 || (size_t) w >= sizeof out - used) break; /* cannot happen: sized for all */
        used += (size_t) w;
    }
    s_answer(p, out, used);
}

static void s_listen(cb_proxy_t *p, const char *args, int *fds, size_t n_fds) {
    unsigned np = 0, nf = 0;
    char why[CB_PROXY_ERR_MAX] = "a malformed listen request";
    if (sscanf(args, "%u %u", &np, &nf) != 2 || np + nf != n_fds ||
        cb_px_listeners(p, fds, np, fds + np, nf, why, sizeof why) < 0) {
        if (np + nf != n_fds)
            (void) snprintf(why, sizeof why, "listen: %zu fds, not %u + %u", n_fds, np, nf);
        for (size_t i = 0; i < n_fds; i++)
            (void) close(fds[i]);
        s_answerf(p, "error %s", why);
        return;
    }
    LOG_I("proxy: listening for the sandbox (%u proxy listeners, %u loopback pairs)", np, nf);
    s_answerf(p, "ok");
}

void cb_px_ctl(cb_proxy_t *p) {
    static char buf[CB_PROXY_CTL_MAX + 1];
    int fds[CB_PROXY_LISTENERS + CB_PROXY_FORWARDS_MAX];
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof fds)];
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = CB_PROXY_CTL_MAX};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
    ssize_t r = recvmsg(p->cfg.ctl_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) { /* the launcher is gone: so will we be (PDEATHSIG); keep serving till then */
        cb_px_close_fd(&p->cfg.ctl_fd);
        return;
    }
    size_t n_fds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (n_fds < sizeof fds / sizeof fds[0])
                fds[n_fds++] = fd;
            else
                (void) close(fd); /* more than a request carries */
        }
    }
    buf[r] = '\0';
    if (strlen(buf) != (size_t) r) {
        s_answerf(p, "error a NUL byte in the request");
    } else if (strncmp(buf, "listen ", 7) == 0) {
        s_listen(p, buf + 7, fds, n_fds);
        n_fds = 0;
    } else if (strncmp(buf, "policy ", 7) == 0) {
        s_policy(p, buf + 7);
    } else if (strcmp(buf, "stats") == 0) {
        s_stats(p);
    } else {
        s_answerf(p, "error unknown request");
    }
    for (size_t i = 0; i < n_fds; i++)
        (void) close(fds[i]);
}
