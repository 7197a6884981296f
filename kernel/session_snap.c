/*
 * session_snap.c - checkpoints in place, the session's part (see session.h
 * and docs/SNAPSHOTS.md): one operation at a time between the kernel, the
 * sandbox's trusted agent (its init, reached through the launcher's report
 * socket) and the runner.
 *
 *   checkpoint  "snap arm ID" -> armed ID BYTES FILES (the files copied) and,
 *               at once, runner {"type":"checkpoint"} -> checkpoint_reply (it
 *               forked): done.  The fork parks afterwards (saved ID PID ...,
 *               ignored) or is reported lost
 *   rollback    "snap roll ID NONCE" -> rolled (everything else is dead,
 *               the files restored, the copy woken); then the kernel writes
 *               {"type":"resync","nonce":N} and discards what the sandbox
 *               sends until the copy's {"type":"resumed","nonce":N}: bytes
 *               the old runner left half-written or unread are skipped on
 *               both sides, and the copy learnt N only from the agent
 *   drop        "snap drop ID" -> dropped
 *
 * Requests wait while an operation runs; a rollback ends the request in
 * flight (its reply says so).  Whatever the agent or the runner answers is
 * checked against the operation in progress and otherwise dropped.  An
 * operation that does not finish in time fails; a rollback that fails
 * half-way leaves the sandbox in an unknown state, so the sandbox is killed
 * and replaced (the kernel says all state is lost).
 */
#include "kernel/session_priv.h"

#include "isolate/snap_limits.h"

#include "isolate/log.h"

#include <inttypes.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_OP_MS        30000  /* an operation fails when not finished by then */
#define S_PAUSE_MS     180000 /* ... a pause (the tier writes the session's memory to disk) */
#define S_PARK_FMT     CB_SNAP_PARK_DIR "/%ld"
#define S_RESYNC_BODY  "{\"type\":\"resync\",\"nonce\":\"%s\"}"
#define S_RESUMED_BODY "{\"type\":\"resumed\",\"nonce\":\"%s\"}"

enum { S_PH_PAUSE = 7, S_PH_FORK = 1, S_PH_KILL, S_PH_RESYNC, S_PH_FOUND, S_PH_DROP };

static const char *const s_op_names[] = {"none", "checkpoint", "rollback", "drop", "pause"};

static void s_finish(cb_session_t *s, bool ok, const char *why);

/* ---- answers of the agent ------------------------------------------------------------- */

/* The operation failed.  agent: the agent said so (it has cleaned up its side). */
static void s_fail_by(cb_session_t *s, const char *why, bool agent) {
    s_snap_t *p = &s->snap;
    if (p->op == CB_SNAP_ROLLBACK && p->phase <= S_PH_FOUND) {
        /* processes may be dead and files half-restored: no half-working session */
        LOG_E("rollback of checkpoint %ld failed (%s): replacing the sandbox", p->id, why);
        p->res.sandbox_lost = true;
        cb_sio_kill(s, SIGKILL);
    }
    if (p->op == CB_SNAP_CHECKPOINT && !agent && s->proc.rep_fd >= 0)
        (void) cb_launch_command(&s->proc, "snap drop %ld", p->id); /* no half-made copy */
    if (p->op == CB_SNAP_PAUSE && p->pause_ckpt > 0 && s->proc.rep_fd >= 0)
        (void) cb_launch_command(&s->proc, "snap drop %ld", p->pause_ckpt); /* the session stays */
    s_finish(s, false, why);
}

static void s_fail(cb_session_t *s, const char *why) { s_fail_by(s, why, false); }

/* Writes the rollback's resync frame and arms the scan for the copy's answer. */
static void s_start_resync(cb_session_t *s) {
    s_snap_t *p = &s->snap;
    size_t out_len;
    free(p->pattern);
    p->pattern = cb_frame_format(&p->pattern_len, S_RESUMED_BODY, p->nonce);
    uint8_t *out = cb_frame_format(&out_len, S_RESYNC_BODY, p->nonce);
    if (p->pattern == NULL || out == NULL) {
        free(out);
        s_fail(s, "out of memory");
        return;
    }
    /* the old runner is dead: its output goes out now, its frames and
     * whatever we had not yet written for it are dropped */
    cb_sio_drain(s, true);
    cb_session_debug_resync(s, p->nonce); /* the debugger's channel, likewise */
    s->in_off = s->in_len;
    free(s->out);
    s->out = out;
    s->out_len = out_len;
    s->out_off = 0;
    s->ack_pending = false;
    p->phase = S_PH_RESYNC;
    cb_sio_flush_out(s);
}

/* Both halves of a checkpoint are in (the runner forked, the agent has the
 * files, or for a pause the copy parked): a checkpoint is done, a pause
 * has its copy and asks the launcher to write the image from it. */
static void s_fork_done(cb_session_t *s) {
    s_snap_t *p = &s->snap;
    if (p->op != CB_SNAP_PAUSE) {
        s_finish(s, true, NULL);
        return;
    }
    p->phase = S_PH_PAUSE;
    if (cb_launch_command_fd(&s->proc, p->pause_fd, "snap pause %s %ld", p->pause_id,
                             p->pause_ckpt) < 0)
        s_fail(s, "the launcher did not take the command");
}

static void s_on_line(void *ud, const char *line) {
    cb_session_t *s = ud;
    s_snap_t *p = &s->snap;
    char verb[16] = "";
    long id = 0;
    int off = 0;
    if (sscanf(line, "%15s %n", verb, &off) < 1) return;
    const char *rest = line + off;
    if (strcmp(verb, "ready") == 0) {
        LOG_D("checkpoint agent ready");
        p->available = 1;
        return;
    }
    if (strcmp(verb, "unavailable") == 0) {
        p->available = 0;
        snprintf(p->why, sizeof p->why, "%s", rest);
        return;
    }
    if (strcmp(verb, "pausable") == 0) { /* the tier can write the sandbox into an image */
        p->pausable = 1;
        return;
    }
    if (strcmp(verb, "unpausable") == 0) { /* ... or cannot, on this host: why */
        p->pausable = 0;
        snprintf(p->pause_why, sizeof p->pause_why, "%s", rest);
        return;
    }
    if (strcmp(verb, "paused") == 0) { /* sealed by the launcher */
        char img[CB_IMAGE_ID_HEX + 2] = "";
        unsigned long long bytes = 0;
        if (p->op == CB_SNAP_PAUSE && sscanf(rest, "%33s %llu", img, &bytes) == 2 &&
            strcmp(img, p->pause_id) == 0) {
            p->res.bytes = bytes;
            p->paused = true; /* the sandbox ends now; the next start resumes from the image */
            snprintf(p->resume_dir, sizeof p->resume_dir, "%s", p->pause_dir);
            if (s->state == S_READY) s->state = S_DYING; /* requests wait for the resume */
            s_finish(s, true, NULL);
        } else {
            LOG_W("checkpoint agent: '%.64s' matches no pause", line);
        }
        return;
    }
    int n = 0;
    if (sscanf(rest, "%ld %n", &id, &n) < 1) {
        LOG_W("checkpoint agent: unreadable line '%.64s'", line);
        return;
    }
    rest += n;
    if (strcmp(verb, "lost") == 0 && p->op != CB_SNAP_NONE && p->phase == S_PH_FORK &&
        id == p->id) {
        s_fail_by(s, rest[0] ? rest : "its fork did not park", true); /* not recorded yet */
        return;
    }
    if (strcmp(verb, "lost") == 0) {
        LOG_W("checkpoint %ld lost: %s", id, rest);
        if (p->cbs && p->cbs->on_lost) p->cbs->on_lost(p->ud, id, rest);
        return;
    }
    if (strcmp(verb, "kept") == 0) return; /* the rolled-back runner's own copy parked */
    bool mine = p->op != CB_SNAP_NONE && (id == p->id || id == 0);
    bool forking = mine && p->phase == S_PH_FORK && !p->agent_done;
    if (strcmp(verb, "saved") == 0 && !forking)
        return; /* a checkpoint's fork parked after the checkpoint was done ("armed") */
    if (!mine) {
        LOG_W("checkpoint agent: '%.64s' matches no operation in progress", line);
        return;
    }
    if (strcmp(verb, "fail") == 0) {
        s_fail_by(s, rest[0] ? rest : "the sandbox's checkpoint agent refused", true);
    } else if (strcmp(verb, "refused") == 0) {
        /* nothing in the sandbox changed: the session goes on as it is (under
         * gVisor the copy's death is heard only now, just before this) */
        s_finish(s, false, rest[0] ? rest : "the sandbox's checkpoint agent refused");
    } else if (strcmp(verb, "armed") == 0 && p->op == CB_SNAP_PAUSE && forking) {
        LOG_D("pause: checkpoint %ld armed; its copy parks next", p->id); /* "saved" counts */
    } else if ((strcmp(verb, "armed") == 0 || strcmp(verb, "saved") == 0) && forking) {
        /* armed: the fifo is made and the files copied (the fork was asked for
         * at once: its copy waits for the fifo if it is first, and parks after);
         * saved, from an agent that copies the files once the copy parked */
        unsigned long long bytes = 0;
        unsigned files = 0;
        int pid = 0;
        if (verb[0] == 'a')
            (void) sscanf(rest, "%llu %u", &bytes, &files);
        else
            (void) sscanf(rest, "%d %llu %u", &pid, &bytes, &files);
        p->res.bytes = bytes;
        p->res.files = files;
        p->agent_done = true;
        LOG_D("checkpoint %ld: the agent has its files", p->id);
        if (p->runner_done) s_fork_done(s);
    } else if (strcmp(verb, "rolled") == 0 && p->op == CB_SNAP_ROLLBACK && p->phase == S_PH_KILL) {
        int pid = 0, ended = 0;
        (void) sscanf(rest, "%d %d", &pid, &ended);
        p->res.ended = ended;
        s_start_resync(s);
    } else if (strcmp(verb, "dropped") == 0 && p->op == CB_SNAP_DROP) {
        s_finish(s, true, NULL);
    } else {
        LOG_W("checkpoint agent: '%.64s' out of turn", line);
    }
}

/* ---- the operation's life ----------------------------------------------------------------- */

static void s_finish(cb_session_t *s, bool ok, const char *why) {
    s_snap_t *p = &s->snap;
    if (p->op == CB_SNAP_NONE) return;
    cb_snap_result_t r = p->res;
    r.op = p->op;
    r.id = p->id;
    r.ok = ok;
    r.in_cell = p->in_cell;
    snprintf(p->fail, sizeof p->fail, "%s", why ? why : "");
    r.why = ok ? NULL : p->fail;
    bool rolled = ok && p->op == CB_SNAP_ROLLBACK;
    p->op = CB_SNAP_NONE;
    p->phase = 0;
    p->deadline_ms = 0;
    free(p->pattern);
    p->pattern = NULL;
    p->pattern_len = 0;
    LOG_I("%s of checkpoint %ld: %s%s", s_op_names[r.op], r.id,
          ok ? "done" : "failed: ", ok ? "" : r.why);
    /* a rollback ended the request in flight (not a cell waiting for it) */
    if (rolled && s->req != CB_REQ_NONE && !s->req_frame && !p->held.root) {
        r.ended_request = true;
        cb_sio_end_request(s, NULL, "RolledBack",
                           "the session was rolled back to a checkpoint while this ran: "
                           "everything it did is undone",
                           false);
    }
    if (p->cbs && p->cbs->on_done) p->cbs->on_done(p->ud, &r);
    if (p->held.root) { /* the cell that asked ends now, with its own answer or the failure */
        cb_rframe_t held = p->held;
        memset(&p->held, 0, sizeof p->held);
        /* only the cell that asked, still in flight (never a request queued behind the op) */
        bool asked = s->req == CB_REQ_EXECUTE && !s->req_frame;
        if (asked && ok)
            cb_sio_end_request(s, &held, NULL, NULL, false);
        else if (asked)
            cb_sio_end_request(s, NULL, "CheckpointError", p->fail, false);
        cb_rframe_clear(&held);
    }
    p->in_cell = false;
    cb_sio_send_request(s); /* what waited */
}

static int s_start(cb_session_t *s, cb_snap_op_t op, long id, bool in_cell, char *why, size_t len) {
    s_snap_t *p = &s->snap;
    const char *no = NULL;
    if (p->cbs == NULL)
        no = "checkpoints are not served by this client of the session";
    else if (s->state != S_READY)
        no = "the sandbox is not running (it is starting, or has just ended); try again";
    else if ((op != CB_SNAP_PAUSE || p->pause_ckpt > 0) && p->available == 0)
        no = p->why;
    else if ((op != CB_SNAP_PAUSE || p->pause_ckpt > 0) && p->available < 0)
        no = "the sandbox's checkpoint agent has not said it is ready";
    else if (p->op != CB_SNAP_NONE)
        no = "another checkpoint operation is in progress";
    else if (op == CB_SNAP_CHECKPOINT && !in_cell && s->req != CB_REQ_NONE && !s->req_frame)
        no = "a request is running: checkpoints are taken between cells (retry when it ends)";
    else if (op == CB_SNAP_PAUSE && s->req != CB_REQ_NONE)
        no = "a request is running: a session is paused between cells (retry when it ends)";
    else if (op == CB_SNAP_PAUSE && p->pausable != 1)
        no = "this sandbox's tier cannot write itself into an image";
    if (no != NULL) {
        snprintf(why, len, "%s", no);
        return -1;
    }
    memset(&p->res, 0, sizeof p->res);
    p->op = op;
    p->id = id;
    p->in_cell = in_cell;
    p->runner_done = p->agent_done = false;
    p->deadline_ms = cb_now_ms() + (op == CB_SNAP_PAUSE ? S_PAUSE_MS : S_OP_MS);
    int rc;
    if (op == CB_SNAP_PAUSE && p->pause_ckpt > 0) /* CRIU dumps a checkpoint's parked copy */
        p->id = id = p->pause_ckpt;
    if (op == CB_SNAP_CHECKPOINT || (op == CB_SNAP_PAUSE && p->pause_ckpt > 0)) {
        /* arm the agent and fork the runner at once */
        char fifo[sizeof CB_SNAP_PARK_DIR + 24];
        snprintf(fifo, sizeof fifo, S_PARK_FMT, id);
        p->phase = S_PH_FORK;
        rc = cb_launch_command(&s->proc, "snap arm %ld", id);
        if (rc == 0) {
            p->seq = ++s->seq;
            json_auto_t *f = json_pack("{s:s, s:I, s:s, s:I}", "type", "checkpoint", "id",
                                       (json_int_t) id, "fifo", fifo, "seq", (json_int_t) p->seq);
            if (f == NULL || cb_sio_send(s, f) < 0) {
                (void) cb_launch_command(&s->proc, "snap drop %ld", id);
                rc = -1;
            }
        }
    } else if (op == CB_SNAP_PAUSE) {
        p->phase = S_PH_PAUSE;
        rc = cb_launch_command_fd(&s->proc, p->pause_fd, "snap pause %s", p->pause_id);
    } else if (op == CB_SNAP_ROLLBACK) {
        unsigned char raw[CB_SNAP_NONCE_HEX / 2];
        randombytes_buf(raw, sizeof raw);
        sodium_bin2hex(p->nonce, sizeof p->nonce, raw, sizeof raw);
        p->phase = S_PH_KILL;
        s->deadline_ms = s->grace_ms = 0; /* the request in flight ends with the rollback */
        rc = cb_launch_command(&s->proc, "snap roll %ld %s", id, p->nonce);
    } else {
        p->phase = S_PH_DROP;
        rc = cb_launch_command(&s->proc, "snap drop %ld", id);
    }
    if (rc < 0) {
        p->op = CB_SNAP_NONE;
        snprintf(why, len, "the launcher did not take the command");
        return -1;
    }
    LOG_I("%s of checkpoint %ld started", s_op_names[op], id);
    return 0;
}

/* ---- hooks of session.c and session_io.c ------------------------------------------------ */

/* A restored sandbox's runner is told so with a nonce, and answers with it
 * (the resumed frame counts as its hello): it reseeds what clones share. */
static void s_send_resume(cb_session_t *s) {
    s_snap_t *p = &s->snap;
    unsigned char raw[CB_SNAP_NONCE_HEX / 2];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(p->nonce, sizeof p->nonce, raw, sizeof raw);
    json_auto_t *f = json_pack("{s:s, s:s}", "type", "resume", "nonce", p->nonce);
    if (f == NULL || cb_sio_send(s, f) < 0) LOG_E("the resume frame could not be queued");
}

void cb_sio_snap_spawned(cb_session_t *s) {
    s->proc.on_snap = s_on_line;
    s->proc.snap_ud = s;
    s->snap.available = -1;
    s->snap.pausable = -1;
    s->snap.pause_why[0] = '\0';
    s->snap.why[0] = '\0';
    s->snap.resume_sent = false; /* sent once the runner is started (cb_sio_snap_reports) */
}

void cb_sio_snap_reports(cb_session_t *s) {
    /* not at spawn: a --pausable sandbox's channels are replaced by the
     * sandbox's own before the runner starts, and what was written on ours
     * would be lost; after "started" the channel is final */
    if (s->snap.resuming && !s->snap.resume_sent && s->proc.runner_pid > 0) {
        s->snap.resume_sent = true;
        s_send_resume(s);
    }
}

const char *cb_sio_snap_start(cb_session_t *s) {
    s->snap.resuming = s->snap.resume_dir[0] != '\0';
    return s->snap.resuming ? s->snap.resume_dir : NULL;
}

bool cb_sio_snap_gone(cb_session_t *s) {
    s_snap_t *p = &s->snap;
    bool paused = p->paused && p->op == CB_SNAP_NONE;
    p->paused = false;
    if (p->op != CB_SNAP_NONE) {
        if (p->op == CB_SNAP_ROLLBACK) p->res.sandbox_lost = true;
        json_decref(p->held.root); /* the cell ends with the sandbox */
        memset(&p->held, 0, sizeof p->held);
        s_finish(s, false, "the sandbox ended");
    }
    p->after_op = CB_SNAP_NONE;
    p->available = p->pausable = -1;
    if (paused) return true; /* its checkpoints are in the image: not lost */
    p->clone = false;
    if (p->resuming) /* a restore that never came up: no fresh sandbox in its place, ever */
        snprintf(p->refuse, sizeof p->refuse, "the image could not be resumed: %.900s",
                 s->proc.fatal[0] ? s->proc.fatal : "its sandbox ended before it was restored");
    p->resuming = false;
    if (p->cbs && p->cbs->on_lost) p->cbs->on_lost(p->ud, 0, "the sandbox ended");
    return false;
}

bool cb_sio_snap_blocks(const cb_session_t *s) { return s->snap.op != CB_SNAP_NONE; }

bool cb_sio_snap_frame(cb_session_t *s, const cb_rframe_t *f) {
    s_snap_t *p = &s->snap;
    switch (f->type) {
    case CB_RF_CHECKPOINT_REPLY:
        if ((p->op != CB_SNAP_CHECKPOINT && p->op != CB_SNAP_PAUSE) || p->phase != S_PH_FORK ||
            f->seq != p->seq ||
            p->runner_done)
            break;
        if (strcmp(f->u.ckpt.status, "ok") != 0) {
            char why[CB_SNAP_WHY_MAX];
            snprintf(why, sizeof why, "the runner could not fork: %.120s",
                     f->u.ckpt.error ? f->u.ckpt.error : "(no reason given)");
            s_fail(s, why);
            return true;
        }
        p->runner_done = true;
        LOG_D("checkpoint %ld: the runner forked", p->id);
        p->res.threads = f->u.ckpt.threads > 0 ? (long) f->u.ckpt.threads : 0;
        if (p->agent_done) s_fork_done(s);
        return true;
    case CB_RF_RESUMED:
        if (p->resuming && s->state == S_STARTING && strcmp(f->u.resumed.nonce, p->nonce) == 0) {
            p->resuming = false; /* restored from the image: it is consumed for this session */
            p->resume_dir[0] = '\0';
            p->clone = true;
            LOG_I("the sandbox is restored from its image");
            cb_sio_ready(s, &f->u.resumed.facts);
            return true;
        }
        if (p->resuming && s->state == S_STARTING) { /* resumed by CRIU (namespaces) */
            LOG_D("the restored copy answered the launcher's wake; its resume answer follows");
            return true;
        }
        if (p->op != CB_SNAP_ROLLBACK || p->phase != S_PH_FOUND ||
            strcmp(f->u.resumed.nonce, p->nonce) != 0)
            break;
        if (p->clone) { /* the copy was parked before the image: its siblings have it too */
            json_auto_t *rs = json_pack("{s:s}", "type", "reseed");
            if (rs) (void) cb_sio_send(s, rs);
        }
        s_finish(s, true, NULL);
        return true;
    case CB_RF_SNAPSHOT_REQUEST:
        if (s->req != CB_REQ_EXECUTE || !cb_sio_in_exec(s) || f->seq != s->seq || p->held.root)
            break;
        if (p->cbs && p->cbs->on_request) p->cbs->on_request(p->ud, f);
        return true;
    default: return false;
    }
    LOG_W("refused a runner frame '%s' not valid now", cb_rframe_name(f->type));
    return true;
}

void cb_session_snap_after_cell(cb_session_t *s, cb_snap_op_t op, long id) {
    s->snap.after_op = op;
    s->snap.after_id = id;
    s->snap.after_refused = false;
}

void cb_session_snap_refuse_cell(cb_session_t *s, const char *why) {
    s->snap.after_op = CB_SNAP_NONE;
    s->snap.after_refused = true;
    snprintf(s->snap.fail, sizeof s->snap.fail, "%s", why);
}

bool cb_sio_snap_hold(cb_session_t *s, const cb_rframe_t *f) {
    s_snap_t *p = &s->snap;
    if (f->type != CB_RF_DONE || s->req != CB_REQ_EXECUTE) return false;
    if (p->held.root) { /* a second done (with the op frame's seq): the first one answers */
        LOG_W("refused a second 'done' for the cell whose done is held for a checkpoint op");
        return true;
    }
    if (p->after_refused) { /* the cell fails with the reason, whatever its code did */
        p->after_refused = false;
        char why[CB_SNAP_WHY_MAX];
        snprintf(why, sizeof why, "%s", p->fail);
        cb_sio_end_request(s, NULL, "CheckpointError", why, false);
        return true;
    }
    if (p->after_op == CB_SNAP_NONE) return false;
    cb_snap_op_t op = p->after_op;
    p->after_op = CB_SNAP_NONE;
    char why[CB_SNAP_WHY_MAX];
    if (s_start(s, op, p->after_id, true, why, sizeof why) < 0) {
        /* the cell ends with the reason */
        cb_snap_result_t r = {
            .op = op, .id = p->after_id, .ok = false, .why = why, .in_cell = true};
        if (p->cbs && p->cbs->on_done) p->cbs->on_done(p->ud, &r);
        cb_sio_end_request(s, NULL, "CheckpointError", why, false);
        return true;
    }
    p->held = *f;
    json_incref(p->held.root);
    return true;
}

bool cb_sio_snap_resync(cb_session_t *s) {
    s_snap_t *p = &s->snap;
    if (p->op != CB_SNAP_ROLLBACK || p->phase == S_PH_FOUND) return true;
    if (p->phase != S_PH_RESYNC) return true; /* the old runner may still speak: as usual */
    size_t have = cb_sio_pending(s);
    const uint8_t *at =
        have >= p->pattern_len ? memmem(s->in + s->in_off, have, p->pattern, p->pattern_len) : NULL;
    if (at != NULL) {
        s->in_off = (size_t) (at - s->in);
        p->phase = S_PH_FOUND;
        return true;
    }
    if (have >= p->pattern_len) s->in_off = s->in_len - (p->pattern_len - 1);
    return false;
}

bool cb_sio_snap_owns_request(const cb_session_t *s) {
    return s->snap.op == CB_SNAP_ROLLBACK || s->snap.held.root != NULL;
}

void cb_sio_snap_cell_ended(cb_session_t *s, const char *why) {
    s_snap_t *p = &s->snap;
    p->after_refused = false;
    if (p->after_op == CB_SNAP_NONE) return;
    /* as when it cannot start (cb_sio_snap_hold): the caller hears it failed */
    cb_snap_result_t r = {
        .op = p->after_op, .id = p->after_id, .ok = false, .why = why, .in_cell = true};
    p->after_op = CB_SNAP_NONE;
    LOG_I("%s of checkpoint %ld: not run, the cell that asked ended: %s", s_op_names[r.op], r.id,
          why);
    if (p->cbs && p->cbs->on_done) p->cbs->on_done(p->ud, &r);
}

int64_t cb_sio_snap_deadline(const cb_session_t *s) { return s->snap.deadline_ms; }

void cb_sio_snap_tick(cb_session_t *s, int64_t now) {
    s_snap_t *p = &s->snap;
    if (p->op == CB_SNAP_NONE || p->deadline_ms == 0 || now < p->deadline_ms) return;
    char why[64];
    snprintf(why, sizeof why, "it did not finish within %d s", S_OP_MS / 1000);
    s_fail(s, why);
}

void cb_sio_snap_fini(cb_session_t *s) {
    free(s->snap.pattern);
    s->snap.pattern = NULL;
    json_decref(s->snap.held.root);
    memset(&s->snap.held, 0, sizeof s->snap.held);
}

/* ---- public ---------------------------------------------------------------------------------- */

void cb_session_snap_attach(cb_session_t *s, const cb_snap_cbs_t *cbs, void *ud) {
    s->snap.cbs = cbs;
    s->snap.ud = ud;
}

int cb_session_snap(cb_session_t *s, cb_snap_op_t op, long id, char *why, size_t why_len) {
    return s_start(s, op, id, false, why, why_len);
}

bool cb_session_snap_busy(const cb_session_t *s) { return s->snap.op != CB_SNAP_NONE; }
int cb_session_snap_available(const cb_session_t *s) { return s->snap.available; }
int cb_session_snap_pausable(const cb_session_t *s) { return s->snap.pausable; }
const char *cb_session_snap_pause_why(const cb_session_t *s) { return s->snap.pause_why; }

int cb_session_snap_pause(cb_session_t *s, const char *id, const char *dir, int fd, long ckpt,
                          char *why, size_t why_len) {
    s->snap.pause_ckpt = ckpt;
    snprintf(s->snap.pause_id, sizeof s->snap.pause_id, "%s", id);
    snprintf(s->snap.pause_dir, sizeof s->snap.pause_dir, "%s", dir);
    s->snap.pause_fd = fd;
    return s_start(s, CB_SNAP_PAUSE, 0, false, why, why_len);
}

void cb_session_resume_from(cb_session_t *s, const char *dir) {
    snprintf(s->snap.resume_dir, sizeof s->snap.resume_dir, "%s", dir);
}

void cb_session_refuse_start(cb_session_t *s, const char *why) {
    snprintf(s->snap.refuse, sizeof s->snap.refuse, "%s", why);
}
const char *cb_session_snap_why(const cb_session_t *s) { return s->snap.why; }
