/*
 * test_frame.c - the kernel's parser for runner frames: complete, partial,
 * oversized, zero-length, non-JSON and wrongly shaped frames.
 */
#include "kernel/frame.h"
#include "limits.h"
#include "tap.h"

static size_t s_put(uint8_t *b, const char *json) {
    size_t n = strlen(json);
    b[0] = (uint8_t) (n >> 24), b[1] = (uint8_t) (n >> 16), b[2] = (uint8_t) (n >> 8),
    b[3] = (uint8_t) n;
    memcpy(b + 4, json, n);
    return n + 4;
}

int main(void) {
    uint8_t buf[4096];
    size_t used;
    json_t *v;
    size_t n = s_put(buf, "{\"type\":\"hello\",\"version\":1}");
    TAP_EQ_INT(cb_frame_extract(buf, n, 1024, &used, &v), CB_FRAME_OK, "a whole frame parses");
    TAP_EQ_INT(used, n, "consumes exactly the frame");
    TAP_EQ_STR(json_string_value(json_object_get(v, "type")), "hello", "type member read");
    json_decref(v);
    for (size_t cut = 0; cut < n; cut++) {
        if (cb_frame_extract(buf, cut, 1024, &used, &v) != CB_FRAME_NEED) {
            TAP_OK(0, "prefix of %zu bytes should need more", cut);
            break;
        }
    }
    TAP_OK(1, "every strict prefix asks for more bytes");
    size_t n2 = s_put(buf + n, "{\"type\":\"done\"}");
    TAP_EQ_INT(cb_frame_extract(buf, n + n2, 1024, &used, &v), CB_FRAME_OK, "first of two frames");
    json_decref(v);
    TAP_EQ_INT(cb_frame_extract(buf + used, n + n2 - used, 1024, &used, &v), CB_FRAME_OK,
               "second of two frames");
    json_decref(v);

    n = s_put(buf, "not json");
    TAP_EQ_INT(cb_frame_extract(buf, n, 1024, &used, &v), CB_FRAME_BAD,
               "garbage is a droppable frame");
    TAP_EQ_INT(used, n, "garbage frame consumed");
    n = s_put(buf, "[1,2]");
    TAP_EQ_INT(cb_frame_extract(buf, n, 1024, &used, &v), CB_FRAME_BAD, "an array is rejected");
    n = s_put(buf, "{\"type\":3}");
    TAP_EQ_INT(cb_frame_extract(buf, n, 1024, &used, &v), CB_FRAME_BAD,
               "non-string type is rejected");
    n = s_put(buf, "{\"type\":\"a\",\"type\":\"b\"}");
    TAP_EQ_INT(cb_frame_extract(buf, n, 1024, &used, &v), CB_FRAME_BAD,
               "duplicate keys are rejected");
    n = s_put(buf, "{\"type\":\"x\"}");
    TAP_EQ_INT(cb_frame_extract(buf, n, 8, &used, &v), CB_FRAME_FATAL, "over the limit is fatal");
    uint8_t zero[4] = {0, 0, 0, 0};
    TAP_EQ_INT(cb_frame_extract(zero, 4, 1024, &used, &v), CB_FRAME_FATAL, "zero length is fatal");
    uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
    TAP_EQ_INT(cb_frame_extract(huge, 4, CB_RUNNER_FRAME_MAX, &used, &v), CB_FRAME_FATAL,
               "4 GiB length is fatal before any allocation");
    n = s_put(buf, "{\"type\":\"s\",\"t\":\"\xff\xfe\"}");
    TAP_EQ_INT(cb_frame_extract(buf, n, 1024, &used, &v), CB_FRAME_BAD,
               "invalid UTF-8 is rejected");

    json_t *o = json_pack("{s:s, s:s}", "type", "execute", "code", "print('\xc3\xa9')");
    uint8_t *enc;
    size_t elen;
    TAP_EQ_INT(cb_frame_encode(o, 1024, &enc, &elen), 0, "encode");
    TAP_EQ_INT(cb_frame_extract(enc, elen, 1024, &used, &v), CB_FRAME_OK, "round trip");
    TAP_OK(json_equal(o, v), "round trip is equal");
    free(enc);
    TAP_EQ_INT(cb_frame_encode(o, 8, &enc, &elen), -1, "encode refuses over the limit");
    json_decref(v);
    json_decref(o);
    TAP_DONE();
}
