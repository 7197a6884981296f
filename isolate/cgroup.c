/*
 * cgroup.c - control groups for one sandbox (after nsjail cgroup.cc and
 * cgroup2.cc).
 *
 * The launcher creates the group before clone and moves init into it, so
 * every process of the sandbox is accounted and limited.  Teardown is total:
 * cgroup.kill (v2, atomic), or freezer FROZEN + SIGKILL to every member +
 * THAWED in rounds (v1, so nothing can fork while we look), then rmdir.
 * OOM is read from memory.events "oom_kill" (v2) or memory.oom_control
 * "oom_kill" (v1, with memory.failcnt as a weaker hint).
 */
#include "isolate/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

enum { V1_MEMORY, V1_PIDS, V1_CPU, V1_FREEZER, V1_COUNT };
static const char *const s_v1_names[V1_COUNT] = {"memory", "pids", "cpu", "freezer"};

struct cb_cgroup {
    cb_cgroup_version_t version; /* v1 or v2 */
    cb_cgroup_limits_t lim;      /* what was applied */
    char *dir;                   /* v2: the group's directory */
    char *parent_dir;            /* v2: its parent (the kernel's), NULL if none */
    char *v1_dir[V1_COUNT];      /* v1: per hierarchy, NULL if unavailable */
    char *v1_parent[V1_COUNT];   /* v1: the parent per hierarchy, NULL if none */
    bool memsw;                  /* v1: memory.memsw limit applied (no swap) */
    bool swap_off;               /* v2: memory.swap.max=0 applied */
};

static char *s_join(const char *a, const char *b) {
    char *out = NULL;
    if (asprintf(&out, "%s/%s", a, b) < 0) return NULL;
    return out;
}

int cb_cgroup_read(const char *dir, const char *file, char *buf, size_t len) {
    cb_autofree char *p = s_join(dir, file);
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
    cb_autofree char *p = s_join(dir, file);
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

/* Value of "key N" in a flat-keyed file, -1 if absent. */
static long long s_keyed(const char *dir, const char *file, const char *key) {
    char buf[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read(dir, file, buf, sizeof buf) < 0) return -1;
    size_t kl = strlen(key);
    for (char *line = buf; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') return strtoll(line + kl + 1, NULL, 10);
    }
    return -1;
}

static bool s_has_word(const char *list, const char *word) {
    size_t wl = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += wl) {
        bool start = p == list || p[-1] == ' ' || p[-1] == ',' || p[-1] == '\n';
        bool end = p[wl] == '\0' || p[wl] == ' ' || p[wl] == ',' || p[wl] == '\n';
        if (start && end) return true;
    }
    return false;
}

static cb_cgroup_t *s_alloc(cb_cgroup_version_t v, const cb_cgroup_limits_t *lim) {
    cb_cgroup_t *cg = calloc(1, sizeof *cg);
    if (cg == NULL) return NULL;
    cg->version = v;
    cg->lim = *lim;
    return cg;
}

static bool s_empty(const char *dir);

/* mkdir of a sandbox's own group: an existing one is taken over only when
 * no process is in it (a stale leftover of the same name); a live one is
 * never shared (its owner's teardown would kill this sandbox, and ours its
 * sandbox).  0 ok, -1 errno (EEXIST: a live group has the name). */
static int s_mkdir_own(const char *dir) {
    if (mkdir(dir, CB_SANDBOX_MKDIR_MODE) == 0) return 0;
    if (errno != EEXIST) return -1;
    if (s_empty(dir)) return 0;
    LOG_E("cgroup %s already holds processes: not sharing it", dir);
    errno = EEXIST;
    return -1;
}

/* mkdir that accepts an existing directory. */
static int s_mkdir(const char *dir) {
    if (mkdir(dir, CB_SANDBOX_MKDIR_MODE) == 0 || errno == EEXIST) return 0;
    return -1;
}

/* rmdir with retries while the group empties; ENOENT counts as done. */
static int s_rmdir(const char *dir, int tries) {
    for (int t = 0; t < tries; t++) {
        if (rmdir(dir) == 0 || errno == ENOENT) return 0;
        if (errno != EBUSY) return -1;
        if (t + 1 < tries) usleep(CB_CGROUP_FREEZE_WAIT_US);
    }
    return -1;
}

/* ---- v2 ------------------------------------------------------------------ */

/* Makes sure dir hands memory, pids and cpu down to its children. */
static int s_v2_enable(const char *dir, char *why, size_t why_len) {
    static const char *const need[] = {"memory", "pids", "cpu"};
    char ctrl[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read(dir, "cgroup.subtree_control", ctrl, sizeof ctrl) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2 %s: cannot read cgroup.subtree_control: %s", dir,
                   strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (s_has_word(ctrl, need[i])) continue;
        char add[CB_CGROUP_VALUE_MAX];
        (void) snprintf(add, sizeof add, "+%s", need[i]);
        if (cb_cgroup_write(dir, "cgroup.subtree_control", add) < 0) {
            int e = errno;
            if (e == EBUSY)
                cb_fmt_why(why, why_len,
                           "cgroup v2 %s holds processes, and v2 lets only a group without "
                           "processes hand controllers down; start the kernel in a delegated "
                           "cgroup of its own whose processes sit in a leaf (systemd: "
                           "Delegate=yes with DelegateSubgroup=), or keep --require-limits off",
                           dir);
            else
                cb_fmt_why(why, why_len,
                           "cgroup v2 %s: controller %s is not enabled for children and cannot "
                           "be enabled (%s); delegate it (systemd: Delegate=yes)",
                           dir, need[i], strerror(e));
            errno = e;
            return -1;
        }
    }
    return 0;
}

cb_cgroup_t *cb_cgroup_new_v2(const char *base, const char *parent, const char *name,
                              const cb_cgroup_limits_t *lim, char *why, size_t why_len) {
    if (why_len > 0) why[0] = '\0';
    if (access(base, W_OK) < 0) {
        cb_fmt_why(why, why_len,
                   "cgroup v2 %s is not writable (not delegated); run the kernel in a delegated "
                   "cgroup, e.g. systemd-run --user -p Delegate=yes --scope jupyter ...",
                   base);
        return NULL;
    }
    if (s_v2_enable(base, why, why_len) < 0) return NULL;
    cb_cgroup_t *cg = s_alloc(CB_CGROUP_V2, lim);
    if (cg == NULL) goto oom;
    if (parent != NULL && (cg->parent_dir = s_join(base, parent)) == NULL) goto oom;
    if ((cg->dir = s_join(parent != NULL ? cg->parent_dir : base, name)) == NULL) goto oom;
    /* A launcher of the same kernel that is ending removes the parent when
     * it is left empty: create it again when it vanished under us. */
    int t;
    for (t = 0; t < CB_CGROUP_CREATE_TRIES; t++) {
        if (cg->parent_dir != NULL &&
            (s_mkdir(cg->parent_dir) < 0 || s_v2_enable(cg->parent_dir, why, why_len) < 0)) {
            if (errno == ENOENT) continue;
            if (why[0] == '\0')
                cb_fmt_why(why, why_len, "cgroup v2: mkdir(%s): %s", cg->parent_dir,
                           strerror(errno));
            goto fail;
        }
        if (s_mkdir_own(cg->dir) == 0) break;
        if (errno != ENOENT) {
            cb_fmt_why(why, why_len, "cgroup v2: mkdir(%s): %s", cg->dir, strerror(errno));
            if (errno == EEXIST) { /* another sandbox's group: not ours to kill or remove */
                free(cg->dir);
                cg->dir = NULL;
            }
            goto fail;
        }
    }
    if (t == CB_CGROUP_CREATE_TRIES) {
        cb_fmt_why(why, why_len, "cgroup v2: %s keeps vanishing", cg->parent_dir);
        goto fail;
    }
    char v[CB_CGROUP_VALUE_MAX];
    (void) snprintf(v, sizeof v, "%lld", (long long) lim->memory_mb << 20);
    if (cb_cgroup_write(cg->dir, "memory.max", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2: cannot set memory.max in %s: %s", cg->dir,
                   strerror(errno));
        goto fail;
    }
    /* memory.swap.max is absent without swap accounting; no swap then */
    cg->swap_off = cb_cgroup_write(cg->dir, "memory.swap.max", "0") == 0;
    (void) cb_cgroup_write(cg->dir, "memory.oom.group", "1");
    (void) snprintf(v, sizeof v, "%ld", lim->pids);
    if (cb_cgroup_write(cg->dir, "pids.max", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2: cannot set pids.max in %s: %s", cg->dir,
                   strerror(errno));
        goto fail;
    }
    (void) snprintf(v, sizeof v, "%ld %ld", (long) (lim->cpus * CB_CGROUP_CPU_PERIOD_US),
                    CB_CGROUP_CPU_PERIOD_US);
    if (cb_cgroup_write(cg->dir, "cpu.max", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2: cannot set cpu.max in %s: %s", cg->dir,
                   strerror(errno));
        goto fail;
    }
    return cg;
oom:
    cb_fmt_why(why, why_len, "out of memory");
fail:
    cb_cgroup_destroy(&cg);
    return NULL;
}

/* ---- v1 ------------------------------------------------------------------ */

/* Our path in hierarchy `ctrl` from a /proc/self/cgroup-format file. */
static int s_v1_self_path(const char *self, const char *ctrl, char *out, size_t len) {
    char buf[CB_CGROUP_FILE_MAX];
    /* cb_cgroup_read joins with '/': self is absolute, "" + "/" + "/x" works */
    if (cb_cgroup_read("", self, buf, sizeof buf) < 0) return -1;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL) continue;
        *c2 = '\0';
        if (s_has_word(c1 + 1, ctrl)) {
            int n = snprintf(out, len, "%s", c2 + 1);
            return n < 0 || (size_t) n >= len ? -1 : 0;
        }
    }
    return -1;
}

/* ROOT/CTRL/<our path>: where our groups go in one v1 hierarchy. */
static int s_v1_base(const char *root, const char *self, const char *ctrl, char *out, size_t len) {
    char own[CB_PATH_MAX];
    if (s_v1_self_path(self, ctrl, own, sizeof own) < 0) return -1;
    int n = snprintf(out, len, "%s/%s%s", root, ctrl, strcmp(own, "/") == 0 ? "" : own);
    return n < 0 || (size_t) n >= len ? -1 : 0;
}

/* BASE/PARENT/NAME in one hierarchy, parent created on demand (again when
 * an ending launcher removed it meanwhile).  0 ok, -1 errno. */
static int s_v1_make(const char *base, const char *parent, const char *name, char **parent_out,
                     char **dir_out) {
    char *pd = NULL, *d = NULL;
    if (parent != NULL && (pd = s_join(base, parent)) == NULL) return -1;
    if ((d = s_join(pd != NULL ? pd : base, name)) == NULL) {
        free(pd);
        return -1;
    }
    for (int t = 0; t < CB_CGROUP_CREATE_TRIES; t++) {
        if (pd != NULL && s_mkdir(pd) < 0) break;
        if (s_mkdir_own(d) == 0) {
            *parent_out = pd;
            *dir_out = d;
            return 0;
        }
        if (errno != ENOENT) break;
    }
    int e = errno;
    PLOG_D("mkdir(%s)", d);
    free(pd);
    free(d);
    errno = e;
    return -1;
}

cb_cgroup_t *cb_cgroup_new_v1(const char *root, const char *self, const char *parent,
                              const char *name, const cb_cgroup_limits_t *lim, char *why,
                              size_t why_len) {
    cb_cgroup_t *cg = s_alloc(CB_CGROUP_V1, lim);
    if (cg == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        return NULL;
    }
    for (int i = 0; i < V1_COUNT; i++) {
        char base[CB_PATH_MAX];
        if (s_v1_base(root, self, s_v1_names[i], base, sizeof base) < 0) continue;
        (void) s_v1_make(base, parent, name, &cg->v1_parent[i], &cg->v1_dir[i]);
    }
    if (cg->v1_dir[V1_MEMORY] == NULL || cg->v1_dir[V1_PIDS] == NULL) {
        cb_fmt_why(why, why_len,
                   "cgroup v1: the memory and pids hierarchies under %s are not writable by the "
                   "launcher (run the kernel as root, or on a cgroup v2 host with delegation)",
                   root);
        goto fail;
    }
    char v[CB_CGROUP_VALUE_MAX];
    (void) snprintf(v, sizeof v, "%lld", (long long) lim->memory_mb << 20);
    if (cb_cgroup_write(cg->v1_dir[V1_MEMORY], "memory.limit_in_bytes", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v1: memory.limit_in_bytes=%s: %s", v, strerror(errno));
        goto fail;
    }
    cg->memsw = cb_cgroup_write(cg->v1_dir[V1_MEMORY], "memory.memsw.limit_in_bytes", v) == 0;
    if (!cg->memsw) (void) cb_cgroup_write(cg->v1_dir[V1_MEMORY], "memory.swappiness", "0");
    (void) snprintf(v, sizeof v, "%ld", lim->pids);
    if (cb_cgroup_write(cg->v1_dir[V1_PIDS], "pids.max", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v1: pids.max=%s: %s", v, strerror(errno));
        goto fail;
    }
    if (cg->v1_dir[V1_CPU] != NULL) {
        (void) snprintf(v, sizeof v, "%ld", CB_CGROUP_CPU_PERIOD_US);
        int a = cb_cgroup_write(cg->v1_dir[V1_CPU], "cpu.cfs_period_us", v);
        (void) snprintf(v, sizeof v, "%ld", (long) (lim->cpus * CB_CGROUP_CPU_PERIOD_US));
        if (a < 0 || cb_cgroup_write(cg->v1_dir[V1_CPU], "cpu.cfs_quota_us", v) < 0) {
            LOG_W("cgroup v1: cannot set the cpu quota; CPU is not limited");
            (void) s_rmdir(cg->v1_dir[V1_CPU], 1);
            free(cg->v1_dir[V1_CPU]);
            cg->v1_dir[V1_CPU] = NULL;
        }
    }
    return cg;
fail:
    cb_cgroup_destroy(&cg);
    return NULL;
}

/* ---- auto ---------------------------------------------------------------- */

/* The unified hierarchy's mount point and our place in it, when it has the
 * controllers we need. */
static int s_v2_self_dir(char *out, size_t len) {
    char self[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read("", "/proc/self/cgroup", self, sizeof self) < 0) return -1;
    const char *rel = NULL;
    char *save = NULL;
    for (char *line = strtok_r(self, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, "0::", 3) == 0) rel = line + 3;
    if (rel == NULL) return -1;
    static const char *const mounts[] = {CB_CGROUP_ROOT, CB_CGROUP_ROOT "/unified"};
    for (size_t i = 0; i < sizeof mounts / sizeof mounts[0]; i++) {
        struct statfs sf;
        if (statfs(mounts[i], &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC) continue;
        int n = snprintf(out, len, "%s%s", mounts[i], strcmp(rel, "/") == 0 ? "" : rel);
        if (n < 0 || (size_t) n >= len) return -1;
        /* a v2 mount with no controllers (hybrid hosts) limits nothing */
        char ctrl[CB_CGROUP_FILE_MAX];
        if (cb_cgroup_read(out, "cgroup.controllers", ctrl, sizeof ctrl) < 0 ||
            !s_has_word(ctrl, "memory") || !s_has_word(ctrl, "pids"))
            return -1;
        return 0;
    }
    return -1;
}

cb_cgroup_t *cb_cgroup_new_auto(const char *parent, const char *name, const cb_cgroup_limits_t *lim,
                                char *why, size_t why_len) {
    char dir[CB_PATH_MAX];
    char why2[CB_LOG_LINE_MAX / 2] = "";
    if (s_v2_self_dir(dir, sizeof dir) == 0) {
        cb_cgroup_t *cg = cb_cgroup_new_v2(dir, parent, name, lim, why2, sizeof why2);
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

/* SIGKILL every pid listed in dir/cgroup.procs; returns how many were listed. */
static int s_kill_listed(const char *dir) {
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

static bool s_empty(const char *dir) {
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
        if (s_empty(dir)) return 0;
        if (fz != NULL && cb_cgroup_write(fz, "freezer.state", "FROZEN") == 0) {
            char st[CB_CGROUP_VALUE_MAX];
            for (int i = 0; i < CB_CGROUP_FREEZE_POLLS; i++) {
                if (cb_cgroup_read(fz, "freezer.state", st, sizeof st) < 0 ||
                    strncmp(st, "FROZEN", 6) == 0)
                    break;
                usleep(CB_CGROUP_FREEZE_WAIT_US);
            }
        }
        (void) s_kill_listed(dir);
        if (fz != NULL) (void) cb_cgroup_write(fz, "freezer.state", "THAWED");
        usleep(CB_CGROUP_FREEZE_WAIT_US);
    }
    if (s_empty(dir)) return 0;
    LOG_E("cgroup %s: processes survive SIGKILL", dir);
    return -1;
}

bool cb_cgroup_oom(const cb_cgroup_t *cg) {
    if (cg == NULL) return false;
    if (cg->version == CB_CGROUP_V2) return s_keyed(cg->dir, "memory.events", "oom_kill") > 0;
    const char *m = cg->v1_dir[V1_MEMORY];
    if (m == NULL) return false;
    long long k = s_keyed(m, "memory.oom_control", "oom_kill");
    if (k >= 0) return k > 0;
    char buf[CB_CGROUP_VALUE_MAX];
    return cb_cgroup_read(m, "memory.failcnt", buf, sizeof buf) == 0 && atoll(buf) > 0;
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
    (void) cb_cgroup_kill(cg);
    char *dirs[V1_COUNT + 1] = {cg->dir};
    char *parents[V1_COUNT + 1] = {cg->parent_dir};
    for (int i = 0; i < V1_COUNT; i++) {
        dirs[i + 1] = cg->v1_dir[i];
        parents[i + 1] = cg->v1_parent[i];
    }
    for (int i = 0; i < V1_COUNT + 1; i++) {
        if (dirs[i] != NULL && s_rmdir(dirs[i], CB_CGROUP_RMDIR_TRIES) < 0)
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

int cb_cgroup_kernel_name(pid_t pid, char *buf, size_t len) {
    unsigned long long st = cb_proc_start_time(pid);
    if (st == 0) return -1;
    int n = snprintf(buf, len, CB_CGROUP_KERNEL_FMT, (long) pid, st);
    return n < 0 || (size_t) n >= len ? -1 : 0;
}

int cb_cgroup_launcher_name(pid_t pid, char *buf, size_t len) {
    unsigned long long st = cb_proc_start_time(pid);
    if (st == 0) return -1;
    int n = snprintf(buf, len, CB_CGROUP_NAME_FMT, (long) pid, st);
    return n < 0 || (size_t) n >= len ? -1 : 0;
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
    if (*p == 'k') p++; /* a kernel's parent group */
    unsigned long long pid, st;
    if (!s_number(&p, &pid) || pid == 0 || pid > (unsigned long long) CB_PID_MAX)
        return CB_OWNER_UNKNOWN;
    if (*p == '\0') /* "cellblock-<pid>" of the first release: launchers only */
        return name[pl] != 'k' && s_comm_is(pid, CB_CGROUP_LEGACY_COMM) ? CB_OWNER_ALIVE
               : name[pl] != 'k'                                        ? CB_OWNER_GONE
                                                                        : CB_OWNER_UNKNOWN;
    if (*p++ != '-' || !s_number(&p, &st) || *p != '\0') return CB_OWNER_UNKNOWN;
    return cb_proc_start_time((pid_t) pid) == st ? CB_OWNER_ALIVE : CB_OWNER_GONE;
}

/* ---- sweeping ---------------------------------------------------------------- */

/* Empties a stale group: cgroup.kill when the kernel has it (v2), then
 * SIGKILL of whatever is still listed, in bounded rounds. */
static void s_empty_stale(const char *dir) {
    (void) cb_cgroup_write(dir, "cgroup.kill", "1");
    for (int round = 0; round < CB_CGROUP_STALE_KILL_ROUNDS; round++) {
        /* a launcher killed between FROZEN and THAWED leaves its sandbox
         * frozen, and frozen tasks cannot act on SIGKILL: thaw first (only
         * the freezer hierarchy has the file; elsewhere this fails quietly) */
        (void) cb_cgroup_write(dir, "freezer.state", "THAWED");
        if (s_kill_listed(dir) == 0) return;
        usleep(CB_CGROUP_FREEZE_WAIT_US);
    }
}

static int s_remove_tree(const char *dir, int depth);

/* Removes the stale children of dir (and, when all_children, the ones that
 * are not ours either: below a stale group everything is stale). Returns
 * how many were removed; *kept = some stayed (alive or failed). */
static int s_sweep_children(const char *dir, bool all_children, int depth, bool *kept) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno != ENOENT) *kept = true;
        return 0;
    }
    int removed = 0, seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && seen < CB_CGROUP_SWEEP_MAX) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
        seen++;
        cb_cgroup_owner_t o = cb_cgroup_owner(e->d_name);
        bool kernel_parent =
            strncmp(e->d_name, CB_CGROUP_NAME_PREFIX "k", sizeof CB_CGROUP_NAME_PREFIX) == 0;
        if (o == CB_OWNER_ALIVE && kernel_parent && !all_children && depth > 1) {
            /* a live kernel's parent: only the groups its killed launchers left */
            cb_autofree char *child = s_join(dir, e->d_name);
            bool k2 = false;
            if (child != NULL) removed += s_sweep_children(child, false, depth - 1, &k2);
            continue;
        }
        if (o == CB_OWNER_ALIVE || (o == CB_OWNER_UNKNOWN && !all_children)) {
            if (all_children) *kept = true;
            continue;
        }
        cb_autofree char *child = s_join(dir, e->d_name);
        if (child == NULL || s_remove_tree(child, depth - 1) < 0) {
            *kept = true;
            continue;
        }
        removed++;
    }
    closedir(d);
    return removed;
}

/* dir is stale: its stale children first, then its members, then itself. */
static int s_remove_tree(const char *dir, int depth) {
    if (depth <= 0) {
        LOG_W("cgroup %s: nested too deep to sweep", dir);
        return -1;
    }
    bool kept = false;
    (void) s_sweep_children(dir, true, depth, &kept);
    if (kept) return -1; /* a live sandbox below: leave the rest to its owner */
    s_empty_stale(dir);
    if (s_rmdir(dir, CB_CGROUP_RMDIR_TRIES) < 0) {
        PLOG_W("rmdir(%s) (stale cgroup)", dir);
        return -1;
    }
    LOG_D("removed stale cgroup %s", dir);
    return 0;
}

int cb_cgroup_sweep_dir(const char *dir) {
    /* not ours to clean (an unprivileged launcher, a read-only hierarchy) */
    if (access(dir, W_OK) < 0) return 0;
    bool kept = false;
    int removed = s_sweep_children(dir, false, CB_CGROUP_SWEEP_DEPTH, &kept);
    return kept ? -1 : removed;
}

int cb_cgroup_remove_parent_dir(const char *dir, const char *parent) {
    cb_autofree char *p = s_join(dir, parent);
    if (p == NULL) return -1;
    bool kept = false;
    (void) s_sweep_children(p, false, CB_CGROUP_SWEEP_DEPTH, &kept);
    if (rmdir(p) == 0 || errno == ENOENT) return 0;
    PLOG_D("rmdir(%s)", p);
    return -1;
}

/* Every directory our groups may sit in: our own cgroup in the unified
 * hierarchy (when it has controllers) and in each v1 hierarchy we use. */
typedef struct {
    char dir[V1_COUNT + 1][CB_PATH_MAX]; /* candidate bases */
    int n;                               /* used entries */
} s_bases_t;

static void s_bases(s_bases_t *b) {
    b->n = 0;
    if (s_v2_self_dir(b->dir[b->n], sizeof b->dir[b->n]) == 0) b->n++;
    for (int i = 0; i < V1_COUNT; i++)
        if (s_v1_base(CB_CGROUP_ROOT, "/proc/self/cgroup", s_v1_names[i], b->dir[b->n],
                      sizeof b->dir[b->n]) == 0)
            b->n++;
}

int cb_cgroup_sweep(void) {
    static s_bases_t b; /* large: off the stack */
    s_bases(&b);
    int total = 0, rc = 0;
    for (int i = 0; i < b.n; i++) {
        int r = cb_cgroup_sweep_dir(b.dir[i]);
        if (r < 0)
            rc = -1;
        else
            total += r;
    }
    if (total > 0) LOG_I("removed %d stale cellblock cgroup(s) left by killed kernels", total);
    return rc < 0 ? -1 : total;
}

int cb_cgroup_cleanup_launcher(pid_t launcher_pid) {
    char parent[CB_CGROUP_NAME_MAX];
    if (launcher_pid <= 0 || cb_cgroup_kernel_name(getpid(), parent, sizeof parent) < 0) return -1;
    static s_bases_t b;
    s_bases(&b);
    int rc = 0;
    for (int i = 0; i < b.n; i++) {
        cb_autofree char *p = s_join(b.dir[i], parent);
        /* the reaped launcher's group is stale now; sweeping the parent
         * also takes any other one a killed launcher left */
        if (p != NULL && cb_cgroup_sweep_dir(p) < 0) rc = -1;
    }
    return rc;
}

int cb_cgroup_cleanup_kernel(void) {
    char parent[CB_CGROUP_NAME_MAX];
    if (cb_cgroup_kernel_name(getpid(), parent, sizeof parent) < 0) return -1;
    static s_bases_t b;
    s_bases(&b);
    int rc = 0;
    for (int i = 0; i < b.n; i++)
        if (cb_cgroup_remove_parent_dir(b.dir[i], parent) < 0) rc = -1;
    return rc;
}
