/* test_util.c - isolate/util.c's SCM_RIGHTS helpers: the fds a message
 * carries arrive close-on-exec, at most as many as the caller takes (the
 * rest are closed, never left open in the receiver), and a line comes back
 * NUL-terminated.  And cb_stop_pending: a blocked SIGTERM/SIGHUP seen and
 * left pending for the signalfd. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "isolate/cb_limits.h"
#include "isolate/util.h"
#include "tap.h"

/* How many fds this process has open. */
static int s_open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    if (d != NULL) closedir(d);
    return n - 1; /* the DIR's own */
}

int main(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return 1;
    const int three[3] = {p[0], p[1], p[0]};

    /* several fds, fewer taken: the others are closed */
    int before = s_open_fds();
    TAP_EQ_INT(cb_send_with_fds(sv[0], "abc", 3, three, 3), 0, "three fds sent");
    int got[2] = {-1, -1};
    size_t n = 9;
    char buf[8];
    ssize_t r = cb_recv_with_fds(sv[1], buf, sizeof buf, got, 2, &n, 0);
    TAP_EQ_INT(r, 3, "the message's bytes");
    TAP_EQ_INT(n, 2, "two fds kept");
    TAP_OK(got[0] >= 0 && got[1] >= 0, "both valid: %d %d", got[0], got[1]);
    TAP_OK((fcntl(got[0], F_GETFD) & FD_CLOEXEC) && (fcntl(got[1], F_GETFD) & FD_CLOEXEC),
           "received close-on-exec");
    TAP_EQ_INT(s_open_fds(), before + 2, "the third was closed, not left open");
    close(got[0]);
    close(got[1]);

    /* the one-fd form: the first, the rest closed; -1 when none */
    before = s_open_fds();
    int fd = -1;
    TAP_EQ_INT(cb_send_with_fds(sv[0], "x", 1, three, 3), 0, "three fds sent again");
    TAP_EQ_INT(cb_recv_with_fd(sv[1], buf, sizeof buf, &fd, 0), 1, "one byte");
    TAP_OK(fd >= 0, "the first fd: %d", fd);
    TAP_EQ_INT(s_open_fds(), before + 1, "only it stays open");
    close(fd);
    TAP_EQ_INT(cb_send_with_fd(sv[0], "y", 1, -1), 0, "a message without an fd");
    fd = 7;
    TAP_EQ_INT(cb_recv_with_fd(sv[1], buf, sizeof buf, &fd, 0), 1, "its byte");
    TAP_EQ_INT(fd, -1, "no fd: -1");

    /* bounds */
    int many[CB_SCM_FDS_MAX + 1];
    for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
        many[i] = p[0];
    errno = 0;
    TAP_EQ_INT(cb_send_with_fds(sv[0], "z", 1, many, CB_SCM_FDS_MAX + 1), -1,
               "more than CB_SCM_FDS_MAX refused");
    TAP_EQ_INT(errno, E2BIG, "E2BIG");

    /* a line: NUL-terminated, cut to the buffer; nothing waiting is -1 EAGAIN */
    TAP_EQ_INT(cb_send_with_fd(sv[0], "snap ready", 10, -1), 0, "a line sent");
    char line[6];
    fd = 7;
    TAP_EQ_INT(cb_recv_line_with_fd(sv[1], line, sizeof line, &fd), 5, "cut to the buffer");
    TAP_EQ_STR(line, "snap ", "NUL-terminated");
    TAP_EQ_INT(fd, -1, "and no fd");
    errno = 0;
    TAP_EQ_INT(cb_recv_line_with_fd(sv[1], line, sizeof line, &fd), -1, "nothing waiting");
    TAP_EQ_INT(errno, EAGAIN, "EAGAIN");

    /* a supervisor's stop signal, pending while blocked (--warm wait looks) */
    int sfd = cb_signalfd_supervision();
    TAP_OK(sfd >= 0, "the supervision signalfd");
    TAP_EQ_INT(cb_stop_pending(), 0, "no stop pending");
    (void) raise(SIGINT);
    TAP_EQ_INT(cb_stop_pending(), 0, "SIGINT is no stop");
    (void) raise(SIGTERM);
    TAP_EQ_INT(cb_stop_pending(), SIGTERM, "SIGTERM pending");
    TAP_EQ_INT(cb_stop_pending(), SIGTERM, "... and left pending");
    struct signalfd_siginfo si;
    int seen = 0;
    while (read(sfd, &si, sizeof si) == (ssize_t) sizeof si)
        seen |= si.ssi_signo == SIGTERM ? 1 : si.ssi_signo == SIGINT ? 2 : 0;
    TAP_EQ_INT(seen, 3, "both still read from the signalfd");
    TAP_EQ_INT(cb_stop_pending(), 0, "none pending once read");
    (void) raise(SIGHUP);
    TAP_EQ_INT(cb_stop_pending(), SIGHUP, "SIGHUP pending");
    while (read(sfd, &si, sizeof si) == (ssize_t) sizeof si)
        ;
    close(sfd);

    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
    TAP_DONE();
}
