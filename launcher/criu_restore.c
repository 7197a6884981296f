/*
 * criu_restore.c - the launcher's restore of a parked copy's CRIU image into
 * a new --pausable sandbox (see criu_restore.h).
 */
#include "launcher/criu_restore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/landlock.h"
#include "isolate/util.h"
#include "launcher/criu_img.h"

#define S_FDS_TEXT_MAX (CB_CRIU_FDS_MAX * (CB_CRIU_LINK_MAX + 16)) /* bytes of fds.txt */
#define S_WHY_MAX      256                                         /* the helper's reason */
#define S_NS_LAST_PID  "/proc/sys/kernel/ns_last_pid" /* opened on the host's /proc */

int cb_criu_read_fds(int imgfd, int *fds, char (*names)[CB_CRIU_LINK_MAX], size_t max, char *why,
                     size_t why_len) {
    char text[S_FDS_TEXT_MAX + 1];
    cb_autofd int f = openat(imgfd, CB_CRIU_FDS, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = f < 0 ? -1 : read(f, text, sizeof text);
    if (n < 0 || (size_t) n > S_FDS_TEXT_MAX) {
        cb_fmt_why(why, why_len, "the image's %s: %s", CB_CRIU_FDS,
                   n < 0 ? strerror(errno) : "too long");
        return -1;
    }
    text[n] = '\0';
    size_t count = 0;
    for (char *line = text, *next; *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next == NULL) {
            cb_fmt_why(why, why_len, "the image's %s: an unfinished line", CB_CRIU_FDS);
            return -1;
        }
        *next++ = '\0';
        int fd, used = 0;
        char kind[8];
        unsigned long ino;
        if (count == max || sscanf(line, "%d %7[a-z]:[%lu]%n", &fd, kind, &ino, &used) != 3 ||
            line[used] != '\0' || fd < 0 || fd > CB_CRIU_FD_MAX ||
            (strcmp(kind, "pipe") != 0 && strcmp(kind, "socket") != 0)) {
            cb_fmt_why(why, why_len,
                       "the image's %s: line %zu is not \"FD pipe:[N]\" or "
                       "\"FD socket:[N]\" (at most %zu)",
                       CB_CRIU_FDS, count + 1, max);
            return -1;
        }
        fds[count] = fd;
        (void) snprintf(names[count], CB_CRIU_LINK_MAX, "%s:[%lu]", kind, ino);
        count++;
    }
    return (int) count;
}

int cb_criu_restore_argv(const cb_criu_restore_t *r, cb_tier_argv_t *a) {
    const char *criu = cb_criu_path();
    a->n = 0;
    if (r->n_inherit > CB_CRIU_FDS_MAX ||
        cb_tier_argv_add(a, "%s", criu ? criu : CB_CRIU_DEFAULT) < 0 ||
        cb_tier_argv_add(a, "restore") < 0 || cb_tier_argv_add(a, "-D") < 0 ||
        cb_tier_argv_add(a, "/proc/self/fd/%d", r->imgfd) < 0 || cb_tier_argv_add(a, "-W") < 0 ||
        cb_tier_argv_add(a, "/proc/self/fd/%d", r->workfd) < 0 || cb_tier_argv_add(a, "-o") < 0 ||
        cb_tier_argv_add(a, "%s", CB_CRIU_RESTORE_LOG) < 0 ||
        cb_tier_argv_add(a, "--restore-detached") < 0 ||
        cb_tier_argv_add(a, "--manage-cgroups=ignore") < 0 ||
        cb_tier_argv_add(a, "--join-ns") < 0 ||
        cb_tier_argv_add(a, "user:/proc/self/fd/%d,0,0", CB_CRIU_USERNS_FD) < 0)
        return -1;
    for (size_t i = 0; i < r->n_inherit; i++)
        if (cb_tier_argv_add(a, "--inherit-fd") < 0 ||
            cb_tier_argv_add(a, "fd[%d]:%s", CB_CRIU_INHERIT_FD0 + (int) i, r->inherit[i].name) < 0)
            return -1;
    return 0;
}

/* criu itself, in the sandbox's pid namespace: its descriptors where the
 * command line names them, no_new_privs, the Landlock domain, exec. */
__attribute__((noreturn)) static void s_criu(const cb_criu_restore_t *r, int userns, int criu_fd,
                                             int null, int last_pid, long max_pid,
                                             char *const *argv) {
    /* the pids criu's own helpers take come after the image's, which criu
     * gives its tasks back (criu 4 forks more helpers in the namespace than 3
     * did: one of them took the copy's pid).  ns_last_pid is the writer's
     * pid namespace's, this one's */
    char v[24];
    int n = max_pid > 0 ? snprintf(v, sizeof v, "%ld", max_pid) : 0;
    if (n > 0 && last_pid >= 0 && write(last_pid, v, (size_t) n) != n) _exit(125);
    /* every source out of the targets' way first (one may sit on another's target) */
    int moved[CB_CRIU_FDS_MAX], u = fcntl(userns, F_DUPFD_CLOEXEC, CB_CRIU_SCRATCH_FD0);
    for (size_t i = 0; i < r->n_inherit; i++)
        if ((moved[i] = fcntl(r->inherit[i].fd, F_DUPFD_CLOEXEC, CB_CRIU_SCRATCH_FD0)) < 0)
            _exit(127);
    if (u < 0 || dup2(u, CB_CRIU_USERNS_FD) < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
        dup2(null, 2) < 0)
        _exit(127);
    for (size_t i = 0; i < r->n_inherit; i++)
        if (dup2(moved[i], CB_CRIU_INHERIT_FD0 + (int) i) < 0) _exit(127);
    if (fcntl(r->imgfd, F_SETFD, 0) < 0 || fcntl(r->workfd, F_SETFD, 0) < 0) _exit(127);
    /* the work directory is named by its fd: a path of the host is not there */
    char work[32];
    (void) snprintf(work, sizeof work, "/proc/self/fd/%d", r->workfd);
    const char *dirs[CB_CRIU_LL_MAX + 2];
    size_t nd = 0;
    for (size_t i = 0; r->rw_dirs != NULL && r->rw_dirs[i] != NULL && nd < CB_CRIU_LL_MAX; i++)
        dirs[nd++] = r->rw_dirs[i];
    dirs[nd++] = work;
    dirs[nd] = NULL;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        cb_landlock_apply_pausable(cb_landlock_abi(), dirs, r->rw_files) < 0 ||
        cb_criu_real_ids(r->uid, r->gid) < 0)
        _exit(126);
    fexecve(criu_fd, argv, cb_criu_env);
    _exit(127);
}

/* The helper: the sandbox's cgroup and namespaces, the feature cache, criu. */
__attribute__((noreturn)) static void s_helper(const cb_criu_restore_t *r, const int *ns,
                                               int userns, int kdat, int criu_fd, int null,
                                               int last_pid, char *const *argv, int rep) {
    char why[S_WHY_MAX], pid[24];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long) getpid());
    for (int i = 0; i < CB_CRIU_CGROUP_FDS; i++)
        if (r->cgroup_procs[i] >= 0 && write(r->cgroup_procs[i], pid, (size_t) n) != n) {
            cb_fmt_why(why, sizeof why, "joining the sandbox's cgroup: %s", strerror(errno));
            goto fail;
        }
    if (cb_criu_join_ns(ns, why, sizeof why) < 0 || cb_criu_run_cache(kdat, why, sizeof why) < 0)
        goto fail;
    pid_t c = fork();
    if (c == 0) s_criu(r, userns, criu_fd, null, last_pid, cb_criu_img_max_pid(r->imgfd), argv);
    cb_criu_helper_end(c, "restore", rep);
fail:
    cb_criu_helper_fail(rep, why);
}

int cb_criu_restore(const cb_criu_restore_t *r, char *why, size_t why_len) {
    why[0] = '\0';
    int ns[CB_CRIU_NS], userns = -1, kdat = -1, criu_fd = -1, null = -1, rep[2] = {-1, -1};
    int last_pid = -1;
    int rc = -1;
    static cb_tier_argv_t a; /* large: off the stack */
    for (int i = 0; i < CB_CRIU_NS; i++)
        ns[i] = -1;
    if (r->imgfd < 3 || r->imgfd >= CB_CRIU_USERNS_FD || r->workfd < 3 ||
        r->workfd >= CB_CRIU_USERNS_FD) { /* criu names them by number, below the moved ones */
        cb_fmt_why(why, why_len, "the image's and work directory's fds must be 3 to %d",
                   CB_CRIU_USERNS_FD - 1);
        return -1;
    }
    const char *criu = cb_criu_path();
    if (criu == NULL) {
        cb_fmt_why(why, why_len, "criu is not installed (apt-get install criu)");
        return -1;
    }
    if (cb_criu_restore_argv(r, &a) < 0) {
        cb_fmt_why(why, why_len, "criu's command line does not fit");
        return -1;
    }
    char upath[64];
    (void) snprintf(upath, sizeof upath, "/proc/%ld/ns/user", (long) r->init);
    if ((kdat = cb_criu_kdat(why, why_len)) < 0 || cb_criu_open_ns(r->init, ns, why, why_len) < 0)
        goto out;
    if ((userns = open(upath, O_RDONLY | O_CLOEXEC)) < 0) {
        cb_fmt_why(why, why_len, "the sandbox's user namespace: %s", strerror(errno));
        goto out;
    }
    if ((last_pid = open(S_NS_LAST_PID, O_WRONLY | O_CLOEXEC)) < 0) {
        cb_fmt_why(why, why_len, "%s: %s", S_NS_LAST_PID, strerror(errno));
        goto out;
    }
    if (cb_criu_prepare(criu, &criu_fd, &null, rep, why, why_len) < 0) goto out;
    pid_t h = fork();
    if (h == 0) {
        close(rep[0]);
        s_helper(r, ns, userns, kdat, criu_fd, null, last_pid, a.argv, rep[1]);
    }
    close(rep[1]);
    rep[1] = -1;
    if (h < 0) {
        cb_fmt_why(why, why_len, "fork: %s", strerror(errno));
        goto out;
    }
    rc = cb_criu_helper_result(h, rep[0], r->workfd, CB_CRIU_RESTORE_LOG, "restore", why, why_len);
out:
    cb_criu_close_ns(ns);
    int fds[] = {userns, kdat, criu_fd, null, rep[0], rep[1], last_pid};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    return rc;
}
