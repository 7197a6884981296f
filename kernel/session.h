/*
 * session.h - the one driver of a sandbox session, shared by the kernel and
 * `cellblock run`.
 *
 * A cb_session_t owns the launcher process and the runner's fds, checks the
 * runner's hello and protocol version, sends requests one at a time with a
 * sequence number, keeps every deadline itself (cell timeout -> interrupt ->
 * grace -> kill; hello; complete/inspect answers), reads the runner's pipes
 * and frames under pacing and budgets (pace.h) with ordering acks, checks
 * every frame with the frame table (frame.h), collects artifacts when an
 * execute ends, and restarts the sandbox after it dies, with bounded
 * retries when it cannot start at all.  It reports through callbacks and
 * registers its fds and timer on the caller's zloop; no caller reaches into
 * its fields.
 *
 * Whatever the runner sends, the session's memory is bounded (frame sizes,
 * JSON measures, one frame in hand at a time) and so is the CPU it spends
 * for it (frame and byte rates): a flooding sandbox stalls itself.
 */
#ifndef CB_SESSION_H
#define CB_SESSION_H

#include "kernel/debug_dap.h"
#include "kernel/frame.h"

#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cb_artifacts;
struct cb_launch;

typedef enum {
    CB_REQ_NONE,
    CB_REQ_EXECUTE,
    CB_REQ_COMPLETE,
    CB_REQ_INSPECT,
    CB_REQ_IS_COMPLETE,
    CB_REQ_COMM, /* a frontend's comm_open/comm_msg/comm_close: runs widget code, no reply */
} cb_req_kind_t;

typedef struct {
    const char *launcher;             /* cellblock-launcher */
    const char *python;               /* sandboxed interpreter */
    const char *runner;               /* runner.py on the host */
    const char *const *launcher_args; /* forwarded flags, NULL-terminated (borrowed) */
    long timeout_s;                   /* per execute, 0 = none */
    long memory_mb;                   /* for messages */
    uint64_t cell_output_max;         /* output bytes per execute */
    struct cb_artifacts *artifacts;   /* collector (borrowed), NULL = off */
    const char *preload;              /* modules to import while idle, or NULL */
} cb_session_cfg_t;

/* How a request ended (on_end). */
typedef struct {
    cb_req_kind_t kind;       /* what it was */
    const cb_rframe_t *frame; /* done, *_reply or bad_request; NULL when none came */
    const char *ename;        /* set when the sandbox ended it: SandboxError, TimeoutError, ... */
    const char *message;      /* ... and why, as a sentence for the user */
    bool timed_out;           /* the cell's timeout interrupted it */
    bool setup_failed;        /* the sandbox never came up for it */
    json_t *artifacts;        /* execute: summary of the artifacts published (borrowed) */
} cb_req_end_t;

typedef struct {
    /* The runner said hello (the banner facts changed). */
    void (*on_ready)(void *ud);
    /* Output of the runner's stdout (0) or stderr (1): valid UTF-8.  late:
     * it does not belong to the request in flight (cb_session_runner_seq
     * names the one it does). */
    void (*on_stream)(void *ud, int which, const char *text, size_t len, bool late);
    /* A checked output frame: display, update_display, execute_result,
     * clear_output, error, input_request.  late: it belongs to no request in
     * flight (f->seq names the one it claims). */
    void (*on_frame)(void *ud, const cb_rframe_t *f, bool late);
    /* One artifact bundle of the execute in flight, as soon as it is built. */
    void (*on_artifact)(void *ud, const json_t *bundle);
    /* The request in flight is over. */
    void (*on_end)(void *ud, const cb_req_end_t *e);
    /* The sandbox ended while idle (a sentence for the user). */
    void (*on_gone)(void *ud, const char *message);
    /* A budget ran out: a line for the user's stderr. */
    void (*on_notice)(void *ud, const char *text, bool late);
    /* The sandbox ended: whatever it held (comms) is gone.  Called before
     * the request in flight, if any, ends. */
    void (*on_lost)(void *ud);
    /* A checked DAP response or event from the debugger's channel (m
     * borrowed; events are charged to the budgets, both are paced), or NULL:
     * the channel closed (the sandbox ended or broke it). */
    void (*on_debug)(void *ud, const cb_dap_msg_t *m);
} cb_session_cbs_t;

typedef struct cb_session cb_session_t;

/* NULL on out of memory.  cfg and loop are borrowed and must outlive it. */
cb_session_t *cb_session_new(const cb_session_cfg_t *cfg, const cb_session_cbs_t *cbs, void *ud,
                             zloop_t *loop);
/* Tears the sandbox down (bounded wait) and frees; idempotent, nulls *self_p. */
void cb_session_destroy(cb_session_t **self_p);
/* Starts a sandbox unless one is up or starting.  0 ok, -1 it cannot (see
 * cb_session_fatal). */
int cb_session_start(cb_session_t *s);
/* Sends a request (frame: an object with "type" and its members; stolen).
 * The session adds "seq".  0 sent or queued until the runner is up; -1 the
 * sandbox cannot run it now (cb_session_fatal says why; no on_end follows). */
int cb_session_request(cb_session_t *s, cb_req_kind_t kind, json_t *frame);
cb_req_kind_t cb_session_current(const cb_session_t *s);
/* The sequence number of the request in flight (or of the last one). */
json_int_t cb_session_seq(const cb_session_t *s);
/* The request the runner last said it started: late pipe output is its. */
json_int_t cb_session_runner_seq(const cb_session_t *s);
/* Answers the runner's input_request: value, or error when NULL. */
void cb_session_input_reply(cb_session_t *s, const char *value, const char *error);
/* SIGINT for the execute in flight (nothing otherwise). */
void cb_session_interrupt(cb_session_t *s);
/* The launcher may have exited (SIGCHLD): reap it and react. */
void cb_session_reap(cb_session_t *s);
/* Stop (true) or resume reading the runner: the caller's sink is congested. */
void cb_session_pause(cb_session_t *s, bool paused);
/* Stop restarting sandboxes (shutting down). */
void cb_session_quit(cb_session_t *s);

/* For tests (tests/unit/test_session.c): adopts a process and fds as if
 * they were a freshly spawned launcher's (fds are taken over, -1 = none). */
void cb_session_adopt(cb_session_t *s, pid_t pid, int out_fd, int err_fd, int ev_fd, int rep_fd);
/* ... and the debugger's channel (taken over). */
void cb_session_adopt_debug(cb_session_t *s, int dbg_fd);

/* Facts for banners, "" when unknown. */
const char *cb_session_isolation(const cb_session_t *s);
const char *cb_session_fatal(const cb_session_t *s);
const char *cb_session_python_version(const cb_session_t *s);
const char *cb_session_shell(const cb_session_t *s);
const char *cb_session_shell_version(const cb_session_t *s);
/* Output dropped because a budget ran out, in bytes, since the sandbox started. */
uint64_t cb_session_dropped(const cb_session_t *s);
/* The running launcher (for kernel/netctl.c and the costs), NULL when none. */
struct cb_launch *cb_session_launcher(cb_session_t *s);
/* The runner said hello: the launcher is supervising, and answers requests. */
bool cb_session_ready(const cb_session_t *s);

/* ---- checkpoints in place (session_snap.c; docs/SNAPSHOTS.md) ----------------------
 * The session runs one operation at a time with the sandbox's trusted agent
 * (through the launcher) and the runner; requests wait meanwhile.  Ids are
 * the caller's (the kernel keeps names, counts and times). */
typedef enum {
    CB_SNAP_NONE,
    CB_SNAP_CHECKPOINT, /* a fork parked in the sandbox */
    CB_SNAP_ROLLBACK,   /* back to one */
    CB_SNAP_DROP,       /* forget one */
    CB_SNAP_PAUSE,      /* the whole sandbox into an image on disk; the sandbox ends */
} cb_snap_op_t;

typedef struct {
    cb_snap_op_t op;     /* what finished */
    long id;             /* of which checkpoint */
    bool ok;             /* it worked */
    const char *why;     /* else why, for the user */
    bool sandbox_lost;   /* a rollback failed half-way: the sandbox was replaced */
    bool in_cell;        /* asked for by the cell in flight, whose reply waits for it */
    uint64_t bytes;      /* checkpoint: bytes of its files; pause: of the image */
    uint32_t files;      /* ... and their number */
    long threads;        /* checkpoint: threads of the code the copy lacks (the runner's word) */
    int ended;           /* rollback: processes of the sandbox it ended */
    bool ended_request;  /* rollback: it ended the request in flight */
} cb_snap_result_t;

typedef struct {
    void (*on_done)(void *ud, const cb_snap_result_t *r);
    /* A checkpoint is gone (id 0: all of them, the sandbox ended). */
    void (*on_lost)(void *ud, long id, const char *why);
    /* The cell in flight asks for an operation (a snapshot_request frame):
     * the callee may answer with cb_session_snap_after_cell. */
    void (*on_request)(void *ud, const cb_rframe_t *f);
} cb_snap_cbs_t;

void cb_session_snap_attach(cb_session_t *s, const cb_snap_cbs_t *cbs, void *ud);
/* Starts op on checkpoint id.  0 started (on_done follows), -1 not now, with why. */
int cb_session_snap(cb_session_t *s, cb_snap_op_t op, long id, char *why, size_t why_len);
/* Runs op once the cell in flight has ended, before its end is reported. */
void cb_session_snap_after_cell(cb_session_t *s, cb_snap_op_t op, long id);
/* The cell in flight asked for an operation that cannot be done: it ends
 * with a CheckpointError saying why (copied). */
void cb_session_snap_refuse_cell(cb_session_t *s, const char *why);
bool cb_session_snap_busy(const cb_session_t *s);
/* 1 available, 0 not (cb_session_snap_why says why), -1 not known yet. */
int cb_session_snap_available(const cb_session_t *s);
const char *cb_session_snap_why(const cb_session_t *s);
/* 1 the sandbox can be paused into an image, else 0 (-1 not known yet). */
int cb_session_snap_pausable(const cb_session_t *s);
/* Why the tier said it cannot pause on this host ("" when it did not). */
const char *cb_session_snap_pause_why(const cb_session_t *s);
/* Pauses the sandbox (the runner idle) into the image directory dir, open
 * at fd (borrowed, kept until on_done): the tier writes it, the launcher
 * seals it, the sandbox ends, and the next start resumes from it.  ckpt > 0
 * (the namespaces tier, CRIU): a checkpoint in place of that id is taken
 * first and its parked copy is what the launcher dumps.  0 started
 * (on_done: CB_SNAP_PAUSE), -1 with why. */
int cb_session_snap_pause(cb_session_t *s, const char *id, const char *dir, int fd, long ckpt,
                          char *why, size_t why_len);
/* The next sandbox is started from this verified image directory. */
void cb_session_resume_from(cb_session_t *s, const char *dir);
/* No sandbox is started, ever, and every request says why (an image that
 * was to be resumed is refused). */
void cb_session_refuse_start(cb_session_t *s, const char *why);
/* The debugger's channel (docs/RUNNER_PROTOCOL.md section 4, session_dbg.c).
 * True while a sandbox (started, or starting) has it. */
bool cb_session_debug_open(const cb_session_t *s);
/* Queues one DAP request (borrowed) for the runner.  0 ok, -1 no channel,
 * too large, or too much queued already; -1 also when writing it found the
 * channel broken: it is closed then, and on_debug(NULL) has run. */
int cb_session_debug_send(cb_session_t *s, const json_t *msg);
/* From the hello: the cells' file prefix ("" before it), and whether the
 * runner can run the debugger. */
const char *cb_session_cell_prefix(const cb_session_t *s);
bool cb_session_debugger(const cb_session_t *s);
/* A sandbox is starting: its hello (and so its cell prefix) is still to come. */
bool cb_session_starting(const cb_session_t *s);
/* The execute in flight is stopped at a breakpoint (true) or runs again:
 * its --timeout clock pauses meanwhile, for CB_DEBUG_HOLD_MAX_MS in all. */
void cb_session_hold_deadline(cb_session_t *s, bool hold);
/* A rollback is replacing the runner (its processes have ended): what the
 * debugger's channel holds either way is dropped, and its input from now on
 * up to the woken copy's frame {"type":"cellblock_resumed","nonce":NONCE}
 * (docs/RUNNER_PROTOCOL.md section 4); more than CB_DAP_DRAIN_MAX bytes
 * before it close the channel. */
void cb_session_debug_resync(cb_session_t *s, const char *nonce);

#endif
