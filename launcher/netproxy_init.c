/*
 * netproxy_init.c - the proxy's listeners, made by the sandbox's init in the
 * sandbox's network namespace (see netproxy.c for why), passed out with
 * SCM_RIGHTS and closed.  Runs between clone and exec: no malloc, no
 * stdio, no logging; errors are errno.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "isolate/cb_limits.h"
#include "isolate/util.h"
#include "launcher/netproxy_priv.h"

_Static_assert(CB_PROXY_LISTENERS + CB_PROXY_FORWARDS_MAX <= CB_SCM_FDS_MAX,
               "the listeners fit one message");

static int s_tcp_listener(const cb_ipaddr_t *ip, uint16_t port) {
    int s = socket(ip->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    int one = 1;
    (void) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (ip->family == AF_INET) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        memcpy(&a.sin_addr, ip->a, 4);
        rc = bind(s, (struct sockaddr *) &a, sizeof a);
    } else {
        (void) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
        memcpy(&a.sin6_addr, ip->a, 16);
        rc = bind(s, (struct sockaddr *) &a, sizeof a);
    }
    if (rc < 0 || listen(s, CB_PROXY_BACKLOG) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

static int s_unix_listener(void) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, CB_PROXY_SOCK_PATH, sizeof CB_PROXY_SOCK_PATH);
    /* 0666: the runner's uid connects; the directory is root's, 0755 */
    if (bind(s, (struct sockaddr *) &a, sizeof a) < 0 || chmod(CB_PROXY_SOCK_PATH, 0666) < 0 ||
        listen(s, CB_PROXY_BACKLOG) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

int cb_netproxy_child_listen(const cb_netproxy_t *np) {
    int fds[CB_PROXY_LISTENERS + CB_PROXY_FORWARDS_MAX];
    int n = 0, rc = -1;
    cb_np_listen_msg_t msg = {0};
    const cb_ipaddr_t v4 = {.family = AF_INET, .a = {127, 0, 0, 1}};
    const cb_ipaddr_t v6 = {.family = AF_INET6, .a = {[15] = 1}};
    if ((fds[n] = s_tcp_listener(&v4, CB_PROXY_PORT)) < 0) goto out;
    n++;
    /* IPv6 may be disabled on the host: then there is no [::1] inside either */
    if ((fds[n] = s_tcp_listener(&v6, CB_PROXY_PORT)) >= 0) n++;
    if ((fds[n] = s_unix_listener()) < 0) goto out;
    n++;
    msg.n_proxy = n;
    /* the loopback pairs of the allowlist; one that cannot be bound (no
     * IPv6, or taken) is left out, and the launcher says so */
    for (size_t i = 0; i < np->n_fwd; i++) {
        if ((fds[n] = s_tcp_listener(&np->fwd[i].ip, np->fwd[i].port)) < 0) continue;
        n++;
        msg.n_fwd++;
        msg.fwd_mask |= 1u << i;
    }
    /* the socket is bound: the directory holding it becomes read-only, so
     * nothing in the sandbox (whose uid init may have) can replace it */
    if (mount(NULL, CB_PROXY_SOCK_DIR, NULL,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        goto out;
    rc = cb_send_with_fds(np->sv[1], &msg, sizeof msg, fds, (size_t) n);
out:;
    int e = errno;
    /* init keeps none of them: the runner, forked next, must not be able to
     * accept() the sandbox's own proxy connections */
    for (int i = 0; i < n; i++)
        close(fds[i]);
    close(np->sv[0]);
    close(np->sv[1]);
    errno = e;
    return rc;
}
