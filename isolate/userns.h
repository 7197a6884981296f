/*
 * userns.h - user namespace id maps, and diagnosis of hosts that refuse
 * unprivileged user namespaces.
 */
#ifndef CB_USERNS_H
#define CB_USERNS_H

#include <stddef.h>
#include <sys/types.h>

/* Writes setgroups=deny, uid_map "inner outer 1", gid_map "inner outer 1"
 * for pid.  0 ok, -1 errno. */
int cb_userns_write_maps(pid_t pid, uid_t inner_uid, uid_t outer_uid, gid_t inner_gid,
                         gid_t outer_gid);
/* After clone(CLONE_NEWUSER) failed with err: why it probably failed and
 * how to fix it, into buf. */
void cb_userns_diagnose(int err, char *buf, size_t len);

#endif
