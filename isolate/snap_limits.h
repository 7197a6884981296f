/*
 * snap_limits.h - bounds and fixed names of a session's checkpoints in place
 * (docs/SNAPSHOTS.md): shared by the kernel, the launcher and the trusted
 * agent inside the sandbox (tiers/snap_agent.c, also linked into the static
 * cellblock-init), so it includes nothing but the sandbox's own limits.
 */
#ifndef CB_SNAP_LIMITS_H
#define CB_SNAP_LIMITS_H

#include "isolate/sandbox_limits.h"

#define CB_SNAP_STR(x)  CB_SNAP_STR2(x) /* a constant below as a string literal */
#define CB_SNAP_STR2(x) #x

/* ---- what a session may keep ------------------------------------------------ */
#define CB_SNAP_MAX      8  /* checkpoints in place a session holds at once */
#define CB_SNAP_SLOTS    (CB_SNAP_MAX + 1) /* the agent's: one more while a name is replaced */
#define CB_SNAP_NAME_MAX 64 /* bytes of a checkpoint's name ([A-Za-z0-9._-]) */

/* ---- images of paused sessions (the kernel's store, on the host) --------------- */
#define CB_IMAGE_DIR_ROOT "/var/lib/cellblock/images"   /* the store when the kernel is root */
#define CB_IMAGE_DIR_USER ".local/share/cellblock/images" /* ... else below $HOME */
#define CB_IMAGE_ID_HEX   32                             /* an image's id: 16 random bytes */
#define CB_IMAGE_ID_SCAN  "%" CB_SNAP_STR(CB_IMAGE_ID_HEX) "s" /* sscanf of one into [HEX + 1] */
#define CB_IMAGE_KEY_LEN  32                             /* the store's MAC key (never in a sandbox) */
#define CB_IMAGE_MANIFEST_MAX (16u << 20) /* bytes of its manifest (every file of the home) */
#define CB_IMAGE_SLACK_MB 64 /* an image may exceed memory + 2 x disk by this much */
#define CB_IMAGE_ROOM_SLACK_MB 32 /* a pause wants this much free in the store beyond the memory */

/* ---- the agent's protocol (kernel -> launcher -> agent and back, text lines) -- */
#define CB_SNAP_LINE_MAX  256 /* bytes of one command or reply line */
#define CB_SNAP_NONCE_HEX 32  /* hex digits of a rollback's nonce (16 random bytes) */
#define CB_SNAP_WHY_MAX   160 /* bytes of a failure's reason */

/* ---- inside the sandbox ---------------------------------------------------------- */
#define CB_SNAP_PARK_DIR    "/opt/cellblock/park"             /* fifos the parked copies wait on */
#define CB_SNAP_PARK_OPTS   "mode=0755,size=16k,nr_inodes=64" /* its tmpfs (namespaces tier) */
#define CB_SNAP_CRIU_RUN      "/run" /* --pausable: CRIU's feature cache, mounted for a dump */
#define CB_SNAP_CRIU_RUN_MODE 0700   /* ... its directory, empty, in the read-only root */
#define CB_SNAP_AGENT_RUN   "/run/cellblock" /* the tiers' agent: a root-only tmpfs (gVisor) */
#define CB_SNAP_AGENT_SOCK  CB_SNAP_AGENT_RUN "/agent.sock" /* ... where its commands come */
#define CB_SNAP_AGENT_STORE CB_SNAP_AGENT_RUN "/store"      /* ... its checkpoints' files */
#define CB_SNAP_AGENT_QUEUE 16           /* lines the agent keeps for its next client */
#define CB_SNAP_PARK_MSG    64           /* bytes of the message that wakes a parked copy */
#define CB_SNAP_PARK_TAKEN  "k"          /* written on its fifo when the agent takes a copy */
#define CB_SNAP_FORK_MS     5000         /* an armed checkpoint's fork must park within this */
#define CB_SNAP_SCAN_MS     1            /* an awaited fork is first looked for after this */
#define CB_SNAP_SCAN_MAX_MS 32           /* ... then ever later (doubling), at most this */
#define CB_SNAP_KILL_MS     5000         /* a rollback ends the rest of the sandbox within this */
#define CB_SNAP_KILL_NAP_US 500          /* between rounds of ending it */
#define CB_SNAP_KILLED_MAX  4096         /* processes a rollback counts as ended (the pids limit) */
#define CB_SNAP_OOM_ADJ     "1000"       /* parked copies are the OOM killer's first choice */
#define CB_SNAP_FILES_MAX   65536        /* entries copied per checkpoint (a tmpfs's inodes) */
#define CB_SNAP_DEPTH_MAX   48           /* directory levels copied */
#define CB_SNAP_DENTS_BUF   4096         /* getdents64 buffer per level */
#define CB_SNAP_COPY_BUF    (128u << 10) /* file bytes copied at once */
#define CB_SNAP_PASSES      8            /* restore: passes over a directory removing extras */

#endif
