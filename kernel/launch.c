/*
 * launch.c - spawn the launcher and read its reports (see launch.h).
 *
 * posix_spawn with file actions is the only way a process is created here:
 * libzmq has threads running, so fork() in the kernel is off limits.  The
 * child ends of the pipes/sockets are first moved to fds >= CB_SPAWN_FD_MIN
 * so the dup2 actions onto 0-5 can never clobber one another; every other
 * fd is O_CLOEXEC and vanishes at exec.
 */
#include "kernel/launch.h"

#include "isolate/cgroup.h"
#include "isolate/cb_limits.h"
#include "isolate/log.h"
#include "isolate/util.h"
#include "kernel/bounds.h"
#include "kernel/options.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#define CB_SPAWN_FD_MIN     10 /* child fds are parked here before dup2 */
#define CB_SPAWN_FIXED_ARGS 8  /* argv[0], --python P, --runner R, --resume-image I, NULL */
#define CB_PASSED_FDS_MAX   4  /* fds accepted with one report datagram */
#define CB_SPAWN_FDS        6  /* fds 0-5 of the launcher (docs/RUNNER_PROTOCOL.md) */

void cb_launch_init(cb_launch_t *l) {
    memset(l, 0, sizeof *l);
    l->pid = -1;
    l->runner_pid = -1;
    l->out_fd = l->err_fd = l->ev_fd = l->rep_fd = l->workdir_fd = l->dbg_fd = -1;
    l->exit_code = l->exit_signal = -1;
}

static void s_close(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

void cb_launch_close_fds(cb_launch_t *l) {
    s_close(&l->out_fd);
    s_close(&l->err_fd);
    s_close(&l->ev_fd);
    s_close(&l->rep_fd);
    s_close(&l->workdir_fd);
    s_close(&l->dbg_fd);
}

static int s_park(int fd) {
    int p = fcntl(fd, F_DUPFD_CLOEXEC, CB_SPAWN_FD_MIN);
    if (p < 0) PLOG_E("fcntl(F_DUPFD_CLOEXEC)");
    close(fd);
    return p;
}

int cb_launch_spawn(cb_launch_t *r, const cb_launch_cfg_t *cfg) {
    cb_launch_init(r);
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, ev[2] = {-1, -1}, rep[2] = {-1, -1};
    int dbg[2] = {-1, -1};
    int devnull = -1, rc = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_ok = false, attr_ok = false;

    if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        PLOG_E("pipe2");
        goto out;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ev) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rep) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dbg) < 0) {
        PLOG_E("socketpair");
        goto out;
    }
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0) {
        PLOG_E("open(/dev/null)");
        goto out;
    }
    int child[CB_SPAWN_FDS] = {s_park(devnull), s_park(outp[1]), s_park(errp[1]),
                               s_park(ev[1]),   s_park(rep[1]),  s_park(dbg[1])};
    devnull = outp[1] = errp[1] = ev[1] = rep[1] = dbg[1] = -1;
    for (int i = 0; i < CB_SPAWN_FDS; i++)
        if (child[i] < 0) {
            for (int j = 0; j < CB_SPAWN_FDS; j++)
                if (child[j] >= 0) close(child[j]);
            goto out;
        }

    const char *argv[CB_OPTS_FWD_MAX + CB_SPAWN_FIXED_ARGS];
    size_t argc = 0;
    argv[argc++] = cfg->launcher;
    for (const char *const *e = cfg->extra; e && *e; e++) {
        if (argc + CB_SPAWN_FIXED_ARGS > sizeof argv / sizeof argv[0]) {
            LOG_E("too many launcher flags (more than %d): not starting", CB_OPTS_FWD_MAX);
            for (int i = 0; i < CB_SPAWN_FDS; i++)
                close(child[i]);
            goto out;
        }
        argv[argc++] = *e;
    }
    if (cfg->resume != NULL) { /* docs/SNAPSHOTS.md: verified by the kernel, again by the launcher */
        argv[argc++] = "--resume-image";
        argv[argc++] = cfg->resume;
    }
    argv[argc++] = "--python";
    argv[argc++] = cfg->python;
    argv[argc++] = "--runner";
    argv[argc++] = cfg->runner;
    argv[argc] = NULL;
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", NULL};

    posix_spawn_file_actions_init(&fa);
    fa_ok = true;
    for (int i = 0; i < CB_SPAWN_FDS; i++)
        posix_spawn_file_actions_adddup2(&fa, child[i], i);
    posix_spawnattr_init(&attr);
    attr_ok = true;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);

    pid_t pid;
    int err = posix_spawn(&pid, cfg->launcher, &fa, &attr, (char *const *) argv, envp);
    for (int i = 0; i < CB_SPAWN_FDS; i++)
        close(child[i]);
    if (err != 0) {
        errno = err;
        PLOG_E("posix_spawn(%s)", cfg->launcher);
        goto out;
    }
    r->pid = pid;
    r->out_fd = steal_fd(&outp[0]);
    r->err_fd = steal_fd(&errp[0]);
    r->ev_fd = steal_fd(&ev[0]);
    r->rep_fd = steal_fd(&rep[0]);
    r->dbg_fd = steal_fd(&dbg[0]);
    cb_set_nonblock(r->out_fd, 1);
    cb_set_nonblock(r->err_fd, 1);
    cb_set_nonblock(r->ev_fd, 1);
    cb_set_nonblock(r->rep_fd, 1);
    cb_set_nonblock(r->dbg_fd, 1);
    r->started_ms = cb_now_ms();
    LOG_I("launcher started, pid %d", (int) pid);
    rc = 0;
out:
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    if (attr_ok) posix_spawnattr_destroy(&attr);
    int *fds[] = {&outp[0], &outp[1], &errp[0], &errp[1], &ev[0], &ev[1],
                  &rep[0],  &rep[1],  &dbg[0],  &dbg[1],  &devnull};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        s_close(fds[i]);
    return rc;
}

/* "channel event|debug" with a socket (--pausable): the sandbox's init made
 * the runner's channel in the sandbox's network namespace (CRIU dumps a
 * socket only from there) and this is our end, in place of the one we
 * made.  Taken once per channel, before the runner is started (nothing was
 * written on ours yet: the runner's hello comes first), and only a socket. */
static void s_channel(cb_launch_t *r, const char *which, int *passed_fd) {
    int i = strcmp(which, "event") == 0 ? 0 : strcmp(which, "debug") == 0 ? 1 : -1;
    int *slot = i == 0 ? &r->ev_fd : &r->dbg_fd;
    struct stat st;
    if (i < 0 || *passed_fd < 0 || r->chan_moved[i] || r->runner_pid > 0 || *slot < 0 ||
        fstat(*passed_fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        LOG_W("launcher report 'channel %.16s' refused (unknown, late, repeated or not a socket)",
              which);
        return;
    }
    s_close(slot);
    *slot = *passed_fd;
    *passed_fd = -1;
    cb_set_nonblock(*slot, 1);
    r->chan_moved[i] = true;
    LOG_I("the runner's %s channel was made in the sandbox (--pausable)", which);
}

static void s_report(cb_launch_t *r, char *msg, size_t len, int passed_fd) {
    msg[len] = '\0';
    char *sp = strchr(msg, ' ');
    const char *rest = sp ? sp + 1 : "";
    size_t kind_len = sp ? (size_t) (sp - msg) : len;
#define S_IS(k) (kind_len == sizeof(k) - 1 && memcmp(msg, k, kind_len) == 0)
    if (S_IS("log")) {
        cb_log_level_t lvl = CB_LOG_INFO;
        char lname[16] = "";
        const char *text = rest;
        const char *sp2 = strchr(rest, ' ');
        if (sp2 && (size_t) (sp2 - rest) < sizeof lname) {
            memcpy(lname, rest, (size_t) (sp2 - rest));
            if (cb_log_parse_level(lname, &lvl) == 0) text = sp2 + 1;
        }
        CB_LOG_(lvl, false, "launcher: %s", text);
    } else if (S_IS("isolation")) {
        snprintf(r->isolation, sizeof r->isolation, "%s", rest);
        LOG_I("isolation: %s", rest);
    } else if (S_IS("workdir")) {
        if (passed_fd >= 0) {
            s_close(&r->workdir_fd);
            r->workdir_fd = passed_fd;
            passed_fd = -1;
        }
    } else if (S_IS("channel")) {
        s_channel(r, rest, &passed_fd);
    } else if (S_IS("waiting")) {
        long ms = strtol(rest, NULL, 10);
        if (ms > 0 && ms <= CB_RUNNER_WAIT_MAX_MS) r->wait_ms = ms;
        LOG_I("the launcher asks for up to %ld ms more for the runner's hello (a warm template's "
              "build, a restore)", ms);
    } else if (S_IS("started")) {
        r->runner_pid = (pid_t) strtol(rest, NULL, 10);
    } else if (S_IS("exit")) {
        /* how the runner ended, which is what the user wants to know: it
         * replaces what waitpid said about the launcher, if that came first */
        r->exit_reported = true;
        r->exit_code = r->exit_signal = -1;
        const char *p;
        if ((p = strstr(rest, "code="))) r->exit_code = (int) strtol(p + 5, NULL, 10);
        if ((p = strstr(rest, "signal="))) r->exit_signal = (int) strtol(p + 7, NULL, 10);
        if ((p = strstr(rest, "oom="))) r->oom = p[4] == '1';
        if ((p = strstr(rest, "reason="))) snprintf(r->reason, sizeof r->reason, "%s", p + 7);
        LOG_I("runner ended: %s", rest);
    } else if (S_IS("net")) {
        /* an answer to the network request kernel/netctl.c waits for: "SEQ LINE" */
        char *end = NULL;
        long long seq = strtoll(rest, &end, 10);
        size_t ll = end && *end == ' ' ? strlen(end + 1) : 0;
        if (seq == r->net_seq && ll > 0 && !r->net_done) {
            const char *line = end + 1;
            r->net_done = strcmp(line, "end") == 0 || strncmp(line, "ok", 2) == 0 ||
                          strncmp(line, "error", 5) == 0;
            if (strcmp(line, "end") != 0 && r->net_len + ll + 1 <= sizeof r->net_buf) {
                memcpy(r->net_buf + r->net_len, line, ll + 1);
                r->net_len += ll + 1;
            }
        }
    } else if (S_IS("snap")) {
        if (r->on_snap) r->on_snap(r->snap_ud, rest);
    } else if (S_IS("fatal")) {
        snprintf(r->fatal, sizeof r->fatal, "%s", rest);
        LOG_E("sandbox set-up failed: %s", rest);
    } else {
        LOG_W("unknown launcher report '%.*s'", (int) kind_len, msg);
    }
#undef S_IS
    if (passed_fd >= 0) close(passed_fd);
}

int cb_launch_read_reports(cb_launch_t *r) {
    while (r->rep_fd >= 0) {
        char buf[CB_REPORT_LINE_MAX + 1];
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(int) * CB_PASSED_FDS_MAX)];
        } ctl;
        struct iovec iov = {buf, CB_REPORT_LINE_MAX};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl.space,
                            .msg_controllen = sizeof ctl.space};
        ssize_t n = recvmsg(r->rep_fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n <= 0) {
            s_close(&r->rep_fd);
            return -1;
        }
        int fd = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int fds[CB_PASSED_FDS_MAX];
                memcpy(fds, CMSG_DATA(c),
                       nfd * sizeof(int) < sizeof fds ? nfd * sizeof(int) : sizeof fds);
                for (size_t i = 0; i < nfd && i < CB_PASSED_FDS_MAX; i++) {
                    if (fd < 0)
                        fd = fds[i];
                    else
                        close(fds[i]);
                }
            }
        }
        s_report(r, buf, (size_t) n, fd);
    }
    return -1;
}

int cb_launch_command_fd(cb_launch_t *l, int fd, const char *fmt, ...) {
    char buf[CB_REPORT_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (l->rep_fd < 0 || n <= 0 || (size_t) n >= sizeof buf) return -1;
    if (cb_send_with_fd(l->rep_fd, buf, (size_t) n, fd) < 0) {
        PLOG_W("sending a command to the launcher");
        return -1;
    }
    return 0;
}

void cb_launch_signal(cb_launch_t *l, int sig) {
    if (l->pid > 0 && !l->reaped) kill(l->pid, sig);
}

bool cb_launch_reap(cb_launch_t *l) {
    if (l->reaped) return true;
    if (l->pid <= 0) return false;
    int status = 0;
    pid_t p = waitpid(l->pid, &status, WNOHANG);
    if (p < 0 && errno == ECHILD) {
        /* someone else reaped it: it is gone, how is unknown */
        LOG_W("launcher %d was reaped elsewhere", (int) l->pid);
        l->reaped = true;
        return true;
    }
    if (p != l->pid) return false;
    l->reaped = true;
    if (!l->exit_reported) {
        /* The launcher died without reporting: describe the launcher itself. */
        if (WIFEXITED(status)) l->exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) l->exit_signal = WTERMSIG(status);
    }
    /* a launcher that was killed could not remove its cgroup: do it for it */
    if (WIFSIGNALED(status) && cb_cgroup_cleanup_launcher(l->pid) < 0)
        LOG_W("the cgroup of launcher %d could not be removed", (int) l->pid);
    return true;
}

void cb_launch_describe_exit(const cb_launch_t *r, char *buf, size_t len) {
    if (r->oom) {
        snprintf(buf, len, "was killed because it ran out of memory (the sandbox's memory limit)");
    } else if (r->exit_signal > 0) {
        snprintf(buf, len, "was killed by signal %d (SIG%s)", r->exit_signal,
                 sigabbrev_np(r->exit_signal) ? sigabbrev_np(r->exit_signal) : "?");
    } else if (r->exit_code >= 0) {
        snprintf(buf, len, "exited with code %d", r->exit_code);
    } else {
        snprintf(buf, len, "ended for an unknown reason");
    }
    if (r->reason[0]) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, " (%s)", r->reason);
    }
}
