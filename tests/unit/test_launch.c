/*
 * test_launch.c - the kernel's side of --pausable's channels: a "channel
 * event|debug" report with a socket replaces the kernel's end of that
 * channel, once, before the runner is started, and nothing else does (an
 * unknown channel, a second report, a pipe, a report without an fd, one
 * after "started"); what the new socket carries reaches the kernel's fd.
 */
#include "kernel/launch.h"
#include "isolate/util.h"
#include "tap.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_rep = -1; /* the launcher's end of the report socket */

/* A report, with fd attached when >= 0, read by the kernel's side at once. */
static void s_report(cb_launch_t *l, const char *line, int fd) {
    if (cb_send_with_fd(g_rep, line, strlen(line), fd) < 0) perror("send");
    (void) cb_launch_read_reports(l);
}

static ino_t s_ino(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* A socketpair: [0] goes to the kernel, [1] is the runner's end. */
static void s_pair(int sp[2]) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) abort();
}

int main(void) {
    cb_launch_t l;
    cb_launch_init(&l);
    int rep[2], ev[2], dbg[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rep) < 0) abort();
    s_pair(ev);
    s_pair(dbg);
    l.rep_fd = rep[0];
    g_rep = rep[1];
    l.ev_fd = ev[0];
    l.dbg_fd = dbg[0];
    ino_t ev0 = s_ino(l.ev_fd), dbg0 = s_ino(l.dbg_fd);

    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) abort();
    s_report(&l, "channel event", p[0]);
    TAP_OK(s_ino(l.ev_fd) == ev0 && !l.chan_moved[0], "a pipe is not taken as a channel");
    s_report(&l, "channel event", -1);
    TAP_OK(s_ino(l.ev_fd) == ev0 && !l.chan_moved[0], "a report without an fd changes nothing");
    int x[2];
    s_pair(x);
    s_report(&l, "channel bogus", x[0]);
    TAP_OK(s_ino(l.ev_fd) == ev0 && s_ino(l.dbg_fd) == dbg0, "an unknown channel is refused");

    int n1[2], n2[2];
    s_pair(n1);
    s_report(&l, "channel event", n1[0]);
    TAP_OK(l.chan_moved[0] && s_ino(l.ev_fd) == s_ino(n1[0]),
           "the event channel is the sandbox's socket");
    TAP_OK((fcntl(l.ev_fd, F_GETFL) & O_NONBLOCK) && (fcntl(l.ev_fd, F_GETFD) & FD_CLOEXEC),
           "... non-blocking and close-on-exec");
    TAP_OK(write(n1[1], "hi", 2) == 2, "the runner's end writes");
    char buf[4] = "";
    TAP_OK(read(l.ev_fd, buf, sizeof buf) == 2 && memcmp(buf, "hi", 2) == 0,
           "... and the kernel reads it on its event fd");
    s_pair(n2);
    s_report(&l, "channel event", n2[0]);
    TAP_OK(s_ino(l.ev_fd) == s_ino(n1[0]), "a second event channel is refused");

    s_report(&l, "started 42", -1);
    TAP_EQ_INT(l.runner_pid, 42, "the runner is started");
    int n3[2];
    s_pair(n3);
    s_report(&l, "channel debug", n3[0]);
    TAP_OK(s_ino(l.dbg_fd) == dbg0 && !l.chan_moved[1],
           "a channel after the runner was started is refused");

    cb_launch_t m;
    cb_launch_init(&m);
    m.rep_fd = rep[0];
    m.ev_fd = -1;
    int n4[2];
    s_pair(n4);
    s_report(&m, "channel event", n4[0]);
    TAP_OK(m.ev_fd < 0 && !m.chan_moved[0], "no channel where the kernel has none");
    m.rep_fd = -1;

    int *fds[] = {&ev[1], &dbg[1], &p[0],  &p[1],  &x[0],  &x[1],  &n1[0], &n1[1],
                  &n2[0], &n2[1],  &n3[0], &n3[1], &n4[0], &n4[1], &g_rep};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(*fds[i]);
    cb_launch_close_fds(&l);
    TAP_DONE();
}
