/*
 * cgroup_priv.h - what the cgroup files share and nobody else sees: the
 * group's struct and the file-level helpers.  cgroup.c holds the common part
 * (files, use, teardown, names), cgroup_v2.c and cgroup_v1.c the creation in
 * each hierarchy, cgroup_sweep.c the removal of groups whose owner is gone.
 */
#ifndef CB_CGROUP_PRIV_H
#define CB_CGROUP_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include "isolate/cgroup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

enum { V1_MEMORY, V1_PIDS, V1_CPU, V1_FREEZER, V1_COUNT };
extern const char *const cb_cg_v1_names[V1_COUNT]; /* hierarchy names, by V1_* */

struct cb_cgroup {
    cb_cgroup_version_t version; /* v1 or v2 */
    cb_cgroup_limits_t lim;      /* what was applied */
    char *dir;                   /* v2: the group's directory */
    char *parent_dir;            /* v2: its parent (the kernel's), NULL if none */
    char *v1_dir[V1_COUNT];      /* v1: per hierarchy, NULL if unavailable */
    char *v1_parent[V1_COUNT];   /* v1: the parent per hierarchy, NULL if none */
    bool memsw;                  /* v1: memory.memsw limit applied (no swap) */
    bool swap_off;               /* v2: memory.swap.max=0 applied */
    int oom_fd;                  /* cb_cgroup_oom_watch: v1 eventfd, v2 memory.events; -1 */
    int oom_src;                 /* v1: the memory.oom_control it listens on; -1 */
    long long oom_kills;         /* v2: memory.events oom_kill when last read */
};

/* "a/b", new; NULL when out of memory. */
char *cb_cg_join(const char *a, const char *b);
/* Value of "key N" in a flat-keyed file, -1 if absent. */
long long cb_cg_keyed(const char *dir, const char *file, const char *key);
/* Whether word is one of list's words (space, comma or newline separated). */
bool cb_cg_has_word(const char *list, const char *word);
cb_cgroup_t *cb_cg_alloc(cb_cgroup_version_t v, const cb_cgroup_limits_t *lim);
/* dir/cgroup.procs is empty (or unreadable). */
bool cb_cg_empty(const char *dir);
/* mkdir of a sandbox's own group: never one that holds processes.  0 ok,
 * -1 errno (EEXIST: a live group has the name). */
int cb_cg_mkdir_own(const char *dir);
/* mkdir that accepts an existing directory. */
int cb_cg_mkdir(const char *dir);
/* rmdir with retries while the group empties; ENOENT counts as done. */
int cb_cg_rmdir(const char *dir, int tries);
/* SIGKILL every pid listed in dir/cgroup.procs; returns how many. */
int cb_cg_kill_listed(const char *dir);
/* The unified hierarchy's mount point and our place in it (our delegated
 * group when we sit in its CB_CGROUP_LEAF), when it has the memory and pids
 * controllers.  *ns_root (may be NULL): it is our cgroup namespace's root.
 * 0 ok, -1 none. */
int cb_cg_v2_self_dir(char *out, size_t len, bool *ns_root);
/* ROOT/CTRL/<our path>: where our groups go in one v1 hierarchy. */
int cb_cg_v1_base(const char *root, const char *self, const char *ctrl, char *out, size_t len);

#endif
