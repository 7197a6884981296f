/*
 * snapshot.h - a session's checkpoints, the kernel's part (docs/SNAPSHOTS.md):
 * the kernel's own record of each checkpoint (name, execution count, time,
 * the comms open then), the cellblock_* control requests that take, list,
 * roll back to and forget them, the same asked from a cell by the runner's
 * magics (%checkpoint, %rollback, %checkpoints), and what kernel_info says
 * about them.  The work inside the sandbox is the session's
 * (session_snap.c) and the sandbox's trusted init's; the runner is only
 * forked, and never decides anything: counts and names are the kernel's.
 */
#ifndef CB_KERNEL_SNAPSHOT_H
#define CB_KERNEL_SNAPSHOT_H

#include <jansson.h>
#include <stdbool.h>

#include "kernel/conn.h"
#include "kernel/options.h"
#include "kernel/wire.h"

struct cb_kernel;
typedef struct cb_snapshots cb_snapshots_t;

/* Attaches to k's session.  NULL on out of memory. */
cb_snapshots_t *cb_snapshots_new(struct cb_kernel *k);
void cb_snapshots_destroy(cb_snapshots_t **self_p);
/* kernel_info_reply: adds "cellblock_snapshots" to content (borrowed). */
void cb_snapshots_advertise(const cb_snapshots_t *sn, json_t *content);

/* Handlers of the dispatch table (control channel). */
void cb_snapshot_checkpoint(struct cb_kernel *k, cb_channel_t ch, cb_msg_t *m, bool abort);
void cb_snapshot_rollback(struct cb_kernel *k, cb_channel_t ch, cb_msg_t *m, bool abort);
void cb_snapshot_list(struct cb_kernel *k, cb_channel_t ch, cb_msg_t *m, bool abort);
void cb_snapshot_forget(struct cb_kernel *k, cb_channel_t ch, cb_msg_t *m, bool abort);
/* snappause.c: cellblock_pause_request (docs/SNAPSHOTS.md "Pause, resume and fork"). */
void cb_snapshot_pause(struct cb_kernel *k, cb_channel_t ch, cb_msg_t *m, bool abort);
/* --resume IMAGE at start: the image checked and the session set to start from it, or
 * every start refused with the reason.  The kernel's record in it is taken over. */
void cb_snapshots_resume(cb_snapshots_t *sn, const char *ref);
/* Before the session exists: the image --resume names is opened and its
 * seal checked, once (cb_snapshots_resume takes it over).  A gVisor image
 * in a kernel at the namespaces tier (the default) runs in gVisor, the
 * stronger tier, so `--resume ID` alone resumes any image; the other way
 * round stays refused.  Rewrites opts' launcher flags then. */
void cb_snapshots_open_resume(cb_opts_t *o);
/* Why this kernel's sandbox cannot be paused (the cause and the fix). */
const char *cb_snappause_why(const struct cb_kernel *k);

#endif
