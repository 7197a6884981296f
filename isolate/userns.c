/*
 * userns.c - map one id into the sandbox's user namespace.
 *
 * Every sandbox has a user namespace.  Launched as root, the launcher maps
 * the sandbox's inside ids (65534 by default) to a host id of the sandbox's
 * own (isolate/idpool.h), so no two sandboxes share per-user counters.
 * Unprivileged, a process may map exactly its own uid and gid, and must
 * deny setgroups first: the kernel user's ids become the sandbox ids, so
 * nothing inside is uid 0 and files the sandbox writes belong to the
 * kernel's user on the host.
 */
#include "isolate/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

#define S_MAP_LINE_MAX 96 /* "0 root_outer 1\ninner outer 1\n" */
#define S_SYSCTL_MAX   32 /* bytes of a sysctl value */

static int s_write_file(pid_t pid, const char *file, const char *value) {
    char path[CB_PROC_PATH_MAX];
    (void) snprintf(path, sizeof path, "/proc/%ld/%s", (long) pid, file);
    cb_autofd int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        PLOG_E("open(%s)", path);
        return -1;
    }
    if (cb_write_all(fd, value, strlen(value)) < 0) {
        PLOG_E("write(%s, %s)", path, value);
        return -1;
    }
    return 0;
}

int cb_userns_write_maps(pid_t pid, uid_t inner_uid, uid_t outer_uid, gid_t inner_gid,
                         gid_t outer_gid, bool deny_setgroups, long outer_root) {
    char line[S_MAP_LINE_MAX], root[S_MAP_LINE_MAX / 2] = "";
    if (deny_setgroups && s_write_file(pid, "setgroups", "deny") < 0 && errno != ENOENT) return -1;
    if (outer_root >= 0) {
        if (inner_uid == 0 || inner_gid == 0) {
            errno = EINVAL; /* the two lines would overlap */
            return -1;
        }
        (void) snprintf(root, sizeof root, "0 %ld 1\n", outer_root);
    }
    (void) snprintf(line, sizeof line, "%s%lu %lu 1\n", root, (unsigned long) inner_uid,
                    (unsigned long) outer_uid);
    if (s_write_file(pid, "uid_map", line) < 0) return -1;
    (void) snprintf(line, sizeof line, "%s%lu %lu 1\n", root, (unsigned long) inner_gid,
                    (unsigned long) outer_gid);
    if (s_write_file(pid, "gid_map", line) < 0) return -1;
    return 0;
}

static long s_sysctl(const char *path) {
    char buf[S_SYSCTL_MAX] = "";
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    return atol(buf);
}

bool cb_userns_chrooted(void) {
    /* mountinfo lists the mounts under our root, by their path from it: a
     * chroot into a plain directory has none at "/" */
    static char buf[CB_USERNS_MOUNTINFO_MAX];
    cb_autofd int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t) r;
        if (got == sizeof buf - 1) return false; /* too many mounts to tell: assume not */
    }
    buf[got] = '\0';
    /* fields: id parent major:minor root mountpoint ... */
    for (char *line = buf; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *f = line;
        for (int i = 0; i < 4 && f != NULL; i++) {
            f = strchr(f, ' ');
            if (f) f++;
        }
        if (f != NULL && f[0] == '/' && f[1] == ' ') return false;
        line = nl ? nl + 1 : NULL;
    }
    return true;
}

bool cb_userns_possible(char *why, size_t why_len) {
    if (cb_userns_chrooted()) {
        cb_fmt_why(why, why_len, "the launcher runs in a chroot, where the kernel refuses them");
        return false;
    }
    if (s_sysctl("/proc/sys/user/max_user_namespaces") == 0) {
        cb_fmt_why(why, why_len, "user.max_user_namespaces is 0");
        return false;
    }
    return true;
}

void cb_userns_diagnose(int err, char *buf, size_t len) {
    if (err == EPERM && cb_userns_chrooted()) {
        (void) snprintf(buf, len,
                        "the launcher runs in a chroot: the kernel refuses user namespaces to "
                        "chrooted processes, and an unprivileged launcher needs one; run the "
                        "kernel as root, or enter the build environment with its own mount "
                        "namespace and pivot_root (unshare, bwrap, systemd-nspawn) instead of "
                        "chroot");
    } else if (s_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1) {
        (void) snprintf(buf, len,
                        "unprivileged user namespaces are restricted by AppArmor "
                        "(kernel.apparmor_restrict_unprivileged_userns=1); install the profile "
                        "shipped in launcher/apparmor/cellblock-launcher into /etc/apparmor.d/ "
                        "and run apparmor_parser -r on it, or run the kernel as root");
    } else if (s_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0) {
        (void) snprintf(buf, len,
                        "unprivileged user namespaces are disabled "
                        "(kernel.unprivileged_userns_clone=0); enable them with sysctl -w "
                        "kernel.unprivileged_userns_clone=1, or run the kernel as root");
    } else if (s_sysctl("/proc/sys/user/max_user_namespaces") == 0) {
        (void) snprintf(buf, len,
                        "user namespaces are disabled (user.max_user_namespaces=0); set it to "
                        "a positive value with sysctl, or run the kernel as root");
    } else if (err == EPERM) {
        (void) snprintf(buf, len,
                        "creating namespaces was refused (EPERM): inside a container the "
                        "runtime's seccomp profile or missing capabilities forbid it; run the "
                        "container with the project's profile (--security-opt "
                        "seccomp=deploy/container/seccomp.json, see docs/DEPLOY.md) and "
                        "user namespaces allowed");
    } else if (err == ENOSPC || err == EUSERS) {
        (void) snprintf(buf, len,
                        "the namespace limit is reached (%s); raise user.max_user_namespaces "
                        "and friends under /proc/sys/user/",
                        strerror(err));
    } else {
        (void) snprintf(buf, len, "creating namespaces failed: %s", strerror(err));
    }
}
