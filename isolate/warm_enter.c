/*
 * warm_enter.c - a template's fork becomes a sandbox's runner (see
 * warm_enter.h for the process shape and isolate/warm_proto.h for the
 * request).
 *
 * The runner ends up exactly where a cold one does: in the sandbox's cgroup
 * and every namespace of its init, a child of that init, in a new session,
 * with the launcher's process attributes and the sandbox's rlimits, its ids
 * inside the user namespace, no capabilities, no_new_privs, securebits
 * locked, the parent-death signal armed, cwd the home, Landlock's write
 * rules, fds 0..n-1 only, and the launcher's seccomp filter -- each applied
 * by the same isolate/ call the cold path makes, in the same order.  The
 * template itself is host root, so the launcher's attributes (and rlimits
 * above the template's) are set while this process still is; then the
 * network namespace is joined (it may be the host's, with --network host),
 * then the user namespace, then the rest.
 *
 * Python's fork protocol is kept (PyOS_BeforeFork before the vfork,
 * PyOS_AfterFork_Child in R, _Parent in C): these are weak references, so
 * that the launcher, which links this file for cb_warm_adopt, needs no
 * libpython.  No malloc, no stdio, no logging between the forks and the
 * return to Python.
 */
#include "isolate/warm_enter.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isolate/caps.h"
#include "isolate/childstep.h"
#include "isolate/landlock.h"
#include "isolate/sandbox_limits.h"
#include "isolate/seccomp_filter.h"
#include "isolate/util.h"
#include "isolate/warm_proto.h"

#define S_ADOPT_POLL_NS  50000L /* between looks at getppid() while P exits */
#define S_ADOPT_MS       1000   /* P exits within this */
#define S_FD_PARK        64     /* the runner's fds are parked here before dup2 */
#define S_ERR_SLOT       90     /* R keeps the error pipe at or above this until Python closes it */
#define S_OOM_ADJ_MAX    16     /* "-1000\n" */
#define S_PID_MAX        16     /* a pid in decimal */
#define S_HANDSHAKE_BYTE 'r'

extern void PyOS_BeforeFork(void) __attribute__((weak));
extern void PyOS_AfterFork_Parent(void) __attribute__((weak));
extern void PyOS_AfterFork_Child(void) __attribute__((weak));

/* ---- the request --------------------------------------------------------------- */

static int s_fail_why(char *why, size_t len, const char *msg) {
    (void) snprintf(why, len, "%s", msg);
    return -1;
}

int cb_warm_check(const void *buf, size_t len, int nfds, const char *key, char *why,
                  size_t why_len) {
    const cb_warm_req_t *q = buf;
    if (len < sizeof *q || q->magic != CB_WARM_MAGIC)
        return s_fail_why(why, why_len, "not a warm-start request");
    if (q->version != CB_WARM_VERSION || q->header_size != sizeof *q)
        return s_fail_why(why, why_len, "request from another build (version or layout)");
    if (memchr(q->key, '\0', sizeof q->key) == NULL || strcmp(q->key, key) != 0)
        return s_fail_why(why, why_len, "request for another template (key)");
    if (len != sizeof *q) return s_fail_why(why, why_len, "wrong request length");
    if (q->init_pid < 0) return s_fail_why(why, why_len, "bad init pid");
    if (q->n_runner_fds == 0 || q->n_runner_fds > CB_WARM_RUNNER_FDS ||
        q->n_cgroup_fds > CB_WARM_CGROUP_FDS ||
        (size_t) nfds != CB_WARM_FD_FIXED + q->n_runner_fds + q->n_cgroup_fds)
        return s_fail_why(why, why_len, "wrong number of fds");
    if (q->n_limits > CB_WARM_RLIMITS_ALL || q->rlimits.n < 0 || q->rlimits.n > CB_RLIMITS_MAX)
        return s_fail_why(why, why_len, "bad rlimits");
    if (q->uid == 0 || q->gid == 0 || q->last_cap < 0) return s_fail_why(why, why_len, "bad ids");
    return 0;
}

/* ---- C: the launcher's attributes, the cgroup, the namespaces ------------------------ */

static void s_attrs(const cb_warm_req_t *q, int errfd) {
    for (uint32_t i = 0; i < q->n_limits; i++)
        if (setrlimit((int) i, &q->limits[i]) < 0)
            cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_ATTRS);
    (void) umask((mode_t) q->umask & 0777);
    if (setpriority(PRIO_PROCESS, 0, q->nice) < 0)
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_ATTRS);
    char v[S_OOM_ADJ_MAX];
    int n = snprintf(v, sizeof v, "%d", (int) q->oom_score_adj);
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || n < 0 || write(fd, v, (size_t) n) != n)
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_ATTRS);
    close(fd);
    if (sched_setaffinity(0, sizeof q->affinity, &q->affinity) < 0)
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_ATTRS);
}

/* The sandbox's init (unless clone3 put it there), then this process, into
 * the sandbox's cgroup in every hierarchy: files the launcher opened, whose
 * credentials the kernel checks; "0" is the writer. */
static void s_cgroup(const cb_warm_req_t *q, const int *fds, int errfd) {
    const int *cg = fds + CB_WARM_FD_FIXED + q->n_runner_fds;
    char v[S_PID_MAX];
    int n = snprintf(v, sizeof v, "%d", (int) q->init_pid);
    for (uint32_t i = 0; i < q->n_cgroup_fds; i++)
        if ((q->init_pid > 0 && write(cg[i], v, (size_t) n) != n) || write(cg[i], "0", 1) != 1)
            cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_CGROUP);
}

static void s_join(const int *fds, int errfd) {
    static const struct {
        cb_warm_fd_t fd;
        int type;
    } order[] = {{CB_WARM_FD_NET, CLONE_NEWNET},
                 {CB_WARM_FD_USER, CLONE_NEWUSER},
                 {CB_WARM_FD_IPC, CLONE_NEWIPC},
                 {CB_WARM_FD_UTS, CLONE_NEWUTS},
                 {CB_WARM_FD_PID, CLONE_NEWPID}};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (setns(fds[order[i].fd], order[i].type) < 0)
            cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_SETNS);
}

/* P, the vfork child: forks R into the pid namespace and exits, so that R's
 * parent dies inside the namespace.  Only R returns.  A function of its own,
 * so P's locals live below C's frame, which P shares. */
__attribute__((noinline)) static pid_t s_fork_in_ns(void) {
    pid_t r = fork();
    if (r != 0) _exit(r < 0 ? 127 : 0);
    return 0;
}

/* ---- R: the file system, adoption, then the cold runner's steps -------------------- */

/* The second message: once init has built the file system, its mount and
 * cgroup namespaces (joining the mount namespace sets root and cwd to its
 * root). */
static struct {
    cb_warm_fs_t m;                                /* the second message's header */
    struct sock_filter filter[CB_WARM_FILTER_MAX]; /* and the launcher's seccomp filter */
} s_fs;

static void s_join_fs(int conn, int errfd) {
    cb_warm_fs_t *m = &s_fs.m;
    int fds[CB_WARM_FS_FDS];
    size_t got = 0;
    ssize_t r = cb_recv_with_fds(conn, &s_fs, sizeof s_fs, fds, CB_WARM_FS_FDS, &got, 0);
    if (r < (ssize_t) sizeof *m || m->magic != CB_WARM_FS_MAGIC || m->filter_len == 0 ||
        m->filter_len > CB_WARM_FILTER_MAX ||
        (size_t) r != sizeof *m + m->filter_len * sizeof(struct sock_filter) ||
        got != CB_WARM_FS_FDS) {
        if (r >= 0) errno = EPROTO;
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_REQUEST);
    }
    if (setns(fds[CB_WARM_FS_MNT], CLONE_NEWNS) < 0 ||
        setns(fds[CB_WARM_FS_CGROUP], CLONE_NEWCGROUP) < 0)
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_SETNS);
    close(fds[0]);
    close(fds[1]);
}

static void s_adopted(int errfd) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = S_ADOPT_POLL_NS};
    for (int64_t until = cb_now_ms() + S_ADOPT_MS; getppid() != 1;) {
        if (cb_now_ms() >= until) {
            errno = ETIMEDOUT;
            cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_ADOPT);
        }
        (void) nanosleep(&ts, NULL);
    }
    /* init is our parent now: die with it, as a cold runner does */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != 1)
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_ADOPT);
}

static void s_handshake(int sock, int errfd) {
    char b = S_HANDSHAKE_BYTE;
    ssize_t r;
    do
        r = send(sock, &b, 1, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r != 1) cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_HANDSHAKE);
    do
        r = read(sock, &b, 1);
    while (r < 0 && errno == EINTR);
    if (r != 1 || b != S_HANDSHAKE_BYTE) {
        if (r >= 0) errno = EPROTO;
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_HANDSHAKE);
    }
}

/* fds 0..n-1 from the request, the error pipe at S_ERR_SLOT or above,
 * nothing else (the template's own fds included: Python forgets them,
 * cb_warm.py).  Returns the error pipe's new number.  F_DUPFD, never dup3
 * onto a fixed number: the template's fds and the parked ones may already
 * sit there (and dup3 of an fd onto itself is EINVAL). */
static int s_fds(const cb_warm_req_t *q, const int *fds, int errfd) {
    int parked[CB_WARM_RUNNER_FDS];
    const int *src = fds + CB_WARM_FD_FIXED;
    for (uint32_t i = 0; i < q->n_runner_fds; i++) {
        parked[i] = fcntl(src[i], F_DUPFD_CLOEXEC, S_FD_PARK);
        if (parked[i] < 0) cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_FDS);
    }
    int moved = fcntl(errfd, F_DUPFD_CLOEXEC, S_ERR_SLOT);
    if (moved < 0) cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_FDS);
    errfd = moved;
    for (uint32_t i = 0; i < q->n_runner_fds; i++)
        if (dup2(parked[i], (int) i) < 0) cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_FDS);
    if (syscall(SYS_close_range, q->n_runner_fds, (unsigned) errfd - 1, 0) < 0 ||
        syscall(SYS_close_range, (unsigned) errfd + 1, ~0U, 0) < 0)
        cb_child_fail(errfd, CB_STEP_FDS, -1);
    return errfd;
}

static void s_runner(const cb_warm_req_t *q, const int *fds, int conn, int *err_fd) {
    int errfd = fds[CB_WARM_FD_ERR];
    s_join_fs(conn, errfd);
    s_adopted(errfd);
    s_handshake(fds[CB_WARM_FD_INIT], errfd);
    errfd = s_fds(q, fds, errfd);
    /* from here on, what launcher/sandbox_init.c's runner does before execve */
    if (setsid() < 0) cb_child_fail(errfd, CB_STEP_SETSID, -1);
    if (cb_rlimits_apply(&q->rlimits) < 0) cb_child_fail(errfd, CB_STEP_RLIMIT, -1);
    if (cb_caps_become(q->uid, q->gid, q->clear_groups != 0) < 0 ||
        cb_caps_drop_all(q->last_cap, false, q->uid, q->gid) < 0)
        cb_child_fail(errfd, CB_STEP_CAPS, -1);
    /* changing credentials cleared the parent-death signal: arm it again;
     * and made the process not dumpable, where a cold runner's execve makes
     * it dumpable again: as a cold runner, its /proc files are its own uid's
     * (init, without capabilities, reads a parked checkpoint's fds there) */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != 1 ||
        prctl(PR_SET_DUMPABLE, 1) < 0)
        cb_child_fail(errfd, CB_STEP_CAPS, -1);
    if (chdir(CB_SANDBOX_HOME) < 0) cb_child_fail(errfd, CB_STEP_CHDIR, -1);
    if (q->landlock_abi > 0 &&
        cb_landlock_apply(q->landlock_abi, cb_landlock_sandbox_dirs, cb_landlock_sandbox_files) < 0)
        cb_child_fail(errfd, CB_STEP_LANDLOCK, -1);
    cb_seccomp_t f = {.prog = {.len = (unsigned short) s_fs.m.filter_len, .filter = s_fs.filter}};
    if (cb_seccomp_install(&f) < 0) cb_child_fail(errfd, CB_STEP_SECCOMP, -1);
    *err_fd = errfd;
}

static const cb_warm_req_t *s_checked(const void *buf, size_t len, const int *fds, int nfds) {
    const cb_warm_req_t *q = buf;
    char why[CB_WARM_REASON_MAX];
    if (nfds <= CB_WARM_FD_ERR) _exit(127);
    if (cb_warm_check(buf, len, nfds, q->key, why, sizeof why) < 0) {
        errno = EPROTO;
        cb_child_fail(fds[CB_WARM_FD_ERR], CB_STEP_WARM, CB_WARM_STAGE_REQUEST);
    }
    return q;
}

void cb_warm_attach(const void *buf, size_t len, const int *fds, int nfds) {
    const cb_warm_req_t *q = s_checked(buf, len, fds, nfds);
    s_attrs(q, fds[CB_WARM_FD_ERR]);
    s_cgroup(q, fds, fds[CB_WARM_FD_ERR]);
}

int cb_warm_enter(const void *buf, size_t len, const int *fds, int nfds, int conn, int *err_fd) {
    const cb_warm_req_t *q = s_checked(buf, len, fds, nfds);
    int errfd = fds[CB_WARM_FD_ERR];
    s_join(fds, errfd);
    sigset_t all, old;
    sigfillset(&all);
    (void) sigprocmask(SIG_SETMASK, &all, &old);
    if (PyOS_BeforeFork) PyOS_BeforeFork();
    pid_t p = vfork();
    if (p == 0 && s_fork_in_ns() == 0) {
        /* R: a child of P, which has exited or is about to */
        if (PyOS_AfterFork_Child) PyOS_AfterFork_Child();
        (void) sigprocmask(SIG_SETMASK, &old, NULL);
        s_runner(q, fds, conn, err_fd);
        return 0;
    }
    int e = errno;
    if (PyOS_AfterFork_Parent) PyOS_AfterFork_Parent();
    (void) sigprocmask(SIG_SETMASK, &old, NULL);
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        errno = p < 0 ? e : EAGAIN;
        cb_child_fail(errfd, CB_STEP_WARM, CB_WARM_STAGE_FORK);
    }
    return 1;
}

void cb_warm_report(int err_fd, int err) {
    cb_child_err_t e = {.step = CB_STEP_WARM, .err = err, .arg = CB_WARM_STAGE_PYTHON};
    (void) cb_write_all(err_fd, &e, sizeof e);
}

/* ---- the sandbox's init ------------------------------------------------------------ */

int cb_warm_adopt(int sock) {
    char b = 0;
    struct iovec iov = {.iov_base = &b, .iov_len = 1};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(struct ucred))];
    } cm;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    ssize_t r;
    do
        r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        if (r == 0) errno = ECONNRESET;
        return -1;
    }
    pid_t pid = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
            struct ucred uc;
            memcpy(&uc, CMSG_DATA(c), sizeof uc);
            pid = uc.pid;
        }
    /* the kernel's word for who sent it, and it must be our child by now */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (b != S_HANDSHAKE_BYTE || pid <= 1 ||
        waitid(P_PID, (id_t) pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
        errno = EPROTO;
        return -1;
    }
    do
        r = send(sock, &b, 1, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r == 1 ? pid : -1;
}
