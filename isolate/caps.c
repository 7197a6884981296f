/*
 * caps.c - give up every privilege before exec (nsjail caps.cc, bubblewrap
 * drop_privs).
 *
 * Order matters: the bounding set and securebits need CAP_SETPCAP, so they
 * go first; then the ids (which clear permitted/effective when leaving
 * uid 0 without KEEP_CAPS); then capset() to zero whatever a user namespace
 * gave us; no_new_privs last so setuid binaries and file caps stay inert.
 */
#include "isolate/caps.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolate/util.h"

#define S_LAST_CAP_DEFAULT 63 /* drop this many when /proc does not say */
#define S_LAST_CAP_BUF     16 /* bytes of cap_last_cap */

int cb_rlimits_add(cb_rlimits_t *r, int resource, rlim_t value) {
    if (r->n >= CB_RLIMITS_MAX) return -1;
    r->resource[r->n] = resource;
    r->value[r->n].rlim_cur = value;
    r->value[r->n].rlim_max = value;
    r->n++;
    return 0;
}

int cb_rlimits_apply(const cb_rlimits_t *r) {
    for (int i = 0; i < r->n; i++)
        if (setrlimit((__rlimit_resource_t) r->resource[i], &r->value[i]) < 0) return -1;
    return 0;
}

int cb_caps_last_cap(void) {
    char buf[S_LAST_CAP_BUF] = "";
    int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return S_LAST_CAP_DEFAULT;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return S_LAST_CAP_DEFAULT;
    buf[n] = '\0';
    int v = atoi(buf);
    return v > 0 && v <= S_LAST_CAP_DEFAULT ? v : S_LAST_CAP_DEFAULT;
}

int cb_caps_drop_all(int last_cap, bool set_ids, uid_t uid, gid_t gid) {
    for (int c = 0; c <= last_cap; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL) return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) return -1;
    /* no path back to privilege through uid 0 or setuid fix-ups, locked */
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                         SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0) return -1;
    if (set_ids) {
        if (setgroups(0, NULL) < 0) return -1;
        if (setresgid(gid, gid, gid) < 0) return -1;
        if (setresuid(uid, uid, uid) < 0) return -1;
    }
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &hdr, data) < 0) return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
    return 0;
}

bool cb_caps_none_left(void) {
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &hdr, data) < 0) return false;
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable) return false;
    for (int c = 0; c <= cb_caps_last_cap(); c++)
        if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) > 0) return false;
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_ADMIN, 0, 0) <= 0;
}

int cb_caps_become(uid_t uid, gid_t gid, bool clear_groups) {
    if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0) return -1;
    if (clear_groups && setgroups(0, NULL) < 0) return -1;
    if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) return -1;
    /* leaving uid 0 cleared the effective set; the permitted one was kept */
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &hdr, data) < 0) return -1;
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
        data[i].effective = data[i].permitted;
    if (syscall(SYS_capset, &hdr, data) < 0) return -1;
    return prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
}
