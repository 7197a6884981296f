/*
 * tier.c - dispatch to the isolation tiers (see tier.h), and what they share:
 * the locations of the tier's files and the supervisor's exec handshake.
 */
#include "tiers/tier.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isolate/util.h"

#include "tiers/tier_impl.h"

struct cb_tier {
    cb_isolation_t kind; /* gvisor or microvm */
    void *impl;          /* cb_gvisor_t / cb_microvm_t */
};

cb_tier_t *cb_tier_new(const cb_options_t *opts, char *why, size_t why_len) {
    if (why_len > 0) why[0] = '\0';
    if (opts->isolation == CB_ISOLATION_NAMESPACES) return NULL;
    cb_tier_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        (void) snprintf(why, why_len, "out of memory");
        return NULL;
    }
    t->kind = opts->isolation;
    t->impl = t->kind == CB_ISOLATION_GVISOR ? (void *) cb_gvisor_new(opts, why, why_len)
                                             : (void *) cb_microvm_new(opts, why, why_len);
    if (t->impl == NULL) {
        if (why_len > 0 && why[0] == '\0') (void) snprintf(why, why_len, "out of memory");
        free(t);
        return NULL;
    }
    return t;
}

void cb_tier_set_image(cb_tier_t *t, int fd) {
    if (t != NULL && t->kind == CB_ISOLATION_GVISOR)
        cb_gvisor_set_image(t->impl, fd);
    else if (fd >= 0)
        close(fd);
}

void cb_tier_destroy(cb_tier_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_tier_t *t = *self_p;
    *self_p = NULL;
    if (t->kind == CB_ISOLATION_GVISOR) {
        cb_gvisor_t *g = t->impl;
        cb_gvisor_destroy(&g);
    } else {
        cb_microvm_t *m = t->impl;
        cb_microvm_destroy(&m);
    }
    free(t);
}

int cb_tier_plan(cb_tier_t *t, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim, unsigned long uid,
                 unsigned long gid, const char *runner, char *const *envp, char *why,
                 size_t why_len) {
    if (t->kind == CB_ISOLATION_GVISOR)
        return cb_gvisor_plan(t->impl, mounts, lim, uid, gid, runner, envp, why, why_len);
    return cb_microvm_plan(t->impl, mounts, lim, uid, gid, runner, envp, why, why_len);
}

bool cb_tier_privileged(const cb_tier_t *t) { return t != NULL && t->kind == CB_ISOLATION_GVISOR; }

void cb_tier_run(const cb_tier_t *t, int errfd) {
    if (t->kind == CB_ISOLATION_GVISOR) cb_gvisor_run(t->impl, errfd);
    cb_microvm_run(t->impl, errfd);
}

void cb_tier_describe(const cb_tier_t *t, const char *base, char *buf, size_t len) {
    if (t->kind == CB_ISOLATION_GVISOR)
        cb_gvisor_describe(t->impl, base, buf, len);
    else
        cb_microvm_describe(t->impl, base, buf, len);
}

bool cb_tier_guest_oom(const cb_tier_t *t, int *status) {
    if (t == NULL || t->kind != CB_ISOLATION_MICROVM) return false;
    if (!WIFEXITED(*status) || WEXITSTATUS(*status) != CB_VM_EXIT_OOM) return false;
    *status = SIGKILL; /* a wait status: killed by SIGKILL */
    return true;
}

const char *cb_tier_hint(const cb_tier_t *t, int arg) {
    if (t == NULL) return "";
    return t->kind == CB_ISOLATION_GVISOR ? cb_gvisor_hint(arg) : cb_microvm_hint(arg);
}

static int s_ctl = -1; /* the runner slot's channel to init (checkpoint commands) */

void cb_tier_set_ctl(int fd) { s_ctl = fd; }
int cb_tier_ctl(void) { return s_ctl; }

/* ---- shared helpers ----------------------------------------------------------- */

int cb_tier_helper_dir(char *buf, size_t len) {
    char exe[CB_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL) {
        errno = EINVAL;
        return -1;
    }
    *slash = '\0';
    int w = snprintf(buf, len, "%s", exe);
    if (w < 0 || (size_t) w >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int cb_tier_find_program(const char *const *dirs, const char *name, char *buf, size_t len) {
    for (size_t i = 0; dirs[i] != NULL; i++) {
        char cand[CB_PATH_MAX];
        int w = snprintf(cand, sizeof cand, "%s/%s", dirs[i], name);
        if (w < 0 || (size_t) w >= sizeof cand) continue;
        if (access(cand, X_OK) != 0) continue;
        if (realpath(cand, buf) == NULL || strlen(buf) >= len) continue;
        return 0;
    }
    errno = ENOENT;
    return -1;
}

int cb_tier_argv_add(cb_tier_argv_t *a, const char *fmt, ...) {
    if (a->n >= CB_TIER_ARGV_MAX) {
        errno = E2BIG;
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(a->buf[a->n], CB_TIER_ARG_MAX, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t) w >= CB_TIER_ARG_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    a->argv[a->n] = a->buf[a->n];
    a->n++;
    a->argv[a->n] = NULL;
    return 0;
}

/* ---- a program's answer (launcher side) ---------------------------------------- */

#define S_WAIT_STEP_MS 5 /* how often a bounded wait looks */

static long s_ms_now(void) {
    struct timespec ts;
    (void) clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int cb_tier_wait(pid_t pid, int timeout_ms, int *st) {
    for (int waited = 0;; waited += S_WAIT_STEP_MS) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid) return 0;
        if (r < 0 && errno != EINTR) return -1;
        if (waited >= timeout_ms) {
            (void) kill(pid, SIGKILL);
            (void) waitpid(pid, st, 0);
            return -1;
        }
        struct timespec ts = {0, S_WAIT_STEP_MS * 1000000L};
        (void) nanosleep(&ts, NULL);
    }
}

int cb_tier_output(const char *path, char *const argv[], char *const envp[], char *out,
                   size_t out_len, int timeout_ms) {
    if (out_len == 0) {
        errno = EINVAL;
        return -1;
    }
    out[0] = '\0';
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return -1;
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int fds[] = {null, p[1], p[1]};
    pid_t c = null < 0 ? -1 : cb_tier_spawn(path, argv, envp, fds, 3);
    if (null >= 0) close(null);
    close(p[1]);
    if (c < 0) {
        int e = errno;
        close(p[0]);
        errno = e;
        return -1;
    }
    size_t have = 0;
    char drop[256];
    long deadline = s_ms_now() + timeout_ms;
    for (;;) {
        long left = deadline - s_ms_now();
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (left <= 0) break;
        int n = poll(&pf, 1, (int) left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        /* past the room: read and drop, so the program is not stuck on a full pipe */
        char *to = have < out_len - 1 ? out + have : drop;
        size_t room = have < out_len - 1 ? out_len - 1 - have : sizeof drop;
        ssize_t r = read(p[0], to, room);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (to != drop) have += (size_t) r;
    }
    close(p[0]);
    out[have] = '\0';
    long left = deadline - s_ms_now();
    int st = 0;
    if (cb_tier_wait(c, left > 0 ? (int) left : 0, &st) < 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    return st;
}

/* ---- in the runner's slot ------------------------------------------------------ */

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#define S_FD_PARK 64 /* sources are parked at or above this before dup2 */

pid_t cb_tier_spawn(const char *path, char *const argv[], char *const envp[], const int *fds,
                    size_t nfds) {
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(ep[0]);
        cb_child_reset_signals();
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent) goto fail;
        if (setsid() < 0) goto fail;
        int parked[CB_TIER_FDS_MAX];
        if (nfds > sizeof parked / sizeof parked[0]) {
            errno = EINVAL;
            goto fail;
        }
        /* park first: a source may sit on another slot's number */
        for (size_t i = 0; i < nfds; i++)
            if ((parked[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, S_FD_PARK)) < 0) goto fail;
        for (size_t i = 0; i < nfds; i++)
            if (dup2(parked[i], (int) i) < 0) goto fail; /* dup2 clears CLOEXEC */
        if (syscall(SYS_close_range, (unsigned) nfds, ~0U, CLOSE_RANGE_CLOEXEC) < 0) goto fail;
        execve(path, argv, envp);
    fail:;
        int e = errno;
        (void) cb_write_all(ep[1], &e, sizeof e);
        _exit(127);
    }
    close(ep[1]);
    int e = 0;
    ssize_t r;
    do
        r = read(ep[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(ep[0]);
    if (r == (ssize_t) sizeof e) {
        (void) waitpid(pid, NULL, 0);
        errno = e;
        return -1;
    }
    return pid;
}

void cb_tier_block_signals(void) {
    sigset_t all;
    sigfillset(&all);
    (void) sigprocmask(SIG_SETMASK, &all, NULL);
}

void cb_tier_exit_like(int status) {
    /* only signals that end a process are re-raised (the status may come
     * from a guest, which the host does not trust) */
    static const int ending[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,
                                 SIGBUS,  SIGFPE,  SIGKILL, SIGUSR1, SIGSEGV, SIGUSR2,
                                 SIGPIPE, SIGALRM, SIGTERM, SIGXCPU, SIGXFSZ, SIGSYS};
    bool ends = false;
    for (size_t i = 0; WIFSIGNALED(status) && i < sizeof ending / sizeof ending[0]; i++)
        ends = ends || WTERMSIG(status) == ending[i];
    if (WIFSIGNALED(status) && !ends) _exit(128 + (WTERMSIG(status) & 0x7f));
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        (void) sigaction(sig, &sa, NULL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        (void) sigprocmask(SIG_UNBLOCK, &one, NULL);
        (void) kill(getpid(), sig);
        _exit(128 + sig); /* a signal that does not kill (never for ours) */
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 255);
}

int cb_tier_write_file(const char *path, const char *data, size_t len, unsigned mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return -1;
    int rc = cb_write_all(fd, data, len);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}
