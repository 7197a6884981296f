/*
 * test_snap_tree.c - the checkpoint's tree copy and restore (tiers/snap_tree.c)
 * on a scratch directory: what is copied and how (symlinks never followed,
 * fifos never opened, holes kept, unreadable modes, times), what a restore
 * removes, rewrites in place and recreates, and the bounds.
 */
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiers/snap_tree.h"

static char s_root[64];

static int s_dir(const char *name) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", s_root, name);
    (void) mkdir(p, 0700);
    return open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void s_write(int dir, const char *name, const char *text) {
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void) !write(fd, text, strlen(text));
        close(fd);
    }
}

static bool s_read_is(int dir, const char *name, const char *want) {
    char buf[256] = "";
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n >= 0 && strcmp(buf, want) == 0;
}

static void s_rm_rf(const char *path) {
    pid_t p = fork();
    if (p == 0) {
        execlp("rm", "rm", "-rf", path, (char *) NULL);
        _exit(127);
    }
    (void) waitpid(p, NULL, 0);
}

/* As the agent of the namespaces tier runs: the owner of the files, without
 * capabilities, facing a file and a directory it made unreadable.  Returns
 * the number of checks that failed (run in a child as uid 65534). */
static int s_as_owner(void) {
    char root[64];
    snprintf(root, sizeof root, "/tmp/cb-snap-owner-XXXXXX");
    if (mkdtemp(root) == NULL) return 100;
    int top = open(root, O_RDONLY | O_DIRECTORY);
    (void) mkdirat(top, "live", 0700);
    (void) mkdirat(top, "store", 0700);
    int live = openat(top, "live", O_RDONLY | O_DIRECTORY), store = openat(top, "store", O_RDONLY);
    s_write(live, "locked", "data");
    (void) fchmodat(live, "locked", 0000, 0);
    (void) mkdirat(live, "closed", 0700);
    int cl = openat(live, "closed", O_RDONLY | O_DIRECTORY);
    s_write(cl, "in", "inside");
    close(cl);
    (void) fchmodat(live, "closed", 0000, 0);
    int bad = 0;
    cb_snap_tree_t t = {0};
    bad += cb_snap_tree_copy(&t, live, store) != 0;
    struct stat st;
    bad += fstatat(live, "closed", &st, 0) != 0 || (st.st_mode & 07777) != 0;
    (void) fchmodat(live, "locked", 0600, 0);
    s_write(live, "locked", "changed");
    (void) fchmodat(live, "locked", 0000, 0);
    cb_snap_tree_t r = {0};
    bad += cb_snap_tree_restore(&r, store, live) != 0;
    (void) fchmodat(live, "locked", 0600, 0);
    bad += !s_read_is(live, "locked", "data");
    (void) fchmodat(live, "closed", 0700, 0);
    int cl2 = openat(live, "closed", O_RDONLY | O_DIRECTORY);
    bad += cl2 < 0 || !s_read_is(cl2, "in", "inside");
    if (t.why[0] || r.why[0]) printf("# as owner: %s %s\n", t.why, r.why);
    cb_snap_tree_t c = {0};
    (void) cb_snap_tree_clear(&c, store);
    (void) cb_snap_tree_clear(&c, live);
    (void) unlinkat(top, "live", AT_REMOVEDIR);
    (void) unlinkat(top, "store", AT_REMOVEDIR);
    (void) rmdir(root);
    return bad;
}

int main(void) {
    snprintf(s_root, sizeof s_root, "/tmp/cb-snap-tree-XXXXXX");
    if (mkdtemp(s_root) == NULL) {
        TAP_OK(0, "mkdtemp");
        TAP_DONE();
    }
    int live = s_dir("live"), store = s_dir("store");
    /* a tree with each kind of entry */
    s_write(live, "a.txt", "alpha");
    (void) mkdirat(live, "sub", 0755);
    int sub = openat(live, "sub", O_RDONLY | O_DIRECTORY);
    s_write(sub, "b.txt", "beta");
    (void) symlinkat("/etc/passwd", live, "link");
    (void) mkfifoat(live, "fifo", 0600);
    s_write(live, "secret", "hidden");
    (void) fchmodat(live, "secret", 0000, 0);
    /* a sparse file: 1 GiB apparent, 4 bytes of data at the end */
    int sp = openat(live, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    (void) !pwrite(sp, "tail", 4, (1LL << 30) - 4);
    close(sp);
    struct timespec old[2] = {{1000000000, 0}, {1000000000, 123456789}};
    (void) utimensat(live, "a.txt", old, 0);

    cb_snap_tree_t t = {0};
    TAP_EQ_INT(cb_snap_tree_copy(&t, live, store), 0, "the tree is copied");
    if (t.why[0]) printf("# why: %s\n", t.why);
    struct stat st;
    TAP_OK(fstatat(store, "link", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode),
           "a symlink is copied as a symlink (never followed)");
    TAP_OK(fstatat(store, "fifo", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(st.st_mode),
           "a fifo is recreated, not opened (the copy did not block)");
    TAP_OK(fstatat(store, "secret", &st, 0) == 0 && (st.st_mode & 07777) == 0,
           "a file of mode 000 is copied with its mode");
    TAP_OK(fstatat(live, "secret", &st, 0) == 0 && (st.st_mode & 07777) == 0,
           "... and the live file gets its mode back");
    TAP_OK(fstatat(store, "sparse", &st, 0) == 0 && st.st_size == (1LL << 30) &&
               st.st_blocks * 512 < (1 << 20),
           "a sparse file keeps its holes (1 GiB apparent, %lld bytes allocated)",
           (long long) st.st_blocks * 512);
    TAP_OK(fstatat(store, "a.txt", &st, 0) == 0 && st.st_mtim.tv_nsec == 123456789,
           "modification times are kept to the nanosecond");
    TAP_OK(t.entries == 7, "entries counted (%u)", t.entries);

    /* the sandbox changes things after the checkpoint */
    struct stat before;
    (void) fstatat(live, "a.txt", &before, 0);
    s_write(live, "a.txt", "changed, and longer");
    s_write(sub, "new.txt", "new");
    (void) unlinkat(sub, "b.txt", 0);
    (void) unlinkat(live, "link", 0);
    (void) symlinkat("elsewhere", live, "link");
    (void) unlinkat(live, "fifo", 0);
    (void) mkdirat(live, "fifo", 0700); /* a directory where a fifo was */
    (void) mkdirat(live, "deep", 0700);
    int deep = openat(live, "deep", O_RDONLY | O_DIRECTORY);
    s_write(deep, "x", "x");
    (void) fchmodat(live, "deep", 0500, 0); /* not writable: the restore must still empty it */
    close(deep);

    cb_snap_tree_t r = {0};
    TAP_EQ_INT(cb_snap_tree_restore(&r, store, live), 0, "the tree is restored");
    if (r.why[0]) printf("# why: %s\n", r.why);
    TAP_OK(s_read_is(live, "a.txt", "alpha"), "a changed file has its old content");
    (void) fstatat(live, "a.txt", &st, 0);
    TAP_OK(st.st_ino == before.st_ino,
           "... rewritten in place (the same inode: open files see it)");
    TAP_OK(st.st_mtim.tv_nsec == 123456789, "... with its old times");
    TAP_OK(s_read_is(sub, "b.txt", "beta"), "a removed file is back");
    TAP_OK(fstatat(sub, "new.txt", &st, 0) < 0 && errno == ENOENT, "a new file is gone");
    TAP_OK(fstatat(live, "deep", &st, 0) < 0 && errno == ENOENT,
           "a new unwritable directory is gone with its contents");
    char target[64] = "";
    ssize_t n = readlinkat(live, "link", target, sizeof target - 1);
    TAP_OK(n > 0 && strcmp(target, "/etc/passwd") == 0, "a changed symlink points where it did");
    TAP_OK(fstatat(live, "fifo", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(st.st_mode),
           "an entry of another type is replaced by the saved one");
    TAP_OK(fstatat(live, "secret", &st, 0) == 0 && (st.st_mode & 07777) == 0, "modes are restored");
    /* a second restore from the same copy works the same */
    s_write(live, "a.txt", "again");
    cb_snap_tree_t r2 = {0};
    TAP_OK(cb_snap_tree_restore(&r2, store, live) == 0 && s_read_is(live, "a.txt", "alpha"),
           "the copy can be restored again");

    /* bounds: too deep a tree is refused, not walked */
    int bomb = s_dir("bomb"), bstore = s_dir("bstore");
    int d = dup(bomb);
    for (int i = 0; i < CB_SNAP_DEPTH_MAX + 4; i++) {
        (void) mkdirat(d, "d", 0700);
        int nd = openat(d, "d", O_RDONLY | O_DIRECTORY);
        close(d);
        d = nd;
    }
    close(d);
    cb_snap_tree_t b = {0};
    TAP_OK(cb_snap_tree_copy(&b, bomb, bstore) < 0 && b.err == ELOOP,
           "a tree deeper than %d levels is refused: %s", CB_SNAP_DEPTH_MAX, b.why);
    cb_snap_tree_t c = {0};
    TAP_EQ_INT(cb_snap_tree_clear(&c, bstore), 0, "a partial copy can be cleared");

    /* skip_suffix: top-level files so named are left out, deeper ones are not */
    int sk = s_dir("skip"), skstore = s_dir("skipstore");
    s_write(sk, "pages-1.img.zst", "packed");
    s_write(sk, "core-1.img", "core");
    (void) mkdirat(sk, "deep", 0700);
    int skd = openat(sk, "deep", O_RDONLY | O_DIRECTORY);
    s_write(skd, "x.zst", "kept");
    close(skd);
    cb_snap_tree_t k = {.skip_suffix = ".zst"};
    TAP_OK(cb_snap_tree_copy(&k, sk, skstore) == 0 &&
               fstatat(skstore, "pages-1.img.zst", &st, AT_SYMLINK_NOFOLLOW) < 0 &&
               s_read_is(skstore, "core-1.img", "core") &&
               fstatat(skstore, "deep/x.zst", &st, AT_SYMLINK_NOFOLLOW) == 0,
           "skip_suffix leaves out the top-level files so named, and only them");
    close(sk);
    close(skstore);

    if (geteuid() == 0) {
        pid_t p = fork();
        if (p == 0) {
            if (setgid(65534) < 0 || setuid(65534) < 0) _exit(99);
            _exit(s_as_owner());
        }
        int wst = 0;
        (void) waitpid(p, &wst, 0);
        TAP_OK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
               "without capabilities, the owner's mode-000 file and directory are copied and "
               "restored (%d checks failed)",
               WIFEXITED(wst) ? WEXITSTATUS(wst) : -1);
    } else {
        TAP_OK(s_as_owner() == 0, "the owner's mode-000 file and directory");
    }

    close(sub);
    close(live);
    close(store);
    close(bomb);
    close(bstore);
    s_rm_rf(s_root);
    TAP_DONE();
}
