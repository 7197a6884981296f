/*
 * test_frame.c - runner frames: the length-prefixed codec (complete,
 * partial, oversized, zero-length), the JSON measure, and the frame table
 * (every type, its shape checks, its size limit, and the metadata the
 * kernel strips), and what a refused frame still says (its type and seq).
 */
#include "kernel/bounds.h"
#include "kernel/frame.h"
#include "tap.h"

static size_t s_put(uint8_t *b, const char *json) {
    size_t n = strlen(json);
    b[0] = (uint8_t) (n >> 24), b[1] = (uint8_t) (n >> 16), b[2] = (uint8_t) (n >> 8),
    b[3] = (uint8_t) n;
    memcpy(b + 4, json, n);
    return n + 4;
}

/* Parses one frame body given as a C string. */
static int s_parse(const char *json, cb_rframe_t *f) {
    char why[256];
    int rc = cb_rframe_parse((const uint8_t *) json, strlen(json), f, why, sizeof why);
    if (rc < 0) printf("#   dropped: %s\n", why);
    return rc;
}

static void s_codec(void) {
    uint8_t buf[4096];
    const uint8_t *body;
    size_t blen, used;
    size_t n = s_put(buf, "{\"type\":\"hello\",\"version\":2}");
    TAP_EQ_INT(cb_frame_extract(buf, n, 1024, &body, &blen, &used), CB_FRAME_OK,
               "a whole frame is found");
    TAP_EQ_INT(used, n, "consumes exactly the frame");
    TAP_EQ_INT(blen, n - 4, "body length");
    int need = 1;
    for (size_t cut = 0; cut < n; cut++)
        need &= cb_frame_extract(buf, cut, 1024, &body, &blen, &used) == CB_FRAME_NEED;
    TAP_OK(need, "every strict prefix asks for more bytes");
    n = s_put(buf, "{\"type\":\"x\"}");
    TAP_EQ_INT(cb_frame_extract(buf, n, 8, &body, &blen, &used), CB_FRAME_FATAL,
               "over the limit is fatal");
    uint8_t zero[4] = {0, 0, 0, 0};
    TAP_EQ_INT(cb_frame_extract(zero, 4, 1024, &body, &blen, &used), CB_FRAME_FATAL,
               "zero length is fatal");
    uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
    TAP_EQ_INT(cb_frame_extract(huge, 4, CB_RUNNER_FRAME_MAX, &body, &blen, &used), CB_FRAME_FATAL,
               "4 GiB length is fatal before any allocation");

    json_t *o = json_pack("{s:s, s:s}", "type", "execute", "code", "print('\xc3\xa9')");
    uint8_t *enc;
    size_t elen;
    TAP_EQ_INT(cb_frame_encode(o, 1024, &enc, &elen), 0, "encode");
    TAP_EQ_INT(cb_frame_extract(enc, elen, 1024, &body, &blen, &used), CB_FRAME_OK, "round trip");
    json_t *back = json_loadb((const char *) body, blen, 0, NULL);
    TAP_OK(json_equal(o, back), "round trip is equal");
    json_decref(back);
    free(enc);
    TAP_EQ_INT(cb_frame_encode(o, 8, &enc, &elen), -1, "encode refuses over the limit");
    /* append: frames one after another in one buffer, each framed */
    uint8_t *q = NULL;
    size_t qlen = 0;
    TAP_OK(cb_frame_append(o, 1024, 4096, &q, &qlen) == 0 &&
               cb_frame_append(o, 1024, 4096, &q, &qlen) == 0,
           "two frames appended");
    size_t first = qlen / 2;
    TAP_OK(cb_frame_extract(q, qlen, 1024, &body, &blen, &used) == CB_FRAME_OK && used == first &&
               cb_frame_extract(q + used, qlen - used, 1024, &body, &blen, &used) == CB_FRAME_OK &&
               used == first,
           "... each extracts whole");
    TAP_OK(cb_frame_append(o, 1024, qlen + first - 1, &q, &qlen) == -1 && qlen == 2 * first,
           "a frame that would pass the buffer's bound is refused, the buffer unchanged");
    free(q);
    json_decref(o);
}

static void s_measure(void) {
    size_t nodes, depth;
    const char *t = "{\"a\":[1,2,{\"b\":\"x,{[\\\"\"}],\"c\":null}";
    cb_json_measure(t, strlen(t), &nodes, &depth);
    TAP_EQ_INT(depth, 3, "depth counts containers, not brackets inside strings");
    TAP_OK(nodes >= 8, "every value and key counted (got %zu)", nodes);
    /* "[{},{},...]": the amplification the node cap exists for */
    size_t n = 300000;
    char *amp = malloc(n * 3 + 3);
    size_t o = 0;
    amp[o++] = '[';
    for (size_t i = 0; i < n; i++)
        memcpy(amp + o, i ? ",{}" : "{}", i ? 3 : 2), o += i ? 3 : 2;
    amp[o++] = ']';
    cb_json_measure(amp, o, &nodes, &depth);
    TAP_OK(nodes >= n, "300000 empty objects count at least 300000 (got %zu)", nodes);
    char *frame = malloc(o + 64);
    int fl = snprintf(frame, o + 64, "{\"type\":\"display\",\"seq\":1,\"data\":{\"a/b\":%.*s}}",
                      (int) o, amp);
    cb_rframe_t f;
    char why[256];
    TAP_EQ_INT(cb_rframe_parse((const uint8_t *) frame, (size_t) fl, &f, why, sizeof why), -1,
               "a frame of 300000 empty objects is refused before parsing");
    TAP_OK(strstr(why, "too complex") != NULL, "... saying so (%s)", why);
    free(frame);
    free(amp);
    char deep[CB_JSON_DEPTH_MAX * 2 + 64];
    int d = snprintf(deep, sizeof deep, "{\"type\":\"done\",\"seq\":1,\"status\":\"ok\",\"x\":");
    for (int i = 0; i < CB_JSON_DEPTH_MAX; i++)
        deep[d++] = '[';
    for (int i = 0; i < CB_JSON_DEPTH_MAX; i++)
        deep[d++] = ']';
    deep[d++] = '}';
    TAP_EQ_INT(cb_rframe_parse((const uint8_t *) deep, (size_t) d, &f, why, sizeof why), -1,
               "nesting deeper than CB_JSON_DEPTH_MAX is refused");
}

static void s_table(void) {
    cb_rframe_t f;
    TAP_EQ_INT(s_parse("{\"type\":\"hello\",\"version\":2,\"python_version\":\"3.11.2\","
                       "\"shell\":\"ipython\",\"shell_version\":\"8.5.0\"}",
                       &f),
               0, "hello");
    TAP_OK(f.type == CB_RF_HELLO && f.u.hello.version == 2 &&
               strcmp(f.u.hello.facts.shell, "ipython") == 0,
           "hello fields");
    TAP_OK(!cb_rframe_needs_ack(f.type) && cb_rframe_when(f.type) == CB_WHEN_STARTING,
           "hello: no ack, only before the runner is ready");
    cb_rframe_clear(&f);

    TAP_EQ_INT(s_parse("{\"type\":\"display\",\"seq\":3,\"data\":{\"text/plain\":\"x\"},"
                       "\"metadata\":{\"cellblock\":{\"artifact\":{\"path\":\"../x\"}},\"k\":1},"
                       "\"transient\":{\"display_id\":\"d\"}}",
                       &f),
               0, "display");
    TAP_OK(f.type == CB_RF_DISPLAY && f.seq == 3 && cb_rframe_needs_ack(f.type),
           "display: seq, ack");
    TAP_OK(json_object_get(f.u.bundle.metadata, "cellblock") == NULL &&
               json_object_get(f.u.bundle.metadata, "k") != NULL,
           "the runner's 'cellblock' metadata is removed, the rest kept");
    cb_rframe_clear(&f);
    TAP_EQ_INT(s_parse("{\"type\":\"display\",\"data\":{\"text/plain\":\"x\"}}", &f), -1,
               "display without seq refused");
    TAP_EQ_INT(s_parse("{\"type\":\"display\",\"seq\":1,\"data\":{\"plain\":\"x\"}}", &f), -1,
               "mime key without a slash refused");
    TAP_EQ_INT(s_parse("{\"type\":\"update_display\",\"seq\":1,\"data\":{\"a/b\":\"x\"}}", &f), -1,
               "update_display without display_id refused");
    TAP_EQ_INT(s_parse("{\"type\":\"execute_result\",\"seq\":1,\"data\":{\"a/b\":1},"
                       "\"metadata\":[]}",
                       &f),
               -1, "metadata that is not an object refused");
    TAP_EQ_INT(s_parse("{\"type\":\"clear_output\",\"seq\":1,\"wait\":true}", &f), 0,
               "clear_output");
    TAP_OK(f.u.clear.wait == 1, "clear_output wait");
    cb_rframe_clear(&f);
    TAP_EQ_INT(s_parse("{\"type\":\"error\",\"seq\":1,\"ename\":\"E\",\"evalue\":\"v\","
                       "\"traceback\":[\"a\",2]}",
                       &f),
               -1, "traceback with a non-string refused");
    TAP_EQ_INT(s_parse("{\"type\":\"input_request\",\"seq\":1,\"prompt\":\"? \"}", &f), 0,
               "input_request");
    cb_rframe_clear(&f);
    TAP_EQ_INT(s_parse("{\"type\":\"done\",\"seq\":1,\"status\":\"maybe\"}", &f), -1,
               "done with an unknown status refused");
    TAP_EQ_INT(s_parse("{\"type\":\"done\",\"seq\":9,\"status\":\"ok\",\"payload\":[],"
                       "\"user_expressions\":{}}",
                       &f),
               0, "done");
    TAP_OK(f.seq == 9 && strcmp(f.u.done.status, "ok") == 0, "done fields");
    cb_rframe_clear(&f);
    TAP_EQ_INT(s_parse("{\"type\":\"complete_reply\",\"seq\":1,\"matches\":[\"a\"],"
                       "\"cursor_start\":0,\"cursor_end\":1}",
                       &f),
               0, "complete_reply");
    cb_rframe_clear(&f);
    TAP_EQ_INT(s_parse("{\"type\":\"is_complete_reply\",\"seq\":1,\"status\":\"sure\"}", &f), -1,
               "is_complete_reply with an unknown status refused");
    TAP_EQ_INT(s_parse("{\"type\":\"bad_request\",\"error\":\"RecursionError\"}", &f), 0,
               "bad_request needs no seq");
    cb_rframe_clear(&f);
    TAP_EQ_INT(s_parse("{\"type\":\"launch_missiles\",\"seq\":1}", &f), -1, "unknown type refused");
    TAP_EQ_INT(s_parse("not json", &f), -1, "garbage refused");
    TAP_EQ_INT(s_parse("[1,2]", &f), -1, "an array refused");
    TAP_EQ_INT(s_parse("{\"type\":\"a\",\"type\":\"b\"}", &f), -1, "duplicate keys refused");
    TAP_EQ_INT(s_parse("{\"type\":\"done\",\"seq\":1,\"status\":\"ok\",\"t\":\"\xff\xfe\"}", &f),
               -1, "invalid UTF-8 refused");

    /* per-type size: a clear_output is small */
    char big[CB_FRAME_SMALL_MAX + 128];
    int n = snprintf(big, sizeof big, "{\"type\":\"clear_output\",\"seq\":1,\"pad\":\"");
    memset(big + n, 'x', CB_FRAME_SMALL_MAX);
    n += CB_FRAME_SMALL_MAX;
    n += snprintf(big + n, sizeof big - (size_t) n, "\"}");
    TAP_EQ_INT(s_parse(big, &f), -1, "a clear_output over its type's limit is refused");
    /* metadata is bounded on its own */
    size_t mlen = CB_FRAME_META_MAX + 256;
    char *meta = malloc(mlen + 128);
    int m = snprintf(meta, mlen + 128,
                     "{\"type\":\"display\",\"seq\":1,\"data\":{\"a/b\":1},"
                     "\"metadata\":{\"k\":\"");
    memset(meta + m, 'y', CB_FRAME_META_MAX);
    m += CB_FRAME_META_MAX;
    m += snprintf(meta + m, mlen + 128 - (size_t) m, "\"}}");
    cb_rframe_t g;
    char why[256];
    TAP_EQ_INT(cb_rframe_parse((const uint8_t *) meta, (size_t) m, &g, why, sizeof why), -1,
               "metadata over CB_FRAME_META_MAX refused");
    free(meta);
}

/* Parses a frame of head, n copies of unit, then tail: -1 or 0, as cb_rframe_parse. */
static int s_parse_padded(const char *head, const char *unit, size_t n, const char *tail,
                          cb_rframe_t *f, char *why, size_t why_len) {
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail), len = hl + n * ul + tl;
    char *b = malloc(len);
    memcpy(b, head, hl);
    for (size_t i = 0; i < n; i++)
        memcpy(b + hl + i * ul, unit, ul);
    memcpy(b + hl + n * ul, tail, tl);
    int rc = cb_rframe_parse((const uint8_t *) b, len, f, why, why_len);
    free(b);
    return rc;
}

/* A refused reply still names its type and request: the session ends that
 * request with the reason instead of leaving it to its deadline. */
static void s_refused(void) {
    cb_rframe_t f;
    char why[256];
    int rc = s_parse_padded("{\"type\":\"done\",\"status\":\"ok\",\"pad\":\"", "x",
                            CB_FRAME_REPLY_MAX, "\",\"seq\":42}", &f, why, sizeof why);
    TAP_OK(rc == -1 && f.type == CB_RF_DONE && f.root == NULL && f.has_seq && f.seq == 42,
           "a done over its bound is refused, keeping its type and seq (%s)", why);
    TAP_OK(strstr(why, "done of ") == why && strstr(why, "is over its limit of") != NULL,
           "... the reason names it, its size and its limit");
    /* too complex to parse: type and seq read by the scan alone */
    const size_t values = CB_RUNNER_FRAME_NODES_MAX + 8;
    rc = s_parse_padded("{\"type\" : \"complete_reply\",\"x\":{\"seq\":1},\"matches\":[0", ",0",
                        values, "],\"seq\" : -7 }", &f, why, sizeof why);
    TAP_OK(rc == -1 && f.type == CB_RF_COMPLETE_REPLY && f.has_seq && f.seq == -7,
           "too many values: the top-level type and seq are still read (%s)", why);
    static const char *const no_seq[] = {"}",
                                         ",\"seq\":7.5}",
                                         ",\"seq\":\"7\"}",
                                         ",\"seq\":7e1}",
                                         ",\"seq\":99999999999999999999}",
                                         ",\"seq\":-}",
                                         ",\"seq\":7"};
    for (size_t i = 0; i < sizeof no_seq / sizeof no_seq[0]; i++) {
        rc = s_parse_padded("{\"type\":\"done\",\"x\":{\"seq\":3},\"v\":[0", ",0", values,
                            no_seq[i], &f, why, sizeof why);
        TAP_OK(rc == -1 && f.type == CB_RF_DONE && !f.has_seq,
               "too many values, tail '%s': no integer seq read", no_seq[i]);
    }
    TAP_OK(s_parse("{\"type\":\"done\",\"seq\":5,\"status\":\"maybe\"}", &f) == -1 &&
               f.type == CB_RF_DONE && f.has_seq && f.seq == 5,
           "a done failing its check keeps its seq");
    TAP_OK(s_parse("{\"type\":\"inspect_reply\",\"seq\":6,\"found\":\"yes\"}", &f) == -1 &&
               f.type == CB_RF_INSPECT_REPLY && f.has_seq && f.seq == 6,
           "an inspect_reply failing its unpack keeps its seq");
    TAP_OK(s_parse("{\"type\":\"done\",\"status\":\"ok\"}", &f) == -1 && f.type == CB_RF_DONE &&
               !f.has_seq,
           "a done without seq has none");
}

/* A frame made from a format: its text byte for byte, a frame extract reads. */
static void s_format(void) {
    size_t n = 0;
    uint8_t *f = cb_frame_format(&n, "{\"type\":\"resync\",\"nonce\":\"%s\"}", "ab12");
    const uint8_t *body;
    size_t blen, used;
    TAP_OK(f != NULL && n == 4 + 32 &&
               cb_frame_extract(f, n, 1024, &body, &blen, &used) == CB_FRAME_OK && used == n &&
               blen == 32 && memcmp(body, "{\"type\":\"resync\",\"nonce\":\"ab12\"}", 32) == 0,
           "cb_frame_format frames its text as is");
    free(f);
    char big[CB_FRAME_TEXT_MAX + 1];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    TAP_OK(cb_frame_format(&n, "%s", big) == NULL && n == 0,
           "... and refuses a text over its bound");
}

int main(void) {
    s_format();
    s_codec();
    s_measure();
    s_table();
    s_refused();
    TAP_DONE();
}
