/*
 * cgroup.c - control groups for one sandbox (after nsjail cgroup.cc and
 * cgroup2.cc): the common part (files, moving a process in, kill, OOM,
 * teardown, names).  Creation is in cgroup_v2.c and cgroup_v1.c, the
 * removal of stale groups in cgroup_sweep.c.
 *
 * The launcher creates the group before clone and moves init into it, so
 * every process of the sandbox is accounted and limited.  Teardown is total:
 * cgroup.kill (v2, atomic), or freezer FROZEN + SIGKILL to every member +
 * THAWED in rounds (v1, so nothing can fork while we look), then rmdir.
 * OOM is read from memory.events "oom_kill" (v2) or memory.oom_control
 * "oom_kill" (v1, with memory.failcnt as a weaker hint).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "isolate/cgroup_priv.h"
#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

const char *const cb_cg_v1_names[V1_COUNT] = {"memory", "pids", "cpu", "freezer"};

char *cb_cg_join(const char *a, const char *b) {
    char *out = NULL;
    if (asprintf(&out, "%s/%s", a, b) < 0) return NULL;
    return out;
}

int cb_cgroup_read(const char *dir, const char *file, char *buf, size_t len) {
    cb_autofree char *p = cb_cg_join(dir, file);
    if (p == NULL || len == 0) return -1;
    cb_autofd int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got < len - 1) {
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t) r;
    }
    buf[got] = '\0';
    return 0;
}

int cb_cgroup_write(const char *dir, const char *file, const char *value) {
    cb_autofree char *p = cb_cg_join(dir, file);
    if (p == NULL) return -1;
    cb_autofd int fd = open(p, O_WRONLY | O_CLOEXEC | O_TRUNC);
    if (fd < 0) {
        PLOG_D("open(%s)", p);
        return -1;
    }
    if (cb_write_all(fd, value, strlen(value)) < 0) {
        PLOG_D("write(%s, %s)", p, value);
        return -1;
    }
    return 0;
}

/* Value of "key N" in a flat-keyed text, -1 if absent. */
static long long s_keyed(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *line = text; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') return strtoll(line + kl + 1, NULL, 10);
    }
    return -1;
}

/* Value of "key N" in a flat-keyed file, -1 if absent. */
long long cb_cg_keyed(const char *dir, const char *file, const char *key) {
    char buf[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read(dir, file, buf, sizeof buf) < 0) return -1;
    return s_keyed(buf, key);
}

bool cb_cg_has_word(const char *list, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += wl) {
        bool start = p == list || p[-1] == ' ' || p[-1] == ',' || p[-1] == '\n';
        bool end = p[wl] == '\0' || p[wl] == ' ' || p[wl] == ',' || p[wl] == '\n';
        if (start && end) return true;
    }
    return false;
}

cb_cgroup_t *cb_cg_alloc(cb_cgroup_version_t v, const cb_cgroup_limits_t *lim) {
    cb_cgroup_t *cg = calloc(1, sizeof *cg);
    if (cg == NULL) return NULL;
    cg->version = v;
    cg->lim = *lim;
    cg->oom_fd = cg->oom_src = -1;
    return cg;
}


/* mkdir of a sandbox's own group: an existing one is taken over only when
 * no process is in it (a stale leftover of the same name); a live one is
 * never shared (its owner's teardown would kill this sandbox, and ours its
 * sandbox).  0 ok, -1 errno (EEXIST: a live group has the name). */
int cb_cg_mkdir_own(const char *dir) {
    if (mkdir(dir, CB_SANDBOX_MKDIR_MODE) == 0) return 0;
    if (errno != EEXIST) return -1;
    if (cb_cg_empty(dir)) return 0;
    LOG_E("cgroup %s already holds processes: not sharing it", dir);
    errno = EEXIST;
    return -1;
}

/* mkdir that accepts an existing directory. */
int cb_cg_mkdir(const char *dir) {
    if (mkdir(dir, CB_SANDBOX_MKDIR_MODE) == 0 || errno == EEXIST) return 0;
    return -1;
}

/* rmdir with retries while the group empties; ENOENT counts as done. */
int cb_cg_rmdir(const char *dir, int tries) {
    for (int t = 0; t < tries; t++) {
        if (rmdir(dir) == 0 || errno == ENOENT) return 0;
        if (errno != EBUSY) return -1;
        if (t + 1 < tries) usleep(CB_CGROUP_FREEZE_WAIT_US);
    }
    return -1;
}


cb_cgroup_t *cb_cgroup_new_auto(const char *parent, const char *name, const cb_cgroup_limits_t *lim,
                                char *why, size_t why_len) {
    char dir[CB_PATH_MAX];
    char why2[CB_LOG_LINE_MAX / 2] = "";
    bool ns_root = false;
    if (cb_cg_v2_self_dir(dir, sizeof dir, &ns_root) == 0) {
        cb_cgroup_t *cg = cb_cgroup_new_v2(dir, ns_root ? CB_CGROUP_NS_ROOT : 0, parent, name, lim,
                                           why2, sizeof why2);
        if (cg != NULL) return cg;
        LOG_I("cgroup v2 not usable: %s", why2);
    }
    cb_cgroup_t *cg =
        cb_cgroup_new_v1(CB_CGROUP_ROOT, "/proc/self/cgroup", parent, name, lim, why, why_len);
    if (cg == NULL && why2[0] != '\0') cb_fmt_why(why, why_len, "%s", why2);
    return cg;
}

/* ---- use ----------------------------------------------------------------- */

int cb_cgroup_add(cb_cgroup_t *cg, pid_t pid) {
    char v[CB_CGROUP_VALUE_MAX];
    (void) snprintf(v, sizeof v, "%ld", (long) pid);
    if (cg->version == CB_CGROUP_V2) {
        if (cb_cgroup_write(cg->dir, "cgroup.procs", v) < 0) {
            PLOG_E("cgroup v2: adding %ld to %s", (long) pid, cg->dir);
            return -1;
        }
        return 0;
    }
    for (int i = 0; i < V1_COUNT; i++) {
        if (cg->v1_dir[i] == NULL) continue;
        if (cb_cgroup_write(cg->v1_dir[i], "cgroup.procs", v) < 0) {
            PLOG_E("cgroup v1: adding %ld to %s", (long) pid, cg->v1_dir[i]);
            return -1;
        }
    }
    return 0;
}

int cb_cgroup_procs_fds(const cb_cgroup_t *cg, int *fds, size_t max) {
    const char *dirs[V1_COUNT];
    size_t n = 0;
    if (cg->version == CB_CGROUP_V2)
        dirs[n++] = cg->dir;
    else
        for (int i = 0; i < V1_COUNT; i++)
            if (cg->v1_dir[i] != NULL) dirs[n++] = cg->v1_dir[i];
    if (n > max) {
        errno = E2BIG;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char path[CB_PATH_MAX];
        int w = snprintf(path, sizeof path, "%s/cgroup.procs", dirs[i]);
        fds[i] = w < 0 || (size_t) w >= sizeof path ? -1 : open(path, O_WRONLY | O_CLOEXEC);
        if (fds[i] < 0) {
            int e = w < 0 || (size_t) w >= sizeof path ? ENAMETOOLONG : errno;
            while (i > 0)
                close(fds[--i]);
            errno = e;
            return -1;
        }
    }
    return (int) n;
}

/* SIGKILL every pid listed in dir/cgroup.procs; returns how many were listed. */
int cb_cg_kill_listed(const char *dir) {
    char buf[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read(dir, "cgroup.procs", buf, sizeof buf) < 0) return 0;
    int n = 0;
    for (char *p = buf; *p;) {
        char *end = NULL;
        long pid = strtol(p, &end, 10);
        if (end == p) break;
        if (pid > 0) {
            (void) kill((pid_t) pid, SIGKILL);
            n++;
        }
        p = end;
        while (*p == '\n')
            p++;
    }
    return n;
}

bool cb_cg_empty(const char *dir) {
    char buf[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read(dir, "cgroup.procs", buf, sizeof buf) < 0) return true;
    return buf[0] == '\0';
}

int cb_cgroup_kill(cb_cgroup_t *cg) {
    if (cg == NULL) return 0;
    const char *dir = cg->version == CB_CGROUP_V2 ? cg->dir : cg->v1_dir[V1_PIDS];
    if (dir == NULL) return 0;
    if (cg->version == CB_CGROUP_V2) (void) cb_cgroup_write(dir, "cgroup.kill", "1");
    const char *fz = cg->version == CB_CGROUP_V1 ? cg->v1_dir[V1_FREEZER] : NULL;
    for (int round = 0; round < CB_CGROUP_KILL_ROUNDS; round++) {
        if (cb_cg_empty(dir)) return 0;
        if (fz != NULL && cb_cgroup_write(fz, "freezer.state", "FROZEN") == 0) {
            char st[CB_CGROUP_VALUE_MAX];
            for (int i = 0; i < CB_CGROUP_FREEZE_POLLS; i++) {
                if (cb_cgroup_read(fz, "freezer.state", st, sizeof st) < 0 ||
                    strncmp(st, "FROZEN", 6) == 0)
                    break;
                usleep(CB_CGROUP_FREEZE_WAIT_US);
            }
        }
        (void) cb_cg_kill_listed(dir);
        if (fz != NULL) (void) cb_cgroup_write(fz, "freezer.state", "THAWED");
        usleep(CB_CGROUP_FREEZE_WAIT_US);
    }
    if (cb_cg_empty(dir)) return 0;
    LOG_E("cgroup %s: processes survive SIGKILL", dir);
    return -1;
}

bool cb_cgroup_oom(const cb_cgroup_t *cg) {
    if (cg == NULL) return false;
    if (cg->version == CB_CGROUP_V2) return cb_cg_keyed(cg->dir, "memory.events", "oom_kill") > 0;
    const char *m = cg->v1_dir[V1_MEMORY];
    if (m == NULL) return false;
    long long k = cb_cg_keyed(m, "memory.oom_control", "oom_kill");
    if (k >= 0) return k > 0;
    char buf[CB_CGROUP_VALUE_MAX];
    return cb_cgroup_read(m, "memory.failcnt", buf, sizeof buf) == 0 && atoll(buf) > 0;
}

/* memory.events' oom_kill, read on its own fd (which also re-arms its poll). */
static long long s_oom_kills(int fd) {
    char buf[CB_CGROUP_EVENTS_MAX];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = '\0';
    return s_keyed(buf, "oom_kill");
}

int cb_cgroup_oom_watch(cb_cgroup_t *cg, short *events) {
    if (cg->oom_fd >= 0) {
        *events = cg->version == CB_CGROUP_V2 ? POLLPRI : POLLIN;
        return cg->oom_fd;
    }
    if (cg->version == CB_CGROUP_V2) {
        char *f = cg->dir == NULL ? NULL : cb_cg_join(cg->dir, "memory.events");
        int fd = f == NULL ? -1 : open(f, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        free(f);
        if (fd < 0) return -1;
        cg->oom_kills = s_oom_kills(fd);
        cg->oom_fd = fd;
        *events = POLLPRI;
        return fd;
    }
    /* v1: memory.oom_control's notification (cgroup.event_control) */
    const char *m = cg->v1_dir[V1_MEMORY];
    char *f = m == NULL ? NULL : cb_cg_join(m, "memory.oom_control");
    int src = f == NULL ? -1 : open(f, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    free(f);
    int efd = src < 0 ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    char line[CB_CGROUP_VALUE_MAX];
    if (efd < 0 || snprintf(line, sizeof line, "%d %d", efd, src) >= (int) sizeof line ||
        cb_cgroup_write(m, "cgroup.event_control", line) < 0) {
        int e = errno;
        if (efd >= 0) close(efd);
        if (src >= 0) close(src);
        errno = e;
        return -1;
    }
    cg->oom_fd = efd;
    cg->oom_src = src;
    *events = POLLIN;
    return efd;
}

bool cb_cgroup_oom_fired(cb_cgroup_t *cg) {
    if (cg->oom_fd < 0) return false;
    if (cg->version == CB_CGROUP_V2) {
        long long k = s_oom_kills(cg->oom_fd);
        bool up = k > cg->oom_kills;
        if (k >= 0) cg->oom_kills = k;
        return up;
    }
    uint64_t n = 0;
    ssize_t r = read(cg->oom_fd, &n, sizeof n);
    return r == (ssize_t) sizeof n && n > 0;
}

cb_cgroup_version_t cb_cgroup_version(const cb_cgroup_t *cg) { return cg->version; }

void cb_cgroup_describe(const cb_cgroup_t *cg, char *buf, size_t len) {
    bool noswap = cg->version == CB_CGROUP_V2 ? true : cg->memsw;
    bool cpu = cg->version == CB_CGROUP_V2 || cg->v1_dir[V1_CPU] != NULL;
    char cpus[CB_DESC_PART_MAX] = "cpu unlimited";
    if (cpu) (void) snprintf(cpus, sizeof cpus, "cpu %.2f", cg->lim.cpus);
    (void) snprintf(buf, len, "cgroup v%d (memory %ld MiB%s, pids %ld, %s)", (int) cg->version,
                    cg->lim.memory_mb, noswap ? " no swap" : ", swap NOT limited", cg->lim.pids,
                    cpus);
}

void cb_cgroup_destroy(cb_cgroup_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_cgroup_t *cg = *self_p;
    *self_p = NULL;
    int saved = errno;
    if (cg->oom_fd >= 0) close(cg->oom_fd);
    if (cg->oom_src >= 0) close(cg->oom_src);
    (void) cb_cgroup_kill(cg);
    char *dirs[V1_COUNT + 1] = {cg->dir};
    char *parents[V1_COUNT + 1] = {cg->parent_dir};
    for (int i = 0; i < V1_COUNT; i++) {
        dirs[i + 1] = cg->v1_dir[i];
        parents[i + 1] = cg->v1_parent[i];
    }
    for (int i = 0; i < V1_COUNT + 1; i++) {
        if (dirs[i] != NULL && cb_cg_rmdir(dirs[i], CB_CGROUP_RMDIR_TRIES) < 0)
            PLOG_W("rmdir(%s)", dirs[i]);
        /* the kernel's parent goes with its last sandbox; EBUSY: another
         * sandbox of the same kernel is still there, and removes it later */
        if (parents[i] != NULL && rmdir(parents[i]) < 0 && errno != EBUSY && errno != ENOENT &&
            errno != ENOTEMPTY)
            PLOG_D("rmdir(%s)", parents[i]);
        free(dirs[i]);
        free(parents[i]);
    }
    free(cg);
    errno = saved;
}

/* ---- names and owners ------------------------------------------------------ */

/* The group name of one kind for pid, which names it with its start time
 * (a reused pid is another owner).  0 ok, -1. */
static int s_name(const char *kind, pid_t pid, char *buf, size_t len) {
    unsigned long long st = cb_proc_start_time(pid);
    if (st == 0) return -1;
    int n = snprintf(buf, len, CB_CGROUP_NAME_FMT, kind, (long) pid, st);
    return n < 0 || (size_t) n >= len ? -1 : 0;
}

int cb_cgroup_kernel_name(pid_t pid, char *buf, size_t len) {
    return s_name(CB_CGROUP_KIND_KERNEL, pid, buf, len);
}

int cb_cgroup_warm_name(pid_t pid, char *buf, size_t len) {
    return s_name(CB_CGROUP_KIND_WARM, pid, buf, len);
}

int cb_cgroup_launcher_name(pid_t pid, char *buf, size_t len) {
    return s_name(CB_CGROUP_KIND_LAUNCHER, pid, buf, len);
}

/* Parses decimal digits at *p (at least one, no sign, no overflow). */
static bool s_number(const char **p, unsigned long long *out) {
    const char *s = *p;
    unsigned long long v = 0;
    if (*s < '0' || *s > '9') return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (__builtin_mul_overflow(v, 10ULL, &v) ||
            __builtin_add_overflow(v, (unsigned long long) (*s - '0'), &v))
            return false;
    }
    *p = s;
    *out = v;
    return true;
}

/* Whether pid runs a program whose comm is `comm` (first release names). */
static bool s_comm_is(unsigned long long pid, const char *comm) {
    char path[CB_PROC_PATH_MAX], buf[CB_CGROUP_VALUE_MAX];
    (void) snprintf(path, sizeof path, "/proc/%llu/comm", pid);
    if (cb_cgroup_read("", path, buf, sizeof buf) < 0) return false;
    buf[strcspn(buf, "\n")] = '\0';
    return strcmp(buf, comm) == 0;
}

cb_cgroup_owner_t cb_cgroup_owner(const char *name) {
    size_t pl = strlen(CB_CGROUP_NAME_PREFIX);
    if (strncmp(name, CB_CGROUP_NAME_PREFIX, pl) != 0) return CB_OWNER_UNKNOWN;
    const char *p = name + pl;
    if (*p == 'k' || *p == 'w') p++; /* a kernel's parent group, a warm template's */
    unsigned long long pid, st;
    if (!s_number(&p, &pid) || pid == 0 || pid > (unsigned long long) CB_PID_MAX)
        return CB_OWNER_UNKNOWN;
    if (*p == '\0') /* "cellblock-<pid>" of the first release: launchers only */
        return name[pl] == 'k' || name[pl] == 'w'               ? CB_OWNER_UNKNOWN
               : s_comm_is(pid, CB_CGROUP_LEGACY_COMM) ? CB_OWNER_ALIVE
                                                       : CB_OWNER_GONE;
    if (*p++ != '-' || !s_number(&p, &st) || *p != '\0') return CB_OWNER_UNKNOWN;
    /* a zombie (killed, its parent not reaping it yet) cleans nothing up:
     * its group is as stale as a reaped owner's */
    char state;
    unsigned long long now = cb_proc_start_state((pid_t) pid, &state);
    return now == st && state != 'Z' && state != 'X' ? CB_OWNER_ALIVE : CB_OWNER_GONE;
}
