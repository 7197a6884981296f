/*
 * caps.h - dropping privileges for good: ids, capabilities (bounding,
 * ambient, inheritable, permitted, effective), securebits, no_new_privs,
 * and resource limits.  Everything here is async-signal-safe (it runs
 * between clone and execve).
 */
#ifndef CB_CAPS_H
#define CB_CAPS_H

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#define CB_RLIMITS_MAX 8 /* entries of a cb_rlimits_t */

typedef struct {
    int resource[CB_RLIMITS_MAX];        /* RLIMIT_* */
    struct rlimit value[CB_RLIMITS_MAX]; /* soft = hard */
    int n;                               /* used entries */
} cb_rlimits_t;

/* Adds (resource, value) with soft = hard = value.  0 ok, -1 full. */
int cb_rlimits_add(cb_rlimits_t *r, int resource, rlim_t value);
/* Applies them all.  0 ok, -1 errno. */
int cb_rlimits_apply(const cb_rlimits_t *r);
/* Drops everything.  last_cap: /proc/sys/kernel/cap_last_cap (read before
 * clone).  set_ids: also setgroups/setresgid/setresuid to uid/gid (as root;
 * inside a user namespace the mapping already gives the id).  Finishes with
 * no_new_privs.  0 ok, -1 errno. */
int cb_caps_drop_all(int last_cap, bool set_ids, uid_t uid, gid_t gid);
/* /proc/sys/kernel/cap_last_cap, or a safe default. */
int cb_caps_last_cap(void);
/* True when the calling process has no capability in any set. */
bool cb_caps_none_left(void);

/* Async-signal-safe, for the sandbox's init right after its id maps are
 * written: become uid/gid (the ids inside the user namespace, mapped to the
 * sandbox's host id) and keep every capability of the namespace, so the
 * filesystem can be built with files owned by mapped ids.  clear_groups:
 * drop the supplementary groups (allowed unless setgroups is denied).
 * Credentials changed: the parent-death signal is cleared, re-arm it.
 * 0 ok, -1 errno. */
int cb_caps_become(uid_t uid, gid_t gid, bool clear_groups);

#endif
