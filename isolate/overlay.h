/*
 * overlay.h - a host folder as the sandbox's working directory, read-only
 * underneath and writable on top (--workdir-source, issue 11).
 *
 *   lower  the folder: a read-only mount of it alone (no submounts).  As
 *          root it is an idmapped clone made by the launcher, in which the
 *          folder's owner is the sandbox's own host id, so the sandbox reads
 *          the folder as its owner would; unprivileged, a bind from the old
 *          root (the kernel's user is the sandbox's id already).
 *   upper  a tmpfs of --disk MiB in the staging area: every write lands
 *          there, the host folder is never written.
 *   hide   before the overlay is mounted, a bounded walk of the lower
 *          creates a whiteout in the upper for every dot-named entry at any
 *          depth, and for every fifo, socket and device (a path out of the
 *          sandbox): they are then absent from the merged view by every
 *          path.  Directories the walk cannot finish (past the entry or
 *          depth bound, unreadable, another mount) are hidden as a whole;
 *          a top level over the bound fails the set-up (E2BIG).
 *
 * Symlinks in the folder stay symlinks: the sandbox resolves them in its
 * own root, where no host path exists but the read-only system binds.
 * Planning allocates and logs (launcher side); running is async-signal-safe
 * (the sandbox's init, in its mount namespace, between the plan's ops).
 */
#ifndef CB_OVERLAY_H
#define CB_OVERLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "isolate/mount.h"

/* What the walk did (init sends it to the launcher, which logs it). */
typedef struct {
    unsigned long scanned;  /* entries examined */
    unsigned long dotfiles; /* dot-named entries hidden */
    unsigned long specials; /* fifos, sockets, devices hidden */
    unsigned long dirs_cut; /* directories hidden: past the bounds, unreadable, mounts */
    bool idmapped;          /* the lower is idmapped to the sandbox (root) */
} cb_overlay_stats_t;

/* Plans the overlay of host_dir at sandbox (CB_SANDBOX_HOME).  upper_opts
 * are the upper tmpfs's mount options; uid/gid own the upper (the ids
 * inside).  host_id > 0 (root launcher): the lower is an idmapped,
 * read-only clone of host_dir in which its owner maps to host_id; when the
 * filesystem refuses idmapping the clone is plain (the sandbox then has
 * the permissions of "others"), and stats->idmapped says which.  0 ok, -1
 * with a reason in why. */
int cb_overlay_plan(cb_mount_plan_t *p, const char *host_dir, const char *sandbox,
                    const char *upper_opts, uid_t uid, gid_t gid, unsigned long host_id,
                    bool *idmapped, char *why, size_t why_len);

/* Async-signal-safe, in the sandbox's init (cwd = the staging root): mount
 * the upper tmpfs and the lower, hide, mount the overlay at op->dst.
 * 0 ok, -1 errno. */
int cb_overlay_run(const cb_mount_op_t *op);

/* Async-signal-safe: the hiding walk alone, on two directory fds (the unit
 * test drives it).  lower_fd's tree is walked (never through a symlink or
 * into another mount), whiteouts and the directories that hold them are
 * made below upper_fd, owned by uid/gid.  0 ok; -1 errno (E2BIG: the top
 * directory alone is over CB_OVERLAY_SCAN_MAX entries). */
int cb_overlay_hide(int lower_fd, int upper_fd, uid_t uid, gid_t gid, cb_overlay_stats_t *st);

/* The stats of the last cb_overlay_run in this process. */
void cb_overlay_last_stats(cb_overlay_stats_t *out);

#endif
