/*
 * netproxy.c - start and supervise the egress proxy of `--network allow:`
 * (see netproxy.h and docs/SECURITY.md "Network by allowlist").
 *
 * Why listening sockets made by init and not a proxy process inside: the
 * clients we care about (pip, requests, urllib, curl) take a TCP proxy URL,
 * and anything running inside the sandbox is the attacker's.  A socket's
 * network namespace is fixed when it is created, so init (still holding its
 * capabilities, before the runner exists) creates 127.0.0.1:3128, [::1]:3128
 * and /run/cellblock/proxy.sock inside (netproxy_init.c), sends them out
 * with SCM_RIGHTS and closes its copies.  The proxy, on the host side,
 * accept()s on them: the sandbox connects over its own loopback, the
 * proxy's outbound connections leave from the host, and the sandbox still
 * has no interface but lo.  setns(2) into the sandbox's namespace from the
 * launcher would do the same for root only, so init does it in both cases.
 *
 * The proxy starts before the sandbox (at planning): with --secret it makes
 * the session CA, whose certificate the sandbox's CA bundle must carry, and
 * whose key never leaves it.  It gets the listeners later, on its control
 * socket (netctl.c), which also carries policy changes and cost requests.
 * A proxy that crashes is restarted with the allowlist in force and the
 * same listeners; its new CA is not the one the sandbox trusts, so it
 * refuses hosts with secrets, saying why.
 */
#include "launcher/netproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/util.h"
#include "launcher/netproxy_priv.h"

#define S_HIGH_FD             100       /* fds are moved above this before their final dup2 */
#define S_CLOSE_RANGE_CLOEXEC (1U << 2) /* CLOSE_RANGE_CLOEXEC (linux/close_range.h) */
#define S_FD_CTL              3         /* the proxy's fds: control socket, */
#define S_FD_READY            4         /* ready pipe, */
#define S_FD_SECRETS          5         /* the secrets' pipe (with --secret) */

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
    np->sv[0] = np->sv[1] = np->pid = np->ctl = -1;
    for (size_t i = 0; i < CB_PROXY_LISTENERS; i++)
        np->listen[i] = -1;
    for (size_t i = 0; i < CB_PROXY_FORWARDS_MAX; i++)
        np->fwd_fd[i] = -1;
    char why[CB_PROXY_ERR_MAX];
    cb_netrules_init(&np->rules);
    if (cb_netrules_parse(&np->rules, o->network_allow, why, sizeof why) < 0) {
        cb_fmt_why(err, err_len, "--network allow: %s", why);
        goto fail;
    }
    (void) snprintf(np->allow_now, sizeof np->allow_now, "%s", o->network_allow);
    np->n_fwd = cb_netrules_loopback(&np->rules, np->fwd, CB_PROXY_FORWARDS_MAX); /* checked */
    if (cb_netsecrets_load(&np->secrets, o->secret, o->n_secret, getppid(), err, err_len) < 0)
        goto fail;
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
    s_close_fd(&np->ctl);
    for (size_t i = 0; i < CB_PROXY_LISTENERS; i++)
        s_close_fd(&np->listen[i]);
    for (size_t i = 0; i < CB_PROXY_FORWARDS_MAX; i++)
        s_close_fd(&np->fwd_fd[i]);
    cb_netsecrets_wipe(&np->secrets);
    free(np);
}

/* ---- the proxy process ------------------------------------------------------- */

static const char *s_num(cb_netproxy_t *np, size_t *slot, long long v) {
    (void) snprintf(np->nums[*slot], CB_NP_ARG_BYTES, "%lld", v);
    return np->nums[(*slot)++];
}

static void s_build_argv(cb_netproxy_t *np, bool restarted) {
    static const char *const lv[] = {"debug", "info", "warning", "error", "critical"};
    const cb_options_t *o = np->opts;
    size_t n = 0, slot = 0;
    char **a = np->argv;
    a[n++] = np->bin;
    a[n++] = (char *) "--ctl-fd";
    a[n++] = (char *) s_num(np, &slot, S_FD_CTL);
    a[n++] = (char *) "--ready-fd";
    a[n++] = (char *) s_num(np, &slot, S_FD_READY);
    if (np->secrets.n > 0) {
        a[n++] = (char *) "--secrets-fd";
        a[n++] = (char *) s_num(np, &slot, S_FD_SECRETS);
        if (o->network_upstream_ca != NULL) {
            a[n++] = (char *) "--upstream-ca";
            a[n++] = (char *) o->network_upstream_ca;
        }
        a[n++] = (char *) "--restarted";
        a[n++] = (char *) (restarted ? "1" : "0");
    }
    a[n++] = (char *) "--allow";
    a[n++] = np->allow_now;
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
                                              const int fds[3]) {
    cb_child_reset_signals();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) cb_child_fail(errfd, CB_STEP_CAPS, -1);
    if (getppid() != parent) _exit(127);
    if (setsid() < 0) cb_child_fail(errfd, CB_STEP_SETSID, -1);
    int err = s_high(errfd), log = s_high(cb_log_get_fd()), hi[3];
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++)
        hi[i] = fds[i] >= 0 ? s_high(fds[i]) : null;
    if (err < 0 || null < 0 || hi[0] < 0 || hi[1] < 0 || hi[2] < 0)
        cb_child_fail(errfd, CB_STEP_FDS, -1);
    errfd = err;
    if (dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(log >= 0 ? log : null, 2) < 0 ||
        dup2(hi[0], S_FD_CTL) < 0 || dup2(hi[1], S_FD_READY) < 0 || dup2(hi[2], S_FD_SECRETS) < 0)
        cb_child_fail(errfd, CB_STEP_FDS, -1);
    /* the launcher's own fds (report socket, pipes) must not reach the proxy */
    if (syscall(SYS_close_range, S_FD_SECRETS + 1, ~0U, S_CLOSE_RANGE_CLOEXEC) < 0)
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

/* The session CA the proxy sent before it said ready. */
static int s_read_ca(cb_netproxy_t *np, char *err, size_t err_len) {
    char buf[CB_PROXY_CA_PEM_MAX + 8];
    ssize_t r = recv(np->ctl, buf, sizeof buf, MSG_DONTWAIT);
    if (r < 4 || memcmp(buf, "ca ", 3) != 0) {
        cb_fmt_why(err, err_len, "the egress proxy did not send its session CA");
        return -1;
    }
    if ((size_t) r - 3 > sizeof np->ca_pem) {
        cb_fmt_why(err, err_len, "the egress proxy's session CA is larger than %d bytes",
                   (int) sizeof np->ca_pem);
        return -1;
    }
    np->ca_len = (size_t) r - 3;
    memcpy(np->ca_pem, buf + 3, np->ca_len);
    return 0;
}

static int s_spawn(cb_netproxy_t *np, bool restarted, char *err, size_t err_len) {
    int ep[2] = {-1, -1}, rp[2] = {-1, -1}, cs[2] = {-1, -1}, sp[2] = {-1, -1};
    bool secrets = np->secrets.n > 0;
    if (pipe2(ep, O_CLOEXEC) < 0 || pipe2(rp, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cs) < 0 ||
        (secrets && pipe2(sp, O_CLOEXEC) < 0)) {
        cb_fmt_why(err, err_len, "pipes for the egress proxy: %s", strerror(errno));
        int *all[] = {&ep[0], &ep[1], &rp[0], &rp[1], &cs[0], &cs[1], &sp[0], &sp[1]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            s_close_fd(all[i]);
        return -1;
    }
    s_build_argv(np, restarted);
    np->stopping = false;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        const int child_fds[3] = {cs[1], rp[1], sp[0]};
        s_child(np, parent, ep[1], child_fds);
    }
    int fork_err = errno;
    s_close_fd(&ep[1]);
    s_close_fd(&rp[1]);
    s_close_fd(&cs[1]);
    s_close_fd(&sp[0]);
    cb_autofd int epr = ep[0];
    cb_autofd int rpr = rp[0];
    cb_autofd int spw = sp[1];
    s_close_fd(&np->ctl);
    np->ctl = cs[0];
    np->listening = false;
    if (pid < 0) {
        cb_fmt_why(err, err_len, "fork: %s", strerror(fork_err));
        return -1;
    }
    np->pid = pid;
    /* the values go to the proxy's pipe, and nowhere else */
    if (secrets && cb_write_all(spw, np->secrets.table, np->secrets.table_len) < 0)
        LOG_W("writing the secrets to the egress proxy: %s", strerror(errno));
    s_close_fd(&spw);
    cb_child_err_t ce;
    int r = cb_child_read_err(epr, &ce);
    if (r != 0) {
        cb_fmt_why(err, err_len, "starting the egress proxy %s: %s failed: %s", np->bin,
                   cb_step_name(ce.step), r > 0 ? strerror(ce.err) : strerror(errno));
        cb_netproxy_kill(np);
        return -1;
    }
    if (s_wait_ready(rpr, err, err_len) < 0 ||
        (secrets && !restarted && s_read_ca(np, err, err_len) < 0)) {
        cb_netproxy_kill(np);
        return -1;
    }
    LOG_I("egress proxy up (pid %ld): %s%s", (long) pid, np->allow_now,
          secrets ? "; TLS ends at the proxy for the hosts with secrets" : "");
    return 0;
}

int cb_netproxy_plan(cb_netproxy_t *np, cb_mount_plan_t *mounts, cb_exec_plan_t *exec) {
    char why[CB_PROXY_ERR_MAX];
    if (np->pid <= 0 && s_spawn(np, false, why, sizeof why) < 0) {
        LOG_E("%s", why);
        errno = EIO;
        return -1;
    }
    if (cb_mount_plan_tmpfs(mounts, CB_PROXY_SOCK_DIR, CB_PROXY_SOCKDIR_OPT) < 0) return -1;
    /* Both spellings: curl reads only the lower-case http_proxy, Python and
     * pip take either (lower case first). */
    static const char *const proxy_vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                             "https_proxy"};
    for (size_t i = 0; i < sizeof proxy_vars / sizeof proxy_vars[0]; i++)
        if (cb_netenv_add(exec, proxy_vars[i], CB_PROXY_URL) < 0) return -1;
    if (cb_netenv_add(exec, "NO_PROXY", CB_PROXY_NO_PROXY) < 0 ||
        cb_netenv_add(exec, "no_proxy", CB_PROXY_NO_PROXY) < 0)
        return -1;
    if (cb_netsecrets_plan(&np->secrets, np->ca_pem, np->ca_len, np->opts->network_upstream_ca,
                           mounts, exec, why, sizeof why) < 0) {
        LOG_E("%s", why);
        errno = EIO;
        return -1;
    }
    /* what code in the sandbox may reach, so it can tell (a long list is
     * cut: the banner and the kernel's log have it too) */
    char allow[CB_ENV_ENTRY_MAX - sizeof "CELLBLOCK_NETWORK_ALLOW="];
    cb_netrules_describe(&np->rules, allow, sizeof allow);
    return cb_netenv_add(exec, "CELLBLOCK_NETWORK_ALLOW", allow);
}

int cb_netproxy_start(cb_netproxy_t *np, char *err, size_t err_len) {
    s_close_fd(&np->sv[1]); /* init's end: a recv below must not wait on our own copy */
    int fds[CB_PROXY_LISTENERS + CB_PROXY_FORWARDS_MAX];
    cb_np_listen_msg_t msg = {0};
    size_t got = 0;
    ssize_t r = cb_recv_with_fds(np->sv[0], &msg, sizeof msg, fds, sizeof fds / sizeof fds[0],
                                 &got, MSG_DONTWAIT);
    s_close_fd(&np->sv[0]);
    bool shape = r == (ssize_t) sizeof msg && msg.n_proxy > 0 &&
                 msg.n_proxy <= CB_PROXY_LISTENERS && msg.n_fwd >= 0 &&
                 (size_t) msg.n_fwd <= np->n_fwd && (size_t) (msg.n_proxy + msg.n_fwd) == got;
    for (size_t i = 0; i < got; i++) {
        if (!shape)
            close(fds[i]);
        else if (i < (size_t) msg.n_proxy)
            np->listen[np->n_listen++] = fds[i];
        else
            np->fwd_fd[np->n_fwd_fd++] = fds[i];
    }
    if (!shape) {
        cb_fmt_why(err, err_len, "the sandbox did not pass the proxy's listening sockets");
        return -1;
    }
    for (size_t i = 0; i < np->n_fwd; i++) {
        if (msg.fwd_mask & (1u << i)) continue;
        char a[INET6_ADDRSTRLEN];
        bool v6 = np->fwd[i].ip.family == AF_INET6;
        cb_ipaddr_str(&np->fwd[i].ip, a, sizeof a);
        LOG_W("--network allow: cannot listen on %s%s%s:%u inside the sandbox (%s): that "
              "loopback pair is not reachable from it",
              v6 ? "[" : "", a, v6 ? "]" : "", (unsigned) np->fwd[i].port,
              v6 ? "no IPv6 on this host?" : "in use?");
    }
    return cb_np_send_listeners(np, err, err_len);
}

bool cb_netproxy_reaped(cb_netproxy_t *np, pid_t pid, int status) {
    if (np == NULL || pid != np->pid) return false;
    np->pid = -1;
    if (np->stopping) return true;
    char how[CB_NP_ARG_BYTES * 2];
    if (WIFSIGNALED(status))
        (void) snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
    else
        (void) snprintf(how, sizeof how, "exited with code %d", WEXITSTATUS(status));
    if (np->restarts < CB_PROXY_RESTARTS_MAX) {
        np->restarts++;
        LOG_W("the egress proxy %s: restarting it (%d of %d)%s", how, np->restarts,
              CB_PROXY_RESTARTS_MAX,
              np->secrets.n > 0 ? "; its new session CA is not the sandbox's: the hosts with "
                                  "secrets are refused until the kernel restarts"
                                : "");
        char err[CB_PROXY_ERR_MAX];
        if (s_spawn(np, true, err, sizeof err) == 0 &&
            cb_np_send_listeners(np, err, sizeof err) == 0)
            return true;
        LOG_E("%s", err);
        cb_netproxy_kill(np);
    }
    LOG_E("the egress proxy %s and is not restarted again: the sandbox has no network now", how);
    for (size_t i = 0; i < CB_PROXY_LISTENERS; i++)
        s_close_fd(&np->listen[i]); /* connections are refused rather than left waiting */
    for (size_t i = 0; i < CB_PROXY_FORWARDS_MAX; i++)
        s_close_fd(&np->fwd_fd[i]);
    cb_netsecrets_wipe(&np->secrets);
    return true;
}

void cb_netproxy_describe(const cb_netproxy_t *np, char *buf, size_t len) {
    static const char pre[] = "net (lo only; egress only via HTTP(S) proxy to ";
    if (len < sizeof pre + 16) {
        (void) snprintf(buf, len, "net (allowlist)");
        return;
    }
    char tail[CB_PROXY_SPEC_MAX + 32] = "";
    if (np->secrets.n > 0)
        (void) snprintf(tail, sizeof tail, "; secrets for %s", np->secrets.hosts);
    size_t tail_max = (len - sizeof pre) / 3; /* the secrets' part: at most a third */
    if (strlen(tail) > tail_max) memcpy(tail + tail_max - 4, "...", 4);
    /* the rules get what is left, keeping room for the tail, ')' and NUL */
    size_t room = len - (sizeof pre - 1) - strlen(tail) - 1;
    memcpy(buf, pre, sizeof pre - 1);
    cb_netrules_describe(&np->rules, buf + sizeof pre - 1, room);
    size_t used = strlen(buf);
    (void) snprintf(buf + used, len - used, "%s)", tail);
}
