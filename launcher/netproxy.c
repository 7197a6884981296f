/*
 * netproxy.c - start and supervise the egress proxy of `--network allow:`
 * (see netproxy.h and docs/SECURITY.md "Network by allowlist").
 *
 * Why listening sockets made by init and not a proxy process inside: the
 * clients we care about (pip, requests, urllib, curl) take a TCP proxy URL,
 * and anything running inside the sandbox is the attacker's.  A socket's
 * network namespace is fixed when it is created, so init (still holding its
 * capabilities, before the runner exists) creates 127.0.0.1:3128, [::1]:3128
 * and /run/cellblock/proxy.sock inside, sends them out with SCM_RIGHTS and
 * closes its copies.  The proxy, started here on the host side, accept()s
 * on them: the sandbox connects over its own loopback, the proxy's
 * outbound connections leave from the host, and the sandbox still has no
 * interface but lo.  setns(2) into the sandbox's namespace from the launcher
 * would do the same for root only (an unprivileged launcher holds no
 * CAP_SYS_ADMIN in its own user namespace), so init does it in both cases.
 */
#include "launcher/netproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/log.h"
#include "launcher/netproxy_limits.h"
#include "launcher/netrules.h"
#include "isolate/util.h"

#define S_HIGH_FD             100       /* fds are moved above this before their final dup2 */
#define S_ARG_BYTES           32        /* a rendered number */
#define S_CLOSE_RANGE_CLOEXEC (1U << 2) /* CLOSE_RANGE_CLOEXEC (linux/close_range.h) */

struct cb_netproxy {
    const cb_options_t *opts;                  /* borrowed */
    cb_netrules_t rules;                       /* the allowlist, for the banner */
    char bin[CB_PATH_MAX];                     /* cellblock-proxy next to us */
    int sv[2];                                 /* [0] ours, [1] init's: the listeners */
    int listen[CB_PROXY_LISTENERS];            /* received listeners, -1 */
    size_t n_listen;                           /* used entries */
    pid_t pid;                                 /* the running proxy, -1 */
    int restarts;                              /* restarts after crashes */
    bool stopping;                             /* we killed it */
    char *argv[CB_PROXY_ARGS_MAX];             /* its command line */
    char nums[CB_PROXY_ARGS_MAX][S_ARG_BYTES]; /* numbers in it */
};

static void s_close_fd(int *fd) {
    if (*fd >= 0) (void) close(*fd);
    *fd = -1;
}

cb_netproxy_t *cb_netproxy_new(const cb_options_t *o, char *err, size_t err_len) {
    if (err_len > 0) err[0] = '\0';
    if (o->network_allow == NULL) return NULL;
    cb_netproxy_t *np = calloc(1, sizeof *np);
    if (np == NULL) {
        cb_fmt_why(err, err_len, "out of memory");
        return NULL;
    }
    np->opts = o;
    np->sv[0] = np->sv[1] = np->pid = -1;
    for (size_t i = 0; i < CB_PROXY_LISTENERS; i++)
        np->listen[i] = -1;
    char why[CB_PROXY_ERR_MAX];
    cb_netrules_init(&np->rules);
    if (cb_netrules_parse(&np->rules, o->network_allow, why, sizeof why) < 0) {
        cb_fmt_why(err, err_len, "--network allow: %s", why);
        goto fail;
    }
    char exe[CB_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        cb_fmt_why(err, err_len, "readlink(/proc/self/exe): %s", strerror(errno));
        goto fail;
    }
    exe[n] = '\0';
    int w = snprintf(np->bin, sizeof np->bin, "%s/%s", dirname(exe), CB_PROXY_BIN);
    if (w < 0 || (size_t) w >= sizeof np->bin || access(np->bin, X_OK) != 0) {
        cb_fmt_why(err, err_len,
                   "--network allow: needs the egress proxy %s next to the launcher (%s); "
                   "`make` builds it",
                   CB_PROXY_BIN, strerror(errno));
        goto fail;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, np->sv) < 0) {
        cb_fmt_why(err, err_len, "socketpair: %s", strerror(errno));
        goto fail;
    }
    return np;
fail:
    cb_netproxy_destroy(&np);
    return NULL;
}

void cb_netproxy_kill(cb_netproxy_t *np) {
    if (np == NULL || np->pid <= 0) return;
    np->stopping = true;
    (void) kill(np->pid, SIGKILL);
}

void cb_netproxy_destroy(cb_netproxy_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_netproxy_t *np = *self_p;
    *self_p = NULL;
    cb_netproxy_kill(np);
    if (np->pid > 0) (void) waitpid(np->pid, NULL, 0);
    s_close_fd(&np->sv[0]);
    s_close_fd(&np->sv[1]);
    for (size_t i = 0; i < CB_PROXY_LISTENERS; i++)
        s_close_fd(&np->listen[i]);
    free(np);
}

/* ---- planning ------------------------------------------------------------ */

static int s_env(cb_exec_plan_t *p, const char *name, const char *value) {
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

int cb_netproxy_plan(cb_netproxy_t *np, cb_mount_plan_t *mounts, cb_exec_plan_t *exec) {
    if (cb_mount_plan_tmpfs(mounts, CB_PROXY_SOCK_DIR, CB_PROXY_SOCKDIR_OPT) < 0) return -1;
    /* Both spellings: curl reads only the lower-case http_proxy, Python and
     * pip take either (lower case first). */
    static const char *const proxy_vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                             "https_proxy"};
    for (size_t i = 0; i < sizeof proxy_vars / sizeof proxy_vars[0]; i++)
        if (s_env(exec, proxy_vars[i], CB_PROXY_URL) < 0) return -1;
    if (s_env(exec, "NO_PROXY", CB_PROXY_NO_PROXY) < 0 ||
        s_env(exec, "no_proxy", CB_PROXY_NO_PROXY) < 0)
        return -1;
    /* what code in the sandbox may reach, so it can tell (a long list is
     * cut: the banner and the kernel's log have it too) */
    char allow[CB_ENV_ENTRY_MAX - sizeof "CELLBLOCK_NETWORK_ALLOW="];
    cb_netrules_describe(&np->rules, allow, sizeof allow);
    return s_env(exec, "CELLBLOCK_NETWORK_ALLOW", allow);
}

/* ---- inside: init (no malloc, no stdio, no logging) ----------------------- */

static int s_tcp_listener(int family) {
    int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    int one = 1;
    (void) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (family == AF_INET) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(CB_PROXY_PORT)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = bind(s, (struct sockaddr *) &a, sizeof a);
    } else {
        (void) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(CB_PROXY_PORT)};
        a.sin6_addr = in6addr_loopback;
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
    int fds[CB_PROXY_LISTENERS];
    int n = 0, rc = -1;
    if ((fds[n] = s_tcp_listener(AF_INET)) < 0) goto out;
    n++;
    /* IPv6 may be disabled on the host: then there is no [::1] inside either */
    if ((fds[n] = s_tcp_listener(AF_INET6)) >= 0) n++;
    if ((fds[n] = s_unix_listener()) < 0) goto out;
    n++;
    /* the socket is bound: the directory holding it becomes read-only, so
     * nothing in the sandbox (whose uid init may have) can replace it */
    if (mount(NULL, CB_PROXY_SOCK_DIR, NULL,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        goto out;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof fds)];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {.iov_base = &n, .iov_len = sizeof n};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = CMSG_SPACE((size_t) n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t) n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t) n * sizeof(int));
    ssize_t w;
    do
        w = sendmsg(np->sv[1], &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    rc = w < 0 ? -1 : 0;
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

/* ---- launcher side: the proxy process -------------------------------------- */

static const char *s_num(cb_netproxy_t *np, size_t *slot, long long v) {
    (void) snprintf(np->nums[*slot], S_ARG_BYTES, "%lld", v);
    return np->nums[(*slot)++];
}

static void s_build_argv(cb_netproxy_t *np) {
    static const char *const lv[] = {"debug", "info", "warning", "error", "critical"};
    const cb_options_t *o = np->opts;
    size_t n = 0, slot = 0;
    char **a = np->argv;
    a[n++] = np->bin;
    for (size_t i = 0; i < np->n_listen; i++) {
        a[n++] = (char *) "--listen-fd";
        a[n++] = (char *) s_num(np, &slot, (long long) (3 + i));
    }
    a[n++] = (char *) "--ready-fd";
    a[n++] = (char *) s_num(np, &slot, (long long) (3 + np->n_listen));
    a[n++] = (char *) "--allow";
    a[n++] = (char *) o->network_allow;
    for (size_t i = 0; i < o->n_network_resolve; i++) {
        a[n++] = (char *) "--resolve";
        a[n++] = (char *) o->network_resolve[i];
    }
    a[n++] = (char *) "--max-conns";
    a[n++] = (char *) s_num(np, &slot, o->network_max_conns);
    a[n++] = (char *) "--max-bytes";
    a[n++] = (char *) s_num(np, &slot, (long long) o->network_max_mb << 20);
    a[n++] = (char *) "--log-level";
    a[n++] = (char *) lv[(unsigned) o->log_level < 5 ? o->log_level : 1];
    a[n] = NULL;
}

/* Moves fd above S_HIGH_FD (close-on-exec) so that the final dup2s cannot
 * clobber a source.  Async-signal-safe. */
static int s_high(int fd) { return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, S_HIGH_FD); }

__attribute__((noreturn)) static void s_child(cb_netproxy_t *np, pid_t parent, int errfd,
                                              int readyfd) {
    cb_child_reset_signals();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) cb_child_fail(errfd, CB_STEP_CAPS, -1);
    if (getppid() != parent) _exit(127);
    if (setsid() < 0) cb_child_fail(errfd, CB_STEP_SETSID, -1);
    int err = s_high(errfd), ready = s_high(readyfd), log = s_high(cb_log_get_fd());
    int hi[CB_PROXY_LISTENERS];
    for (size_t i = 0; i < np->n_listen; i++)
        hi[i] = s_high(np->listen[i]);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (err < 0 || ready < 0 || null < 0) cb_child_fail(errfd, CB_STEP_FDS, -1);
    errfd = err;
    if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(log >= 0 ? log : null, 2) < 0)
        cb_child_fail(errfd, CB_STEP_FDS, -1);
    for (size_t i = 0; i < np->n_listen; i++)
        if (hi[i] < 0 || dup2(hi[i], 3 + (int) i) < 0) cb_child_fail(errfd, CB_STEP_FDS, -1);
    if (dup2(ready, 3 + (int) np->n_listen) < 0) cb_child_fail(errfd, CB_STEP_FDS, -1);
    /* the launcher's own fds (report socket, pipes) must not reach the proxy */
    if (syscall(SYS_close_range, 4 + (unsigned) np->n_listen, ~0U, S_CLOSE_RANGE_CLOEXEC) < 0)
        cb_child_fail(errfd, CB_STEP_FDS, -1);
    /* dup2 leaves the targets without FD_CLOEXEC; everything else has it */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) cb_child_fail(errfd, CB_STEP_NNP, -1);
    static char *const envp[] = {NULL};
    execve(np->bin, np->argv, envp);
    cb_child_fail(errfd, CB_STEP_EXEC, -1);
}

/* Reads the proxy's "ready" pipe: EOF without bytes = up. */
static int s_wait_ready(int fd, char *err, size_t err_len) {
    char buf[CB_PROXY_ERR_MAX];
    size_t got = 0;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    for (;;) {
        int r = poll(&pf, 1, CB_PROXY_READY_MS);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            cb_fmt_why(err, err_len, "the egress proxy did not start within %d ms",
                       CB_PROXY_READY_MS);
            return -1;
        }
        ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t) n;
        if (got == sizeof buf - 1) break;
    }
    if (got == 0) return 0;
    buf[got] = '\0';
    cb_fmt_why(err, err_len, "the egress proxy could not start: %s", buf);
    return -1;
}

static int s_spawn(cb_netproxy_t *np, char *err, size_t err_len) {
    int ep[2], rp[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        cb_fmt_why(err, err_len, "pipe2: %s", strerror(errno));
        return -1;
    }
    if (pipe2(rp, O_CLOEXEC) < 0) {
        cb_fmt_why(err, err_len, "pipe2: %s", strerror(errno));
        close(ep[0]);
        close(ep[1]);
        return -1;
    }
    s_build_argv(np);
    np->stopping = false;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(ep[0]);
        close(rp[0]);
        s_child(np, parent, ep[1], rp[1]);
    }
    int fork_err = errno;
    close(ep[1]);
    close(rp[1]);
    cb_autofd int epr = ep[0];
    cb_autofd int rpr = rp[0];
    if (pid < 0) {
        cb_fmt_why(err, err_len, "fork: %s", strerror(fork_err));
        return -1;
    }
    np->pid = pid;
    cb_child_err_t ce;
    int r = cb_child_read_err(epr, &ce);
    if (r != 0) {
        cb_fmt_why(err, err_len, "starting the egress proxy %s: %s failed: %s", np->bin,
                   cb_step_name(ce.step), r > 0 ? strerror(ce.err) : strerror(errno));
        cb_netproxy_kill(np);
        return -1;
    }
    if (s_wait_ready(rpr, err, err_len) < 0) {
        cb_netproxy_kill(np);
        return -1;
    }
    LOG_I("egress proxy up (pid %ld): %s", (long) pid, np->opts->network_allow);
    return 0;
}

int cb_netproxy_start(cb_netproxy_t *np, char *err, size_t err_len) {
    s_close_fd(&np->sv[1]); /* init's end: a recv below must not wait on our own copy */
    int fds[CB_PROXY_LISTENERS];
    int n = 0;
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof fds)];
    } cm;
    struct iovec iov = {.iov_base = &n, .iov_len = sizeof n};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    ssize_t r;
    do
        r = recvmsg(np->sv[0], &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    s_close_fd(&np->sv[0]);
    size_t got = 0;
    for (struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (got < CB_PROXY_LISTENERS)
                np->listen[got++] = fd;
            else
                close(fd);
        }
    }
    np->n_listen = got;
    if (r != (ssize_t) sizeof n || got == 0 || (size_t) n != got) {
        cb_fmt_why(err, err_len, "the sandbox did not pass the proxy's listening sockets");
        return -1;
    }
    return s_spawn(np, err, err_len);
}

bool cb_netproxy_reaped(cb_netproxy_t *np, pid_t pid, int status) {
    if (np == NULL || pid != np->pid) return false;
    np->pid = -1;
    if (np->stopping) return true;
    char how[S_ARG_BYTES * 2];
    if (WIFSIGNALED(status))
        (void) snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
    else
        (void) snprintf(how, sizeof how, "exited with code %d", WEXITSTATUS(status));
    if (np->restarts < CB_PROXY_RESTARTS_MAX) {
        np->restarts++;
        LOG_W("the egress proxy %s: restarting it (%d of %d)", how, np->restarts,
              CB_PROXY_RESTARTS_MAX);
        char err[CB_PROXY_ERR_MAX];
        if (s_spawn(np, err, sizeof err) == 0) return true;
        LOG_E("%s", err);
    }
    LOG_E("the egress proxy %s and is not restarted again: the sandbox has no network now", how);
    for (size_t i = 0; i < CB_PROXY_LISTENERS; i++)
        s_close_fd(&np->listen[i]); /* connections are refused rather than left waiting */
    return true;
}

void cb_netproxy_describe(const cb_netproxy_t *np, char *buf, size_t len) {
    static const char pre[] = "net (lo only; egress only via HTTP(S) proxy to ";
    if (len < sizeof pre + 1) {
        (void) snprintf(buf, len, "net (allowlist)");
        return;
    }
    memcpy(buf, pre, sizeof pre - 1);
    size_t room = len - (sizeof pre - 1) - 1; /* keep one byte for ')' */
    cb_netrules_describe(&np->rules, buf + sizeof pre - 1, room);
    size_t used = strlen(buf);
    (void) snprintf(buf + used, len - used, ")");
}
