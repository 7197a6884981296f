/*
 * fuzz_frame.c - runner frames (kernel/frame.c): the length-prefixed codec,
 * the JSON measure taken before any parse, and the frame table.
 *
 * The input is what code in the sandbox writes on fd 3.  Mode byte bit 0:
 *   0  raw: the rest is the byte stream as the kernel reads it;
 *   1  framed: the rest is split at 0xff and each part gets its right
 *      length prefix, so the fuzzer spends its time on the JSON.
 * The stream is cut into frames with cb_frame_extract as session_io.c does
 * (a fatal prefix ends it) and each body goes through cb_rframe_parse.
 *
 * Properties: extract never points outside the buffer and reports NEED and
 * FATAL exactly when it should; cb_json_measure never counts fewer values
 * or less depth than jansson really builds (the bound is only worth
 * something if it is an upper bound); an accepted frame is within every
 * limit of its type (size, values, depth, metadata and transient sizes), its
 * typed fields are what its table row promises (and are readable: ASan
 * watches), and the runner's "cellblock" metadata key is gone; a refused one
 * has a reason, holds nothing and names a known type or none (the kernel
 * acks a refused ordered frame by it); an accepted frame encoded again (when no
 * longer than it came) is accepted again as the same frame.
 */
#include "fuzz/common.h"
#include "kernel/bounds.h"
#include "kernel/frame.h"

#define FZ_PARTS_MAX 256 /* frames of one framed input */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    fz_quiet_log();
    return 0;
}

/* What jansson really built: values and keys, and nesting. */
static void s_count(const json_t *v, size_t *nodes, size_t depth, size_t *max_depth) {
    (*nodes)++;
    if (json_is_object(v) || json_is_array(v)) {
        depth++;
        if (depth > *max_depth) *max_depth = depth;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach((json_t *) v, k, c) {
            (*nodes)++;
            s_count(c, nodes, depth, max_depth);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) s_count(c, nodes, depth, max_depth);
    }
}

static void s_check_measure(const uint8_t *body, size_t len) {
    size_t nodes, depth;
    cb_json_measure((const char *) body, len, &nodes, &depth);
    FZ_CHECK(nodes >= 1, "at least one value");
    json_t *v = json_loadb((const char *) body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (v == NULL) return;
    size_t real = 0, real_depth = 0;
    s_count(v, &real, 0, &real_depth);
    json_decref(v);
    FZ_CHECK(real <= nodes, "measure counted %zu values, jansson built %zu", nodes, real);
    FZ_CHECK(real_depth <= depth, "measure saw depth %zu, jansson built %zu", depth, real_depth);
}

static size_t s_size(const json_t *v) { return v ? json_dumpb(v, NULL, 0, JSON_COMPACT) : 0; }

static bool s_all_strings(const json_t *a) {
    size_t i;
    json_t *v;
    if (!json_is_array(a)) return false;
    json_array_foreach(a, i, v) if (!json_is_string(v)) return false;
    return true;
}

static void s_check_frame(const cb_rframe_t *f, const uint8_t *body, size_t len) {
    FZ_CHECK(f->type < CB_RF_COUNT, "a known type");
    FZ_CHECK(json_is_object(f->root), "root is an object");
    FZ_CHECK(strcmp(json_string_value(json_object_get(f->root, "type")), cb_rframe_name(f->type)) ==
                 0,
             "type member names the row");
    FZ_CHECK(f->bytes == len && len <= CB_RUNNER_FRAME_MAX, "size %zu", len);
    size_t nodes, depth;
    cb_json_measure((const char *) body, len, &nodes, &depth);
    FZ_CHECK(nodes <= CB_RUNNER_FRAME_NODES_MAX && depth <= CB_JSON_DEPTH_MAX, "complexity");
    FZ_CHECK(!f->has_seq || json_is_integer(json_object_get(f->root, "seq")), "seq");
    FZ_CHECK(cb_rframe_when(f->type) != 0, "accepted at some time");
    switch (f->type) {
    case CB_RF_HELLO: FZ_CHECK(len <= CB_FRAME_SMALL_MAX, "hello is small"); break;
    case CB_RF_DISPLAY:
    case CB_RF_UPDATE_DISPLAY:
    case CB_RF_EXECUTE_RESULT: {
        const json_t *md = f->u.bundle.metadata, *tr = f->u.bundle.transient;
        FZ_CHECK(json_is_object(f->u.bundle.data), "data is an object");
        FZ_CHECK(md == NULL || json_is_object(md), "metadata is an object");
        FZ_CHECK(tr == NULL || json_is_object(tr), "transient is an object");
        FZ_CHECK(json_object_get(md, "cellblock") == NULL, "the runner's cellblock key is gone");
        FZ_CHECK(s_size(md) <= CB_FRAME_META_MAX, "metadata within its limit");
        FZ_CHECK(s_size(tr) <= CB_FRAME_TRANSIENT_MAX, "transient within its limit");
        if (f->type == CB_RF_UPDATE_DISPLAY)
            FZ_CHECK(json_is_string(json_object_get(tr, "display_id")), "update has display_id");
        FZ_CHECK(f->has_seq && cb_rframe_needs_ack(f->type), "ordered and numbered");
        break;
    }
    case CB_RF_CLEAR_OUTPUT: FZ_CHECK(len <= CB_FRAME_SMALL_MAX, "clear_output is small"); break;
    case CB_RF_ERROR:
        FZ_CHECK(strlen(f->u.error.ename) + strlen(f->u.error.evalue) <= len, "error strings");
        FZ_CHECK(s_all_strings(f->u.error.traceback), "traceback of strings");
        break;
    case CB_RF_INPUT_REQUEST: FZ_CHECK(strlen(f->u.input.prompt) <= len, "prompt"); break;
    case CB_RF_DONE:
        FZ_CHECK(strcmp(f->u.done.status, "ok") == 0 || strcmp(f->u.done.status, "error") == 0,
                 "done status");
        FZ_CHECK(!f->u.done.user_expressions || json_is_object(f->u.done.user_expressions),
                 "user_expressions");
        FZ_CHECK(!f->u.done.payload || json_is_array(f->u.done.payload), "payload");
        FZ_CHECK(!f->u.done.traceback || s_all_strings(f->u.done.traceback), "traceback");
        FZ_CHECK(!f->u.done.ename || strlen(f->u.done.ename) <= len, "ename");
        break;
    case CB_RF_COMPLETE_REPLY:
        FZ_CHECK(s_all_strings(f->u.complete.matches), "matches of strings");
        FZ_CHECK(!f->u.complete.metadata || json_is_object(f->u.complete.metadata), "metadata");
        break;
    case CB_RF_INSPECT_REPLY:
        FZ_CHECK(!f->u.inspect.data || json_is_object(f->u.inspect.data), "data");
        break;
    case CB_RF_IS_COMPLETE_REPLY:
        FZ_CHECK(strlen(f->u.is_complete.status) < 16, "a known status");
        FZ_CHECK(!f->u.is_complete.indent || strlen(f->u.is_complete.indent) <= len, "indent");
        break;
    case CB_RF_BAD_REQUEST: FZ_CHECK(strlen(f->u.bad.error) <= len, "error"); break;
    case CB_RF_COMM_OPEN:
    case CB_RF_COMM_MSG:
    case CB_RF_COMM_CLOSE: {
        size_t idl = strlen(f->u.comm.comm_id);
        FZ_CHECK(idl > 0 && idl <= CB_COMM_ID_MAX, "comm_id of %zu bytes", idl);
        FZ_CHECK(f->type != CB_RF_COMM_OPEN || f->u.comm.target_name != NULL, "open has a target");
        FZ_CHECK(!f->u.comm.data || json_is_object(f->u.comm.data), "comm data");
        FZ_CHECK(!f->u.comm.metadata || json_is_object(f->u.comm.metadata), "comm metadata");
        FZ_CHECK(!f->u.comm.buffers || (s_all_strings(f->u.comm.buffers) &&
                                        json_array_size(f->u.comm.buffers) <= CB_WIRE_MAX_BUFFERS),
                 "comm buffers");
        FZ_CHECK(cb_rframe_needs_ack(f->type), "comm traffic is ordered");
        break;
    }
    default: break;
    }
}

/* Encoded again: accepted again as the same frame (when not longer). */
static void s_round_trip(const cb_rframe_t *f, size_t len) {
    uint8_t *enc;
    size_t enc_len;
    if (cb_frame_encode(f->root, CB_RUNNER_FRAME_MAX, &enc, &enc_len) < 0) return;
    const uint8_t *body;
    size_t blen, used;
    FZ_CHECK(cb_frame_extract(enc, enc_len, CB_RUNNER_FRAME_MAX, &body, &blen, &used) ==
                     CB_FRAME_OK &&
                 used == enc_len,
             "an encoded frame extracts whole");
    if (blen <= len) {
        cb_rframe_t g;
        char why[256];
        int rc = cb_rframe_parse(body, blen, &g, why, sizeof why);
        FZ_CHECK(rc == 0, "re-encoded %s refused: %s", cb_rframe_name(f->type), why);
        FZ_CHECK(g.type == f->type && g.seq == f->seq && json_equal(g.root, f->root),
                 "the same frame");
        cb_rframe_clear(&g);
    }
    free(enc);
}

static void s_stream(const uint8_t *buf, size_t len) {
    size_t off = 0;
    for (;;) {
        const uint8_t *body;
        size_t blen, used;
        size_t left = len - off;
        int rc = cb_frame_extract(buf + off, left, CB_RUNNER_FRAME_MAX, &body, &blen, &used);
        uint32_t n = 0;
        if (left >= CB_RUNNER_FRAME_HDR)
            n = ((uint32_t) buf[off] << 24) | ((uint32_t) buf[off + 1] << 16) |
                ((uint32_t) buf[off + 2] << 8) | buf[off + 3];
        if (rc == CB_FRAME_NEED) {
            FZ_CHECK(left < CB_RUNNER_FRAME_HDR ||
                         (n > 0 && n <= CB_RUNNER_FRAME_MAX && left - CB_RUNNER_FRAME_HDR < n),
                     "NEED only when bytes are missing");
            FZ_CHECK(body == NULL && used == 0, "NEED consumes nothing");
            return;
        }
        if (rc == CB_FRAME_FATAL) {
            FZ_CHECK(n == 0 || n > CB_RUNNER_FRAME_MAX, "FATAL only for a bad prefix (%u)", n);
            return;
        }
        FZ_CHECK(rc == CB_FRAME_OK, "known result %d", rc);
        FZ_CHECK(body == buf + off + CB_RUNNER_FRAME_HDR && blen == n &&
                     used == CB_RUNNER_FRAME_HDR + blen && used <= left,
                 "a frame within the buffer");
        s_check_measure(body, blen);
        cb_rframe_t f;
        char why[256];
        memset(why, 0x55, sizeof why);
        if (cb_rframe_parse(body, blen, &f, why, sizeof why) == 0) {
            s_check_frame(&f, body, blen);
            s_round_trip(&f, blen);
            cb_rframe_clear(&f);
        } else {
            FZ_CHECK(memchr(why, '\0', sizeof why) != NULL && why[0] != '\0', "a reason");
            FZ_CHECK(f.root == NULL, "a refused frame holds nothing");
            FZ_CHECK(f.type <= CB_RF_COUNT, "a refused frame names a known type or none");
            if (f.type < CB_RF_COUNT) { /* the type it names is the frame's own */
                json_t *v = json_loadb((const char *) body, blen, JSON_REJECT_DUPLICATES, NULL);
                const char *t = json_string_value(json_object_get(v, "type"));
                FZ_CHECK(v == NULL || t == NULL || strcmp(t, cb_rframe_name(f.type)) == 0,
                         "refused as a '%s', names '%s'", cb_rframe_name(f.type), t);
                /* the seq it keeps (the session ends that request) is the frame's own */
                json_t *seq = json_object_get(v, "seq");
                FZ_CHECK(!f.has_seq || v == NULL ||
                             (json_is_integer(seq) && json_integer_value(seq) == f.seq),
                         "refused with seq %lld, not the frame's", (long long) f.seq);
                json_decref(v);
            }
        }
        off += used;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    if ((data[0] & 1u) == 0) {
        s_stream(data + 1, size - 1);
        return 0;
    }
    static fz_part_t parts[FZ_PARTS_MAX];
    size_t n = fz_split(data + 1, size - 1, parts, FZ_PARTS_MAX), total = 0;
    for (size_t i = 0; i < n; i++)
        total += CB_RUNNER_FRAME_HDR + parts[i].n;
    uint8_t *buf = malloc(total ? total : 1), *o = buf;
    for (size_t i = 0; i < n; i++) {
        uint32_t l = (uint32_t) parts[i].n;
        *o++ = (uint8_t) (l >> 24), *o++ = (uint8_t) (l >> 16), *o++ = (uint8_t) (l >> 8);
        *o++ = (uint8_t) l;
        memcpy(o, parts[i].p, parts[i].n);
        o += parts[i].n;
    }
    s_stream(buf, total);
    free(buf);
    return 0;
}
