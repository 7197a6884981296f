/*
 * cgroup.h - per-sandbox control groups, v2 or v1.
 *
 * v2: a child of the launcher's own cgroup when that cgroup is delegated
 * (writable, with memory/pids/cpu in its subtree_control); memory.max with
 * memory.swap.max=0, pids.max, cpu.max; teardown through cgroup.kill.
 * v1: one directory per hierarchy (memory with memsw so there is no swap,
 * pids, cpu, freezer); teardown freezes, SIGKILLs and thaws.
 * Every path is built from a root given by the caller, so the unit test runs
 * the same file-level logic against a fake tree in a temp dir.
 */
#ifndef CB_CGROUP_H
#define CB_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum {
    CB_CGROUP_V1 = 1, /* legacy hierarchies */
    CB_CGROUP_V2 = 2, /* unified hierarchy */
} cb_cgroup_version_t;

typedef struct {
    long memory_mb; /* memory limit, also memory+swap limit */
    long pids;      /* pids.max */
    double cpus;    /* cfs quota in CPUs */
} cb_cgroup_limits_t;

typedef struct cb_cgroup cb_cgroup_t;

/* v2: creates PARENT/NAME under a delegated cgroup and sets the limits.
 * NULL with a reason (cause and fix) in why. */
cb_cgroup_t *cb_cgroup_new_v2(const char *parent, const char *name, const cb_cgroup_limits_t *lim,
                              char *why, size_t why_len);
/* v1: ROOT is where the hierarchies are mounted (/sys/fs/cgroup); SELF is a
 * /proc/self/cgroup-format file naming our place in each.  NULL + why. */
cb_cgroup_t *cb_cgroup_new_v1(const char *root, const char *self, const char *name,
                              const cb_cgroup_limits_t *lim, char *why, size_t why_len);
/* Tries v2 (when this machine's unified hierarchy is delegated to us), then
 * v1.  NULL + why when neither can be used. */
cb_cgroup_t *cb_cgroup_new_auto(const char *name, const cb_cgroup_limits_t *lim, char *why,
                                size_t why_len);
/* Moves pid into the cgroup(s).  0 ok, -1 errno. */
int cb_cgroup_add(cb_cgroup_t *self, pid_t pid);
/* SIGKILLs every process in it (v2 cgroup.kill, else freeze/kill/thaw or
 * a kill loop) and waits until it is empty.  0 ok, -1 something stayed. */
int cb_cgroup_kill(cb_cgroup_t *self);
/* True when the memory controller OOM-killed something in it. */
bool cb_cgroup_oom(const cb_cgroup_t *self);
/* One line: "cgroup v1: memory 1024 MiB (no swap), pids 128, cpu 1.00". */
void cb_cgroup_describe(const cb_cgroup_t *self, char *buf, size_t len);
cb_cgroup_version_t cb_cgroup_version(const cb_cgroup_t *self);
/* Kills, then removes the directories.  Idempotent, NULL ok. */
void cb_cgroup_destroy(cb_cgroup_t **self_p);

/* File helpers, exposed for the test: read a small file / write a string. */
int cb_cgroup_read(const char *dir, const char *file, char *buf, size_t len);
int cb_cgroup_write(const char *dir, const char *file, const char *value);

#endif
