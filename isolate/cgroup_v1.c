/*
 * cgroup_v1.c - a sandbox's group in the legacy hierarchies: one directory
 * per hierarchy (memory with memsw so there is no swap, pids, cpu, freezer).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "isolate/cgroup_priv.h"
#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

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
        if (cb_cg_has_word(c1 + 1, ctrl)) {
            int n = snprintf(out, len, "%s", c2 + 1);
            return n < 0 || (size_t) n >= len ? -1 : 0;
        }
    }
    return -1;
}

/* ROOT/CTRL/<our path>: where our groups go in one v1 hierarchy. */
int cb_cg_v1_base(const char *root, const char *self, const char *ctrl, char *out, size_t len) {
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
    if (parent != NULL && (pd = cb_cg_join(base, parent)) == NULL) return -1;
    if ((d = cb_cg_join(pd != NULL ? pd : base, name)) == NULL) {
        free(pd);
        return -1;
    }
    for (int t = 0; t < CB_CGROUP_CREATE_TRIES; t++) {
        if (pd != NULL && cb_cg_mkdir(pd) < 0) break;
        if (cb_cg_mkdir_own(d) == 0) {
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
    cb_cgroup_t *cg = cb_cg_alloc(CB_CGROUP_V1, lim);
    if (cg == NULL) {
        cb_fmt_why(why, why_len, "out of memory");
        return NULL;
    }
    for (int i = 0; i < V1_COUNT; i++) {
        char base[CB_PATH_MAX];
        if (cb_cg_v1_base(root, self, cb_cg_v1_names[i], base, sizeof base) < 0) continue;
        (void) s_v1_make(base, parent, name, &cg->v1_parent[i], &cg->v1_dir[i]);
    }
    if (cg->v1_dir[V1_MEMORY] == NULL || cg->v1_dir[V1_PIDS] == NULL) {
        cb_fmt_why(why, why_len,
                   "cgroup v1 memory and pids hierarchies under %s are not writable by this user; "
                   "run the kernel as root, or on a cgroup v2 host in a delegated cgroup",
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
            (void) cb_cg_rmdir(cg->v1_dir[V1_CPU], 1);
            free(cg->v1_dir[V1_CPU]);
            cg->v1_dir[V1_CPU] = NULL;
        }
    }
    return cg;
fail:
    cb_cgroup_destroy(&cg);
    return NULL;
}
