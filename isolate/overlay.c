/*
 * overlay.c - the notebook folder overlay (see overlay.h).
 *
 * Why an overlay and not a copy: notebook folders hold data sets of any
 * size, and an overlay reads them in place.  Why whiteouts and not a filter:
 * overlayfs, mounted inside a user namespace, can only merge whole layers,
 * so names are hidden the way overlayfs hides a deleted file: a character
 * device 0/0 of that name in the upper layer (an unprivileged process may
 * make one since Linux 5.8).  They are made before the overlay exists, so
 * no lookup can ever have seen the lower entry.
 *
 * The walk reads each directory twice with getdents64: once to count its
 * entries against the budget (nothing is made for a directory that does
 * not fit: it is hidden whole, by a whiteout in its parent), once to hide
 * and descend.  An upper directory is made only on the path to something
 * hidden, with the lower's mode and the sandbox's ids; every other
 * directory stays the lower's, and overlayfs copies it up on first write.
 */
#include "isolate/overlay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/userns.h"
#include "isolate/util.h"

#define S_OLDROOT "/" CB_SANDBOX_OLDROOT
#define S_UPPERFS "/" CB_OVERLAY_UPPER_FS
#define S_UPPER   S_UPPERFS "/upper"
#define S_WORK    S_UPPERFS "/work"
#define S_LOWER   "/" CB_OVERLAY_LOWER
#define S_OPTIONS "lowerdir=" S_LOWER ",upperdir=" S_UPPER ",workdir=" S_WORK ",userxattr"

enum { S_TOO_BIG = 1, S_UNREADABLE = 2 }; /* s_walk: this directory is hidden whole */

struct linux_dirent64_s {
    unsigned long long d_ino; /* inode */
    long long d_off;          /* offset of the next entry */
    unsigned short d_reclen;  /* length of this record */
    unsigned char d_type;     /* DT_* */
    char d_name[];            /* NUL-terminated */
};

static cb_overlay_stats_t s_last; /* the last run's, in this process (init) */

void cb_overlay_last_stats(cb_overlay_stats_t *out) { *out = s_last; }

/* ---- plan (launcher) ---------------------------------------------------- */

/* A user namespace in which id `owner` is `host_id` (and group `group`
 * is host_id): the idmapping of the lower layer.  Root only.  fd or -1. */
static int s_idmap_userns(uid_t owner, gid_t group, unsigned long host_id) {
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0) return -1;
    long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) { /* holds the namespace until the parent has its fd */
        char c;
        close(pp[1]);
        while (read(pp[0], &c, 1) < 0 && errno == EINTR) {
        }
        _exit(0);
    }
    int e = errno, fd = -1;
    close(pp[0]);
    if (pid > 0) {
        char path[CB_PROC_PATH_MAX];
        (void) snprintf(path, sizeof path, "/proc/%ld/ns/user", pid);
        if (cb_userns_write_maps((pid_t) pid, owner, (uid_t) host_id, group, (gid_t) host_id,
                                 false, -1) == 0)
            fd = open(path, O_RDONLY | O_CLOEXEC);
        e = errno;
    }
    close(pp[1]);
    if (pid > 0)
        while (waitpid((pid_t) pid, NULL, 0) < 0 && errno == EINTR) {
        }
    errno = e;
    return fd;
}

/* Read-only, no suid, no devices; idmapped (owner -> host_id) when asked
 * and the filesystem allows it.  0 ok, -1 errno. */
static int s_tree_attrs(int tree, const struct stat *st, unsigned long host_id, bool *idmapped) {
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    *idmapped = false;
    if (host_id > 0) {
        cb_autofd int ns = s_idmap_userns(st->st_uid, st->st_gid, host_id);
        if (ns >= 0) {
            struct mount_attr ia = a;
            ia.attr_set |= MOUNT_ATTR_IDMAP;
            ia.userns_fd = (unsigned long long) ns;
            if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &ia, sizeof ia) == 0) {
                *idmapped = true;
                return 0;
            }
        }
        PLOG_W("--workdir-source: idmapping the folder to the sandbox's id failed; the sandbox "
               "reads it with the permissions of 'others'");
    }
    return (int) syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &a, sizeof a);
}

int cb_overlay_plan(cb_mount_plan_t *p, const char *host_dir, const char *sandbox,
                    const char *upper_opts, uid_t uid, gid_t gid, unsigned long host_id,
                    bool *idmapped, char *why, size_t why_len) {
    *idmapped = false;
    char real[CB_PATH_MAX];
    struct stat st;
    if (realpath(host_dir, real) == NULL || stat(real, &st) < 0) {
        (void) snprintf(why, why_len, "--workdir-source %s: %s", host_dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        (void) snprintf(why, why_len, "--workdir-source %s: not a directory", host_dir);
        return -1;
    }
    /* Root: a detached clone of the folder alone, made here with the
     * host's view (no ancestor needs to be searchable by the sandbox's id),
     * moved into the sandbox by init.  Unprivileged: a bind from the old
     * root (the ancestors are the kernel user's to search). */
    int tree = -1;
    if (geteuid() == 0) {
        tree = (int) syscall(SYS_open_tree, AT_FDCWD, real, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree < 0) {
            PLOG_W("open_tree(%s, OPEN_TREE_CLONE): binding it by path instead", real);
        } else if (s_tree_attrs(tree, &st, host_id, idmapped) < 0) {
            int e = errno;
            close(tree);
            (void) snprintf(why, why_len, "--workdir-source %s: cannot make it read-only: %s", real,
                            strerror(e));
            return -1;
        }
    }
    cb_mount_op_t *op = cb_mount_plan_add(p, CB_MNT_OVERLAY, sandbox);
    if (op == NULL) {
        if (tree >= 0) close(tree);
        (void) snprintf(why, why_len, "planning the overlay: %s", strerror(errno));
        return -1;
    }
    op->fd = tree; /* closed by cb_mount_plan_fini from here on */
    if (asprintf(&op->src, "%s%s", S_OLDROOT, real) < 0) {
        op->src = NULL;
        (void) snprintf(why, why_len, "planning the overlay: out of memory");
        return -1;
    }
    if ((op->data = strdup(upper_opts)) == NULL) {
        (void) snprintf(why, why_len, "planning the overlay: out of memory");
        return -1;
    }
    op->uid = uid;
    op->gid = gid;
    op->src_is_dir = *idmapped; /* carried to init for its stats */
    return 0;
}

/* ---- the walk (async-signal-safe) --------------------------------------- */

typedef struct s_level {
    int lower;              /* this directory in the lower layer */
    int upper;              /* its upper directory, -1 until something is hidden in it */
    struct s_level *parent; /* NULL at the top, whose upper is given */
    const char *name;       /* name in the parent (in the parent's buffer) */
    mode_t mode;            /* the lower directory's mode */
} s_level_t;

typedef struct {
    uid_t uid;              /* owner of what is made */
    gid_t gid;              /* its group */
    dev_t dev;              /* the lower's device (without openat2) */
    unsigned long budget;   /* entries still to examine */
    cb_overlay_stats_t *st; /* counts */
} s_walk_t;

static bool s_dots(const char *n) { return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])); }

/* The upper directory of l, made (with its parents) on first use. */
static int s_upper(s_walk_t *w, s_level_t *l) {
    if (l->upper >= 0) return l->upper;
    if (l->parent == NULL) {
        errno = EINVAL;
        return -1;
    }
    int pfd = s_upper(w, l->parent);
    if (pfd < 0) return -1;
    if (mkdirat(pfd, l->name, S_IRWXU) < 0 && errno != EEXIST) return -1;
    int fd = openat(pfd, l->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    if (fchown(fd, w->uid, w->gid) < 0 || fchmod(fd, l->mode & 07777) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    l->upper = fd;
    return fd;
}

/* Hides name (an entry of l) from the merged view. */
static int s_whiteout(s_walk_t *w, s_level_t *l, const char *name) {
    int ufd = s_upper(w, l);
    if (ufd < 0) return -1;
    if (mknodat(ufd, name, S_IFCHR, makedev(0, 0)) < 0 && errno != EEXIST) return -1;
    return 0;
}

/* A subdirectory of the lower, never through a symlink nor into another
 * mount (overlayfs does not cross mounts in a layer either). */
static int s_open_sub(const s_walk_t *w, int dfd, const char *name) {
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                           .resolve = RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH};
    int fd = (int) syscall(SYS_openat2, dfd, name, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) return fd;
    fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_dev != w->dev)) {
        close(fd);
        errno = EXDEV;
        return -1;
    }
    return fd;
}

static unsigned char s_type(int dfd, const struct linux_dirent64_s *d) {
    if (d->d_type != DT_UNKNOWN) return d->d_type;
    struct stat st;
    if (fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) return DT_UNKNOWN;
    return S_ISDIR(st.st_mode)   ? DT_DIR
           : S_ISREG(st.st_mode) ? DT_REG
           : S_ISLNK(st.st_mode) ? DT_LNK
                                 : DT_FIFO; /* hidden like any special file */
}

static long s_getdents(int fd, char *buf, size_t len) {
    long n;
    do
        n = syscall(SYS_getdents64, fd, buf, len);
    while (n < 0 && errno == EINTR);
    return n;
}

static int s_walk(s_walk_t *w, s_level_t *l, unsigned depth);

/* One entry of the second pass.  0 ok, -1 fatal. */
static int s_entry(s_walk_t *w, s_level_t *l, const struct linux_dirent64_s *d, unsigned depth) {
    const char *name = d->d_name;
    if (name[0] == '.') {
        w->st->dotfiles++;
        return s_whiteout(w, l, name);
    }
    unsigned char t = s_type(l->lower, d);
    if (t == DT_REG || t == DT_LNK) return 0;
    if (t != DT_DIR) { /* fifo, socket, device: a way out of the sandbox */
        w->st->specials++;
        return s_whiteout(w, l, name);
    }
    int cfd = depth + 1 > CB_OVERLAY_DEPTH_MAX ? -1 : s_open_sub(w, l->lower, name);
    struct stat st;
    if (cfd < 0 || fstat(cfd, &st) < 0) {
        if (cfd >= 0) close(cfd);
        w->st->dirs_cut++;
        return s_whiteout(w, l, name);
    }
    s_level_t child = {.lower = cfd, .upper = -1, .parent = l, .name = name, .mode = st.st_mode};
    int r = s_walk(w, &child, depth + 1);
    int e = errno;
    if (child.upper >= 0) close(child.upper);
    close(cfd);
    if (r > 0) { /* too big or unreadable: nothing was made for it */
        w->st->dirs_cut++;
        return s_whiteout(w, l, name);
    }
    errno = e;
    return r;
}

/* 0 done, S_TOO_BIG / S_UNREADABLE (nothing made: hide it whole), -1 fatal. */
static int s_walk(s_walk_t *w, s_level_t *l, unsigned depth) {
    char buf[CB_OVERLAY_DIRENT_BUF] __attribute__((aligned(8)));
    unsigned long count = 0;
    if (lseek(l->lower, 0, SEEK_SET) < 0) return S_UNREADABLE;
    for (;;) { /* pass 1: count, charge nothing yet */
        long n = s_getdents(l->lower, buf, sizeof buf);
        if (n < 0) return S_UNREADABLE;
        if (n == 0) break;
        for (long off = 0; off < n;) {
            const struct linux_dirent64_s *d = (const void *) (buf + off);
            off += d->d_reclen;
            if (!s_dots(d->d_name)) count++;
        }
        if (count > w->budget) return S_TOO_BIG;
    }
    w->budget -= count;
    w->st->scanned += count;
    if (lseek(l->lower, 0, SEEK_SET) < 0) return -1;
    unsigned long seen = 0;
    for (;;) { /* pass 2: hide and descend */
        long n = s_getdents(l->lower, buf, sizeof buf);
        if (n < 0) return -1;
        if (n == 0) return 0;
        for (long off = 0; off < n;) {
            const struct linux_dirent64_s *d = (const void *) (buf + off);
            off += d->d_reclen;
            if (s_dots(d->d_name)) continue;
            if (++seen > count) { /* the host added entries since pass 1 */
                if (w->budget == 0) {
                    errno = E2BIG;
                    return -1;
                }
                w->budget--;
                w->st->scanned++;
            }
            if (s_entry(w, l, d, depth) < 0) return -1;
        }
    }
}

int cb_overlay_hide(int lower_fd, int upper_fd, uid_t uid, gid_t gid, cb_overlay_stats_t *st) {
    struct stat ls;
    if (fstat(lower_fd, &ls) < 0) return -1;
    s_walk_t w = {
        .uid = uid, .gid = gid, .dev = ls.st_dev, .budget = CB_OVERLAY_SCAN_MAX, .st = st};
    s_level_t top = {.lower = lower_fd, .upper = upper_fd, .mode = ls.st_mode};
    int r = s_walk(&w, &top, 0);
    if (r == S_TOO_BIG) errno = E2BIG;
    if (r == S_UNREADABLE) errno = EACCES;
    return r == 0 ? 0 : -1;
}

/* ---- run (async-signal-safe, in init) ------------------------------------ */

static int s_ro_recursive(const char *path) {
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    return (int) syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof a);
}

int cb_overlay_run(const cb_mount_op_t *op) {
    memset(&s_last, 0, sizeof s_last);
    s_last.idmapped = op->src_is_dir;
    if (mkdir(S_UPPERFS, S_IRWXU) < 0 && errno != EEXIST) return -1;
    if (mount("tmpfs", S_UPPERFS, "tmpfs", MS_NOSUID | MS_NODEV, op->data) < 0) return -1;
    if (mkdir(S_UPPER, S_IRWXU) < 0 || mkdir(S_WORK, S_IRWXU) < 0) return -1;
    if (chown(S_UPPER, op->uid, op->gid) < 0) return -1;
    if (mkdir(S_LOWER, S_IRWXU) < 0 && errno != EEXIST) return -1;
    if (op->fd >= 0) {
        if (syscall(SYS_move_mount, op->fd, "", AT_FDCWD, S_LOWER, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            return -1;
    } else {
        /* recursive: a user namespace may not bind a subtree without the
         * mounts locked below it; overlayfs never crosses them anyway */
        if (mount(op->src, S_LOWER, NULL, MS_BIND | MS_REC, NULL) < 0) return -1;
        if (s_ro_recursive(S_LOWER) < 0) return -1;
    }
    int lfd = open(S_LOWER, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lfd < 0) return -1;
    int ufd = open(S_UPPER, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (ufd < 0) {
        int e = errno;
        close(lfd);
        errno = e;
        return -1;
    }
    int r = cb_overlay_hide(lfd, ufd, op->uid, op->gid, &s_last);
    int e = errno;
    close(lfd);
    close(ufd);
    if (r < 0) {
        errno = e;
        return -1;
    }
    return mount("overlay", op->dst, "overlay", MS_NOSUID | MS_NODEV, S_OPTIONS);
}
