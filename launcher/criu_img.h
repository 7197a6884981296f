/*
 * criu_img.h - the launcher's edits of a CRIU image before it restores a
 * paused --pausable sandbox from it (docs/SNAPSHOTS.md "Pause, resume and
 * fork (namespaces)").
 *
 * CRIU dumps the parked copy from every namespace of the sandbox but its
 * user namespace, so the image describes that user namespace as one of its
 * own (userns-*.img) and the task's ids name it.  The restore joins the new
 * sandbox's user namespace instead (criu restore --join-ns user:...), which
 * CRIU 3.17 does only for a task whose user namespace id is the image's
 * root one; and CRIU writes the time namespace's offsets from
 * timens-0.img, which the new sandbox's root may not (the sandbox has no
 * time namespace of its own; CLOCK_MONOTONIC jumps across a resume).
 *
 * The edits are made by the launcher, on an image whose seal it has
 * checked, with its own reading of the two records (launcher/criu_img.proto,
 * protobuf-c), never by a tool the image could steer.  Each file is read
 * whole with a bound, framed as CRIU frames it (magics, then one entry:
 * u32 size, payload), and written back through a new file renamed over
 * the old.
 */
#ifndef CB_CRIU_IMG_H
#define CB_CRIU_IMG_H

#include <stddef.h>

#define CB_CRIU_IMG_SMALL_MAX 65536u /* bytes of an inventory or ids image we read */
#define CB_CRIU_IMG_IDS_MAX   64     /* ids-*.img files in one image (tasks) */
#define CB_CRIU_IMG_PID_MAX   4194304L /* PID_MAX_LIMIT: no task's pid is larger */

#define CB_CRIU_MAGIC_COMMON    0x54564319u /* IMG_COMMON: the first word of most images */
#define CB_CRIU_MAGIC_INVENTORY 0x58313116u /* inventory.img's only magic */
#define CB_CRIU_MAGIC_IDS       0x54432030u /* ids-PID.img's second magic */

/* In the image directory dirfd: every ids-PID.img's user_ns_id set to the
 * inventory's root one, and timens-0.img removed.  *n_ids gets how many
 * ids images were rewritten (at least one, or it fails).  0 ok, -1 with
 * the reason in why (the image is then not to be restored: a file may be
 * rewritten and another not). */
int cb_criu_img_join_userns(int dirfd, size_t *n_ids, char *why, size_t why_len);

/* The largest PID of the image's tasks (its ids-PID.img names, up to
 * CB_CRIU_IMG_PID_MAX), -1 when it has none. */
long cb_criu_img_max_pid(int dirfd);

#endif
