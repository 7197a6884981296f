/*
 * cgroup_sweep.c - removal of cellblock groups whose owner is gone (a
 * launcher or kernel killed by SIGKILL), in every hierarchy we use, without
 * ever touching a group whose owner still runs.
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
        if (cb_cg_kill_listed(dir) == 0) return;
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
            strncmp(e->d_name, CB_CGROUP_NAME_PREFIX CB_CGROUP_KIND_KERNEL,
                    sizeof CB_CGROUP_NAME_PREFIX CB_CGROUP_KIND_KERNEL - 1) == 0;
        if (o == CB_OWNER_ALIVE && kernel_parent && !all_children && depth > 1) {
            /* a live kernel's parent: only the groups its killed launchers left */
            cb_autofree char *child = cb_cg_join(dir, e->d_name);
            bool k2 = false;
            if (child != NULL) removed += s_sweep_children(child, false, depth - 1, &k2);
            continue;
        }
        if (o == CB_OWNER_ALIVE || (o == CB_OWNER_UNKNOWN && !all_children)) {
            if (all_children) *kept = true;
            continue;
        }
        cb_autofree char *child = cb_cg_join(dir, e->d_name);
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
    if (cb_cg_rmdir(dir, CB_CGROUP_RMDIR_TRIES) < 0) {
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
    cb_autofree char *p = cb_cg_join(dir, parent);
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
    if (cb_cg_v2_self_dir(b->dir[b->n], sizeof b->dir[b->n], NULL) == 0) b->n++;
    /* v1: the freezer hierarchy first.  A launcher killed between its freeze
     * and its thaw leaves the sandbox frozen, and frozen tasks cannot act on
     * SIGKILL: until the freezer's group is thawed, the same group in the
     * memory, pids and cpu hierarchies stays busy */
    static const int order[V1_COUNT] = {V1_FREEZER, V1_MEMORY, V1_PIDS, V1_CPU};
    for (int k = 0; k < V1_COUNT; k++) {
        int i = order[k];
        if (cb_cg_v1_base(CB_CGROUP_ROOT, "/proc/self/cgroup", cb_cg_v1_names[i], b->dir[b->n],
                          sizeof b->dir[b->n]) == 0)
            b->n++;
    }
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
        cb_autofree char *p = cb_cg_join(b.dir[i], parent);
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
