/*
 * childstep.c - the async-signal-safe steps of a launcher child between
 * clone and execve (see childstep.h).
 */
#include "isolate/childstep.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

void cb_child_reset_signals(void) {
    sigset_t all;
    sigemptyset(&all);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        (void) sigaction(sig, &sa, NULL); /* EINVAL for glibc-reserved ones */
    }
    (void) sigprocmask(SIG_SETMASK, &all, NULL);
}

void cb_child_fail(int errfd, cb_step_t step, int arg) {
    cb_child_err_t e = {.step = (int) step, .err = errno, .arg = arg};
    (void) cb_write_all(errfd, &e, sizeof e);
    _exit(127);
}

int cb_child_prepare_fds(void) {
    if (syscall(SYS_close_range, CB_FD_EVENT + 1, ~0U, CLOSE_RANGE_CLOEXEC) < 0) return -1;
    for (int fd = 0; fd <= CB_FD_EVENT; fd++)
        if (fcntl(fd, F_SETFD, 0) < 0) return -1;
    struct stat st;
    /* dup2 leaves the copy without FD_CLOEXEC; the source keeps it */
    if (fstat(CB_FD_LAUNCHER_DEBUG, &st) == 0 && S_ISSOCK(st.st_mode) &&
        dup2(CB_FD_LAUNCHER_DEBUG, CB_FD_DEBUG) < 0)
        return -1;
    return 0;
}

int cb_child_read_err(int fd, cb_child_err_t *out) {
    memset(out, 0, sizeof *out);
    for (;;) {
        ssize_t r = read(fd, out, sizeof *out);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) return 0;
        if ((size_t) r != sizeof *out) {
            errno = EPROTO;
            return -1;
        }
        return 1;
    }
}
