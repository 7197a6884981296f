/*
 * util.h - scope cleanup (after bubblewrap utils.h) and EINTR-safe fd
 * helpers (after libuv).  cb_autofree/cb_autofd release at scope exit;
 * steal_pointer/steal_fd hand ownership out.
 */
#ifndef CB_UTIL_H
#define CB_UTIL_H

#include <dirent.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

static inline void cb_freep(void *p) { free(*(void **) p); }
static inline void cb_closep(int *fd) {
    if (*fd >= 0) (void) close(*fd); /* never retried on EINTR */
}
#define cb_autofree __attribute__((cleanup(cb_freep)))
#define cb_autofd   __attribute__((cleanup(cb_closep)))

static inline void *cb_steal_pointer(void *pp) {
    void **p = (void **) pp;
    void *v = *p;
    *p = NULL;
    return v;
}
#define steal_pointer(pp) ((__typeof__(*(pp))) cb_steal_pointer(pp))

static inline int steal_fd(int *fd) {
    int v = *fd;
    *fd = -1;
    return v;
}

/* write(2) all of buf, looping on EINTR and short writes. 0 ok, -1 errno. */
int cb_write_all(int fd, const void *buf, size_t len);
/* read(2) exactly len bytes. 0 ok, -1 errno (EPIPE-like: errno=0 on EOF). */
int cb_read_all(int fd, void *buf, size_t len);
/* A DIR stream over the directory open at dfd, with its own descriptor and
 * offset (dfd stays usable for *at calls); closedir it.  NULL with errno. */
DIR *cb_opendir_at(int dfd);
/* Sends len bytes as one message on a unix socket, with the n fds (at most
 * CB_SCM_FDS_MAX) attached by SCM_RIGHTS.  Retries EINTR; no allocation
 * (safe between clone and exec).  0 ok, -1 errno (E2BIG: too many fds). */
int cb_send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t n);
/* The same with one fd, or none when fd < 0. */
int cb_send_with_fd(int sock, const void *buf, size_t len, int fd);
/* Receives one message (at most len bytes) on a unix socket, and the first
 * max fds it carries by SCM_RIGHTS (at most CB_SCM_FDS_MAX) into fds, *n
 * of them (the others are closed).  flags as recvmsg's (MSG_CMSG_CLOEXEC is
 * added); retries EINTR; no allocation.  >0 bytes, 0 the peer closed, -1
 * errno (EAGAIN: nothing now); *n fds kept either way (0 on error). */
ssize_t cb_recv_with_fds(int sock, void *buf, size_t len, int *fds, size_t max, size_t *n,
                         int flags);
/* The same for the first fd only, into *fd (-1 when none). */
ssize_t cb_recv_with_fd(int sock, void *buf, size_t len, int *fd, int flags);
/* cb_recv_with_fd of one datagram that is a line of text, without waiting:
 * buf (len > 0) is NUL-terminated, *fd as above.  >0 its length, 0 the
 * peer closed, -1 errno (EAGAIN: nothing now). */
int cb_recv_line_with_fd(int sock, char *buf, size_t len, int *fd);
/* Formats a reason into buf (len bytes, always terminated); for the
 * "why" out-parameters of the isolate modules. */
void cb_fmt_why(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The supervision signals every cellblock process reads from a signalfd:
 * SIGINT, SIGTERM, SIGHUP, SIGCHLD.  Blocks them in the calling thread
 * (call it before any thread is created, so they inherit the mask) and
 * returns a non-blocking, close-on-exec signalfd for them, or -1 (errno). */
int cb_signalfd_supervision(void);
/* The signal a supervisor ends on (SIGTERM, SIGHUP) if one is pending,
 * blocked as cb_signalfd_supervision leaves them, else 0.  Leaves it
 * pending: for a wait that does not read the signalfd to stop early. */
int cb_stop_pending(void);
/* Set or clear O_NONBLOCK. 0 ok, -1 errno. */
int cb_set_nonblock(int fd, int on);
/* Start time of pid in clock ticks after boot (field 22 of /proc/PID/stat),
 * 0 when there is no such process.  A pid plus its start time names one
 * process for good: a reused pid has a later start time. */
/* Milliseconds of CLOCK_MONOTONIC: deadlines and rates. */
int64_t cb_now_ms(void);
unsigned long long cb_proc_start_time(pid_t pid);
/* The same, and the process's state letter in *state (/proc/PID/stat's
 * third field: 'Z' a zombie, '\0' when unknown). */
unsigned long long cb_proc_start_state(pid_t pid, char *state);

#endif
