/*
 * session.c - the sandbox session driver (see session.h).
 *
 * Life of a sandbox: DOWN -> STARTING (launcher spawned) -> READY (hello
 * accepted) -> DYING (killed or ended, launcher not reaped yet) -> DOWN.
 * A request is queued until READY, sent with the next sequence number, and
 * ends with the runner's answer for that number, a deadline, or the
 * sandbox's end; then the next sandbox is started at once, or, after a
 * failed start, after a back-off, at most CB_SESSION_START_TRIES times in a
 * row.
 *
 * Intake (session_io.c; registered by session_loop.c): the runner's pipes
 * and event socket are registered on the zloop only while the session may
 * read them: not paused by the caller, the frame and byte buckets not
 * empty, and at most one frame's worth of bytes buffered.  A frame is handled only once the runner has read the ack of
 * the previous ordered frame (a well-behaved runner always has: it waits for
 * it), so a runner that writes frames without reading its acks gets one
 * frame handled per ack it reads.  Before a frame is handled the pipes are
 * drained, so output keeps its order.
 */
#include "kernel/session_priv.h"

#include "artifacts/artifacts.h"
#include "isolate/cgroup.h"
#include "isolate/cb_limits.h"
#include "isolate/log.h"
#include "isolate/util.h"
#include "launcher/flags.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

/* A request's end when its reply was refused: the reason (at most
 * CB_NOTICE_MAX) and a sentence around it. */
#define S_REFUSED_MSG_MAX (CB_NOTICE_MAX + 64)

static void s_end_request(cb_session_t *s, const cb_rframe_t *f, const char *ename, const char *msg,
                          bool setup);

/* ---- small helpers -------------------------------------------------------------- */

/* A request that runs user code (a cell, or a widget's comm handler) is in
 * flight and was sent. */
bool cb_sio_in_exec(const cb_session_t *s) {
    return (s->req == CB_REQ_EXECUTE || s->req == CB_REQ_COMM) && !s->req_frame;
}

/* Pipe output belongs to the execute in flight once the runner has said it
 * started it; before that it is the previous cell's (late). */
bool cb_sio_pipes_current(const cb_session_t *s) {
    return cb_sio_in_exec(s) && s->runner_seq == s->seq;
}

/* ---- frames to the runner ---------------------------------------------------------- */

static void s_send_request(cb_session_t *s) {
    if (s->req_frame == NULL || s->state != S_READY || cb_sio_snap_blocks(s)) return;
    json_t *f = s->req_frame;
    s->req_frame = NULL;
    json_object_set_new(f, "seq", json_integer(s->seq));
    int64_t now = cb_now_ms();
    if (s->req == CB_REQ_EXECUTE || s->req == CB_REQ_COMM)
        s->deadline_ms = s->cfg->timeout_s > 0 ? now + s->cfg->timeout_s * 1000 : 0;
    else
        s->deadline_ms = now + CB_ASSIST_TIMEOUT_MS;
    s->deadline_base = s->deadline_ms;
    s->hold_at = s->held_ms = 0;
    if (cb_sio_send(s, f) < 0) {
        json_decref(f);
        s_end_request(s, NULL, "KernelError", "the request could not be handed to the sandbox",
                      false);
        return;
    }
    json_decref(f);
}

/* ---- the sandbox's life --------------------------------------------------------------- */

void cb_sio_kill(cb_session_t *s, int sig) {
    cb_launch_signal(&s->proc, sig);
    if (s->state == S_STARTING || s->state == S_READY) s->state = S_DYING;
}

/* Spawns a launcher when the session is down: 0 (also when one is up), -1
 * with the cause in s->fatal. */
int cb_sio_spawn(cb_session_t *s) {
    if (s->state != S_DOWN || s->quitting) return s->state == S_DOWN ? -1 : 0;
    int64_t now = cb_now_ms();
    s->tried_ms = now;
    s->retry_at_ms = 0;
    cb_sio_reset(s, now);
    if (s->snap.refuse[0]) { /* an image that was to be resumed is refused: no other start */
        snprintf(s->fatal, sizeof s->fatal, "%s", s->snap.refuse);
        s->failures = CB_SESSION_START_TRIES;
        return -1;
    }
    cb_launch_cfg_t lc = {s->cfg->launcher, s->cfg->python, s->cfg->runner, s->cfg->launcher_args,
                          cb_sio_snap_start(s)};
    if (cb_launch_spawn(&s->proc, &lc) < 0) {
        snprintf(s->fatal, sizeof s->fatal, "could not start %.400s", s->cfg->launcher);
        s->failures++;
        return -1;
    }
    s->state = S_STARTING;
    cb_sio_snap_spawned(s);
    return 0;
}

/* The launcher is reaped: end what was in flight, then start anew (or not). */
static void s_gone(cb_session_t *s) {
    cb_launch_read_reports(&s->proc);
    cb_sio_drain(s, true);
    bool setup = s->proc.fatal[0] != 0 || !s->was_ready;
    cb_sio_take_isolation(s);
    char how[CB_LAUNCH_TEXT_MAX], msg[CB_LAUNCH_TEXT_MAX * 3];
    cb_launch_describe_exit(&s->proc, how, sizeof how);
    static const char lost[] = "A fresh sandbox was started: all variables, imports and files "
                               "of the previous one are lost.";
    const char *ename = "SandboxError";
    if (s->proc.fatal[0]) {
        snprintf(s->fatal, sizeof s->fatal, "%s", s->proc.fatal);
        snprintf(msg, sizeof msg, "The sandbox could not be started: %s", s->proc.fatal);
    } else if (setup) {
        if (s->broke[0])
            snprintf(s->fatal, sizeof s->fatal, "the runner broke the kernel's frame protocol (%s)",
                     s->broke);
        else
            snprintf(s->fatal, sizeof s->fatal,
                     "the sandbox's Python process %.400s before it was ready", how);
        snprintf(msg, sizeof msg, "The sandbox could not be started: %s", s->fatal);
    } else if (s->broke[0]) {
        snprintf(msg, sizeof msg,
                 "The sandbox's Python process broke the kernel's frame protocol (%s) and was "
                 "stopped. %s",
                 s->broke, lost);
    } else if (s->timed_out && (s->req == CB_REQ_EXECUTE || s->req == CB_REQ_COMM)) {
        ename = "TimeoutError";
        snprintf(msg, sizeof msg,
                 "The cell exceeded its time limit of %ld s (--timeout) and did not stop when "
                 "interrupted, so the sandbox was killed. %s",
                 s->cfg->timeout_s, lost);
    } else if (s->proc.oom) {
        ename = "MemoryError";
        snprintf(msg, sizeof msg,
                 "The sandbox ran out of memory (limit %ld MiB, --memory) and its Python process "
                 "was killed. %s",
                 s->cfg->memory_mb, lost);
    } else {
        snprintf(msg, sizeof msg, "The sandbox's Python process %s. %s", how, lost);
    }
    LOG_W("sandbox ended: %s", how);
    s->failures = setup ? s->failures + 1 : 0;
    bool had_debugger = s->proc.dbg_fd >= 0;
    cb_launch_close_fds(&s->proc);
    cb_sdbg_reset(s);
    s->state = S_DOWN;
    if (had_debugger && s->cbs.on_debug) s->cbs.on_debug(s->ud, NULL);
    if (cb_sio_snap_gone(s)) { /* paused: nothing is lost, the next request resumes it */
        s->failures = 0;
        if (s->cfg->artifacts) cb_artifacts_reset(s->cfg->artifacts);
        LOG_I("the sandbox ended after its pause");
        if (s->req != CB_REQ_NONE && !s->quitting) (void) cb_sio_spawn(s); /* it asks to resume */
        return;
    }
    if (s->was_ready && s->cbs.on_lost) s->cbs.on_lost(s->ud);
    if (s->req != CB_REQ_NONE)
        s_end_request(s, NULL, ename, msg, setup);
    else if (!s->quitting && s->cbs.on_gone)
        s->cbs.on_gone(s->ud, msg);
    if (s->cfg->artifacts) cb_artifacts_reset(s->cfg->artifacts);
    if (s->quitting) return;
    if (!setup)
        (void) cb_sio_spawn(s);
    else if (s->failures < CB_SESSION_START_TRIES)
        s->retry_at_ms = cb_now_ms() + ((int64_t) CB_SESSION_BACKOFF_MS << (s->failures - 1));
    else
        LOG_E("the sandbox failed to start %d times in a row; not retrying until a cell asks",
              s->failures);
}

/* ---- requests ending ---------------------------------------------------------------------- */

static void s_emit_artifact(void *ud, const json_t *bundle) {
    cb_session_t *s = ud;
    if (s->cbs.on_artifact) s->cbs.on_artifact(s->ud, bundle);
}

static void s_end_request(cb_session_t *s, const cb_rframe_t *f, const char *ename, const char *msg,
                          bool setup) {
    cb_req_kind_t kind = s->req;
    json_auto_t *summary = NULL;
    if (kind == CB_REQ_EXECUTE) {
        cb_sio_drain(s, true);
        if (s->cfg->artifacts && s->proc.workdir_fd >= 0)
            json_decref(cb_artifacts_collect_each(s->cfg->artifacts, s->proc.workdir_fd,
                                                  s_emit_artifact, s, &summary));
    }
    /* an operation the cell asked for runs only after its own done */
    if (kind == CB_REQ_EXECUTE)
        cb_sio_snap_cell_ended(s, msg ? msg : "the cell ended without its reply");
    cb_req_end_t e = {kind, f, ename, msg, s->timed_out, setup, summary};
    s->req = CB_REQ_NONE;
    json_decref(s->req_frame);
    s->req_frame = NULL;
    s->deadline_ms = s->grace_ms = 0;
    s->hold_at = 0;
    s->timed_out = s->waiting_input = false;
    cb_budget_init(&s->idle, CB_SESSION_IDLE_OUTPUT);
    if (s->cbs.on_end) s->cbs.on_end(s->ud, &e);
}

void cb_sio_end_request(cb_session_t *s, const cb_rframe_t *f, const char *ename, const char *msg,
                        bool setup) {
    s_end_request(s, f, ename, msg, setup);
}

void cb_sio_send_request(cb_session_t *s) { s_send_request(s); }

/* ---- frames from the runner ------------------------------------------------------------- */

static void s_hello(cb_session_t *s, const cb_rframe_t *f) {
    if (f->u.hello.version != CB_RUNNER_PROTOCOL_VERSION) {
        LOG_E("runner speaks frame protocol %lld, kernel %d: stopping it",
              (long long) f->u.hello.version, CB_RUNNER_PROTOCOL_VERSION);
        snprintf(s->broke, sizeof s->broke, "wrong protocol version");
        cb_sio_kill(s, SIGKILL);
        return;
    }
    cb_sio_ready(s, &f->u.hello.facts);
}

void cb_sio_ready(cb_session_t *s, const cb_rframe_facts_t *x) {
#define S_FACT(dst, v) snprintf(dst, sizeof dst, "%.*s", (int) sizeof dst - 1, (v) ? (v) : "")
    S_FACT(s->python_version, x->python_version);
    S_FACT(s->shell, x->shell);
    S_FACT(s->shell_version, x->shell_version);
#undef S_FACT
    cb_sdbg_facts(s, x->cell_prefix, x->debugger != 0);
    /* no cell has run: what the working dir holds now (a --workdir-source
     * folder) is the baseline, not artifacts; the workdir report came first */
    cb_launch_read_reports(&s->proc);
    /* a warm runner can say hello before the launcher's isolation line is
     * read (it may even be written after): s_on_fd takes it then too */
    cb_sio_take_isolation(s);
    if (s->cfg->artifacts && s->proc.workdir_fd >= 0)
        (void) cb_artifacts_baseline(s->cfg->artifacts, s->proc.workdir_fd);
    s->state = S_READY;
    s->was_ready = true;
    s->failures = 0;
    s->fatal[0] = '\0';
    LOG_I("runner ready after %lld ms (Python %s, shell %s)",
          (long long) (cb_now_ms() - s->proc.started_ms), s->python_version, s->shell);
    if (s->cbs.on_ready) s->cbs.on_ready(s->ud);
    if (s->req == CB_REQ_NONE && s->cfg->preload) {
        /* nothing waiting: let the runner import ahead of the first cell */
        json_auto_t *mods = json_array();
        char buf[CB_FLAG_VALUE_MAX];
        snprintf(buf, sizeof buf, "%s", s->cfg->preload);
        char *save = NULL;
        for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
            json_array_append_new(mods, json_string(t));
        json_auto_t *pf = json_pack("{s:s, s:O}", "type", "preload", "modules", mods);
        if (pf) (void) cb_sio_send(s, pf);
    }
    s_send_request(s);
}

/* The request a reply type answers, CB_REQ_NONE for other types. */
static cb_req_kind_t s_reply_kind(cb_rframe_type_t t) {
    switch (t) {
    case CB_RF_DONE: return CB_REQ_EXECUTE;
    case CB_RF_COMPLETE_REPLY: return CB_REQ_COMPLETE;
    case CB_RF_INSPECT_REPLY: return CB_REQ_INSPECT;
    case CB_RF_IS_COMPLETE_REPLY: return CB_REQ_IS_COMPLETE;
    case CB_RF_COMM_DONE: return CB_REQ_COMM;
    default: return CB_REQ_NONE;
    }
}

void cb_sio_refused(cb_session_t *s, const cb_rframe_t *f, const char *why) {
    cb_req_kind_t kind = s_reply_kind(f->type);
    /* the reply awaited: of the request in flight's kind, once it was sent,
     * and naming its number, as a reply the kernel takes must (the frame
     * table reads it from a frame too complex to parse too): an honest
     * runner's late answer to an earlier request keeps its own */
    if (kind == CB_REQ_NONE || kind != s->req || s->req_frame || s->state == S_STARTING ||
        !f->has_seq || f->seq != s->seq)
        return;
    if (cb_sio_snap_owns_request(s)) return; /* a rollback or a held done ends it */
    const char *name = cb_rframe_name(f->type);
    bool named = strncmp(why, name, strlen(name)) == 0;
    char msg[S_REFUSED_MSG_MAX];
    snprintf(msg, sizeof msg, "the sandbox's reply was refused: %s%s%s", named ? "" : name,
             named ? "" : ": ", why);
    LOG_W("the reply to request %lld was refused: the request ends now", (long long) s->seq);
    s_end_request(s, NULL, "SandboxError", msg, false);
}

void cb_sio_frame(cb_session_t *s, const cb_rframe_t *f) {
    unsigned when = s->state == S_STARTING                  ? CB_WHEN_STARTING
                    : s->req == CB_REQ_NONE || s->req_frame ? CB_WHEN_IDLE
                    : s->req == CB_REQ_EXECUTE              ? CB_WHEN_EXECUTE
                    : s->req == CB_REQ_COMM                 ? CB_WHEN_COMM
                                                            : CB_WHEN_ASSIST;
    bool current = f->has_seq && f->seq == s->seq && when != CB_WHEN_IDLE;
    if (cb_sio_snap_frame(s, f)) return; /* checkpoints: session_snap.c judges them */
    if (!(cb_rframe_when(f->type) & when)) goto refuse;
    switch (f->type) {
    case CB_RF_HELLO: s_hello(s, f); return;
    case CB_RF_DONE:
    case CB_RF_COMPLETE_REPLY:
    case CB_RF_INSPECT_REPLY:
    case CB_RF_IS_COMPLETE_REPLY:
    case CB_RF_COMM_DONE:
        /* an answer for anything but the request in flight is refused */
        if (!current || s_reply_kind(f->type) != s->req) goto refuse;
        if (cb_sio_snap_hold(s, f)) return; /* the cell asked for a checkpoint op first */
        s_end_request(s, f, NULL, NULL, false);
        return;
    case CB_RF_BAD_REQUEST:
        if (f->has_seq && f->seq != s->seq) goto refuse;
        if (cb_sio_snap_owns_request(s)) goto refuse; /* a rollback or a held done ends it */
        LOG_W("the runner could not read request %lld: %s", (long long) s->seq, f->u.bad.error);
        s_end_request(s, f, NULL, NULL, false);
        return;
    case CB_RF_STARTED:
        s->runner_seq = f->seq; /* what it prints from now on is that cell's */
        return;
    case CB_RF_INPUT_REQUEST:
        if (!current || s->waiting_input) goto refuse;
        s->waiting_input = true;
        if (s->cbs.on_frame) s->cbs.on_frame(s->ud, f, false);
        return;
    default: {
        bool late = !current || !cb_sio_in_exec(s);
        if (cb_sio_charge(s, f->bytes, late) < f->bytes) return; /* over budget: dropped */
        if (s->cbs.on_frame) s->cbs.on_frame(s->ud, f, late);
        return;
    }
    }
refuse:
    LOG_W("refused a runner frame '%s' (seq %lld) not valid now", cb_rframe_name(f->type),
          (long long) f->seq);
}

/* ---- public ---------------------------------------------------------------------------------- */

cb_session_t *cb_session_new(const cb_session_cfg_t *cfg, const cb_session_cbs_t *cbs, void *ud,
                             zloop_t *loop) {
    cb_session_t *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->cfg = cfg;
    s->cbs = *cbs;
    s->ud = ud;
    s->loop = loop;
    s->timer_id = -1;
    cb_launch_init(&s->proc);
    cb_sio_reset(s, cb_now_ms());
    return s;
}

void cb_session_destroy(cb_session_t **self_p) {
    cb_session_t *s = *self_p;
    if (s == NULL) return;
    s->quitting = true;
    if (s->proc.pid > 0 && !s->proc.reaped) {
        cb_launch_signal(&s->proc, SIGTERM);
        int64_t until = cb_now_ms() + CB_SESSION_REAP_MS;
        while (!cb_launch_reap(&s->proc) && cb_now_ms() < until)
            usleep(5000);
        if (!s->proc.reaped) {
            LOG_W("launcher %d did not exit: SIGKILL", (int) s->proc.pid);
            cb_launch_signal(&s->proc, SIGKILL);
            while (!cb_launch_reap(&s->proc))
                usleep(1000);
        }
    }
    if (s->proc.pid > 0 && cb_cgroup_cleanup_kernel() < 0)
        LOG_W("this kernel's cgroups could not all be removed");
    for (int i = 0; i < S_FD_COUNT; i++)
        if (s->reg[i].events != 0) zloop_poller_end(s->loop, &s->reg[i]);
    if (s->timer_id >= 0) zloop_timer_end(s->loop, s->timer_id);
    cb_launch_close_fds(&s->proc);
    cb_sdbg_reset(s);
    cb_sio_snap_fini(s);
    json_decref(s->req_frame);
    free(s->in);
    free(s->out);
    free(s);
    *self_p = NULL;
}

int cb_session_start(cb_session_t *s) {
    int rc = s->state == S_DOWN && !s->retry_at_ms ? cb_sio_spawn(s) : 0;
    cb_session_sync(s);
    return rc;
}

int cb_session_request(cb_session_t *s, cb_req_kind_t kind, json_t *frame) {
    if (s->req != CB_REQ_NONE || frame == NULL || s->quitting) {
        json_decref(frame);
        return -1;
    }
    if (s->state == S_DOWN && !s->retry_at_ms) {
        bool gave_up = s->failures >= CB_SESSION_START_TRIES;
        if (gave_up && cb_now_ms() - s->tried_ms < CB_SESSION_RETRY_IDLE_MS) {
            json_decref(frame);
            return -1; /* each cell gets the cause, no endless relaunching */
        }
        if (gave_up) s->failures = CB_SESSION_START_TRIES - 1; /* one more try */
        if (cb_sio_spawn(s) < 0) {
            json_decref(frame);
            cb_session_sync(s);
            return -1;
        }
    }
    s->req = kind;
    s->seq++;
    s->req_frame = frame;
    s->timed_out = s->waiting_input = false;
    if (kind == CB_REQ_EXECUTE || kind == CB_REQ_COMM)
        cb_budget_init(&s->cell, s->cfg->cell_output_max);
    s_send_request(s);
    cb_session_sync(s);
    return 0;
}

void cb_session_adopt(cb_session_t *s, pid_t pid, int out_fd, int err_fd, int ev_fd, int rep_fd) {
    cb_launch_init(&s->proc);
    cb_sio_reset(s, cb_now_ms());
    s->proc.pid = pid;
    s->proc.out_fd = out_fd;
    s->proc.err_fd = err_fd;
    s->proc.ev_fd = ev_fd;
    s->proc.rep_fd = rep_fd;
    int fds[] = {out_fd, err_fd, ev_fd, rep_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) cb_set_nonblock(fds[i], 1);
    s->proc.started_ms = cb_now_ms();
    s->state = S_STARTING;
    cb_sio_snap_spawned(s);
    s->tried_ms = s->proc.started_ms;
    cb_session_sync(s);
}

cb_req_kind_t cb_session_current(const cb_session_t *s) { return s->req; }
json_int_t cb_session_seq(const cb_session_t *s) { return s->seq; }
json_int_t cb_session_runner_seq(const cb_session_t *s) { return s->runner_seq; }

void cb_session_input_reply(cb_session_t *s, const char *value, const char *error) {
    if (!s->waiting_input) return;
    s->waiting_input = false;
    json_auto_t *f = value ? json_pack("{s:s, s:s}", "type", "input_reply", "value", value)
                           : json_pack("{s:s, s:s}", "type", "input_reply", "error", error);
    if (f) (void) cb_sio_send(s, f);
    cb_session_sync(s);
}

void cb_session_interrupt(cb_session_t *s) {
    if (cb_sio_in_exec(s)) cb_launch_signal(&s->proc, SIGINT);
}

void cb_session_reap(cb_session_t *s) {
    if (s->proc.pid > 0 && s->state != S_DOWN && cb_launch_reap(&s->proc)) s_gone(s);
    cb_session_sync(s);
}

void cb_session_pause(cb_session_t *s, bool paused) {
    if (s->paused == paused) return;
    s->paused = paused;
    if (!paused && cb_sio_pending(s) > 0) cb_sio_process(s);
    if (!paused && cb_sdbg_pending(s)) cb_sdbg_process(s);
    cb_session_sync(s);
}

void cb_session_quit(cb_session_t *s) {
    s->quitting = true;
    s->retry_at_ms = 0;
}

const char *cb_session_isolation(const cb_session_t *s) { return s->isolation; }
const char *cb_session_fatal(const cb_session_t *s) { return s->fatal; }
const char *cb_session_python_version(const cb_session_t *s) { return s->python_version; }
const char *cb_session_shell(const cb_session_t *s) { return s->shell; }
const char *cb_session_shell_version(const cb_session_t *s) { return s->shell_version; }
uint64_t cb_session_dropped(const cb_session_t *s) { return s->dropped; }

bool cb_session_ready(const cb_session_t *s) { return s->state == S_READY; }

struct cb_launch *cb_session_launcher(cb_session_t *s) {
    return s->proc.pid > 0 && !s->proc.reaped && s->proc.rep_fd >= 0 ? &s->proc : NULL;
}
