/*
 * debug.c - debug_request served through the sandbox (see debug.h).
 *
 * A request's life: busy (parent = the request); the kernel's answer at
 * once (debugInfo, configurationDone, a request it cannot forward), or a row
 * in the outstanding table under the kernel's next sequence number and a DAP
 * frame to the runner.  The runner's response for that number, rewritten to
 * carry the frontend's request_seq, becomes the debug_reply; a row the
 * runner leaves unanswered for CB_DEBUG_REPLY_TIMEOUT_MS, and every row when
 * the sandbox ends, is answered with a failure that says why.  Then idle.
 *
 * attach: the runner's debugger (pydevd) sends `initialized` while it
 * handles attach; the kernel then sends configurationDone under a row of its
 * own, and holds pydevd's attach response until that is answered (the
 * debugpy adapter's order, which ipykernel follows), so a frontend that never
 * sends configurationDone (JupyterLab >= 4.5 on most paths) still stops at
 * its breakpoints.
 *
 * The mirror (debugInfo): whether the debugger is started and attached, the
 * breakpoints the frontends set (their own requests, bounded), the threads
 * stopped (from the runner's stopped/continued events, bounded), and the
 * cells' file prefix of the sandbox (its hello).  While a sandbox is
 * starting (a kernel just started or restarted, a sandbox replaced), its
 * prefix is not known yet and a frontend that hashed cells under another
 * (or none: JupyterLab right after a restart) would set breakpoints that no
 * cell hits: debugInfo then waits in the table for the hello (cb_debug_ready),
 * answered with what is known if the start fails or CB_DEBUG_INFO_WAIT_MS
 * passes first.  While a frontend is
 * attached and a thread is stopped, the cell's --timeout clock is held
 * (cb_session_hold_deadline, bounded).
 */
#include "kernel/debug.h"

#include "isolate/log.h"
#include "kernel/bounds.h"
#include "kernel/launch.h"

#include <stdio.h>
#include <string.h>

#define S_COMMAND_MAX 64   /* bytes of a DAP command name kept */
#define S_TICK_MS     250  /* how often outstanding rows are checked for their deadline */
#define S_WHY_MAX     256  /* a failure's message */

typedef struct {
    bool used;                  /* the row is taken */
    bool internal;              /* the kernel's own configurationDone (no frontend request) */
    bool info;                  /* a debugInfo waiting for the sandbox's hello (nothing sent) */
    json_int_t seq;             /* ours, on the channel */
    json_int_t client_seq;      /* the frontend's request seq */
    char command[S_COMMAND_MAX]; /* the request's command */
    cb_msg_t msg;               /* the debug_request (owned; empty when internal) */
    int64_t deadline_ms;        /* answered with a failure then */
    json_t *held;               /* attach: the runner's response, held for the handshake */
} s_row_t;

struct cb_debug {
    cb_session_t *session;                      /* borrowed */
    cb_debug_io_t io;                           /* the kernel's side */
    void *ud;                                   /* io's argument */
    zloop_t *loop;                              /* borrowed */
    int timer_id;                               /* deadline checks, -1 when none */
    json_int_t next_seq;                        /* the last sequence number used */
    s_row_t rows[CB_DEBUG_PENDING_MAX];         /* outstanding requests */
    json_t *parent;                             /* header of the last debug_request (events) */
    /* the mirror */
    bool started;                               /* initialize succeeded, no disconnect since */
    bool attached;                              /* attach succeeded, no disconnect since */
    bool ran;                                   /* initialize succeeded in this runner */
    json_t *breakpoints;                        /* source path -> breakpoints (owned object) */
    size_t bp_bytes;                            /* their encoded size, roughly */
    json_int_t stopped[CB_DEBUG_STOPPED_MAX];   /* threads stopped now */
    size_t n_stopped;                           /* used entries */
    char prefix[CB_CELL_PREFIX_MAX];            /* the last sandbox's cell file prefix */
    /* the attach handshake */
    json_int_t attach_seq;                      /* our seq of the attach in progress, 0 none */
    bool conf_sent, conf_done;                  /* our configurationDone sent / answered */
};

/* ---- replies --------------------------------------------------------------------- */

static json_t *s_response(json_int_t client_seq, const char *command, bool ok, const char *why,
                          json_t *body) {
    json_t *r = json_pack("{s:s, s:i, s:I, s:s, s:b, s:o}", "type", "response", "seq", 0,
                          "request_seq", client_seq, "command", command, "success", ok, "body",
                          body ? body : json_object());
    if (r && why) json_object_set_new(r, "message", json_string(why));
    return r;
}

/* Answers msg (content stolen) and ends its busy period. */
static void s_answer(cb_debug_t *d, const cb_msg_t *msg, json_t *content) {
    if (content == NULL) {
        LOG_E("could not build a debug_reply");
        content = json_pack("{s:s, s:b, s:s}", "type", "response", "success", 0, "message",
                            "the kernel could not build the reply");
    }
    d->io.reply(d->ud, msg, content);
    d->io.status(d->ud, msg->header, "idle");
}

static void s_fail(cb_debug_t *d, const cb_msg_t *msg, json_int_t client_seq, const char *command,
                   const char *why) {
    LOG_I("debug_request %s: %s", command, why);
    s_answer(d, msg, s_response(client_seq, command, false, why, NULL));
}

/* ---- the outstanding table ---------------------------------------------------------- */

static int s_tick(zloop_t *loop, int timer_id, void *arg);

static s_row_t *s_row_of(cb_debug_t *d, json_int_t seq) {
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (d->rows[i].used && d->rows[i].seq == seq) return &d->rows[i];
    return NULL;
}

static s_row_t *s_new_row(cb_debug_t *d) {
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (!d->rows[i].used) {
            s_row_t *r = &d->rows[i];
            memset(r, 0, sizeof *r);
            r->used = true;
            r->seq = ++d->next_seq;
            r->deadline_ms = cb_now_ms() + CB_DEBUG_REPLY_TIMEOUT_MS;
            if (d->timer_id < 0) d->timer_id = zloop_timer(d->loop, S_TICK_MS, 0, s_tick, d);
            return r;
        }
    return NULL;
}

static void s_free_row(cb_debug_t *d, s_row_t *r) {
    cb_msg_clear(&r->msg);
    json_decref(r->held);
    if (r->seq == d->attach_seq) d->attach_seq = 0;
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (d->rows[i].used) return;
    if (d->timer_id >= 0) zloop_timer_end(d->loop, d->timer_id);
    d->timer_id = -1;
}

/* The runner's response (borrowed) to row r, as the frontend's reply. */
static void s_reply_row(cb_debug_t *d, s_row_t *r, const json_t *resp) {
    json_t *c = json_copy((json_t *) resp);
    if (c) json_object_set_new(c, "request_seq", json_integer(r->client_seq));
    s_answer(d, &r->msg, c);
    s_free_row(d, r);
}

static json_t *s_debug_info(cb_debug_t *d);

/* A waiting debugInfo, answered from the mirror as it is now. */
static void s_answer_info(cb_debug_t *d, s_row_t *r) {
    s_answer(d, &r->msg, s_response(r->client_seq, "debugInfo", true, NULL, s_debug_info(d)));
    s_free_row(d, r);
}

/* A row the runner will not answer: a failure, or (attach) what is held;
 * a debugInfo gets the mirror. */
static void s_abandon(cb_debug_t *d, s_row_t *r, const char *why) {
    if (r->info) {
        s_answer_info(d, r);
        return;
    }
    if (r->internal) {
        s_free_row(d, r);
        return;
    }
    if (r->held) {
        json_t *held = json_incref(r->held);
        d->attached = json_is_true(json_object_get(held, "success"));
        s_reply_row(d, r, held);
        json_decref(held);
        return;
    }
    s_fail(d, &r->msg, r->client_seq, r->command, why);
    s_free_row(d, r);
}

static int s_tick(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    (void) timer_id;
    cb_debug_t *d = arg;
    int64_t now = cb_now_ms();
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (d->rows[i].used && now >= d->rows[i].deadline_ms) {
            LOG_W("the sandbox's debugger did not answer %s in time", d->rows[i].command);
            s_abandon(d, &d->rows[i],
                      "the sandbox's debugger did not answer in time (is the sandbox stuck in "
                      "native code?)");
        }
    return 0;
}

/* ---- the mirror ------------------------------------------------------------------------ */

static void s_set_stopped(cb_debug_t *d, json_int_t tid, bool stopped) {
    size_t i;
    for (i = 0; i < d->n_stopped && d->stopped[i] != tid; i++) {
    }
    if (stopped && i == d->n_stopped && d->n_stopped < CB_DEBUG_STOPPED_MAX)
        d->stopped[d->n_stopped++] = tid;
    if (!stopped && i < d->n_stopped) d->stopped[i] = d->stopped[--d->n_stopped];
}

static void s_hold(cb_debug_t *d) {
    cb_session_hold_deadline(d->session, d->attached && d->n_stopped > 0);
}

/* disconnect, or the sandbox's end: nothing the debugger held survives */
static void s_forget(cb_debug_t *d) {
    d->started = d->attached = false;
    d->n_stopped = 0;
    json_object_clear(d->breakpoints);
    d->bp_bytes = 0;
    d->attach_seq = 0;
    d->conf_sent = d->conf_done = false;
    s_hold(d);
}

/* setBreakpoints as the frontend sent it (trusted, already bounded by the
 * wire): mirrored for debugInfo, within CB_DEBUG_SOURCES_MAX files and
 * CB_DEBUG_BREAKPOINTS_MAX bytes. */
static void s_mirror_breakpoints(cb_debug_t *d, const json_t *args) {
    json_t *src = json_object_get(args, "source");
    const char *path = json_string_value(json_object_get(src, "path"));
    json_t *bps = json_object_get(args, "breakpoints");
    if (path == NULL || !json_is_array(bps)) return;
    size_t size = json_dumpb(bps, NULL, 0, JSON_COMPACT) + strlen(path);
    json_t *old = json_object_get(d->breakpoints, path);
    size_t old_size = old ? json_dumpb(old, NULL, 0, JSON_COMPACT) + strlen(path) : 0;
    if ((old == NULL && json_object_size(d->breakpoints) >= CB_DEBUG_SOURCES_MAX) ||
        d->bp_bytes - old_size + size > CB_DEBUG_BREAKPOINTS_MAX) {
        LOG_W("debugInfo: too many breakpoints to mirror; %s left out", path);
        return;
    }
    d->bp_bytes -= old_size;
    if (json_array_size(bps) == 0) {
        json_object_del(d->breakpoints, path);
    } else {
        json_object_set_new(d->breakpoints, path, json_deep_copy(bps));
        d->bp_bytes += size;
    }
}

static json_t *s_debug_info(cb_debug_t *d) {
    const char *p = cb_session_cell_prefix(d->session);
    if (p[0]) snprintf(d->prefix, sizeof d->prefix, "%s", p);
    json_t *bps = json_array(), *stopped = json_array();
    const char *path;
    json_t *v;
    json_object_foreach(d->breakpoints, path, v) json_array_append_new(
        bps, json_pack("{s:s, s:O}", "source", path, "breakpoints", v));
    for (size_t i = 0; i < d->n_stopped; i++)
        json_array_append_new(stopped, json_integer(d->stopped[i]));
    /* copyToGlobals: the runner answers it (cb_debug_req), and JupyterLab
     * offers it only when debugInfo says so (ipykernel's field since 6.28) */
    return json_pack("{s:b, s:s, s:I, s:s, s:s, s:o, s:o, s:b, s:[s], s:b}", "isStarted",
                     d->started, "hashMethod", "Murmur2", "hashSeed",
                     (json_int_t) CB_DEBUG_HASH_SEED, "tmpFilePrefix", d->prefix, "tmpFileSuffix",
                     ".py", "breakpoints", bps, "stoppedThreads", stopped, "richRendering", 1,
                     "exceptionPaths", "Python Exceptions", "copyToGlobals", 1);
}

/* ---- requests --------------------------------------------------------------------------- */

static void s_forward(cb_debug_t *d, cb_msg_t *m, json_int_t client_seq, const char *command) {
    if (!cb_session_debug_open(d->session) && cb_session_cell_prefix(d->session)[0]) {
        s_fail(d, m, client_seq, command,
               "the debugger's channel of this sandbox is closed (its runner broke the channel's "
               "framing): restart the kernel to debug again");
        return;
    }
    if (!cb_session_debug_open(d->session)) {
        s_fail(d, m, client_seq, command,
               "the sandbox is not running (it is being restarted, or could not start): try "
               "again in a moment");
        return;
    }
    if (cb_session_cell_prefix(d->session)[0] && !cb_session_debugger(d->session)) {
        s_fail(d, m, client_seq, command,
               "the debugger cannot run in this sandbox: its Python has no debugpy (Debian: "
               "apt-get install python3-debugpy)");
        return;
    }
    s_row_t *r = s_new_row(d);
    if (r == NULL) {
        s_fail(d, m, client_seq, command, "too many debug requests are outstanding");
        return;
    }
    /* the row holds the request before the send: a send that finds the
     * channel broken closes it, and the close answers every row (this one
     * with its own request, not an empty one) */
    json_int_t seq = r->seq;
    r->client_seq = client_seq;
    snprintf(r->command, sizeof r->command, "%s", command);
    if (strcmp(command, "initialize") == 0)
        r->deadline_ms = cb_now_ms() + CB_DEBUG_START_TIMEOUT_MS;
    r->msg = *m;
    memset(m, 0, sizeof *m);
    json_t *content = r->msg.content;
    json_auto_t *frame = json_copy(content);
    if (frame == NULL || json_object_set_new(frame, "seq", json_integer(seq)) < 0 ||
        cb_session_debug_send(d->session, frame) < 0) {
        if (s_row_of(d, seq) == r) /* (else answered by the channel's close) */
            s_abandon(d, r,
                      "the request is too large for the debugger's channel, or too much is "
                      "queued");
        return;
    }
    if (strcmp(r->command, "setBreakpoints") == 0)
        s_mirror_breakpoints(d, json_object_get(content, "arguments"));
    if (strcmp(r->command, "attach") == 0) {
        d->attach_seq = seq;
        d->conf_sent = d->conf_done = false;
    }
}

void cb_debug_request(cb_debug_t *d, cb_msg_t *m) {
    d->io.status(d->ud, m->header, "busy");
    json_t *c = m->content, *seq = json_object_get(c, "seq"), *args = json_object_get(c, "arguments");
    const char *type = json_string_value(json_object_get(c, "type"));
    const char *command = json_string_value(json_object_get(c, "command"));
    json_int_t client_seq = json_is_integer(seq) ? json_integer_value(seq) : 0;
    json_decref(d->parent);
    d->parent = json_incref(m->header);
    if (type == NULL || strcmp(type, "request") != 0 || !json_is_integer(seq) || command == NULL ||
        strlen(command) >= S_COMMAND_MAX || (args != NULL && !json_is_object(args))) {
        LOG_W("debug_request %s with a bad shape", m->msg_id);
        s_answer(d, m,
                 s_response(client_seq, command && strlen(command) < S_COMMAND_MAX ? command : "",
                            false,
                            "a debug_request's content is a DAP request: type \"request\", an "
                            "integer seq, a command and an object of arguments",
                            NULL));
        return;
    }
    LOG_D("debug_request %s (seq %lld)", command, (long long) client_seq);
    if (strcmp(command, "debugInfo") == 0) {
        s_row_t *r = cb_session_starting(d->session) ? s_new_row(d) : NULL;
        if (r == NULL) { /* (a full table: answered now, with what is known) */
            s_answer(d, m, s_response(client_seq, command, true, NULL, s_debug_info(d)));
            return;
        }
        r->info = true;
        r->client_seq = client_seq;
        snprintf(r->command, sizeof r->command, "%s", command);
        r->deadline_ms = cb_now_ms() + CB_DEBUG_INFO_WAIT_MS;
        r->msg = *m;
        memset(m, 0, sizeof *m);
        return;
    }
    if (strcmp(command, "configurationDone") == 0) {
        /* done by the kernel during attach; the frontend's own, however often */
        s_answer(d, m, s_response(client_seq, command, true, NULL, NULL));
        return;
    }
    s_forward(d, m, client_seq, command);
}

/* ---- from the runner -------------------------------------------------------------------- */

static void s_finish_attach(cb_debug_t *d) {
    s_row_t *a = d->attach_seq ? s_row_of(d, d->attach_seq) : NULL;
    if (a == NULL || a->held == NULL || !d->conf_done) return;
    json_t *held = json_incref(a->held);
    d->attached = json_is_true(json_object_get(held, "success"));
    s_reply_row(d, a, held);
    json_decref(held);
    s_hold(d);
}

static void s_response_in(cb_debug_t *d, const cb_dap_msg_t *m) {
    s_row_t *r = s_row_of(d, m->request_seq);
    if (r == NULL || r->info) { /* (a waiting debugInfo was never sent: not the runner's) */
        LOG_W("dropped a debugger response for request %lld, which is not outstanding",
              (long long) m->request_seq);
        return;
    }
    if (r->internal) { /* our configurationDone */
        s_free_row(d, r);
        d->conf_done = true;
        s_finish_attach(d);
        return;
    }
    const char *cmd = r->command;
    if (strcmp(cmd, "initialize") == 0 && m->success) d->started = d->ran = true;
    if (strcmp(cmd, "disconnect") == 0) s_forget(d);
    if (strcmp(cmd, "attach") == 0 && r->seq == d->attach_seq) {
        if (m->success && !d->conf_done) {
            r->held = json_incref(m->root); /* answered once the handshake is complete */
            return;
        }
        d->attached = m->success;
    }
    s_reply_row(d, r, m->root);
}

/* pydevd is ready for configuration: complete DAP's handshake for the frontend */
static void s_initialized(cb_debug_t *d) {
    if (d->attach_seq == 0 || d->conf_sent) return;
    s_row_t *r = s_new_row(d);
    if (r == NULL) return;
    r->internal = true;
    snprintf(r->command, sizeof r->command, "configurationDone");
    json_auto_t *f = json_pack("{s:s, s:I, s:s, s:{}}", "type", "request", "seq", r->seq, "command",
                               "configurationDone", "arguments");
    json_int_t seq = r->seq;
    if (f == NULL || cb_session_debug_send(d->session, f) < 0) {
        if (s_row_of(d, seq) == r) s_free_row(d, r); /* (else freed by the channel's close) */
        return;
    }
    d->conf_sent = true;
}

void cb_debug_on_message(cb_debug_t *d, const cb_dap_msg_t *m) {
    if (m == NULL) {
        /* the channel closed: the sandbox ended (or broke it) */
        for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
            if (d->rows[i].used)
                s_abandon(d, &d->rows[i],
                          "the sandbox ended (or restarted) before its debugger answered");
        s_forget(d);
        d->ran = false;
        return;
    }
    if (m->kind == CB_DAP_RESPONSE) {
        s_response_in(d, m);
        return;
    }
    if (strcmp(m->event, "initialized") == 0) s_initialized(d);
    if (strcmp(m->event, "stopped") == 0 || strcmp(m->event, "continued") == 0) {
        bool stop = m->event[0] == 's';
        json_t *all = json_object_get(m->body, "allThreadsContinued");
        if (!stop && (all == NULL || json_is_true(all)))
            d->n_stopped = 0;
        else if (cb_dap_thread(m) >= 0)
            s_set_stopped(d, cb_dap_thread(m), stop);
        s_hold(d);
    }
    d->io.event(d->ud, d->parent, json_incref(m->root));
}

void cb_debug_ready(cb_debug_t *d) {
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (d->rows[i].used && d->rows[i].info) s_answer_info(d, &d->rows[i]);
}

/* (the prefix is the current sandbox's hello: until it comes, the last
 * word is the kernel's, which has the channel) */
bool cb_debug_available(const cb_debug_t *d) {
    return !cb_session_cell_prefix(d->session)[0] || cb_session_debugger(d->session);
}

/* ---- life ----------------------------------------------------------------------------- */

cb_debug_t *cb_debug_new(cb_session_t *session, const cb_debug_io_t *io, void *ud, zloop_t *loop) {
    cb_debug_t *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->session = session;
    d->io = *io;
    d->ud = ud;
    d->loop = loop;
    d->timer_id = -1;
    d->breakpoints = json_object();
    if (d->breakpoints == NULL) {
        free(d);
        return NULL;
    }
    return d;
}

void cb_debug_destroy(cb_debug_t **self_p) {
    cb_debug_t *d = *self_p;
    if (d == NULL) return;
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (d->rows[i].used) {
            cb_msg_clear(&d->rows[i].msg);
            json_decref(d->rows[i].held);
        }
    if (d->timer_id >= 0) zloop_timer_end(d->loop, d->timer_id);
    json_decref(d->breakpoints);
    json_decref(d->parent);
    free(d);
    *self_p = NULL;
}

/* ---- checkpoints (snapshot.c) ---------------------------------------------------- */

const char *cb_debug_snapshot_why(const cb_debug_t *d, bool rollback) {
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (d->rows[i].used) return "a debugger request is outstanding; retry once it is answered";
    if (rollback && d->started)
        return "the debugger is started: disconnect it first (a rollback replaces the process it "
               "debugs)";
    if (!rollback && d->ran)
        return "the debugger has run in this sandbox, and what it holds (its threads, its "
               "connection) cannot be kept in a checkpoint or an image: take checkpoints before "
               "starting the debugger (a rollback to one, or a restart, ends it)";
    return NULL;
}

void cb_debug_runner_replaced(cb_debug_t *d) {
    for (size_t i = 0; i < CB_DEBUG_PENDING_MAX; i++)
        if (d->rows[i].used)
            s_abandon(d, &d->rows[i], "the session was rolled back before its debugger answered");
    s_forget(d);
    d->ran = false;
}
