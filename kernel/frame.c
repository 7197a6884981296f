/*
 * frame.c - runner frame codec and the frame table (see frame.h).
 *
 * One row per frame type: its name, the largest encoded size it may have,
 * whether the runner waits for an ack after it, when it is accepted, and
 * the function that unpacks it with one json_unpack_ex.  Adding a frame
 * type is adding a row and its unpack function.
 */
#include "kernel/frame.h"

#include "kernel/bounds.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- codec ---------------------------------------------------------------------- */

int cb_frame_extract(const uint8_t *buf, size_t len, size_t max, const uint8_t **body,
                     size_t *body_len, size_t *consumed) {
    *body = NULL;
    *body_len = *consumed = 0;
    if (len < CB_RUNNER_FRAME_HDR) return CB_FRAME_NEED;
    uint32_t n = ((uint32_t) buf[0] << 24) | ((uint32_t) buf[1] << 16) | ((uint32_t) buf[2] << 8) |
                 (uint32_t) buf[3];
    if (n == 0 || n > max) return CB_FRAME_FATAL;
    if (len - CB_RUNNER_FRAME_HDR < n) return CB_FRAME_NEED;
    *body = buf + CB_RUNNER_FRAME_HDR;
    *body_len = n;
    *consumed = CB_RUNNER_FRAME_HDR + (size_t) n;
    return CB_FRAME_OK;
}

int cb_frame_append(const json_t *v, size_t max, size_t buf_max, uint8_t **buf, size_t *len) {
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    size_t total;
    if (n == 0 || n > max || __builtin_add_overflow(*len, n + CB_RUNNER_FRAME_HDR, &total) ||
        total > buf_max)
        return -1;
    uint8_t *b = realloc(*buf, total);
    if (b == NULL) return -1;
    *buf = b;
    uint8_t *f = b + *len;
    if (json_dumpb(v, (char *) f + CB_RUNNER_FRAME_HDR, n, JSON_COMPACT) != n) return -1;
    f[0] = (uint8_t) (n >> 24);
    f[1] = (uint8_t) (n >> 16);
    f[2] = (uint8_t) (n >> 8);
    f[3] = (uint8_t) n;
    *len = total;
    return 0;
}

int cb_frame_encode(const json_t *v, size_t max, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (cb_frame_append(v, max, SIZE_MAX, out, out_len) == 0) return 0;
    free(*out);
    *out = NULL;
    return -1;
}

uint8_t *cb_frame_format(size_t *out_len, const char *fmt, ...) {
    char text[CB_FRAME_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    *out_len = 0;
    if (n <= 0 || (size_t) n >= sizeof text) return NULL;
    uint8_t *f = malloc(CB_RUNNER_FRAME_HDR + (size_t) n);
    if (f == NULL) return NULL;
    for (int i = 0; i < CB_RUNNER_FRAME_HDR; i++)
        f[i] = (uint8_t) ((unsigned) n >> (8 * (CB_RUNNER_FRAME_HDR - 1 - i)));
    memcpy(f + CB_RUNNER_FRAME_HDR, text, (size_t) n);
    *out_len = CB_RUNNER_FRAME_HDR + (size_t) n;
    return f;
}

void cb_json_measure(const char *t, size_t len, size_t *nodes, size_t *depth) {
    size_t n = 0, d = 0, dmax = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
            continue;
        }
        switch (c) {
        case '"': in_str = true, n++; break; /* a key or a string value */
        case '{':
        case '[':
            n++;
            if (++d > dmax) dmax = d;
            break;
        case '}':
        case ']':
            if (d > 0) d--;
            break;
        case ',': n++; break; /* covers numbers, true, false, null */
        default: break;
        }
    }
    *nodes = n + 1;
    *depth = dmax;
}

/* ---- the table ------------------------------------------------------------------- */

typedef int (*s_unpack_fn)(json_t *root, cb_rframe_t *f, json_error_t *e);

/* The facts of hello and resumed: all optional. */
static int s_facts(json_t *r, cb_rframe_facts_t *x, json_error_t *e) {
    memset(x, 0, sizeof *x);
    return json_unpack_ex(r, e, 0, "{s?s, s?s, s?s, s?s, s?b}", "python_version",
                          &x->python_version, "shell", &x->shell, "shell_version",
                          &x->shell_version, "cell_prefix", &x->cell_prefix, "debugger",
                          &x->debugger);
}

static int s_hello(json_t *r, cb_rframe_t *f, json_error_t *e) {
    if (json_unpack_ex(r, e, 0, "{s:I}", "version", &f->u.hello.version) < 0) return -1;
    return s_facts(r, &f->u.hello.facts, e);
}

static int s_bundle(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.bundle.metadata = f->u.bundle.transient = NULL;
    return json_unpack_ex(r, e, 0, "{s:o, s?o, s?o}", "data", &f->u.bundle.data, "metadata",
                          &f->u.bundle.metadata, "transient", &f->u.bundle.transient);
}

static int s_clear(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.clear.wait = 0;
    return json_unpack_ex(r, e, 0, "{s?b}", "wait", &f->u.clear.wait);
}

static int s_error(json_t *r, cb_rframe_t *f, json_error_t *e) {
    return json_unpack_ex(r, e, 0, "{s:s, s:s, s:o}", "ename", &f->u.error.ename, "evalue",
                          &f->u.error.evalue, "traceback", &f->u.error.traceback);
}

static int s_input(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.input.password = 0;
    return json_unpack_ex(r, e, 0, "{s:s, s?b}", "prompt", &f->u.input.prompt, "password",
                          &f->u.input.password);
}

static int s_done(json_t *r, cb_rframe_t *f, json_error_t *e) {
    memset(&f->u.done, 0, sizeof f->u.done);
    return json_unpack_ex(r, e, 0, "{s:s, s?o, s?o, s?s, s?s, s?o}", "status", &f->u.done.status,
                          "user_expressions", &f->u.done.user_expressions, "payload",
                          &f->u.done.payload, "ename", &f->u.done.ename, "evalue",
                          &f->u.done.evalue, "traceback", &f->u.done.traceback);
}

static int s_complete(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.complete.metadata = NULL;
    f->u.complete.cursor_start = f->u.complete.cursor_end = -1;
    return json_unpack_ex(r, e, 0, "{s:o, s?I, s?I, s?o}", "matches", &f->u.complete.matches,
                          "cursor_start", &f->u.complete.cursor_start, "cursor_end",
                          &f->u.complete.cursor_end, "metadata", &f->u.complete.metadata);
}

static int s_inspect(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.inspect.data = f->u.inspect.metadata = NULL;
    return json_unpack_ex(r, e, 0, "{s:b, s?o, s?o}", "found", &f->u.inspect.found, "data",
                          &f->u.inspect.data, "metadata", &f->u.inspect.metadata);
}

static int s_is_complete(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.is_complete.indent = NULL;
    return json_unpack_ex(r, e, 0, "{s:s, s?s}", "status", &f->u.is_complete.status, "indent",
                          &f->u.is_complete.indent);
}

static int s_none(json_t *r, cb_rframe_t *f, json_error_t *e) {
    (void) r, (void) f, (void) e;
    return 0;
}

static int s_comm(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.comm.target_name = f->u.comm.target_module = NULL;
    f->u.comm.metadata = f->u.comm.buffers = NULL;
    f->u.comm.data = NULL;
    return json_unpack_ex(r, e, 0, "{s:s, s?s, s?s, s?o, s?o, s?o}", "comm_id", &f->u.comm.comm_id,
                          "target_name", &f->u.comm.target_name, "target_module",
                          &f->u.comm.target_module, "data", &f->u.comm.data, "metadata",
                          &f->u.comm.metadata, "buffers", &f->u.comm.buffers);
}

static int s_bad(json_t *r, cb_rframe_t *f, json_error_t *e) {
    return json_unpack_ex(r, e, 0, "{s:s}", "error", &f->u.bad.error);
}

static int s_ckpt(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.ckpt.error = NULL;
    f->u.ckpt.threads = 0;
    return json_unpack_ex(r, e, 0, "{s:s, s?s, s?I}", "status", &f->u.ckpt.status, "error",
                          &f->u.ckpt.error, "threads", &f->u.ckpt.threads);
}

static int s_resumed(json_t *r, cb_rframe_t *f, json_error_t *e) {
    if (json_unpack_ex(r, e, 0, "{s:s}", "nonce", &f->u.resumed.nonce) < 0) return -1;
    return s_facts(r, &f->u.resumed.facts, e);
}

static int s_snapreq(json_t *r, cb_rframe_t *f, json_error_t *e) {
    f->u.snapreq.name = NULL;
    return json_unpack_ex(r, e, 0, "{s:s, s?s}", "op", &f->u.snapreq.op, "name",
                          &f->u.snapreq.name);
}

static const struct {
    const char *name;   /* "type" member */
    size_t max_bytes;   /* largest encoded frame of this type */
    bool needs_ack;     /* the runner waits for {"type":"ack"} after it */
    unsigned when;      /* CB_WHEN_* */
    bool needs_seq;     /* must carry the request's "seq" */
    s_unpack_fn unpack; /* one json_unpack_ex into the union */
} s_rows[CB_RF_COUNT] = {
    [CB_RF_HELLO] = {"hello", CB_FRAME_SMALL_MAX, false, CB_WHEN_STARTING, false, s_hello},
    [CB_RF_DISPLAY] = {"display", CB_RUNNER_FRAME_MAX, true, CB_WHEN_RUNNING, true, s_bundle},
    [CB_RF_UPDATE_DISPLAY] = {"update_display", CB_RUNNER_FRAME_MAX, true, CB_WHEN_RUNNING, true,
                              s_bundle},
    [CB_RF_EXECUTE_RESULT] = {"execute_result", CB_RUNNER_FRAME_MAX, true, CB_WHEN_EXECUTE, true,
                              s_bundle},
    [CB_RF_CLEAR_OUTPUT] = {"clear_output", CB_FRAME_SMALL_MAX, true, CB_WHEN_RUNNING, true,
                            s_clear},
    [CB_RF_ERROR] = {"error", CB_FRAME_REPLY_MAX, true, CB_WHEN_RUNNING, true, s_error},
    [CB_RF_INPUT_REQUEST] = {"input_request", CB_FRAME_INPUT_MAX, false, CB_WHEN_EXECUTE, true,
                             s_input},
    [CB_RF_DONE] = {"done", CB_FRAME_REPLY_MAX, false, CB_WHEN_EXECUTE, true, s_done},
    [CB_RF_COMPLETE_REPLY] = {"complete_reply", CB_FRAME_REPLY_MAX, false, CB_WHEN_ASSIST, true,
                              s_complete},
    [CB_RF_INSPECT_REPLY] = {"inspect_reply", CB_FRAME_REPLY_MAX, false, CB_WHEN_ASSIST, true,
                             s_inspect},
    [CB_RF_IS_COMPLETE_REPLY] = {"is_complete_reply", CB_FRAME_SMALL_MAX, false, CB_WHEN_ASSIST,
                                 true, s_is_complete},
    [CB_RF_BAD_REQUEST] = {"bad_request", CB_FRAME_SMALL_MAX, false,
                           CB_WHEN_EXECUTE | CB_WHEN_ASSIST, false, s_bad},
    /* acked: output the runner prints after it cannot reach the pipes before
     * the kernel has taken it (else a drain could count it as the previous
     * request's) */
    [CB_RF_STARTED] = {"started", CB_FRAME_SMALL_MAX, true, CB_WHEN_RUNNING, true, s_none},
    /* comm traffic of widgets: ordered like displays (an Output widget's
     * capture must keep its place among the stream output) */
    [CB_RF_COMM_OPEN] = {"comm_open", CB_RUNNER_FRAME_MAX, true, CB_WHEN_RUNNING, true, s_comm},
    [CB_RF_COMM_MSG] = {"comm_msg", CB_RUNNER_FRAME_MAX, true, CB_WHEN_RUNNING, true, s_comm},
    [CB_RF_COMM_CLOSE] = {"comm_close", CB_FRAME_REPLY_MAX, true, CB_WHEN_RUNNING, true, s_comm},
    [CB_RF_COMM_DONE] = {"comm_done", CB_FRAME_SMALL_MAX, false, CB_WHEN_COMM, true, s_none},
    /* checkpoints (session_snap.c decides when they are valid) */
    [CB_RF_CHECKPOINT_REPLY] = {"checkpoint_reply", CB_FRAME_SMALL_MAX, false, CB_WHEN_RUNNING,
                                true, s_ckpt},
    [CB_RF_RESUMED] = {"resumed", CB_FRAME_SMALL_MAX, false, CB_WHEN_RUNNING | CB_WHEN_STARTING,
                       false, s_resumed},
    /* ordered: what the kernel prints for it keeps its place in the cell's output */
    [CB_RF_SNAPSHOT_REQUEST] = {"snapshot_request", CB_FRAME_SMALL_MAX, true, CB_WHEN_EXECUTE,
                                true, s_snapreq},
};

const char *cb_rframe_name(cb_rframe_type_t t) { return t < CB_RF_COUNT ? s_rows[t].name : "?"; }
bool cb_rframe_needs_ack(cb_rframe_type_t t) { return t < CB_RF_COUNT && s_rows[t].needs_ack; }
unsigned cb_rframe_when(cb_rframe_type_t t) { return t < CB_RF_COUNT ? s_rows[t].when : 0; }

void cb_rframe_clear(cb_rframe_t *f) {
    json_decref(f->root);
    memset(f, 0, sizeof *f);
}

/* ---- shape checks beyond the unpack -------------------------------------------------- */

static int s_no(char *why, size_t len, const char *msg) {
    snprintf(why, len, "%s", msg);
    return -1;
}

static int s_over(char *why, size_t len, const char *what, unsigned max) {
    snprintf(why, len, "%s over %u bytes", what, max);
    return -1;
}

static size_t s_size(const json_t *v) { return v ? json_dumpb(v, NULL, 0, JSON_COMPACT) : 0; }

static bool s_all_strings(const json_t *a) {
    if (!json_is_array(a)) return false;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (!json_is_string(v)) return false;
    return true;
}

/* A mimebundle: an object whose keys look like MIME types ("x/y"). */
static bool s_mimebundle(const json_t *d) {
    if (!json_is_object(d)) return false;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *) d, key, v) {
        const char *slash = strchr(key, '/');
        if (slash == NULL || slash == key || slash[1] == '\0') return false;
    }
    return true;
}

static int s_check(cb_rframe_t *f, char *why, size_t why_len) {
    switch (f->type) {
    case CB_RF_DISPLAY:
    case CB_RF_UPDATE_DISPLAY:
    case CB_RF_EXECUTE_RESULT: {
        json_t *md = f->u.bundle.metadata, *tr = f->u.bundle.transient;
        if (!s_mimebundle(f->u.bundle.data)) return s_no(why, why_len, "data is not a mimebundle");
        if (md && !json_is_object(md)) return s_no(why, why_len, "metadata is not an object");
        if (tr && !json_is_object(tr)) return s_no(why, why_len, "transient is not an object");
        if (s_size(md) > CB_FRAME_META_MAX)
            return s_over(why, why_len, "metadata", CB_FRAME_META_MAX);
        if (s_size(tr) > CB_FRAME_TRANSIENT_MAX)
            return s_over(why, why_len, "transient", CB_FRAME_TRANSIENT_MAX);
        if (f->type == CB_RF_UPDATE_DISPLAY && !json_is_string(json_object_get(tr, "display_id")))
            return s_no(why, why_len, "update without a display_id");
        /* artifact metadata is the kernel's collector's alone: never the runner's */
        if (md) json_object_del(md, "cellblock");
        return 0;
    }
    case CB_RF_ERROR:
        if (!s_all_strings(f->u.error.traceback))
            return s_no(why, why_len, "traceback is not a list of strings");
        return 0;
    case CB_RF_DONE: {
        const char *st = f->u.done.status;
        if (strcmp(st, "ok") != 0 && strcmp(st, "error") != 0)
            return s_no(why, why_len, "status is neither ok nor error");
        json_t *ue = f->u.done.user_expressions, *pl = f->u.done.payload;
        if ((ue && !json_is_object(ue)) || (pl && !json_is_array(pl)))
            return s_no(why, why_len, "user_expressions/payload of the wrong type");
        if (f->u.done.traceback && !s_all_strings(f->u.done.traceback))
            return s_no(why, why_len, "traceback is not a list of strings");
        return 0;
    }
    case CB_RF_COMPLETE_REPLY:
        if (!s_all_strings(f->u.complete.matches))
            return s_no(why, why_len, "matches is not a list of strings");
        if (f->u.complete.metadata && !json_is_object(f->u.complete.metadata))
            return s_no(why, why_len, "metadata is not an object");
        return 0;
    case CB_RF_INSPECT_REPLY:
        if (f->u.inspect.data && !s_mimebundle(f->u.inspect.data))
            return s_no(why, why_len, "data is not a mimebundle");
        if (f->u.inspect.metadata && !json_is_object(f->u.inspect.metadata))
            return s_no(why, why_len, "metadata is not an object");
        return 0;
    case CB_RF_COMM_OPEN:
    case CB_RF_COMM_MSG:
    case CB_RF_COMM_CLOSE: {
        size_t idl = strlen(f->u.comm.comm_id);
        if (idl == 0 || idl > CB_COMM_ID_MAX) return s_no(why, why_len, "bad comm_id");
        if (f->type == CB_RF_COMM_OPEN && f->u.comm.target_name == NULL)
            return s_no(why, why_len, "comm_open without target_name");
        if (f->u.comm.data && !json_is_object(f->u.comm.data))
            return s_no(why, why_len, "comm data is not an object");
        if (f->u.comm.metadata && !json_is_object(f->u.comm.metadata))
            return s_no(why, why_len, "comm metadata is not an object");
        if (f->u.comm.buffers && (!s_all_strings(f->u.comm.buffers) ||
                                  json_array_size(f->u.comm.buffers) > CB_WIRE_MAX_BUFFERS))
            return s_no(why, why_len, "comm buffers are not a short list of base64 strings");
        return 0;
    }
    case CB_RF_IS_COMPLETE_REPLY: {
        static const char *const ok[] = {"complete", "incomplete", "invalid", "unknown"};
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
            if (strcmp(f->u.is_complete.status, ok[i]) == 0) return 0;
        return s_no(why, why_len, "unknown status");
    }
    default: return 0;
    }
}

/* t[j..]: past JSON whitespace. */
static size_t s_skip_ws(const char *t, size_t len, size_t j) {
    while (j < len && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r' || t[j] == '\n'))
        j++;
    return j;
}

/* Where the value of a plain top-level member "key" (quotes included)
 * starts in the JSON text of an object, found by the same scan as
 * cb_json_measure's (escaped keys are not looked at): its offset, or len
 * when there is none.  Only for frames too complex to parse. */
static size_t s_peek_member(const char *t, size_t len, const char *key) {
    const size_t klen = strlen(key);
    size_t d = 0;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (c == '{' || c == '[') {
            d++;
        } else if (c == '}' || c == ']') {
            if (d > 0) d--;
        } else if (c == '"') {
            if (d == 1 && t[0] == '{' && len - i > klen && memcmp(t + i, key, klen) == 0) {
                size_t j = s_skip_ws(t, len, i + klen);
                if (j < len && t[j] == ':') return s_skip_ws(t, len, j + 1);
            }
            for (i++; i < len && t[i] != '"'; i++) /* past the string */
                if (t[i] == '\\') i++;
        }
    }
    return len;
}

/* The row named by a frame too complex to parse, from its "type" member:
 * CB_RF_COUNT when there is none.  Used to ack a refused ordered frame,
 * which its runner waits for, and to end the request a refused reply
 * answers. */
static size_t s_peek_type(const char *t, size_t len) {
    size_t j = s_peek_member(t, len, "\"type\"");
    const char *name = j < len && t[j] == '"' ? t + j + 1 : NULL;
    const char *end = name ? memchr(name, '"', len - j - 1) : NULL;
    for (size_t r = 0; end && r < CB_RF_COUNT; r++)
        if ((size_t) (end - name) == strlen(s_rows[r].name) &&
            memcmp(name, s_rows[r].name, (size_t) (end - name)) == 0)
            return r;
    return CB_RF_COUNT;
}

/* The integer "seq" of a frame too complex to parse, as jansson would read
 * it (digits, an optional minus, no fraction or exponent, in range): true
 * and *seq, or false when there is none. */
static bool s_peek_seq(const char *t, size_t len, json_int_t *seq) {
    size_t j = s_peek_member(t, len, "\"seq\"");
    bool neg = j < len && t[j] == '-';
    size_t k = j + neg, digits = 0;
    json_int_t v = 0;
    for (; k < len && t[k] >= '0' && t[k] <= '9'; k++, digits++)
        if (__builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, neg ? -(t[k] - '0') : t[k] - '0', &v))
            return false;
    if (digits == 0 || k == len || strchr(",} \t\r\n", t[k]) == NULL || t[k] == '\0') return false;
    *seq = v;
    return true;
}

/* A refused frame: holds nothing, keeps the type it named (or CB_RF_COUNT)
 * and the integer seq it carried, when one was read. */
static int s_refuse(cb_rframe_t *out, size_t t) {
    bool has_seq = out->has_seq;
    json_int_t seq = out->seq;
    cb_rframe_clear(out);
    out->type = (cb_rframe_type_t) t;
    out->has_seq = has_seq;
    out->seq = has_seq ? seq : -1;
    return -1;
}

int cb_rframe_parse(const uint8_t *body, size_t len, cb_rframe_t *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    out->type = CB_RF_COUNT;
    size_t nodes, depth;
    cb_json_measure((const char *) body, len, &nodes, &depth);
    if (depth > CB_JSON_DEPTH_MAX || nodes > CB_RUNNER_FRAME_NODES_MAX) {
        snprintf(why, why_len, "JSON too complex (%zu values, depth %zu; limits %u, %u)", nodes,
                 depth, CB_RUNNER_FRAME_NODES_MAX, CB_JSON_DEPTH_MAX);
        out->has_seq = s_peek_seq((const char *) body, len, &out->seq);
        return s_refuse(out, s_peek_type((const char *) body, len));
    }
    json_error_t e;
    json_t *root = json_loadb((const char *) body, len, JSON_REJECT_DUPLICATES, &e);
    if (root == NULL) {
        snprintf(why, why_len, "not JSON: %s", e.text);
        return -1;
    }
    const char *type = json_string_value(json_object_get(root, "type"));
    if (!json_is_object(root) || type == NULL) {
        json_decref(root);
        snprintf(why, why_len, "not an object with a string \"type\"");
        return -1;
    }
    size_t t;
    for (t = 0; t < CB_RF_COUNT; t++)
        if (strcmp(type, s_rows[t].name) == 0) break;
    if (t == CB_RF_COUNT) {
        snprintf(why, why_len, "unknown type '%.32s'", type);
        json_decref(root);
        return -1;
    }
    out->type = (cb_rframe_type_t) t;
    out->root = root;
    out->bytes = len;
    json_t *seq = json_object_get(root, "seq");
    out->has_seq = json_is_integer(seq);
    out->seq = out->has_seq ? json_integer_value(seq) : -1;
    if (len > s_rows[t].max_bytes) {
        snprintf(why, why_len, "%s of %zu bytes is over its limit of %zu", s_rows[t].name, len,
                 s_rows[t].max_bytes);
        return s_refuse(out, t);
    }
    if (s_rows[t].needs_seq && !out->has_seq) {
        snprintf(why, why_len, "%s without an integer seq", s_rows[t].name);
        return s_refuse(out, t);
    }
    if (s_rows[t].unpack(root, out, &e) < 0) {
        snprintf(why, why_len, "%s: %s", s_rows[t].name, e.text);
        return s_refuse(out, t);
    }
    if (s_check(out, why, why_len) < 0) return s_refuse(out, t);
    return 0;
}
