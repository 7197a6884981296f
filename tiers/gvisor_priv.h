/*
 * gvisor_priv.h - what gvisor.c (planning, start) and gvisor_snap.c (the
 * supervisor's loop: signals, checkpoint commands, pause and restore) share.
 */
#ifndef CB_TIERS_GVISOR_PRIV_H
#define CB_TIERS_GVISOR_PRIV_H

#include <poll.h>
#include <stdbool.h>

#include "isolate/seccomp_filter.h"
#include "tiers/tier_impl.h"

struct cb_gvisor {
    const cb_options_t *opts; /* borrowed */
    char runsc[CB_PATH_MAX];  /* host path of runsc */
    char init[CB_PATH_MAX];   /* host path of cellblock-init */
    char *config;             /* config.json text (owned) */
    size_t config_len;        /* its length */
    cb_tier_argv_t run[2];    /* runsc ... run: [0] as root, [1] --rootless (user ns) */
    cb_tier_argv_t kill[2];   /* runsc ... kill cellblock INT, same two */
    cb_tier_argv_t ckpt[2];   /* runsc ... checkpoint --image-path=/proc/self/fd/3 cellblock */
    bool ckpt_raw;            /* this runsc's checkpoint can leave the memory uncompressed */
    bool systrap;             /* this runsc has the systrap platform (else: ptrace) */
    cb_tier_argv_t agent[2];  /* runsc ... exec --user 0:0 cellblock cellblock-init --agent */
    int image_fd;             /* --resume-image: the verified image directory, else -1 */
    cb_tier_argv_t env;       /* runsc's environment */
    cb_seccomp_t filter;      /* the namespaces tier's allowlist, also applied inside gVisor */
};

/* gvisor_dbg.c: the debugger's channel, copied between the connection
 * cellblock-init makes from inside gVisor and the kernel's socket. */
typedef struct {
    int lfd;  /* listening, until the one connection came (-1 after) */
    int conn; /* that connection (-1 none yet, or gone) */
    int kfd;  /* the kernel's socket, CB_FD_DEBUG (-1 none, or gone) */
    bool detaching; /* init was told to hang up for a pause: its end is not the channel's */
} cb_gvisor_dbg_t;
#define CB_GVISOR_DBG_NPOLL 3 /* pollfd entries it uses */
/* Before runsc starts: listens when on.  0 ok (also when off), -1. */
int cb_gvisor_dbg_open(cb_gvisor_dbg_t *d, bool on);
/* Listens again (a pause failed: init dials back).  0 ok, -1. */
int cb_gvisor_dbg_listen(cb_gvisor_dbg_t *d);
/* Stops listening (a pause: init's next dial must find no one). */
void cb_gvisor_dbg_unlisten(cb_gvisor_dbg_t *d);
/* Fills its pollfd entries (fd -1 where nothing is to wait for). */
void cb_gvisor_dbg_events(const cb_gvisor_dbg_t *d, struct pollfd pf[CB_GVISOR_DBG_NPOLL]);
/* After poll: accepts, moves bytes, closes what ended. */
void cb_gvisor_dbg_step(cb_gvisor_dbg_t *d, const struct pollfd pf[CB_GVISOR_DBG_NPOLL]);

/* gvisor_snap.c, in the runner's slot (no malloc): the supervisor's loop
 * once `runsc run|restore` (pid run) is started, also copying the
 * debugger's channel.  Never returns. */
__attribute__((noreturn)) void cb_gvisor_supervise(const cb_gvisor_t *g, pid_t run, int rootless,
                                                   cb_gvisor_dbg_t *dbg);
/* runsc's log's tail to fd (runsc failed: the kernel shows the runner's stderr). */
void cb_gvisor_log_tail(int fd);
/* Before `runsc restore`: the image's copy of the home into the sandbox's
 * home.  0 ok, -1. */
int cb_gvisor_restore_home(const cb_gvisor_t *g);

#endif
