/* test_mount.c - the sandbox filesystem plan: the runner copy (bytes, NULs,
 * mtimes, what is skipped, bounds), the /proc masks, and running a plan as
 * root in a private mount namespace, also from a chroot whose root is no
 * mount point (pivot_root's EINVAL, issue 9); and what mountinfo shows of
 * the binds and tmpfs mounts: overlays named "cellblock", not the host's
 * filesystems (issue 18), except where a bind must stay one (mounts below). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/mount.h"
#include "launcher/workdir.h"
#include "tap.h"

#define FMT(b, ...)                                                                                \
    do {                                                                                           \
        if (snprintf(b, sizeof b, __VA_ARGS__) >= (int) sizeof b) abort();                         \
    } while (0)

static const char blob[] = {'p', 'y', 'c', 0, 1, 2, 0, 'x'}; /* NUL bytes inside */
static const time_t MTIME = 1500000000;

static void put(const char *dir, const char *name, const void *data, size_t len) {
    char p[4096];
    FMT(p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f == NULL) abort();
    fwrite(data, 1, len, f);
    fclose(f);
    struct timeval tv[2] = {{MTIME, 0}, {MTIME, 0}};
    utimes(p, tv);
}

static const cb_mount_op_t *find(const cb_mount_plan_t *p, cb_mount_kind_t k, const char *dst) {
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].kind == k && strcmp(p->ops[i].dst, dst) == 0) return &p->ops[i];
    return NULL;
}

/* A host dir like the runner's: files, a subdir, a hidden marker, a symlink. */
static void make_src(const char *src) {
    char d[4096];
    put(src, "runner.py", "print(1)\n", 9);
    put(src, ".compiled", "", 0);
    FMT(d, "%s/__pycache__", src);
    mkdir(d, 0755);
    put(d, "runner.pyc", blob, sizeof blob);
    FMT(d, "%s/a", src);
    mkdir(d, 0755);
    FMT(d, "%s/a/b", src);
    mkdir(d, 0755);
    FMT(d, "%s/a/b/c", src);
    mkdir(d, 0755);
    FMT(d, "%s/a/b", src);
    put(d, "deep.txt", "deep", 4);
    FMT(d, "%s/a/b/c", src);
    put(d, "too-deep.txt", "no", 2);
    char l[4096];
    FMT(l, "%s/link.py", src);
    (void) symlink("/etc/passwd", l);
}

static void test_copy_plan(const char *src) {
    cb_mount_plan_t p;
    cb_mount_plan_init(&p);
    TAP_EQ_INT(cb_mount_plan_copy_dir(&p, src, "/opt/x"), 0, "copy plan built");
    TAP_OK(p.n > 0 && p.ops[0].kind == CB_MNT_TMPFS && strcmp(p.ops[0].dst, "/newroot/opt/x") == 0,
           "first a tmpfs at the target");
    TAP_OK(p.n > 0 && strstr(p.ops[0].data, "size=") && strstr(p.ops[0].data, "nr_inodes="),
           "tmpfs sized for its files: %s", p.n ? p.ops[0].data : "");
    TAP_OK(p.n > 0 && p.ops[p.n - 1].kind == CB_MNT_RDONLY, "then read-only");
    const cb_mount_op_t *pyc = find(&p, CB_MNT_BLOB, "/newroot/opt/x/__pycache__/runner.pyc");
    TAP_OK(pyc && pyc->data_len == sizeof blob && memcmp(pyc->data, blob, sizeof blob) == 0,
           "binary file copied byte for byte, NULs included");
    TAP_OK(pyc && pyc->mtime.tv_sec == MTIME, "mtime kept (pyc validity)");
    TAP_OK(find(&p, CB_MNT_BLOB, "/newroot/opt/x/runner.py") != NULL, "source copied");
    TAP_OK(find(&p, CB_MNT_BLOB, "/newroot/opt/x/a/b/deep.txt") != NULL, "two levels down copied");
    TAP_OK(find(&p, CB_MNT_BLOB, "/newroot/opt/x/a/b/c/too-deep.txt") == NULL,
           "deeper than CB_SANDBOX_COPY_DEPTH skipped");
    TAP_OK(find(&p, CB_MNT_BLOB, "/newroot/opt/x/.compiled") == NULL, "hidden entries skipped");
    TAP_OK(find(&p, CB_MNT_BLOB, "/newroot/opt/x/link.py") == NULL, "symlinks never followed");
    cb_mount_plan_fini(&p);

    /* bounds: more files than CB_SANDBOX_COPY_FILES_MAX */
    char many[4096], n[64];
    FMT(many, "%s/../many", src); /* beside the runner dir, not in it */
    mkdir(many, 0755);
    for (int i = 0; i <= CB_SANDBOX_COPY_FILES_MAX; i++) {
        FMT(n, "f%d", i);
        put(many, n, "x", 1);
    }
    cb_mount_plan_init(&p);
    errno = 0;
    TAP_EQ_INT(cb_mount_plan_copy_dir(&p, many, "/opt/y"), -1, "too many files refused");
    TAP_EQ_INT(errno, E2BIG, "with E2BIG");
    cb_mount_plan_fini(&p);
}

/* cb_mount_plan_copy_files: opened now, copied when the plan runs; bounds. */
static void test_copy_files_plan(const char *dir) {
    char f[4096], big[4096];
    FMT(f, "%s/tool", dir);
    put(dir, "tool", "tool", 4);
    FMT(big, "%s/big", dir);
    int fd = open(big, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t) CB_SANDBOX_COPY_FD_BYTES_MAX + 1) < 0) abort(); /* sparse */
    close(fd);
    cb_mount_plan_t p;
    cb_mount_plan_init(&p);
    const char *one[] = {f};
    TAP_EQ_INT(cb_mount_plan_copy_files(&p, "/opt/own", one, 1), 0, "copy-files plan built");
    const cb_mount_op_t *op = find(&p, CB_MNT_COPY, "/newroot/opt/own/tool");
    TAP_OK(op && op->fd >= 0 && op->data_len == 4 && op->mtime.tv_sec == MTIME,
           "the file is open in the plan, with its size and mtime");
    TAP_OK(p.n == 3 && p.ops[0].kind == CB_MNT_TMPFS && p.ops[2].kind == CB_MNT_RDONLY,
           "in a tmpfs of its own, read-only afterwards");
    cb_mount_plan_fini(&p);
    const char *bad[][1] = {{big}, {dir}, {"/nonexistent/cellblock"}};
    const int want[] = {E2BIG, EINVAL, ENOENT};
    for (int i = 0; i < 3; i++) {
        cb_mount_plan_init(&p);
        errno = 0;
        int rc = cb_mount_plan_copy_files(&p, "/opt/own", bad[i], 1);
        TAP_OK(rc == -1 && errno == want[i], "%s refused with %s (got %s)", bad[i][0],
               strerror(want[i]), strerror(errno));
        cb_mount_plan_fini(&p);
    }
    unlink(big);
}

static void test_mask_plan(void) {
    cb_mount_plan_t p;
    cb_mount_plan_init(&p);
    TAP_EQ_INT(cb_mount_plan_proc_masks(&p, "/proc"), 0, "mask plan built");
    const cb_mount_op_t *c = find(&p, CB_MNT_MASK, "/newroot/proc/cmdline");
    TAP_OK(c && strcmp(c->src, "/newroot/dev/null") == 0, "cmdline masked with the sandbox's null");
    TAP_OK(find(&p, CB_MNT_MASK, "/newroot/proc/kallsyms") &&
               find(&p, CB_MNT_MASK, "/newroot/proc/kcore") &&
               find(&p, CB_MNT_MASK, "/newroot/proc/sched_debug") &&
               find(&p, CB_MNT_MASK, "/newroot/proc/sysrq-trigger"),
           "runc's maskedPaths and the issue's list are there");
    TAP_OK(find(&p, CB_MNT_RO_SELF, "/newroot/proc/sys") != NULL, "/proc/sys read-only");
    cb_mount_plan_fini(&p);
}

/* Runs a small plan in a child (root, new mount namespace); optionally
 * chrooted first into a plain directory.  The child checks the result and
 * exits with a bitmask of failures. */
static int run_plan(const char *src, const char *chroot_dir) {
    cb_mount_plan_t p;
    cb_mount_plan_init(&p);
    /* a host file copied from the fd the plan holds: gone from its path
     * before the plan runs, as if out of the sandbox's reach */
    char tool[4096];
    FMT(tool, "%s/../tool", src);
    put(src, "../tool", "tool", 4);
    const char *own[] = {tool};
    int ok = cb_mount_plan_copy_dir(&p, src, "/opt/x") == 0 &&
             cb_mount_plan_copy_files(&p, "/opt/own", own, 1) == 0 && unlink(tool) == 0 &&
             cb_mount_plan_file(&p, "/etc/hostname", "box\n", 0644) == 0;
    if (chroot_dir == NULL)
        ok = ok && cb_mount_plan_tmpfs(&p, "/dev", "mode=0755,size=64k") == 0 &&
             cb_mount_plan_dev(&p, "null") == 0 && cb_mount_plan_proc(&p, "/proc") == 0 &&
             cb_mount_plan_proc_masks(&p, "/proc") == 0;
    if (!ok) return 0x80;
    pid_t c = fork();
    if (c == 0) {
        if (chroot_dir != NULL && (chroot(chroot_dir) < 0 || chdir("/") < 0)) _exit(0x40);
        if (unshare(CLONE_NEWNS | (chroot_dir ? 0 : CLONE_NEWPID)) < 0) _exit(0x41);
        if (chroot_dir != NULL) snprintf(p.stage, sizeof p.stage, "/stage");
        int failed = -1;
        if (cb_mount_run(&p, &failed) < 0) _exit(0x20 | (failed & 0xf));
        int bad = 0;
        struct stat st;
        if (stat("/opt/x/__pycache__/runner.pyc", &st) < 0 || st.st_size != (off_t) sizeof blob ||
            st.st_mtime != MTIME)
            bad |= 1;
        if (open("/opt/x/new", O_WRONLY | O_CREAT, 0644) >= 0 || errno != EROFS) bad |= 2;
        if (access("/opt/x/link.py", F_OK) == 0) bad |= 4;
        char got[8] = "";
        int tfd = open("/opt/own/tool", O_RDONLY);
        if (tfd < 0 || read(tfd, got, sizeof got) != 4 || memcmp(got, "tool", 4) != 0 ||
            open("/opt/own/new", O_WRONLY | O_CREAT, 0644) >= 0 || errno != EROFS)
            bad |= 32;
        if (chroot_dir == NULL) {
            char buf[64];
            int fd = open("/proc/cmdline", O_RDONLY);
            if (fd < 0 || read(fd, buf, sizeof buf) != 0) bad |= 8;
            struct statvfs sv;
            if (statvfs("/proc/sys", &sv) < 0 || !(sv.f_flag & ST_RDONLY)) bad |= 16;
        } else if (access("/secret", F_OK) == 0) {
            bad |= 8; /* the chroot's own files stay out */
        }
        _exit(bad);
    }
    int st = 0;
    waitpid(c, &st, 0);
    cb_mount_plan_fini(&p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0xff;
}

/* The mountinfo line (its fields after " - ": type and source) of the mount
 * at point, into out; "" if none. */
static void mount_line(const char *point, char *out, size_t len) {
    out[0] = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        char *dash = strstr(line, " - "), *save = NULL, *fld = strtok_r(line, " ", &save);
        for (int i = 0; fld && i < 4; i++) /* id parent dev root point */
            fld = strtok_r(NULL, " ", &save);
        if (fld && dash && strcmp(fld, point) == 0) snprintf(out, len, "%s", dash + 3);
    }
    if (f) fclose(f);
}

/* Builds and runs, in a child with its own mount namespace, a plan of
 * binds (a directory, a file, a directory with a mount below it) and a
 * tmpfs, and checks what they show in mountinfo and that they work. */
static int run_layers(const char *src) {
    pid_t c = fork();
    if (c != 0) {
        int st = 0;
        waitpid(c, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 0xff;
    }
    char sub[4096], file[4096], deep[4096];
    FMT(sub, "%s/__pycache__", src);
    FMT(file, "%s/runner.py", src);
    FMT(deep, "%s/a", src);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", sub, "tmpfs", 0, "size=16k") < 0)
        _exit(0x40);
    put(sub, "inner.txt", "in", 2);
    cb_mount_plan_t p;
    cb_mount_plan_init(&p);
    if (cb_mount_plan_bind(&p, src, "/whole", false, false) < 0 || /* a mount below */
        cb_mount_plan_bind(&p, deep, "/deep", false, false) < 0 ||
        cb_mount_plan_bind(&p, file, "/etc/r.py", false, false) < 0 ||
        cb_mount_plan_tmpfs(&p, "/tmp", "mode=1777,size=64k") < 0 ||
        cb_mount_plan_proc(&p, "/proc") < 0) /* to read mountinfo */
        _exit(0x41);
    if (!find(&p, CB_MNT_BIND_RO, "/newroot/whole")->keep_bind ||
        find(&p, CB_MNT_BIND_RO, "/newroot/etc/r.py")->keep_bind)
        _exit(0x42);
    int failed = -1;
    if (cb_mount_run(&p, &failed) < 0) _exit(0x20 | (failed & 0xf));
    int bad = 0;
    char l[256], got[8] = "";
    static const char *const layered[] = {"/", "/deep", "/etc/r.py", "/tmp"};
    for (size_t i = 0; i < sizeof layered / sizeof layered[0]; i++) {
        mount_line(layered[i], l, sizeof l);
        if (strncmp(l, "overlay cellblock ", 18) != 0) bad |= 1;
    }
    mount_line("/whole", l, sizeof l);
    if (l[0] == '\0' || strncmp(l, "overlay", 7) == 0) bad |= 2;    /* kept a bind */
    if (access("/whole/__pycache__/inner.txt", R_OK) < 0) bad |= 4; /* ... with its submount */
    int fd = open("/deep/b/deep.txt", O_RDONLY);
    if (fd < 0 || read(fd, got, sizeof got) != 4 || memcmp(got, "deep", 4) != 0) bad |= 8;
    if (fd >= 0) close(fd);
    if (open("/deep/new", O_WRONLY | O_CREAT, 0644) >= 0 || errno != EROFS) bad |= 16;
    fd = open("/etc/r.py", O_RDONLY);
    if (fd < 0 || read(fd, got, sizeof got) != 8 || memcmp(got, "print(1)", 8) != 0) bad |= 32;
    if (fd >= 0) close(fd);
    fd = open("/tmp/x", O_WRONLY | O_CREAT | O_EXCL, 0600);
    struct stat st;
    if (fd < 0 || stat("/tmp", &st) < 0 || (st.st_mode & 07777) != 01777) bad |= 64;
    if (fd >= 0) close(fd);
    _exit(bad);
}

int main(void) {
    char root[] = "/tmp/cb-test-mount-XXXXXX";
    if (mkdtemp(root) == NULL) return 1;
    char src[4096];
    FMT(src, "%s/src", root);
    mkdir(src, 0755);
    make_src(src);
    test_copy_plan(src);
    test_copy_files_plan(root);
    test_mask_plan();
    if (geteuid() != 0) {
        TAP_SKIP("running a plan needs root (mount namespaces)");
    } else {
        TAP_EQ_INT(run_plan(src, NULL), 0,
                   "plan runs: runner copy read-only, mtimes, /proc masked, a file copied "
                   "from its fd");
        /* a chroot into a plain directory, as build chroots are */
        char ch[4096], d[4096];
        FMT(ch, "%s/chroot", root);
        mkdir(ch, 0755);
        FMT(d, "%s/stage", ch);
        mkdir(d, 0755);
        put(ch, "secret", "s", 1);
        TAP_EQ_INT(run_plan(src, ch), 0, "plan runs in a chroot whose root is no mount point");
        TAP_EQ_INT(run_layers(src), 0,
                   "binds and tmpfs show as overlays named cellblock, work and are read-only; a "
                   "directory with a mount below stays a bind, with it");
    }
    cb_workdir_remove(root);
    TAP_DONE();
}
