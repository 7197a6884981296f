/*
 * test_criu_dump.c - the launcher's dump of a parked copy with CRIU
 * (launcher/criu_dump.c): what it reads of the process from /proc (its pid
 * in its namespace, its sockets by inode, its pipes and sockets listed for
 * a restore, bounded), criu's command line
 * (bounded, in order), and refusals that name their cause.
 *
 * The dump itself runs where Debian's criu works: in the test guest,
 * tests/security/test_pausable.py runs this program with CB_CRIU_DUMP_LIVE
 * set to "INIT COPY DIR" (host pids of a --pausable sandbox's init and of a
 * parked copy, and an image directory), and it dumps that copy for real.
 */
#include "launcher/criu_dump.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child holding n socketpair ends (its fds 3..) and nothing else but
 * /dev/null; ino[] gets their inodes.  It is ready when it has closed its
 * end of a pipe (the parent reads the pipe's end), and pauses until killed. */
static pid_t s_holder(size_t n, unsigned long *ino) {
    int ends[64][2];
    if (n > 64) abort();
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends[i]) < 0 ||
            fstat(ends[i][0], &st) < 0)
            abort();
        ino[i] = (unsigned long) st.st_ino;
    }
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0) abort();
    pid_t c = fork();
    if (c == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0) _exit(1);
        /* the ends at 3.. (fds above every end first, then down) */
        int hi = 200;
        for (size_t i = 0; i < n; i++)
            if (dup2(ends[i][0], hi + (int) i) < 0) _exit(1);
        int gw = dup2(go[1], hi + 64);
        for (int fd = 3; fd < 4096; fd++) /* only the ends and gw stay */
            if ((fd < hi || fd >= hi + (int) n) && fd != gw) (void) close(fd);
        for (size_t i = 0; i < n; i++)
            if (dup2(hi + (int) i, 3 + (int) i) < 0) _exit(1);
        for (size_t i = 0; i < n; i++)
            (void) close(hi + (int) i);
        close(gw); /* ready: the parent reads the end of the pipe, and no fd of it stays here */
        for (;;)
            pause();
    }
    close(go[1]);
    char b;
    if (c < 0 || read(go[0], &b, 1) != 0) abort();
    close(go[0]);
    for (size_t i = 0; i < n; i++) {
        close(ends[i][0]);
        close(ends[i][1]);
    }
    return c;
}

static void s_end(pid_t c) {
    (void) kill(c, SIGKILL);
    (void) waitpid(c, NULL, 0);
}

static bool s_has(const cb_criu_target_t *t, unsigned long ino) {
    for (size_t i = 0; i < t->n_ext; i++)
        if (t->ext_ino[i] == ino) return true;
    return false;
}

static void test_target(void) {
    unsigned long ino[2];
    pid_t c = s_holder(2, ino);
    cb_criu_target_t t;
    char why[256] = "";
    TAP_EQ_INT(cb_criu_target(c, &t, why, sizeof why), 0, "a process's target is read");
    TAP_EQ_INT(t.vpid, c, "its pid in its own namespace (ours here)");
    TAP_EQ_INT(t.n_ext, 2, "its two sockets, nothing else it holds");
    TAP_OK(s_has(&t, ino[0]) && s_has(&t, ino[1]), "named by their inodes");
    TAP_EQ_INT(t.n_fds, 2, "listed for a restore: the two sockets");
    char want[128];
    (void) snprintf(want, sizeof want, "3 socket:[%lu]\n4 socket:[%lu]\n", ino[0], ino[1]);
    char dir[] = "/tmp/cb-criu-dump-XXXXXX", got[256] = "";
    int dfd = mkdtemp(dir) ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    TAP_EQ_INT(cb_criu_write_fds(&t, dfd), 0, "written into the image");
    int f = openat(dfd, CB_CRIU_FDS, O_RDONLY | O_CLOEXEC);
    ssize_t n = f < 0 ? -1 : read(f, got, sizeof got - 1);
    got[n < 0 ? 0 : n] = '\0';
    TAP_EQ_STR(got, want, "one \"FD NAME\" line each, as criu's --inherit-fd names them");
    TAP_EQ_INT(cb_criu_write_fds(&t, dfd), -1, "never over an existing list");
    if (f >= 0) close(f);
    (void) unlinkat(dfd, CB_CRIU_FDS, 0);
    if (dfd >= 0) close(dfd);
    (void) rmdir(dir);
    s_end(c);
}

/* a pipe is listed too (the runner's stdout and stderr are the kernel's pipes) */
static void test_pipes_listed(void) {
    int p[2];
    if (pipe(p) < 0) abort();
    pid_t c = fork();
    if (c == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(p[1], 2) < 0) _exit(1);
        for (int fd = 3; fd < 4096; fd++)
            (void) close(fd);
        for (;;)
            pause();
    }
    close(p[1]);
    struct stat st;
    if (fstat(p[0], &st) < 0) abort();
    cb_criu_target_t t;
    char why[256] = "", want[48];
    int rc = -1;
    for (int i = 0; i < 200 && rc != 0; i++) { /* until the child has closed the rest */
        rc = cb_criu_target(c, &t, why, sizeof why);
        if (rc == 0 && (t.n_fds != 1 || t.n_ext != 0)) rc = -1, usleep(5000);
    }
    (void) snprintf(want, sizeof want, "pipe:[%lu]", (unsigned long) st.st_ino);
    TAP_OK(rc == 0 && t.n_fds == 1 && t.fd[0] == 2 && strcmp(t.link[0], want) == 0,
           "a pipe at fd 2 is listed as %s, not declared external", want);
    s_end(c);
    close(p[0]);
}

static void test_too_many_sockets(void) {
    unsigned long ino[CB_CRIU_EXT_MAX + 1];
    pid_t c = s_holder(CB_CRIU_EXT_MAX + 1, ino);
    cb_criu_target_t t;
    char why[256] = "";
    TAP_EQ_INT(cb_criu_target(c, &t, why, sizeof why), -1, "more sockets than the bound: refused");
    TAP_OK(strstr(why, "more than") != NULL, "it says why: %s", why);
    s_end(c);
}

static void test_gone(void) {
    pid_t c = fork();
    if (c == 0) _exit(0);
    (void) waitpid(c, NULL, 0);
    cb_criu_target_t t;
    char why[256] = "", want[32];
    TAP_EQ_INT(cb_criu_target(c, &t, why, sizeof why), -1, "a process that is gone: refused");
    (void) snprintf(want, sizeof want, "process %ld", (long) c);
    TAP_OK(strstr(why, want) != NULL, "naming it: %s", why);
}

static void test_argv(void) {
    cb_criu_target_t t = {.vpid = 7, .n_ext = 2, .ext_ino = {1234, 99}};
    static cb_tier_argv_t a;
    char **argv = a.argv;
    TAP_EQ_INT(cb_criu_dump_argv(&t, 9, &a), 0, "criu's command line is built");
    static const char *const want[] = {"dump",
                                       "-t",
                                       "7",
                                       "-D",
                                       "/proc/self/fd/9",
                                       "-o",
                                       CB_CRIU_LOG,
                                       "--leave-running",
                                       "--external",
                                       "unix[1234]",
                                       "--external",
                                       "unix[99]",
                                       NULL};
    bool same = strstr(argv[0], "criu") != NULL;
    size_t i = 0;
    for (; want[i] != NULL; i++)
        same = same && argv[i + 1] && strcmp(argv[i + 1], want[i]) == 0;
    TAP_OK(same && argv[i + 1] == NULL, "criu dump -t VPID -D the directory's fd, left running, "
                                        "each socket external, in that order");
    size_t words = a.n;
    TAP_OK(cb_criu_dump_argv(&t, 9, &a) == 0 && a.n == words,
           "built again into the same argv: afresh, not appended");
    cb_criu_target_t full = {.vpid = 2147483, .n_ext = CB_CRIU_EXT_MAX};
    for (size_t k = 0; k < CB_CRIU_EXT_MAX; k++)
        full.ext_ino[k] = 18446744073709551615ul;
    TAP_EQ_INT(cb_criu_dump_argv(&full, 1023, &a), 0, "the largest target fits the named bounds");
}

/* cb_criu_real_ids in a child whose effective set has (or lacks)
 * CAP_SYS_RESOURCE: "r e s" uids and gids and whether CAP_SYS_ADMIN is still
 * effective, written on fd out. */
static void s_ids_child(bool keep_resource, uid_t uid, gid_t gid, int out) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) < 0) _exit(2);
    if (!keep_resource) {
        d[CAP_SYS_RESOURCE / 32].effective &= ~(1u << (CAP_SYS_RESOURCE % 32));
        if (syscall(SYS_capset, &h, d) < 0) _exit(3);
    }
    if (cb_criu_real_ids(uid, gid) < 0) _exit(4);
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 ||
        syscall(SYS_capget, &h, d) < 0)
        _exit(5);
    bool admin = (d[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32))) != 0;
    dprintf(out, "%u %u %u %u %u %u %d", ru, eu, su, rg, eg, sg, admin);
    _exit(0);
}

static void s_ids_run(bool keep_resource, uid_t uid, gid_t gid, char *buf, size_t len) {
    int p[2];
    buf[0] = '\0';
    if (pipe2(p, O_CLOEXEC) < 0) return;
    pid_t c = fork();
    if (c == 0) s_ids_child(keep_resource, uid, gid, p[1]);
    close(p[1]);
    ssize_t n = read(p[0], buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(p[0]);
    int st;
    (void) waitpid(c, &st, 0);
}

static bool s_has_resource(void) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    return syscall(SYS_capget, &h, d) == 0 &&
           (d[CAP_SYS_RESOURCE / 32].effective & (1u << (CAP_SYS_RESOURCE % 32))) != 0;
}

static void test_real_ids(void) {
    char got[128];
    if (geteuid() != 0) {
        TAP_SKIP("criu's real ids: needs root");
        return;
    }
    s_ids_run(false, 4321, 4322, got, sizeof got);
    TAP_EQ_STR(got, "4321 0 0 4322 0 0 1",
               "without CAP_SYS_RESOURCE: the target's ids as criu's real ones, root's "
               "effective and saved, its other capabilities kept");
    s_ids_run(false, (uid_t) -1, (gid_t) -1, got, sizeof got);
    TAP_EQ_STR(got, "0 0 0 0 0 0 1", "... and no target's ids (they differed): root's kept");
    if (s_has_resource()) { /* a container's root may not have it to keep */
        s_ids_run(true, 4321, 4322, got, sizeof got);
        TAP_EQ_STR(got, "0 0 0 0 0 0 1", "with CAP_SYS_RESOURCE: criu keeps root's ids");
    } else {
        printf("# this root has no CAP_SYS_RESOURCE: the case that keeps it is not run\n");
    }
}

/* the guest's half: a real dump of a parked copy */
static int s_live(const char *spec) {
    long init, copy;
    char dir[512];
    if (sscanf(spec, "%ld %ld %511s", &init, &copy, dir) != 3) {
        printf("Bail out! CB_CRIU_DUMP_LIVE is \"INIT COPY DIR\"\n");
        return 1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char why[512] = "";
    int rc = dfd < 0 ? -1 : cb_criu_dump((pid_t) init, (pid_t) copy, dfd, why, sizeof why);
    TAP_EQ_INT(rc, 0, "criu dumped the parked copy");
    if (rc != 0) printf("# why: %s\n", why[0] ? why : strerror(errno));
    printf("1..%d\n", tap_n);
    return tap_failed != 0;
}

int main(void) {
    const char *live = getenv("CB_CRIU_DUMP_LIVE");
    if (live != NULL) return s_live(live);
    test_target();
    test_pipes_listed();
    test_too_many_sockets();
    test_gone();
    test_argv();
    test_real_ids();
    printf("1..%d\n", tap_n);
    return tap_failed != 0;
}
