/*
 * run.c - `cellblock run`: one script in a fresh sandbox, no Jupyter client.
 *
 * It drives the same launcher, runner and artifact collector as the kernel
 * (cb_runner_*, the frame protocol, cb_artifacts_collect): the script is
 * sent as one `execute` frame, stdout/stderr stream straight through as
 * they arrive, displays and artifacts are written to --out, and the exit
 * status says how it ended (see cb_run_usage).  --json prints one Execution
 * object shaped like the client module's instead.
 */
#include "kernel/run.h"

#include "artifacts/artifacts.h"
#include "kernel/options.h"
#include "kernel/frame.h"
#include "kernel/runner.h"
#include "limits.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CB_RUN_CODE_MAX (16u << 20) /* bytes of a script */
#define CB_RUN_ARGS_MAX 128         /* options accepted */

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
    cb_opts_t *opts;           /* limits (borrowed) */
    const char *out_dir;       /* --out, or NULL */
    bool json;                 /* --json */
    cb_runner_t run;           /* the sandbox */
    cb_artifacts_t *art;       /* collector, NULL when --artifacts none */
    json_t *results;           /* Execution.results */
    json_t *out_log, *err_log; /* Execution.logs */
    json_t *error;             /* Execution.error or NULL */
    int n_display;             /* displays saved */
    bool done, timed_out;      /* state */
    int64_t deadline_ms;       /* --timeout deadline, 0 = none yet */
    int status;                /* exit status */
} run_t;

static void s_usage(FILE *f) {
    fprintf(f, "usage: cellblock run [kernel options...] [--out DIR] [--json] FILE | -\n"
               "\n"
               "Runs a Python script in a fresh cellblock sandbox, streaming its output.\n"
               "Files it writes in its working directory and images it displays are saved\n"
               "to --out DIR. Limits are the kernel's options (cellblock-kernel --help).\n"
               "\n"
               "exit status: 0 ok, 1 Python exception, 2 usage, 3 sandbox could not start,\n"
               "             124 time limit (--timeout), 125 memory limit (--memory),\n"
               "             126 the sandbox died otherwise\n");
}

/* Keeps out_dir-relative paths inside out_dir: no absolute, no "..". */
static bool s_safe_rel(const char *p) {
    if (p[0] == '\0' || p[0] == '/') return false;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t) (e - s) : strlen(s);
        if (n == 0 || (n == 2 && s[0] == '.' && s[1] == '.') || (n == 1 && s[0] == '.'))
            return false;
        s += n + (e ? 1 : 0);
    }
    return true;
}

static int s_write_out(run_t *r, const char *rel, const void *data, size_t len) {
    if (r->out_dir == NULL) return 0;
    if (!s_safe_rel(rel)) {
        fprintf(stderr, "[cellblock] not saving '%s': unsafe path\n", rel);
        return -1;
    }
    char path[CB_PATH_MAX];
    size_t dl = strlen(r->out_dir);
    while (dl > 1 && r->out_dir[dl - 1] == '/')
        dl--;
    if (snprintf(path, sizeof path, "%.*s/%s", (int) dl, r->out_dir, rel) >= (int) sizeof path)
        return -1;
    for (char *p = path + dl + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    cb_autofd int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 || cb_write_all(fd, data, len) < 0) {
        fprintf(stderr, "[cellblock] cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!r->json) fprintf(stderr, "[cellblock] saved %s\n", path);
    return 0;
}

static bool s_binary_mime(const char *m) {
    return strncmp(m, "image/", 6) == 0
               ? strcmp(m, "image/svg+xml") != 0
               : (strcmp(m, "application/pdf") == 0 || strcmp(m, "application/octet-stream") == 0);
}

/* Saves one mime value (base64 or text) under rel. */
static void s_save_value(run_t *r, const char *rel, const char *mime, const json_t *v) {
    if (json_is_string(v) && s_binary_mime(mime)) {
        const char *b64 = json_string_value(v);
        size_t blen = json_string_length(v), max = blen / 4 * 3 + 3, got = 0;
        cb_autofree unsigned char *bin = malloc(max + 1);
        if (bin && sodium_base642bin(bin, max, b64, blen, "\n\r ", &got, NULL,
                                     sodium_base64_VARIANT_ORIGINAL) == 0)
            s_write_out(r, rel, bin, got);
    } else if (json_is_string(v)) {
        s_write_out(r, rel, json_string_value(v), json_string_length(v));
    } else if (v) {
        cb_autofree char *txt = json_dumps(v, JSON_INDENT(2));
        if (txt) s_write_out(r, rel, txt, strlen(txt));
    }
}

static const char *s_ext(const char *mime) {
    static const char *const map[][2] = {
        {"image/png", "png"},         {"image/jpeg", "jpg"},    {"image/gif", "gif"},
        {"image/webp", "webp"},       {"image/svg+xml", "svg"}, {"application/pdf", "pdf"},
        {"text/html", "html"},        {"text/markdown", "md"},  {"text/csv", "csv"},
        {"application/json", "json"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(mime, map[i][0]) == 0) return map[i][1];
    return NULL;
}

/* A display or result from the runner (or an artifact bundle). */
static void s_result(run_t *r, const json_t *data, const json_t *meta, bool main_result) {
    const json_t *art = json_object_get(json_object_get(meta, "cellblock"), "artifact");
    json_t *res = json_pack("{s:O, s:O, s:b}", "data", data, "metadata",
                            meta ? meta : json_object(), "is_main_result", main_result);
    if (json_is_object(art)) {
        json_object_set(res, "artifact", (json_t *) art);
        const char *path = json_string_value(json_object_get(art, "path"));
        const char *mime = json_string_value(json_object_get(art, "mime"));
        if (path && mime) s_save_value(r, path, mime, json_object_get(data, mime));
        json_object_set_new(res, "file_name", json_string(path ? path : ""));
    } else {
        const char *key;
        json_t *v;
        bool saved = false;
        json_object_foreach((json_t *) data, key, v) {
            const char *ext = s_ext(key);
            if (ext == NULL || saved || (!s_binary_mime(key) && strcmp(key, "image/svg+xml") != 0))
                continue;
            char rel[64];
            snprintf(rel, sizeof rel, "display-%d.%s", ++r->n_display, ext);
            s_save_value(r, rel, key, v);
            json_object_set_new(res, "file_name", json_string(rel));
            saved = true;
        }
        const char *text = json_string_value(json_object_get(data, "text/plain"));
        if (!r->json && text && !saved) printf("%s\n", text);
        fflush(stdout);
    }
    json_array_append_new(r->results, res);
}

static void s_stream(run_t *r, int which) {
    int *fd = which ? &r->run.err_fd : &r->run.out_fd;
    char buf[CB_STREAM_CHUNK];
    for (;;) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            close(*fd);
            *fd = -1;
            return;
        }
        if (r->json) {
            json_t *s = json_stringn(buf, (size_t) n);
            if (s ==
                NULL) { /* not valid UTF-8 (or split mid-character): keep ASCII, mark the rest */
                for (ssize_t i = 0; i < n; i++)
                    if ((unsigned char) buf[i] >= 0x80) buf[i] = '?';
                s = json_stringn(buf, (size_t) n);
            }
            json_array_append_new(which ? r->err_log : r->out_log, s);
        } else {
            (void) cb_write_all(which ? 2 : 1, buf, (size_t) n);
        }
    }
}

static void s_drain(run_t *r) {
    if (r->run.out_fd >= 0) s_stream(r, 0);
    if (r->run.err_fd >= 0) s_stream(r, 1);
}

static void s_frame(run_t *r, json_t *f, const char *code) {
    const char *type = json_string_value(json_object_get(f, "type"));
    s_drain(r);
    if (strcmp(type, "hello") == 0) {
        r->run.state = CB_RUNNER_READY;
        json_auto_t *ex = json_pack("{s:s, s:s, s:b, s:b, s:{}, s:b, s:i}", "type", "execute",
                                    "code", code, "silent", 0, "store_history", 1,
                                    "user_expressions", "allow_stdin", 0, "execution_count", 1);
        if (ex) cb_runner_send(&r->run, ex);
        if (r->opts->timeout_s > 0) r->deadline_ms = cb_now_ms() + r->opts->timeout_s * 1000;
    } else if (strcmp(type, "display") == 0 || strcmp(type, "update_display") == 0 ||
               strcmp(type, "execute_result") == 0) {
        json_t *data = json_object_get(f, "data");
        if (json_is_object(data)) s_result(r, data, json_object_get(f, "metadata"), type[0] == 'e');
    } else if (strcmp(type, "error") == 0) {
        json_t *tb = json_object_get(f, "traceback");
        json_decref(r->error);
        r->error = json_pack("{s:O?, s:O?, s:O?}", "name", json_object_get(f, "ename"), "value",
                             json_object_get(f, "evalue"), "traceback", tb);
        if (!r->json && json_is_array(tb)) {
            size_t i;
            json_t *l;
            json_array_foreach(tb, i, l) if (json_is_string(l))
                fprintf(stderr, "%s\n", json_string_value(l));
        }
    } else if (strcmp(type, "input_request") == 0) {
        json_auto_t *rep =
            json_pack("{s:s, s:s}", "type", "input_reply", "error", "cellblock run has no stdin");
        cb_runner_send(&r->run, rep);
    } else if (strcmp(type, "done") == 0) {
        const char *st = json_string_value(json_object_get(f, "status"));
        r->status = (st && strcmp(st, "ok") == 0) ? CB_RUN_OK : CB_RUN_PYERR;
        r->done = true;
    }
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

static int s_loop(run_t *r, const char *code) {
    cb_autofd int sfd = cb_signalfd_supervision(); /* SIGHUP ends the run like SIGTERM */
    int64_t grace = 0, hello_by = cb_now_ms() + CB_RUNNER_HELLO_TIMEOUT_MS;
    bool killed = false;
    while (!r->run.reaped) {
        if (r->done && !killed) {
            s_drain(r);
            if (r->art && r->run.workdir_fd >= 0) {
                json_t *summary = NULL;
                json_auto_t *bundles = cb_artifacts_collect(r->art, r->run.workdir_fd, &summary);
                size_t i;
                json_t *b;
                json_array_foreach(bundles, i, b)
                    s_result(r, json_object_get(b, "data"), json_object_get(b, "metadata"), false);
                json_decref(summary);
            }
            cb_runner_kill(&r->run);
            killed = true;
        }
        struct pollfd p[5];
        int n = 0;
        p[n++] = (struct pollfd){sfd, POLLIN, 0};
        int io = n;
        int fds[4] = {r->run.out_fd, r->run.err_fd, r->run.ev_fd, r->run.rep_fd};
        for (int i = 0; i < 4; i++)
            p[n++] = (struct pollfd){fds[i], POLLIN, 0}; /* -1 is ignored */
        if (r->run.ev_fd >= 0 && cb_runner_wants_write(&r->run)) p[io + 2].events |= POLLOUT;
        int64_t now = cb_now_ms();
        int64_t next = grace                                ? grace
                       : r->deadline_ms                     ? r->deadline_ms
                       : r->run.state == CB_RUNNER_STARTING ? hello_by
                                                            : 0;
        int timeout = next ? (int) (next > now ? next - now : 0) : -1;
        if (poll(p, (nfds_t) n, timeout) < 0 && errno != EINTR) return CB_RUN_DIED;
        if (p[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t) sizeof si) {
                if (si.ssi_signo == SIGINT)
                    cb_runner_interrupt(&r->run);
                else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP)
                    cb_runner_kill(&r->run);
                else if (si.ssi_signo == SIGCHLD) {
                    int st;
                    if (r->run.pid > 0 && waitpid(r->run.pid, &st, WNOHANG) == r->run.pid)
                        cb_runner_reaped(&r->run, st);
                }
            }
        }
        if (p[io + 3].revents) cb_runner_read_reports(&r->run);
        if (p[io].revents) s_stream(r, 0);
        if (p[io + 1].revents) s_stream(r, 1);
        if (p[io + 2].revents & POLLOUT) cb_runner_flush(&r->run);
        if (p[io + 2].revents & (POLLIN | POLLHUP | POLLERR)) {
            int eof = cb_runner_read_events(&r->run);
            json_t *f;
            while (cb_runner_next_frame(&r->run, &f) == 1) {
                s_frame(r, f, code);
                if (cb_frame_needs_ack(f)) cb_runner_send_ack(&r->run);
                json_decref(f);
            }
            if ((eof < 0 || r->run.protocol_error) && !killed) {
                cb_runner_kill(&r->run);
                killed = true;
            }
        }
        now = cb_now_ms();
        if (r->run.state == CB_RUNNER_STARTING && now >= hello_by && !killed) {
            snprintf(r->run.reason, sizeof r->run.reason, "no hello from the runner in time");
            cb_runner_kill(&r->run);
            killed = true;
        }
        if (r->deadline_ms && now >= r->deadline_ms && !r->done) {
            fprintf(stderr, "[cellblock] time limit of %ld s reached (--timeout): interrupting\n",
                    r->opts->timeout_s);
            r->timed_out = true;
            r->deadline_ms = 0;
            grace = now + CB_INTERRUPT_GRACE_MS;
            cb_runner_interrupt(&r->run);
        } else if (grace && now >= grace && !r->done) {
            grace = 0;
            cb_runner_kill(&r->run);
            killed = true;
        }
    }
    cb_runner_read_reports(&r->run);
    s_drain(r);
    if (r->run.fatal[0]) {
        fprintf(stderr, "cellblock run: the sandbox could not be started: %s\n", r->run.fatal);
        return CB_RUN_SANDBOX;
    }
    if (r->timed_out) return CB_RUN_TIMEOUT;
    if (r->done) return r->status;
    char how[400];
    cb_runner_describe_exit(&r->run, how, sizeof how);
    if (r->run.oom) {
        fprintf(stderr,
                "[cellblock] the script ran out of memory (--memory %ld MiB) and was killed\n",
                r->opts->memory_mb);
        return CB_RUN_MEMORY;
    }
    fprintf(stderr, "[cellblock] the sandbox's Python process %s\n", how);
    return CB_RUN_DIED;
}

int cb_run_main(int argc, char **argv) {
    char *kargs[CB_RUN_ARGS_MAX + 4];
    int nk = 0;
    kargs[nk++] = "cellblock run";
    kargs[nk++] = "-f";
    kargs[nk++] = "-";
    const char *file = NULL, *out_dir = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            s_usage(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--out") == 0) {
            if (++i >= argc) {
                fprintf(stderr, "cellblock run: --out needs a directory\n");
                return CB_RUN_USAGE;
            }
            out_dir = argv[i];
        } else if (strcmp(a, "-") == 0 || a[0] != '-') {
            if (file) {
                fprintf(stderr, "cellblock run: only one FILE (got '%s' and '%s')\n", file, a);
                return CB_RUN_USAGE;
            }
            file = a;
        } else {
            if (nk + 2 > CB_RUN_ARGS_MAX) return CB_RUN_USAGE;
            kargs[nk++] = argv[i];
            if (strcmp(a, "--require-limits") != 0 && strchr(a, '=') == NULL && i + 1 < argc)
                kargs[nk++] = argv[++i];
        }
    }
    if (file == NULL) {
        s_usage(stderr);
        return CB_RUN_USAGE;
    }
    cb_opts_t *opts = calloc(1, sizeof *opts);
    if (opts == NULL) return 1;
    int rc = cb_opts_parse(nk, kargs, opts);
    if (rc != CB_OPTS_RUN) {
        free(opts);
        return rc == CB_OPTS_EXIT_OK ? 0 : CB_RUN_USAGE;
    }
    cb_log_set_ident("cellblock run");
    cb_log_threshold = opts->log_level;
    if (out_dir && mkdir(out_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "cellblock run: cannot create --out %s: %s\n", out_dir, strerror(errno));
        free(opts);
        return CB_RUN_USAGE;
    }
    char *code = NULL;
    if (s_read_code(file, &code) < 0) {
        free(opts);
        return CB_RUN_USAGE;
    }
    char launcher[CB_PATH_MAX], runner[CB_PATH_MAX];
    run_t r = {.opts = opts, .out_dir = out_dir, .json = json};
    cb_runner_init(&r.run);
    r.results = json_array();
    r.out_log = json_array();
    r.err_log = json_array();
    int status = CB_RUN_SANDBOX;
    if (cb_opts_find_helpers(opts, launcher, sizeof launcher, runner, sizeof runner) < 0 ||
        sodium_init() < 0) {
        fprintf(stderr, "cellblock run: cannot find the launcher, runner or python\n");
        goto out;
    }
    r.art = cb_opts_new_artifacts(opts);
    signal(SIGPIPE, SIG_IGN);
    cb_runner_cfg_t cfg = {launcher, opts->python, runner, opts->fwd};
    if (cb_runner_spawn(&r.run, &cfg) < 0) goto out;
    status = s_loop(&r, code);
out:
    if (json) {
        json_auto_t *ex = json_pack("{s:O, s:{s:O, s:O}, s:O?, s:i, s:i}", "results", r.results,
                                    "logs", "stdout", r.out_log, "stderr", r.err_log, "error",
                                    r.error, "execution_count", 1, "exit_code", status);
        if (ex) {
            json_dumpf(ex, stdout, JSON_INDENT(2));
            printf("\n");
        }
    }
    cb_runner_close(&r.run);
    cb_artifacts_destroy(&r.art);
    json_decref(r.results);
    json_decref(r.out_log);
    json_decref(r.err_log);
    json_decref(r.error);
    free(code);
    free(opts);
    return status;
}
