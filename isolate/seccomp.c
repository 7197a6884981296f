/*
 * seccomp.c - allowlist of system calls for the sandboxed interpreter.
 *
 * Default action: EPERM (libraries handle it; a kill would turn a probe
 * into a crash).  Other ABIs (i386 via int 0x80, x32) kill the process:
 * libseccomp's bad-arch action covers foreign audit arches, and for an
 * x86_64-only filter it also routes x32 numbers there.  clone3 fails with
 * ENOSYS so glibc falls back to clone, whose flags we can inspect.
 *
 * The list started from Docker's default profile (moby/profiles) minus
 * everything that needs a capability we never have, then lost: namespaces
 * (unshare, setns, clone with CLONE_NEW*), the mount API, pivot_root,
 * chroot, ptrace and process_vm_*, kexec, modules, bpf, perf_event_open,
 * userfaultfd, io_uring, the keyring, open_by_handle_at, personality other
 * than the harmless values, ioctl TIOCSTI/TIOCLINUX, sockets other than
 * AF_UNIX/AF_INET/AF_INET6.  Names unknown to this libseccomp/arch are
 * skipped, so one list serves old and new kernels.
 */
#include "isolate/seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* every CLONE_NEW* flag, plus CLONE_NEWCGROUP */
#define S_CLONE_NS_MASK                                                                            \
    ((scmp_datum_t) (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
                     CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME))
#define S_IOCTL_CMD_MASK    ((scmp_datum_t) 0xffffffffu) /* cmd is an unsigned int */
#define S_PERSONALITY_QUERY ((scmp_datum_t) 0xffffffffu)

static const char *const s_allow[] = {
    /* files and fds */
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "lseek",
    "_llseek",
    "stat",
    "fstat",
    "lstat",
    "newfstatat",
    "statx",
    "statfs",
    "fstatfs",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "getdents",
    "getdents64",
    "mkdir",
    "mkdirat",
    "rmdir",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "fchownat",
    "lchown",
    "truncate",
    "ftruncate",
    "fallocate",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "sync",
    "syncfs",
    "fcntl",
    "flock",
    "umask",
    "chdir",
    "fchdir",
    "getcwd",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "mknod",
    "mknodat",
    "copy_file_range",
    "sendfile",
    "splice",
    "tee",
    "vmsplice",
    "fadvise64",
    "readahead",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "inotify_rm_watch",
    "pipe",
    "pipe2",
    "memfd_create",
    "name_to_handle_at",
    "cachestat",
    /* memory */
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "msync",
    "mincore",
    "mlock",
    "mlock2",
    "munlock",
    "mlockall",
    "munlockall",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "membarrier",
    "map_shadow_stack",
    "mseal",
    /* processes and threads */
    "fork",
    "vfork",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "wait4",
    "waitid",
    "kill",
    "tkill",
    "tgkill",
    "getpid",
    "getppid",
    "gettid",
    "getpgid",
    "setpgid",
    "getpgrp",
    "getsid",
    "setsid",
    "set_tid_address",
    "set_robust_list",
    "futex",
    "futex_waitv",
    "futex_wait",
    "futex_wake",
    "futex_requeue",
    "rseq",
    "arch_prctl",
    "prctl",
    "uname",
    "sched_yield",
    "sched_getaffinity",
    "sched_setaffinity",
    "sched_getparam",
    "sched_setparam",
    "sched_getscheduler",
    "sched_setscheduler",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_rr_get_interval",
    "sched_getattr",
    "sched_setattr",
    "getpriority",
    "setpriority",
    "getrlimit",
    "setrlimit",
    "prlimit64",
    "getrusage",
    "times",
    "capget",
    "pidfd_open",
    "pidfd_send_signal",
    "get_thread_area",
    "set_thread_area",
    "ioprio_get",
    "ioprio_set",
    "seccomp",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
    /* ids: only what a process may do without capabilities */
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getresuid",
    "getresgid",
    "getgroups",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setfsuid",
    "setfsgid",
    /* signals */
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigpending",
    "rt_sigtimedwait",
    "rt_sigsuspend",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "pause",
    "alarm",
    "restart_syscall",
    /* time */
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "time",
    "getitimer",
    "setitimer",
    "timer_create",
    "timer_settime",
    "timer_gettime",
    "timer_getoverrun",
    "timer_delete",
    "timerfd_create",
    "timerfd_settime",
    "timerfd_gettime",
    /* polling and events */
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "eventfd",
    "eventfd2",
    /* sockets (families are filtered below) */
    "bind",
    "connect",
    "listen",
    "accept",
    "accept4",
    "getsockname",
    "getpeername",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
    "setsockopt",
    "getsockopt",
    /* SysV IPC and POSIX mqueues: private to the ipc namespace */
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    /* async io (not io_uring) */
    "io_setup",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_submit",
    "io_cancel",
    /* misc */
    "getrandom",
    "sysinfo",
    "getcpu",
    "get_mempolicy",
    "socketcall",
};

/* Allows syscall nr unless the low 32 bits of argument arg equal one of
 * bad[].  libseccomp refuses a rule whose action is the default (EPERM) and
 * two comparisons of one argument in one rule, so "x not in bad" is written
 * as a union of single masked comparisons: x differs from all of bad[] on
 * a bit where they all agree, or x's pattern on the bits where they differ
 * is none of theirs.  The kernel reads the ioctl command as 32 bits, so
 * only the low half counts (high garbage cannot sneak TIOCSTI through). */
#define S_EXCEPT_DIFF_BITS_MAX 4 /* patterns enumerated: 2^this */
static int s_allow_except(scmp_filter_ctx ctx, int nr, unsigned arg, const scmp_datum_t *bad,
                          size_t n) {
    const scmp_datum_t low = 0xffffffffu;
    scmp_datum_t diff = 0;
    for (size_t i = 1; i < n; i++)
        diff |= (bad[i] ^ bad[0]) & low;
    if (__builtin_popcountll(diff) > S_EXCEPT_DIFF_BITS_MAX) return -EINVAL;
    int rc;
    for (unsigned b = 0; b < 32; b++) {
        scmp_datum_t bit = (scmp_datum_t) 1 << b;
        if (diff & bit) continue;
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                              SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, bit, ~bad[0] & bit));
        if (rc < 0) return rc;
    }
    /* every value of the differing bits: sub-masks of diff */
    for (scmp_datum_t pat = diff;; pat = (pat - 1) & diff) {
        bool is_bad = false;
        for (size_t i = 0; i < n; i++)
            is_bad |= (bad[i] & diff) == pat;
        if (!is_bad) {
            rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                                  SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, diff, pat));
            if (rc < 0) return rc;
        }
        if (pat == 0) break;
    }
    return 0;
}

static int s_rules(scmp_filter_ctx ctx, unsigned *n_allowed, char *why, size_t why_len) {
    int rc;
    for (size_t i = 0; i < sizeof s_allow / sizeof s_allow[0]; i++) {
        int nr = seccomp_syscall_resolve_name(s_allow[i]);
        if (nr == __NR_SCMP_ERROR) continue;
        if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0) {
            if (rc == -EEXIST) continue;
            cb_fmt_why(why, why_len, "seccomp_rule_add(%s): %s", s_allow[i], strerror(-rc));
            return -1;
        }
        (*n_allowed)++;
    }
    /* clone: only without namespace flags (flags are arg 0 on x86_64/aarch64) */
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, S_CLONE_NS_MASK, 0));
    if (rc < 0) goto fail;
    /* clone3 passes flags in memory we cannot read: make libc fall back */
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (rc < 0) goto fail;
    /* sockets: unix, inet, inet6 only */
    static const int fams[] = {AF_UNIX, AF_INET, AF_INET6};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) fams[i]));
        if (rc < 0) goto fail;
    }
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t) AF_UNIX));
    if (rc < 0) goto fail;
    /* personality: query and the values glibc/Python use */
    static const scmp_datum_t pers[] = {PER_LINUX, S_PERSONALITY_QUERY};
    for (size_t i = 0; i < sizeof pers / sizeof pers[0]; i++) {
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                              SCMP_A0(SCMP_CMP_EQ, pers[i]));
        if (rc < 0) goto fail;
    }
    /* ioctl: everything but terminal injection (see s_allow_except) */
    static const scmp_datum_t bad_ioctls[] = {TIOCSTI, TIOCLINUX};
    rc = s_allow_except(ctx, SCMP_SYS(ioctl), 1, bad_ioctls,
                        sizeof bad_ioctls / sizeof bad_ioctls[0]);
    if (rc < 0) goto fail;
    *n_allowed += 6; /* clone socket socketpair personality ioctl clone3(ENOSYS) */
    return 0;
fail:
    cb_fmt_why(why, why_len, "seccomp_rule_add (argument rules): %s", strerror(-rc));
    return -1;
}

int cb_seccomp_build(cb_seccomp_t *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (ctx == NULL) {
        cb_fmt_why(why, why_len, "seccomp_init failed");
        return -1;
    }
    int rc = -1;
    cb_autofd int mfd = -1;
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0) {
        cb_fmt_why(why, why_len, "seccomp_attr_set failed");
        goto out;
    }
    if (s_rules(ctx, &out->n_allowed, why, why_len) < 0) goto out;
    mfd = memfd_create("cellblock-seccomp", MFD_CLOEXEC);
    if (mfd < 0) {
        cb_fmt_why(why, why_len, "memfd_create: %s", strerror(errno));
        goto out;
    }
    int erc = seccomp_export_bpf(ctx, mfd);
    if (erc < 0) {
        cb_fmt_why(why, why_len, "seccomp_export_bpf: %s", strerror(-erc));
        goto out;
    }
    struct stat st;
    if (fstat(mfd, &st) < 0 || st.st_size <= 0 ||
        (size_t) st.st_size % sizeof(struct sock_filter) != 0 ||
        (size_t) st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
        cb_fmt_why(why, why_len, "seccomp_export_bpf: unexpected program size");
        goto out;
    }
    struct sock_filter *insns = malloc((size_t) st.st_size);
    if (insns == NULL || pread(mfd, insns, (size_t) st.st_size, 0) != st.st_size) {
        free(insns);
        cb_fmt_why(why, why_len, "reading the exported filter failed");
        goto out;
    }
    out->prog.filter = insns;
    out->prog.len = (unsigned short) ((size_t) st.st_size / sizeof(struct sock_filter));
    rc = 0;
out:
    seccomp_release(ctx);
    return rc;
}

void cb_seccomp_fini(cb_seccomp_t *f) {
    free(f->prog.filter);
    f->prog.filter = NULL;
    f->prog.len = 0;
}
