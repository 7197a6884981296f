/*
 * dispatch.c - Jupyter requests: one table from msg_type to handler (as
 * xeus's kernel core has), the shell queue, and the handlers.
 *
 * Shell requests are served one at a time in arrival order.  Those the C
 * side can answer (kernel_info, history, comm_*, connect, shutdown) are
 * answered at once; execute, complete, inspect and is_complete go to the
 * session and finish in relay.c when it reports their end.  Dispatch sits
 * on the server (it reads and sends through server.h) and below relay.c,
 * which it reaches only through k->up, registered at start.
 */
#include "kernel/dispatch.h"

#include "isolate/log.h"
#include "kernel/debug_kernel.h"
#include "kernel/launch.h"
#include "kernel/policy.h"

#include <sodium.h>
#include <string.h>

#define S_REPLY_TYPE_MAX 64 /* bytes of a "<x>_reply" type */

/* ---- small helpers ------------------------------------------------------------------ */

/* "execute_request" -> "execute_reply" */
static void s_reply_type(const char *req_type, char *buf, size_t len) {
    size_t n = strlen(req_type);
    if (n > 8 && strcmp(req_type + n - 8, "_request") == 0)
        snprintf(buf, len, "%.*s_reply", (int) (n - 8), req_type);
    else
        snprintf(buf, len, "%s_reply", req_type);
}

static json_t *s_error_content(int count, const char *ename, const char *evalue) {
    return json_pack("{s:s, s:i, s:s, s:s, s:[s++], s:{}, s:[]}", "status", "error",
                     "execution_count", count, "ename", ename, "evalue", evalue, "traceback", ename,
                     ": ", evalue, "user_expressions", "payload");
}

void cb_dispatch_status(cb_kernel_t *k, const json_t *parent, const char *state) {
    cb_server_publish(k->srv, "status", parent, json_pack("{s:s}", "execution_state", state));
}

void cb_dispatch_answer(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *m, json_t *content) {
    char rtype[S_REPLY_TYPE_MAX];
    s_reply_type(m->msg_type, rtype, sizeof rtype);
    cb_dispatch_status(k, m->header, "busy");
    cb_server_reply(k->srv, ch, m, rtype, NULL, content);
    cb_dispatch_status(k, m->header, "idle");
}

/* Replies to a request whose content could not be read (too deep). */
static void s_refuse(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *m, const char *why) {
    cb_dispatch_answer(k, ch, m, s_error_content(k->exec_count, "KernelError", why));
}

/* Receives one request from ch: 1 got one, 0 none waiting, -1 dropped (or
 * refused here: too deep to read). */
static int s_recv(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *out) {
    int rc = cb_server_recv(k->srv, ch, out);
    if (rc == CB_RECV_TOO_DEEP) {
        s_refuse(k, ch, out, "the request is nested too deeply to be read");
        cb_msg_clear(out);
        return -1;
    }
    return rc == CB_RECV_OK ? 1 : rc == CB_RECV_NONE ? 0 : -1;
}

/* ---- handlers answered here ---------------------------------------------------------- */

json_t *cb_dispatch_kernel_info(cb_kernel_t *k) {
    const char *pv = cb_session_python_version(k->session);
    char ver[32], mm[16], url[64], banner[CB_BANNER_MAX], requested[400] = "";
    snprintf(ver, sizeof ver, "%s", pv[0] ? pv : k->python_version[0] ? k->python_version : "3");
    const char *dot2 = strchr(ver, '.') ? strchr(strchr(ver, '.') + 1, '.') : NULL;
    snprintf(mm, sizeof mm, "%.*s", dot2 ? (int) (dot2 - ver) : (int) strlen(ver), ver);
    snprintf(url, sizeof url, "https://docs.python.org/%s", mm);
    const char *iso = cb_session_isolation(k->session);
    const char *fatal = cb_session_fatal(k->session);
    if (!iso[0]) {
        /* asked before the launcher reported: say what was requested, not more */
        const cb_config_t *c = &k->opts->c;
        snprintf(requested, sizeof requested,
                 "being set up (requested: %s sandbox, memory %ld MiB, pids %ld, cpus %g, disk "
                 "%ld MiB, network %s; the isolation in force is reported once it is up)",
                 c->sandbox, c->memory_mb, c->pids, c->cpus, c->disk_mb, c->network);
        iso = requested;
    }
    const char *shell = cb_session_shell(k->session), *sv = cb_session_shell_version(k->session);
    char shell_line[128] = "";
    if (strcmp(shell, "ipython") == 0)
        snprintf(shell_line, sizeof shell_line, "Shell: IPython %s (magics, get_ipython())\n", sv);
    else if (shell[0])
        snprintf(shell_line, sizeof shell_line,
                 "Shell: minimal runner (IPython is not installed in the sandbox)\n");
    snprintf(banner, sizeof banner,
             "Python %s (cellblock %s: a sandboxed Jupyter kernel)\n%sSandbox: %s%s%.500s\n", ver,
             CB_VERSION, shell_line, iso, fatal[0] ? "\nLast sandbox failure: " : "", fatal);
    /* Cells run through IPython's own shell when the sandbox has it: say so
     * as ipykernel does, so clients comparing IPython versions can. */
    bool ipy = strcmp(shell, "ipython") == 0 && sv[0];
    bool dbg = cb_debug_kernel_available(k); /* debug_kernel.c */
    json_t *info = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i}, s:s}, "
                             "s:s, s:[{s:s, s:s}], s:o, s:b}",
                     "status", "ok", "protocol_version", "5.3", "implementation",
                     ipy ? "ipython" : "cellblock", "implementation_version", ipy ? sv : CB_VERSION,
                     "cellblock_version", CB_VERSION, "language_info", "name", "python", "version",
                     ver, "mimetype", "text/x-python", "file_extension", ".py", "pygments_lexer",
                     "ipython3", "codemirror_mode", "name", "ipython", "version", 3,
                     "nbconvert_exporter", "python", "banner", banner, "help_links", "text",
                     "Python Reference", "url", url, "supported_features",
                     dbg ? json_pack("[s]", "debugger") : json_array(), "debugger", dbg);
    if (info) json_object_set_new(info, "cellblock_requests", cb_policy_advertise());
    if (info) cb_snapshots_advertise(k->snaps, info); /* snapshot.c */
    return info;
}

static void s_kernel_info(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    cb_dispatch_answer(k, ch, m, cb_dispatch_kernel_info(k));
}

static void s_shutdown(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    bool restart = json_is_true(json_object_get(m->content, "restart"));
    cb_dispatch_status(k, m->header, "busy");
    json_t *c = json_pack("{s:s, s:b}", "status", "ok", "restart", restart);
    cb_server_publish(k->srv, "shutdown_reply", m->header, json_incref(c));
    cb_server_reply(k->srv, ch, m, "shutdown_reply", NULL, c);
    cb_dispatch_status(k, m->header, "idle");
    LOG_I("shutdown requested (restart=%d)", restart);
    cb_dispatch_stop(k);
}

static void s_interrupt(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    cb_dispatch_status(k, m->header, "busy");
    cb_session_interrupt(k->session);
    cb_server_reply(k->srv, ch, m, "interrupt_reply", NULL, json_pack("{s:s}", "status", "ok"));
    cb_dispatch_status(k, m->header, "idle");
}

static void s_history(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    json_t *list = cb_history_query(k->history, m->content);
    cb_dispatch_answer(k, ch, m, json_pack("{s:s, s:o}", "status", "ok", "history", list));
}

static void s_comm_info(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    const char *target = json_string_value(json_object_get(m->content, "target_name"));
    cb_dispatch_answer(
        k, ch, m,
        json_pack("{s:s, s:o}", "status", "ok", "comms", cb_comms_info(k->comms, target)));
}

/* The binary buffers of m as base64 strings, as the runner's frames carry
 * them: a new reference, or NULL on out of memory. */
static json_t *s_buffers_b64(const cb_msg_t *m) {
    json_t *list = json_array();
    for (size_t i = 0; list && i < m->n_buffers; i++) {
        size_t len = zframe_size(m->buffers[i]);
        size_t cap = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
        char *b64 = malloc(cap);
        if (b64 == NULL) {
            json_decref(list);
            return NULL;
        }
        sodium_bin2base64(b64, cap, zframe_data(m->buffers[i]), len,
                          sodium_base64_VARIANT_ORIGINAL);
        json_array_append_new(list, json_string(b64));
        free(b64);
    }
    return list;
}

/* comm_open, comm_msg, comm_close from a frontend: handed to the sandbox,
 * whose handlers run widget code (busy/idle around it, no reply).  `data`
 * is any JSON value, as ipykernel takes it: matplotlib's nbagg figures send
 * a JSON text (the wire codec has bounded its size and depth). */
static void s_comm(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) ch;
    (void) abort;
    bool open = strcmp(m->msg_type, "comm_open") == 0;
    const char *id = NULL, *target = NULL, *module = NULL;
    json_t *data = NULL;
    json_error_t e;
    cb_dispatch_status(k, m->header, "busy");
    if (json_unpack_ex(m->content, &e, 0, "{s:s, s?s, s?s, s?o}", "comm_id", &id, "target_name",
                       &target, "target_module", &module, "data", &data) < 0 ||
        strlen(id) == 0 || strlen(id) > CB_COMM_ID_MAX || (open && target == NULL)) {
        LOG_W("%s with a bad shape: dropped", m->msg_type);
        cb_dispatch_status(k, m->header, "idle");
        return;
    }
    if (open && !cb_comms_open(k->comms, id, target)) {
        LOG_W("comm_open: too many open comms (or a name too long): closing %.64s", id);
        cb_server_publish(k->srv, "comm_close", m->header,
                          json_pack("{s:s, s:{}}", "comm_id", id, "data"));
        cb_dispatch_status(k, m->header, "idle");
        return;
    }
    if (!open && strcmp(m->msg_type, "comm_close") == 0) cb_comms_close(k->comms, id);
    /* header: the runner's kernel.get_parent() (an Output widget captures by its msg_id) */
    json_t *f = json_pack("{s:s, s:s, s:o, s:O, s:o, s:O}", "type", m->msg_type, "comm_id", id,
                          "data", data ? json_incref(data) : json_object(), "metadata", m->metadata,
                          "buffers", s_buffers_b64(m), "header", m->header);
    if (f && open) {
        json_object_set_new(f, "target_name", json_string(target));
        if (module) json_object_set_new(f, "target_module", json_string(module));
    }
    cb_dispatch_to_session(k, m, CB_REQ_COMM, f);
}

static void s_connect(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    cb_dispatch_answer(k, ch, m,
                       json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "status", "ok", "shell_port",
                                 k->ports[CB_CH_SHELL], "iopub_port", k->ports[CB_CH_IOPUB],
                                 "stdin_port", k->ports[CB_CH_STDIN], "control_port",
                                 k->ports[CB_CH_CONTROL], "hb_port", k->ports[CB_CH_HB]));
}

/* unknown message types: busy/idle, no reply */
static void s_quiet(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) ch;
    (void) abort;
    cb_dispatch_status(k, m->header, "busy");
    cb_dispatch_status(k, m->header, "idle");
}

/* ---- handlers that go to the session ------------------------------------------------- */

void cb_dispatch_to_session(cb_kernel_t *k, cb_msg_t *m, cb_req_kind_t kind, json_t *frame) {
    k->cur = *m;
    memset(m, 0, sizeof *m);
    k->cur_kind = kind;
    cb_dispatch_sync_shell(k);
    if (frame == NULL) LOG_E("could not build the %s frame", k->cur.msg_type);
    if (frame != NULL && cb_session_request(k->session, kind, frame) == 0) {
        /* late output names its request by seq: a cell, or a widget's handler */
        if (kind == CB_REQ_EXECUTE || kind == CB_REQ_COMM)
            k->up->sent(k, cb_session_seq(k->session), k->cur.header);
        return;
    }
    const char *fatal = cb_session_fatal(k->session);
    char msg[CB_LAUNCH_TEXT_MAX + 64];
    snprintf(msg, sizeof msg, "The sandbox could not be started%s%s", fatal[0] ? ": " : ".", fatal);
    cb_req_end_t e = {kind, NULL, "SandboxError", msg, false, true, NULL};
    k->up->end(k, &e);
}

static void s_execute(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) ch;
    json_t *c = m->content;
    cb_dispatch_status(k, m->header, "busy");
    if (abort) {
        cb_server_reply(
            k->srv, CB_CH_SHELL, m, "execute_reply",
            json_pack("{s:s, s:b, s:s, s:s}", "status", "aborted", "dependencies_met", 1, "engine",
                      cb_server_session(k->srv), "started", ""),
            json_pack("{s:s, s:i}", "status", "aborted", "execution_count", k->exec_count));
        cb_dispatch_status(k, m->header, "idle");
        return;
    }
    json_t *code = json_object_get(c, "code"), *ue = json_object_get(c, "user_expressions");
    if (!json_is_string(code) || (ue != NULL && !json_is_object(ue))) {
        LOG_W("execute_request %s with a bad shape", m->msg_id);
        cb_server_reply(k->srv, CB_CH_SHELL, m, "execute_reply", NULL,
                        s_error_content(k->exec_count, "KernelError",
                                        "execute_request needs a string 'code' (and an object "
                                        "'user_expressions')"));
        cb_dispatch_status(k, m->header, "idle");
        return;
    }
    json_t *v;
    k->ex_silent = json_is_true(json_object_get(c, "silent"));
    v = json_object_get(c, "store_history");
    k->ex_store = k->ex_silent ? false : (v ? json_is_true(v) : true);
    k->ex_stdin = json_is_true(json_object_get(c, "allow_stdin"));
    v = json_object_get(c, "stop_on_error");
    k->ex_stop_on_error = v ? json_is_true(v) : true;
    k->ex_waiting_input = k->ex_have_result = false;
    k->ex_shown = k->exec_count + 1;
    cb_iso_now(k->ex_started);
    if (!k->ex_silent)
        cb_server_publish(k->srv, "execute_input", m->header,
                          json_pack("{s:O, s:i}", "code", code, "execution_count", k->ex_shown));
    /* as IPython: a cell of only white space does not take a number */
    const char *src = json_string_value(code);
    if (k->ex_store && src[strspn(src, " \t\r\n\f\v")] != '\0') {
        k->exec_count++;
        cb_history_add(k->history, k->exec_count, src);
    }
    json_decref(k->last_parent);
    k->last_parent = json_incref(m->header);
    cb_policy_execute_begin(k); /* the cell's costs start */
    /* header: the runner's kernel.get_parent() (an Output widget captures by its msg_id) */
    json_t *f = json_pack("{s:s, s:O, s:b, s:b, s:o, s:b, s:i, s:O}", "type", "execute", "code",
                          code, "silent", k->ex_silent, "store_history", k->ex_store,
                          "user_expressions", ue ? json_incref(ue) : json_object(), "allow_stdin",
                          k->ex_stdin, "execution_count", k->ex_shown, "header", m->header);
    cb_dispatch_to_session(k, m, CB_REQ_EXECUTE, f);
}

static void s_assist(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) ch;
    (void) abort;
    static const struct {
        const char *msg_type, *frame_type;
        cb_req_kind_t kind;
    } kinds[] = {{"complete_request", "complete", CB_REQ_COMPLETE},
                 {"inspect_request", "inspect", CB_REQ_INSPECT},
                 {"is_complete_request", "is_complete", CB_REQ_IS_COMPLETE}};
    size_t i = 0;
    while (strcmp(kinds[i].msg_type, m->msg_type) != 0)
        i++; /* the table routes only these three here */
    cb_dispatch_status(k, m->header, "busy");
    const char *code = NULL;
    json_int_t pos = 0, detail = 0;
    json_error_t e;
    int rc = kinds[i].kind == CB_REQ_IS_COMPLETE
                 ? json_unpack_ex(m->content, &e, 0, "{s:s}", "code", &code)
                 : json_unpack_ex(m->content, &e, 0, "{s:s, s:I, s?I}", "code", &code, "cursor_pos",
                                  &pos, "detail_level", &detail);
    json_t *f = NULL;
    if (rc == 0)
        f = kinds[i].kind == CB_REQ_IS_COMPLETE
                ? json_pack("{s:s, s:s}", "type", kinds[i].frame_type, "code", code)
                : json_pack("{s:s, s:s, s:I, s:I}", "type", kinds[i].frame_type, "code", code,
                            "cursor_pos", pos, "detail_level", detail);
    else
        LOG_W("%s with a bad shape (%s): answering empty", m->msg_type, e.text);
    if (f == NULL) {
        /* answered empty, as ipykernel does for what it cannot read */
        k->cur = *m;
        memset(m, 0, sizeof *m);
        k->cur_kind = kinds[i].kind;
        cb_req_end_t end = {kinds[i].kind, NULL, NULL, NULL, false, false, NULL};
        k->up->end(k, &end);
        return;
    }
    cb_dispatch_to_session(k, m, kinds[i].kind, f);
}

/* ---- the table ------------------------------------------------------------------------ */

/* One row per request type; a handler of another file is declared in that
 * file's header (dispatch.h says how). */
static const struct {
    const char *msg_type;   /* request type */
    unsigned channels;      /* where it is accepted: CB_ON_SHELL | CB_ON_CONTROL */
    cb_handler_fn *handler; /* who answers */
} s_table[] = {
    {"kernel_info_request", CB_ON_SHELL | CB_ON_CONTROL, s_kernel_info},
    {"shutdown_request", CB_ON_SHELL | CB_ON_CONTROL, s_shutdown},
    {"interrupt_request", CB_ON_CONTROL, s_interrupt},
    {"execute_request", CB_ON_SHELL, s_execute},
    {"complete_request", CB_ON_SHELL, s_assist},
    {"inspect_request", CB_ON_SHELL, s_assist},
    {"is_complete_request", CB_ON_SHELL, s_assist},
    {"history_request", CB_ON_SHELL, s_history},
    {"comm_info_request", CB_ON_SHELL, s_comm_info},
    {"comm_open", CB_ON_SHELL, s_comm},
    {"comm_msg", CB_ON_SHELL, s_comm},
    {"comm_close", CB_ON_SHELL, s_comm},
    {"connect_request", CB_ON_SHELL, s_connect},
    {"debug_request", CB_ON_CONTROL, cb_debug_kernel_request},
    {"cellblock_network_request", CB_ON_CONTROL, cb_policy_network_request},
    {"usage_request", CB_ON_CONTROL, cb_policy_usage_request},
    /* checkpoints in place (snapshot.c, docs/SNAPSHOTS.md) */
    {"cellblock_checkpoint_request", CB_ON_CONTROL, cb_snapshot_checkpoint},
    {"cellblock_rollback_request", CB_ON_CONTROL, cb_snapshot_rollback},
    {"cellblock_checkpoints_request", CB_ON_CONTROL, cb_snapshot_list},
    {"cellblock_forget_request", CB_ON_CONTROL, cb_snapshot_forget},
    {"cellblock_pause_request", CB_ON_CONTROL, cb_snapshot_pause},
};

void cb_dispatch(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    LOG_D("%s: %s %s", cb_channel_name(ch), m->msg_type, m->msg_id);
    for (size_t i = 0; i < sizeof s_table / sizeof s_table[0]; i++)
        if ((s_table[i].channels & (1u << ch)) && strcmp(s_table[i].msg_type, m->msg_type) == 0) {
            s_table[i].handler(k, ch, m, abort);
            return;
        }
    LOG_W("%s: unsupported message type '%.64s'; no reply", cb_channel_name(ch), m->msg_type);
    s_quiet(k, ch, m, abort);
}

/* ---- queues ------------------------------------------------------------------------------- */

void cb_dispatch_abort_queued(cb_kernel_t *k) {
    /* Everything that has arrived by now is "queued"; pull it in. */
    while (k->q_len < CB_SHELL_QUEUE_MAX) {
        cb_msg_t m;
        int rc = s_recv(k, CB_CH_SHELL, &m);
        if (rc == 0) break;
        if (rc < 0) continue;
        size_t slot = (k->q_head + k->q_len) % CB_SHELL_QUEUE_MAX;
        k->queue[slot] = (cb_queued_t){m, false};
        k->q_len++;
    }
    for (size_t i = 0; i < k->q_len; i++) {
        cb_queued_t *q = &k->queue[(k->q_head + i) % CB_SHELL_QUEUE_MAX];
        if (strcmp(q->msg.msg_type, "execute_request") == 0) q->abort = true;
    }
    if (k->q_len) LOG_I("stop_on_error: %zu queued request(s) examined for abort", k->q_len);
}

static void s_pump_shell(cb_kernel_t *k) {
    while (k->cur_kind == CB_REQ_NONE && !k->exiting && !cb_server_congested(k->srv)) {
        cb_msg_t m;
        bool abort = false;
        if (k->q_len > 0) {
            cb_queued_t *q = &k->queue[k->q_head];
            m = q->msg;
            abort = q->abort;
            k->q_head = (k->q_head + 1) % CB_SHELL_QUEUE_MAX;
            k->q_len--;
        } else {
            int rc = s_recv(k, CB_CH_SHELL, &m);
            if (rc == 0) break;
            if (rc < 0) continue;
        }
        cb_dispatch(k, CB_CH_SHELL, &m, abort);
        cb_msg_clear(&m);
    }
    cb_dispatch_sync_shell(k);
}

void cb_dispatch_done(cb_kernel_t *k) {
    cb_msg_clear(&k->cur);
    k->cur_kind = CB_REQ_NONE;
    k->ex_waiting_input = false;
    s_pump_shell(k);
}

static void s_serve_control(cb_kernel_t *k) {
    for (;;) {
        cb_msg_t m;
        int rc = s_recv(k, CB_CH_CONTROL, &m);
        if (rc == 0) break;
        if (rc < 0) continue;
        cb_dispatch(k, CB_CH_CONTROL, &m, false);
        cb_msg_clear(&m);
        if (k->exiting) break;
    }
}

static void s_pump_stdin(cb_kernel_t *k) {
    for (;;) {
        cb_msg_t m;
        int rc = s_recv(k, CB_CH_STDIN, &m);
        if (rc == 0) return;
        if (rc < 0) continue;
        json_t *value = json_object_get(m.content, "value");
        if (strcmp(m.msg_type, "input_reply") == 0 && k->ex_waiting_input &&
            json_is_string(value)) {
            k->ex_waiting_input = false;
            cb_session_input_reply(k->session, json_string_value(value), NULL);
        } else {
            LOG_W("stdin: dropped %s (no input was requested, or bad shape)", m.msg_type);
        }
        cb_msg_clear(&m);
    }
}

void cb_dispatch_serve(cb_kernel_t *k, cb_channel_t ch) {
    switch (ch) {
    case CB_CH_SHELL: s_pump_shell(k); break;
    case CB_CH_CONTROL: s_serve_control(k); break;
    case CB_CH_STDIN: s_pump_stdin(k); break;
    default: break;
    }
}

void cb_dispatch_sync_shell(cb_kernel_t *k) {
    cb_server_want_shell(k->srv, k->cur_kind == CB_REQ_NONE && !k->exiting);
}

void cb_dispatch_stop(cb_kernel_t *k) {
    k->exiting = true;
    cb_dispatch_sync_shell(k);
    cb_server_stop(k->srv);
}
