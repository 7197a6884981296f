/*
 * criu_dump.c - the launcher's dump of a --pausable sandbox's parked copy
 * with CRIU (see criu_dump.h).
 */
#include "launcher/criu_dump.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isolate/util.h"
#include "tiers/tier_impl.h"

#define S_STATUS_MAX   8192 /* bytes of /proc/PID/status read */
#define S_LINK_MAX     64   /* bytes of an fd's link we look at ("socket:[N]") */
#define S_RUN          "/run"
#define S_NULL         "/dev/null"
#define S_WHY_MAX      256 /* bytes of the helper's reason */
#define S_VERSION_OUT_MAX    256  /* bytes of criu --version read */
#define S_VERSION_TIMEOUT_MS 5000 /* criu --version longer than this is killed */
#define S_USABLE_WHY_MAX     400  /* bytes of why criu cannot dump here */
#define S_LOG_NONFATAL       "Can't setup RLIMIT_NOFILE for self" /* an error criu goes on after */

/* Debian's criu, and where an administrator puts a newer one: on a kernel
 * Debian's cannot dump on, scripts/criu.sh puts Debian 13's there */
static const char *const s_criu_dirs[] = {"/usr/sbin", "/sbin", NULL};
static const char *const s_criu_newer_dirs[] = {"/usr/local/sbin", NULL};

/* the namespaces criu runs in, in the order it joins them: the mount
 * namespace last (the paths after it are the sandbox's), never the user one */
static const struct {
    const char *name;
    int type;
} s_ns[] = {{"ipc", CLONE_NEWIPC},       {"uts", CLONE_NEWUTS}, {"net", CLONE_NEWNET},
            {"cgroup", CLONE_NEWCGROUP}, {"pid", CLONE_NEWPID}, {"mnt", CLONE_NEWNS}};
#define S_N_NS   (sizeof s_ns / sizeof s_ns[0])
#define S_NS_PID 4 /* s_ns[S_NS_PID] is the pid namespace */

static int s_criu_version(const char *criu);

/* Whether criu v (X * 100 + Y, -1 unknown) can dump on the running kernel. */
static bool s_version_fits(int v) {
    struct utsname u;
    int kmaj = 0, kmin = 0;
    if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &kmaj, &kmin) != 2) kmaj = kmin = 0;
    return v < 0 || v >= CB_CRIU_VDSO_FIXED || kmaj * 100 + kmin < CB_CRIU_VDSO_KERNEL;
}

/* The criu the launcher runs, chosen once per launcher: Debian's where it
 * fits the kernel, else a newer one of the administrator's, else Debian's
 * (its refusal says why); its version asked once (-1 unknown). */
static struct {
    int known; /* 1 found, -1 none, 0 not chosen yet */
    int version;
    char path[CB_PATH_MAX];
} s_criu;

const char *cb_criu_path(void) {
    if (s_criu.known == 0) {
        char newer[CB_PATH_MAX];
        bool have = cb_tier_find_program(s_criu_dirs, "criu", s_criu.path, sizeof s_criu.path) == 0;
        s_criu.version = have ? s_criu_version(s_criu.path) : -1;
        int v;
        if ((!have || !s_version_fits(s_criu.version)) &&
            cb_tier_find_program(s_criu_newer_dirs, "criu", newer, sizeof newer) == 0 &&
            s_version_fits(v = s_criu_version(newer))) {
            (void) snprintf(s_criu.path, sizeof s_criu.path, "%s", newer); /* same size */
            s_criu.version = v;
            have = true;
        }
        s_criu.known = have ? 1 : -1;
    }
    return s_criu.known > 0 ? s_criu.path : NULL;
}

/* The first "X.Y" after "Version: " in criu's --version output, as X * 100 + Y. */
static int s_criu_version(const char *criu) {
    char *argv[] = {(char *) criu, (char *) "--version", NULL};
    char out[S_VERSION_OUT_MAX];
    if (cb_tier_output(criu, argv, cb_criu_env, out, sizeof out, S_VERSION_TIMEOUT_MS) < 0)
        return -1;
    const char *v = strstr(out, "Version: ");
    int major = 0, minor = 0;
    if (v == NULL || sscanf(v + 9, "%d.%d", &major, &minor) != 2) return -1;
    return major * 100 + minor;
}

static int s_usable(char *why, size_t why_len);

int cb_criu_usable(char *why, size_t why_len) {
    /* the answer is the host's: asked of criu once per launcher */
    static int s_known = 0; /* 1 usable, -1 not (s_why says why), 0 not asked yet */
    static char s_why[S_USABLE_WHY_MAX];
    if (s_known == 0) s_known = s_usable(s_why, sizeof s_why);
    if (s_known < 0) cb_fmt_why(why, why_len, "%s", s_why);
    return s_known < 0 ? -1 : 0;
}

static int s_usable(char *why, size_t why_len) {
    const char *criu = cb_criu_path();
    if (criu == NULL) {
        cb_fmt_why(why, why_len, "criu is not installed on this host (apt-get install criu)");
        return -1;
    }
    int v = s_criu.version; /* cb_criu_path asked it */
    if (!s_version_fits(v)) {
        struct utsname u;
        if (uname(&u) < 0) (void) snprintf(u.release, sizeof u.release, "?");
        cb_fmt_why(why, why_len,
                   "this host's criu %d.%d cannot dump on its kernel %.32s: criu before 4.1 "
                   "fails on kernels from 6.13 on ('Unexpected rt vDSO area bounds', criu#2532; "
                   "Debian 12's own 6.1 kernel works); `sh scripts/criu.sh` installs Debian "
                   "13's criu beside it, or use --isolation gvisor to pause here",
                   v / 100, v % 100, u.release);
        return -1;
    }
    return 1;
}

/* ---- the target ----------------------------------------------------------------------- */

/* The real id of a /proc/PID/status "Uid:" or "Gid:" line when its real,
 * effective and saved ids agree, else -1. */
static long s_one_id(const char *status, const char *key) {
    const char *line = strstr(status, key);
    long r = -1, e = -2, sv = -3;
    if (line == NULL || sscanf(line + strlen(key), "%ld %ld %ld", &r, &e, &sv) != 3) return -1;
    return r == e && e == sv && r >= 0 ? r : -1;
}

/* From one read of /proc/PID/status: t's ids (-1 when they differ) and its
 * pid in its own namespace (the last number of the NSpid line). */
static int s_status(pid_t pid, cb_criu_target_t *t, char *why, size_t why_len) {
    char path[64], buf[S_STATUS_MAX];
    (void) snprintf(path, sizeof path, "/proc/%ld/status", (long) pid);
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (n <= 0) {
        cb_fmt_why(why, why_len, "process %ld: %s", (long) pid,
                   n < 0 ? strerror(errno) : "empty status");
        return -1;
    }
    buf[n] = '\0';
    long u = s_one_id(buf, "\nUid:"), g = s_one_id(buf, "\nGid:");
    t->uid = u < 0 || g < 0 ? (uid_t) -1 : (uid_t) u;
    t->gid = u < 0 || g < 0 ? (gid_t) -1 : (gid_t) g;
    char *line = strstr(buf, "\nNSpid:");
    char *end = line ? strchr(line + 1, '\n') : NULL;
    if (line == NULL || end == NULL) {
        cb_fmt_why(why, why_len, "process %ld: no NSpid in its status", (long) pid);
        return -1;
    }
    *end = '\0';
    char *last = strrchr(line, '\t');
    char *sp = strrchr(line, ' ');
    if (sp != NULL && (last == NULL || sp > last)) last = sp;
    long v = last ? strtol(last + 1, &end, 10) : 0;
    if (last == NULL || *end != '\0' || v <= 0) {
        cb_fmt_why(why, why_len, "process %ld: unreadable NSpid", (long) pid);
        return -1;
    }
    t->vpid = (pid_t) v;
    return 0;
}

static bool s_has_sys_resource(void) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) < 0) return true; /* unknown: leave the ids alone */
    return (d[CAP_SYS_RESOURCE / 32].effective & (1u << (CAP_SYS_RESOURCE % 32))) != 0;
}

int cb_criu_real_ids(uid_t uid, gid_t gid) {
    if (uid == (uid_t) -1 || gid == (gid_t) -1 || s_has_sys_resource()) return 0;
    if (setresgid(gid, (gid_t) -1, (gid_t) -1) < 0) return -1;
    return setresuid(uid, (uid_t) -1, (uid_t) -1);
}

int cb_criu_target(pid_t host_pid, cb_criu_target_t *t, char *why, size_t why_len) {
    memset(t, 0, sizeof *t);
    if (s_status(host_pid, t, why, why_len) < 0) return -1;
    char path[64];
    (void) snprintf(path, sizeof path, "/proc/%ld/fd", (long) host_pid);
    cb_autofd int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd < 0 ? NULL : cb_opendir_at(dfd);
    if (d == NULL) {
        cb_fmt_why(why, why_len, "process %ld's descriptors: %s", (long) host_pid, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char link[S_LINK_MAX];
        ssize_t n = readlinkat(dfd, e->d_name, link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = '\0';
        unsigned long ino;
        char tail;
        bool sock = sscanf(link, "socket:[%lu%c", &ino, &tail) == 2 && tail == ']';
        bool pipe = !sock && sscanf(link, "pipe:[%lu%c", &ino, &tail) == 2 && tail == ']';
        if (!sock && !pipe) continue;
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (t->n_fds == CB_CRIU_FDS_MAX || (size_t) n >= CB_CRIU_LINK_MAX || *end != '\0') {
            cb_fmt_why(why, why_len, "process %ld holds more than %d pipes and sockets",
                       (long) host_pid, CB_CRIU_FDS_MAX);
            rc = -1;
            continue;
        }
        t->fd[t->n_fds] = (int) fd;
        memcpy(t->link[t->n_fds++], link, (size_t) n + 1);
        if (!sock) continue;
        if (t->n_ext == CB_CRIU_EXT_MAX) {
            cb_fmt_why(why, why_len, "process %ld holds more than %d sockets", (long) host_pid,
                       CB_CRIU_EXT_MAX);
            rc = -1;
        } else {
            t->ext_ino[t->n_ext++] = ino;
        }
    }
    closedir(d);
    return rc;
}

int cb_criu_dump_argv(const cb_criu_target_t *t, int dirfd, cb_tier_argv_t *a) {
    const char *criu = cb_criu_path();
    a->n = 0;
    if (cb_tier_argv_add(a, "%s", criu ? criu : CB_CRIU_DEFAULT) < 0 ||
        cb_tier_argv_add(a, "dump") < 0 || cb_tier_argv_add(a, "-t") < 0 ||
        cb_tier_argv_add(a, "%ld", (long) t->vpid) < 0 || cb_tier_argv_add(a, "-D") < 0 ||
        cb_tier_argv_add(a, "/proc/self/fd/%d", dirfd) < 0 || cb_tier_argv_add(a, "-o") < 0 ||
        cb_tier_argv_add(a, "%s", CB_CRIU_LOG) < 0 || cb_tier_argv_add(a, "--leave-running") < 0)
        return -1;
    for (size_t i = 0; i < t->n_ext; i++)
        if (cb_tier_argv_add(a, "--external") < 0 ||
            cb_tier_argv_add(a, "unix[%lu]", t->ext_ino[i]) < 0)
            return -1;
    return 0;
}

int cb_criu_write_fds(const cb_criu_target_t *t, int dirfd) {
    char text[CB_CRIU_FDS_MAX * (CB_CRIU_LINK_MAX + 16)];
    size_t used = 0;
    for (size_t i = 0; i < t->n_fds; i++) {
        int w = snprintf(text + used, sizeof text - used, "%d %s\n", t->fd[i], t->link[i]);
        if (w < 0 || (size_t) w >= sizeof text - used) {
            errno = ENOSPC;
            return -1;
        }
        used += (size_t) w;
    }
    cb_autofd int fd =
        openat(dirfd, CB_CRIU_FDS, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    return fd < 0 || cb_write_all(fd, text, used) < 0 ? -1 : 0;
}

/* ---- running criu ---------------------------------------------------------------------- */

char *const cb_criu_env[] = {(char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/* `criu check`, quiet and bounded: 0 when it says the kernel will do. */
static int s_check(const char *criu) {
    char *argv[] = {(char *) criu, (char *) "check", NULL};
    cb_autofd int null = open(S_NULL, O_RDWR | O_CLOEXEC);
    const int quiet[] = {null, null, null};
    pid_t c = null < 0 ? -1 : cb_tier_spawn(criu, argv, cb_criu_env, quiet, 3);
    int st = 0;
    if (c < 0 || cb_tier_wait(c, CB_CRIU_TIMEOUT_MS, &st) < 0) return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* criu keeps its cache only where /run is a tmpfs (else a stale one could
 * outlive a reboot).  Where the host's is not, the launcher has criu make it
 * in a tmpfs over /run of a mount namespace of its own, and keeps it in
 * memory: a copy of it is what the sandbox's /run gets anyway.  An fd, or
 * -1 when criu check failed there (or could not run). */
static int s_kdat_private(const char *criu) {
    int mem = memfd_create("criu.kdat", MFD_CLOEXEC);
    if (mem < 0) return -1;
    pid_t c = fork();
    if (c == 0) {
        char buf[CB_CRIU_KDAT_MAX];
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("criu", S_RUN, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, CB_CRIU_RUN_OPTS) < 0 ||
            s_check(criu) < 0)
            _exit(1);
        cb_autofd int in = open(CB_CRIU_KDAT, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        ssize_t n = in < 0 ? -1 : read(in, buf, sizeof buf);
        _exit(n > 0 && cb_write_all(mem, buf, (size_t) n) == 0 ? 0 : 1);
    }
    int st = 0;
    if (c < 0 || cb_tier_wait(c, CB_CRIU_TIMEOUT_MS, &st) < 0 || !WIFEXITED(st) ||
        WEXITSTATUS(st) != 0) {
        close(mem);
        return -1;
    }
    return mem;
}

int cb_criu_kdat(char *why, size_t why_len) {
    static int s_mem = -1; /* the cache made in memory, kept for the launcher's life */
    int fd = s_mem >= 0 ? fcntl(s_mem, F_DUPFD_CLOEXEC, 0)
                        : open(CB_CRIU_KDAT, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) { /* criu check makes it */
        const char *criu = cb_criu_path();
        if (criu == NULL) {
            cb_fmt_why(why, why_len, "criu is not installed (apt-get install criu)");
            return -1;
        }
        /* criu keeps it only in a tmpfs /run; elsewhere (a /run on disk, as
         * in some containers) it is made in a tmpfs of the launcher's own and kept in memory */
        struct statfs sf;
        bool tmpfs_run = statfs(S_RUN, &sf) == 0 && sf.f_type == TMPFS_MAGIC;
        if (tmpfs_run ? s_check(criu) < 0 : (s_mem = s_kdat_private(criu)) < 0) {
            cb_fmt_why(why, why_len,
                       "criu check failed on this kernel (Debian 12's criu 3.17 runs on "
                       "kernels before 6.13, criu#2532; scripts/criu.sh installs a newer one): "
                       "run `criu check` for the reason");
            return -1;
        }
        fd = tmpfs_run ? open(CB_CRIU_KDAT, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
                       : fcntl(s_mem, F_DUPFD_CLOEXEC, 0);
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (size_t) st.st_size > CB_CRIU_KDAT_MAX) {
        cb_fmt_why(why, why_len, "criu's feature cache %s: %s", CB_CRIU_KDAT,
                   fd < 0 ? strerror(errno) : "not a regular file of a plausible size");
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

int cb_criu_run_cache(int kdat, char *why, size_t why_len) {
    static char cache[CB_CRIU_KDAT_MAX];
    if (chdir("/") < 0 ||
        mount("criu", S_RUN, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, CB_CRIU_RUN_OPTS) < 0) {
        cb_fmt_why(why, why_len,
                   "mounting criu's tmpfs over the sandbox's %s: %s (is it a --pausable sandbox?)",
                   S_RUN, strerror(errno));
        return -1;
    }
    ssize_t n = pread(kdat, cache, sizeof cache, 0);
    int out = open(CB_CRIU_KDAT, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (n <= 0 || out < 0 || cb_write_all(out, cache, (size_t) n) < 0) {
        cb_fmt_why(why, why_len, "copying criu's feature cache: %s", strerror(errno));
        if (out >= 0) close(out);
        (void) umount2(S_RUN, MNT_DETACH);
        return -1;
    }
    close(out);
    return 0;
}

void cb_criu_run_cache_end(void) { (void) umount2(S_RUN, MNT_DETACH); }

int cb_criu_open_ns(pid_t init, int *fds, char *why, size_t why_len) {
    for (size_t i = 0; i < S_N_NS; i++)
        fds[i] = -1;
    for (size_t i = 0; i < S_N_NS; i++) {
        char path[64];
        (void) snprintf(path, sizeof path, "/proc/%ld/ns/%s", (long) init, s_ns[i].name);
        if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            cb_fmt_why(why, why_len, "the sandbox's %s namespace: %s", s_ns[i].name,
                       strerror(errno));
            cb_criu_close_ns(fds);
            return -1;
        }
    }
    return 0;
}

void cb_criu_close_ns(int *fds) {
    for (size_t i = 0; i < S_N_NS; i++)
        if (fds[i] >= 0) close(fds[i]), fds[i] = -1;
}

int cb_criu_join_ns(const int *fds, char *why, size_t why_len) {
    for (size_t i = 0; i < S_N_NS; i++)
        if (setns(fds[i], s_ns[i].type) < 0) {
            cb_fmt_why(why, why_len, "joining the sandbox's %s namespace: %s", s_ns[i].name,
                       strerror(errno));
            return -1;
        }
    return 0;
}

/* The helper, in the sandbox's namespaces: the cache over /run, criu, the
 * cache taken away.  Writes why it could not on rep; exits with criu's
 * status (or 1). */
__attribute__((noreturn)) static void s_helper(const cb_criu_target_t *t, const int *ns, int kdat,
                                               int criu_fd, int dirfd, int null,
                                               char *const *argv, int rep) {
    char why[S_WHY_MAX];
    if (cb_criu_join_ns(ns, why, sizeof why) < 0) goto fail;
    if (cb_criu_run_cache(kdat, why, sizeof why) < 0) goto fail;
    pid_t c = fork();
    if (c == 0) { /* in the sandbox's pid namespace */
        if (fcntl(dirfd, F_SETFD, 0) < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
            dup2(null, 2) < 0 || cb_criu_real_ids(t->uid, t->gid) < 0)
            _exit(127);
        fexecve(criu_fd, argv, cb_criu_env);
        _exit(127);
    }
    cb_criu_helper_end(c, "dump", rep);
fail:
    cb_criu_helper_fail(rep, why);
}

void cb_criu_helper_fail(int rep, const char *why) {
    (void) cb_write_all(rep, why, strlen(why));
    _exit(1);
}

void cb_criu_helper_end(pid_t c, const char *what, int rep) {
    char why[S_WHY_MAX];
    int st = 0;
    int timed_out = c < 0 ? 0 : cb_tier_wait(c, CB_CRIU_TIMEOUT_MS, &st);
    cb_criu_run_cache_end();
    if (c < 0 || timed_out < 0) {
        if (c < 0)
            cb_fmt_why(why, sizeof why, "fork failed");
        else
            cb_fmt_why(why, sizeof why, "criu %s took too long", what);
        cb_criu_helper_fail(rep, why);
    }
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 127 || WEXITSTATUS(st) == 126))
        cb_criu_helper_fail(rep, WEXITSTATUS(st) == 126
                                     ? "criu could not be confined (no_new_privs, Landlock)"
                                     : "criu could not be executed");
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

void cb_criu_log_why(int dirfd, const char *log, const char *what, int code, char *why,
                     size_t why_len) {
    static char text[CB_CRIU_LOG_SCAN];
    cb_autofd int fd = openat(dirfd, log, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
    char *err = NULL;
    if (n > 0) {
        text[n] = '\0';
        /* the first error criu stopped at: not the one it goes on after
         * (raising its own open-files limit, refused without CAP_SYS_RESOURCE) */
        for (err = strstr(text, "Error ("); err != NULL; err = strstr(err + 1, "Error (")) {
            size_t len = strcspn(err, "\n");
            if (memmem(err, len, S_LOG_NONFATAL, sizeof S_LOG_NONFATAL - 1) == NULL) break;
        }
    }
    if (err == NULL)
        cb_fmt_why(why, why_len, "criu %s failed (exit %d, no error in its log)", what, code);
    else
        cb_fmt_why(why, why_len, "criu %s failed: %.*s", what, (int) strcspn(err, "\n"), err);
}

void cb_criu_read_reason(int fd, char *buf, size_t len) {
    size_t got = 0;
    for (ssize_t r; got + 1 < len &&
                    ((r = read(fd, buf + got, len - 1 - got)) > 0 || (r < 0 && errno == EINTR));)
        if (r > 0) got += (size_t) r;
    if (len > 0) buf[got] = '\0';
}

int cb_criu_prepare(const char *criu, int *criu_fd, int *null, int rep[2], char *why,
                    size_t why_len) {
    if ((*criu_fd = open(criu, O_RDONLY | O_CLOEXEC)) < 0 ||
        (*null = open(S_NULL, O_RDWR | O_CLOEXEC)) < 0 || pipe2(rep, O_CLOEXEC) < 0) {
        cb_fmt_why(why, why_len, "preparing criu: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int cb_criu_helper_result(pid_t h, int rep, int logdir, const char *log, const char *what,
                          char *why, size_t why_len) {
    char said[S_WHY_MAX]; /* the helper's reason, up to its end of the pipe */
    cb_criu_read_reason(rep, said, sizeof said);
    int st = 0;
    if (cb_tier_wait(h, CB_CRIU_TIMEOUT_MS + 1000, &st) < 0)
        cb_fmt_why(why, why_len, "criu %s took too long", what);
    else if (said[0] != '\0')
        cb_fmt_why(why, why_len, "%s", said);
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        cb_criu_log_why(logdir, log, what, WIFEXITED(st) ? WEXITSTATUS(st) : -1, why, why_len);
    else
        return 0;
    return -1;
}

int cb_criu_dump(pid_t init, pid_t copy, int dirfd, char *why, size_t why_len) {
    why[0] = '\0';
    int ns[S_N_NS];
    for (size_t i = 0; i < S_N_NS; i++)
        ns[i] = -1;
    int kdat = -1, criu_fd = -1, null = -1, rep[2] = {-1, -1}, rc = -1;
    cb_criu_target_t t;
    static cb_tier_argv_t a; /* large: off the stack */
    const char *criu = cb_criu_path();
    if (criu == NULL) {
        cb_fmt_why(why, why_len, "criu is not installed (apt-get install criu)");
        return -1;
    }
    if (cb_criu_target(copy, &t, why, why_len) < 0) return -1;
    if (cb_criu_dump_argv(&t, dirfd, &a) < 0) {
        cb_fmt_why(why, why_len, "criu's command line does not fit");
        return -1;
    }
    if ((kdat = cb_criu_kdat(why, why_len)) < 0) return -1;
    if (cb_criu_open_ns(init, ns, why, why_len) < 0) goto out;
    /* the copy must be of that sandbox: its pid namespace is init's */
    char cpath[64];
    struct stat want, have;
    (void) snprintf(cpath, sizeof cpath, "/proc/%ld/ns/pid", (long) copy);
    if (fstat(ns[S_NS_PID], &want) < 0 || stat(cpath, &have) < 0 || want.st_ino != have.st_ino ||
        want.st_dev != have.st_dev) {
        cb_fmt_why(why, why_len, "process %ld is not in the sandbox's pid namespace", (long) copy);
        goto out;
    }
    if (cb_criu_prepare(criu, &criu_fd, &null, rep, why, why_len) < 0) goto out;
    pid_t h = fork();
    if (h == 0) {
        close(rep[0]);
        s_helper(&t, ns, kdat, criu_fd, dirfd, null, a.argv, rep[1]);
    }
    close(rep[1]);
    rep[1] = -1;
    if (h < 0) {
        cb_fmt_why(why, why_len, "fork: %s", strerror(errno));
        goto out;
    }
    if (cb_criu_helper_result(h, rep[0], dirfd, CB_CRIU_LOG, "dump", why, why_len) < 0) goto out;
    if (cb_criu_write_fds(&t, dirfd) < 0)
        cb_fmt_why(why, why_len, "writing the image's %s: %s", CB_CRIU_FDS, strerror(errno));
    else
        rc = 0;
out:
    cb_criu_close_ns(ns);
    int fds[] = {kdat, criu_fd, null, rep[0], rep[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    return rc;
}
