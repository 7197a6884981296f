/*
 * snap_tree.c - copy and restore of the trees a checkpoint keeps (see
 * snap_tree.h).
 *
 * Walks are getdents64 over directory fds, one static buffer per level, so a
 * walk needs no memory of its own and its depth is bounded by construction.
 * Every entry is opened as O_PATH|O_NOFOLLOW first and its type checked on
 * that fd; the real open goes through /proc/self/fd/N of that very inode, so
 * a name swapped for a symlink or a fifo between the look and the open is
 * never followed or opened.  A file or directory whose owner took away its
 * own permissions (mode 000) is made readable for the time of the copy (we
 * are its owner in the namespaces tier, where the agent has no capability)
 * and given its mode back.  A restore first removes what the saved copy
 * lacks (several passes: a directory read while entries go is read again),
 * then puts back every saved entry, rewriting existing files in place.
 */
#include "tiers/snap_tree.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define S_NO_UNDO ((mode_t) -1)

static char s_dents[CB_SNAP_DEPTH_MAX + 2][CB_SNAP_DENTS_BUF];
static char s_buf[CB_SNAP_COPY_BUF];
static char s_link[CB_PATH_MAX], s_link2[CB_PATH_MAX];

static int s_fail(cb_snap_tree_t *t, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(cb_snap_tree_t *t, int err, const char *fmt, ...) {
    if (t->err == 0) { /* the first failure is the one the user hears of */
        t->err = err;
        va_list ap;
        va_start(ap, fmt);
        (void) vsnprintf(t->why, sizeof t->why, fmt, ap);
        va_end(ap);
    }
    errno = err;
    return -1;
}

/* Opens name in dir as `type` (S_IFREG, S_IFDIR) with flags, through an
 * O_PATH|O_NOFOLLOW fd of it; *undo is the mode to give back when the
 * owner's `need` bits had to be added for the open (else S_NO_UNDO). */
static int s_open(int dir, const char *name, mode_t type, int flags, mode_t need, mode_t *undo,
                  struct stat *st) {
    *undo = S_NO_UNDO;
    int p = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (p < 0) return -1;
    if (fstat(p, st) < 0 || (st->st_mode & S_IFMT) != type) {
        close(p);
        errno = ESTALE; /* changed type under us */
        return -1;
    }
    char path[40];
    (void) snprintf(path, sizeof path, "/proc/self/fd/%d", p);
    flags |= O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int fd = open(path, flags);
    if (fd < 0 && errno == EACCES && chmod(path, (st->st_mode & 07777) | need) == 0) {
        *undo = st->st_mode & 07777;
        fd = open(path, flags);
        if (fd < 0) {
            int e = errno;
            (void) chmod(path, *undo);
            *undo = S_NO_UNDO;
            errno = e;
        }
    }
    int e = errno;
    close(p);
    errno = e;
    return fd;
}

static void s_undo(int fd, mode_t undo) {
    if (undo != S_NO_UNDO) (void) fchmod(fd, undo);
}

/* Owner, mode and times of st onto the open fd. */
static int s_attrs(cb_snap_tree_t *t, int fd, const struct stat *st, const char *name) {
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if ((t->own && fchown(fd, st->st_uid, st->st_gid) < 0) ||
        (t->as && fchown(fd, t->as_uid, t->as_gid) < 0) || fchmod(fd, st->st_mode & 07777) < 0 ||
        futimens(fd, ts) < 0)
        return s_fail(t, errno, "setting the attributes of %.64s: %s", name, strerror(errno));
    return 0;
}

/* The same for an entry that is not opened (symlink, fifo). */
static int s_attrs_at(cb_snap_tree_t *t, int dir, const char *name, const struct stat *st) {
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if ((t->own && fchownat(dir, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0) ||
        (t->as && fchownat(dir, name, t->as_uid, t->as_gid, AT_SYMLINK_NOFOLLOW) < 0))
        return s_fail(t, errno, "setting the owner of %.64s: %s", name, strerror(errno));
    if (!S_ISLNK(st->st_mode) && fchmodat(dir, name, st->st_mode & 07777, 0) < 0)
        return s_fail(t, errno, "setting the mode of %.64s: %s", name, strerror(errno));
    if (utimensat(dir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return s_fail(t, errno, "setting the times of %.64s: %s", name, strerror(errno));
    return 0;
}

typedef int (*s_entry_fn)(cb_snap_tree_t *t, int dir, const char *name, int depth, void *arg);

/* Calls fn for every entry of the directory open at dir. */
static int s_each(cb_snap_tree_t *t, int dir, int depth, s_entry_fn fn, void *arg) {
    if (depth > CB_SNAP_DEPTH_MAX)
        return s_fail(t, ELOOP, "more than %d directory levels", CB_SNAP_DEPTH_MAX);
    char *buf = s_dents[depth];
    if (lseek(dir, 0, SEEK_SET) < 0) return s_fail(t, errno, "rewinding a directory");
    for (;;) {
        long n = syscall(SYS_getdents64, dir, buf, CB_SNAP_DENTS_BUF);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return s_fail(t, errno, "reading a directory: %s", strerror(errno));
        if (n == 0) return 0;
        for (long off = 0; off < n;) {
            cb_snap_dirent64_t *d = (cb_snap_dirent64_t *) (buf + off);
            off += d->d_reclen;
            if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0) continue;
            if (fn(t, dir, d->d_name, depth, arg) < 0) return -1;
        }
    }
}

static int s_count(cb_snap_tree_t *t) {
    if (++t->entries > CB_SNAP_FILES_MAX)
        return s_fail(t, E2BIG, "more than %d files and directories", CB_SNAP_FILES_MAX);
    return 0;
}

/* File data of in (size bytes) into out at the same offsets; holes stay holes. */
static int s_copy_data(cb_snap_tree_t *t, int in, int out, off_t size, const char *name) {
    bool holes = true;
    for (off_t pos = 0; pos < size;) {
        off_t data = holes ? lseek(in, pos, SEEK_DATA) : pos;
        if (data < 0 && errno == ENXIO) break; /* only a hole is left */
        if (data < 0) holes = false, data = pos;
        off_t hole = holes ? lseek(in, data, SEEK_HOLE) : size;
        if (hole < 0 || hole > size) hole = size;
        for (off_t p = data; p < hole;) {
            size_t want = (size_t) (hole - p) < sizeof s_buf ? (size_t) (hole - p) : sizeof s_buf;
            ssize_t r = pread(in, s_buf, want, p);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return s_fail(t, errno, "reading %.64s: %s", name, strerror(errno));
            if (r == 0) return 0; /* it shrank meanwhile: the copy ends there */
            for (ssize_t w = 0; w < r;) {
                ssize_t k = pwrite(out, s_buf + w, (size_t) (r - w), p + w);
                if (k < 0 && errno == EINTR) continue;
                if (k < 0 && (errno == ENOSPC || errno == EDQUOT))
                    return s_fail(t, errno,
                                  "no room for %.64s: the checkpoints' files are "
                                  "limited to the session's --disk",
                                  name);
                if (k < 0) return s_fail(t, errno, "writing %.64s: %s", name, strerror(errno));
                w += k;
            }
            t->bytes += (uint64_t) r;
            p += r;
        }
        pos = hole;
    }
    return 0;
}

/* Regular file name of src_dir into dst_dir: created (create) or rewritten in place. */
static int s_put_file(cb_snap_tree_t *t, int src_dir, const char *name, int dst_dir, bool create) {
    struct stat st, dst_st;
    mode_t undo, dundo = S_NO_UNDO;
    int in = s_open(src_dir, name, S_IFREG, O_RDONLY, S_IRUSR, &undo, &st);
    if (in < 0) {
        if (errno == ENOENT || errno == ESTALE) return 0; /* gone or changed: as if never there */
        return s_fail(t, errno, "opening %.64s: %s", name, strerror(errno));
    }
    s_undo(in, undo);
    int out =
        create ? openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
               : s_open(dst_dir, name, S_IFREG, O_WRONLY, S_IWUSR, &dundo, &dst_st);
    if (out < 0) {
        int e = errno;
        struct stat ls;
        close(in);
        /* a file the sandbox cannot change either (a --workdir-source file
         * of another owner) that is as it was is left alone */
        if (!create && (e == EACCES || e == EPERM || e == EROFS || e == EOVERFLOW) &&
            fstatat(dst_dir, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 && ls.st_size == st.st_size &&
            ls.st_mtim.tv_sec == st.st_mtim.tv_sec && ls.st_mtim.tv_nsec == st.st_mtim.tv_nsec)
            return 0;
        return s_fail(t, e, "writing %.64s: %s", name, strerror(e));
    }
    int rc = -1;
    if (!create && ftruncate(out, 0) < 0) {
        s_fail(t, errno, "truncating %.64s: %s", name, strerror(errno));
        goto out;
    }
    if (s_copy_data(t, in, out, st.st_size, name) < 0) goto out;
    if (ftruncate(out, st.st_size) < 0) {
        s_fail(t, errno, "sizing %.64s: %s", name, strerror(errno));
        goto out;
    }
    rc = s_attrs(t, out, &st, name);
out:
    close(in);
    close(out);
    return rc;
}

static int s_put_link(cb_snap_tree_t *t, int src_dir, const char *name, int dst_dir,
                      const struct stat *st) {
    ssize_t n = readlinkat(src_dir, name, s_link, sizeof s_link - 1);
    if (n < 0) return errno == ENOENT ? 0 : s_fail(t, errno, "reading the link %.64s", name);
    s_link[n] = '\0';
    ssize_t m = readlinkat(dst_dir, name, s_link2, sizeof s_link2 - 1);
    if (m == n && memcmp(s_link, s_link2, (size_t) n) == 0) return s_attrs_at(t, dst_dir, name, st);
    if (m >= 0 && unlinkat(dst_dir, name, 0) < 0)
        return s_fail(t, errno, "replacing the link %.64s", name);
    if (symlinkat(s_link, dst_dir, name) < 0)
        return s_fail(t, errno, "making the link %.64s: %s", name, strerror(errno));
    return s_attrs_at(t, dst_dir, name, st);
}

/* ---- copy ------------------------------------------------------------------------- */

static int s_copy_entry(cb_snap_tree_t *t, int from, const char *name, int depth, void *arg);

static int s_copy_dir(cb_snap_tree_t *t, int from, const char *name, int depth, int to) {
    if (depth + 1 > CB_SNAP_DEPTH_MAX) /* before anything is made: the store stays walkable */
        return s_fail(t, ELOOP, "more than %d directory levels", CB_SNAP_DEPTH_MAX);
    struct stat st;
    mode_t undo;
    int src = s_open(from, name, S_IFDIR, O_RDONLY | O_DIRECTORY, S_IRWXU, &undo, &st);
    if (src < 0) return errno == ENOENT ? 0 : s_fail(t, errno, "opening %.64s", name);
    int dst = -1, rc = -1;
    if (mkdirat(to, name, 0700) < 0 ||
        (dst = openat(to, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        s_fail(t, errno, "copying the directory %.64s: %s", name, strerror(errno));
    } else if (s_each(t, src, depth + 1, s_copy_entry, &dst) == 0) {
        rc = s_attrs(t, dst, &st, name);
    }
    s_undo(src, undo);
    close(src);
    if (dst >= 0) close(dst);
    return rc;
}

static bool s_ends_with(const char *name, const char *suffix) {
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && memcmp(name + n - k, suffix, k) == 0;
}

static int s_copy_entry(cb_snap_tree_t *t, int from, const char *name, int depth, void *arg) {
    int to = *(int *) arg;
    struct stat st;
    if (s_count(t) < 0) return -1;
    if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : s_fail(t, errno, "looking at %.64s", name);
    switch (st.st_mode & S_IFMT) {
    case S_IFDIR: return s_copy_dir(t, from, name, depth, to);
    case S_IFREG:
        if (depth == 0 && t->skip_suffix != NULL && s_ends_with(name, t->skip_suffix)) return 0;
        return s_put_file(t, from, name, to, true);
    case S_IFLNK: return s_put_link(t, from, name, to, &st);
    case S_IFIFO:
        if (mknodat(to, name, S_IFIFO | 0600, 0) < 0)
            return s_fail(t, errno, "copying the fifo %.64s", name);
        return s_attrs_at(t, to, name, &st);
    default: t->skipped++; return 0; /* sockets, devices: nothing to keep */
    }
}

int cb_snap_tree_copy(cb_snap_tree_t *t, int from, int to) {
    struct stat st;
    if (fstat(from, &st) < 0) return s_fail(t, errno, "looking at the tree");
    if (s_each(t, from, 0, s_copy_entry, &to) < 0) return -1;
    return s_attrs(t, to, &st, ".");
}

/* ---- removal ------------------------------------------------------------------------ */

static int s_clear_dir(cb_snap_tree_t *t, int dir, int depth);

static int s_remove(cb_snap_tree_t *t, int dir, const char *name, int depth) {
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode)) {
        mode_t undo;
        int sub = s_open(dir, name, S_IFDIR, O_RDONLY | O_DIRECTORY, S_IRWXU, &undo, &st);
        if (sub < 0) return s_fail(t, errno, "opening %.64s to remove it", name);
        int rc = s_clear_dir(t, sub, depth + 1);
        close(sub);
        if (rc < 0) return -1;
        if (unlinkat(dir, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
            return s_fail(t, errno, "removing %.64s: %s", name, strerror(errno));
        return 0;
    }
    if (unlinkat(dir, name, 0) < 0 && errno != ENOENT)
        return s_fail(t, errno, "removing %.64s: %s", name, strerror(errno));
    return 0;
}

static int s_remove_entry(cb_snap_tree_t *t, int dir, const char *name, int depth, void *arg) {
    (*(int *) arg)++;
    return s_remove(t, dir, name, depth);
}

static int s_clear_dir(cb_snap_tree_t *t, int dir, int depth) {
    for (int pass = 0; pass < CB_SNAP_PASSES; pass++) {
        int removed = 0;
        if (s_each(t, dir, depth, s_remove_entry, &removed) < 0) return -1;
        if (removed == 0) return 0;
    }
    return s_fail(t, EAGAIN, "a directory kept changing while it was emptied");
}

int cb_snap_tree_clear(cb_snap_tree_t *t, int dir) { return s_clear_dir(t, dir, 0); }

/* ---- restore ------------------------------------------------------------------------ */

typedef struct {
    int other;   /* the other tree's directory at this level */
    int removed; /* entries removed in this pass */
} s_pass_t;

/* Pass A: a live entry the copy lacks, or has as another type, goes. */
static int s_drop_extra(cb_snap_tree_t *t, int live, const char *name, int depth, void *arg) {
    s_pass_t *p = arg;
    struct stat ls, ss;
    if (fstatat(live, name, &ls, AT_SYMLINK_NOFOLLOW) < 0) return 0;
    if (fstatat(p->other, name, &ss, AT_SYMLINK_NOFOLLOW) == 0 &&
        (ss.st_mode & S_IFMT) == (ls.st_mode & S_IFMT))
        return 0;
    p->removed++;
    return s_remove(t, live, name, depth);
}

static int s_restore_dir(cb_snap_tree_t *t, int saved, int live, int depth);

/* Pass B: every saved entry into the live tree. */
static int s_put_entry(cb_snap_tree_t *t, int saved, const char *name, int depth, void *arg) {
    int live = *(int *) arg;
    struct stat st, ls;
    if (s_count(t) < 0) return -1;
    if (fstatat(saved, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return s_fail(t, errno, "the saved copy of %.64s is unreadable", name);
    bool exists = fstatat(live, name, &ls, AT_SYMLINK_NOFOLLOW) == 0;
    switch (st.st_mode & S_IFMT) {
    case S_IFDIR: {
        mode_t su, lu;
        struct stat dummy;
        if (!exists && mkdirat(live, name, 0700) < 0)
            return s_fail(t, errno, "recreating %.64s: %s", name, strerror(errno));
        int s = s_open(saved, name, S_IFDIR, O_RDONLY | O_DIRECTORY, S_IRWXU, &su, &dummy);
        int l = s_open(live, name, S_IFDIR, O_RDONLY | O_DIRECTORY, S_IRWXU, &lu, &dummy);
        int rc = s < 0 || l < 0 ? s_fail(t, errno, "opening %.64s: %s", name, strerror(errno))
                                : s_restore_dir(t, s, l, depth + 1);
        if (rc == 0) rc = s_attrs(t, l, &st, name);
        if (s >= 0) s_undo(s, su), close(s);
        if (l >= 0) close(l);
        return rc;
    }
    case S_IFREG: return s_put_file(t, saved, name, live, !exists);
    case S_IFLNK: return s_put_link(t, saved, name, live, &st);
    case S_IFIFO:
        if (!exists && mknodat(live, name, S_IFIFO | 0600, 0) < 0)
            return s_fail(t, errno, "recreating the fifo %.64s", name);
        return s_attrs_at(t, live, name, &st);
    default: return 0;
    }
}

static int s_restore_dir(cb_snap_tree_t *t, int saved, int live, int depth) {
    for (int pass = 0;; pass++) {
        if (pass == CB_SNAP_PASSES)
            return s_fail(t, EAGAIN, "a directory kept changing while it was restored");
        s_pass_t p = {saved, 0};
        if (s_each(t, live, depth, s_drop_extra, &p) < 0) return -1;
        if (p.removed == 0) break;
    }
    return s_each(t, saved, depth, s_put_entry, &live);
}

int cb_snap_tree_restore(cb_snap_tree_t *t, int saved, int live) {
    struct stat st;
    if (fstat(saved, &st) < 0) return s_fail(t, errno, "looking at the saved tree");
    if (s_restore_dir(t, saved, live, 0) < 0) return -1;
    return s_attrs(t, live, &st, ".");
}
