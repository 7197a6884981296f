/*
 * artifacts_fs.c - bounded, link-free walking and reading of the sandbox's
 * working directory (see artifacts_fs.h).
 *
 * The sandbox is hostile: anything in the tree may be a symlink to a host
 * file, a FIFO, a hard link, a 1 GiB sparse file, or change while we look.
 * So: lstat (fstatat AT_SYMLINK_NOFOLLOW) decides what an entry is, only
 * regular files are ever opened, opens never follow links (openat2 RESOLVE_*,
 * or O_NOFOLLOW per component), O_NONBLOCK covers a FIFO swapped in after the
 * lstat, the fstat of the opened fd must match the lstat, and reads stop at
 * the size fstat gave.  Directory recursion is bounded by max_depth (so the
 * number of fds held open is too) and the walk by max_entries.
 */
#include "artifacts/artifacts_fs.h"

#include "artifacts/artifacts_limits.h"
#include "isolate/cb_limits.h"
#include "isolate/log.h"
#include "isolate/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* openat2 availability: probed on first use, and forced off by tests. */
typedef enum { S_OPENAT2_UNKNOWN, S_OPENAT2_WORKS, S_OPENAT2_MISSING } s_openat2_t;
static s_openat2_t s_openat2_state = S_OPENAT2_UNKNOWN;
static bool s_force_fallback = false;

void cb_artifacts_fs_force_fallback(bool on) { s_force_fallback = on; }

/* ---- opening ----------------------------------------------------------- */

/* Checks that path is relative, has no empty, "." or ".." component and no
 * component longer than NAME_MAX.  0 ok, -1 with errno. */
static int s_check_path(const char *path) {
    size_t len = strnlen(path, CB_PATH_MAX);
    if (len == 0 || len >= CB_PATH_MAX) {
        errno = len == 0 ? EINVAL : ENAMETOOLONG;
        return -1;
    }
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t) (slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            errno = EINVAL;
            return -1;
        }
        if (n > NAME_MAX) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (slash == NULL) return 0;
        p = slash + 1;
    }
}

static int s_openat2(int rootfd, const char *path, int flags) {
    struct open_how how = {
        .flags = (uint64_t) flags,
        .mode = 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof how);
        if (fd >= 0) return (int) fd;
        if (errno == EINTR) continue;
        if (errno == EAGAIN && tries < CB_ARTIFACTS_OPENAT2_RETRIES) continue;
        return -1;
    }
}

/* One component at a time with O_NOFOLLOW; every directory on the way must
 * be on rootfd's device (a stand-in for RESOLVE_NO_XDEV). */
static int s_open_fallback(int rootfd, const char *path, int flags) {
    struct stat rst;
    if (fstat(rootfd, &rst) < 0) return -1;
    char comp[NAME_MAX + 1];
    cb_autofd int cur = -1;
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t) (slash - p) : strlen(p);
        memcpy(comp, p, n); /* n <= NAME_MAX: s_check_path */
        comp[n] = '\0';
        int at = cur >= 0 ? cur : rootfd;
        bool last = slash == NULL;
        int f = last ? flags : (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        int fd = openat(at, comp, f);
        if (fd < 0) return -1;
        if (f & O_DIRECTORY) {
            struct stat st;
            int e = fstat(fd, &st) < 0 ? errno : (st.st_dev != rst.st_dev ? EXDEV : 0);
            if (e != 0) {
                (void) close(fd);
                errno = e;
                return -1;
            }
        }
        if (cur >= 0) (void) close(cur);
        cur = fd;
        if (last) return steal_fd(&cur);
        p = slash + 1;
    }
}

int cb_artifacts_fs_open_beneath(int rootfd, const char *path, int flags) {
    if (s_check_path(path) < 0) return -1;
    flags |= O_CLOEXEC | O_NOFOLLOW | O_NOCTTY;
    if (!s_force_fallback && s_openat2_state != S_OPENAT2_MISSING) {
        int fd = s_openat2(rootfd, path, flags);
        if (fd >= 0) {
            s_openat2_state = S_OPENAT2_WORKS;
            return fd;
        }
        /* ENOSYS: old kernel; EPERM: a seccomp filter refusing it.  Neither
         * comes from the path itself once openat2 has worked here. */
        if (!((errno == ENOSYS || errno == EPERM) && s_openat2_state == S_OPENAT2_UNKNOWN))
            return -1;
        LOG_I("openat2 unavailable (%s): per-component O_NOFOLLOW instead", strerror(errno));
        s_openat2_state = S_OPENAT2_MISSING;
    }
    return s_open_fallback(rootfd, path, flags);
}

/* ---- walking ----------------------------------------------------------- */

typedef struct {
    cb_artifacts_fs_walk_t *w; /* output */
    unsigned max_depth;        /* deepest directory level scanned */
    size_t max_entries;        /* entries examined before truncating */
} s_walk_ctx_t;

static int s_push(cb_artifacts_fs_walk_t *w, char *path, const struct stat *st,
                  cb_artifacts_fs_what_t what, int err) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap : CB_ARTIFACTS_DIR_INITIAL;
        size_t bytes;
        if (w->cap && __builtin_mul_overflow(cap, (size_t) 2, &cap)) goto oom;
        if (__builtin_mul_overflow(cap, sizeof *w->items, &bytes)) goto oom;
        cb_artifacts_fs_item_t *items = realloc(w->items, bytes);
        if (items == NULL) goto oom;
        w->items = items;
        w->cap = cap;
    }
    cb_artifacts_fs_item_t *it = &w->items[w->n++];
    memset(it, 0, sizeof *it);
    it->path = path;
    if (st) it->st = *st;
    it->what = what;
    it->err = err;
    return 0;
oom:
    LOG_E("artifacts: out of memory listing %zu items", w->n);
    free(path);
    return -1;
}

static int s_cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *) a, *(char *const *) b);
}

static int s_cmp_items(const void *a, const void *b) {
    return strcmp(((const cb_artifacts_fs_item_t *) a)->path,
                  ((const cb_artifacts_fs_item_t *) b)->path);
}

static void s_free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Reads the names of d (not "." or "..", not hidden) into a sorted array,
 * counting every entry against max_entries.  0 ok, -1 out of memory. */
static int s_list(s_walk_ctx_t *ctx, DIR *d, const char *prefix, char ***names_out, size_t *n_out) {
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            if (errno != 0) PLOG_W("readdir(%s)", prefix[0] ? "<subdirectory>" : ".");
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        if (ctx->w->entries >= ctx->max_entries) {
            ctx->w->truncated = true;
            break;
        }
        ctx->w->entries++;
        if (de->d_name[0] == '.') continue; /* hidden: caches, dotfiles */
        if (n == cap) {
            size_t ncap = cap ? cap : CB_ARTIFACTS_DIR_INITIAL, bytes;
            if (cap && __builtin_mul_overflow(ncap, (size_t) 2, &ncap)) goto oom;
            if (__builtin_mul_overflow(ncap, sizeof *names, &bytes)) goto oom;
            char **nn = realloc(names, bytes);
            if (nn == NULL) goto oom;
            names = nn;
            cap = ncap;
        }
        names[n] = strdup(de->d_name);
        if (names[n] == NULL) goto oom;
        n++;
    }
    if (n > 1) qsort(names, n, sizeof *names, s_cmp_names);
    *names_out = names;
    *n_out = n;
    return 0;
oom:
    LOG_E("artifacts: out of memory listing a directory");
    s_free_names(names, n);
    return -1;
}

static char *s_join(const char *prefix, const char *name) {
    size_t lp = strlen(prefix), ln = strlen(name), total;
    if (__builtin_add_overflow(lp, ln, &total) || __builtin_add_overflow(total, (size_t) 2, &total))
        return NULL;
    char *p = malloc(total);
    if (p == NULL) return NULL;
    int r = lp ? snprintf(p, total, "%s/%s", prefix, name) : snprintf(p, total, "%s", name);
    if (r < 0 || (size_t) r >= total) {
        free(p);
        return NULL;
    }
    return p;
}

/* Walks the directory open on fd (owned) whose relative path is prefix ("" for
 * the root) at depth.  0 ok, -1 out of memory. */
static int s_walk_dir(s_walk_ctx_t *ctx, int fd, const char *prefix, unsigned depth) {
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int e = errno;
        PLOG_W("fdopendir");
        (void) close(fd);
        char *p = strdup(prefix[0] ? prefix : ".");
        return p ? s_push(ctx->w, p, NULL, CB_ARTIFACTS_FS_ERROR, e) : -1;
    }
    int dfd = dirfd(d);
    char **names = NULL;
    size_t n = 0;
    int rc = s_list(ctx, d, prefix, &names, &n);
    bool too_long_noted = false;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *name = names[i];
        if (strlen(prefix) + 1 + strlen(name) >= CB_PATH_MAX) {
            if (!too_long_noted) {
                char *p = strdup(prefix);
                rc = p ? s_push(ctx->w, p, NULL, CB_ARTIFACTS_FS_TOO_LONG, 0) : -1;
                too_long_noted = true;
            }
            continue;
        }
        char *path = s_join(prefix, name);
        if (path == NULL) {
            rc = -1;
            break;
        }
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT) { /* removed since readdir */
                free(path);
                continue;
            }
            rc = s_push(ctx->w, path, NULL, CB_ARTIFACTS_FS_ERROR, errno);
            continue;
        }
        if (S_ISREG(st.st_mode)) {
            rc = s_push(ctx->w, path, &st, CB_ARTIFACTS_FS_FILE, 0);
        } else if (S_ISLNK(st.st_mode)) {
            rc = s_push(ctx->w, path, &st, CB_ARTIFACTS_FS_SYMLINK, 0);
        } else if (!S_ISDIR(st.st_mode)) {
            rc = s_push(ctx->w, path, &st, CB_ARTIFACTS_FS_SPECIAL, 0);
        } else if (ctx->w->truncated) {
            free(path); /* the budget is spent: do not descend */
        } else if (depth + 1 > ctx->max_depth) {
            rc = s_push(ctx->w, path, &st, CB_ARTIFACTS_FS_TOO_DEEP, 0);
        } else {
            int sub = cb_artifacts_fs_open_beneath(dfd, name, O_RDONLY | O_DIRECTORY);
            if (sub < 0) {
                cb_artifacts_fs_what_t what =
                    errno == EXDEV ? CB_ARTIFACTS_FS_MOUNT
                                   : (errno == ELOOP || errno == ENOTDIR ? CB_ARTIFACTS_FS_SYMLINK
                                                                         : CB_ARTIFACTS_FS_ERROR);
                rc = s_push(ctx->w, path, &st, what, errno);
                continue;
            }
            rc = s_walk_dir(ctx, sub, path, depth + 1);
            free(path);
        }
    }
    s_free_names(names, n);
    (void) closedir(d);
    return rc;
}

int cb_artifacts_fs_walk(int rootfd, unsigned max_depth, size_t max_entries,
                         cb_artifacts_fs_walk_t *out) {
    memset(out, 0, sizeof *out);
    s_walk_ctx_t ctx = {.w = out, .max_depth = max_depth, .max_entries = max_entries};
    int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        PLOG_E("openat(workdir, \".\", O_RDONLY|O_DIRECTORY)");
        return -1;
    }
    if (s_walk_dir(&ctx, fd, "", 0) < 0) return -1;
    if (out->n > 1) qsort(out->items, out->n, sizeof *out->items, s_cmp_items);
    return 0;
}

void cb_artifacts_fs_walk_free(cb_artifacts_fs_walk_t *w) {
    for (size_t i = 0; i < w->n; i++)
        free(w->items[i].path);
    free(w->items);
    memset(w, 0, sizeof *w);
}

/* ---- reading ----------------------------------------------------------- */

static bool s_same_time(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Same file, same size, same times. */
static bool s_same_stat(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           s_same_time(&a->st_mtim, &b->st_mtim) && s_same_time(&a->st_ctim, &b->st_ctim);
}

cb_artifacts_fs_read_t cb_artifacts_fs_read(int rootfd, const char *path, const struct stat *want,
                                            size_t max, cb_artifacts_hook_fn hook, void *hook_arg,
                                            uint8_t **buf, size_t *len, int *err) {
    *buf = NULL;
    *len = 0;
    *err = 0;
    if (hook) hook(CB_ARTIFACTS_HOOK_BEFORE_OPEN, path, hook_arg);
    cb_autofd int fd = cb_artifacts_fs_open_beneath(rootfd, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        *err = errno;
        if (errno == ELOOP) return CB_ARTIFACTS_FS_READ_SYMLINK;
        if (errno == ENOENT) return CB_ARTIFACTS_FS_READ_CHANGED; /* removed since the scan */
        return CB_ARTIFACTS_FS_READ_ERROR;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        *err = errno;
        return CB_ARTIFACTS_FS_READ_ERROR;
    }
    if (!S_ISREG(st.st_mode)) return CB_ARTIFACTS_FS_READ_NOT_REGULAR;
    if (st.st_nlink > 1) return CB_ARTIFACTS_FS_READ_LINKED;
    if (st.st_size < 0 || (uint64_t) st.st_size > (uint64_t) max)
        return CB_ARTIFACTS_FS_READ_TOO_LARGE;
    if (!s_same_stat(&st, want)) return CB_ARTIFACTS_FS_READ_CHANGED;
    size_t size = (size_t) st.st_size;

    if (hook) hook(CB_ARTIFACTS_HOOK_BEFORE_READ, path, hook_arg);
    cb_autofree uint8_t *data = malloc(size + 1); /* size <= max <= CEIL: no overflow */
    if (data == NULL) {
        *err = ENOMEM;
        return CB_ARTIFACTS_FS_READ_ERROR;
    }
    size_t off = 0;
    while (off < size) {
        ssize_t r = pread(fd, data + off, size - off, (off_t) off);
        if (r < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return CB_ARTIFACTS_FS_READ_ERROR;
        }
        if (r == 0) return CB_ARTIFACTS_FS_READ_CHANGED; /* shrank */
        off += (size_t) r;
    }
    for (;;) { /* one byte past the end: did it grow? */
        ssize_t r = pread(fd, data + size, 1, (off_t) size);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            *err = errno;
            return CB_ARTIFACTS_FS_READ_ERROR;
        }
        if (r > 0) return CB_ARTIFACTS_FS_READ_CHANGED;
        break;
    }
    struct stat st2;
    if (fstat(fd, &st2) < 0) {
        *err = errno;
        return CB_ARTIFACTS_FS_READ_ERROR;
    }
    if (!s_same_stat(&st, &st2) || st2.st_nlink > 1) return CB_ARTIFACTS_FS_READ_CHANGED;
    *len = size;
    *buf = steal_pointer(&data);
    return CB_ARTIFACTS_FS_READ_OK;
}
