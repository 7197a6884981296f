/*
 * kernel.c - dispatch of Jupyter requests and the relay to the runner.
 *
 * Shell requests are served one at a time in arrival order.  Those the C
 * side can answer (kernel_info, history, comm_*, shutdown) are answered at
 * once; execute, complete, inspect and is_complete go to the runner as one
 * frame and finish when its answer (or its death) arrives.  While a request
 * is in flight the shell socket is not read, so later requests queue in ZMQ,
 * which is what makes stop_on_error's "abort queued requests" meaningful.
 *
 * Output order: before any frame from the runner is handled, the
 * stdout/stderr pipes are drained and published, and the reply goes out only
 * after the runner's `done` and a final drain, followed by idle.
 */
#include "kernel/kernel.h"

#include "kernel/auth.h"
#include "kernel/conn.h"
#include "kernel/frame.h"
#include "kernel/runner.h"
#include "kernel/wire.h"
#include "artifacts/artifacts.h"
#include "limits.h"
#include "log.h"
#include "util.h"

#include <czmq.h>
#include <fnmatch.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define CB_SHUTDOWN_REAP_MS   2000 /* wait this long for the sandbox to go at exit */
#define CB_RESPAWN_BACKOFF_MS 1000 /* after a failed start, wait before retrying */
#define CB_ZMQ_LINGER_MS      1000 /* let final replies leave on exit */
#define CB_PARENT_POLL_MS     1000 /* how often the parent's life is checked */

typedef enum { REQ_NONE, REQ_EXECUTE, REQ_COMPLETE, REQ_INSPECT, REQ_IS_COMPLETE } req_kind_t;

typedef struct {
    cb_msg_t msg; /* the queued request */
    bool abort;   /* execute_request to be aborted (stop_on_error) */
} queued_t;

typedef struct {
    uint8_t buf[CB_STREAM_FLUSH_BYTES + CB_STREAM_CHUNK]; /* undelivered bytes */
    size_t len;                                           /* bytes in buf */
    int64_t due_ms;                                       /* flush deadline, 0 = nothing pending */
    int64_t last_flush_ms;                                /* when this stream was last published */
} stream_t;

typedef struct {
    int line;     /* execution count */
    char *input;  /* code */
    char *output; /* text/plain of the execute_result, or NULL */
} hist_t;

typedef struct {
    cb_opts_t *opts;                  /* parsed command line (borrowed) */
    cb_conn_t conn;                   /* connection file */
    cb_auth_t *auth;                  /* HMAC + replay history */
    cb_wire_ctx_t wire;               /* session id etc. */
    zsock_t *sock[CB_CH_COUNT];       /* hb is owned by the heartbeat thread */
    pthread_t hb_thread;              /* heartbeat echo */
    zsock_t *hb_stop_tx, *hb_stop_rx; /* inproc pair: a message ends the heartbeat thread */
    int sigfd;                        /* signalfd for INT, TERM, CHLD, HUP */
    char launcher_path[CB_PATH_MAX];  /* cellblock-launcher */
    char runner_path[CB_PATH_MAX];    /* runner.py */
    cb_runner_cfg_t rcfg;             /* how to spawn */
    cb_runner_t run;                  /* the current sandbox */
    int64_t respawn_at_ms;            /* earliest next spawn after a failure */
    char last_fatal[512];             /* last set-up failure, for the banner */
    char isolation[512];              /* last isolation description */
    char python_version[32];          /* sandboxed Python's version */
    cb_artifacts_t *artifacts;        /* artifact collector, NULL when disabled */
    /* shell queue (filled while aborting) */
    queued_t *queue;      /* ring of queued requests */
    size_t q_head, q_len; /* ring position and length */
    /* the request in flight */
    cb_msg_t cur;                                         /* valid when cur_kind != REQ_NONE */
    req_kind_t cur_kind;                                  /* what it is */
    bool cur_sent;                                        /* frame handed to the runner */
    bool ex_silent, ex_store, ex_stdin, ex_stop_on_error; /* execute flags */
    int ex_shown;                                         /* execution count shown for this cell */
    char ex_started[32];                                  /* ISO time the cell started */
    int64_t ex_deadline_ms;                               /* --timeout deadline, 0 = none */
    int64_t ex_grace_ms;     /* kill deadline after the timeout SIGINT */
    bool ex_timed_out;       /* the timeout fired */
    bool ex_waiting_input;   /* an input_request is out */
    size_t ex_out_bytes;     /* stream bytes published this cell */
    bool ex_out_limited;     /* --max-output hit */
    char *ex_result_text;    /* text/plain of the execute_result */
    int exec_count;          /* execution counter */
    json_t *last_parent;     /* header of the last execute (late output) */
    stream_t streams[2];     /* stdout, stderr */
    hist_t *hist;            /* history entries */
    size_t n_hist, cap_hist; /* used / allocated */
    pid_t parent_pid;        /* JPY_PARENT_PID or our parent at start */
    int64_t parent_check_ms; /* next time to check it is alive */
    bool exiting;            /* leave the loop */
} kernel_t;

static void s_start_runner(kernel_t *k);
static void s_pump_shell(kernel_t *k);

/* ------------------------------------------------------------------ util */

static void s_publish(kernel_t *k, const char *msg_type, const json_t *parent, json_t *content) {
    cb_wire_send(&k->wire, k->sock[CB_CH_IOPUB], NULL, 0, NULL, msg_type, parent, NULL, content);
}

static void s_status(kernel_t *k, const json_t *parent, const char *state) {
    s_publish(k, "status", parent, json_pack("{s:s}", "execution_state", state));
}

static void s_reply(kernel_t *k, cb_channel_t ch, const cb_msg_t *req, const char *type,
                    json_t *metadata, json_t *content) {
    cb_wire_send(&k->wire, k->sock[ch], req->idents, req->n_idents, NULL, type, req->header,
                 metadata, content);
}

/* "execute_request" -> "execute_reply" */
static void s_reply_type(const char *req_type, char *buf, size_t len) {
    size_t n = strlen(req_type);
    if (n > 8 && strcmp(req_type + n - 8, "_request") == 0)
        snprintf(buf, len, "%.*s_reply", (int) (n - 8), req_type);
    else
        snprintf(buf, len, "%s_reply", req_type);
}

/* Copies valid UTF-8 from in[0..len) into a new string, replacing invalid
 * bytes with U+FFFD.  An incomplete sequence at the end is left unconsumed
 * unless final.  *used = bytes consumed. Returns malloc'd, NUL-terminated. */
static char *s_utf8_clean(const uint8_t *in, size_t len, bool final, size_t *used,
                          size_t *out_len) {
    char *out = malloc(len * 3 + 1);
    size_t o = 0, i = 0;
    if (out == NULL) {
        *used = len;
        *out_len = 0;
        return NULL;
    }
    while (i < len) {
        uint8_t c = in[i];
        size_t need;
        uint32_t min;
        if (c < 0x80) {
            size_t run = 1;
            while (i + run < len && in[i + run] < 0x80)
                run++;
            memcpy(out + o, in + i, run); /* ASCII runs: the common case */
            o += run;
            i += run;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            need = 1, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            need = 2, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            need = 3, min = 0x10000;
        } else {
            goto bad;
        }
        if (i + need >= len) {
            /* not all continuation bytes are here yet, or the input ends early */
            bool prefix_ok = true;
            for (size_t j = i + 1; j < len; j++)
                if ((in[j] & 0xc0) != 0x80) prefix_ok = false;
            if (prefix_ok && !final) break;
            goto bad;
        }
        {
            uint32_t cp = c & (0x3f >> need);
            size_t j;
            for (j = 1; j <= need; j++) {
                if ((in[i + j] & 0xc0) != 0x80) break;
                cp = (cp << 6) | (in[i + j] & 0x3f);
            }
            if (j <= need || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto bad;
            memcpy(out + o, in + i, need + 1);
            o += need + 1;
            i += need + 1;
            continue;
        }
    bad:
        memcpy(out + o, "\xef\xbf\xbd", 3);
        o += 3;
        i++;
    }
    out[o] = '\0';
    *used = i;
    *out_len = o;
    return out;
}

/* ---------------------------------------------------------------- streams */

static const json_t *s_output_parent(const kernel_t *k) {
    if (k->cur_kind == REQ_EXECUTE) return k->cur.header;
    return k->last_parent;
}

static void s_stream_publish(kernel_t *k, int which, bool final) {
    stream_t *s = &k->streams[which];
    if (s->len == 0) return;
    size_t used = 0, olen = 0;
    char *text = s_utf8_clean(s->buf, s->len, final, &used, &olen);
    memmove(s->buf, s->buf + used, s->len - used);
    s->len -= used;
    s->due_ms = 0;
    s->last_flush_ms = cb_now_ms();
    const json_t *parent = s_output_parent(k);
    if (text != NULL && olen > 0 && parent != NULL) {
        size_t limit = (size_t) k->opts->max_output_mb << 20;
        if (k->cur_kind == REQ_EXECUTE && !k->ex_out_limited && k->ex_out_bytes + olen > limit) {
            k->ex_out_limited = true;
            size_t room = limit > k->ex_out_bytes ? limit - k->ex_out_bytes : 0;
            while (room > 0 && (text[room] & 0xc0) == 0x80)
                room--; /* whole characters */
            if (room > 0)
                s_publish(k, "stream", parent,
                          json_pack("{s:s, s:o}", "name", which ? "stderr" : "stdout", "text",
                                    json_stringn_nocheck(text, room)));
            char note[160];
            snprintf(note, sizeof note,
                     "\n[cellblock] output limit of %ld MiB for this cell reached (--max-output); "
                     "further output discarded\n",
                     k->opts->max_output_mb);
            s_publish(k, "stream", parent, json_pack("{s:s, s:s}", "name", "stderr", "text", note));
        } else if (!(k->cur_kind == REQ_EXECUTE && k->ex_out_limited)) {
            s_publish(k, "stream", parent,
                      json_pack("{s:s, s:o}", "name", which ? "stderr" : "stdout", "text",
                                json_stringn_nocheck(text, olen))); /* cleaned above */
        }
        if (k->cur_kind == REQ_EXECUTE) k->ex_out_bytes += olen;
    }
    free(text);
}

static void s_streams_flush(kernel_t *k, bool final) {
    s_stream_publish(k, 0, final);
    s_stream_publish(k, 1, final);
}

/* Reads what is available on the runner's stdout (0) or stderr (1). */
static void s_stream_read(kernel_t *k, int which) {
    int *fd = which ? &k->run.err_fd : &k->run.out_fd;
    stream_t *s = &k->streams[which];
    for (int rounds = 0; *fd >= 0 && rounds < 64; rounds++) {
        if (sizeof s->buf - s->len < CB_STREAM_CHUNK) s_stream_publish(k, which, false);
        if (sizeof s->buf - s->len < CB_STREAM_CHUNK) break;
        ssize_t n = read(*fd, s->buf + s->len, CB_STREAM_CHUNK);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
            close(*fd);
            *fd = -1;
            break;
        }
        s->len += (size_t) n;
        LOG_D("%s: %zd bytes", which ? "stderr" : "stdout", n);
    }
    if (s->len == 0) return;
    int64_t now = cb_now_ms();
    if (s->len >= CB_STREAM_FLUSH_BYTES)
        s_stream_publish(k, which, false);
    else if (s->due_ms == 0)
        /* after a quiet period wait only a moment (print() writes its pieces
         * separately); under a flood batch up to CB_STREAM_FLUSH_MS */
        s->due_ms = now - s->last_flush_ms >= CB_STREAM_FLUSH_MS
                        ? now + CB_STREAM_FIRST_MS
                        : s->last_flush_ms + CB_STREAM_FLUSH_MS;
}

static void s_drain_pipes(kernel_t *k) {
    s_stream_read(k, 0);
    s_stream_read(k, 1);
    s_streams_flush(k, false);
}

/* ------------------------------------------------------------- history */

static void s_hist_add(kernel_t *k, int line, const char *code) {
    if (k->n_hist == k->cap_hist) {
        if (k->cap_hist >= CB_KERNEL_HISTORY_MAX) {
            free(k->hist[0].input);
            free(k->hist[0].output);
            memmove(k->hist, k->hist + 1, (k->n_hist - 1) * sizeof *k->hist);
            k->n_hist--;
        } else {
            size_t cap = k->cap_hist ? k->cap_hist * 2 : 64;
            hist_t *n = realloc(k->hist, cap * sizeof *n);
            if (n == NULL) return;
            k->hist = n;
            k->cap_hist = cap;
        }
    }
    k->hist[k->n_hist++] = (hist_t){line, strdup(code), NULL};
}

static json_t *s_hist_entry(const hist_t *h, bool output) {
    if (output) return json_pack("[i, i, [s, s?]]", 1, h->line, h->input, h->output);
    return json_pack("[i, i, s]", 1, h->line, h->input);
}

static void s_handle_history(kernel_t *k, const cb_msg_t *m) {
    json_t *c = m->content;
    const char *access = json_string_value(json_object_get(c, "hist_access_type"));
    bool output = json_is_true(json_object_get(c, "output"));
    json_t *list = json_array();
    if (access && strcmp(access, "tail") == 0) {
        json_int_t n = json_integer_value(json_object_get(c, "n"));
        size_t start = (n > 0 && (size_t) n < k->n_hist) ? k->n_hist - (size_t) n : 0;
        for (size_t i = start; i < k->n_hist; i++)
            json_array_append_new(list, s_hist_entry(&k->hist[i], output));
    } else if (access && strcmp(access, "range") == 0) {
        json_int_t start = json_integer_value(json_object_get(c, "start"));
        json_t *stopv = json_object_get(c, "stop");
        json_int_t stop = json_is_integer(stopv) ? json_integer_value(stopv) : INT32_MAX;
        for (size_t i = 0; i < k->n_hist; i++)
            if (k->hist[i].line >= start && k->hist[i].line < stop)
                json_array_append_new(list, s_hist_entry(&k->hist[i], output));
    } else if (access && strcmp(access, "search") == 0) {
        const char *pat = json_string_value(json_object_get(c, "pattern"));
        json_int_t n = json_integer_value(json_object_get(c, "n"));
        bool unique = json_is_true(json_object_get(c, "unique"));
        json_t *rev = json_array();
        for (size_t i = k->n_hist; i-- > 0;) {
            if (pat && fnmatch(pat, k->hist[i].input, 0) != 0) continue;
            if (unique) {
                bool dup = false;
                size_t j;
                json_t *e;
                json_array_foreach(rev, j, e) {
                    const char *in = json_string_value(json_array_get(e, 2));
                    if (!in) in = json_string_value(json_array_get(json_array_get(e, 2), 0));
                    if (in && strcmp(in, k->hist[i].input) == 0) dup = true;
                }
                if (dup) continue;
            }
            json_array_append_new(rev, s_hist_entry(&k->hist[i], output));
            if (n > 0 && (json_int_t) json_array_size(rev) >= n) break;
        }
        for (size_t i = json_array_size(rev); i-- > 0;)
            json_array_append(list, json_array_get(rev, i));
        json_decref(rev);
    }
    s_reply(k, CB_CH_SHELL, m, "history_reply", NULL,
            json_pack("{s:s, s:o}", "status", "ok", "history", list));
}

/* ------------------------------------------------------------ kernel_info */

static json_t *s_kernel_info(kernel_t *k) {
    char ver[32], mm[16], url[64], banner[1600];
    snprintf(ver, sizeof ver, "%s", k->python_version[0] ? k->python_version : "3");
    const char *dot2 = strchr(ver, '.') ? strchr(strchr(ver, '.') + 1, '.') : NULL;
    snprintf(mm, sizeof mm, "%.*s", dot2 ? (int) (dot2 - ver) : (int) strlen(ver), ver);
    snprintf(url, sizeof url, "https://docs.python.org/%s", mm);
    const char *iso = k->run.isolation[0] ? k->run.isolation : k->isolation;
    char requested[400] = "";
    if (!iso[0]) {
        /* asked before the launcher reported: say what was requested, not more */
        const cb_opts_t *o = k->opts;
        snprintf(
            requested, sizeof requested,
            "being set up (requested: %s sandbox, memory %ld MiB, pids %ld, cpus %g, disk %ld MiB, "
            "network %s; the isolation in force is reported once it is up)",
            o->sandbox, o->memory_mb, o->pids, o->cpus, o->disk_mb, o->network);
        iso = requested;
    }
    snprintf(banner, sizeof banner,
             "Python %s (cellblock %s: a sandboxed Jupyter kernel)\n"
             "Sandbox: %s%s%.500s\n",
             ver, CB_VERSION, iso, k->last_fatal[0] ? "\nLast sandbox failure: " : "",
             k->last_fatal);
    return json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i}, s:s}, s:s, "
                     "s:[{s:s, s:s}], s:[], s:b}",
                     "status", "ok", "protocol_version", "5.3", "implementation", "cellblock",
                     "implementation_version", CB_VERSION, "language_info", "name", "python",
                     "version", ver, "mimetype", "text/x-python", "file_extension", ".py",
                     "pygments_lexer", "ipython3", "codemirror_mode", "name", "ipython", "version",
                     3, "nbconvert_exporter", "python", "banner", banner, "help_links", "text",
                     "Python Reference", "url", url, "supported_features", "debugger", 0);
}

/* ---------------------------------------------------------- the runner */

static void s_send_cur(kernel_t *k) {
    if (k->cur_kind == REQ_NONE || k->cur_sent || k->run.state != CB_RUNNER_READY) return;
    json_t *c = k->cur.content;
    json_auto_t *f = NULL;
    switch (k->cur_kind) {
    case REQ_EXECUTE: {
        json_t *ue = json_object_get(c, "user_expressions");
        f = json_pack("{s:s, s:O, s:b, s:b, s:O, s:b, s:i}", "type", "execute", "code",
                      json_object_get(c, "code"), "silent", k->ex_silent, "store_history",
                      k->ex_store, "user_expressions", json_is_object(ue) ? ue : json_object(),
                      "allow_stdin", k->ex_stdin, "execution_count", k->ex_shown);
        if (k->opts->timeout_s > 0) k->ex_deadline_ms = cb_now_ms() + k->opts->timeout_s * 1000;
        break;
    }
    case REQ_COMPLETE:
        f = json_pack("{s:s, s:O, s:O}", "type", "complete", "code", json_object_get(c, "code"),
                      "cursor_pos", json_object_get(c, "cursor_pos"));
        break;
    case REQ_INSPECT: {
        json_t *dl = json_object_get(c, "detail_level");
        f = json_pack("{s:s, s:O, s:O, s:I}", "type", "inspect", "code", json_object_get(c, "code"),
                      "cursor_pos", json_object_get(c, "cursor_pos"), "detail_level",
                      json_is_integer(dl) ? json_integer_value(dl) : 0);
        break;
    }
    case REQ_IS_COMPLETE:
        f = json_pack("{s:s, s:O}", "type", "is_complete", "code", json_object_get(c, "code"));
        break;
    default: return;
    }
    if (f == NULL || cb_runner_send(&k->run, f) < 0) {
        LOG_W("could not hand %s to the runner", k->cur.msg_type);
        return;
    }
    k->cur_sent = true;
}

static void s_cur_clear(kernel_t *k) {
    cb_msg_clear(&k->cur);
    k->cur_kind = REQ_NONE;
    k->cur_sent = false;
    k->ex_deadline_ms = k->ex_grace_ms = 0;
    k->ex_timed_out = k->ex_waiting_input = false;
    free(k->ex_result_text);
    k->ex_result_text = NULL;
}

/* Publishes artifacts of the cell; returns the summary for reply metadata
 * (new reference) or NULL. */
static json_t *s_collect_artifacts(kernel_t *k) {
    if (k->artifacts == NULL || k->run.workdir_fd < 0) return NULL;
    json_t *summary = NULL;
    json_auto_t *bundles = cb_artifacts_collect(k->artifacts, k->run.workdir_fd, &summary);
    if (bundles == NULL) return summary;
    size_t i;
    json_t *b;
    json_array_foreach(bundles, i, b) {
        json_t *data = json_object_get(b, "data"), *meta = json_object_get(b, "metadata");
        s_publish(k, "display_data", k->cur.header,
                  json_pack("{s:O, s:O, s:{}}", "data", data, "metadata",
                            meta ? meta : json_object(), "transient"));
    }
    return summary;
}

static void s_abort_queued(kernel_t *k);

/* Ends the execute in flight.  done: the runner's `done` frame (borrowed) or
 * NULL when the runner died; why: error text when it died. */
static void s_finish_execute(kernel_t *k, const json_t *done, const char *ename,
                             const char *evalue) {
    s_drain_pipes(k);
    s_streams_flush(k, true);
    bool ok = done && json_is_string(json_object_get(done, "status")) &&
              strcmp(json_string_value(json_object_get(done, "status")), "ok") == 0;
    if (k->ex_timed_out && done) {
        char note[200];
        snprintf(note, sizeof note,
                 "[cellblock] the cell exceeded its time limit of %ld s (--timeout) and was "
                 "interrupted\n",
                 k->opts->timeout_s);
        s_publish(k, "stream", k->cur.header,
                  json_pack("{s:s, s:s}", "name", "stderr", "text", note));
    }
    json_auto_t *tb = NULL;
    if (done == NULL) {
        tb = json_pack("[s]", evalue);
        s_publish(k, "error", k->cur.header,
                  json_pack("{s:s, s:s, s:O}", "ename", ename, "evalue", evalue, "traceback", tb));
    }
    json_t *summary = s_collect_artifacts(k);
    json_t *content;
    if (ok) {
        json_t *ue = json_object_get(done, "user_expressions");
        json_t *pl = json_object_get(done, "payload");
        content =
            json_pack("{s:s, s:i, s:O, s:O}", "status", "ok", "execution_count", k->exec_count,
                      "user_expressions", json_is_object(ue) ? ue : json_object(), "payload",
                      json_is_array(pl) ? pl : json_array());
    } else if (done) {
        json_t *en = json_object_get(done, "ename"), *ev = json_object_get(done, "evalue");
        json_t *t = json_object_get(done, "traceback");
        content =
            json_pack("{s:s, s:i, s:s, s:s, s:O, s:{}, s:[]}", "status", "error", "execution_count",
                      k->exec_count, "ename", json_is_string(en) ? json_string_value(en) : "Error",
                      "evalue", json_is_string(ev) ? json_string_value(ev) : "", "traceback",
                      json_is_array(t) ? t : json_array(), "user_expressions", "payload");
    } else {
        content = json_pack("{s:s, s:i, s:s, s:s, s:O, s:{}, s:[]}", "status", "error",
                            "execution_count", k->exec_count, "ename", ename, "evalue", evalue,
                            "traceback", tb, "user_expressions", "payload");
    }
    json_t *meta = json_pack("{s:s, s:b, s:s, s:s}", "started", k->ex_started, "dependencies_met",
                             1, "engine", k->wire.session, "status", ok ? "ok" : "error");
    /* always present, [] when nothing came back or collection is off */
    if (meta)
        json_object_set_new(meta, "cellblock",
                            json_pack("{s:o}", "artifacts", summary ? summary : json_array()));
    else
        json_decref(summary);
    if (k->ex_store && !k->ex_silent && k->n_hist > 0 && k->ex_result_text &&
        k->hist[k->n_hist - 1].line == k->ex_shown) {
        k->hist[k->n_hist - 1].output = k->ex_result_text;
        k->ex_result_text = NULL;
    }
    /* stop_on_error: what has arrived by now is "queued" and gets aborted.
     * Take it before the reply goes out, so a request the client sends after
     * seeing this reply is never caught by the abort. */
    if (!ok && k->ex_stop_on_error && !k->ex_silent) s_abort_queued(k);
    s_reply(k, CB_CH_SHELL, &k->cur, "execute_reply", meta, content);
    s_status(k, k->cur.header, "idle");
    s_cur_clear(k);
}

static void s_finish_other(kernel_t *k, const json_t *f) {
    char rtype[64];
    s_reply_type(k->cur.msg_type, rtype, sizeof rtype);
    json_t *c = NULL;
    switch (k->cur_kind) {
    case REQ_COMPLETE: {
        json_t *m = f ? json_object_get(f, "matches") : NULL;
        json_t *cp = json_object_get(k->cur.content, "cursor_pos");
        json_int_t pos = json_is_integer(cp) ? json_integer_value(cp) : 0;
        json_t *cs = f ? json_object_get(f, "cursor_start") : NULL,
               *ce = f ? json_object_get(f, "cursor_end") : NULL;
        json_t *md = f ? json_object_get(f, "metadata") : NULL;
        c = json_pack("{s:s, s:O, s:I, s:I, s:O}", "status", "ok", "matches",
                      json_is_array(m) ? m : json_array(), "cursor_start",
                      json_is_integer(cs) ? json_integer_value(cs) : pos, "cursor_end",
                      json_is_integer(ce) ? json_integer_value(ce) : pos, "metadata",
                      json_is_object(md) ? md : json_object());
        break;
    }
    case REQ_INSPECT: {
        json_t *d = f ? json_object_get(f, "data") : NULL,
               *md = f ? json_object_get(f, "metadata") : NULL;
        bool found = f && json_is_true(json_object_get(f, "found")) && json_is_object(d);
        c = json_pack("{s:s, s:b, s:O, s:O}", "status", "ok", "found", found, "data",
                      found ? d : json_object(), "metadata",
                      json_is_object(md) ? md : json_object());
        break;
    }
    case REQ_IS_COMPLETE: {
        const char *st = f ? json_string_value(json_object_get(f, "status")) : NULL;
        static const char *const ok[] = {"complete", "incomplete", "invalid", "unknown"};
        const char *status = "unknown";
        for (size_t i = 0; st && i < 4; i++)
            if (strcmp(st, ok[i]) == 0) status = ok[i];
        c = json_pack("{s:s}", "status", status);
        const char *ind = f ? json_string_value(json_object_get(f, "indent")) : NULL;
        if (c && strcmp(status, "incomplete") == 0)
            json_object_set_new(c, "indent", json_string(ind ? ind : ""));
        break;
    }
    default: return;
    }
    s_reply(k, CB_CH_SHELL, &k->cur, rtype, NULL, c);
    s_status(k, k->cur.header, "idle");
    s_cur_clear(k);
}

/* Validates a mimebundle-carrying frame; returns true if publishable. */
static bool s_bundle_ok(const json_t *f, bool need_display_id) {
    json_t *data = json_object_get(f, "data");
    if (!json_is_object(data)) return false;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *) data, key, v) {
        if (strchr(key, '/') == NULL || strchr(key, '/') == key) return false;
    }
    json_t *md = json_object_get(f, "metadata");
    if (md && !json_is_object(md)) return false;
    json_t *tr = json_object_get(f, "transient");
    if (tr && !json_is_object(tr)) return false;
    if (need_display_id && !json_is_string(json_object_get(tr, "display_id"))) return false;
    return true;
}

static void s_handle_frame(kernel_t *k, json_t *f) {
    const char *type = json_string_value(json_object_get(f, "type"));
    s_drain_pipes(k); /* output written before this frame goes first */
    const json_t *parent = s_output_parent(k);
    bool in_exec = k->cur_kind == REQ_EXECUTE;

    if (strcmp(type, "hello") == 0) {
        json_t *v = json_object_get(f, "version");
        if (!json_is_integer(v) || json_integer_value(v) != CB_RUNNER_PROTOCOL_VERSION) {
            LOG_E("runner speaks frame protocol %lld, kernel %d: stopping it",
                  (long long) json_integer_value(v), CB_RUNNER_PROTOCOL_VERSION);
            k->run.protocol_error = true;
            snprintf(k->run.protocol_what, sizeof k->run.protocol_what, "wrong protocol version");
            cb_runner_kill(&k->run);
            return;
        }
        const char *pv = json_string_value(json_object_get(f, "python_version"));
        if (pv && strlen(pv) < sizeof k->python_version) {
            snprintf(k->python_version, sizeof k->python_version, "%s", pv);
            snprintf(k->run.python_version, sizeof k->run.python_version, "%s", pv);
        }
        if (k->run.state == CB_RUNNER_STARTING) k->run.state = CB_RUNNER_READY;
        LOG_I("runner ready after %lld ms (Python %s)",
              (long long) (cb_now_ms() - k->run.started_ms), k->python_version);
        if (k->cur_kind == REQ_NONE && k->opts->preload && k->opts->preload[0]) {
            /* nothing waiting: let the runner import ahead of the first cell */
            json_auto_t *mods = json_array();
            char buf[CB_OPTS_ARG_MAX];
            snprintf(buf, sizeof buf, "%s", k->opts->preload);
            char *save = NULL;
            for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
                json_array_append_new(mods, json_string(t));
            json_auto_t *pf = json_pack("{s:s, s:O}", "type", "preload", "modules", mods);
            if (pf) cb_runner_send(&k->run, pf);
        }
        s_send_cur(k);
        return;
    }
    if (strcmp(type, "display") == 0 || strcmp(type, "update_display") == 0) {
        bool upd = type[0] == 'u';
        if (!s_bundle_ok(f, upd) || parent == NULL) goto bad;
        json_t *md = json_object_get(f, "metadata"), *tr = json_object_get(f, "transient");
        s_publish(k, upd ? "update_display_data" : "display_data", parent,
                  json_pack("{s:O, s:O, s:O}", "data", json_object_get(f, "data"), "metadata",
                            md ? md : json_object(), "transient", tr ? tr : json_object()));
        return;
    }
    if (strcmp(type, "execute_result") == 0) {
        if (!in_exec || k->ex_silent || !s_bundle_ok(f, false)) goto bad;
        json_t *md = json_object_get(f, "metadata");
        json_t *data = json_object_get(f, "data");
        const char *tp = json_string_value(json_object_get(data, "text/plain"));
        if (tp && k->ex_result_text == NULL) k->ex_result_text = strdup(tp);
        s_publish(k, "execute_result", parent,
                  json_pack("{s:i, s:O, s:O}", "execution_count", k->ex_shown, "data", data,
                            "metadata", md ? md : json_object()));
        return;
    }
    if (strcmp(type, "clear_output") == 0) {
        if (parent == NULL) goto bad;
        s_publish(k, "clear_output", parent,
                  json_pack("{s:b}", "wait", json_is_true(json_object_get(f, "wait"))));
        return;
    }
    if (strcmp(type, "error") == 0) {
        json_t *tb = json_object_get(f, "traceback");
        if (parent == NULL || !json_is_string(json_object_get(f, "ename")) ||
            !json_is_string(json_object_get(f, "evalue")) || !json_is_array(tb))
            goto bad;
        size_t i;
        json_t *line;
        json_array_foreach(tb, i, line) if (!json_is_string(line)) goto bad;
        s_publish(k, "error", parent,
                  json_pack("{s:O, s:O, s:O}", "ename", json_object_get(f, "ename"), "evalue",
                            json_object_get(f, "evalue"), "traceback", tb));
        return;
    }
    if (strcmp(type, "input_request") == 0) {
        json_t *prompt = json_object_get(f, "prompt");
        if (!in_exec || !k->ex_stdin || k->ex_waiting_input || !json_is_string(prompt)) {
            json_auto_t *r =
                json_pack("{s:s, s:s}", "type", "input_reply", "error",
                          "input was requested, but this frontend does not support input requests");
            cb_runner_send(&k->run, r);
            return;
        }
        /* discard stale replies, then ask the client that sent the execute_request */
        zmsg_t *stale;
        while ((stale = zmsg_recv(k->sock[CB_CH_STDIN])) != NULL)
            zmsg_destroy(&stale);
        k->ex_waiting_input = true;
        s_reply(k, CB_CH_STDIN, &k->cur, "input_request", NULL,
                json_pack("{s:O, s:b}", "prompt", prompt, "password",
                          json_is_true(json_object_get(f, "password"))));
        return;
    }
    if (strcmp(type, "done") == 0) {
        if (!in_exec) goto bad;
        s_finish_execute(k, f, NULL, NULL);
        return;
    }
    if (strcmp(type, "complete_reply") == 0 || strcmp(type, "inspect_reply") == 0 ||
        strcmp(type, "is_complete_reply") == 0) {
        req_kind_t want = type[0] == 'c'   ? REQ_COMPLETE
                          : type[1] == 'n' ? REQ_INSPECT
                                           : REQ_IS_COMPLETE;
        if (k->cur_kind != want) goto bad;
        s_finish_other(k, f);
        return;
    }
bad:
    LOG_W("dropped a runner frame of type '%.32s' (bad shape or unexpected now)", type);
}

static void s_process_frames(kernel_t *k) {
    json_t *f;
    while (cb_runner_next_frame(&k->run, &f) == 1) {
        s_handle_frame(k, f);
        if (cb_frame_needs_ack(f)) cb_runner_send_ack(&k->run);
        json_decref(f);
    }
    if (k->run.protocol_error && k->run.state != CB_RUNNER_DYING) cb_runner_kill(&k->run);
}

/* The launcher has been reaped: end whatever was in flight, start anew. */
static void s_runner_gone(kernel_t *k) {
    cb_runner_read_reports(&k->run);
    if (k->run.ev_fd >= 0) cb_runner_read_events(&k->run);
    s_process_frames(k);
    s_drain_pipes(k);
    char how[400], msg[1200];
    cb_runner_describe_exit(&k->run, how, sizeof how);
    const char *ename = "SandboxError";
    static const char lost[] = "A fresh sandbox was started: all variables, imports and files "
                               "of the previous one are lost.";
    if (k->run.fatal[0]) {
        snprintf(k->last_fatal, sizeof k->last_fatal, "%s", k->run.fatal);
        snprintf(msg, sizeof msg, "The sandbox could not be started: %s", k->run.fatal);
    } else if (k->ex_timed_out && k->cur_kind == REQ_EXECUTE) {
        ename = "TimeoutError";
        snprintf(msg, sizeof msg,
                 "The cell exceeded its time limit of %ld s (--timeout) and did not stop when "
                 "interrupted, so the sandbox was killed. %s",
                 k->opts->timeout_s, lost);
    } else if (k->run.oom) {
        ename = "MemoryError";
        snprintf(msg, sizeof msg,
                 "The sandbox ran out of memory (limit %ld MiB, --memory) and its Python process "
                 "was killed. %s",
                 k->opts->memory_mb, lost);
    } else {
        snprintf(msg, sizeof msg, "The sandbox's Python process %s. %s", how, lost);
    }
    LOG_W("sandbox ended: %s", how);
    bool was_setup_failure = k->run.fatal[0] != 0 || k->run.state == CB_RUNNER_STARTING;
    if (k->run.isolation[0]) snprintf(k->isolation, sizeof k->isolation, "%s", k->run.isolation);
    if (k->cur_kind == REQ_EXECUTE) {
        s_finish_execute(k, NULL, ename, msg);
    } else if (k->cur_kind != REQ_NONE) {
        s_finish_other(k, NULL);
    } else if (k->last_parent && !k->exiting) {
        char note[1300];
        snprintf(note, sizeof note, "[cellblock] %s\n", msg);
        s_publish(k, "stream", k->last_parent,
                  json_pack("{s:s, s:s}", "name", "stderr", "text", note));
    }
    cb_runner_close(&k->run);
    if (k->artifacts) cb_artifacts_reset(k->artifacts);
    if (k->exiting) return;
    if (was_setup_failure)
        k->respawn_at_ms = cb_now_ms() + CB_RESPAWN_BACKOFF_MS;
    else
        s_start_runner(k);
}

static void s_start_runner(kernel_t *k) {
    if (k->run.state != CB_RUNNER_DOWN || k->exiting) return;
    if (cb_runner_spawn(&k->run, &k->rcfg) < 0) {
        snprintf(k->last_fatal, sizeof k->last_fatal, "could not start %.400s", k->launcher_path);
        k->respawn_at_ms = cb_now_ms() + CB_RESPAWN_BACKOFF_MS;
        return;
    }
    k->respawn_at_ms = 0;
    for (int i = 0; i < 2; i++)
        k->streams[i].len = 0;
}

/* ------------------------------------------------------------- requests */

static void s_handle_execute(kernel_t *k, cb_msg_t *m, bool abort) {
    json_t *c = m->content;
    s_status(k, m->header, "busy");
    if (abort) {
        s_reply(k, CB_CH_SHELL, m, "execute_reply",
                json_pack("{s:s, s:b, s:s, s:s}", "status", "aborted", "dependencies_met", 1,
                          "engine", k->wire.session, "started", ""),
                json_pack("{s:s, s:i}", "status", "aborted", "execution_count", k->exec_count));
        s_status(k, m->header, "idle");
        return;
    }
    json_t *code = json_object_get(c, "code");
    if (!json_is_string(code)) {
        LOG_W("execute_request %s without a string 'code'", m->msg_id);
        s_reply(k, CB_CH_SHELL, m, "execute_reply", NULL,
                json_pack("{s:s, s:i, s:s, s:s, s:[s]}", "status", "error", "execution_count",
                          k->exec_count, "ename", "KernelError", "evalue",
                          "execute_request needs a string 'code'", "traceback",
                          "KernelError: execute_request needs a string 'code'"));
        s_status(k, m->header, "idle");
        return;
    }
    json_t *v;
    k->ex_silent = json_is_true(json_object_get(c, "silent"));
    v = json_object_get(c, "store_history");
    k->ex_store = k->ex_silent ? false : (v ? json_is_true(v) : true);
    k->ex_stdin = json_is_true(json_object_get(c, "allow_stdin"));
    v = json_object_get(c, "stop_on_error");
    k->ex_stop_on_error = v ? json_is_true(v) : true;
    k->ex_shown = k->exec_count + 1;
    k->ex_out_bytes = 0;
    k->ex_out_limited = false;
    cb_iso_now(k->ex_started);
    if (!k->ex_silent)
        s_publish(k, "execute_input", m->header,
                  json_pack("{s:O, s:i}", "code", code, "execution_count", k->ex_shown));
    if (k->ex_store) {
        k->exec_count++;
        s_hist_add(k, k->exec_count, json_string_value(code));
    }
    json_decref(k->last_parent);
    k->last_parent = json_incref(m->header);
    k->cur = *m;
    memset(m, 0, sizeof *m);
    k->cur_kind = REQ_EXECUTE;
    k->cur_sent = false;
    if (k->run.state == CB_RUNNER_DOWN) s_start_runner(k);
    if (k->run.state == CB_RUNNER_DOWN) {
        char msg[800];
        snprintf(msg, sizeof msg, "The sandbox could not be started%s%s",
                 k->last_fatal[0] ? ": " : ".", k->last_fatal);
        s_finish_execute(k, NULL, "SandboxError", msg);
        return;
    }
    s_send_cur(k);
}

static void s_handle_runner_request(kernel_t *k, cb_msg_t *m, req_kind_t kind) {
    s_status(k, m->header, "busy");
    k->cur = *m;
    memset(m, 0, sizeof *m);
    k->cur_kind = kind;
    k->cur_sent = false;
    json_t *code = json_object_get(k->cur.content, "code");
    if (!json_is_string(code) || (kind != REQ_IS_COMPLETE && !json_is_integer(json_object_get(
                                                                 k->cur.content, "cursor_pos")))) {
        LOG_W("%s with a bad shape: answering empty", k->cur.msg_type);
        s_finish_other(k, NULL);
        return;
    }
    if (k->run.state == CB_RUNNER_DOWN) s_start_runner(k);
    if (k->run.state == CB_RUNNER_DOWN) {
        s_finish_other(k, NULL);
        return;
    }
    s_send_cur(k);
}

static void s_shutdown(kernel_t *k, cb_channel_t ch, const cb_msg_t *m) {
    bool restart = json_is_true(json_object_get(m->content, "restart"));
    s_status(k, m->header, "busy");
    json_t *c = json_pack("{s:s, s:b}", "status", "ok", "restart", restart);
    s_publish(k, "shutdown_reply", m->header, json_incref(c));
    s_reply(k, ch, m, "shutdown_reply", NULL, c);
    s_status(k, m->header, "idle");
    LOG_I("shutdown requested (restart=%d)", restart);
    k->exiting = true;
}

/* Handles one verified message from shell or control. m may be consumed. */
static void s_dispatch(kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    const char *t = m->msg_type;
    LOG_D("%s: %s %s", cb_channel_name(ch), t, m->msg_id);
    if (strcmp(t, "kernel_info_request") == 0) {
        s_status(k, m->header, "busy");
        s_reply(k, ch, m, "kernel_info_reply", NULL, s_kernel_info(k));
        s_status(k, m->header, "idle");
    } else if (strcmp(t, "shutdown_request") == 0) {
        s_shutdown(k, ch, m);
    } else if (ch == CB_CH_CONTROL && strcmp(t, "interrupt_request") == 0) {
        s_status(k, m->header, "busy");
        if (k->cur_kind == REQ_EXECUTE && k->cur_sent) cb_runner_interrupt(&k->run);
        s_reply(k, ch, m, "interrupt_reply", NULL, json_pack("{s:s}", "status", "ok"));
        s_status(k, m->header, "idle");
    } else if (ch == CB_CH_SHELL && strcmp(t, "execute_request") == 0) {
        s_handle_execute(k, m, abort);
    } else if (ch == CB_CH_SHELL && strcmp(t, "complete_request") == 0) {
        s_handle_runner_request(k, m, REQ_COMPLETE);
    } else if (ch == CB_CH_SHELL && strcmp(t, "inspect_request") == 0) {
        s_handle_runner_request(k, m, REQ_INSPECT);
    } else if (ch == CB_CH_SHELL && strcmp(t, "is_complete_request") == 0) {
        s_handle_runner_request(k, m, REQ_IS_COMPLETE);
    } else if (ch == CB_CH_SHELL && strcmp(t, "history_request") == 0) {
        s_status(k, m->header, "busy");
        s_handle_history(k, m);
        s_status(k, m->header, "idle");
    } else if (ch == CB_CH_SHELL && strcmp(t, "comm_info_request") == 0) {
        s_status(k, m->header, "busy");
        s_reply(k, ch, m, "comm_info_reply", NULL,
                json_pack("{s:s, s:{}}", "status", "ok", "comms"));
        s_status(k, m->header, "idle");
    } else if (ch == CB_CH_SHELL && strcmp(t, "comm_open") == 0) {
        s_status(k, m->header, "busy");
        json_t *id = json_object_get(m->content, "comm_id");
        if (json_is_string(id)) {
            LOG_I("comm_open for unknown target '%s': closing it",
                  json_string_value(json_object_get(m->content, "target_name")) ?: "?");
            s_publish(k, "comm_close", m->header, json_pack("{s:O, s:{}}", "comm_id", id, "data"));
        }
        s_status(k, m->header, "idle");
    } else if (ch == CB_CH_SHELL && strcmp(t, "connect_request") == 0) {
        s_status(k, m->header, "busy");
        s_reply(k, ch, m, "connect_reply", NULL,
                json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "status", "ok", "shell_port",
                          k->conn.ports[CB_CH_SHELL], "iopub_port", k->conn.ports[CB_CH_IOPUB],
                          "stdin_port", k->conn.ports[CB_CH_STDIN], "control_port",
                          k->conn.ports[CB_CH_CONTROL], "hb_port", k->conn.ports[CB_CH_HB]));
        s_status(k, m->header, "idle");
    } else {
        /* comm_msg, comm_close and anything unknown: busy/idle, no reply */
        if (strcmp(t, "comm_msg") != 0 && strcmp(t, "comm_close") != 0)
            LOG_W("%s: unsupported message type '%.64s'; no reply", cb_channel_name(ch), t);
        s_status(k, m->header, "busy");
        s_status(k, m->header, "idle");
    }
}

/* Receives one message from a ROUTER socket and verifies it. 1 got one,
 * 0 nothing waiting, -1 dropped a bad one. */
static int s_recv(kernel_t *k, cb_channel_t ch, cb_msg_t *out) {
    zmsg_t *raw = zmsg_recv(k->sock[ch]);
    if (raw == NULL) return 0;
    int rc = cb_wire_parse(k->auth, raw, out);
    size_t size = zmsg_content_size(raw);
    zmsg_destroy(&raw);
    if (rc < 0) {
        LOG_W("%s: dropped a message of %zu bytes: %s", cb_channel_name(ch), size,
              cb_wire_strerror(-rc));
        return -1;
    }
    LOG_D("%s: received %s %s (%zu bytes, %zu buffers)", cb_channel_name(ch), out->msg_type,
          out->msg_id, size, out->n_buffers);
    return 1;
}

static void s_abort_queued(kernel_t *k) {
    /* Everything that has arrived by now is "queued"; pull it in. */
    for (;;) {
        if (k->q_len == CB_SHELL_QUEUE_MAX) break;
        cb_msg_t m;
        int rc = s_recv(k, CB_CH_SHELL, &m);
        if (rc == 0) break;
        if (rc < 0) continue;
        size_t slot = (k->q_head + k->q_len) % CB_SHELL_QUEUE_MAX;
        k->queue[slot] = (queued_t){m, false};
        k->q_len++;
    }
    for (size_t i = 0; i < k->q_len; i++) {
        queued_t *q = &k->queue[(k->q_head + i) % CB_SHELL_QUEUE_MAX];
        if (strcmp(q->msg.msg_type, "execute_request") == 0) q->abort = true;
    }
    if (k->q_len) LOG_I("stop_on_error: %zu queued request(s) examined for abort", k->q_len);
}

static void s_pump_shell(kernel_t *k) {
    while (k->cur_kind == REQ_NONE && !k->exiting) {
        cb_msg_t m;
        bool abort = false;
        if (k->q_len > 0) {
            queued_t *q = &k->queue[k->q_head];
            m = q->msg;
            abort = q->abort;
            k->q_head = (k->q_head + 1) % CB_SHELL_QUEUE_MAX;
            k->q_len--;
        } else {
            int rc = s_recv(k, CB_CH_SHELL, &m);
            if (rc == 0) return;
            if (rc < 0) continue;
        }
        s_dispatch(k, CB_CH_SHELL, &m, abort);
        cb_msg_clear(&m);
    }
}

static void s_pump_control(kernel_t *k) {
    for (;;) {
        cb_msg_t m;
        int rc = s_recv(k, CB_CH_CONTROL, &m);
        if (rc == 0) return;
        if (rc < 0) continue;
        s_dispatch(k, CB_CH_CONTROL, &m, false);
        cb_msg_clear(&m);
        if (k->exiting) return;
    }
}

static void s_pump_stdin(kernel_t *k) {
    for (;;) {
        cb_msg_t m;
        int rc = s_recv(k, CB_CH_STDIN, &m);
        if (rc == 0) return;
        if (rc < 0) continue;
        json_t *value = json_object_get(m.content, "value");
        if (strcmp(m.msg_type, "input_reply") == 0 && k->ex_waiting_input &&
            json_is_string(value)) {
            k->ex_waiting_input = false;
            json_auto_t *f = json_pack("{s:s, s:O}", "type", "input_reply", "value", value);
            cb_runner_send(&k->run, f);
        } else {
            LOG_W("stdin: dropped %s (no input was requested, or bad shape)", m.msg_type);
        }
        cb_msg_clear(&m);
    }
}

/* --------------------------------------------------------------- signals */

static void s_reap(kernel_t *k) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) return;
        if (pid == k->run.pid) {
            cb_runner_reaped(&k->run, status);
            s_runner_gone(k);
        }
    }
}

static void s_handle_signals(kernel_t *k) {
    struct signalfd_siginfo si;
    while (read(k->sigfd, &si, sizeof si) == (ssize_t) sizeof si) {
        switch (si.ssi_signo) {
        case SIGINT:
            LOG_I("SIGINT: interrupting the running cell, if any");
            if (k->cur_kind == REQ_EXECUTE && k->cur_sent) cb_runner_interrupt(&k->run);
            break;
        case SIGTERM:
        case SIGHUP:
            LOG_I("signal %d: shutting down", (int) si.ssi_signo);
            k->exiting = true;
            break;
        case SIGCHLD: s_reap(k); break;
        default: break;
        }
    }
}

/* ------------------------------------------------------------- heartbeat */

static void *s_heartbeat(void *arg) {
    kernel_t *k = arg;
    zsock_t *hb = k->sock[CB_CH_HB];
    zmq_pollitem_t it[2] = {{zsock_resolve(hb), 0, ZMQ_POLLIN, 0},
                            {zsock_resolve(k->hb_stop_rx), 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(it, 2, -1) < 0) {
            if (zmq_errno() == EINTR) continue;
            break;
        }
        if (it[1].revents) break; /* the main thread asks us to stop: at once */
        if (it[0].revents) {
            zmsg_t *m = zmsg_recv(hb);
            if (m) zmsg_send(&m, hb);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- set-up */

static int s_bind(kernel_t *k) {
    static const int types[CB_CH_COUNT] = {ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_REP};
    for (int ch = 0; ch < CB_CH_COUNT; ch++) {
        char ep[CB_PATH_MAX];
        if (cb_conn_endpoint(&k->conn, ch, ep, sizeof ep) < 0) {
            LOG_E("endpoint for %s too long", cb_channel_name(ch));
            return -1;
        }
        zsock_t *s = zsock_new(types[ch]);
        if (s == NULL) {
            LOG_E("zsock_new(%s) failed", cb_channel_name(ch));
            return -1;
        }
        zsock_set_maxmsgsize(s, (int64_t) CB_WIRE_MAX_FRAME_BYTES);
        zsock_set_linger(s, CB_ZMQ_LINGER_MS);
        if (types[ch] == ZMQ_ROUTER) {
            zsock_set_rcvtimeo(s, 0);
            zsock_set_router_handover(s, 1);
        }
        if (zsock_bind(s, "%s", ep) < 0) {
            LOG_E("cannot bind %s to %s: %s", cb_channel_name(ch), ep, zmq_strerror(zmq_errno()));
            zsock_destroy(&s);
            return -1;
        }
        k->sock[ch] = s;
        LOG_D("%s bound to %s", cb_channel_name(ch), ep);
    }
    return 0;
}

static int64_t s_next_deadline(const kernel_t *k) {
    int64_t d = 0;
#define S_MIN(x)                                                                                   \
    if ((x) > 0 && (d == 0 || (x) < d)) d = (x)
    S_MIN(k->streams[0].due_ms);
    S_MIN(k->streams[1].due_ms);
    S_MIN(k->ex_deadline_ms);
    S_MIN(k->ex_grace_ms);
    S_MIN(k->respawn_at_ms);
    S_MIN(k->parent_check_ms);
    if (k->run.state == CB_RUNNER_STARTING) S_MIN(k->run.started_ms + CB_RUNNER_HELLO_TIMEOUT_MS);
#undef S_MIN
    return d;
}

static void s_timers(kernel_t *k) {
    int64_t now = cb_now_ms();
    for (int i = 0; i < 2; i++)
        if (k->streams[i].due_ms && now >= k->streams[i].due_ms) s_stream_publish(k, i, false);
    if (k->ex_deadline_ms && now >= k->ex_deadline_ms) {
        LOG_W("cell exceeded --timeout %ld s: interrupting", k->opts->timeout_s);
        k->ex_deadline_ms = 0;
        k->ex_timed_out = true;
        k->ex_grace_ms = now + CB_INTERRUPT_GRACE_MS;
        cb_runner_interrupt(&k->run);
    }
    if (k->ex_grace_ms && now >= k->ex_grace_ms) {
        LOG_W("cell ignored the interrupt: killing the sandbox");
        k->ex_grace_ms = 0;
        cb_runner_kill(&k->run);
    }
    if (k->parent_check_ms && now >= k->parent_check_ms) {
        k->parent_check_ms = now + CB_PARENT_POLL_MS;
        /* like ipykernel's ParentPollerUnix: orphaned kernels exit */
        if (getppid() != k->parent_pid && (kill(k->parent_pid, 0) < 0 && errno == ESRCH)) {
            LOG_W("parent process %d is gone: shutting down", (int) k->parent_pid);
            k->exiting = true;
        }
    }
    if (k->respawn_at_ms && now >= k->respawn_at_ms && k->run.state == CB_RUNNER_DOWN) {
        k->respawn_at_ms = 0;
        s_start_runner(k);
    }
    if (k->run.state == CB_RUNNER_STARTING &&
        now >= k->run.started_ms + CB_RUNNER_HELLO_TIMEOUT_MS) {
        LOG_E("runner did not say hello within %d ms: stopping it", CB_RUNNER_HELLO_TIMEOUT_MS);
        snprintf(k->run.reason, sizeof k->run.reason, "no hello from the runner in time");
        cb_runner_kill(&k->run);
    }
}

static void s_loop(kernel_t *k) {
    while (!k->exiting) {
        s_pump_shell(k);
        if (k->exiting) break;
        zmq_pollitem_t it[9];
        int n = 0;
        int i_ctl, i_stdin, i_sig, i_out = -1, i_err = -1, i_ev = -1, i_rep = -1;
        /* shell is polled only when idle (it is then read at the loop's top):
         * while a request is in flight, later ones wait in ZMQ, in order */
        if (k->cur_kind == REQ_NONE && k->q_len == 0)
            it[n++] = (zmq_pollitem_t){zsock_resolve(k->sock[CB_CH_SHELL]), 0, ZMQ_POLLIN, 0};
        i_ctl = n;
        it[n++] = (zmq_pollitem_t){zsock_resolve(k->sock[CB_CH_CONTROL]), 0, ZMQ_POLLIN, 0};
        i_stdin = n;
        it[n++] = (zmq_pollitem_t){zsock_resolve(k->sock[CB_CH_STDIN]), 0, ZMQ_POLLIN, 0};
        i_sig = n;
        it[n++] = (zmq_pollitem_t){NULL, k->sigfd, ZMQ_POLLIN, 0};
        if (k->run.out_fd >= 0)
            i_out = n, it[n++] = (zmq_pollitem_t){NULL, k->run.out_fd, ZMQ_POLLIN, 0};
        if (k->run.err_fd >= 0)
            i_err = n, it[n++] = (zmq_pollitem_t){NULL, k->run.err_fd, ZMQ_POLLIN, 0};
        if (k->run.ev_fd >= 0) {
            i_ev = n;
            it[n++] = (zmq_pollitem_t){
                NULL, k->run.ev_fd,
                (short) (ZMQ_POLLIN | (cb_runner_wants_write(&k->run) ? ZMQ_POLLOUT : 0)), 0};
        }
        if (k->run.rep_fd >= 0)
            i_rep = n, it[n++] = (zmq_pollitem_t){NULL, k->run.rep_fd, ZMQ_POLLIN, 0};

        int64_t d = s_next_deadline(k), now = cb_now_ms();
        long timeout = d ? (d > now ? (long) (d - now) : 0) : -1;
        int rc = zmq_poll(it, n, timeout);
        if (rc < 0) {
            if (zmq_errno() == EINTR) continue;
            LOG_E("zmq_poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        if (it[i_sig].revents) s_handle_signals(k);
        if (i_rep >= 0 && it[i_rep].revents) cb_runner_read_reports(&k->run);
        if (i_out >= 0 && it[i_out].revents) s_stream_read(k, 0);
        if (i_err >= 0 && it[i_err].revents) s_stream_read(k, 1);
        if (i_ev >= 0 && (it[i_ev].revents & ZMQ_POLLOUT)) cb_runner_flush(&k->run);
        if (i_ev >= 0 && (it[i_ev].revents & (ZMQ_POLLIN | ZMQ_POLLERR))) {
            if (cb_runner_read_events(&k->run) < 0 && k->run.state != CB_RUNNER_DYING) {
                LOG_I("runner closed its event socket");
                s_process_frames(k);
                cb_runner_kill(&k->run);
            }
            s_process_frames(k);
        }
        if (it[i_ctl].revents) s_pump_control(k);
        if (it[i_stdin].revents) s_pump_stdin(k);
        s_timers(k);
    }
}

static void s_teardown_runner(kernel_t *k) {
    if (k->run.pid <= 0) return;
    cb_runner_kill(&k->run);
    int64_t until = cb_now_ms() + CB_SHUTDOWN_REAP_MS;
    while (!k->run.reaped) {
        int status;
        pid_t p = waitpid(k->run.pid, &status, WNOHANG);
        if (p == k->run.pid) {
            cb_runner_reaped(&k->run, status);
            break;
        }
        if (cb_now_ms() > until) {
            LOG_W("launcher %d did not exit: SIGKILL", (int) k->run.pid);
            kill(k->run.pid, SIGKILL);
            waitpid(k->run.pid, &status, 0);
            break;
        }
        usleep(5000);
    }
    cb_runner_close(&k->run);
}

int cb_kernel_main(cb_opts_t *opts) {
    kernel_t *k = calloc(1, sizeof *k);
    int status = 1;
    if (k == NULL) return 1;
    k->opts = opts;
    k->sigfd = -1;
    cb_runner_init(&k->run);
    for (int i = 0; i < 2; i++)
        k->streams[i].last_flush_ms = 0;

    int rc = cb_conn_load(opts->connection_file, &k->conn);
    if (rc != CB_CONN_OK) {
        fprintf(stderr, "cellblock-kernel: connection file %s: %s\n", opts->connection_file,
                k->conn.error);
        free(k);
        return rc == CB_CONN_EUNSUPPORTED ? 2 : 1;
    }
    if (cb_opts_find_helpers(opts, k->launcher_path, sizeof k->launcher_path, k->runner_path,
                             sizeof k->runner_path) < 0) {
        fprintf(stderr, "cellblock-kernel: cannot find the launcher, runner or python (see log)\n");
        goto out;
    }
    {
        /* Until the runner says hello, the version is what the interpreter's
         * real name tells (python3.11 -> 3.11), so early kernel_info replies
         * (and notebooks' language_info) are not just "3". */
        char real[CB_PATH_MAX];
        if (realpath(opts->python, real) != NULL) {
            const char *b = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
            if (strncmp(b, "python", 6) == 0 && b[6] >= '0' && b[6] <= '9' &&
                strspn(b + 6, "0123456789.") == strlen(b + 6))
                snprintf(k->python_version, sizeof k->python_version, "%.16s", b + 6);
        }
    }
    k->auth = cb_auth_new(k->conn.key, k->conn.key_len, CB_REPLAY_HISTORY);
    sodium_memzero(k->conn.key, sizeof k->conn.key);
    if (k->auth == NULL) goto out;
    cb_wire_ctx_init(&k->wire, k->auth);
    k->queue = calloc(CB_SHELL_QUEUE_MAX, sizeof *k->queue);
    if (k->queue == NULL) goto out;

    k->artifacts = cb_opts_new_artifacts(opts);

    /* Signals: blocked before any thread exists so libzmq's threads inherit the mask. */
    k->sigfd = cb_signalfd_supervision();
    signal(SIGPIPE, SIG_IGN);
    if (k->sigfd < 0) {
        PLOG_E("signalfd");
        goto out;
    }
    zsys_handler_set(NULL);
    zsys_set_logstream(NULL);
    zsys_init();
    if (s_bind(k) < 0) goto out;

    k->rcfg = (cb_runner_cfg_t){k->launcher_path, opts->python, k->runner_path, opts->fwd};
    if (strcmp(opts->sandbox, "none") == 0)
        LOG_W("--sandbox none: user code runs WITHOUT any confinement");
    if (strcmp(opts->network, "host") == 0)
        LOG_W("--network host: the sandbox shares the host's network");
    k->hb_stop_rx = zsock_new_pair("@inproc://cellblock-hb-stop");
    k->hb_stop_tx = zsock_new_pair(">inproc://cellblock-hb-stop");
    if (k->hb_stop_rx == NULL || k->hb_stop_tx == NULL ||
        pthread_create(&k->hb_thread, NULL, s_heartbeat, k) != 0) {
        LOG_E("pthread_create(heartbeat) failed");
        goto out;
    }
    k->parent_pid = getppid();
    const char *jpy = getenv("JPY_PARENT_PID");
    if (jpy && atoi(jpy) > 1) k->parent_pid = (pid_t) atoi(jpy);
    if (k->parent_pid > 1) k->parent_check_ms = cb_now_ms() + CB_PARENT_POLL_MS;
    s_status(k, NULL, "starting");
    s_start_runner(k);
    LOG_I("cellblock-kernel %s ready (session %s)", CB_VERSION, k->wire.session);
    s_loop(k);
    status = 0;
    zstr_send(k->hb_stop_tx, "stop");
    pthread_join(k->hb_thread, NULL);
out:
    k->exiting = true;
    s_teardown_runner(k);
    if (k->cur_kind != REQ_NONE) s_cur_clear(k);
    while (k->q_len > 0) {
        cb_msg_clear(&k->queue[k->q_head].msg);
        k->q_head = (k->q_head + 1) % CB_SHELL_QUEUE_MAX;
        k->q_len--;
    }
    free(k->queue);
    for (size_t i = 0; i < k->n_hist; i++) {
        free(k->hist[i].input);
        free(k->hist[i].output);
    }
    free(k->hist);
    json_decref(k->last_parent);
    for (int ch = 0; ch < CB_CH_COUNT; ch++)
        zsock_destroy(&k->sock[ch]);
    zsock_destroy(&k->hb_stop_tx);
    zsock_destroy(&k->hb_stop_rx);
    cb_artifacts_destroy(&k->artifacts);
    cb_auth_destroy(&k->auth);
    if (k->sigfd >= 0) close(k->sigfd);
    free(k);
    return status;
}
