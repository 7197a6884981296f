/*
 * warm_tpl.c - starting a warm-start template and supervising it (see warm.h).
 *
 *   launcher ── fork ─▶ T0 ── fork ─▶ supervisor (detached, host view)   T0 exits
 *                                      <key>.lock held (flock), cgroup
 *                                      cellblock-w<pid>-<start> with limits,
 *                                      the listening socket, the .so as a memfd
 *                                        └ fork ─▶ template: joins the cgroup,
 *                                           new mount, net, ipc and uts
 *                                           namespaces, the sandbox's own file
 *                                           system built from the same plan
 *                                           (less one kernel's --ro-bind and
 *                                           --workdir-source), pivot_root,
 *                                           then execs the runner's
 *                                           interpreter with the runner's
 *                                           argv and environment
 *
 * So the template's Python starts as a cold runner would (same argv, same
 * environment, same paths: /opt/cellblock/runner, /home/user as cwd and HOME,
 * /tmp), and what it imports finds what a sandbox would.  runner.py tells a
 * template by fd 3 (a pipe with the configuration, not the event socket).
 * The template stays in the host's user and pid namespaces: its forks must
 * be able to enter the sandboxes' (isolate/warm_enter.h).
 *
 * The supervisor renames the socket into place once the template says it is
 * ready, and when the template ends (idle, stale, killed) removes the socket,
 * the pid file and the cgroup.  Its group is swept like any other once it is
 * gone (isolate/cgroup.c knows the 'w' names).
 */
#include "launcher/warm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/net.h"
#include "isolate/util.h"
#include "launcher/sandbox_priv.h"
#include "launcher/warm_limits.h"

static int s_path(char *buf, size_t len, const char *key, const char *suffix) {
    int n = snprintf(buf, len, "%s/%s%s", CB_WARM_DIR, key, suffix);
    return n < 0 || (size_t) n >= len ? -1 : 0;
}

bool cb_warm_failed_lately(const char *key) {
    char path[CB_PATH_MAX];
    struct stat st;
    if (s_path(path, sizeof path, key, ".failed") < 0 || lstat(path, &st) < 0) return false;
    return time(NULL) - st.st_mtime < CB_WARM_RETRY_S;
}

int cb_warm_last_end(const char *key, char *buf, size_t len) {
    char path[CB_PATH_MAX];
    if (len == 0 || s_path(path, sizeof path, key, ".ended") < 0) return -1;
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
    if (n <= 0) return -1;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

bool cb_warm_busy(const char *key) {
    char path[CB_PATH_MAX];
    if (s_path(path, sizeof path, key, ".lock") < 0) return false;
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) return false; /* closing releases it */
    return errno == EWOULDBLOCK;
}

void cb_warm_retire(const char *key) {
    char path[CB_PATH_MAX], buf[CB_WARM_FILE_MAX] = "";
    if (s_path(path, sizeof path, key, ".pid") < 0) return;
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (n <= 0) return;
    buf[n] = '\0';
    long pid = 0;
    unsigned long long start = 0;
    /* the supervisor, named by pid and start time (a reused pid is not it) */
    if (sscanf(buf, "%ld %llu", &pid, &start) == 2 && pid > 1 &&
        cb_proc_start_time((pid_t) pid) == start)
        (void) kill((pid_t) pid, SIGTERM);
}

/* ---- the template, between fork and exec (no malloc, no stdio) ------------------ */

typedef struct {
    cb_sandbox_t *sb;        /* the launcher's plan (its exec plan is the runner's) */
    cb_mount_plan_t *mounts; /* the template's filesystem */
    cb_cgroup_t *cg;         /* its cgroup */
    int fds[4];              /* config, listen, so, ready: at CB_WARM_TPL_FD_CONFIG.. */
    int out;                 /* its stdout and stderr: a pipe, as a runner's are */
    pid_t supervisor;        /* its parent */
} s_tpl_t;

__attribute__((noreturn)) static void s_tpl_fail(const char *what) {
    int e = errno;
    char msg[CB_REPORT_LINE_MAX];
    int n = snprintf(msg, sizeof msg, "cellblock-warm: template set-up failed: %s: %s\n", what,
                     strerror(e));
    if (n > 0) (void) cb_write_all(2, msg, (size_t) n < sizeof msg ? (size_t) n : sizeof msg - 1);
    _exit(127);
}

__attribute__((noreturn)) static void s_tpl_main(const s_tpl_t *t) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != t->supervisor) _exit(127);
    /* a pipe, not the log file: the streams Python makes on fds 1 and 2 keep
     * what they learnt of them (a file is seekable), and the runners forked
     * from us write to pipes */
    if (dup2(t->out, 1) < 0 || dup2(t->out, 2) < 0) _exit(127);
    if (cb_cgroup_add(t->cg, getpid()) < 0) s_tpl_fail("joining its cgroup");
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
        s_tpl_fail("unshare");
    if (sethostname(CB_SANDBOX_HOSTNAME, sizeof CB_SANDBOX_HOSTNAME - 1) < 0)
        s_tpl_fail("sethostname");
    if (cb_net_lo_up() < 0) s_tpl_fail("bringing up loopback");
    int failed = -1;
    if (cb_mount_run(t->mounts, &failed) < 0) s_tpl_fail("building its filesystem");
    if (chdir(CB_SANDBOX_HOME) < 0) s_tpl_fail("chdir");
    /* its fds at fixed numbers: park them above, then put them in place */
    int parked[4];
    for (int i = 0; i < 4; i++)
        if ((parked[i] = fcntl(t->fds[i], F_DUPFD_CLOEXEC, CB_WARM_TPL_FD_READY + 1)) < 0)
            s_tpl_fail("fcntl");
    for (int i = 0; i < 4; i++)
        if (dup2(parked[i], CB_WARM_TPL_FD_CONFIG + i) < 0) s_tpl_fail("dup2");
    if (syscall(SYS_close_range, CB_WARM_TPL_FD_READY + 1, ~0U, 0) < 0) s_tpl_fail("close_range");
    cb_child_reset_signals();
    execve(t->sb->exec.python, t->sb->exec.argv, t->sb->exec.envp);
    s_tpl_fail("execve");
}

/* ---- the supervisor ------------------------------------------------------------------ */

static int s_memfd_of(const char *path) {
    cb_autofd int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int fd = (int) syscall(SYS_memfd_create, CB_WARM_MEMFD_NAME, MFD_CLOEXEC);
    if (fd < 0) return -1;
    char buf[CB_WARM_COPY_CHUNK];
    size_t total = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 || (total += (size_t) n) > CB_WARM_SO_MAX ||
            (n > 0 && cb_write_all(fd, buf, (size_t) n) < 0)) {
            close(fd);
            return -1;
        }
        if (n == 0) return fd;
    }
}

static int s_listen(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path) >= (int) sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    (void) unlink(path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || chmod(path, CB_WARM_FILE_MODE) < 0 ||
        listen(fd, CB_WARM_BACKLOG) < 0) {
        int e = errno;
        close(fd);
        (void) unlink(path);
        errno = e;
        return -1;
    }
    return fd;
}

static int s_config(int fd, const char *key, const char *preload) {
    char buf[CB_WARM_CONFIG_MAX];
    int n =
        snprintf(buf, sizeof buf, "key=%s\nidle=%d\nmax_age=%d\nspares=%d\npreload=%s\n", key,
                 CB_WARM_IDLE_S, CB_WARM_MAX_AGE_S, CB_WARM_SPARES, preload != NULL ? preload : "");
    if (n < 0 || (size_t) n >= sizeof buf) {
        errno = E2BIG;
        return -1;
    }
    return cb_write_all(fd, buf, (size_t) n);
}

/* The template's output (the pipe t.out reads) into the log, at most
 * CB_WARM_LOG_MAX bytes in all; *out becomes -1 at EOF. */
static void s_pump(int *out, int log, size_t *logged) {
    char buf[CB_WARM_COPY_CHUNK];
    for (;;) {
        ssize_t n = read(*out, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            close(*out);
            *out = -1;
        }
        if (n <= 0) return;
        size_t k = *logged + (size_t) n > CB_WARM_LOG_MAX ? CB_WARM_LOG_MAX - *logged : (size_t) n;
        if (k > 0 && cb_write_all(log, buf, k) == 0) *logged += k;
    }
}

/* Waits for one byte on `ready` while watching the signals: 1 ready, 0 the
 * template died or did not get ready in time, -1 told to stop. */
static int s_wait_ready(int ready, int sfd, int *out, int log, size_t *logged) {
    int64_t deadline = cb_now_ms() + CB_WARM_BUILD_MS;
    for (int64_t left; (left = deadline - cb_now_ms()) > 0;) {
        struct pollfd pf[3] = {{.fd = ready, .events = POLLIN},
                               {.fd = sfd, .events = POLLIN},
                               {.fd = *out, .events = POLLIN}};
        int r = poll(pf, 3, (int) left);
        if (r < 0 && errno != EINTR) return 0;
        if (r <= 0) continue;
        if (pf[2].revents) s_pump(out, log, logged);
        if (pf[0].revents) {
            char b;
            return read(ready, &b, 1) == 1 ? 1 : 0;
        }
        struct signalfd_siginfo si;
        if (pf[1].revents && read(sfd, &si, sizeof si) == (ssize_t) sizeof si &&
            si.ssi_signo != SIGCHLD)
            return -1;
    }
    return 0;
}

/* Until the template ends (or we are told to stop, then it is stopped): its
 * wait status; *stopped: we stopped it. */
static int s_watch(pid_t tpl, int sfd, int *out, int log, size_t *logged, bool *stopped) {
    bool stopping = false;
    for (;;) {
        struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = *out, .events = POLLIN}};
        int r = poll(pf, 2, stopping ? CB_WARM_TERM_GRACE_MS : -1);
        if (r == 0) { /* the grace is over */
            (void) kill(tpl, SIGKILL);
            stopping = false;
        }
        if (r > 0 && pf[1].revents) s_pump(out, log, logged);
        struct signalfd_siginfo si;
        while (r > 0 && pf[0].revents && read(sfd, &si, sizeof si) == (ssize_t) sizeof si) {
            if (si.ssi_signo == SIGCHLD) continue;
            if (!stopping) (void) kill(tpl, SIGTERM);
            stopping = *stopped = true;
        }
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            if (p == tpl) return st;
    }
}

/* <key>.ended: how the template that served ended (the next launcher's log
 * says it when it starts cold).  From its wait status only: the template
 * runs the sandbox's Python, whose site-packages anyone may have written. */
static void s_record_end(const char *key, int st, bool stopped) {
    char path[CB_PATH_MAX], line[CB_WARM_ENDED_MAX];
    if (s_path(path, sizeof path, key, ".ended") < 0) return;
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (stopped)
        (void) snprintf(line, sizeof line, "ended: stopped (its supervisor was told to stop)");
    else if (code == 0)
        (void) snprintf(line, sizeof line, "ended: idle or at its maximum age");
    else if (code == CB_WARM_EXIT_STALE)
        (void) snprintf(line, sizeof line,
                        "ended: stale (a directory it imported from changed: packages "
                        "installed, upgraded or removed)");
    else if (WIFSIGNALED(st))
        (void) snprintf(line, sizeof line, "died: killed by signal %d (%s)", WTERMSIG(st),
                        strsignal(WTERMSIG(st)));
    else
        (void) snprintf(line, sizeof line, "died: exited with code %d", code);
    cb_autofd int fd =
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, CB_WARM_FILE_MODE);
    if (fd >= 0 && cb_write_all(fd, line, strlen(line)) == 0) (void) cb_write_all(fd, "\n", 1);
    LOG_I("template %s %s", key, line);
}

static void s_unlink_if(const char *path, const struct stat *was) {
    struct stat st;
    if (lstat(path, &st) == 0 && st.st_ino == was->st_ino && st.st_dev == was->st_dev)
        (void) unlink(path);
}

/* The files of keys no template has used for CB_WARM_SWEEP_AGE_S (far beyond
 * CB_WARM_MAX_AGE_S): every configuration a kernel ever had leaves a lock, a
 * log and how its last template ended; without this they would pile up.  A
 * lock is removed only when no supervisor holds it. */
/* name's suffix when it is a key's file the sweep may remove, else NULL */
static const char *s_sweepable(const char *name) {
    static const char *const suffixes[] = {".ended", ".log", ".failed", ".lock"};
    size_t hex = strspn(name, "0123456789abcdef");
    if (hex != 2 * CB_WARM_KEY_BYTES) return NULL;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (strcmp(name + hex, suffixes[i]) == 0) return suffixes[i];
    return NULL;
}

static void s_sweep_old(void) {
    int dfd = open(CB_WARM_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return;
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        return;
    }
    time_t old = time(NULL) - CB_WARM_SWEEP_AGE_S;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        const char *suffix = s_sweepable(e->d_name);
        if (suffix == NULL || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_mtime > old)
            continue;
        /* a lock goes only while we hold it: no supervisor has it */
        cb_autofd int l = -1;
        if (strcmp(suffix, ".lock") == 0 &&
            ((l = openat(dfd, e->d_name, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
             flock(l, LOCK_EX | LOCK_NB) < 0))
            continue; /* a supervisor's */
        (void) unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

__attribute__((noreturn)) static void s_supervise(const char *key, const char *so,
                                                  cb_sandbox_t *sb) {
    char lock[CB_PATH_MAX], sock[CB_PATH_MAX], tmp[CB_PATH_MAX], pidf[CB_PATH_MAX],
        logp[CB_PATH_MAX];
    if (s_path(lock, sizeof lock, key, ".lock") < 0 ||
        s_path(sock, sizeof sock, key, ".sock") < 0 || s_path(tmp, sizeof tmp, key, ".new") < 0 ||
        s_path(pidf, sizeof pidf, key, ".pid") < 0 || s_path(logp, sizeof logp, key, ".log") < 0)
        _exit(1);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, CB_WARM_FILE_MODE);
    if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) < 0) _exit(0); /* another one builds or serves */
    s_sweep_old();
    int log = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                   CB_WARM_FILE_MODE);
    if (log < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0) _exit(1);
    cb_log_set_fd(2);
    cb_log_set_ident(CB_WARM_SUPERVISOR);
    cb_log_threshold = CB_LOG_INFO;
    char name[CB_CGROUP_NAME_MAX], why[CB_REPORT_LINE_MAX / 2];
    cb_cgroup_limits_t lim = {
        .memory_mb = CB_WARM_MEMORY_MB, .pids = CB_WARM_PIDS, .cpus = CB_WARM_CPUS};
    cb_cgroup_t *cg = NULL;
    if (cb_cgroup_warm_name(getpid(), name, sizeof name) < 0 ||
        (cg = cb_cgroup_new_auto(NULL, name, &lim, why, sizeof why)) == NULL) {
        LOG_E("no template without a cgroup to bound it: %s", why);
        _exit(1);
    }
    int sfd = cb_signalfd_supervision();
    int cfg[2] = {-1, -1}, rdy[2] = {-1, -1};
    static cb_mount_plan_t mounts; /* large: off the stack */
    cb_mount_plan_init(&mounts);
    int outp[2] = {-1, -1};
    size_t logged = 0;
    if (pipe2(outp, O_CLOEXEC) < 0 || cb_set_nonblock(outp[0], 1) < 0) {
        PLOG_E("pipe2");
        cb_cgroup_destroy(&cg);
        _exit(1);
    }
    s_tpl_t t = {.sb = sb, .mounts = &mounts, .cg = cg, .out = outp[1], .supervisor = getpid()};
    t.fds[1] = s_listen(tmp);
    t.fds[2] = s_memfd_of(so);
    if (sfd < 0 || t.fds[1] < 0 || t.fds[2] < 0 || pipe2(cfg, O_CLOEXEC) < 0 ||
        pipe2(rdy, O_CLOEXEC) < 0 || cb_sb_plan_template_mounts(sb, &mounts) < 0 ||
        s_config(cfg[1], key, sb->opts->preload) < 0) {
        PLOG_E("preparing the template");
        (void) unlink(tmp);
        cb_cgroup_destroy(&cg);
        _exit(1);
    }
    close(cfg[1]);
    t.fds[0] = cfg[0];
    t.fds[3] = rdy[1];
    pid_t tpl = fork();
    if (tpl == 0) s_tpl_main(&t);
    close(cfg[0]);
    close(rdy[1]);
    close(t.fds[2]);
    close(outp[1]);
    int ready = tpl < 0 ? 0 : s_wait_ready(rdy[0], sfd, &outp[0], log, &logged);
    struct stat st_sock = {0}, st_pid = {0};
    if (ready == 1 && rename(tmp, sock) == 0 && lstat(sock, &st_sock) == 0) {
        char buf[CB_WARM_FILE_MAX];
        int n = snprintf(buf, sizeof buf, "%ld %llu %ld\n", (long) getpid(),
                         cb_proc_start_time(getpid()), (long) tpl);
        cb_autofd int pf =
            open(pidf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, CB_WARM_FILE_MODE);
        if (pf >= 0 && n > 0) (void) cb_write_all(pf, buf, (size_t) n);
        if (pf >= 0) (void) fstat(pf, &st_pid);
        LOG_I("template %s ready (pid %ld)", key, (long) tpl);
        close(t.fds[1]); /* the template listens; we keep no copy */
        char ended[CB_PATH_MAX];
        if (s_path(ended, sizeof ended, key, ".ended") == 0) (void) unlink(ended);
        bool stopped = false;
        int st = s_watch(tpl, sfd, &outp[0], log, &logged, &stopped);
        s_record_end(key, st, stopped);
    } else {
        LOG_E("template %s %s", key, ready < 0 ? "stopped while starting" : "did not get ready");
        (void) unlink(tmp);
        /* no new build for a while: the next launchers start cold at once */
        char failed[CB_PATH_MAX];
        if (ready == 0 && s_path(failed, sizeof failed, key, ".failed") == 0) {
            int ff = open(failed, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                          CB_WARM_FILE_MODE);
            if (ff >= 0) close(ff);
        }
        if (tpl > 0) {
            (void) kill(tpl, SIGKILL);
            (void) waitpid(tpl, NULL, 0);
        }
    }
    s_unlink_if(sock, &st_sock);
    s_unlink_if(pidf, &st_pid);
    cb_cgroup_destroy(&cg); /* spares and forks still in it die with it */
    LOG_I("template %s ended", key);
    _exit(0);
}

void cb_warm_spawn(const char *key, const char *so, cb_sandbox_t *sb) {
    pid_t t0 = fork();
    if (t0 < 0) {
        PLOG_W("warm start: fork");
        return;
    }
    if (t0 > 0) {
        (void) waitpid(t0, NULL, 0); /* T0 only forks */
        LOG_I("warm start: starting a template for this configuration (%s)", key);
        return;
    }
    /* T0: nothing of the launcher's stays open (its fds 1, 2 are the runner's
     * pipes, and a uid lease is a lock held by an fd) */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(1);
    (void) syscall(SYS_close_range, 3, ~0U, 0);
    cb_log_set_fd(2);
    if (fork() != 0) _exit(0);
    (void) setsid();
    (void) prctl(PR_SET_NAME, CB_WARM_SUPERVISOR);
    s_supervise(key, so, sb);
}
