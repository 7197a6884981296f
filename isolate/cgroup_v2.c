/*
 * cgroup_v2.c - a sandbox's group in the unified hierarchy: controllers
 * handed down by the parent (the v2 rule: only a group without processes
 * can), memory.max with memory.swap.max=0, pids.max, cpu.max.
 *
 * A delegated group (systemd Delegate=yes: the service's or scope's own
 * cgroup, chowned to the user) holds the processes it was given, the
 * notebook server and the kernel among them, so it cannot hand controllers
 * down as it is.  The delegatee's part, by cgroup-v2.rst ("Delegation"), is
 * to move them into a leaf of its own: the launcher moves every process of
 * the group into <group>/cellblock-leaf, then enables the controllers, and
 * every later launcher, finding itself in that leaf, works one level up.
 * It does so only where the group is ours to manage: owned by the user who
 * runs the kernel, marked delegated by systemd (trusted.delegate or
 * user.delegate = 1, for root), or the root of our cgroup namespace (a
 * container's whole cgroup).  Anywhere else the sandbox runs DEGRADED and
 * the banner says why.
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
#include <sys/xattr.h>
#include <unistd.h>

#include "isolate/cgroup_priv.h"
#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

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
        if (cb_cg_has_word(ctrl, need[i])) continue;
        char add[CB_CGROUP_VALUE_MAX];
        (void) snprintf(add, sizeof add, "+%s", need[i]);
        if (cb_cgroup_write(dir, "cgroup.subtree_control", add) < 0) {
            int e = errno;
            if (e == EBUSY)
                cb_fmt_why(why, why_len,
                           "cgroup v2 %s holds processes and is not delegated to cellblock; v2 "
                           "lets only a group without processes hand controllers down, and "
                           "cellblock moves them into a leaf only in a delegated group: run the "
                           "kernel in a delegated cgroup (systemd: Delegate=yes; "
                           "systemd-run --user -p Delegate=yes --scope jupyter ...), or keep "
                           "--require-limits off",
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

/* Whether `dir`, which holds processes, is ours to reorganise (see the top). */
static bool s_delegated(const char *dir, unsigned flags) {
    if (flags & CB_CGROUP_NS_ROOT) return true;
    struct stat st;
    if (geteuid() != 0) {
        cb_autofree char *procs = cb_cg_join(dir, "cgroup.procs");
        struct stat sp;
        return procs != NULL && stat(dir, &st) == 0 && stat(procs, &sp) == 0 &&
               st.st_uid == geteuid() && sp.st_uid == geteuid();
    }
    static const char *const marks[] = {"trusted.delegate", "user.delegate"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        char v[CB_CGROUP_XATTR_MAX] = "";
        ssize_t n = getxattr(dir, marks[i], v, sizeof v - 1);
        if (n == 1 && v[0] == '1') return true;
    }
    return false;
}

/* Moves every process of dir into dir/CB_CGROUP_LEAF, in rounds (they may
 * fork meanwhile).  0 when dir was left without processes. */
static int s_vacate(const char *dir, char *why, size_t why_len) {
    cb_autofree char *leaf = cb_cg_join(dir, CB_CGROUP_LEAF);
    if (leaf == NULL || cb_cg_mkdir(leaf) < 0) {
        cb_fmt_why(why, why_len, "cgroup v2: mkdir(%s/%s): %s", dir, CB_CGROUP_LEAF,
                   strerror(errno));
        return -1;
    }
    static char buf[CB_CGROUP_FILE_MAX]; /* large: off the stack */
    for (int round = 0; round < CB_CGROUP_VACATE_ROUNDS; round++) {
        if (cb_cgroup_read(dir, "cgroup.procs", buf, sizeof buf) < 0) break;
        if (buf[0] == '\0') {
            LOG_I("cgroup v2 %s: delegated; its processes now sit in %s", dir, CB_CGROUP_LEAF);
            return 0;
        }
        char *save = NULL;
        for (char *p = strtok_r(buf, "\n", &save); p; p = strtok_r(NULL, "\n", &save))
            if (cb_cgroup_write(leaf, "cgroup.procs", p) < 0 && errno != ESRCH) {
                cb_fmt_why(why, why_len,
                           "cgroup v2 %s is delegated, but process %s cannot be moved into its "
                           "leaf %s: %s",
                           dir, p, CB_CGROUP_LEAF, strerror(errno));
                return -1;
            }
    }
    cb_fmt_why(why, why_len, "cgroup v2 %s: its processes keep forking; cannot vacate it", dir);
    return -1;
}

cb_cgroup_t *cb_cgroup_new_v2(const char *base, unsigned flags, const char *parent,
                              const char *name, const cb_cgroup_limits_t *lim, char *why,
                              size_t why_len) {
    if (why_len > 0) why[0] = '\0';
    if (access(base, W_OK) < 0) {
        cb_fmt_why(why, why_len,
                   "cgroup v2 %s is not delegated to this user (not writable); run the kernel in "
                   "a delegated cgroup, e.g. systemd-run --user -p Delegate=yes --scope jupyter "
                   "...",
                   base);
        return NULL;
    }
    if (s_v2_enable(base, why, why_len) < 0) {
        if (errno != EBUSY || !s_delegated(base, flags)) return NULL;
        if (s_vacate(base, why, why_len) < 0 || s_v2_enable(base, why, why_len) < 0) return NULL;
    }
    cb_cgroup_t *cg = cb_cg_alloc(CB_CGROUP_V2, lim);
    if (cg == NULL) goto oom;
    if (parent != NULL && (cg->parent_dir = cb_cg_join(base, parent)) == NULL) goto oom;
    if ((cg->dir = cb_cg_join(parent != NULL ? cg->parent_dir : base, name)) == NULL) goto oom;
    /* A launcher of the same kernel that is ending removes the parent when
     * it is left empty: create it again when it vanished under us. */
    int t;
    for (t = 0; t < CB_CGROUP_CREATE_TRIES; t++) {
        if (cg->parent_dir != NULL &&
            (cb_cg_mkdir(cg->parent_dir) < 0 || s_v2_enable(cg->parent_dir, why, why_len) < 0)) {
            if (errno == ENOENT) continue;
            if (why[0] == '\0')
                cb_fmt_why(why, why_len, "cgroup v2: mkdir(%s): %s", cg->parent_dir,
                           strerror(errno));
            goto fail;
        }
        if (cb_cg_mkdir_own(cg->dir) == 0) break;
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
    /* memory.oom.group stays 0: the OOM killer takes the largest task, as
     * on v1, so a subprocess that runs out of memory dies alone and the
     * session keeps its state (with 1, every task of the sandbox, init and
     * the runner among them, died with it, and only on v2) */
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

/* ---- where we are -------------------------------------------------------- */

/* The unified hierarchy's mount point and our place in it, when it has the
 * controllers we need; our leaf in a delegated group (above) counts as the
 * group itself.  *ns_root: that place is our cgroup namespace's root. */
int cb_cg_v2_self_dir(char *out, size_t len, bool *ns_root) {
    char self[CB_CGROUP_FILE_MAX];
    if (cb_cgroup_read("", "/proc/self/cgroup", self, sizeof self) < 0) return -1;
    char *rel = NULL;
    char *save = NULL;
    for (char *line = strtok_r(self, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, "0::", 3) == 0) rel = line + 3;
    if (rel == NULL) return -1;
    size_t rl = strlen(rel), ll = strlen("/" CB_CGROUP_LEAF);
    if (rl >= ll && strcmp(rel + rl - ll, "/" CB_CGROUP_LEAF) == 0) rel[rl - ll] = '\0';
    if (rel[0] == '\0' || strcmp(rel, "/") == 0) rel = "";
    if (ns_root != NULL) *ns_root = rel[0] == '\0';
    static const char *const mounts[] = {CB_CGROUP_ROOT, CB_CGROUP_ROOT "/unified"};
    for (size_t i = 0; i < sizeof mounts / sizeof mounts[0]; i++) {
        struct statfs sf;
        if (statfs(mounts[i], &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC) continue;
        int n = snprintf(out, len, "%s%s", mounts[i], rel);
        if (n < 0 || (size_t) n >= len) return -1;
        /* a v2 mount with no controllers (hybrid hosts) limits nothing */
        char ctrl[CB_CGROUP_FILE_MAX];
        if (cb_cgroup_read(out, "cgroup.controllers", ctrl, sizeof ctrl) < 0 ||
            !cb_cg_has_word(ctrl, "memory") || !cb_cg_has_word(ctrl, "pids"))
            return -1;
        return 0;
    }
    return -1;
}

int cb_cgroup_dirfd(const cb_cgroup_t *cg) {
    if (cg == NULL || cg->version != CB_CGROUP_V2 || cg->dir == NULL) return -1;
    int fd = open(cg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) PLOG_W("open(%s)", cg->dir);
    return fd;
}
