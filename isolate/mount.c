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
#include "isolate/mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/overlay.h"
#include "isolate/util.h"

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
        if ((p->ops[i].kind == CB_MNT_OVERLAY || p->ops[i].kind == CB_MNT_COPY) &&
            p->ops[i].fd >= 0)
            close(p->ops[i].fd);
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

cb_mount_op_t *cb_mount_plan_add(cb_mount_plan_t *p, cb_mount_kind_t kind, const char *sandbox) {
    cb_mount_op_t *op = s_op(p, kind, sandbox);
    if (op != NULL) op->fd = -1;
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
    char real[CB_PATH_MAX]; /* == PATH_MAX */
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
    char host[CB_DEV_PATH_MAX], sandbox[CB_DEV_PATH_MAX];
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

/* What /proc tells of the host that a sandbox has no use for: runc's
 * maskedPaths, plus the boot line, kernel symbols, modules and config. */
static const char *const s_proc_masked[] = {
    "cmdline",    "kallsyms",      "kcore",       "keys",        "key-users",   "kmsg",
    "config.gz",  "modules",       "timer_list",  "timer_stats", "sched_debug", "latency_stats",
    "interrupts", "vmallocinfo",   "iomem",       "ioports",     "slabinfo",    "sysrq-trigger",
    "kpagecount", "kpageflags",    "kpagecgroup", "acpi",        "asound",      "scsi",
    "driver",     "dynamic_debug", "tty",
};
/* runc's readonlyPaths (sysrq-trigger is masked above) */
static const char *const s_proc_readonly[] = {"bus", "fs", "irq", "sys"};

int cb_mount_plan_proc_masks(cb_mount_plan_t *p, const char *proc) {
    char path[CB_PATH_MAX];
    for (size_t i = 0; i < sizeof s_proc_masked / sizeof s_proc_masked[0]; i++) {
        (void) snprintf(path, sizeof path, "%s/%s", proc, s_proc_masked[i]);
        cb_mount_op_t *op = s_op(p, CB_MNT_MASK, path);
        if (op == NULL || asprintf(&op->src, "%s/dev/null", S_NEWROOT) < 0) return -1;
    }
    for (size_t i = 0; i < sizeof s_proc_readonly / sizeof s_proc_readonly[0]; i++) {
        (void) snprintf(path, sizeof path, "%s/%s", proc, s_proc_readonly[i]);
        if (s_op(p, CB_MNT_RO_SELF, path) == NULL) return -1;
    }
    return 0;
}

/* Adds a BLOB op for one host file (read now, NUL bytes and all). */
static int s_copy_file(cb_mount_plan_t *p, int dfd, const char *name, const char *sandbox,
                       size_t *bytes, size_t *files) {
    cb_autofd int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno == ELOOP ? 0 : -1; /* a symlink: skipped */
    struct stat st;
    if (fstat(fd, &st) < 0) return -1;
    if (!S_ISREG(st.st_mode)) return 0;
    if (*files >= CB_SANDBOX_COPY_FILES_MAX ||
        (size_t) st.st_size > CB_SANDBOX_COPY_BYTES_MAX - *bytes) {
        LOG_E("%s: more than %d files or %u bytes to copy", sandbox, CB_SANDBOX_COPY_FILES_MAX,
              CB_SANDBOX_COPY_BYTES_MAX);
        errno = E2BIG;
        return -1;
    }
    size_t len = (size_t) st.st_size;
    char *data = malloc(len + 1); /* +1: never malloc(0) */
    if (data == NULL) return -1;
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, data + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO; /* shrank while we read */
            free(data);
            errno = e;
            return -1;
        }
        got += (size_t) r;
    }
    cb_mount_op_t *op = s_op(p, CB_MNT_BLOB, sandbox);
    if (op == NULL) {
        free(data);
        return -1;
    }
    op->data = data;
    op->data_len = len;
    op->mode = st.st_mode & 0755;
    op->mtime = st.st_mtim;
    *bytes += len;
    (*files)++;
    return 0;
}

static int s_copy_tree(cb_mount_plan_t *p, int dfd, const char *sandbox, int depth, size_t *bytes,
                       size_t *files, size_t *dirs) {
    DIR *d = cb_opendir_at(dfd);
    if (d == NULL) return -1;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue; /* ., .., and hidden markers */
        char sub[CB_PATH_MAX];
        int n = snprintf(sub, sizeof sub, "%s/%s", sandbox, e->d_name);
        if (n < 0 || (size_t) n >= sizeof sub) {
            errno = ENAMETOOLONG;
            rc = -1;
            break;
        }
        if (e->d_type == DT_DIR) {
            if (depth <= 0) continue;
            cb_autofd int cfd =
                openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (cfd < 0) continue;
            (*dirs)++;
            if (cb_mount_plan_dir(p, sub, CB_SANDBOX_MKDIR_MODE) < 0 ||
                s_copy_tree(p, cfd, sub, depth - 1, bytes, files, dirs) < 0)
                rc = -1;
        } else if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN) {
            rc = s_copy_file(p, dfd, e->d_name, sub, bytes, files);
        }
    }
    int saved = errno;
    closedir(d);
    errno = saved;
    return rc;
}

int cb_mount_plan_copy_dir(cb_mount_plan_t *p, const char *host_dir, const char *sandbox) {
    cb_autofd int dfd = open(host_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        PLOG_E("open(%s)", host_dir);
        return -1;
    }
    /* the tmpfs first: its size is patched once the files are known */
    size_t tmpfs_at = p->n;
    if (cb_mount_plan_tmpfs(p, sandbox, "") < 0) return -1;
    size_t bytes = 0, files = 0, dirs = 0;
    if (s_copy_tree(p, dfd, sandbox, CB_SANDBOX_COPY_DEPTH, &bytes, &files, &dirs) < 0) {
        PLOG_E("copying %s", host_dir);
        return -1;
    }
    /* each file takes at least a page, each directory one too */
    size_t kb = bytes / 1024 + (files + dirs) * 4 + CB_SANDBOX_COPY_SLACK_KB;
    char *opts = NULL;
    if (asprintf(&opts, "mode=0755,size=%zuk,nr_inodes=%zu", kb, files + dirs + 16) < 0) return -1;
    free(p->ops[tmpfs_at].data);
    p->ops[tmpfs_at].data = opts;
    return cb_mount_plan_rdonly(p, sandbox);
}

int cb_mount_plan_copy_files(cb_mount_plan_t *p, const char *sandbox, const char *const *hosts,
                             size_t n) {
    if (n > CB_SANDBOX_COPY_FILES_MAX) {
        errno = E2BIG;
        return -1;
    }
    size_t tmpfs_at = p->n;
    if (cb_mount_plan_tmpfs(p, sandbox, "") < 0) return -1;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const char *base = strrchr(hosts[i], '/');
        base = base != NULL ? base + 1 : hosts[i];
        char dst[CB_PATH_MAX];
        int w = snprintf(dst, sizeof dst, "%s/%s", sandbox, base);
        if (w < 0 || (size_t) w >= sizeof dst || base[0] == '\0') {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(hosts[i], O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            (size_t) st.st_size > CB_SANDBOX_COPY_FD_BYTES_MAX - bytes) {
            int e = fd < 0 ? errno : S_ISREG(st.st_mode) ? E2BIG : EINVAL;
            if (fd >= 0) close(fd);
            errno = e;
            PLOG_E("copying %s (a regular file, at most %u bytes in all)", hosts[i],
                   CB_SANDBOX_COPY_FD_BYTES_MAX);
            errno = e;
            return -1;
        }
        cb_mount_op_t *op = cb_mount_plan_add(p, CB_MNT_COPY, dst);
        if (op == NULL) {
            close(fd);
            return -1;
        }
        op->fd = fd;
        op->data_len = (size_t) st.st_size;
        op->mode = st.st_mode & 0755;
        op->mtime = st.st_mtim;
        bytes += (size_t) st.st_size;
    }
    char *opts = NULL;
    if (asprintf(&opts, "mode=0755,size=%zuk,nr_inodes=%zu",
                 bytes / 1024 + n * 4 + CB_SANDBOX_COPY_SLACK_KB, n + 16) < 0)
        return -1;
    free(p->ops[tmpfs_at].data);
    p->ops[tmpfs_at].data = opts;
    return cb_mount_plan_rdonly(p, sandbox);
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

/* A BLOB (bytes in the plan) or a COPY (bytes of the host file open at
 * op->fd, read by offset: the fd is shared with every restart of the
 * sandbox, so its position never moves), with the host file's mtime. */
static int s_write_blob(const cb_mount_op_t *op) {
    if (s_mkdir_p(op->dst, true, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
    int fd = open(op->dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, op->mode);
    if (fd < 0) return -1;
    size_t done = 0;
    off_t off = 0;
    int rc = 0;
    while (done < op->data_len) {
        ssize_t w = op->kind == CB_MNT_COPY
                        ? sendfile(fd, op->fd, &off, op->data_len - done)
                        : write(fd, op->data + done, op->data_len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { /* 0: the host file shrank while we copied */
            if (w == 0) errno = EIO;
            rc = -1;
            break;
        }
        done += (size_t) w;
    }
    struct timespec times[2] = {op->mtime, op->mtime};
    if (rc == 0) rc = futimens(fd, times);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Hides dst; a path this kernel's /proc lacks is fine. */
static int s_mask(const cb_mount_op_t *op) {
    struct stat st;
    if (lstat(op->dst, &st) < 0) return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode))
        return mount("tmpfs", op->dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "size=0,mode=0555");
    return mount(op->src, op->dst, NULL, MS_BIND, NULL);
}

static int s_ro_self(const cb_mount_op_t *op) {
    if (mount(op->dst, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0) return errno == ENOENT ? 0 : -1;
    return s_make_ro(op->dst);
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
    case CB_MNT_MASK: return s_mask(op);
    case CB_MNT_RO_SELF: return s_ro_self(op);
    case CB_MNT_BLOB:
    case CB_MNT_COPY: return s_write_blob(op);
    case CB_MNT_OVERLAY:
        if (s_mkdir_p(op->dst, false, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
        return cb_overlay_run(op);
    }
    errno = EINVAL;
    return -1;
}

/* In a chroot our root is no mount point, so "/" cannot be made private,
 * and mounts we make could propagate to the host's peers of the mount the
 * chroot lives on.  We run as real root here (the kernel gives no user
 * namespace to a chrooted process), so: step out of the chroot to the mount
 * namespace's root (the classic chroot escape, in our own namespace), make
 * every mount of the namespace private from there, and chroot back. */
static int s_private_from_real_root(const char *stage) {
    int back = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (back < 0) return -1;
    int rc = -1;
    if (chroot(stage) < 0) goto out; /* cwd stays outside the new root */
    for (int i = 0; i < CB_CHROOT_UP_MAX; i++) {
        struct stat a, b;
        if (stat(".", &a) < 0 || stat("..", &b) < 0) goto out;
        if (a.st_dev == b.st_dev && a.st_ino == b.st_ino) break;
        if (chdir("..") < 0) goto out;
    }
    if (chroot(".") < 0) goto out;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) goto out;
    if (fchdir(back) < 0 || chroot(".") < 0 || chdir("/") < 0) goto out;
    rc = 0;
out:;
    int e = errno;
    close(back);
    errno = e;
    return rc;
}

int cb_mount_run(const cb_mount_plan_t *p, int *failed) {
    *failed = -1;
    /* EINVAL: our root is no mount point (a chroot) */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        if (errno != EINVAL) return -1;
        if (s_private_from_real_root(p->stage) < 0) return -1;
    }
    if (mount("tmpfs", p->stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
        return -1;
    if (mount(NULL, p->stage, NULL, MS_PRIVATE, NULL) < 0) return -1;
    if (chdir(p->stage) < 0) return -1;
    if (mkdir(CB_SANDBOX_NEWROOT, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
    if (mkdir(CB_SANDBOX_OLDROOT, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
    if (syscall(SYS_pivot_root, ".", CB_SANDBOX_OLDROOT) < 0) {
        if (errno != EINVAL) return -1;
        /* pivot_root needs the current root to be a mount point; in a
         * chroot it is a plain directory.  Bind the old root (the chroot's
         * view) into the staging tmpfs and chroot into that: the staging
         * tmpfs is a mount root, and the final pivot_root below works from
         * it.  The runner can never chroot (no CAP_SYS_CHROOT, and seccomp
         * refuses chroot), so the usual chroot escapes do not apply. */
        if (mount("/", CB_SANDBOX_OLDROOT, NULL, MS_BIND | MS_REC, NULL) < 0) return -1;
        if (chroot(".") < 0) return -1;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -1;
    }
    if (chdir("/") < 0) return -1;
    {
        char opts[CB_MOUNT_OPTS_MAX];
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
