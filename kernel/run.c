/*
 * run.c - `cellblock run`: one script in a fresh sandbox, no Jupyter client.
 *
 * A thin client of the session driver (session.c), like the kernel: the
 * script is one execute request; stdout/stderr stream straight through as
 * they arrive (valid UTF-8, characters never split); displays and the
 * kernel's own artifacts are saved to --out DIR under names the kernel
 * makes (outdir.c); the exit status says how it ended.  --json prints one
 * Execution object shaped like the client module's instead.
 */
#include "kernel/run.h"

#include "artifacts/artifacts.h"
#include "kernel/costs.h"
#include "isolate/cb_limits.h"
#include "isolate/log.h"
#include "isolate/names.h"
#include "isolate/util.h"
#include "kernel/options.h"
#include "kernel/outdir.h"
#include "kernel/session.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define CB_RUN_CODE_MAX (16u << 20)              /* bytes of a script */
#define CB_RUN_NAME_MAX 256                      /* bytes of a saved file's name */
#define CB_RUN_USED_MAX (CB_NAMES_PATH_MAX + 16) /* a saved path with its "-NNN" variant */

enum {
    CB_RUN_OK = 0,        /* script finished */
    CB_RUN_PYERR = 1,     /* an exception ended it */
    CB_RUN_USAGE = 2,     /* bad command line */
    CB_RUN_SANDBOX = 3,   /* the sandbox could not start */
    CB_RUN_TIMEOUT = 124, /* --timeout hit */
    CB_RUN_MEMORY = 125,  /* --memory hit */
    CB_RUN_DIED = 126,    /* the sandbox died otherwise */
};

typedef struct {
    const char *file;          /* FILE or "-" */
    const char *out_dir;       /* --out, or NULL */
    bool json;                 /* --json */
    cb_outdir_t *out;          /* --out opened */
    cb_session_t *session;     /* the sandbox */
    zloop_t *loop;             /* its loop */
    int sigfd;                 /* INT, TERM, HUP, CHLD */
    json_t *results;           /* Execution.results */
    json_t *out_log, *err_log; /* Execution.logs */
    json_t *error;             /* Execution.error or NULL */
    cb_costs_t *costs;         /* what the run cost (kernel/costs.h) */
    json_t *costs_json;        /* ... once it ended, for --json */
    int n_display;             /* displays saved */
    long timeout_s;            /* --timeout, for messages */
    bool finished;             /* the request ended */
    int status;                /* exit status */
} run_t;

static void s_usage(FILE *f) {
    fprintf(f, "usage: cellblock run [kernel options...] [--out DIR] [--json] FILE | -\n"
               "\n"
               "Runs a Python script in a fresh cellblock sandbox, streaming its output.\n"
               "Files it writes in its working directory and images it displays are saved\n"
               "to --out DIR (never overwriting: a taken name gets a new one). Limits are\n"
               "the kernel's options (cellblock-kernel --help).\n"
               "\n"
               "exit status: 0 ok, 1 Python exception, 2 usage, 3 sandbox could not start,\n"
               "             124 time limit (--timeout), 125 memory limit (--memory),\n"
               "             126 the sandbox died otherwise\n");
}

/* ---- saving ------------------------------------------------------------------------ */

static bool s_binary_mime(const char *m) {
    return strncmp(m, "image/", 6) == 0
               ? strcmp(m, "image/svg+xml") != 0
               : (strcmp(m, "application/pdf") == 0 || strcmp(m, "application/octet-stream") == 0);
}

/* Saves one mime value (base64 or text) as rel; the name used goes to used. */
static bool s_save(run_t *r, const char *rel, const char *mime, const json_t *v, char *used,
                   size_t used_len) {
    if (r->out == NULL || v == NULL) return false;
    cb_autofree char *txt = NULL;
    cb_autofree unsigned char *bin = NULL;
    const void *data;
    size_t len = 0;
    if (json_is_string(v) && s_binary_mime(mime)) {
        const char *b64 = json_string_value(v);
        size_t blen = json_string_length(v), max = blen / 4 * 3 + 3;
        bin = malloc(max + 1);
        if (bin == NULL || sodium_base642bin(bin, max, b64, blen, "\n\r ", &len, NULL,
                                             sodium_base64_VARIANT_ORIGINAL) != 0)
            return false;
        data = bin;
    } else if (json_is_string(v)) {
        data = json_string_value(v);
        len = json_string_length(v);
    } else {
        txt = json_dumps(v, JSON_INDENT(2));
        if (txt == NULL) return false;
        data = txt;
        len = strlen(txt);
    }
    char why[CB_NAMES_REASON_MAX];
    cb_autofree char *shown = cb_names_escape_dup(rel);
    const char *refused = cb_outdir_refusal(rel, why, sizeof why);
    if (refused != NULL || cb_outdir_write(r->out, rel, data, len, used, used_len) < 0) {
        /* the name is the sandbox's: shown escaped, never raw */
        fprintf(stderr, "[cellblock] not saving '%s': %s\n", shown ? shown : "?",
                refused ? refused : strerror(errno));
        return false;
    }
    cb_autofree char *shown_used = cb_names_escape_dup(used);
    if (!r->json)
        fprintf(stderr, "[cellblock] saved %s/%s\n", r->out_dir, shown_used ? shown_used : "?");
    return true;
}

/* The raw bytes of a path the collector escaped for JSON (\xNN, \\; see
 * artifacts_notice.c), so that the name policy judges, and the message
 * shows, the name itself.  NULL on out of memory. */
static char *s_unescape_meta(const char *path) {
    size_t n = strlen(path);
    char *raw = malloc(n + 1), *o = raw;
    if (raw == NULL) return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (path[i] == '\\' && path[i + 1] == '\\') {
            *o++ = '\\';
            i++;
        } else if (path[i] == '\\' && path[i + 1] == 'x' && sscanf(path + i + 2, "%2x", &v) == 1) {
            *o++ = (char) v;
            i += 3;
        } else {
            *o++ = path[i];
        }
    }
    *o = '\0';
    return raw;
}

static const char *s_ext(const char *mime) {
    static const char *const map[][2] = {
        {"image/png", "png"},   {"image/jpeg", "jpg"},    {"image/gif", "gif"},
        {"image/webp", "webp"}, {"image/svg+xml", "svg"}, {"application/pdf", "pdf"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(mime, map[i][0]) == 0) return map[i][1];
    return NULL;
}

/* A display or result of the runner: its first image is saved as display-N. */
static void s_result(run_t *r, const json_t *data, const json_t *meta, bool main_result) {
    json_t *res = json_pack("{s:O, s:o, s:b}", "data", data, "metadata",
                            meta ? json_incref((json_t *) meta) : json_object(), "is_main_result",
                            main_result);
    if (res == NULL) return;
    const char *key;
    json_t *v;
    bool saved = false;
    json_object_foreach((json_t *) data, key, v) {
        const char *ext = s_ext(key);
        if (ext == NULL || saved) continue;
        char rel[CB_RUN_NAME_MAX], used[CB_RUN_NAME_MAX];
        snprintf(rel, sizeof rel, "display-%d.%s", ++r->n_display, ext);
        if (s_save(r, rel, key, v, used, sizeof used)) {
            json_object_set_new(res, "file_name", json_string(used));
            saved = true;
        }
    }
    const char *text = json_string_value(json_object_get(data, "text/plain"));
    if (!r->json && text && !saved) printf("%s\n", text);
    fflush(stdout);
    json_array_append_new(r->results, res);
}

/* ---- session callbacks --------------------------------------------------------------- */

static void s_on_stream(void *ud, int which, const char *text, size_t len, bool late) {
    (void) late;
    run_t *r = ud;
    if (r->costs) cb_costs_stream(r->costs, which, len);
    if (r->json)
        json_array_append_new(which ? r->err_log : r->out_log, json_stringn(text, len));
    else
        (void) cb_write_all(which ? 2 : 1, text, len);
}

static void s_on_notice(void *ud, const char *text, bool late) {
    s_on_stream(ud, 1, text, strlen(text), late);
}

static void s_on_frame(void *ud, const cb_rframe_t *f, bool late) {
    (void) late;
    run_t *r = ud;
    switch (f->type) {
    case CB_RF_DISPLAY:
    case CB_RF_UPDATE_DISPLAY:
    case CB_RF_EXECUTE_RESULT:
        if (r->costs) cb_costs_display(r->costs, f->bytes);
        s_result(r, f->u.bundle.data, f->u.bundle.metadata, f->type == CB_RF_EXECUTE_RESULT);
        break;
    case CB_RF_ERROR: {
        json_decref(r->error);
        r->error = json_pack("{s:s, s:s, s:O}", "name", f->u.error.ename, "value",
                             f->u.error.evalue, "traceback", f->u.error.traceback);
        size_t i;
        json_t *l;
        if (!r->json)
            json_array_foreach(f->u.error.traceback, i, l)
                fprintf(stderr, "%s\n", json_string_value(l));
        break;
    }
    case CB_RF_INPUT_REQUEST:
        cb_session_input_reply(r->session, NULL, "cellblock run has no stdin");
        break;
    default: break;
    }
}

/* An artifact of the kernel's own collector: its path is the collector's. */
static void s_on_artifact(void *ud, const json_t *bundle) {
    run_t *r = ud;
    json_t *data = json_object_get(bundle, "data"), *meta = json_object_get(bundle, "metadata");
    json_t *art = json_object_get(json_object_get(meta, "cellblock"), "artifact");
    json_t *res = json_pack("{s:O, s:O, s:b}", "data", data, "metadata", meta, "is_main_result", 0);
    if (res == NULL) return;
    const char *path = json_string_value(json_object_get(art, "path"));
    const char *mime = json_string_value(json_object_get(art, "mime"));
    char used[CB_RUN_USED_MAX] = "";
    if (json_is_object(art)) {
        json_object_set(res, "artifact", art);
        cb_autofree char *raw = path && json_is_true(json_object_get(art, "path_escaped"))
                                    ? s_unescape_meta(path)
                                    : NULL;
        if (path && mime)
            (void) s_save(r, raw ? raw : path, mime, json_object_get(data, mime), used,
                          sizeof used);
        json_object_set_new(res, "file_name", json_string(used[0] ? used : path ? path : ""));
    }
    json_array_append_new(r->results, res);
}

static int s_stop(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    (void) timer_id;
    (void) arg;
    return -1;
}

static void s_on_end(void *ud, const cb_req_end_t *e) {
    run_t *r = ud;
    const cb_rframe_t *f = e->frame;
    if (f && f->type == CB_RF_DONE)
        r->status = strcmp(f->u.done.status, "ok") == 0 ? CB_RUN_OK : CB_RUN_PYERR;
    else if (e->setup_failed)
        r->status = CB_RUN_SANDBOX;
    else if (e->ename && strcmp(e->ename, "TimeoutError") == 0)
        r->status = CB_RUN_TIMEOUT;
    else if (e->ename && strcmp(e->ename, "MemoryError") == 0)
        r->status = CB_RUN_MEMORY;
    else
        r->status = CB_RUN_DIED;
    if (e->timed_out && r->status != CB_RUN_TIMEOUT) r->status = CB_RUN_TIMEOUT;
    if (e->timed_out)
        fprintf(stderr, "[cellblock] time limit of %ld s reached (--timeout)\n", r->timeout_s);
    if (e->message) fprintf(stderr, "[cellblock] %s\n", e->message);
    if (r->costs) r->costs_json = cb_costs_end(r->costs, r->session, e->artifacts);
    r->finished = true;
    cb_session_quit(r->session);
    zloop_timer(r->loop, 0, 1, s_stop, r);
}

static const cb_session_cbs_t s_callbacks = {
    .on_stream = s_on_stream,
    .on_frame = s_on_frame,
    .on_artifact = s_on_artifact,
    .on_end = s_on_end,
    .on_notice = s_on_notice,
};

static int s_on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg) {
    (void) loop;
    (void) item;
    run_t *r = arg;
    struct signalfd_siginfo si;
    while (read(r->sigfd, &si, sizeof si) == (ssize_t) sizeof si) {
        if (si.ssi_signo == SIGINT) cb_session_interrupt(r->session);
        if (si.ssi_signo == SIGCHLD) cb_session_reap(r->session);
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP) {
            r->status = CB_RUN_DIED;
            return -1;
        }
    }
    return r->finished ? -1 : 0;
}

/* ---- command line ----------------------------------------------------------------------- */

static int s_args(int argc, char **argv, int *i, void *ud, char *err, size_t err_len) {
    run_t *r = ud;
    const char *a = argv[*i];
    if (strcmp(a, "--json") == 0) {
        r->json = true;
        return 1;
    }
    if (strcmp(a, "--out") == 0) {
        if (*i + 1 >= argc) {
            snprintf(err, err_len, "--out needs a directory");
            return -1;
        }
        r->out_dir = argv[++*i];
        return 1;
    }
    if (strcmp(a, "-") == 0 || a[0] != '-') {
        if (r->file) {
            snprintf(err, err_len, "only one FILE (got '%s' and '%s')", r->file, a);
            return -1;
        }
        r->file = a;
        return 1;
    }
    return 0;
}

static int s_read_code(const char *file, char **out) {
    cb_autofd int fd = strcmp(file, "-") == 0 ? dup(0) : open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "cellblock run: cannot open %s: %s\n", file, strerror(errno));
        return -1;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (buf == NULL) return -1;
        if (len == cap) {
            if (cap >= CB_RUN_CODE_MAX) {
                fprintf(stderr, "cellblock run: %s is larger than %u bytes\n", file,
                        CB_RUN_CODE_MAX);
                free(buf);
                return -1;
            }
            cap *= 2;
            char *n = realloc(buf, cap + 1);
            if (n == NULL) free(buf);
            buf = n;
            continue;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            fprintf(stderr, "cellblock run: cannot read %s: %s\n", file, strerror(errno));
            free(buf);
            return -1;
        }
        if (n == 0) break;
        len += (size_t) n;
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

static void s_print_json(run_t *r) {
    json_auto_t *ex =
        json_pack("{s:O, s:{s:O, s:O}, s:O?, s:i, s:i, s:O?}", "results", r->results, "logs",
                  "stdout", r->out_log, "stderr", r->err_log, "error", r->error, "execution_count",
                  1, "exit_code", r->status, "costs", r->costs_json);
    if (ex) {
        json_dumpf(ex, stdout, JSON_INDENT(2));
        printf("\n");
    }
}

int cb_run_main(int argc, char **argv) {
    run_t r = {.sigfd = -1, .status = CB_RUN_SANDBOX};
    cb_opts_t *opts = calloc(1, sizeof *opts);
    if (opts == NULL) return 1;
    int rc = cb_opts_parse(argc, argv, opts, "cellblock run", s_args, &r);
    if (rc != CB_OPTS_RUN || r.file == NULL) {
        if (rc == CB_OPTS_RUN) s_usage(stderr);
        free(opts);
        return rc == CB_OPTS_EXIT_OK ? 0 : CB_RUN_USAGE;
    }
    cb_log_set_ident("cellblock run");
    cb_log_threshold = opts->log_level;
    r.timeout_s = opts->c.timeout_s;
    if (r.out_dir && (r.out = cb_outdir_open(r.out_dir)) == NULL) {
        fprintf(stderr, "cellblock run: cannot use --out %s: %s\n", r.out_dir, strerror(errno));
        free(opts);
        return CB_RUN_USAGE;
    }
    char *code = NULL;
    if (s_read_code(r.file, &code) < 0) {
        cb_outdir_close(&r.out);
        free(opts);
        return CB_RUN_USAGE;
    }
    char launcher[CB_PATH_MAX], runner[CB_PATH_MAX];
    r.results = json_array();
    r.out_log = json_array();
    r.err_log = json_array();
    cb_artifacts_t *art = NULL;
    cb_session_cfg_t cfg = {0};
    if (cb_opts_find_helpers(opts, launcher, sizeof launcher, runner, sizeof runner) < 0 ||
        sodium_init() < 0) {
        fprintf(stderr, "cellblock run: cannot find the launcher, runner or python\n");
        goto out;
    }
    art = cb_opts_new_artifacts(opts);
    cfg = (cb_session_cfg_t){launcher,
                             opts->c.python,
                             runner,
                             opts->fwd,
                             opts->c.timeout_s,
                             opts->c.memory_mb,
                             (uint64_t) opts->c.max_output_mb << 20,
                             art,
                             NULL};
    r.sigfd = cb_signalfd_supervision(); /* SIGHUP ends the run like SIGTERM */
    signal(SIGPIPE, SIG_IGN);
    r.loop = zloop_new();
    if (r.sigfd < 0 || r.loop == NULL) goto out;
    r.session = cb_session_new(&cfg, &s_callbacks, &r, r.loop);
    zmq_pollitem_t sig = {NULL, r.sigfd, ZMQ_POLLIN, 0};
    if (r.session == NULL || zloop_poller(r.loop, &sig, s_on_signal, &r) < 0) goto out;
    r.costs = cb_costs_new(strncmp(opts->c.network, "allow:", 6) == 0);
    if (r.costs) cb_costs_begin(r.costs, r.session);
    /* a terminal or a CI log: plain tracebacks */
    json_t *ex = json_pack("{s:s, s:s, s:b, s:b, s:{}, s:b, s:i, s:s}", "type", "execute", "code",
                           code, "silent", 0, "store_history", 1, "user_expressions", "allow_stdin",
                           0, "execution_count", 1, "colors", "NoColor");
    if (cb_session_request(r.session, CB_REQ_EXECUTE, ex) < 0) {
        fprintf(stderr, "cellblock run: the sandbox could not be started: %s\n",
                cb_session_fatal(r.session));
        goto out;
    }
    while (!r.finished && zloop_start(r.loop) == 0) {
    }
out:
    if (r.json) s_print_json(&r);
    cb_session_destroy(&r.session);
    zloop_destroy(&r.loop);
    if (r.sigfd >= 0) close(r.sigfd);
    cb_outdir_close(&r.out);
    cb_artifacts_destroy(&art);
    json_decref(r.results);
    json_decref(r.out_log);
    json_decref(r.err_log);
    json_decref(r.error);
    json_decref(r.costs_json);
    cb_costs_destroy(&r.costs);
    free(code);
    free(opts);
    return r.status;
}
