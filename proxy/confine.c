/*
 * confine.c - the proxy confines itself (see confine.h).
 *
 * The proxy parses bytes written by hostile code and opens connections on
 * the host's network, so a bug in it must not become a foothold: even with
 * code execution in the proxy an attacker would hold an unprivileged
 * process that cannot open files for writing, read anything but two files,
 * exec, create unix or netlink sockets, ptrace, or change its ids.  What it
 * can still do is what the proxy does: TCP/UDP to the network.  That is why
 * the policy checks live in the proxy's code path before every connect(2),
 * and why the proxy is kept small.
 */
#include "proxy/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/netproxy_limits.h"
#include "isolate/util.h"

#include "isolate/landlock_abi.h"

/* Readable after confinement: c-ares reads the hosts file per lookup, and
 * may seed its query ids from urandom. */
static const char *const s_readable[] = {"/etc/hosts", "/dev/urandom"};

static const char *const s_allow[] = {
    "read",
    "write",
    "readv",
    "writev",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    "close",
    "poll",
    "ppoll",
    "accept4",
    "connect",
    "getsockopt",
    "setsockopt",
    "getsockname",
    "getpeername",
    "shutdown",
    "fcntl",
    "fstat",
    "newfstatat",
    "lseek",
    "mmap",
    "munmap",
    "mremap",
    "brk",
    "madvise",
    "mprotect",
    "clock_gettime",
    "gettimeofday",
    "getrandom",
    "exit",
    "exit_group",
    "rt_sigreturn",
    "rt_sigprocmask",
    "getpid",
    "gettid",
    "futex",
    "restart_syscall",
    "bind",
    "sched_yield",
    "clock_nanosleep",
    "nanosleep",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
};

static int s_drop_root(char *why, size_t len) {
    if (geteuid() != 0 && getuid() != 0) return 0;
    gid_t g = CB_PROXY_UID;
    uid_t u = CB_PROXY_UID;
    if (setgroups(0, NULL) < 0 || setresgid(g, g, g) < 0 || setresuid(u, u, u) < 0) {
        cb_fmt_why(why, len, "dropping root for uid %lu: %s", (unsigned long) u, strerror(errno));
        return -1;
    }
    return 0;
}

static int s_check_no_caps(char *why, size_t len) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) < 0) {
        cb_fmt_why(why, len, "capget: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < 2; i++)
        if (d[i].effective || d[i].permitted || d[i].inheritable) {
            cb_fmt_why(why, len, "the proxy still holds capabilities");
            return -1;
        }
    /* the ambient set is emptied too (it is not in capget) */
    (void) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    return 0;
}

static int s_landlock(int *abi_out, char *why, size_t len) {
    *abi_out = 0;
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi <= 0) return 0; /* not in this kernel: the other layers remain */
    cb_landlock_attr_t attr = {.handled_access_fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1};
    size_t attr_size = offsetof(cb_landlock_attr_t, handled_access_net);
    if (abi >= CB_LANDLOCK_ABI_REFER) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= CB_LANDLOCK_ABI_TRUNCATE) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= CB_LANDLOCK_ABI_IOCTL) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    if (abi >= CB_LANDLOCK_ABI_SCOPE) {
        attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
        attr_size = sizeof attr;
    }
    cb_autofd int rs = (int) syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (rs < 0) {
        cb_fmt_why(why, len, "landlock_create_ruleset: %s", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < sizeof s_readable / sizeof s_readable[0]; i++) {
        cb_autofd int fd = open(s_readable[i], O_PATH | O_CLOEXEC);
        if (fd < 0) continue; /* a host without it: nothing to allow */
        struct landlock_path_beneath_attr pb = {.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE,
                                                .parent_fd = fd};
        if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
            cb_fmt_why(why, len, "landlock_add_rule(%s): %s", s_readable[i], strerror(errno));
            return -1;
        }
    }
    if (syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
        cb_fmt_why(why, len, "landlock_restrict_self: %s", strerror(errno));
        return -1;
    }
    *abi_out = (int) abi;
    return 0;
}

static int s_seccomp(char *why, size_t len) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (ctx == NULL) {
        cb_fmt_why(why, len, "seccomp_init failed");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < sizeof s_allow / sizeof s_allow[0] && rc == 0; i++) {
        int nr = seccomp_syscall_resolve_name(s_allow[i]);
        if (nr == __NR_SCMP_ERROR) continue; /* not on this architecture */
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
    }
    /* sockets: the network only */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_INET));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_INET6));
    /* files: read-only opens */
    scmp_datum_t wmask = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_TMPFILE;
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
                              SCMP_A2(SCMP_CMP_MASKED_EQ, wmask, 0));
    /* ioctl: FIONBIO / FIONREAD only (c-ares) */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_EQ, FIONBIO));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_EQ, FIONREAD));
    if (rc == 0) rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc != 0) {
        cb_fmt_why(why, len, "seccomp filter: %s", strerror(-rc));
        return -1;
    }
    return 0;
}

int cb_proxy_confine(int *landlock_abi, char *why, size_t why_len) {
    if (s_drop_root(why, why_len) < 0 || s_check_no_caps(why, why_len) < 0) return -1;
    if (prctl(PR_SET_DUMPABLE, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        cb_fmt_why(why, why_len, "prctl: %s", strerror(errno));
        return -1;
    }
    if (s_landlock(landlock_abi, why, why_len) < 0) return -1;
    return s_seccomp(why, why_len);
}
