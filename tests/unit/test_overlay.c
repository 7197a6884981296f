/*
 * test_overlay.c - the --workdir-source hiding walk (isolate/overlay.c) on
 * plain directories: which entries get a whiteout (dotfiles at any depth,
 * fifos, sockets; never regular files, symlinks or plain directories),
 * that upper directories are made only on the way to something hidden and
 * keep the lower's mode, and what happens past the depth and entry bounds
 * (a subdirectory hidden whole, nothing made inside it; a top level over
 * the bound refused with E2BIG).  When this process may mount overlayfs (a
 * user namespace, or root), the merged view is checked too: hidden names
 * cannot be listed, opened or stat'ed, and writes never reach the lower.
 */
#include "isolate/overlay.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/workdir.h"

static char s_root[] = "/dev/shm/cb-test-overlay-XXXXXX"; /* tmpfs: 50 000 files fast */

static void s_path(char *buf, size_t n, const char *rel) { snprintf(buf, n, "%s/%s", s_root, rel); }

static void s_mkdir(const char *rel, mode_t mode) {
    char p[512];
    s_path(p, sizeof p, rel);
    if (mkdir(p, mode) < 0) perror(p);
    chmod(p, mode);
}

static void s_file(const char *rel, const char *content) {
    char p[512];
    s_path(p, sizeof p, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, content, strlen(content)) < 0) perror("write");
        close(fd);
    }
}

/* 1 whiteout, 0 absent, 2 a directory, 3 something else */
static int s_upper_kind(const char *rel) {
    char p[512];
    s_path(p, sizeof p, rel);
    struct stat st;
    if (lstat(p, &st) < 0) return 0;
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) return 1;
    if (S_ISDIR(st.st_mode)) return 2;
    return 3;
}

static int s_open_dir(const char *rel) {
    char p[512];
    s_path(p, sizeof p, rel);
    return open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void s_many(const char *rel, int n) {
    s_mkdir(rel, 0755);
    char p[512];
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/%s/f%d", s_root, rel, i);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
    }
}

/* In a child with its own mount namespace (and user namespace unless
 * root): a real overlay of lower with the upper the walk prepared.
 * Returns the child's exit code: 0 all checks passed, 77 overlay
 * unavailable, else the number of the failed check. */
static int s_overlay_child(void) {
    pid_t pid = fork();
    if (pid == 0) {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWNS | (uid == 0 ? 0 : CLONE_NEWUSER)) < 0) _exit(77);
        if (uid != 0) { /* be root in the new namespace, as our own id outside */
            char m[64];
            int fd = open("/proc/self/setgroups", O_WRONLY);
            if (fd < 0 || write(fd, "deny", 4) != 4) _exit(77);
            close(fd);
            snprintf(m, sizeof m, "0 %u 1", (unsigned) uid);
            fd = open("/proc/self/uid_map", O_WRONLY);
            if (fd < 0 || write(fd, m, strlen(m)) < 0) _exit(77);
            close(fd);
            snprintf(m, sizeof m, "0 %u 1", (unsigned) gid);
            fd = open("/proc/self/gid_map", O_WRONLY);
            if (fd < 0 || write(fd, m, strlen(m)) < 0) _exit(77);
            close(fd);
        }
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) _exit(77);
        char lower[512], upper[512], work[512], merged[512], opts[2048];
        s_path(lower, sizeof lower, "lower");
        s_path(upper, sizeof upper, "upper");
        s_path(work, sizeof work, "work");
        s_path(merged, sizeof merged, "merged");
        snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lower, upper,
                 work);
        if (mount("overlay", merged, "overlay", 0, opts) < 0) _exit(77);
        char p[600];
        struct stat st;
        snprintf(p, sizeof p, "%s/.env", merged);
        if (open(p, O_RDONLY) >= 0 || errno != ENOENT) _exit(1);
        snprintf(p, sizeof p, "%s/data/.secret", merged);
        if (stat(p, &st) == 0 || errno != ENOENT) _exit(2);
        snprintf(p, sizeof p, "%s/data/.git/config", merged);
        if (open(p, O_RDONLY) >= 0) _exit(3);
        snprintf(p, sizeof p, "%s/sub/link-to-env", merged); /* -> ../.env, resolved here */
        if (open(p, O_RDONLY) >= 0) _exit(4);
        snprintf(p, sizeof p, "%s/pipe", merged);
        if (lstat(p, &st) == 0) _exit(5);
        snprintf(p, sizeof p, "%s/data/x.csv", merged);
        int fd = open(p, O_RDONLY);
        char buf[16] = "";
        if (fd < 0 || read(fd, buf, sizeof buf - 1) != 4 || strcmp(buf, "1,2\n") != 0) _exit(6);
        close(fd);
        fd = open(p, O_WRONLY | O_APPEND); /* copied up: the lower stays */
        if (fd < 0 || write(fd, "3,4\n", 4) != 4) _exit(7);
        close(fd);
        snprintf(p, sizeof p, "%s/data/new.txt", merged);
        fd = open(p, O_WRONLY | O_CREAT, 0644);
        if (fd < 0) _exit(8);
        close(fd);
        snprintf(p, sizeof p, "%s/a.txt", merged);
        if (unlink(p) < 0) _exit(9);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

int main(void) {
    if (mkdtemp(s_root) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    s_mkdir("lower", 0755);
    s_mkdir("upper", 0755);
    s_mkdir("work", 0755);
    s_mkdir("merged", 0755);
    s_file("lower/a.txt", "a\n");
    s_file("lower/.env", "SECRET=1\n");
    s_mkdir("lower/data", 0750);
    s_file("lower/data/x.csv", "1,2\n");
    s_file("lower/data/.secret", "s\n");
    s_mkdir("lower/data/.git", 0755);
    s_file("lower/data/.git/config", "[core]\n");
    s_mkdir("lower/sub", 0755);
    s_mkdir("lower/sub/deep", 0711);
    s_file("lower/sub/deep/.hidden", "h\n");
    s_mkdir("lower/plain", 0755);
    s_file("lower/plain/p.txt", "p\n");
    char p[512];
    s_path(p, sizeof p, "lower/sub/link-to-env");
    TAP_EQ_INT(symlink("../.env", p), 0, "symlink planted");
    s_path(p, sizeof p, "lower/pipe");
    TAP_EQ_INT(mkfifo(p, 0644), 0, "fifo planted");
    int sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/lower/sock", s_root);
    TAP_EQ_INT(bind(sfd, (struct sockaddr *) &sa, sizeof sa), 0, "unix socket planted");

    int lfd = s_open_dir("lower"), ufd = s_open_dir("upper");
    cb_overlay_stats_t st = {0};
    TAP_EQ_INT(cb_overlay_hide(lfd, ufd, getuid(), getgid(), &st), 0, "walk ok");
    TAP_EQ_INT(s_upper_kind("upper/.env"), 1, ".env whited out");
    TAP_EQ_INT(s_upper_kind("upper/data/.secret"), 1, "data/.secret whited out");
    TAP_EQ_INT(s_upper_kind("upper/data/.git"), 1, "a dot directory whited out whole");
    TAP_EQ_INT(s_upper_kind("upper/data/.git/config"), 0, "... and not descended");
    TAP_EQ_INT(s_upper_kind("upper/sub/deep/.hidden"), 1, "a dotfile two levels down");
    TAP_EQ_INT(s_upper_kind("upper/pipe"), 1, "fifo whited out");
    TAP_EQ_INT(s_upper_kind("upper/sock"), 1, "socket whited out");
    TAP_EQ_INT(s_upper_kind("upper/a.txt"), 0, "regular file left alone");
    TAP_EQ_INT(s_upper_kind("upper/data/x.csv"), 0, "regular file below left alone");
    TAP_EQ_INT(s_upper_kind("upper/sub/link-to-env"), 0, "symlink left alone");
    TAP_EQ_INT(s_upper_kind("upper/plain"), 0, "no upper dir where nothing is hidden");
    TAP_EQ_INT(s_upper_kind("upper/data"), 2, "upper dir on the way to a whiteout");
    struct stat ds;
    s_path(p, sizeof p, "upper/sub/deep");
    TAP_OK(stat(p, &ds) == 0 && (ds.st_mode & 07777) == 0711 && ds.st_uid == getuid(),
           "upper dir keeps the lower's mode (0%o) and has our owner", ds.st_mode & 07777);
    TAP_EQ_INT(st.dotfiles, 4, "4 dot entries hidden");
    TAP_EQ_INT(st.specials, 2, "2 special files hidden");
    TAP_EQ_INT(st.dirs_cut, 0, "no directory cut");
    TAP_EQ_INT(st.scanned, 14, "every entry counted once");

    int rc = s_overlay_child();
    if (rc == 77)
        TAP_SKIP("overlayfs cannot be mounted here (no user namespace / not root)");
    else
        TAP_EQ_INT(rc, 0, "merged view: hidden names absent by every path, writes stay above");
    s_path(p, sizeof p, "lower/data/x.csv");
    char buf[32] = "";
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    TAP_OK(fd >= 0 && read(fd, buf, sizeof buf - 1) == 4 && strcmp(buf, "1,2\n") == 0,
           "the lower file is unchanged after the write through the overlay");
    if (fd >= 0) close(fd);
    s_path(p, sizeof p, "lower/a.txt");
    TAP_OK(access(p, F_OK) == 0, "the lower file is still there after unlink through the overlay");
    s_path(p, sizeof p, "lower/data/new.txt");
    TAP_OK(access(p, F_OK) != 0, "a new file never reaches the lower");
    close(lfd);
    close(ufd);
    close(sfd);

    /* depth bound: a chain deeper than CB_OVERLAY_DEPTH_MAX */
    char rel[4096] = "deep";
    s_mkdir("deep", 0755);
    s_mkdir("deepup", 0755);
    for (int i = 0; i < CB_OVERLAY_DEPTH_MAX + 2; i++) {
        size_t l = strlen(rel);
        snprintf(rel + l, sizeof rel - l, "/d");
        s_mkdir(rel, 0755);
    }
    char frel[4200];
    snprintf(frel, sizeof frel, "%s/.bottom", rel);
    s_file(frel, "b");
    lfd = s_open_dir("deep");
    ufd = s_open_dir("deepup");
    memset(&st, 0, sizeof st);
    TAP_EQ_INT(cb_overlay_hide(lfd, ufd, getuid(), getgid(), &st), 0, "deep walk ok");
    TAP_EQ_INT(st.dirs_cut, 1, "the directory past the depth bound is hidden whole");
    TAP_EQ_INT(st.dotfiles, 0, "nothing below it was examined");
    close(lfd);
    close(ufd);

    /* entry bound: a subdirectory that does not fit is hidden whole, with
     * nothing made inside it; the same directory as the top is refused */
    s_mkdir("big", 0755);
    s_mkdir("bigup", 0755);
    s_file("big/.top-secret", "t");
    s_many("big/huge", CB_OVERLAY_SCAN_MAX + 1);
    s_file("big/huge/.inside", "i");
    lfd = s_open_dir("big");
    ufd = s_open_dir("bigup");
    memset(&st, 0, sizeof st);
    TAP_EQ_INT(cb_overlay_hide(lfd, ufd, getuid(), getgid(), &st), 0, "big walk ok");
    TAP_EQ_INT(s_upper_kind("bigup/huge"), 1, "the directory over the budget is whited out");
    TAP_EQ_INT(s_upper_kind("bigup/.top-secret"), 1, "its sibling dotfile still hidden");
    TAP_EQ_INT(st.dirs_cut, 1, "counted as cut");
    close(lfd);
    close(ufd);
    lfd = s_open_dir("big/huge");
    s_mkdir("hugeup", 0755);
    ufd = s_open_dir("hugeup");
    errno = 0;
    TAP_OK(cb_overlay_hide(lfd, ufd, getuid(), getgid(), &st) == -1 && errno == E2BIG,
           "a top level over %d entries is refused (E2BIG)", CB_OVERLAY_SCAN_MAX);
    TAP_EQ_INT(s_upper_kind("hugeup/.inside"), 0, "and nothing was made for it");
    close(lfd);
    close(ufd);

    cb_workdir_remove(s_root);
    TAP_DONE();
}
