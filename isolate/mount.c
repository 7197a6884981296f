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
 * Binds and tmpfs mounts are shown through overlays (the layers below), so
 * mountinfo prints nothing of the host's (see cb_mount_run in mount.h).
 * The plan itself is built in mount_plan.c.
 */
#include "isolate/mount.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolate/overlay.h"

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
/* In the staging tmpfs (detached once the new root is in place): the layers
 * behind the sandbox's mounts.  Their paths are all mountinfo names. */
#define S_LAYERS  "/layers"
#define S_EMPTY   S_LAYERS "/e" /* empty: the second lower of read-only overlays */
#define S_EMPTY2  S_LAYERS "/f" /* empty too: with S_EMPTY, the masks' overlay */
#define S_MASKDIR S_LAYERS "/m" /* that empty read-only overlay, bound over masked dirs */
#define S_SOURCE  "cellblock"   /* the source mountinfo shows for them */
#define S_STR(x)  S_STR2(x)
#define S_STR2(x) #x

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

/* ---- layers: what mountinfo shows instead of the host's mounts ---------- */

/* Appends s to buf (cap bytes, *len used).  0 ok, -1 ENAMETOOLONG. */
static int s_cat(char *buf, size_t cap, size_t *len, const char *s) {
    size_t n = s_len(s);
    if (*len + n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf + *len, s, n + 1);
    *len += n;
    return 0;
}

/* "/layers/<kind><i>" into buf.  0 ok, -1 ENAMETOOLONG. */
static int s_layer(char *buf, size_t cap, const char *kind, size_t i) {
    char num[24], *d = num + sizeof num - 1;
    *d = '\0';
    do
        *--d = (char) ('0' + i % 10);
    while ((i /= 10) > 0 && d > num);
    size_t len = 0;
    return s_cat(buf, cap, &len, S_LAYERS "/") < 0 || s_cat(buf, cap, &len, kind) < 0 ||
                   s_cat(buf, cap, &len, d) < 0
               ? -1
               : 0;
}

/* A read-only overlay of the host directory lower at dst: lowerdir is given
 * as "." from inside it, so mountinfo names no host path. */
static int s_ro_overlay(const char *lower, const char *dst) {
    if (chdir(lower) < 0) return -1;
    int rc =
        mount(S_SOURCE, dst, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, "lowerdir=.:" S_EMPTY);
    int e = errno;
    if (chdir("/") < 0 && rc == 0) return -1;
    errno = e;
    return rc;
}

/* The overlay of the directory of plan op i's source (a file), shared by
 * every op whose file is in the same directory: its path into layer.  0 ok,
 * -1 (overlayfs cannot serve: bind the file as it is). */
static int s_dir_layer(const cb_mount_plan_t *p, size_t i, char *layer, size_t cap) {
    const char *src = p->ops[i].src;
    size_t dlen = s_len(src);
    while (dlen > 0 && src[dlen - 1] != '/')
        dlen--;
    if (dlen <= 1 || dlen >= CB_PATH_MAX) {
        errno = EINVAL;
        return -1;
    }
    for (size_t j = 0; j <= i; j++) {
        const cb_mount_op_t *o = &p->ops[j];
        if (o->kind != CB_MNT_BIND_RO || o->src_is_dir || o->keep_bind ||
            strncmp(o->src, src, dlen) != 0 || strchr(o->src + dlen, '/') != NULL)
            continue;
        if (s_layer(layer, cap, "d", j) < 0) return -1;
        if (j < i) { /* made for an earlier file, if overlayfs could */
            struct stat st;
            return stat(layer, &st);
        }
        char dir[CB_PATH_MAX];
        memcpy(dir, src, dlen - 1);
        dir[dlen - 1] = '\0';
        if (mkdir(layer, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
        if (s_ro_overlay(dir, layer) < 0) {
            int e = errno;
            (void) rmdir(layer);
            errno = e;
            return -1;
        }
        return 0;
    }
    errno = EINVAL;
    return -1;
}

/* BIND_RO: an overlay of a directory, a bind out of the overlay of a file's
 * directory; as it is when overlayfs cannot serve. */
static int s_bind_ro(const cb_mount_plan_t *p, size_t i) {
    const cb_mount_op_t *op = &p->ops[i];
    if (s_mountpoint(op->dst, op->src_is_dir) < 0) return -1;
    if (!op->keep_bind && op->src_is_dir && s_ro_overlay(op->src, op->dst) == 0)
        return s_make_ro(op->dst);
    char layer[CB_PATH_MAX], file[CB_PATH_MAX];
    size_t len = 0;
    const char *base = op->src + s_len(op->src);
    while (base > op->src && base[-1] != '/')
        base--;
    if (!op->keep_bind && !op->src_is_dir && s_dir_layer(p, i, layer, sizeof layer) == 0 &&
        s_cat(file, sizeof file, &len, layer) == 0 && s_cat(file, sizeof file, &len, "/") == 0 &&
        s_cat(file, sizeof file, &len, base) == 0 && mount(file, op->dst, NULL, MS_BIND, NULL) == 0)
        return s_make_ro(op->dst);
    if (mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0) return -1;
    return s_make_ro(op->dst);
}

/* A tmpfs with options opts, shown at dst as the upper layer of an overlay
 * (the tmpfs itself sits at layer in the staging tmpfs, which is detached
 * at the end); the upper directory takes the tmpfs root's owner and mode.
 * A plain tmpfs at dst when overlayfs cannot serve. */
static int s_tmpfs(const char *dst, const char *opts, const char *layer) {
    if (mkdir(layer, S_IRWXU) < 0) return -1;
    if (mount("tmpfs", layer, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) return -1;
    char upper[CB_PATH_MAX], work[CB_PATH_MAX], ovl[CB_MOUNT_OPTS_MAX];
    size_t ul = 0, wl = 0, ol = 0;
    struct stat st;
    if (s_cat(upper, sizeof upper, &ul, layer) < 0 || s_cat(upper, sizeof upper, &ul, "/u") < 0 ||
        s_cat(work, sizeof work, &wl, layer) < 0 || s_cat(work, sizeof work, &wl, "/w") < 0 ||
        stat(layer, &st) < 0 || mkdir(upper, S_IRWXU) < 0 || mkdir(work, S_IRWXU) < 0 ||
        chown(upper, st.st_uid, st.st_gid) < 0 || chmod(upper, st.st_mode & 07777) < 0)
        return -1;
    if (s_cat(ovl, sizeof ovl, &ol, "lowerdir=" S_EMPTY ",upperdir=") == 0 &&
        s_cat(ovl, sizeof ovl, &ol, upper) == 0 && s_cat(ovl, sizeof ovl, &ol, ",workdir=") == 0 &&
        s_cat(ovl, sizeof ovl, &ol, work) == 0 && s_cat(ovl, sizeof ovl, &ol, ",userxattr") == 0 &&
        mount(S_SOURCE, dst, "overlay", MS_NOSUID | MS_NODEV, ovl) == 0)
        return 0;
    if (umount2(layer, MNT_DETACH) < 0) return -1;
    return mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts);
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
        ssize_t w = op->kind == CB_MNT_COPY ? sendfile(fd, op->fd, &off, op->data_len - done)
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

/* Hides dst; a path this kernel's /proc lacks is fine.  A directory gets a
 * bind of one empty read-only overlay (made on first use), or, where
 * overlayfs cannot serve, an empty read-only tmpfs. */
static int s_mask(const cb_mount_op_t *op) {
    struct stat st;
    if (lstat(op->dst, &st) < 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return mount(op->src, op->dst, NULL, MS_BIND, NULL);
    if (stat(S_MASKDIR, &st) < 0) {
        if (mkdir(S_MASKDIR, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
        if (mount(S_SOURCE, S_MASKDIR, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "lowerdir=" S_EMPTY ":" S_EMPTY2) < 0)
            (void) rmdir(S_MASKDIR);
    }
    if (stat(S_MASKDIR, &st) == 0 && mount(S_MASKDIR, op->dst, NULL, MS_BIND, NULL) == 0)
        return mount(NULL, op->dst, NULL,
                     MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    return mount("tmpfs", op->dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "size=0,mode=0555");
}

static int s_ro_self(const cb_mount_op_t *op) {
    if (mount(op->dst, op->dst, NULL, MS_BIND | MS_REC, NULL) < 0) return errno == ENOENT ? 0 : -1;
    return s_make_ro(op->dst);
}

static int s_run_op(const cb_mount_plan_t *p, size_t i) {
    const cb_mount_op_t *op = &p->ops[i];
    char layer[CB_PATH_MAX];
    switch (op->kind) {
    case CB_MNT_DIR:
        if (s_mkdir_p(op->dst, false, op->mode) < 0) return -1;
        return chmod(op->dst, op->mode);
    case CB_MNT_BIND_RO: return s_bind_ro(p, i);
    case CB_MNT_BIND_DEV:
        if (s_mountpoint(op->dst, false) < 0) return -1;
        if (mount(op->src, op->dst, NULL, MS_BIND, NULL) < 0) return -1;
        return mount(NULL, op->dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL);
    case CB_MNT_TMPFS:
        if (s_mkdir_p(op->dst, false, CB_SANDBOX_MKDIR_MODE) < 0) return -1;
        if (s_layer(layer, sizeof layer, "t", i) < 0) return -1;
        return s_tmpfs(op->dst, op->data, layer);
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
    if (mkdir(S_LAYERS, S_IRWXU) < 0 || mkdir(S_EMPTY, S_IRWXU) < 0 || mkdir(S_EMPTY2, S_IRWXU) < 0)
        return -1;
    /* the root stays tiny and becomes read-only: only mountpoints and /etc */
    if (s_tmpfs(S_NEWROOT, "mode=0755,size=" S_STR(CB_SANDBOX_ROOT_TMPFS_KB) "k",
                S_LAYERS "/root") < 0)
        return -1;
    for (size_t i = 0; i < p->n; i++) {
        if (s_run_op(p, i) < 0) {
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
