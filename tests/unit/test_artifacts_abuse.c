/*
 * test_artifacts_abuse.c - every abuse the sandbox can try on the artifact
 * collector (symlinks, hard links, FIFOs, sockets, huge sparse files,
 * thousands of files, deep trees, files changing while read, a mount in the
 * way, a bad directory fd).  Each abuse runs with openat2 and with the
 * O_NOFOLLOW fallback.  Prints TAP.  An alarm() turns any hang into a failure.
 */
#include "artifacts_kit.h"

static char s_nm[256]; /* a formatted test name */

static bool s_hook_saw_huge;
static void s_hook_huge(cb_artifacts_hook_stage_t stage, const char *path, void *arg) {
    (void) stage;
    (void) arg;
    if (strcmp(path, "huge.csv") == 0) s_hook_saw_huge = true;
}

static void test_abuse(const char *mode) {
    char name[128];
    s_fresh();
    /* symlinks: to a host file, and as a directory component */
    symlinkat("/etc/passwd", s_dirfd, "passwd.txt");
    symlinkat("/etc", s_dirfd, "etc");
    symlinkat("/etc/hostname", s_dirfd, "hostname.txt");
    /* hard link to a file outside the workdir */
    char outside_file[128];
    snprintf(outside_file, sizeof outside_file, "%s/host-secret.txt", s_outside);
    int ofd = open(outside_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    (void) !write(ofd, "HOSTSECRET", 10);
    close(ofd);
    snprintf(name, sizeof name, "%s/hard.txt", s_root);
    bool have_link = link(outside_file, name) == 0;
    /* FIFO and socket with collectable names */
    mkfifoat(s_dirfd, "pipe.txt", 0644);
    int sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock.csv", s_root);
    bool have_sock = bind(sfd, (struct sockaddr *) &sa, sizeof sa) == 0;
    /* a huge sparse file */
    int hfd = openat(s_dirfd, "huge.csv", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    bool have_huge = hfd >= 0 && ftruncate(hfd, (off_t) 1 << 30) == 0;
    if (hfd >= 0) close(hfd);
    s_puts("ok.txt", "fine");

    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, true);
    s_hook_saw_huge = false;
    cb_artifacts_set_test_hook(a, s_hook_huge, NULL);
    alarm(T_FIFO_ALARM_S);
    json_t *b = s_collect(a, NULL);
    alarm(T_ALARM_S);
    TAP_OK(true, "%s: collect next to a FIFO returns (no hang)", mode);
    TAP_OK(s_nowhere(b, "root:") && s_nowhere(b, "HOSTSECRET"), "%s: no host file content anywhere",
           mode);
    TAP_EQ_STR(s_reason(b, "passwd.txt"), "symlink",
               NM("%s: symlink to /etc/passwd: notice, not followed", mode));
    TAP_EQ_STR(s_reason(b, "hostname.txt"), "symlink", NM("%s: second symlink: notice", mode));
    TAP_OK(s_find(b, "etc/passwd") == NULL && s_reason(b, "etc/passwd") == NULL,
           "%s: symlinked directory is not entered", mode);
    if (have_link)
        TAP_EQ_STR(s_reason(b, "hard.txt"), "hard_link",
                   NM("%s: hard link to an outside file refused", mode));
    else
        TAP_SKIP("cannot hard-link across these directories");
    TAP_EQ_STR(s_reason(b, "pipe.txt"), "not_regular", NM("%s: FIFO skipped with notice", mode));
    if (have_sock)
        TAP_EQ_STR(s_reason(b, "sock.csv"), "not_regular",
                   NM("%s: socket skipped with notice", mode));
    else
        TAP_SKIP("cannot bind a unix socket in the temp dir");
    if (have_huge) {
        TAP_EQ_STR(s_reason(b, "huge.csv"), "file_too_large",
                   NM("%s: 1 GiB sparse file skipped by size", mode));
        TAP_OK(!s_hook_saw_huge, "%s: ... without being opened", mode);
    } else {
        TAP_SKIP("cannot create a sparse file");
        TAP_SKIP("cannot create a sparse file");
    }
    TAP_EQ_STR(s_data(s_find(b, "ok.txt"), "text/plain"), "fine",
               NM("%s: the honest file still arrives", mode));
    json_decref(b);
    cb_artifacts_destroy(&a);
    close(sfd);

    /* The safe-open primitive itself. */
    int rfd = openat(s_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    errno = 0;
    int fd = cb_artifacts_fs_open_beneath(rfd, "etc/passwd", O_RDONLY);
    TAP_OK(fd < 0 && (errno == ELOOP || errno == ENOTDIR),
           "%s: open_beneath refuses a symlinked component (%s)", mode, strerror(errno));
    fd = cb_artifacts_fs_open_beneath(rfd, "passwd.txt", O_RDONLY);
    TAP_OK(fd < 0 && errno == ELOOP, "%s: open_beneath refuses a final symlink", mode);
    fd = cb_artifacts_fs_open_beneath(rfd, "../etc/passwd", O_RDONLY);
    TAP_OK(fd < 0 && errno == EINVAL, "%s: open_beneath refuses ..", mode);
    fd = cb_artifacts_fs_open_beneath(rfd, "/etc/passwd", O_RDONLY);
    TAP_OK(fd < 0 && errno == EINVAL, "%s: open_beneath refuses absolute paths", mode);
    fd = cb_artifacts_fs_open_beneath(rfd, "pipe.txt", O_RDONLY | O_NONBLOCK);
    TAP_OK(fd >= 0, "%s: open_beneath of a FIFO with O_NONBLOCK does not block", mode);
    if (fd >= 0) close(fd);
    close(rfd);
    unlink(outside_file);
}

/* ---- races via the test hook ------------------------------------------ */

typedef enum { R_GROW, R_SHRINK, R_REWRITE, R_SYMLINK, R_FIFO, R_HARDLINK } s_race_t;

static void s_hook_race(cb_artifacts_hook_stage_t stage, const char *path, void *arg) {
    s_race_t r = *(s_race_t *) arg;
    if (strcmp(path, "victim.txt") != 0) return;
    bool before_open = stage == CB_ARTIFACTS_HOOK_BEFORE_OPEN;
    if (r == R_GROW && !before_open) {
        int fd = openat(s_dirfd, "victim.txt", O_WRONLY | O_APPEND | O_CLOEXEC);
        (void) !write(fd, "MORE", 4);
        close(fd);
    } else if (r == R_SHRINK && !before_open) {
        int fd = openat(s_dirfd, "victim.txt", O_WRONLY | O_CLOEXEC);
        (void) !ftruncate(fd, 2);
        close(fd);
    } else if (r == R_REWRITE && !before_open) {
        s_sleep_tick();
        int fd = openat(s_dirfd, "victim.txt", O_WRONLY | O_CLOEXEC);
        (void) !write(fd, "XXXX", 4);
        close(fd);
    } else if (r == R_SYMLINK && before_open) {
        unlinkat(s_dirfd, "victim.txt", 0);
        symlinkat("/etc/passwd", s_dirfd, "victim.txt");
    } else if (r == R_FIFO && before_open) {
        unlinkat(s_dirfd, "victim.txt", 0);
        mkfifoat(s_dirfd, "victim.txt", 0644);
    } else if (r == R_HARDLINK && before_open) {
        char src[128];
        snprintf(src, sizeof src, "%s/host-secret.txt", s_outside);
        int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        (void) !write(fd, "HOSTSECRET", 10);
        close(fd);
        unlinkat(s_dirfd, "victim.txt", 0);
        (void) !linkat(AT_FDCWD, src, s_dirfd, "victim.txt", 0);
        unlink(src); /* the link in the workdir keeps it alive with nlink 1 */
    }
}

static void test_races(const char *mode) {
    static const struct {
        s_race_t race;
        const char *name;
        const char *reason;
    } cases[] = {
        {R_GROW, "grows between fstat and read", "changed_while_read"},
        {R_SHRINK, "shrinks between fstat and read", "changed_while_read"},
        {R_REWRITE, "rewritten in place between fstat and read", "changed_while_read"},
        {R_SYMLINK, "replaced by a symlink before open", "symlink"},
        {R_FIFO, "replaced by a FIFO before open", "not_regular"},
        {R_HARDLINK, "replaced by a link to an outside file before open", "changed_while_read"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_fresh();
        s_puts("victim.txt", "original content");
        cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
        s_race_t r = cases[i].race;
        cb_artifacts_set_test_hook(a, s_hook_race, &r);
        alarm(T_FIFO_ALARM_S);
        json_t *b = s_collect(a, NULL);
        alarm(T_ALARM_S);
        const char *reason = s_reason(b, "victim.txt");
        bool sym_or_changed = reason && (strcmp(reason, cases[i].reason) == 0 ||
                                         strcmp(reason, "changed_while_read") == 0);
        TAP_OK(s_find(b, "victim.txt") == NULL && sym_or_changed, "%s: file %s: skipped (%s)", mode,
               cases[i].name, reason ? reason : "no notice");
        TAP_OK(s_nowhere(b, "root:") && s_nowhere(b, "HOSTSECRET"), "%s: ... no host content",
               mode);
        json_decref(b);
        if (r == R_GROW) {
            cb_artifacts_set_test_hook(a, NULL, NULL);
            b = s_collect(a, NULL);
            TAP_EQ_STR(s_data(s_find(b, "victim.txt"), "text/plain"), "original contentMORE",
                       "... and returned whole next cell");
            json_decref(b);
        }
        cb_artifacts_destroy(&a);
    }
}

static void test_many_and_deep(void) {
    s_fresh();
    s_mkdir("many");
    for (int i = 0; i < T_MANY_FILES; i++) {
        char name[64];
        snprintf(name, sizeof name, "many/f%05d.txt", i);
        int fd = openat(s_dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) break;
        (void) !write(fd, "x", 1);
        close(fd);
    }
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *sum = NULL;
    json_t *b = s_collect(a, &sum);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
    TAP_EQ_INT(json_array_size(sum), CB_ARTIFACTS_DEFAULT_MAX_FILES, "20000 files: 50 sent");
    TAP_OK(s_reason(b, ".") == NULL, "scan_limit item is beyond the listed 50");
    size_t total = s_notice_total(b);
    TAP_OK(total == CB_ARTIFACTS_DEFAULT_MAX_ENTRIES - 1 - CB_ARTIFACTS_DEFAULT_MAX_FILES + 1,
           "notice counts every skipped file plus the scan limit (%zu)", total);
    json_t *last = json_array_get(b, json_array_size(b) - 1);
    const char *text = s_data(last, "text/plain");
    TAP_OK(text && strstr(text, "more (see the kernel log)") != NULL,
           "notice is bounded (... and N more)");
    char *dump = json_dumps(b, JSON_COMPACT);
    TAP_OK(dump && strlen(dump) < (1u << 20), "whole reply stays small (%zu bytes)",
           dump ? strlen(dump) : 0);
    free(dump);
    TAP_OK(secs < 20.0, "bounded scan is quick (%.2fs)", secs);
    json_decref(b);
    json_decref(sum);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 1, "next cell: only the scan-limit notice");
    TAP_EQ_STR(json_string_value(json_object_get(json_array_get(s_notice(b), 0), "reason")),
               "scan_limit", "... reason scan_limit");
    json_decref(b);
    cb_artifacts_destroy(&a);

    s_fresh();
    char path[1024] = "";
    for (int i = 0; i < T_DEEP; i++) {
        size_t used = strlen(path);
        snprintf(path + used, sizeof path - used, "%s", i ? "/d" : "d");
        s_mkdir(path);
        char f[1100];
        snprintf(f, sizeof f, "%s/level%02d.txt", path, i + 1);
        s_puts(f, "deep");
    }
    a = s_new(CB_ARTIFACTS_ALL, false);
    b = s_collect(a, &sum);
    TAP_EQ_INT(json_array_size(sum), CB_ARTIFACTS_DEFAULT_MAX_DEPTH,
               "deep tree: files in the first max_depth levels are sent");
    json_t *sk = s_notice(b);
    TAP_OK(json_array_size(sk) == 1 &&
               strcmp(json_string_value(json_object_get(json_array_get(sk, 0), "reason")),
                      "too_deep") == 0,
           "... one too_deep notice for the directory below");
    json_decref(b);
    json_decref(sum);
    cb_artifacts_destroy(&a);
}

/* A mount inside the workdir is not crossed (RESOLVE_NO_XDEV, or the device
 * check of the fallback).  Needs a private mount namespace: done in a child,
 * which exits 0 (pass), 1 (fail) or T_SKIP (cannot set up). */
enum { T_SKIP = 77 };

static int s_mount_child(bool fallback) {
    if (unshare(CLONE_NEWNS) < 0) {
        /* Unprivileged: a user namespace grants mounting (if the host allows it). */
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return T_SKIP;
        char map[64];
        int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            (void) !write(fd, "deny", 4);
            close(fd);
        }
        snprintf(map, sizeof map, "0 %u 1", (unsigned) uid);
        fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) < 0) return T_SKIP;
        close(fd);
        snprintf(map, sizeof map, "0 %u 1", (unsigned) gid);
        fd = open("/proc/self/gid_map", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) < 0) return T_SKIP;
        close(fd);
    }
    if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0) return T_SKIP;
    s_mkdir("mnt");
    char where[128];
    snprintf(where, sizeof where, "%s/mnt", s_root);
    if (mount("tmpfs", where, "tmpfs", 0, "size=1m") < 0) return T_SKIP;
    close(s_dirfd); /* the old fd still sees the parent namespace's mounts */
    s_dirfd = open(s_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (s_dirfd < 0) return 1;
    s_puts("mnt/inside.txt", "on another fs");
    s_puts("top.txt", "top");
    cb_artifacts_force_fallback(fallback);
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *b = s_collect(a, NULL);
    const char *reason = s_reason(b, "mnt");
    bool ok = s_find(b, "mnt/inside.txt") == NULL && s_find(b, "top.txt") != NULL && reason &&
              strcmp(reason, "mount_point") == 0;
    json_decref(b);
    cb_artifacts_destroy(&a);
    umount2(where, MNT_DETACH);
    close(s_dirfd);
    return ok ? 0 : 1;
}

static void test_mount(void) {
    for (int fallback = 0; fallback < 2; fallback++) {
        s_fresh();
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) _exit(s_mount_child(fallback));
        int status = 0;
        waitpid(pid, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code == T_SKIP)
            TAP_SKIP("mount point test needs a private mount namespace (CAP_SYS_ADMIN or user "
                     "namespaces)");
        else
            TAP_OK(code == 0, "%s: a mount point inside the workdir is not crossed",
                   fallback ? "fallback" : "openat2");
    }
}

static void test_bad_dirfd(void) {
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *sum = (json_t *) 1;
    json_t *b = cb_artifacts_collect(a, -1, &sum);
    TAP_OK(b == NULL && sum == NULL, "bad dirfd: NULL and NULL summary");
    cb_artifacts_destroy(&a);
}


int main(void) {
    if (s_kit_start() < 0) return 2;

    test_abuse("openat2");
    test_races("openat2");
    cb_artifacts_force_fallback(true);
    test_abuse("fallback");
    test_races("fallback");
    cb_artifacts_force_fallback(false);
    test_many_and_deep();
    test_mount();
    test_bad_dirfd();

    s_kit_end();
    TAP_DONE();
}
