/*
 * mount.c - build the sandbox's root (after bubblewrap's setup_newroot and
 * nsjail mnt.cc).
 *
 *   1. mount --make-rprivate /       nothing propagates back to the host
 *   2. tmpfs on the staging dir,     pivot_root into it: the host root is
 *      now /oldroot, the new tree is built at /newroot
 *   3. run the plan: tmpfs, read-only binds from /oldroot, device binds,
 *      synthesized files, symlinks, /proc
 *   4. detach /oldroot, pivot_root into /newroot, detach the staging tmpfs
 *   5. remount / read-only
 *
 * Read-only binds use mount_setattr(AT_RECURSIVE) so submounts turn
 * read-only too; on kernels before 5.12 a remount keeps the flags the
 * source mount already had (a user namespace may not clear locked ones).
 */
#include "mount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV  0x00000004
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif

struct s_mount_attr {
    unsigned long long attr_set;    /* MOUNT_ATTR_* to set */
    unsigned long long attr_clr;    /* to clear */
    unsigned long long propagation; /* unchanged */
    unsigned long long userns_fd;   /* unused */
};

#define S_NEWROOT "/" CB_SANDBOX_NEWROOT
#define S_OLDROOT "/" CB_SANDBOX_OLDROOT

/* ---- plan ------------------------------------------------------------------ */

void cb_mount_plan_init(cb_mount_plan_t *p) {
    memset(p, 0, sizeof *p);
    (void) snprintf(p->stage, sizeof p->stage, "%s", CB_SANDBOX_STAGE);
}

void cb_mount_plan_fini(cb_mount_plan_t *p) {
    for (size_t i = 0; i < p->n; i++) {
        free(p->ops[i].src);
        free(p->ops[i].dst);
        free(p->ops[i].data);
    }
    p->n = 0;
}

static cb_mount_op_t *s_op(cb_mount_plan_t *p, cb_mount_kind_t kind, const char *sandbox) {
    if (p->n >= CB_SANDBOX_MOUNTS_MAX) {
        LOG_E("mount plan full (%d entries)", CB_SANDBOX_MOUNTS_MAX);
        errno = ENOSPC;
        return NULL;
    }
    cb_mount_op_t *op = &p->ops[p->n];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    if (asprintf(&op->dst, "%s%s", S_NEWROOT, sandbox) < 0) {
        op->dst = NULL;
        return NULL;
    }
    if (strlen(op->dst) >= CB_PATH_MAX) {
        free(op->dst);
        errno = ENAMETOOLONG;
        return NULL;
    }
    p->n++;
    return op;
}

int cb_mount_plan_bind(cb_mount_plan_t *p, const char *host, const char *sandbox, bool optional,
                       bool keep_symlink) {
    struct stat lst;
    if (lstat(host, &lst) < 0) {
        if (optional && errno == ENOENT) return 0;
        PLOG_E("lstat(%s)", host);
        return -1;
    }
    if (keep_symlink && S_ISLNK(lst.st_mode)) {
        char target[CB_PATH_MAX];
        ssize_t n = readlink(host, target, sizeof target - 1);
        if (n < 0) return -1;
        target[n] = '\0';
        return cb_mount_plan_symlink(p, target, sandbox);
    }
    char real[CB_PATH_MAX]; /* == PATH_MAX; <limits.h> is shadowed by isolate/limits.h */
    if (realpath(host, real) == NULL) {
        if (optional && errno == ENOENT) return 0;
        PLOG_E("realpath(%s)", host);
        return -1;
    }
    struct stat st;
    if (stat(real, &st) < 0) return -1;
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        LOG_E("%s is neither a directory nor a regular file", host);
        errno = EINVAL;
        return -1;
    }
    cb_mount_op_t *op = s_op(p, CB_MNT_BIND_RO, sandbox);
    if (op == NULL) return -1;
    op->src_is_dir = S_ISDIR(st.st_mode);
    if (asprintf(&op->src, "%s%s", S_OLDROOT, real) < 0) {
        op->src = NULL;
        return -1;
    }
    return 0;
}

int cb_mount_plan_dev(cb_mount_plan_t *p, const char *name) {
    char host[CB_OPT_MAX_NAME], sandbox[CB_OPT_MAX_NAME];
    (void) snprintf(host, sizeof host, "/dev/%s", name);
    (void) snprintf(sandbox, sizeof sandbox, "/dev/%s", name);
    struct stat st;
    if (stat(host, &st) < 0 || !S_ISCHR(st.st_mode)) {
        LOG_E("%s is not a character device on this host", host);
        errno = ENODEV;
        return -1;
    }
    cb_mount_op_t *op = s_op(p, CB_MNT_BIND_DEV, sandbox);
    if (op == NULL || asprintf(&op->src, "%s%s", S_OLDROOT, host) < 0) return -1;
    return 0;
}

int cb_mount_plan_tmpfs(cb_mount_plan_t *p, const char *sandbox, const char *options) {
    cb_mount_op_t *op = s_op(p, CB_MNT_TMPFS, sandbox);
    if (op == NULL || (op->data = strdup(options)) == NULL) return -1;
    return 0;
}

int cb_mount_plan_symlink(cb_mount_plan_t *p, const char *target, const char *sandbox) {
    cb_mount_op_t *op = s_op(p, CB_MNT_SYMLINK, sandbox);
    if (op == NULL || (op->src = strdup(target)) == NULL) return -1;
    return 0;
}

int cb_mount_plan_file(cb_mount_plan_t *p, const char *sandbox, const char *content,
                       unsigned mode) {
    if (strlen(content) > CB_SANDBOX_FILE_MAX) {
        errno = EFBIG;
        return -1;
    }
    cb_mount_op_t *op = s_op(p, CB_MNT_FILE, sandbox);
    if (op == NULL || (op->data = strdup(content)) == NULL) return -1;
    op->mode = mode;
    return 0;
}

int cb_mount_plan_dir(cb_mount_plan_t *p, const char *sandbox, unsigned mode) {
    cb_mount_op_t *op = s_op(p, CB_MNT_DIR, sandbox);
    if (op == NULL) return -1;
    op->mode = mode;
    return 0;
}

int cb_mount_plan_proc(cb_mount_plan_t *p, const char *sandbox) {
    return s_op(p, CB_MNT_PROC, sandbox) == NULL ? -1 : 0;
}

int cb_mount_plan_rdonly(cb_mount_plan_t *p, const char *sandbox) {
    return s_op(p, CB_MNT_RDONLY, sandbox) == NULL ? -1 : 0;
}

/* ---- run (async-signal-safe from here on) --------------------------------- */

static size_t s_len(const char *s) {
    size_t n = 0;
    while (s[n] != '\0')
        n++;
    return n;
}

/* mkdir -p of path (or of its parent when parent_only). */
static int s_mkdir_p(const char *path, bool parent_only, unsigned mode) {
    char buf[CB_PATH_MAX];
    size_t n = s_len(path);
    if (n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    if (parent_only) {
        while (n > 0 && buf[n - 1] != '/')
            n--;
        if (n > 1) n--;
        buf[n] = '\0';
    }
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST) return -1;
        buf[i] = c;
    }
    return 0;
}

static int s_mountpoint(const char *dst, bool dir) {
    if (dir) return s_mkdir_p(dst, false, CB_SANDBOX_MKDIR_MODE);
    if (s_mkdir_p(dst, true, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
    int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

static int s_make_ro(const char *dst) {
    struct s_mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &a, sizeof a) == 0) return 0;
    if (errno != ENOSYS) return -1;
    struct statvfs sv;
    if (statvfs(dst, &sv) < 0) return -1;
    unsigned long keep = 0;
    if (sv.f_flag & ST_NOEXEC) keep |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME) keep |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) keep |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) keep |= MS_RELATIME;
    return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | keep,
                 NULL);
}

static int s_write_file(const char *dst, const char *content, unsigned mode) {
    if (s_mkdir_p(dst, true, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
    int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return -1;
    size_t len = s_len(content), off = 0;
    while (off < len) {
        ssize_t w = write(fd, content + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        off += (size_t) w;
    }
    close(fd);
    return 0;
}

static int s_run_op(const cb_mount_op_t *op) {
    switch (op->kind) {
    case CB_MNT_DIR:
        if (s_mkdir_p(op->dst, false, op->mode) < 0) return -1;
        return chmod(op->dst, op->mode);
    case CB_MNT_BIND_RO:
        if (s_mountpoint(op->dst, op->src_is_dir) < 0) return -1;
        if (mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0) return -1;
        return s_make_ro(op->dst);
    case CB_MNT_BIND_DEV:
        if (s_mountpoint(op->dst, false) < 0) return -1;
        if (mount(op->src, op->dst, NULL, MS_BIND, NULL) < 0) return -1;
        return mount(NULL, op->dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL);
    case CB_MNT_TMPFS:
        if (s_mkdir_p(op->dst, false, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
        return mount("tmpfs", op->dst, "tmpfs", MS_NOSUID | MS_NODEV, op->data);
    case CB_MNT_SYMLINK:
        if (s_mkdir_p(op->dst, true, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
        return symlink(op->src, op->dst);
    case CB_MNT_FILE: return s_write_file(op->dst, op->data, op->mode);
    case CB_MNT_PROC:
        if (s_mkdir_p(op->dst, false, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
        return mount("proc", op->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    case CB_MNT_RDONLY:
        return mount(NULL, op->dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL);
    }
    errno = EINVAL;
    return -1;
}

int cb_mount_run(const cb_mount_plan_t *p, int *failed) {
    *failed = -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -1;
    if (mount("tmpfs", p->stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
        return -1;
    if (chdir(p->stage) < 0) return -1;
    if (mkdir(CB_SANDBOX_NEWROOT, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
    if (mkdir(CB_SANDBOX_OLDROOT, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
    if (syscall(SYS_pivot_root, ".", CB_SANDBOX_OLDROOT) < 0) return -1;
    if (chdir("/") < 0) return -1;
    {
        char opts[CB_OPT_MAX_NAME];
        /* the root stays tiny and becomes read-only: only mountpoints and /etc */
        int n = snprintf(opts, sizeof opts, "mode=0755,size=%dk", CB_SANDBOX_ROOT_TMPFS_KB);
        if (n < 0 || (size_t) n >= sizeof opts) return -1;
        if (mount("tmpfs", S_NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) return -1;
    }
    for (size_t i = 0; i < p->n; i++) {
        if (s_run_op(&p->ops[i]) < 0) {
            *failed = (int) i;
            return -1;
        }
    }
    if (umount2(S_OLDROOT, MNT_DETACH) < 0) return -1;
    if (chdir(S_NEWROOT) < 0) return -1;
    if (syscall(SYS_pivot_root, ".", ".") < 0) return -1;
    if (umount2(".", MNT_DETACH) < 0) return -1; /* the staging tmpfs, stacked on / */
    if (chdir("/") < 0) return -1;
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        return -1;
    return 0;
}
