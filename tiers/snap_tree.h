/*
 * snap_tree.h - copying a directory tree the sandbox's code wrote (its home,
 * /tmp) into the checkpoint store, and making the live tree equal to a
 * stored copy again (docs/SNAPSHOTS.md "Files").
 *
 * The trees are the attacker's: every entry is opened relative to its
 * directory's fd with O_NOFOLLOW (a symlink is copied as a symlink, never
 * followed), a regular file is checked to still be one after it is opened,
 * fifos are recreated as fifos and never opened, sockets and devices are
 * skipped, and the walk is bounded (CB_SNAP_DEPTH_MAX levels,
 * CB_SNAP_FILES_MAX entries; the store's own size bounds the bytes).  Holes
 * of sparse files stay holes.  Restoring rewrites an existing file in place
 * (the same inode, so files the checkpointed process holds open or mapped see
 * the restored content), removes what was created since, and recreates what
 * was removed.
 *
 * libc only, no allocation (static buffers, one user at a time): linked into
 * the launcher's init and into the static cellblock-init of the other tiers.
 */
#ifndef CB_SNAP_TREE_H
#define CB_SNAP_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "isolate/snap_limits.h"

/* A getdents64 record: both the tree walk and the agent's /proc scans list
 * directories with the raw syscall (no allocation, no DIR streams). */
typedef struct {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
} cb_snap_dirent64_t;

typedef struct {
    bool own;                  /* restore owners (the agent runs as root) */
    bool as;                   /* ... or give every entry this owner (the launcher, root, */
    uid_t as_uid;              /*     copying a paused sandbox's files for its agent) */
    gid_t as_gid;
    const char *skip_suffix;   /* copy: top-level files whose name ends so are left out */
    uint64_t bytes;            /* file bytes written */
    uint32_t entries;          /* entries handled */
    uint32_t skipped;          /* sockets and devices left out */
    int err;                   /* errno of the failure */
    char why[CB_SNAP_WHY_MAX]; /* what failed, for the user */
} cb_snap_tree_t;

/* Copies the contents (and the mode and times) of the directory open at
 * from into the empty directory open at to.  0 ok, -1 with t->why set. */
int cb_snap_tree_copy(cb_snap_tree_t *t, int from, int to);
/* Makes the directory open at live hold exactly what the copy open at saved
 * holds.  0 ok, -1 with t->why set (live is then partly restored). */
int cb_snap_tree_restore(cb_snap_tree_t *t, int saved, int live);
/* Removes everything inside the directory open at dir.  0 ok, -1. */
int cb_snap_tree_clear(cb_snap_tree_t *t, int dir);

#endif
