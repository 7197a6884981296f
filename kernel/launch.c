/*
 * runner.c - spawn and talk to the launcher and its runner (see runner.h).
 *
 * posix_spawn with file actions is the only way a process is created here:
 * libzmq has threads running, so fork() in the kernel is off limits.  The
 * child ends of the pipes/sockets are first moved to fds >= CB_SPAWN_FD_MIN
 * so the dup2 actions onto 0-4 can never clobber one another; every other
 * fd is O_CLOEXEC and vanishes at exec.
 */
#include "kernel/runner.h"

#include "kernel/frame.h"
#include "limits.h"
#include "log.h"
#include "util.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#define CB_SPAWN_FD_MIN   10    /* child fds are parked here before dup2 */
#define CB_SPAWN_ARGV_MAX 128   /* launcher argv entries */
#define CB_IN_CHUNK       65536 /* event bytes read per read(2) */

int64_t cb_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cb_runner_init(cb_runner_t *r) {
    memset(r, 0, sizeof *r);
    r->pid = -1;
    r->runner_pid = -1;
    r->out_fd = r->err_fd = r->ev_fd = r->rep_fd = r->workdir_fd = -1;
    r->exit_code = r->exit_signal = -1;
}

static void s_close(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

void cb_runner_close(cb_runner_t *r) {
    s_close(&r->out_fd);
    s_close(&r->err_fd);
    s_close(&r->ev_fd);
    s_close(&r->rep_fd);
    s_close(&r->workdir_fd);
    free(r->in);
    free(r->out);
    r->in = r->out = NULL;
    r->in_len = r->in_cap = r->out_len = r->out_off = 0;
    r->state = CB_RUNNER_DOWN;
    r->pid = -1;
}

static int s_park(int fd) {
    int p = fcntl(fd, F_DUPFD_CLOEXEC, CB_SPAWN_FD_MIN);
    if (p < 0) PLOG_E("fcntl(F_DUPFD_CLOEXEC)");
    close(fd);
    return p;
}

int cb_runner_spawn(cb_runner_t *r, const cb_runner_cfg_t *cfg) {
    cb_runner_init(r);
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, ev[2] = {-1, -1}, rep[2] = {-1, -1};
    int devnull = -1, rc = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_ok = false, attr_ok = false;

    if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
        PLOG_E("pipe2");
        goto out;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ev) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rep) < 0) {
        PLOG_E("socketpair");
        goto out;
    }
    devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0) {
        PLOG_E("open(/dev/null)");
        goto out;
    }
    int child[5] = {s_park(devnull), s_park(outp[1]), s_park(errp[1]), s_park(ev[1]),
                    s_park(rep[1])};
    devnull = outp[1] = errp[1] = ev[1] = rep[1] = -1;
    for (int i = 0; i < 5; i++)
        if (child[i] < 0) {
            for (int j = 0; j < 5; j++)
                if (child[j] >= 0) close(child[j]);
            goto out;
        }

    const char *argv[CB_SPAWN_ARGV_MAX];
    size_t argc = 0;
    argv[argc++] = cfg->launcher;
    for (char *const *e = cfg->extra; e && *e && argc < CB_SPAWN_ARGV_MAX - 6; e++)
        argv[argc++] = *e;
    argv[argc++] = "--python";
    argv[argc++] = cfg->python;
    argv[argc++] = "--runner";
    argv[argc++] = cfg->runner;
    argv[argc] = NULL;
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", NULL};

    posix_spawn_file_actions_init(&fa);
    fa_ok = true;
    for (int i = 0; i < 5; i++)
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
    for (int i = 0; i < 5; i++)
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
    cb_set_nonblock(r->out_fd, 1);
    cb_set_nonblock(r->err_fd, 1);
    cb_set_nonblock(r->ev_fd, 1);
    cb_set_nonblock(r->rep_fd, 1);
    r->state = CB_RUNNER_STARTING;
    r->started_ms = cb_now_ms();
    LOG_I("launcher started, pid %d", (int) pid);
    rc = 0;
out:
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    if (attr_ok) posix_spawnattr_destroy(&attr);
    int *fds[] = {&outp[0], &outp[1], &errp[0], &errp[1], &ev[0],
                  &ev[1],   &rep[0],  &rep[1],  &devnull};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        s_close(fds[i]);
    return rc;
}

int cb_runner_read_events(cb_runner_t *r) {
    if (r->ev_fd < 0) return -1;
    for (;;) {
        if (r->in_cap - r->in_len < CB_IN_CHUNK) {
            size_t cap = r->in_cap ? r->in_cap * 2 : CB_IN_CHUNK * 2;
            if (cap > CB_RUNNER_FRAME_MAX + CB_RUNNER_FRAME_HDR + CB_IN_CHUNK) {
                if (r->in_cap - r->in_len == 0) return 0; /* full: let frames drain first */
                cap = r->in_cap;
            }
            if (cap != r->in_cap) {
                uint8_t *n = realloc(r->in, cap);
                if (n == NULL) return 0;
                r->in = n;
                r->in_cap = cap;
            }
        }
        ssize_t got = read(r->ev_fd, r->in + r->in_len, r->in_cap - r->in_len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (got <= 0) {
            if (got < 0) PLOG_W("read(event socket)");
            s_close(&r->ev_fd);
            return -1;
        }
        r->in_len += (size_t) got;
        if (r->in_len >= CB_RUNNER_FRAME_HDR + CB_IN_CHUNK * 4) return 0; /* let the caller parse */
    }
}

int cb_runner_next_frame(cb_runner_t *r, json_t **out) {
    *out = NULL;
    while (r->in_len > 0 && !r->protocol_error) {
        size_t used = 0;
        int rc = cb_frame_extract(r->in, r->in_len, CB_RUNNER_FRAME_MAX, &used, out);
        if (rc == CB_FRAME_NEED) return 0;
        if (rc == CB_FRAME_FATAL) {
            r->protocol_error = true;
            snprintf(r->protocol_what, sizeof r->protocol_what,
                     "a frame length outside 1..%u bytes", (unsigned) CB_RUNNER_FRAME_MAX);
            LOG_W("runner broke the frame protocol: %s", r->protocol_what);
            return 0;
        }
        memmove(r->in, r->in + used, r->in_len - used);
        r->in_len -= used;
        if (rc == CB_FRAME_OK) return 1;
        LOG_W("runner sent a frame that is not a JSON object with a string \"type\"; dropped");
    }
    return 0;
}

int cb_runner_send(cb_runner_t *r, const json_t *frame) {
    uint8_t *buf;
    size_t len;
    if (cb_frame_encode(frame, CB_RUNNER_FRAME_MAX, &buf, &len) < 0) {
        LOG_W("frame for the runner too large or not encodable");
        return -1;
    }
    if (r->out_off == r->out_len) {
        free(r->out);
        r->out = buf;
        r->out_len = len;
        r->out_off = 0;
    } else {
        uint8_t *n = realloc(r->out, r->out_len + len);
        if (n == NULL) {
            free(buf);
            return -1;
        }
        memcpy(n + r->out_len, buf, len);
        free(buf);
        r->out = n;
        r->out_len += len;
    }
    return cb_runner_flush(r);
}

void cb_runner_send_ack(cb_runner_t *r) {
    json_auto_t *ack = json_pack("{s:s}", "type", "ack");
    if (ack) cb_runner_send(r, ack);
}

bool cb_runner_wants_write(const cb_runner_t *r) {
    return r->ev_fd >= 0 && r->out_off < r->out_len;
}

int cb_runner_flush(cb_runner_t *r) {
    while (r->ev_fd >= 0 && r->out_off < r->out_len) {
        ssize_t w = send(r->ev_fd, r->out + r->out_off, r->out_len - r->out_off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (w < 0) {
            PLOG_W("send(event socket)");
            return -1;
        }
        r->out_off += (size_t) w;
    }
    return 0;
}

static void s_report(cb_runner_t *r, char *msg, size_t len, int passed_fd) {
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
    } else if (S_IS("started")) {
        r->runner_pid = (pid_t) strtol(rest, NULL, 10);
    } else if (S_IS("exit")) {
        r->exit_reported = true;
        const char *p;
        if ((p = strstr(rest, "code="))) r->exit_code = (int) strtol(p + 5, NULL, 10);
        if ((p = strstr(rest, "signal="))) r->exit_signal = (int) strtol(p + 7, NULL, 10);
        if ((p = strstr(rest, "oom="))) r->oom = p[4] == '1';
        if ((p = strstr(rest, "reason="))) snprintf(r->reason, sizeof r->reason, "%s", p + 7);
        LOG_I("runner ended: %s", rest);
    } else if (S_IS("fatal")) {
        snprintf(r->fatal, sizeof r->fatal, "%s", rest);
        LOG_E("sandbox set-up failed: %s", rest);
    } else {
        LOG_W("unknown launcher report '%.*s'", (int) kind_len, msg);
    }
#undef S_IS
    if (passed_fd >= 0) close(passed_fd);
}

int cb_runner_read_reports(cb_runner_t *r) {
    while (r->rep_fd >= 0) {
        char buf[CB_REPORT_LINE_MAX + 1];
        union {
            struct cmsghdr h;
            char space[CMSG_SPACE(sizeof(int) * 4)];
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
                int fds[4];
                memcpy(fds, CMSG_DATA(c),
                       nfd * sizeof(int) < sizeof fds ? nfd * sizeof(int) : sizeof fds);
                for (size_t i = 0; i < nfd && i < 4; i++) {
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

void cb_runner_interrupt(cb_runner_t *r) {
    if (r->pid > 0 && !r->reaped) kill(r->pid, SIGINT);
}

void cb_runner_kill(cb_runner_t *r) {
    if (r->pid > 0 && !r->reaped) kill(r->pid, SIGTERM);
    if (r->state != CB_RUNNER_DOWN) r->state = CB_RUNNER_DYING;
}

void cb_runner_reaped(cb_runner_t *r, int status) {
    r->reaped = true;
    r->wait_status = status;
    if (!r->exit_reported) {
        /* The launcher died without reporting: describe the launcher itself. */
        if (WIFEXITED(status)) r->exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) r->exit_signal = WTERMSIG(status);
    }
}

void cb_runner_describe_exit(const cb_runner_t *r, char *buf, size_t len) {
    if (r->protocol_error) {
        snprintf(buf, len, "broke the kernel's frame protocol (%s) and was stopped",
                 r->protocol_what);
    } else if (r->oom) {
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
