/*
 * test_tier_output.c - cb_tier_output and cb_tier_wait (tiers/tier.c): a
 * program's answer kept within its buffer, its status, and the deadline
 * holding whatever the program does with its output (the launcher asks
 * criu and runsc this way before every sandbox it may need them for).
 */
#include "tap.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tiers/tier_impl.h"

static char *const s_env[] = {(char *) "PATH=/usr/bin:/bin", NULL};

static long s_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* sh -c script, its answer in out */
static int s_sh(const char *script, char *out, size_t len, int timeout_ms) {
    char *argv[] = {(char *) "sh", (char *) "-c", (char *) script, NULL};
    return cb_tier_output("/bin/sh", argv, s_env, out, len, timeout_ms);
}

int main(void) {
    char out[64];

    int st = s_sh("echo hello; echo oops >&2", out, sizeof out, 5000);
    TAP_OK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status of a program that ended");
    TAP_EQ_STR(out, "hello\noops\n", "stdout and stderr are both kept");

    st = s_sh("printf partial; exit 3", out, sizeof out, 5000);
    TAP_OK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 3, "its exit code");
    TAP_EQ_STR(out, "partial", "what it said before it failed");

    /* far more than the buffer: kept to the buffer, the rest read and
     * dropped, so the program is not stuck on a full pipe */
    long t0 = s_ms();
    st = s_sh("head -c 1000000 /dev/zero | tr '\\0' x", out, sizeof out, 5000);
    TAP_OK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "a 1 MB answer: the program ends");
    TAP_EQ_INT((long) strlen(out), (long) sizeof out - 1, "kept to the buffer, NUL-terminated");
    TAP_OK(strspn(out, "x") == sizeof out - 1, "the answer's first bytes");
    TAP_OK(s_ms() - t0 < 5000, "before the deadline");

    /* one that never ends, with its output open: killed at the deadline */
    t0 = s_ms();
    errno = 0;
    st = s_sh("echo started; exec sleep 30", out, sizeof out, 300);
    long took = s_ms() - t0;
    TAP_OK(st == -1 && errno == ETIMEDOUT, "a program that hangs: -1 ETIMEDOUT");
    TAP_OK(took >= 250 && took < 3000, "after about the deadline (%ld ms)", took);
    TAP_EQ_STR(out, "started\n", "what it said before");

    /* one that closes its output and goes on: the wait is bounded too */
    t0 = s_ms();
    st = s_sh("exec >&- 2>&-; exec sleep 30", out, sizeof out, 300);
    took = s_ms() - t0;
    TAP_OK(st == -1 && errno == ETIMEDOUT, "output closed, still running: -1 ETIMEDOUT");
    TAP_OK(took < 3000, "within the deadline (%ld ms)", took);

    /* a child of it that keeps the pipe: the answer ends at the deadline */
    t0 = s_ms();
    st = s_sh("sleep 30 & echo $!", out, sizeof out, 300);
    took = s_ms() - t0;
    TAP_OK(st >= 0 && WIFEXITED(st), "the program itself ended");
    TAP_OK(took < 3000, "a grandchild holding the pipe does not hold the caller (%ld ms)", took);
    long orphan = strtol(out, NULL, 10);
    TAP_OK(orphan > 1, "the answer before it (the grandchild's pid)");
    if (orphan > 1) (void) kill((pid_t) orphan, SIGKILL); /* leave nothing behind */

    char *missing[] = {(char *) "/nonexistent/program", NULL};
    errno = 0;
    st = cb_tier_output("/nonexistent/program", missing, s_env, out, sizeof out, 1000);
    TAP_OK(st == -1 && errno == ENOENT, "a program that is not there: -1 ENOENT");
    TAP_EQ_STR(out, "", "and no answer");

    errno = 0;
    TAP_OK(s_sh("echo x", out, 0, 1000) == -1 && errno == EINVAL, "no room at all: EINVAL");

    /* cb_tier_wait alone */
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/sleep", "sleep", "30", (char *) NULL);
        _exit(127);
    }
    t0 = s_ms();
    int wst = 0;
    TAP_OK(cb_tier_wait(p, 200, &wst) == -1, "cb_tier_wait: -1 at the deadline");
    TAP_OK(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "the child was killed and reaped");
    TAP_OK(s_ms() - t0 < 3000, "promptly");
    p = fork();
    if (p == 0) _exit(7);
    TAP_OK(cb_tier_wait(p, 2000, &wst) == 0 && WIFEXITED(wst) && WEXITSTATUS(wst) == 7,
           "cb_tier_wait: the status of a child that ended");
    TAP_DONE();
}
