/*
 * snap_agent_priv.h - what the agent's files share (tiers/snap_agent.c, the
 * checkpoints in place; tiers/snap_agent_image.c, a checkpoint's files to
 * and from the image of a paused sandbox).  Not for anyone else.
 */
#ifndef CB_SNAP_AGENT_PRIV_H
#define CB_SNAP_AGENT_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "tiers/snap_agent.h"
#include "tiers/snap_tree.h"

#define CB_SNAP_RESTORE_MS 120000 /* an imported checkpoint's restored copy must appear by then */

int64_t cb_snap_now_ms_(void);
/* one reply line, made printable */
void cb_snap_say_(cb_snap_agent_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the slot of checkpoint id (a doomed one is no checkpoint), or a free one for id 0 */
cb_snap_slot_t *cb_snap_find_(cb_snap_agent_t *a, long id);
/* a free slot for a new checkpoint id, NULL (said why) when there are no
 * checkpoints here, the id is taken or every slot is */
cb_snap_slot_t *cb_snap_new_slot_(cb_snap_agent_t *a, long id);
/* the store's directory of checkpoint id, opened (made when create) */
int cb_snap_store_dir_(cb_snap_agent_t *a, long id, bool create);
/* a fresh park fifo for id, opened O_RDWR */
int cb_snap_make_fifo_(cb_snap_agent_t *a, long id);
/* a slot given back (its fifo closed and removed; its files too when files) */
void cb_snap_free_(cb_snap_agent_t *a, cb_snap_slot_t *s, bool files);
/* an awaited copy is looked for from now on */
void cb_snap_scan_soon_(cb_snap_agent_t *a);
/* Copies the directory src (an fd, closed here; -1: its open failed, errno
 * says why) into a new directory name of parent (0700).  0 ok; -1 with why:
 * "OPENING: error" or "COPYING: the copy's reason". */
int cb_snap_copy_into_(cb_snap_tree_t *t, int src, int parent, const char *name,
                       const char *opening, const char *copying, char *why, size_t len);
/* the commands of snap_agent_image.c */
void cb_snap_export_(cb_snap_agent_t *a, long id, int dir);
void cb_snap_import_(cb_snap_agent_t *a, long id, int dir);

#endif
