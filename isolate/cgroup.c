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
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "log.h"
#include "sandbox_limits.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

enum { V1_MEMORY, V1_PIDS, V1_CPU, V1_FREEZER, V1_COUNT };
static const char *const s_v1_names[V1_COUNT] = {"memory", "pids", "cpu", "freezer"};

struct cb_cgroup {
    cb_cgroup_version_t version; /* v1 or v2 */
    cb_cgroup_limits_t lim;      /* what was applied */
    char *dir;                   /* v2: the group's directory */
    char *v1_dir[V1_COUNT];      /* v1: per hierarchy, NULL if unavailable */
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

/* ---- v2 ------------------------------------------------------------------ */

cb_cgroup_t *cb_cgroup_new_v2(const char *parent, const char *name, const cb_cgroup_limits_t *lim,
                              char *why, size_t why_len) {
    static const char *const need[] = {"memory", "pids", "cpu"};
    char ctrl[CB_CGROUP_FILE_MAX];
    if (access(parent, W_OK) < 0) {
        cb_fmt_why(why, why_len,
              "cgroup v2 %s is not writable (not delegated); run the kernel in a delegated "
              "cgroup, e.g. systemd-run --user -p Delegate=yes --scope jupyter ...",
              parent);
        return NULL;
    }
    if (cb_cgroup_read(parent, "cgroup.subtree_control", ctrl, sizeof ctrl) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2 %s: cannot read cgroup.subtree_control: %s", parent,
              strerror(errno));
        return NULL;
    }
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (s_has_word(ctrl, need[i])) continue;
        char add[CB_OPT_MAX_NAME];
        (void) snprintf(add, sizeof add, "+%s", need[i]);
        if (cb_cgroup_write(parent, "cgroup.subtree_control", add) < 0) {
            cb_fmt_why(why, why_len,
                  "cgroup v2 %s: controller %s is not enabled for children and cannot be "
                  "enabled (%s); delegate it (systemd: Delegate=yes) and start the kernel in a "
                  "leaf of that subtree",
                  parent, need[i], strerror(errno));
            return NULL;
        }
    }
    cb_cgroup_t *cg = s_alloc(CB_CGROUP_V2, lim);
    if (cg == NULL || (cg->dir = s_join(parent, name)) == NULL) goto oom;
    if (mkdir(cg->dir, CB_SANDBOX_MKDIR_MODE) < 0 && errno != EEXIST) {
        cb_fmt_why(why, why_len, "cgroup v2: mkdir(%s): %s", cg->dir, strerror(errno));
        goto fail;
    }
    char v[CB_OPT_MAX_NAME];
    (void) snprintf(v, sizeof v, "%lld", (long long) lim->memory_mb << 20);
    if (cb_cgroup_write(cg->dir, "memory.max", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2: cannot set memory.max in %s: %s", cg->dir, strerror(errno));
        goto fail;
    }
    /* memory.swap.max is absent without swap accounting; no swap then */
    cg->swap_off = cb_cgroup_write(cg->dir, "memory.swap.max", "0") == 0;
    (void) cb_cgroup_write(cg->dir, "memory.oom.group", "1");
    (void) snprintf(v, sizeof v, "%ld", lim->pids);
    if (cb_cgroup_write(cg->dir, "pids.max", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2: cannot set pids.max in %s: %s", cg->dir, strerror(errno));
        goto fail;
    }
    (void) snprintf(v, sizeof v, "%ld %ld", (long) (lim->cpus * CB_CGROUP_CPU_PERIOD_US),
                    CB_CGROUP_CPU_PERIOD_US);
    if (cb_cgroup_write(cg->dir, "cpu.max", v) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2: cannot set cpu.max in %s: %s", cg->dir, strerror(errno));
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
    if (cb_cgroup_read("", self, buf, sizeof buf) < 0) {
        /* cb_cgroup_read joins with '/': self is absolute, "" + "/" + "/x" works */
        return -1;
    }
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
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

cb_cgroup_t *cb_cgroup_new_v1(const char *root, const char *self, const char *name,
                              const cb_cgroup_limits_t *lim, char *why, size_t why_len) {
    cb_cgroup_t *cg = s_alloc(CB_CGROUP_V1, lim);
    if (cg == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        return NULL;
    }
    for (int i = 0; i < V1_COUNT; i++) {
        char own[CB_PATH_MAX];
        if (s_v1_self_path(self, s_v1_names[i], own, sizeof own) < 0) continue;
        char *dir = NULL;
        if (asprintf(&dir, "%s/%s%s/%s", root, s_v1_names[i], strcmp(own, "/") == 0 ? "" : own,
                     name) < 0)
            continue;
        if (mkdir(dir, CB_SANDBOX_MKDIR_MODE) < 0 && errno != EEXIST) {
            PLOG_D("mkdir(%s)", dir);
            free(dir);
            continue;
        }
        cg->v1_dir[i] = dir;
    }
    if (cg->v1_dir[V1_MEMORY] == NULL || cg->v1_dir[V1_PIDS] == NULL) {
        cb_fmt_why(why, why_len,
              "cgroup v1: the memory and pids hierarchies under %s are not writable by the "
              "launcher (run the kernel as root, or on a cgroup v2 host with delegation)",
              root);
        goto fail;
    }
    char v[CB_OPT_MAX_NAME];
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

/* The unified hierarchy's mount point and our place in it. */
static int s_v2_self_dir(char *out, size_t len) {
    char self[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read("", "/proc/self/cgroup", self, sizeof self) < 0) return -1;
    const char *rel = NULL;
    for (char *line = strtok(self, "\n"); line; line = strtok(NULL, "\n"))
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

cb_cgroup_t *cb_cgroup_new_auto(const char *name, const cb_cgroup_limits_t *lim, char *why,
                                size_t why_len) {
    char dir[CB_PATH_MAX];
    char why2[CB_LOG_LINE_MAX / 2] = "";
    if (s_v2_self_dir(dir, sizeof dir) == 0) {
        cb_cgroup_t *cg = cb_cgroup_new_v2(dir, name, lim, why2, sizeof why2);
        if (cg != NULL) return cg;
        LOG_I("cgroup v2 not usable: %s", why2);
    }
    cb_cgroup_t *cg =
        cb_cgroup_new_v1(CB_CGROUP_ROOT, "/proc/self/cgroup", name, lim, why, why_len);
    if (cg == NULL && why2[0] != '\0') cb_fmt_why(why, why_len, "%s", why2);
    return cg;
}

/* ---- use ----------------------------------------------------------------- */

int cb_cgroup_add(cb_cgroup_t *cg, pid_t pid) {
    char v[CB_OPT_MAX_NAME];
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
            char st[CB_OPT_MAX_NAME];
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
    char buf[CB_OPT_MAX_NAME];
    return cb_cgroup_read(m, "memory.failcnt", buf, sizeof buf) == 0 && atoll(buf) > 0;
}

cb_cgroup_version_t cb_cgroup_version(const cb_cgroup_t *cg) { return cg->version; }

void cb_cgroup_describe(const cb_cgroup_t *cg, char *buf, size_t len) {
    bool noswap = cg->version == CB_CGROUP_V2 ? true : cg->memsw;
    bool cpu = cg->version == CB_CGROUP_V2 || cg->v1_dir[V1_CPU] != NULL;
    char cpus[CB_OPT_MAX_NAME] = "cpu unlimited";
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
    for (int i = 0; i < V1_COUNT; i++)
        dirs[i + 1] = cg->v1_dir[i];
    for (int i = 0; i < V1_COUNT + 1; i++) {
        if (dirs[i] == NULL) continue;
        for (int t = 0; t < CB_CGROUP_RMDIR_TRIES; t++) {
            if (rmdir(dirs[i]) == 0 || errno == ENOENT) break;
            if (errno != EBUSY) {
                PLOG_W("rmdir(%s)", dirs[i]);
                break;
            }
            usleep(CB_CGROUP_FREEZE_WAIT_US);
        }
        free(dirs[i]);
    }
    free(cg);
    errno = saved;
}
