/*
 * outdir.c - safe writes into `cellblock run --out DIR` (see outdir.h).
 */
#include "kernel/outdir.h"

#include "isolate/cb_limits.h"
#include "isolate/names.h"
#include "isolate/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define S_VARIANTS_MAX 1000 /* "name-1.ext" .. "name-999.ext" before giving up */
#define S_DIR_MODE     0755
#define S_FILE_MODE    0644

struct cb_outdir {
    int fd; /* DIR, O_DIRECTORY */
};

/* The extensions the artifact collector returns, and display-N's. */
static const char *const s_exts[] = {"png", "jpg",      "jpeg", "gif",  "webp", "svg",
                                     "pdf", "csv",      "tsv",  "json", "html", "htm",
                                     "md",  "markdown", "txt",  "log"};

cb_outdir_t *cb_outdir_open(const char *path) {
    if (mkdir(path, S_DIR_MODE) < 0 && errno != EEXIST) return NULL;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return NULL;
    cb_outdir_t *o = malloc(sizeof *o);
    if (o == NULL) {
        close(fd);
        return NULL;
    }
    o->fd = fd;
    return o;
}

void cb_outdir_close(cb_outdir_t **self_p) {
    if (*self_p == NULL) return;
    close((*self_p)->fd);
    free(*self_p);
    *self_p = NULL;
}

const char *cb_outdir_refusal(const char *rel, char *why, size_t why_len) {
    cb_names_check_t c = cb_names_check_path(rel, strlen(rel));
    if (c.verdict != CB_NAMES_OK) return cb_names_reason(&c, why, why_len);
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    const char *dot = strrchr(base, '.');
    if (dot != NULL && dot != base)
        for (size_t i = 0; i < sizeof s_exts / sizeof s_exts[0]; i++)
            if (strcasecmp(dot + 1, s_exts[i]) == 0) return NULL;
    snprintf(why, why_len, "has no extension of a type cellblock saves (.png, .csv, .json, ...)");
    return why;
}

bool cb_outdir_name_ok(const char *rel) {
    char why[CB_NAMES_REASON_MAX];
    return cb_outdir_refusal(rel, why, sizeof why) == NULL;
}

/* openat2 beneath dirfd, no symlinks; O_NOFOLLOW when openat2 is missing
 * (name is a single checked component then). */
static int s_open_beneath(int dirfd, const char *name, int flags, mode_t mode) {
    struct open_how how = {.flags = (unsigned long long) (flags | O_CLOEXEC | O_NOFOLLOW),
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve =
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return (int) fd;
    return openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW, mode);
}

/* Opens (creating) the directories of rel beneath o; returns a dir fd and
 * points *base at rel's last component. */
static int s_parent_dir(cb_outdir_t *o, const char *rel, const char **base) {
    int dfd = dup(o->fd);
    const char *s = rel;
    for (const char *e; dfd >= 0 && (e = strchr(s, '/')) != NULL; s = e + 1) {
        char comp[CB_PATH_MAX / 2];
        snprintf(comp, sizeof comp, "%.*s", (int) (e - s), s);
        if (mkdirat(dfd, comp, S_DIR_MODE) < 0 && errno != EEXIST) {
            close(dfd);
            return -1;
        }
        int next = s_open_beneath(dfd, comp, O_RDONLY | O_DIRECTORY, 0);
        close(dfd);
        dfd = next;
    }
    *base = s;
    return dfd;
}

int cb_outdir_write(cb_outdir_t *o, const char *rel, const void *data, size_t len, char *used,
                    size_t used_len) {
    if (!cb_outdir_name_ok(rel)) {
        errno = EINVAL;
        return -1;
    }
    const char *base;
    cb_autofd int dfd = s_parent_dir(o, rel, &base);
    if (dfd < 0) return -1;
    const char *dot = strrchr(base, '.');
    int fd = -1;
    char name[CB_PATH_MAX / 2];
    for (int v = 0; v < S_VARIANTS_MAX && fd < 0; v++) {
        if (v == 0)
            snprintf(name, sizeof name, "%s", base);
        else
            snprintf(name, sizeof name, "%.*s-%d%s", (int) (dot - base), base, v, dot);
        fd = s_open_beneath(dfd, name, O_WRONLY | O_CREAT | O_EXCL, S_FILE_MODE);
        if (fd < 0 && errno != EEXIST) return -1;
    }
    if (fd < 0) return -1; /* errno EEXIST: every variant taken */
    int rc = cb_write_all(fd, data, len);
    int e = errno;
    close(fd);
    snprintf(used, used_len, "%.*s%s", (int) (base - rel), rel, name);
    errno = e;
    return rc;
}
