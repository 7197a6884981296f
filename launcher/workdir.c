/*
 * workdir.c - create and remove the --sandbox none working directory.
 *
 * Removal walks with openat(O_NOFOLLOW|O_DIRECTORY) and unlinkat, so a
 * symlink planted by user code (to $HOME, say) is unlinked, never followed;
 * a directory on another device (a bind mount) is not entered.
 */
#include "launcher/workdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

int cb_workdir_create(char *path, size_t path_len) {
    int n = snprintf(path, path_len, "%s", CB_WORKDIR_TEMPLATE);
    if (n < 0 || (size_t) n >= path_len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdtemp(path) == NULL) {
        PLOG_E("mkdtemp(%s)", CB_WORKDIR_TEMPLATE);
        return -1;
    }
    return 0;
}

static int s_remove_at(int dirfd, const char *name, dev_t parent_dev, int depth);

static int s_remove_children(int dfd, dev_t dev, int depth) {
    if (depth > CB_RMTREE_DEPTH_MAX) {
        LOG_W("workdir deeper than %d levels; left in place", CB_RMTREE_DEPTH_MAX);
        return -1;
    }
    DIR *d = cb_opendir_at(dfd);
    if (d == NULL) return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (s_remove_at(dfd, e->d_name, dev, depth) < 0) rc = -1;
    }
    closedir(d);
    return rc;
}

/* parent_dev 0: the top, any device. */
static int s_remove_at(int dirfd, const char *name, dev_t parent_dev, int depth) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode)) {
        if (parent_dev != 0 && st.st_dev != parent_dev) {
            LOG_W("not descending into %s: another filesystem", name);
            return -1;
        }
        cb_autofd int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -1;
        struct stat st2;
        if (fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) return -1;
        /* user code may have chmod'ed a directory to 0; we own it */
        (void) fchmod(fd, S_IRWXU);
        (void) s_remove_children(fd, st.st_dev, depth + 1);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0) {
            PLOG_W("unlinkat(%s, AT_REMOVEDIR)", name);
            return -1;
        }
        return 0;
    }
    if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
        PLOG_W("unlinkat(%s)", name);
        return -1;
    }
    return 0;
}

int cb_workdir_remove_at(int dirfd, const char *name) { return s_remove_at(dirfd, name, 0, 0); }

int cb_workdir_remove(const char *path) { return s_remove_at(AT_FDCWD, path, 0, 0); }
