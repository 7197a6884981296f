/*
 * warm_trust.c - the interpreter tree's owners and modes before a warm start
 * (see warm_trust.h).
 */
#include "launcher/warm_trust.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolate/cb_limits.h"
#include "isolate/util.h"
#include "launcher/warm_limits.h"

typedef struct {
    char *why;
    size_t len;
    size_t entries; /* looked at so far, bounded by CB_WARM_TRUST_ENTRIES_MAX */
} s_ctx_t;

/* One inode: owned by root or us, not writable by group or others (a
 * symlink's own mode means nothing: what it names is checked by stat).  An
 * ancestor may be a sticky directory (/tmp, /var/tmp): there nobody else
 * can rename or remove what root or we own. */
static int s_inode(s_ctx_t *c, const char *path, const struct stat *st, bool ancestor) {
    uid_t me = geteuid();
    if (st->st_uid != 0 && st->st_uid != me) {
        (void) snprintf(c->why, c->len, "%s is owned by uid %lu", path, (unsigned long) st->st_uid);
        return -1;
    }
    bool sticky = ancestor && S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) != 0;
    if (!S_ISLNK(st->st_mode) && !sticky && (st->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        (void) snprintf(c->why, c->len, "%s is writable by its group or others (mode %04o)", path,
                        (unsigned) (st->st_mode & 07777));
        return -1;
    }
    return 0;
}

/* The path (not followed) and, for a symlink, what it names. */
static int s_path(s_ctx_t *c, int dfd, const char *name, const char *shown, bool ancestor) {
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return 0; /* gone: nothing to run */
    if (s_inode(c, shown, &st, ancestor) < 0) return -1;
    if (S_ISLNK(st.st_mode) && fstatat(dfd, name, &st, 0) == 0 &&
        s_inode(c, shown, &st, ancestor) < 0)
        return -1;
    return 0;
}

/* path and each of its ancestors (path is absolute). */
static int s_ancestors(s_ctx_t *c, const char *path) {
    char buf[CB_PATH_MAX];
    int n = snprintf(buf, sizeof buf, "%s", path);
    if (n < 0 || (size_t) n >= sizeof buf || buf[0] != '/') {
        (void) snprintf(c->why, c->len, "%.200s: not an absolute path of a usable length", path);
        return -1;
    }
    for (bool ancestor = false;; ancestor = true) {
        if (s_path(c, AT_FDCWD, buf, buf, ancestor) < 0) return -1;
        char *slash = strrchr(buf, '/');
        if (slash == buf) return buf[1] == '\0' ? 0 : s_path(c, AT_FDCWD, "/", "/", true);
        *slash = '\0';
    }
}

/* dir itself (with its ancestors) and the entries directly in it. */
static int s_dir(s_ctx_t *c, const char *dir) {
    if (s_ancestors(c, dir) < 0) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0; /* none, or not a directory: nothing is imported from it */
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 0;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (++c->entries > CB_WARM_TRUST_ENTRIES_MAX) {
            (void) snprintf(c->why, c->len, "more than %u entries to check (the last in %s)",
                            (unsigned) CB_WARM_TRUST_ENTRIES_MAX, dir);
            rc = -1;
            break;
        }
        char shown[CB_PATH_MAX];
        int n = snprintf(shown, sizeof shown, "%s/%s", dir, e->d_name);
        if (n < 0 || (size_t) n >= sizeof shown) continue;
        rc = s_path(c, dirfd(d), e->d_name, shown, false);
    }
    closedir(d);
    return rc;
}

/* PREFIX/lib/python3*: the standard library, and its site- and dist-packages. */
static int s_prefix(s_ctx_t *c, const char *prefix) {
    char lib[CB_PATH_MAX];
    int n = snprintf(lib, sizeof lib, "%s/lib", strcmp(prefix, "/") == 0 ? "" : prefix);
    if (n < 0 || (size_t) n >= sizeof lib) return 0;
    DIR *d = opendir(lib);
    if (d == NULL) return 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "python3", 7) != 0) continue;
        static const char *const subs[] = {"", "/site-packages", "/dist-packages"};
        for (size_t i = 0; rc == 0 && i < sizeof subs / sizeof subs[0]; i++) {
            char dir[CB_PATH_MAX];
            n = snprintf(dir, sizeof dir, "%s/%s%s", lib, e->d_name, subs[i]);
            if (n > 0 && (size_t) n < sizeof dir) rc = s_dir(c, dir);
        }
    }
    closedir(d);
    return rc;
}

/* The prefix of an interpreter at BIN/python: BIN's parent. */
static void s_prefix_of(const char *python, char *out, size_t len) {
    char tmp[CB_PATH_MAX];
    (void) snprintf(tmp, sizeof tmp, "%s", python);
    (void) snprintf(out, len, "%s", dirname(dirname(tmp)));
}

int cb_warm_tree_trusted(const char *python, const char *runner, char *why, size_t len) {
    s_ctx_t c = {why, len, 0};
    char real[CB_PATH_MAX], prefix[CB_PATH_MAX], tmp[CB_PATH_MAX];
    if (realpath(python, real) == NULL) {
        (void) snprintf(why, len, "%s: %s", python, strerror(errno));
        return -1;
    }
    if (s_ancestors(&c, python) < 0 || s_ancestors(&c, real) < 0) return -1;
    if (s_prefix(&c, "/usr") < 0 || s_prefix(&c, "/usr/local") < 0) return -1;
    const char *const pys[] = {python, real};
    for (size_t i = 0; i < sizeof pys / sizeof pys[0]; i++) {
        s_prefix_of(pys[i], prefix, sizeof prefix);
        if (strcmp(prefix, "/usr") != 0 && strcmp(prefix, "/usr/local") != 0 &&
            (s_dir(&c, prefix) < 0 || s_prefix(&c, prefix) < 0))
            return -1;
    }
    (void) snprintf(tmp, sizeof tmp, "%s", runner);
    return s_dir(&c, dirname(tmp));
}
