/* test_seccomp.c - the allowlist builds, and in a forked child it allows
 * ordinary work and refuses what it must (with EPERM, clone3 with ENOSYS,
 * x32 syscalls with a kill). */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/seccomp_filter.h"
#include "tap.h"

#define X32_BIT 0x40000000L

/* Runs fn in a child under the filter; returns its wait status. */
static int in_child(const cb_seccomp_t *f, int (*fn)(void)) {
    pid_t p = fork();
    if (p == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || cb_seccomp_install(f) < 0) _exit(99);
        _exit(fn());
    }
    int st = 0;
    waitpid(p, &st, 0);
    return st;
}

/* each returns 0 when the expectation holds */
static int t_getpid(void) { return getpid() > 0 ? 0 : 1; }
static int t_unshare(void) { return unshare(CLONE_NEWUSER) < 0 && errno == EPERM ? 0 : 1; }
static int t_clone_ns(void) {
    long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (r == 0) _exit(0);
    return r < 0 && errno == EPERM ? 0 : 1;
}
static int t_clone_plain(void) {
    pid_t p = fork();
    if (p == 0) _exit(7);
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 7 ? 0 : 1;
}
static int t_clone3(void) {
    struct clone_args ca = {.exit_signal = SIGCHLD};
    long r = syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0) _exit(0);
    return r < 0 && errno == ENOSYS ? 0 : 1;
}
static int t_mount(void) {
    return syscall(SYS_mount, "x", "/", "tmpfs", 0, 0) < 0 && errno == EPERM ? 0 : 1;
}
static int t_ptrace(void) { return syscall(SYS_ptrace, 0, 0, 0, 0) < 0 && errno == EPERM ? 0 : 1; }
static int t_bpf(void) { return syscall(SYS_bpf, 0, 0, 0) < 0 && errno == EPERM ? 0 : 1; }
static int t_uring(void) { return syscall(SYS_io_uring_setup, 1, 0) < 0 && errno == EPERM ? 0 : 1; }
static int t_keyctl(void) { return syscall(SYS_keyctl, 0, 0, 0) < 0 && errno == EPERM ? 0 : 1; }
static int t_userfaultfd(void) { return syscall(SYS_userfaultfd, 0) < 0 && errno == EPERM ? 0 : 1; }
static int t_perf(void) {
    return syscall(SYS_perf_event_open, 0, 0, 0, 0, 0) < 0 && errno == EPERM ? 0 : 1;
}
/* fanotify: no notebook workload needs it (and it would watch whole mounts) */
static int t_fanotify(void) {
    return syscall(SYS_fanotify_init, 0, 0) < 0 && errno == EPERM ? 0 : 1;
}
/* inotify stays: watchdog, watchfiles, tail -f use it; its per-user limit is
 * per sandbox now that each sandbox has its own host uid */
static int t_inotify(void) {
    int fd = (int) syscall(SYS_inotify_init1, 0);
    if (fd < 0) return 1;
    int wd = (int) syscall(SYS_inotify_add_watch, fd, "/", 0x100);
    close(fd);
    return wd >= 0 ? 0 : 1;
}
static int t_chroot(void) { return syscall(SYS_chroot, "/") < 0 && errno == EPERM ? 0 : 1; }
static int t_pivot(void) { return syscall(SYS_pivot_root, "/", "/") < 0 && errno == EPERM ? 0 : 1; }
static int t_netlink(void) { return socket(AF_NETLINK, SOCK_RAW, 0) < 0 && errno == EPERM ? 0 : 1; }
static int t_packet(void) { return socket(AF_PACKET, SOCK_RAW, 0) < 0 && errno == EPERM ? 0 : 1; }
static int t_inet(void) {
    int s = socket(AF_INET6, SOCK_STREAM, 0);
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    return s >= 0 && u >= 0 ? 0 : 1;
}
static int t_tiocsti(void) {
    char c = 'x';
    int a = ioctl(0, TIOCSTI, &c) < 0 && errno == EPERM;
    /* upper bits set: the kernel sees TIOCSTI, so must the filter */
    int b = syscall(SYS_ioctl, 0, (unsigned long) TIOCSTI | (1UL << 32), &c) < 0 && errno == EPERM;
    return a && b ? 0 : 1;
}
static int t_ioctl_ok(void) {
    int n = 0;
    return ioctl(0, FIONREAD, &n) == 0 || errno != EPERM ? 0 : 1;
}
static int t_personality(void) {
    int q = personality(0xffffffff) >= 0;
    int bad = personality(ADDR_NO_RANDOMIZE) < 0 && errno == EPERM;
    return q && bad ? 0 : 1;
}
static int t_x32(void) {
    syscall(X32_BIT | SYS_getpid);
    return 1; /* must not get here */
}

int main(void) {
    char why[256] = "";
    cb_seccomp_t f;
    TAP_EQ_INT(cb_seccomp_build(&f, why, sizeof why), 0, "filter builds");
    TAP_OK(f.prog.len > 0 && f.n_allowed > 200, "program has %u insns, %u syscalls allowed",
           f.prog.len, f.n_allowed);
    static const struct {
        const char *name;
        int (*fn)(void);
    } cases[] = {
        {"getpid allowed", t_getpid},
        {"fork (clone without ns flags) allowed", t_clone_plain},
        {"unshare refused", t_unshare},
        {"clone(CLONE_NEWUSER) refused", t_clone_ns},
        {"clone3 gives ENOSYS", t_clone3},
        {"mount refused", t_mount},
        {"ptrace refused", t_ptrace},
        {"bpf refused", t_bpf},
        {"io_uring refused", t_uring},
        {"keyctl refused", t_keyctl},
        {"userfaultfd refused", t_userfaultfd},
        {"perf_event_open refused", t_perf},
        {"fanotify_init refused", t_fanotify},
        {"inotify allowed", t_inotify},
        {"chroot refused (the chroot fallback relies on it)", t_chroot},
        {"pivot_root refused", t_pivot},
        {"AF_NETLINK refused", t_netlink},
        {"AF_PACKET refused", t_packet},
        {"AF_INET6/AF_UNIX allowed", t_inet},
        {"TIOCSTI refused (also with high bits)", t_tiocsti},
        {"other ioctls allowed", t_ioctl_ok},
        {"personality: query ok, ADDR_NO_RANDOMIZE refused", t_personality},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = in_child(&f, cases[i].fn);
        TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", cases[i].name);
    }
    int st = in_child(&f, t_x32);
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "x32 syscall kills the process (status %#x)",
           st);
    cb_seccomp_fini(&f);
    TAP_OK(f.prog.filter == NULL, "fini frees");
    TAP_DONE();
}
