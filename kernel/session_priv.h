/*
 * session_priv.h - the session driver's state, shared by its files:
 * session.c (the sandbox's life, requests, the runner's frames),
 * session_loop.c (the fds polled and the deadlines on the zloop),
 * session_io.c (reading the runner under pacing and budgets, the ack
 * discipline, writing frames), session_dbg.c (the debugger's channel) and
 * session_snap.c (checkpoints).  Nothing else includes it.
 */
#ifndef CB_SESSION_PRIV_H
#define CB_SESSION_PRIV_H

#include "kernel/bounds.h"
#include "kernel/launch.h"
#include "kernel/pace.h"
#include "kernel/session.h"
#include "kernel/stream.h"
#include "isolate/snap_limits.h"

#define S_FACT_MAX 64 /* bytes of a fact from hello (versions, shell name) */
#define CB_SNAP_PAUSE_WHY_MAX 400 /* bytes of why the tier cannot pause on this host */

typedef enum { S_DOWN, S_STARTING, S_READY, S_DYING } s_state_t;

/* A checkpoint operation in progress (session_snap.c). */
typedef struct {
    const cb_snap_cbs_t *cbs;          /* the caller's, NULL = none attached */
    void *ud;                          /* their argument */
    int available;                     /* the agent said: 1 ready, 0 unavailable, -1 not yet */
    char why[CB_SNAP_WHY_MAX];         /* ... why not */
    cb_snap_op_t op;                   /* in progress, CB_SNAP_NONE = none */
    long id;                           /* its checkpoint */
    json_int_t seq;                    /* checkpoint: the runner's request number */
    int phase;                         /* session_snap.c's S_PH_* */
    int64_t deadline_ms;               /* it fails then */
    bool runner_done, agent_done;      /* checkpoint: both sides answered */
    bool in_cell;                      /* the cell in flight asked for it */
    cb_snap_result_t res;              /* what on_done will say */
    char fail[CB_SNAP_WHY_MAX];        /* the failure's reason (res.why points here) */
    char nonce[CB_SNAP_NONCE_HEX + 1]; /* rollback: the frame the resumed copy sends */
    uint8_t *pattern;                  /* ... its exact bytes, scanned for */
    size_t pattern_len;                /* their length */
    cb_snap_op_t after_op;             /* asked by the cell in flight: run at its end */
    long after_id;                     /* ... on this checkpoint */
    bool after_refused;                /* ... or it asked for one refused (why in fail) */
    cb_rframe_t held;                  /* that cell's done, held meanwhile (root owned) */
    int pausable;                      /* the tier said it can write an image: 1 */
    char pause_why[CB_SNAP_PAUSE_WHY_MAX]; /* ... or why it cannot on this host (0) */
    bool paused;                       /* the sandbox ended for a pause: start anew only on demand */
    char resume_dir[CB_PATH_MAX];      /* start the next sandbox from this image, "" = none */
    bool resuming;                     /* the sandbox now starting is restored from it */
    bool resume_sent;                  /* ... and its runner was told so (its nonce) */
    bool clone;                        /* this sandbox came from an image (reseed after rollbacks) */
    char pause_id[CB_IMAGE_ID_HEX + 1]; /* pause: the image being written */
    char pause_dir[CB_PATH_MAX];       /* ... its directory */
    int pause_fd;                      /* ... open (the caller's) */
    long pause_ckpt;                   /* ... the checkpoint in place it is dumped from (CRIU), 0 */
    char refuse[CB_LAUNCH_TEXT_MAX];   /* no start at all, and why ("" = starts) */
} s_snap_t;
enum { S_FD_OUT, S_FD_ERR, S_FD_EV, S_FD_REP, S_FD_DBG, S_FD_COUNT };

struct cb_session {
    const cb_session_cfg_t *cfg;        /* borrowed */
    cb_session_cbs_t cbs;               /* callbacks */
    void *ud;                           /* their argument */
    zloop_t *loop;                      /* borrowed */
    cb_launch_t proc;                   /* the launcher and its fds */
    s_state_t state;                    /* see above */
    bool quitting;                      /* no more starts */
    zmq_pollitem_t reg[S_FD_COUNT];     /* what is registered on the loop (events 0 = none) */
    int timer_id;                       /* the one timer, -1 when none */
    int64_t timer_at;                   /* when it fires */
    cb_stream_t streams[2];             /* stdout, stderr */
    uint8_t *in;                        /* event bytes read, not yet handled */
    size_t in_off;                      /* bytes of `in` already handled */
    size_t in_len, in_cap;              /* used / allocated */
    uint8_t *out;                       /* frames to write */
    size_t out_len, out_off;            /* queued / written */
    bool out_broken;                    /* a write failed: the runner takes no more frames */
    bool ack_pending;                   /* an ack sent that the runner may not have read */
    int64_t ack_check_ms;               /* look again then (backs off while unread) */
    int ack_backoff;                    /* rechecks in a row */
    bool paused;                        /* the caller's sink is congested */
    cb_bucket_t frames, bytes;          /* rates */
    cb_budget_t cell, idle, life;       /* output budgets */
    uint64_t dropped;                   /* output bytes dropped for budgets */
    char broke[128];                    /* how the runner broke the protocol, "" if not */
    cb_req_kind_t req;                  /* request in flight */
    json_t *req_frame;                  /* ... not yet sent (waiting for hello) */
    json_int_t seq;                     /* its sequence number */
    json_int_t runner_seq;              /* the execute the runner said it started last */
    int64_t deadline_ms, grace_ms;      /* execute timeout phases / assist deadline */
    bool timed_out;                     /* the timeout interrupted it */
    bool waiting_input;                 /* an input_request is unanswered */
    char isolation[CB_LAUNCH_TEXT_MAX]; /* last isolation report */
    char fatal[CB_LAUNCH_TEXT_MAX];     /* last set-up failure */
    char python_version[S_FACT_MAX];    /* from hello */
    char shell[S_FACT_MAX];             /* from hello */
    char shell_version[S_FACT_MAX];     /* from hello */
    bool was_ready;                     /* the current sandbox said hello */
    int failures;                       /* failed starts in a row */
    int64_t retry_at_ms;                /* next start after a failure, 0 = none */
    int64_t tried_ms;                   /* last start */
    s_snap_t snap;                      /* checkpoints in place (session_snap.c) */
    /* the debugger's channel (session_dbg.c) */
    uint8_t *dbg_in;                       /* bytes read, not yet handled */
    size_t dbg_in_len, dbg_in_cap;         /* used / allocated */
    uint8_t *dbg_out;                      /* frames to write */
    size_t dbg_out_len, dbg_out_off;       /* queued / written */
    bool dbg_need;                         /* what is buffered needs more bytes to be handled */
    uint8_t *dbg_mark;                     /* after a rollback: input dropped up to this frame */
    size_t dbg_mark_len, dbg_dropped;      /* its bytes; bytes dropped looking for it */
    char cell_prefix[CB_CELL_PREFIX_MAX];  /* from hello */
    bool debugger;                         /* from hello */
    int64_t deadline_base;                 /* the execute's deadline before holds */
    int64_t hold_at;                       /* stopped at a breakpoint since, 0 = not */
    int64_t held_ms;                       /* the execute's time held so far */
};

/* Event bytes read and not yet handled. */
static inline size_t cb_sio_pending(const cb_session_t *s) { return s->in_len - s->in_off; }

/* session_io.c */
void cb_sio_reset(cb_session_t *s, int64_t now);
/* The launcher's isolation line, once it has read it, is the session's
 * (kept past the launcher: the banner names the last sandbox's layers). */
static inline void cb_sio_take_isolation(cb_session_t *s) {
    if (s->proc.isolation[0]) snprintf(s->isolation, sizeof s->isolation, "%s", s->proc.isolation);
}
uint64_t cb_sio_charge(cb_session_t *s, uint64_t n, bool late);
void cb_sio_notice(cb_session_t *s, cb_budget_t *b, bool late, const char *text);
void cb_sio_publish_stream(cb_session_t *s, int which, bool final);
void cb_sio_read_pipe(cb_session_t *s, int which, bool all);
void cb_sio_drain(cb_session_t *s, bool final);
/* What a nonblocking socket takes of data[0..n) now: the bytes written, or
 * -1 (errno) on an error other than EAGAIN. */
ssize_t cb_sio_write_some(int fd, const uint8_t *data, size_t n);
/* Writes what it can of a queue (*len bytes, *off already written); frees
 * it once all is written.  0 ok (also when it would block), -1 a write error. */
int cb_sio_write_queue(int fd, uint8_t **buf, size_t *len, size_t *off);
void cb_sio_flush_out(cb_session_t *s);
int cb_sio_send(cb_session_t *s, const json_t *frame);
void cb_sio_send_ack(cb_session_t *s);
bool cb_sio_ack_unread(cb_session_t *s);
void cb_sio_process(cb_session_t *s);
void cb_sio_read_events(cb_session_t *s);
/* One read of up to CB_FRAME_IN_CHUNK bytes from fd onto *buf (grown up to
 * max bytes): >0 bytes appended to *len, 0 end of file, -1 nothing now
 * (EAGAIN, out of memory), -2 full (handle what is there), -3 a read error. */
ssize_t cb_sio_read_chunk(int fd, uint8_t **buf, size_t *len, size_t *cap, size_t max);

/* session_snap.c */
void cb_sio_snap_spawned(cb_session_t *s);       /* a launcher was just spawned */
void cb_sio_snap_reports(cb_session_t *s);       /* the launcher's reports were read */
bool cb_sio_snap_gone(cb_session_t *s);          /* the sandbox ended; true: for a pause */
const char *cb_sio_snap_start(cb_session_t *s); /* before a spawn: an image to resume, or NULL */
bool cb_sio_snap_blocks(const cb_session_t *s);  /* requests must wait */
bool cb_sio_snap_frame(cb_session_t *s, const cb_rframe_t *f); /* true: it was the agent's */
bool cb_sio_snap_hold(cb_session_t *s, const cb_rframe_t *f);  /* a done held for an op */
bool cb_sio_snap_resync(cb_session_t *s);        /* false: input discarded, wait */
/* A rollback in progress ends the request in flight, or the cell's done is
 * held for an operation: nothing else ends it. */
bool cb_sio_snap_owns_request(const cb_session_t *s);
/* The cell in flight ends (why: how, for the user): an operation it asked
 * for and that did not start is not run; on_done says so. */
void cb_sio_snap_cell_ended(cb_session_t *s, const char *why);
int64_t cb_sio_snap_deadline(const cb_session_t *s);
void cb_sio_snap_tick(cb_session_t *s, int64_t now);
void cb_sio_snap_fini(cb_session_t *s);

/* session.c */
/* The runner is up (its hello, or a restored runner's resumed): facts for the banner. */
void cb_sio_ready(cb_session_t *s, const cb_rframe_facts_t *facts);
void cb_sio_end_request(cb_session_t *s, const cb_rframe_t *f, const char *ename, const char *msg,
                        bool setup);
void cb_sio_send_request(cb_session_t *s);
/* A launcher spawned when the session is down: 0 (or one is up), -1 with
 * the cause in s->fatal. */
int cb_sio_spawn(cb_session_t *s);

/* session_dbg.c */
void cb_sdbg_read(cb_session_t *s);
void cb_sdbg_process(cb_session_t *s);
void cb_sdbg_flush(cb_session_t *s);
void cb_sdbg_reset(cb_session_t *s);
void cb_sdbg_facts(cb_session_t *s, const char *cell_prefix, bool debugger); /* hello's */
bool cb_sdbg_pending(const cb_session_t *s);

/* session_loop.c: registers exactly the fds the session may read now, and
 * its next deadline */
void cb_session_sync(cb_session_t *s);

/* session.c */
bool cb_sio_in_exec(const cb_session_t *s);
bool cb_sio_pipes_current(const cb_session_t *s);
void cb_sio_kill(cb_session_t *s, int sig);
void cb_sio_frame(cb_session_t *s, const cb_rframe_t *f);
/* A frame the frame table refused (f: its type and seq, nothing else; why:
 * the reason): a reply to the request in flight ends that request at once
 * with a SandboxError naming the reason, instead of leaving it to its
 * deadline; anything else changes nothing (the caller logged it). */
void cb_sio_refused(cb_session_t *s, const cb_rframe_t *f, const char *why);

#endif
