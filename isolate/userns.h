/*
 * userns.h - user namespace id maps, and diagnosis of hosts that refuse
 * unprivileged user namespaces.
 */
#ifndef CB_USERNS_H
#define CB_USERNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Writes uid_map "inner outer 1" and gid_map "inner outer 1" for pid, after
 * setgroups=deny when deny_setgroups (required unless the writer has
 * CAP_SETGID over the namespace's parent: unprivileged launchers).  With it
 * allowed, the sandbox's init can drop the launcher's supplementary groups.
 * outer_root >= 0 (root writers only, --pausable): uid and gid 0 inside map
 * to that host id too ("0 outer_root 1" first; inner ids must not be 0).
 * 0 ok, -1 errno. */
int cb_userns_write_maps(pid_t pid, uid_t inner_uid, uid_t outer_uid, gid_t inner_gid,
                         gid_t outer_gid, bool deny_setgroups, long outer_root);
/* Whether this process may create a user namespace at all: not when it is
 * chrooted (its root is not its mount namespace's root: the kernel refuses
 * CLONE_NEWUSER with EPERM) nor when user.max_user_namespaces is 0.  false
 * with the reason in why. */
bool cb_userns_possible(char *why, size_t why_len);
/* Whether our root directory is a chroot below the mount namespace's root
 * (no mount point at "/" in /proc/self/mountinfo). */
bool cb_userns_chrooted(void);
/* After clone(CLONE_NEWUSER) failed with err: why it probably failed and
 * how to fix it, into buf. */
void cb_userns_diagnose(int err, char *buf, size_t len);

#endif
