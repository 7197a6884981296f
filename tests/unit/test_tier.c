/* test_tier.c - the isolation tiers' shared pieces: --isolation parsing, the
 * supervisor's spawn (fd slots), exit mapping (guest statuses untrusted),
 * prepared argv bounds, guest OOM translation, and the microvm's guest tree
 * (the sandbox plan again, never /proc or /dev). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/options.h"
#include "tiers/tier.h"
#include "tiers/tier_impl.h"
#include "tap.h"

static int parse(cb_options_t *o, int argc, const char **argv, char *err, size_t n) {
    return cb_options_parse(argc, (char **) argv, o, err, n);
}

/* Runs cb_tier_exit_like(status) in a child; returns the child's wait status. */
static int exit_like(int status) {
    pid_t p = fork();
    if (p == 0) cb_tier_exit_like(status);
    int st = -1;
    (void) waitpid(p, &st, 0);
    return st;
}

int main(void) {
    char err[256];
    cb_options_t o;
    const char *a1[] = {"x", "--python", "/usr/bin/python3", "--runner", "/r/runner.py"};
    TAP_EQ_INT(parse(&o, 5, a1, err, sizeof err), 0, "no --isolation parses");
    TAP_EQ_INT(o.isolation, CB_ISOLATION_NAMESPACES, "isolation defaults to namespaces");
    cb_options_fini(&o);
    const char *a2[] = {"x", "--isolation", "gvisor", "--python", "/p", "--runner", "/r"};
    TAP_EQ_INT(parse(&o, 7, a2, err, sizeof err), 0, "--isolation gvisor parses");
    TAP_EQ_INT(o.isolation, CB_ISOLATION_GVISOR, "gvisor");
    cb_options_fini(&o);
    const char *a3[] = {"x", "--isolation=microvm", "--python", "/p", "--runner", "/r"};
    TAP_EQ_INT(parse(&o, 6, a3, err, sizeof err), 0, "--isolation=microvm parses");
    TAP_EQ_INT(o.isolation, CB_ISOLATION_MICROVM, "microvm");
    cb_options_fini(&o);
    const char *a4[] = {"x", "--isolation", "docker", "--python", "/p", "--runner", "/r"};
    TAP_EQ_INT(parse(&o, 7, a4, err, sizeof err), -1, "unknown tier refused");
    TAP_OK(strstr(err, "namespaces|gvisor|microvm") != NULL, "the error lists the tiers: %s", err);
    cb_options_fini(&o);
    const char *a5[] = {"x",        "--sandbox", "none",     "--isolation", "gvisor",
                        "--python", "/p",        "--runner", "/r"};
    TAP_EQ_INT(parse(&o, 9, a5, err, sizeof err), -1, "--sandbox none with a tier refused");
    TAP_OK(strstr(err, "--sandbox full") != NULL, "and says why: %s", err);
    cb_options_fini(&o);

    const char *a8[] = {"x",        "--network", "host",     "--isolation", "gvisor",
                        "--python", "/p",        "--runner", "/r"};
    TAP_EQ_INT(parse(&o, 9, a8, err, sizeof err), -1, "--network host with a tier refused");
    TAP_OK(strstr(err, "--network none only") != NULL, "and says why: %s", err);
    cb_options_fini(&o);

    /* no tier object for namespaces */
    const char *a6[] = {"x", "--python", "/p", "--runner", "/r"};
    (void) parse(&o, 5, a6, err, sizeof err);
    cb_tier_t *t = cb_tier_new(&o, err, sizeof err);
    TAP_OK(t == NULL && err[0] == '\0', "namespaces: no tier, no error");
    TAP_OK(!cb_tier_privileged(NULL), "no tier is not privileged");
    int st = 9 << 8;
    TAP_OK(!cb_tier_guest_oom(NULL, &st) && st == (9 << 8), "no tier: status untouched");
    cb_options_fini(&o);

    /* microvm without its guest kernel: fails closed with the fix */
    const char *a7[] = {"x",
                        "--isolation",
                        "microvm",
                        "--python",
                        "/usr/bin/python3",
                        "--runner",
                        "/nonexistent/share/cellblock/runner/runner.py"};
    (void) parse(&o, 7, a7, err, sizeof err);
    t = cb_tier_new(&o, err, sizeof err);
    if (access("/usr/bin/qemu-system-x86_64", X_OK) == 0) {
        TAP_OK(t == NULL && strstr(err, "guest kernel is not built") != NULL,
               "microvm without an image: %s", err);
    } else {
        TAP_OK(t == NULL && strstr(err, "qemu-system-x86") != NULL, "microvm without QEMU: %s",
               err);
    }
    cb_tier_destroy(&t);
    cb_options_fini(&o);

    /* prepared argv: bounded */
    static cb_tier_argv_t av;
    memset(&av, 0, sizeof av);
    TAP_EQ_INT(cb_tier_argv_add(&av, "%s-%d", "a", 1), 0, "argv add");
    TAP_EQ_STR(av.argv[0], "a-1", "formatted");
    TAP_OK(av.argv[1] == NULL, "NULL-terminated");
    static char big[CB_TIER_ARG_MAX + 8];
    memset(big, 'x', sizeof big - 1);
    TAP_EQ_INT(cb_tier_argv_add(&av, "%s", big), -1, "an entry too long is refused");
    TAP_EQ_INT(errno, ENAMETOOLONG, "ENAMETOOLONG");
    while (cb_tier_argv_add(&av, "y") == 0) {
    }
    TAP_EQ_INT((int) av.n, CB_TIER_ARGV_MAX, "argv stops at CB_TIER_ARGV_MAX");
    TAP_OK(av.argv[CB_TIER_ARGV_MAX] == NULL, "still NULL-terminated when full");

    /* spawn: slot i gets fds[i], a missing program reports its errno */
    int p1[2], p2[2];
    TAP_OK(pipe2(p1, O_CLOEXEC) == 0 && pipe2(p2, O_CLOEXEC) == 0, "pipes");
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    char *sh_argv[] = {"/bin/sh", "-c", "echo one; echo two >&2; ls /proc/self/fd | wc -l >&2",
                       NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    const int fds[3] = {devnull, p2[1], p1[1]}; /* swapped on purpose */
    pid_t pid = cb_tier_spawn("/bin/sh", sh_argv, envp, fds, 3);
    TAP_OK(pid > 0, "spawn");
    close(p1[1]);
    close(p2[1]);
    char b1[64] = "", b2[64] = "";
    ssize_t n1 = read(p2[0], b1, sizeof b1 - 1), n2 = 0, r;
    while ((r = read(p1[0], b2 + n2, sizeof b2 - 1 - (size_t) n2)) > 0)
        n2 += r;
    (void) n1;
    int wst;
    (void) waitpid(pid, &wst, 0);
    TAP_EQ_STR(b1, "one\n", "slot 1 is the second fd given");
    TAP_OK(strncmp(b2, "two\n", 4) == 0, "slot 2 is the third: %s", b2);
    TAP_OK(strstr(b2, "\n4\n") != NULL, "only fds 0-2 reach the program (+ ls's own): %s", b2);
    char *none_argv[] = {"/nonexistent/prog", NULL};
    const int nulls[3] = {devnull, devnull, devnull};
    errno = 0;
    TAP_EQ_INT(cb_tier_spawn("/nonexistent/prog", none_argv, envp, nulls, 3), -1,
               "a missing program fails");
    TAP_EQ_INT(errno, ENOENT, "with the exec's errno");

    /* exit mapping: codes, ending signals re-raised, others not */
    st = exit_like(3 << 8);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "exit code kept");
    st = exit_like(SIGSEGV);
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "SIGSEGV re-raised");
    st = exit_like(SIGKILL);
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "SIGKILL re-raised");
    st = exit_like(SIGSTOP);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGSTOP,
           "a guest's SIGSTOP is not raised on the host: exit %d", WEXITSTATUS(st));
    st = exit_like(SIGCHLD);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGCHLD, "nor SIGCHLD");
    close(devnull);
    TAP_DONE();
}
