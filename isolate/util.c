/*
 * util.c - EINTR-safe fd helpers shared by the kernel, launcher and tests.
 */
#include "isolate/util.h"
#include "isolate/cb_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int cb_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t) w;
    }
    return 0;
}

DIR *cb_opendir_at(int dfd) {
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return NULL;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

int cb_read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        p += r;
        len -= (size_t) r;
    }
    return 0;
}

int cb_set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    return fcntl(fd, F_SETFL, fl);
}

int cb_send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t n) {
    if (n > CB_SCM_FDS_MAX) {
        errno = E2BIG;
        return -1;
    }
    struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * CB_SCM_FDS_MAX)];
    } cm;
    if (n > 0) {
        memset(&cm, 0, sizeof cm);
        mh.msg_control = cm.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    for (;;) {
        if (sendmsg(sock, &mh, MSG_NOSIGNAL) >= 0) return 0;
        if (errno != EINTR) return -1;
    }
}

int cb_send_with_fd(int sock, const void *buf, size_t len, int fd) {
    return cb_send_with_fds(sock, buf, len, &fd, fd >= 0 ? 1 : 0);
}

ssize_t cb_recv_with_fds(int sock, void *buf, size_t len, int *fds, size_t max, size_t *n,
                         int flags) {
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * CB_SCM_FDS_MAX)];
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.space, .msg_controllen = sizeof cm};
    *n = 0;
    ssize_t r;
    do
        r = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    for (struct cmsghdr *c = r >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (*n < max && *n < CB_SCM_FDS_MAX)
                fds[(*n)++] = got;
            else
                close(got);
        }
    }
    return r;
}

ssize_t cb_recv_with_fd(int sock, void *buf, size_t len, int *fd, int flags) {
    size_t n = 0;
    ssize_t r = cb_recv_with_fds(sock, buf, len, fd, 1, &n, flags);
    if (n == 0) *fd = -1;
    return r;
}

int cb_recv_line_with_fd(int sock, char *buf, size_t len, int *fd) {
    ssize_t r = cb_recv_with_fd(sock, buf, len - 1, fd, MSG_DONTWAIT);
    if (r < 0) return -1;
    buf[r] = '\0';
    return (int) r;
}

void cb_fmt_why(char *buf, size_t len, const char *fmt, ...) {
    if (len == 0) return;
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

int cb_signalfd_supervision(void) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    int err = pthread_sigmask(SIG_BLOCK, &mask, NULL);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

int cb_stop_pending(void) {
    sigset_t pending;
    if (sigpending(&pending) < 0) return 0;
    if (sigismember(&pending, SIGTERM) == 1) return SIGTERM;
    if (sigismember(&pending, SIGHUP) == 1) return SIGHUP;
    return 0;
}

int64_t cb_now_ms(void) {
    struct timespec ts;
    (void) clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define S_PROC_STAT_MAX      1024 /* bytes of /proc/PID/stat read */
#define S_STAT_STARTTIME_POS 20   /* starttime: 20th field after "(comm)" */

unsigned long long cb_proc_start_time(pid_t pid) { return cb_proc_start_state(pid, NULL); }

unsigned long long cb_proc_start_state(pid_t pid, char *state) {
    char path[64], buf[S_PROC_STAT_MAX];
    if (state != NULL) *state = '\0';
    if (pid <= 0) return 0;
    (void) snprintf(path, sizeof path, "/proc/%ld/stat", (long) pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    errno = saved;
    if (n <= 0) return 0;
    buf[n] = '\0';
    /* comm may hold spaces and parentheses: fields resume after the last ')' */
    char *p = strrchr(buf, ')');
    if (p == NULL) return 0;
    if (state != NULL && p[1] == ' ') *state = p[2];
    for (int field = 0; field < S_STAT_STARTTIME_POS; field++) {
        while (*p != '\0' && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
        if (*p == '\0') return 0;
    }
    return strtoull(p, NULL, 10);
}
