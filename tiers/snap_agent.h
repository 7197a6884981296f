/*
 * snap_agent.h - the trusted side of checkpoints in place, inside the
 * sandbox (docs/SNAPSHOTS.md): it runs in the sandbox's init (the launcher's
 * init in the namespaces tier, cellblock-init under gVisor and in the
 * micro-VM), never in the runner, and answers the kernel's commands,
 * relayed by the launcher as text lines.
 *
 *   arm ID            a checkpoint is coming: make the park fifo ID and copy
 *                     the home and /tmp into the store (the runner is between
 *                     cells)                         -> armed ID BYTES FILES
 *                     ... meanwhile the runner forks; the fork (reparented to
 *                     init) opens the fifo and stops itself; the agent checks
 *                     that the stopped child holds that fifo, makes it the OOM
 *                     killer's first choice and lets it block on the fifo
 *                                                    -> saved ID PID BYTES FILES
 *                     (the kernel's checkpoint is done at "armed" and the
 *                     runner's checkpoint_reply; a fork that never parks is
 *                     reported lost)
 *   roll ID NONCE     ends every process of the sandbox but the parked copies
 *                     (and init), restores the files, wakes copy ID with
 *                     "resume NONCE" and makes it the runner init supervises;
 *                     the woken copy forks again to keep checkpoint ID
 *                                                    -> rolled ID PID ENDED
 *   drop ID           the copy and its files go      -> dropped ID
 *   export ID + fd    a parked checkpoint's files copied out of the store
 *                     into the directory sent with the command, as home/
 *                     and tmp/ (the image of a paused --pausable sandbox
 *                     takes them beside CRIU's dump of the copy)
 *                                                    -> exported ID BYTES FILES PID
 *   import ID + fd    in a new sandbox, a checkpoint from such an image: its
 *                     park fifo made again and held, home/ and tmp/ copied
 *                     into the store, and its copy awaited (CRIU restores
 *                     it: a process holding the fifo, in any state) for
 *                     CB_SNAP_RESTORE_MS            -> imported ID BYTES FILES
 *                     ... then, as for a fork:      -> saved ID PID BYTES FILES
 *                     (or lost); "roll" wakes it.  For a sandbox with no
 *                     runner yet: any process that can open the fifo could
 *                     stand in for the copy.
 *
 * Unprompted: `lost ID WHY` (a parked copy died: the OOM killer, code in the
 * sandbox), `kept ID PID` (the copy a rollback's runner made of itself),
 * `fail ID WHY` for any command that did not work, `refused ID WHY` for a
 * rollback refused before anything in the sandbox changed (no such
 * checkpoint: its copy died and the kernel has not heard yet).  The agent trusts no
 * process of the sandbox: which child is a checkpoint is decided by what it
 * holds open (the fifo only the agent made), never by what it says.
 *
 * libc only and no allocation: the same file is linked into the launcher
 * and into the static cellblock-init.
 */
#ifndef CB_SNAP_AGENT_H
#define CB_SNAP_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "isolate/snap_limits.h"

typedef void (*cb_snap_say_fn)(void *ud, const char *line);

typedef struct {
    long id;             /* the kernel's id of this checkpoint, 0 = free */
    pid_t pid;           /* the parked copy (this pid namespace), 0 while armed */
    int fifo;            /* our O_RDWR end of its park fifo, -1 */
    int64_t armed_until; /* armed: its fork must park by then (monotonic ms); 0 parked */
    bool replacement;    /* armed by a rollback: the woken runner's copy of itself */
    bool restored;       /* imported: its copy comes from CRIU's restore, not a fork */
    bool doomed;         /* given up while armed: its copy is killed if it parks */
    uint64_t bytes;      /* its files in the store */
    uint32_t files;      /* ... and how many */
} cb_snap_slot_t;

typedef struct {
    int store;                          /* the store's root directory, -1 = none or by path */
    const char *store_path;             /* else the store, opened for each use (NULL = none) */
    int park;                           /* CB_SNAP_PARK_DIR, -1 = none */
    const char *dirs[2];                /* the live trees copied: home, /tmp */
    pid_t runner;                       /* the runner init supervises */
    pid_t keep;                         /* one more process a rollback leaves (0 = none) */
    bool root;                          /* running as root: owners are restored too */
    cb_snap_say_fn say;                 /* where replies go */
    void *ud;                           /* its argument */
    char unavailable[CB_SNAP_WHY_MAX];  /* why there are no checkpoints here, "" = there are */
    int scan_ms;                        /* the last wait between looks for an armed fork */
    int64_t scan_at;                    /* the next look (monotonic ms) */
    cb_snap_slot_t slot[CB_SNAP_SLOTS]; /* the checkpoints */
} cb_snap_agent_t;

/* store and park are directory fds the agent takes over (-1: checkpoints
 * unavailable, with why).  Says "ready" or "unavailable WHY". */
void cb_snap_agent_init(cb_snap_agent_t *a, int store, int park, const char *home, const char *tmp,
                        pid_t runner, bool root, const char *why, cb_snap_say_fn say, void *ud);
/* Gives up the store's fd for path, opened again for each use: under gVisor
 * every /proc/PID/fd is world-listable (its procfs gives fd directories mode
 * 0555 and applies no dumpability to them), so init holds no fd of the store
 * between commands and the runner sees no trace of it there.  path must be
 * the directory store was (root-only, as its parent). */
void cb_snap_agent_store_by_path(cb_snap_agent_t *a, const char *path);
/* One command line from the kernel (untrusted only in length: the launcher
 * is its only source). */
void cb_snap_agent_command(cb_snap_agent_t *a, const char *line);
/* The same with the descriptor that came with the line (-1 = none): only
 * "export" takes one; the caller closes it afterwards. */
void cb_snap_agent_command_fd(cb_snap_agent_t *a, const char *line, int fd);
/* A waitpid(WUNTRACED) result for one of init's children: true when it was
 * the agent's (a parked copy that died, an armed fork that stopped). */
bool cb_snap_agent_child(cb_snap_agent_t *a, pid_t pid, int status);
/* Milliseconds until the next deadline, -1 for none; then call tick. */
int cb_snap_agent_wait_ms(const cb_snap_agent_t *a);
void cb_snap_agent_tick(cb_snap_agent_t *a);
/* The sandbox ends: every parked copy is killed. */
void cb_snap_agent_end(cb_snap_agent_t *a);

#endif
