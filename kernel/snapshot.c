/*
 * snapshot.c - checkpoints in place, the kernel's part (see snapshot.h and
 * docs/SNAPSHOTS.md).
 *
 * The record of a checkpoint is the kernel's alone: its name, the execution
 * count and time at which it was taken, and the comms open then.  A rollback
 * resets the execution count from that record, never from anything the
 * sandbox says.  One operation runs at a time (the session serialises the
 * sandbox's side); a control request that arrives meanwhile is answered at
 * once with an error that says so.  Taking a checkpoint under a name that
 * exists replaces it once the new one is saved.
 *
 * Requests (control channel), each answered by its *_reply:
 *   cellblock_checkpoint_request  {name}   take one (between cells)
 *   cellblock_rollback_request    {name}   go back to one (also while a cell runs: it ends)
 *   cellblock_checkpoints_request {}       list them, and whether the sandbox can
 *   cellblock_forget_request      {name}   drop one (its process and files)
 * From a cell: the runner's snapshot_request frame {op, name}, done when the
 * cell ends (before its execute_reply), its outcome printed in the cell.
 */
#include "kernel/snapshot.h"

#include "isolate/log.h"
#include "kernel/core.h"
#include "kernel/debug.h"
#include "kernel/dispatch.h"
#include "kernel/snapshot_priv.h"
#include "isolate/snap_limits.h"

#include <stdio.h>
#include <string.h>

static const cb_snap_cbs_t s_callbacks;

/* ---- records ------------------------------------------------------------------------ */

static bool s_name_ok(const char *n) {
    size_t len = n ? strlen(n) : 0;
    if (len == 0 || len > CB_SNAP_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static cb_snap_rec_t *s_by_name(cb_snapshots_t *sn, const char *name) {
    for (int i = 0; i < CB_SNAP_MAX; i++)
        if (sn->rec[i].id != 0 && strcmp(sn->rec[i].name, name) == 0) return &sn->rec[i];
    return NULL;
}

static cb_snap_rec_t *s_by_id(cb_snapshots_t *sn, long id) {
    for (int i = 0; id != 0 && i < CB_SNAP_MAX; i++)
        if (sn->rec[i].id == id) return &sn->rec[i];
    return NULL;
}

static int s_count(const cb_snapshots_t *sn) {
    int n = 0;
    for (int i = 0; i < CB_SNAP_MAX; i++)
        n += sn->rec[i].id != 0;
    return n;
}

static void s_forget(cb_snap_rec_t *r) {
    json_decref(r->comms);
    memset(r, 0, sizeof *r);
}

/* [{name, execution_count, created, bytes, files}] oldest first: a new reference. */
static json_t *s_list(const cb_snapshots_t *sn) {
    json_t *a = json_array();
    for (int pass = 0; a && pass < CB_SNAP_MAX; pass++) {
        const cb_snap_rec_t *best = NULL; /* by id: the order they were taken in */
        for (int i = 0; i < CB_SNAP_MAX; i++) {
            const cb_snap_rec_t *r = &sn->rec[i];
            bool listed = false;
            for (size_t j = 0; j < json_array_size(a); j++)
                listed |= strcmp(json_string_value(json_object_get(json_array_get(a, j), "name")),
                                 r->name) == 0;
            if (r->id != 0 && !listed && (best == NULL || r->id < best->id)) best = r;
        }
        if (best == NULL) break;
        json_array_append_new(a, json_pack("{s:s, s:i, s:s, s:I, s:i}", "name", best->name,
                                           "execution_count", best->count, "created", best->created,
                                           "bytes", (json_int_t) best->bytes, "files",
                                           (int) best->files));
    }
    return a;
}

/* ---- replies -------------------------------------------------------------------------- */

json_t *cb_snapshots_error(const char *evalue) {
    return json_pack("{s:s, s:s, s:s, s:[s+]}", "status", "error", "ename", "CheckpointError",
                     "evalue", evalue, "traceback", "CheckpointError: ", evalue);
}

/* Answers m at once (busy, reply, idle).  content is stolen. */
static void s_answer(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *m, json_t *content) {
    cb_dispatch_answer(k, ch, m, content);
}

/* "x_request" -> "x_reply" */
static void s_reply_type(const char *req, char *buf, size_t len) {
    size_t n = strlen(req);
    if (n > 8 && strcmp(req + n - 8, "_request") == 0)
        snprintf(buf, len, "%.*s_reply", (int) (n - 8), req);
    else
        snprintf(buf, len, "%s_reply", req);
}

/* Answers the request the operation in progress came from. */
void cb_snapshots_finish_req(cb_snapshots_t *sn, json_t *content) {
    if (!sn->have_req) {
        json_decref(content);
        return;
    }
    char rtype[64];
    s_reply_type(sn->req.msg_type, rtype, sizeof rtype);
    cb_server_reply(sn->k->srv, CB_CH_CONTROL, &sn->req, rtype, NULL, content);
    cb_dispatch_status(sn->k, sn->req.header, "idle");
    cb_msg_clear(&sn->req);
    sn->have_req = false;
}

/* Prints text into the output of the cell in flight. */
static void s_print(cb_kernel_t *k, bool err, const char *text) {
    if (k->cur_kind != CB_REQ_EXECUTE || k->ex_silent) return;
    cb_server_publish(k->srv, "stream", k->cur.header,
                      json_pack("{s:s, s:s}", "name", err ? "stderr" : "stdout", "text", text));
}

static void s_size(uint64_t b, char *buf, size_t len) {
    if (b < 1024)
        snprintf(buf, len, "%llu B", (unsigned long long) b);
    else if (b < (1u << 20))
        snprintf(buf, len, "%.1f KiB", (double) b / 1024);
    else
        snprintf(buf, len, "%.1f MiB", (double) b / (1 << 20));
}

static void s_print_list(cb_snapshots_t *sn) {
    char text[CB_SNAP_TEXT_MAX];
    size_t used = 0;
    json_auto_t *l = s_list(sn);
    if (json_array_size(l) == 0)
        used = (size_t) snprintf(text, sizeof text, "No checkpoints (at most %d are kept).\n",
                                 CB_SNAP_MAX);
    size_t i;
    json_t *e;
    json_array_foreach(l, i, e) {
        char sz[32];
        s_size((uint64_t) json_integer_value(json_object_get(e, "bytes")), sz, sizeof sz);
        int n = snprintf(text + used, sizeof text - used, "%-20s In [%d]  %.19s  files %s\n",
                         json_string_value(json_object_get(e, "name")),
                         (int) json_integer_value(json_object_get(e, "execution_count")),
                         json_string_value(json_object_get(e, "created")), sz);
        if (n < 0 || (size_t) n >= sizeof text - used) break;
        used += (size_t) n;
    }
    s_print(sn->k, false, text);
}

/* ---- starting an operation ------------------------------------------------------------ */

/* Checks and starts op on name.  0 started; -1 with the reason in why. */
static int s_begin(cb_snapshots_t *sn, cb_snap_op_t op, const char *name, bool in_cell, char *why,
                   size_t len) {
    cb_kernel_t *k = sn->k;
    if (!s_name_ok(name)) {
        snprintf(why, len, "a checkpoint's name is 1 to %d letters, digits, '.', '_' or '-'",
                 CB_SNAP_NAME_MAX);
        return -1;
    }
    if (sn->op != CB_SNAP_NONE) {
        snprintf(why, len, "another checkpoint operation is in progress; retry when it ends");
        return -1;
    }
    const char *dbg = k->debug && op != CB_SNAP_DROP
                          ? cb_debug_snapshot_why(k->debug, op == CB_SNAP_ROLLBACK)
                          : NULL;
    if (dbg) {
        snprintf(why, len, "%s", dbg);
        return -1;
    }
    cb_snap_rec_t *r = s_by_name(sn, name);
    long id;
    if (op == CB_SNAP_CHECKPOINT) {
        if (r == NULL && s_count(sn) >= CB_SNAP_MAX) {
            snprintf(why, len,
                     "%d checkpoints are kept already, the most a session holds: forget one "
                     "first (cellblock_forget_request, %%checkpoint -d NAME)",
                     CB_SNAP_MAX);
            return -1;
        }
        id = ++sn->next_id;
        sn->replaces = r ? r->id : 0;
    } else {
        if (r == NULL) {
            snprintf(why, len, "there is no checkpoint named '%s'", name);
            return -1;
        }
        id = r->id;
    }
    if (in_cell) {
        cb_session_snap_after_cell(k->session, op, id);
    } else if (cb_session_snap(k->session, op, id, why, len) < 0) {
        return -1;
    }
    sn->op = op;
    sn->id = id;
    sn->from_cell = in_cell;
    snprintf(sn->name, sizeof sn->name, "%s", name);
    return 0;
}

/* A control request for op: started, or answered with the reason. */
static void s_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, cb_snap_op_t op) {
    cb_snapshots_t *sn = k->snaps;
    const char *name = json_string_value(json_object_get(m->content, "name"));
    char auto_name[32], why[CB_SNAP_WHY_MAX + 64];
    if (name == NULL && op == CB_SNAP_CHECKPOINT) { /* a name is optional: the cell's count */
        snprintf(auto_name, sizeof auto_name, "In-%d", k->exec_count);
        name = auto_name;
    }
    if (s_begin(sn, op, name ? name : "", false, why, sizeof why) < 0) {
        s_answer(k, ch, m, cb_snapshots_error(why));
        return;
    }
    cb_dispatch_status(k, m->header, "busy");
    sn->req = *m; /* taken: answered when the session reports */
    memset(m, 0, sizeof *m);
    sn->have_req = true;
}

void cb_snapshot_checkpoint(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    s_request(k, ch, m, CB_SNAP_CHECKPOINT);
}

void cb_snapshot_rollback(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    s_request(k, ch, m, CB_SNAP_ROLLBACK);
}

void cb_snapshot_forget(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    s_request(k, ch, m, CB_SNAP_DROP);
}

static json_t *s_status(const cb_snapshots_t *sn) {
    int av = cb_session_snap_available(sn->k->session);
    const char *why = av == 1   ? ""
                      : av == 0 ? cb_session_snap_why(sn->k->session)
                                : "the sandbox has not said yet (it is starting)";
    return json_pack("{s:b, s:s, s:i}", "available", av == 1, "why", why, "max", CB_SNAP_MAX);
}

void cb_snapshot_list(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    json_t *c = s_status(k->snaps);
    json_object_set_new(c, "status", json_string("ok"));
    json_object_set_new(c, "checkpoints", s_list(k->snaps));
    s_answer(k, ch, m, c);
}

/* ---- the session's reports ---------------------------------------------------------------- */

/* Rollback: the comms the checkpoint had are open again, the others closed. */
static void s_restore_comms(cb_kernel_t *k, const json_t *then) {
    json_auto_t *now = cb_comms_take_all(k->comms);
    size_t i;
    json_t *id;
    json_array_foreach(now, i, id) if (json_object_get(then, json_string_value(id)) == NULL)
        cb_server_publish(k->srv, "comm_close", k->last_parent,
                          json_pack("{s:O, s:{}}", "comm_id", id, "data"));
    const char *cid;
    json_t *v;
    json_object_foreach((json_t *) then, cid, v)(void)
        cb_comms_open(k->comms, cid, json_string_value(json_object_get(v, "target_name")));
}

static json_t *s_lost_list(long threads, int ended) {
    char t[160], p[160];
    snprintf(t, sizeof t,
             "threads started by the code: a checkpoint is a fork, which keeps the main thread "
             "only (%ld were running when it was taken)",
             threads);
    snprintf(p, sizeof p, "processes started by the code (%d ended by the rollback)", ended);
    return json_pack("[s, s, s, s]", t, p,
                     "network connections and anything else outside the sandbox",
                     "output already sent to the frontends");
}

/* The record of a checkpoint just saved (replacing the one of that name), and
 * what the cell that asked prints. */
static cb_snap_rec_t *s_record(cb_snapshots_t *sn, const cb_snap_result_t *r) {
    cb_kernel_t *k = sn->k;
    cb_snap_rec_t *old = s_by_id(sn, sn->replaces);
    if (old) s_forget(old);
    cb_snap_rec_t *slot = NULL;
    for (int i = 0; slot == NULL && i < CB_SNAP_MAX; i++)
        if (sn->rec[i].id == 0) slot = &sn->rec[i];
    if (slot == NULL) { /* cannot happen: s_begin counted */
        LOG_E("no room for checkpoint %ld's record", r->id);
        return NULL;
    }
    slot->id = r->id;
    snprintf(slot->name, sizeof slot->name, "%s", sn->name);
    slot->count = k->exec_count;
    cb_iso_now(slot->created);
    slot->bytes = r->bytes;
    slot->files = r->files;
    slot->threads = r->threads;
    slot->comms = cb_comms_info(k->comms, NULL);
    char sz[32], text[CB_SNAP_TEXT_MAX];
    s_size(r->bytes, sz, sizeof sz);
    if (sn->from_cell) {
        snprintf(
            text, sizeof text,
            "Checkpoint '%s' saved at In [%d] (%u files, %s). Roll back with %%rollback %s.%s\n",
            slot->name, slot->count, r->files, sz, slot->name,
            r->threads > 0 ? " Threads started by the code are not part of it." : "");
        s_print(k, false, text);
    }
    return slot;
}

static void s_checkpoint_reply(cb_snapshots_t *sn, const cb_snap_result_t *r) {
    const cb_snap_rec_t *slot = s_by_id(sn, r->id);
    if (slot == NULL) {
        cb_snapshots_finish_req(
            sn, cb_snapshots_error("the checkpoint was lost as soon as it was taken"));
        return;
    }
    json_t *c = json_pack("{s:s, s:s, s:i, s:s, s:{s:I, s:i}, s:I, s:o}", "status", "ok", "name",
                          slot->name, "execution_count", slot->count, "created", slot->created,
                          "files", "bytes", (json_int_t) r->bytes, "count", (int) r->files,
                          "threads_not_kept", (json_int_t) r->threads, "checkpoints", s_list(sn));
    cb_snapshots_finish_req(sn, c);
}

static void s_on_done(void *ud, const cb_snap_result_t *r) {
    cb_snapshots_t *sn = ud;
    cb_kernel_t *k = sn->k;
    cb_snap_op_t op = sn->op;
    if (op == CB_SNAP_NONE) return;
    if (op == CB_SNAP_PAUSE) {
        sn->op = CB_SNAP_NONE;
        cb_snappause_done(sn, r);
        return;
    }
    if (op == CB_SNAP_CHECKPOINT && r->op == CB_SNAP_DROP) { /* the replaced one went */
        sn->op = CB_SNAP_NONE;
        s_checkpoint_reply(sn, &sn->done);
        return;
    }
    sn->op = CB_SNAP_NONE;
    if (!r->ok) {
        char text[CB_SNAP_TEXT_MAX];
        snprintf(text, sizeof text, "%s of '%s' failed: %s%s",
                 op == CB_SNAP_ROLLBACK ? "rollback"
                 : op == CB_SNAP_DROP   ? "forgetting"
                                        : "checkpoint",
                 sn->name, r->why ? r->why : "?",
                 r->sandbox_lost ? ". The sandbox was replaced by a fresh one: all variables, "
                                   "imports and files are lost"
                                 : "");
        cb_snapshots_finish_req(
            sn, cb_snapshots_error(text)); /* a cell that asked ends with the error */
        return;
    }
    if (op == CB_SNAP_CHECKPOINT) {
        long replaced = sn->replaces;
        (void) s_record(sn, r);
        if (replaced != 0) { /* the sandbox drops the old one of that name, then we answer */
            char why[CB_SNAP_WHY_MAX];
            sn->done = *r;
            sn->done.why = NULL;
            if (cb_session_snap(k->session, CB_SNAP_DROP, replaced, why, sizeof why) == 0) {
                sn->op = CB_SNAP_CHECKPOINT;
                return;
            }
            LOG_W("the checkpoint replaced could not be dropped: %s", why);
        }
        s_checkpoint_reply(sn, r);
        return;
    }
    cb_snap_rec_t *rec = s_by_id(sn, r->id);
    if (op == CB_SNAP_DROP) {
        if (rec) s_forget(rec);
        if (sn->from_cell) {
            char text[128];
            snprintf(text, sizeof text, "Checkpoint '%s' forgotten.\n", sn->name);
            s_print(k, false, text);
        }
        cb_snapshots_finish_req(sn, json_pack("{s:s, s:s, s:o}", "status", "ok", "name", sn->name,
                                              "checkpoints", s_list(sn)));
        return;
    }
    /* a rollback: the kernel's own record says where the session is now; the
     * debugger's requests and mirror were the replaced runner's */
    if (k->debug) cb_debug_runner_replaced(k->debug);
    int count = rec ? rec->count : k->exec_count;
    k->exec_count = count;
    if (rec) s_restore_comms(k, rec->comms);
    if (sn->from_cell) {
        char text[CB_SNAP_TEXT_MAX];
        snprintf(text, sizeof text,
                 "Rolled back to checkpoint '%s' (In [%d]): variables, imports and the files of "
                 "the home and /tmp are as they were then. Not restored: threads started by the "
                 "code; %d processes it started were ended.\n",
                 sn->name, count, r->ended);
        s_print(k, false, text);
    }
    cb_snapshots_finish_req(
        sn, json_pack("{s:s, s:s, s:i, s:[s, s], s:o, s:i, s:b}", "status", "ok", "name", sn->name,
                      "execution_count", count, "restored",
                      "variables, imported modules and the shell's state (history, In/Out)",
                      "the files of the working directory and /tmp", "lost",
                      s_lost_list(rec ? rec->threads : 0, r->ended), "processes_ended", r->ended,
                      "ended_request", r->ended_request));
}

static void s_on_lost(void *ud, long id, const char *why) {
    cb_snapshots_t *sn = ud;
    for (int i = 0; i < CB_SNAP_MAX; i++) {
        cb_snap_rec_t *r = &sn->rec[i];
        if (r->id == 0 || (id != 0 && r->id != id)) continue;
        LOG_W("checkpoint '%s' is gone: %s", r->name, why);
        if (id != 0 && sn->k->last_parent != NULL) { /* the user hears of it (the agent's word) */
            char text[CB_SNAP_TEXT_MAX];
            snprintf(text, sizeof text, "[cellblock] checkpoint '%s' is gone: %.200s\n", r->name,
                     why);
            cb_server_publish(sn->k->srv, "stream", sn->k->last_parent,
                              json_pack("{s:s, s:s}", "name", "stderr", "text", text));
        }
        s_forget(r);
    }
}

/* A cell asks (the runner's snapshot_request frame).  What one cell may make
 * the kernel do or print is bounded whatever it sends: one operation, one
 * listing, one notice about the rest. */
static void s_on_request(void *ud, const cb_rframe_t *f) {
    cb_snapshots_t *sn = ud;
    cb_kernel_t *k = sn->k;
    const char *op = f->u.snapreq.op, *name = f->u.snapreq.name;
    if (sn->cell_seq != f->seq) { /* a new cell */
        sn->cell_seq = f->seq;
        sn->cell_asked = sn->cell_listed = sn->cell_told = false;
    }
    bool list = strcmp(op, "list") == 0;
    if ((list && sn->cell_listed) || (!list && sn->cell_asked)) {
        if (!sn->cell_told)
            s_print(k, true,
                    "[cellblock] one checkpoint operation and one listing per cell: "
                    "the others are ignored\n");
        sn->cell_told = true;
        return;
    }
    if (list) {
        sn->cell_listed = true;
        s_print_list(sn);
        return;
    }
    sn->cell_asked = true;
    char why[CB_SNAP_WHY_MAX + 64], auto_name[32];
    cb_snap_op_t o = strcmp(op, "checkpoint") == 0 ? CB_SNAP_CHECKPOINT
                     : strcmp(op, "rollback") == 0 ? CB_SNAP_ROLLBACK
                     : strcmp(op, "forget") == 0   ? CB_SNAP_DROP
                                                   : CB_SNAP_NONE;
    if (o == CB_SNAP_NONE) {
        cb_session_snap_refuse_cell(k->session, "unknown checkpoint operation");
        return;
    }
    if (name == NULL && o == CB_SNAP_CHECKPOINT) {
        snprintf(auto_name, sizeof auto_name, "In-%d", k->exec_count);
        name = auto_name;
    }
    if (s_begin(sn, o, name ? name : "", true, why, sizeof why) < 0)
        cb_session_snap_refuse_cell(k->session, why); /* the cell ends with it */
}

static const cb_snap_cbs_t s_callbacks = {s_on_done, s_on_lost, s_on_request};

/* ---- life --------------------------------------------------------------------------------- */

cb_snapshots_t *cb_snapshots_new(cb_kernel_t *k) {
    cb_snapshots_t *sn = calloc(1, sizeof *sn);
    if (sn == NULL) return NULL;
    sn->k = k;
    sn->pause_fd = -1;
    cb_session_snap_attach(k->session, &s_callbacks, sn);
    return sn;
}

void cb_snapshots_destroy(cb_snapshots_t **self_p) {
    cb_snapshots_t *sn = *self_p;
    if (sn == NULL) return;
    for (int i = 0; i < CB_SNAP_MAX; i++)
        s_forget(&sn->rec[i]);
    if (sn->have_req) cb_msg_clear(&sn->req);
    if (sn->pause_fd >= 0) close(sn->pause_fd);
    free(sn);
    *self_p = NULL;
}

void cb_snapshots_advertise(const cb_snapshots_t *sn, json_t *content) {
    if (sn == NULL) return;
    json_t *s = s_status(sn);
    json_object_set_new(s, "version", json_integer(1));
    json_object_set_new(s, "requests",
                        json_pack("[s, s, s, s, s]", "cellblock_checkpoint_request",
                                  "cellblock_rollback_request", "cellblock_checkpoints_request",
                                  "cellblock_forget_request", "cellblock_pause_request"));
    int pz = cb_session_snap_pausable(sn->k->session);
    json_object_set_new(s, "pause", json_boolean(pz == 1));
    json_object_set_new(s, "pause_why", json_string(pz == 1 ? "" : cb_snappause_why(sn->k)));
    json_object_set_new(s, "magics",
                        json_pack("[s, s, s]", "%checkpoint", "%rollback", "%checkpoints"));
    json_object_set_new(content, "cellblock_snapshots", s);
}
