/*
 * mount_plan.c - building the sandbox's mount plan (launcher side; see
 * mount.h): every host path resolved now, files to copy read or opened
 * now, and for each read-only bind whether an overlay can stand in for it
 * when the plan runs (mount.c).  These functions allocate and may log.
 */
#include "isolate/mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/util.h"

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

/* True when path (a real path) is the root of a mount, or when that cannot
 * be told (then it is bound as it is, which is always correct). */
static bool s_is_mount_root(const char *path) {
    struct statx sx;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) < 0) return true;
    if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) return true;
    return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

/* Decodes mountinfo's octal escapes (\040 for a space) of s in place. */
static void s_unoctal(char *s) {
    char *o = s;
    for (const char *i = s; *i; o++) {
        if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' && i[2] >= '0' && i[2] <= '7' &&
            i[3] >= '0' && i[3] <= '7') {
            *o = (char) ((i[1] - '0') << 6 | (i[2] - '0') << 3 | (i[3] - '0'));
            i += 4;
        } else {
            *o = *i++;
        }
    }
    *o = '\0';
}

/* True when something is mounted below the directory dir (a real path), or
 * when our mountinfo cannot be read. */
static bool s_has_submounts(const char *dir) {
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) return true;
    size_t dlen = strlen(dir);
    bool below = false;
    char line[CB_PATH_MAX * 2];
    while (!below && fgets(line, sizeof line, f) != NULL) {
        if (strchr(line, '\n') == NULL && !feof(f)) { /* a line we cannot hold: be careful */
            below = true;
            break;
        }
        char *save = NULL, *point = strtok_r(line, " ", &save);
        for (int i = 0; point != NULL && i < 4; i++) /* id parent dev root point */
            point = strtok_r(NULL, " ", &save);
        if (point == NULL) continue;
        s_unoctal(point);
        below = strncmp(point, dir, dlen) == 0 && point[dlen] == '/' && point[dlen + 1] != '\0';
        if (strcmp(dir, "/") == 0) below = point[1] != '\0';
    }
    bool err = ferror(f);
    fclose(f);
    return below || err;
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
    /* an overlay shows neither mounts below a directory nor a file that is
     * a mount point of its own (a container's /etc/resolv.conf): those stay
     * binds */
    op->keep_bind = op->src_is_dir ? s_has_submounts(real) : s_is_mount_root(real);
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
        bool stated = fd >= 0 && fstat(fd, &st) == 0;
        if (!stated || !S_ISREG(st.st_mode) ||
            (size_t) st.st_size > CB_SANDBOX_COPY_FD_BYTES_MAX - bytes) {
            int e = !stated ? errno : S_ISREG(st.st_mode) ? E2BIG : EINVAL;
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
