/*
 * relay.c - what the session reports, turned into Jupyter messages.
 *
 * Every message built here comes from the sandbox's output and is signed by
 * the kernel with a parent the kernel chose: the request in flight, or, for
 * late output (threads still printing after their cell), the execute the
 * frame's sequence number names, if it is among the last CB_RECENT_PARENTS,
 * else the last execute.  A silent execute broadcasts nothing of its own on
 * iopub (the messaging spec's "silent"): streams, displays, errors and
 * artifacts alike.  Relay is the top layer: it calls dispatch (a request's
 * end), the session and the server, and nothing calls it but through the
 * callback tables it registers (cb_relay_callbacks, cb_relay_upcalls).
 */
#include "kernel/relay.h"

#include "isolate/log.h"
#include "kernel/debug_kernel.h"
#include "kernel/dispatch.h"
#include "kernel/jsonstr.h"
#include "kernel/policy.h"

#include <sodium.h>
#include <string.h>

#define S_INPUT_REFUSED "input was requested, but this frontend does not support input requests"
#define S_BAD_REQUEST_MSG_MAX                                                                      \
    (CB_FRAME_SMALL_MAX + 64) /* the prefix and a whole reason: never cut */

/* Remembers the parent of the execute (or comm) just handed to the session. */
static void s_remember(cb_kernel_t *k, json_int_t seq, const json_t *header) {
    size_t i = k->recent_next;
    json_decref(k->recent[i].header);
    k->recent[i].seq = seq;
    k->recent[i].header = json_incref((json_t *) header);
    k->recent_next = (i + 1) % CB_RECENT_PARENTS;
}

void cb_relay_forget_all(cb_kernel_t *k) {
    for (size_t i = 0; i < CB_RECENT_PARENTS; i++) {
        json_decref(k->recent[i].header);
        k->recent[i].header = NULL;
    }
}

static const json_t *s_parent(const cb_kernel_t *k, bool late, json_int_t seq) {
    if (!late && (k->cur_kind == CB_REQ_EXECUTE || k->cur_kind == CB_REQ_COMM))
        return k->cur.header;
    for (size_t i = 0; seq >= 0 && i < CB_RECENT_PARENTS; i++)
        if (k->recent[i].header && k->recent[i].seq == seq) return k->recent[i].header;
    return k->last_parent;
}

/* Publishes a message of the sandbox's (paced by the server). */
static void s_output(cb_kernel_t *k, const char *type, const json_t *parent, json_t *content) {
    cb_server_publish_output(k->srv, type, parent, NULL, content, NULL, 0);
}

/* Output of the execute in flight while it is silent is not broadcast. */
static bool s_quiet(const cb_kernel_t *k, bool late) {
    return !late && k->cur_kind == CB_REQ_EXECUTE && k->ex_silent;
}

static void s_on_stream(void *ud, int which, const char *text, size_t len, bool late) {
    cb_kernel_t *k = ud;
    const json_t *parent = s_parent(k, late, cb_session_runner_seq(k->session));
    if (!late && k->cur_kind == CB_REQ_EXECUTE && cb_policy_costs(k))
        cb_costs_stream(cb_policy_costs(k), which, len);
    if (parent == NULL || s_quiet(k, late)) return;
    /* the text is valid UTF-8 (stream.c): its JSON is built in bulk (jsonstr.h) */
    size_t n = 0;
    char *content = cb_json_stream_content(which ? "stderr" : "stdout", text, len, &n);
    if (content == NULL) {
        LOG_W("out of memory: %zu bytes of output dropped", len);
        return;
    }
    cb_server_publish_output_json(k->srv, "stream", parent, content, n);
}

static void s_on_notice(void *ud, const char *text, bool late) {
    cb_kernel_t *k = ud;
    const json_t *parent = s_parent(k, late, -1);
    if (parent == NULL || s_quiet(k, late)) return;
    cb_server_publish(k->srv, "stream", parent,
                      json_pack("{s:s, s:s}", "name", "stderr", "text", text));
}

static void s_input_request(cb_kernel_t *k, const cb_rframe_t *f) {
    if (k->cur_kind != CB_REQ_EXECUTE || !k->ex_stdin) {
        cb_session_input_reply(k->session, NULL, S_INPUT_REFUSED);
        return;
    }
    /* discard stale replies, then ask the client that sent the execute_request */
    cb_server_discard(k->srv, CB_CH_STDIN);
    k->ex_waiting_input = true;
    cb_server_reply(
        k->srv, CB_CH_STDIN, &k->cur, "input_request", NULL,
        json_pack("{s:s, s:b}", "prompt", f->u.input.prompt, "password", f->u.input.password));
}

/* A comm message of the sandbox's widgets: on iopub, with its binary
 * buffers decoded; the open comms are tracked for comm_info and teardown. */
static void s_comm_out(cb_kernel_t *k, const cb_rframe_t *f, const json_t *parent) {
    static const char *const types[] = {[CB_RF_COMM_OPEN] = "comm_open",
                                        [CB_RF_COMM_MSG] = "comm_msg",
                                        [CB_RF_COMM_CLOSE] = "comm_close"};
    const char *id = f->u.comm.comm_id;
    if (f->type == CB_RF_COMM_OPEN && !cb_comms_open(k->comms, id, f->u.comm.target_name)) {
        LOG_W("sandbox comm_open refused: too many open comms");
        return;
    }
    if (f->type != CB_RF_COMM_OPEN && !cb_comms_known(k->comms, id)) {
        LOG_W("sandbox %s for a comm that is not open: dropped", types[f->type]);
        return;
    }
    if (f->type == CB_RF_COMM_CLOSE) cb_comms_close(k->comms, id);
    json_t *c = json_pack("{s:s, s:o}", "comm_id", id, "data",
                          f->u.comm.data ? json_incref(f->u.comm.data) : json_object());
    if (c && f->type == CB_RF_COMM_OPEN) {
        json_object_set_new(c, "target_name", json_string(f->u.comm.target_name));
        /* null when there is none, as ipykernel sends it */
        json_object_set_new(c, "target_module",
                            f->u.comm.target_module ? json_string(f->u.comm.target_module)
                                                    : json_null());
    }
    cb_wire_buf_t bufs[CB_WIRE_MAX_BUFFERS];
    unsigned char *bin[CB_WIRE_MAX_BUFFERS];
    size_t nb = json_array_size(f->u.comm.buffers), ok = 0; /* <= MAX_BUFFERS: frame.c */
    for (size_t i = 0; i < nb; i++) {
        json_t *b = json_array_get(f->u.comm.buffers, i);
        size_t blen = json_string_length(b), cap = blen / 4 * 3 + 3, got = 0;
        bin[ok] = malloc(cap);
        if (bin[ok] == NULL || sodium_base642bin(bin[ok], cap, json_string_value(b), blen, NULL,
                                                 &got, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
            LOG_W("%s: a buffer is not base64: message dropped", types[f->type]);
            for (size_t j = 0; j <= ok; j++)
                free(bin[j]);
            json_decref(c);
            return;
        }
        bufs[ok] = (cb_wire_buf_t){bin[ok], got};
        ok++;
    }
    json_t *md = f->u.comm.metadata;
    cb_server_publish_output(k->srv, types[f->type], parent, md ? json_incref(md) : NULL, c, bufs,
                             ok);
    for (size_t i = 0; i < ok; i++)
        free(bin[i]);
}

static void s_on_frame(void *ud, const cb_rframe_t *f, bool late) {
    cb_kernel_t *k = ud;
    if (f->type == CB_RF_INPUT_REQUEST) {
        s_input_request(k, f);
        return;
    }
    if (f->type == CB_RF_COMM_OPEN || f->type == CB_RF_COMM_MSG || f->type == CB_RF_COMM_CLOSE) {
        /* widget traffic is not output of a cell: published even for a silent one */
        const json_t *parent = s_parent(k, late, f->seq);
        s_comm_out(k, f, parent);
        return;
    }
    const json_t *parent = s_parent(k, late, f->seq);
    bool shown = f->type == CB_RF_DISPLAY || f->type == CB_RF_UPDATE_DISPLAY ||
                 f->type == CB_RF_EXECUTE_RESULT;
    if (shown && !late && k->cur_kind == CB_REQ_EXECUTE && cb_policy_costs(k))
        cb_costs_display(cb_policy_costs(k), f->bytes);
    if (parent == NULL || s_quiet(k, late)) return;
    json_t *md = f->u.bundle.metadata, *tr = f->u.bundle.transient;
    switch (f->type) {
    case CB_RF_DISPLAY:
    case CB_RF_UPDATE_DISPLAY:
        s_output(k, f->type == CB_RF_DISPLAY ? "display_data" : "update_display_data", parent,
                 json_pack("{s:O, s:o, s:o}", "data", f->u.bundle.data, "metadata",
                           md ? json_incref(md) : json_object(), "transient",
                           tr ? json_incref(tr) : json_object()));
        break;
    case CB_RF_EXECUTE_RESULT: {
        const char *tp = json_string_value(json_object_get(f->u.bundle.data, "text/plain"));
        if (tp && !k->ex_have_result && k->ex_store)
            cb_history_set_output(
                k->history, k->ex_shown, tp,
                json_string_length(json_object_get(f->u.bundle.data, "text/plain")));
        k->ex_have_result = true;
        json_t *c = json_pack("{s:i, s:O, s:o}", "execution_count", k->ex_shown, "data",
                              f->u.bundle.data, "metadata", md ? json_incref(md) : json_object());
        /* one sent with a display_id (kernel.session.send) keeps it */
        if (c && json_object_size(tr) > 0) json_object_set(c, "transient", tr);
        s_output(k, "execute_result", parent, c);
        break;
    }
    case CB_RF_CLEAR_OUTPUT:
        s_output(k, "clear_output", parent, json_pack("{s:b}", "wait", f->u.clear.wait));
        break;
    case CB_RF_ERROR:
        s_output(k, "error", parent,
                 json_pack("{s:s, s:s, s:O}", "ename", f->u.error.ename, "evalue",
                           f->u.error.evalue, "traceback", f->u.error.traceback));
        break;
    default: LOG_W("relay: unexpected frame %s", cb_rframe_name(f->type)); break;
    }
}

static void s_on_artifact(void *ud, const json_t *bundle) {
    cb_kernel_t *k = ud;
    if (k->cur_kind != CB_REQ_EXECUTE || k->ex_silent) return;
    json_t *data = json_object_get(bundle, "data"), *meta = json_object_get(bundle, "metadata");
    s_output(k, "display_data", k->cur.header,
             json_pack("{s:O, s:o, s:{}}", "data", data, "metadata",
                       meta ? json_incref(meta) : json_object(), "transient"));
}

/* The sandbox ended: the comms it held are closed for the frontends. */
static void s_on_lost(void *ud) {
    cb_kernel_t *k = ud;
    json_auto_t *ids = cb_comms_take_all(k->comms);
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) cb_server_publish(
        k->srv, "comm_close", k->last_parent, json_pack("{s:O, s:{}}", "comm_id", id, "data"));
}

static void s_on_gone(void *ud, const char *message) {
    cb_kernel_t *k = ud;
    if (k->last_parent == NULL || k->exiting) return;
    cb_server_publish(
        k->srv, "stream", k->last_parent,
        json_pack("{s:s, s:s++}", "name", "stderr", "text", "[cellblock] ", message, "\n"));
}

/* ---- the end of a request ------------------------------------------------------------------ */

/* exit() / quit() in a cell: IPython's ask_exit payload; like ipykernel, the
 * kernel shuts down after the reply unless it asks to keep the kernel. */
static bool s_asks_exit(const json_t *payload) {
    size_t i;
    json_t *p;
    json_array_foreach(payload, i, p) {
        const char *src = json_string_value(json_object_get(p, "source"));
        if (src && strcmp(src, "ask_exit") == 0 && !json_is_true(json_object_get(p, "keepkernel")))
            return true;
    }
    return false;
}

static void s_end_execute(cb_kernel_t *k, const cb_req_end_t *e) {
    const cb_rframe_t *f = e->frame;
    bool done = f && f->type == CB_RF_DONE;
    bool ok = done && strcmp(f->u.done.status, "ok") == 0;
    if (ok && f->u.done.payload && s_asks_exit(f->u.done.payload)) {
        LOG_I("the cell asked the kernel to exit");
        k->exit_after_reply = true;
    }
    const char *ename = e->ename, *evalue = e->message;
    if (f && f->type == CB_RF_BAD_REQUEST) {
        ename = "KernelError";
        evalue = "the sandbox could not read this request";
        LOG_W("execute %s: the runner said: %s", k->cur.msg_id, f->u.bad.error);
    }
    if (e->timed_out && done && !k->ex_silent) {
        char note[CB_NOTICE_MAX];
        snprintf(note, sizeof note,
                 "[cellblock] the cell exceeded its time limit of %ld s (--timeout) and was "
                 "interrupted\n",
                 k->opts->c.timeout_s);
        cb_server_publish(k->srv, "stream", k->cur.header,
                          json_pack("{s:s, s:s}", "name", "stderr", "text", note));
    }
    json_t *content = NULL;
    if (ok) {
        json_t *ue = f->u.done.user_expressions, *pl = f->u.done.payload;
        content = json_pack("{s:s, s:i, s:o, s:o}", "status", "ok", "execution_count",
                            k->exec_count, "user_expressions", ue ? json_incref(ue) : json_object(),
                            "payload", pl ? json_incref(pl) : json_array());
    } else if (done) {
        json_t *tb = f->u.done.traceback;
        content =
            json_pack("{s:s, s:i, s:s, s:s, s:o, s:{}, s:[]}", "status", "error", "execution_count",
                      k->exec_count, "ename", f->u.done.ename ? f->u.done.ename : "Error", "evalue",
                      f->u.done.evalue ? f->u.done.evalue : "", "traceback",
                      tb ? json_incref(tb) : json_array(), "user_expressions", "payload");
    } else {
        if (!ename) ename = "SandboxError", evalue = "the sandbox ended the cell";
        /* the kernel's own error message: never dropped, even under congestion */
        if (!k->ex_silent)
            cb_server_publish(k->srv, "error", k->cur.header,
                              json_pack("{s:s, s:s, s:[s]}", "ename", ename, "evalue", evalue,
                                        "traceback", evalue));
        content = json_pack("{s:s, s:i, s:s, s:s, s:[s], s:{}, s:[]}", "status", "error",
                            "execution_count", k->exec_count, "ename", ename, "evalue", evalue,
                            "traceback", evalue, "user_expressions", "payload");
    }
    json_t *meta =
        json_pack("{s:s, s:b, s:s, s:s, s:{s:o}}", "started", k->ex_started, "dependencies_met", 1,
                  "engine", cb_server_session(k->srv), "status", ok ? "ok" : "error", "cellblock",
                  "artifacts", e->artifacts ? json_incref(e->artifacts) : json_array());
    cb_policy_execute_end(k, json_object_get(meta, "cellblock"), e->artifacts);
    /* stop_on_error: what has arrived by now is "queued" and gets aborted.
     * Take it before the reply goes out, so a request the client sends after
     * seeing this reply is never caught by the abort. */
    if (!ok && k->ex_stop_on_error && !k->ex_silent) cb_dispatch_abort_queued(k);
    if (content == NULL) {
        LOG_E("could not build the execute_reply: sending a minimal one");
        content = json_pack("{s:s, s:i, s:s, s:s, s:[]}", "status", "error", "execution_count",
                            k->exec_count, "ename", "KernelError", "evalue",
                            "the reply could not be built", "traceback");
    }
    cb_server_reply(k->srv, CB_CH_SHELL, &k->cur, "execute_reply", meta, content);
}

static void s_end_assist(cb_kernel_t *k, const cb_req_end_t *e) {
    const cb_rframe_t *f = e->frame && e->frame->type != CB_RF_BAD_REQUEST ? e->frame : NULL;
    json_t *c = NULL;
    const char *rtype = "complete_reply";
    switch (e->kind) {
    case CB_REQ_COMPLETE: {
        json_int_t pos = json_integer_value(json_object_get(k->cur.content, "cursor_pos"));
        json_int_t cs = f && f->u.complete.cursor_start >= 0 ? f->u.complete.cursor_start : pos;
        json_int_t ce = f && f->u.complete.cursor_end >= 0 ? f->u.complete.cursor_end : pos;
        json_t *md = f ? f->u.complete.metadata : NULL;
        c = json_pack("{s:s, s:o, s:I, s:I, s:o}", "status", "ok", "matches",
                      f ? json_incref(f->u.complete.matches) : json_array(), "cursor_start", cs,
                      "cursor_end", ce, "metadata", md ? json_incref(md) : json_object());
        break;
    }
    case CB_REQ_INSPECT: {
        bool found = f && f->u.inspect.found && f->u.inspect.data;
        json_t *md = f ? f->u.inspect.metadata : NULL;
        rtype = "inspect_reply";
        c = json_pack("{s:s, s:b, s:o, s:o}", "status", "ok", "found", found, "data",
                      found ? json_incref(f->u.inspect.data) : json_object(), "metadata",
                      md ? json_incref(md) : json_object());
        break;
    }
    default:
        rtype = "is_complete_reply";
        c = json_pack("{s:s}", "status", f ? f->u.is_complete.status : "unknown");
        if (c && f && strcmp(f->u.is_complete.status, "incomplete") == 0)
            json_object_set_new(
                c, "indent", json_string(f->u.is_complete.indent ? f->u.is_complete.indent : ""));
        break;
    }
    /* no answer (refused, timed out, the sandbox ended): an error that says
     * why, keeping the ok reply's fields for frontends that read them first
     * (is_complete has "unknown" for that) */
    bool bad = e->frame && e->frame->type == CB_RF_BAD_REQUEST;
    const char *ename = bad ? "SandboxError" : e->ename;
    if (c && ename && e->kind != CB_REQ_IS_COMPLETE) {
        char said[S_BAD_REQUEST_MSG_MAX];
        if (bad)
            snprintf(said, sizeof said, "the sandbox could not read the request: %s",
                     e->frame->u.bad.error ? e->frame->u.bad.error : "(no reason)");
        const char *why = bad ? said : e->message ? e->message : "the sandbox gave no answer";
        json_object_set_new(c, "status", json_string("error"));
        json_object_set_new(c, "ename", json_string(ename));
        json_object_set_new(c, "evalue", json_string(why));
        json_object_set_new(c, "traceback", json_pack("[s]", why));
    }
    cb_server_reply(k->srv, CB_CH_SHELL, &k->cur, rtype, NULL, c);
}

static void s_on_end(void *ud, const cb_req_end_t *e) {
    cb_kernel_t *k = ud;
    if (k->cur_kind == CB_REQ_NONE) return; /* the kernel is going away */
    if (e->kind == CB_REQ_EXECUTE)
        s_end_execute(k, e);
    else if (e->kind != CB_REQ_COMM) /* comm messages have no reply */
        s_end_assist(k, e);
    cb_dispatch_status(k, k->cur.header, "idle");
    if (k->exit_after_reply) {
        cb_dispatch_stop(k);
        return;
    }
    cb_dispatch_done(k);
}

const cb_session_cbs_t cb_relay_callbacks = {
    .on_ready = cb_debug_kernel_on_ready,
    .on_stream = s_on_stream,
    .on_frame = s_on_frame,
    .on_artifact = s_on_artifact,
    .on_end = s_on_end,
    .on_gone = s_on_gone,
    .on_notice = s_on_notice,
    .on_lost = s_on_lost,
    .on_debug = cb_debug_kernel_on_message,
};

static void s_end_now(cb_kernel_t *k, const cb_req_end_t *e) { s_on_end(k, e); }

const cb_upcalls_t cb_relay_upcalls = {
    .sent = s_remember,
    .end = s_end_now,
};
