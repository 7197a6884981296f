/*
 * idpool.c - lease one host id per sandbox from a range (see idpool.h).
 *
 * Taking an id: open DIR/<id> (O_CREAT|O_NOFOLLOW), flock(LOCK_EX|LOCK_NB);
 * busy -> next id.  A holder that gives its id back unlinks the file while
 * it still holds the lock, so after locking we check that the name still
 * leads to the file we locked: if it was unlinked in between, a second
 * process could create and lock a new file of the same name, and both would
 * believe they hold the id.  This is the classic lock-file dance; the
 * directory belongs to the launcher's user and nobody else may write it, so
 * no one can plant or steal entries.
 */
#include "isolate/idpool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

#define S_DIR_MODE    0700 /* the lock directory */
#define S_PARENT_MODE 0755 /* missing parents of it */
#define S_LOCK_MODE   0600 /* lock files */
#define S_RETRY_MAX   8    /* a lock file unlinked under us: tries of one id */
#define S_SWEEP_MAX   64   /* lock files of killed holders removed by one release */
#define S_ID_DIGITS   20   /* the longest name of a lock file (an unsigned long) */

/* mkdir -p: parents S_PARENT_MODE, the last component S_DIR_MODE. */
static int s_mkdirs(const char *dir) {
    char buf[CB_PATH_MAX];
    int n = snprintf(buf, sizeof buf, "%s", dir);
    if (n < 0 || (size_t) n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, S_PARENT_MODE) < 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, S_DIR_MODE) < 0 && errno != EEXIST) return -1;
    return 0;
}

static unsigned long s_random(void) {
    unsigned long r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t) sizeof r) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (unsigned long) ts.tv_nsec ^ ((unsigned long) getpid() << 16);
    }
    return r;
}

/* fd is still the file linked at name (not unlinked and replaced since it was opened). */
static bool s_still_linked(int dir_fd, const char *name, int fd) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && S_ISREG(a.st_mode) &&
           fstatat(dir_fd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Tries to take `id`.  1 taken, 0 busy, -1 error (errno). */
static int s_try(cb_idlease_t *l, unsigned long id) {
    char name[sizeof l->name];
    (void) snprintf(name, sizeof name, "%lu", id);
    for (int t = 0; t < S_RETRY_MAX; t++) {
        int fd = openat(l->dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, S_LOCK_MODE);
        if (fd < 0) return -1;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK) return 0;
            errno = e;
            return -1;
        }
        if (s_still_linked(l->dir_fd, name, fd)) {
            l->lock_fd = fd;
            l->id = id;
            memcpy(l->name, name, sizeof name);
            return 1;
        }
        close(fd); /* released and unlinked between our open and our lock */
    }
    return 0;
}

int cb_idpool_acquire(const char *dir, unsigned long first, unsigned long count, cb_idlease_t *out,
                      char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    out->lock_fd = out->dir_fd = -1;
    if (count == 0 || first == 0) {
        cb_fmt_why(why, why_len, "empty id range");
        return -1;
    }
    if (s_mkdirs(dir) < 0) {
        cb_fmt_why(why, why_len, "cannot create the id lock directory %s: %s", dir,
                   strerror(errno));
        return -1;
    }
    out->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (out->dir_fd < 0 || fstat(out->dir_fd, &st) < 0) {
        cb_fmt_why(why, why_len, "cannot open the id lock directory %s: %s", dir, strerror(errno));
        cb_idpool_release(out);
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        cb_fmt_why(why, why_len,
                   "the id lock directory %s belongs to uid %lu or is writable by others; "
                   "remove it (it is recreated)",
                   dir, (unsigned long) st.st_uid);
        cb_idpool_release(out);
        return -1;
    }
    unsigned long start = s_random() % count;
    for (unsigned long i = 0; i < count; i++) {
        unsigned long id = first + (start + i) % count;
        int r = s_try(out, id);
        if (r == 1) {
            LOG_D("host id %lu leased (%s/%s)", id, dir, out->name);
            return 0;
        }
        if (r < 0) {
            cb_fmt_why(why, why_len, "locking %s/%lu: %s", dir, id, strerror(errno));
            cb_idpool_release(out);
            return -1;
        }
    }
    cb_fmt_why(why, why_len,
               "all %lu host ids of the range %lu:%lu are in use by running sandboxes; widen "
               "--uid-range",
               count, first, count);
    cb_idpool_release(out);
    return -1;
}

int cb_idpool_parse_range(const char *s, unsigned long *first, unsigned long *count, char *err,
                          size_t err_len) {
    char *end = NULL;
    errno = 0;
    unsigned long f = s[0] == '-' ? 0 : strtoul(s, &end, 10), c = 0;
    bool ok = errno == 0 && end != NULL && end != s && *end == ':';
    if (ok) {
        const char *cs = end + 1;
        c = cs[0] == '-' ? 0 : strtoul(cs, &end, 10);
        ok = errno == 0 && end != cs && *end == '\0';
    }
    if (!ok || f < CB_OPT_MIN_ID_FIRST || c < 1 || f > (unsigned long) CB_OPT_MAX_ID ||
        c > (unsigned long) CB_OPT_MAX_ID - f + 1) {
        cb_fmt_why(err, err_len,
                   "--uid-range: '%s' is not FIRST:COUNT with FIRST >= %lu and FIRST+COUNT-1 "
                   "<= %ld",
                   s, CB_OPT_MIN_ID_FIRST, CB_OPT_MAX_ID);
        return -1;
    }
    *first = f;
    *count = c;
    return 0;
}

/* Lock files whose holder was killed (no release ran) stay behind.  A clean
 * release removes up to S_SWEEP_MAX of them the way it removes its own:
 * locked first (LOCK_NB: a live holder keeps its file), checked to be still
 * linked, unlinked while locked.  An acquirer that opened such a file before
 * the unlink finds it locked (busy) or, once it has the lock, unlinked, and
 * tries again (s_try): no id is ever held twice. */
static void s_sweep(int dir_fd) {
    DIR *d = cb_opendir_at(dir_fd);
    if (d == NULL) return;
    int removed = 0;
    for (struct dirent *e; removed < S_SWEEP_MAX && (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n == 0 || n > S_ID_DIGITS || strspn(e->d_name, "0123456789") != n) continue;
        int fd = openat(dir_fd, e->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && s_still_linked(dir_fd, e->d_name, fd) &&
            unlinkat(dir_fd, e->d_name, 0) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    if (removed > 0) LOG_D("%d lock files of killed sandboxes removed", removed);
}

void cb_idpool_release(cb_idlease_t *l) {
    int saved = errno;
    if (l->lock_fd >= 0) {
        /* unlink while still locked: see the dance in s_try */
        if (l->dir_fd >= 0 && unlinkat(l->dir_fd, l->name, 0) < 0 && errno != ENOENT)
            PLOG_D("unlinkat(%s)", l->name);
        close(l->lock_fd);
        l->lock_fd = -1;
        if (l->dir_fd >= 0) s_sweep(l->dir_fd);
    }
    if (l->dir_fd >= 0) {
        close(l->dir_fd);
        l->dir_fd = -1;
    }
    errno = saved;
}
