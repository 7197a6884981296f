/*
 * frame.c - runner frame codec (see frame.h).
 */
#include "kernel/frame.h"

#include "limits.h"

#include <stdlib.h>
#include <string.h>

int cb_frame_extract(const uint8_t *buf, size_t len, size_t max, size_t *consumed, json_t **out) {
    *out = NULL;
    *consumed = 0;
    if (len < CB_RUNNER_FRAME_HDR) return CB_FRAME_NEED;
    uint32_t n = ((uint32_t) buf[0] << 24) | ((uint32_t) buf[1] << 16) | ((uint32_t) buf[2] << 8) |
                 (uint32_t) buf[3];
    if (n == 0 || n > max) return CB_FRAME_FATAL;
    if (len - CB_RUNNER_FRAME_HDR < n) return CB_FRAME_NEED;
    *consumed = CB_RUNNER_FRAME_HDR + (size_t) n;
    json_t *v =
        json_loadb((const char *) buf + CB_RUNNER_FRAME_HDR, n, JSON_REJECT_DUPLICATES, NULL);
    if (v == NULL) return CB_FRAME_BAD;
    if (!json_is_object(v) || !json_is_string(json_object_get(v, "type"))) {
        json_decref(v);
        return CB_FRAME_BAD;
    }
    *out = v;
    return CB_FRAME_OK;
}

int cb_frame_encode(const json_t *v, size_t max, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    if (n == 0 || n > max) return -1;
    size_t total;
    if (__builtin_add_overflow(n, (size_t) CB_RUNNER_FRAME_HDR, &total)) return -1;
    uint8_t *b = malloc(total);
    if (b == NULL) return -1;
    if (json_dumpb(v, (char *) b + CB_RUNNER_FRAME_HDR, n, JSON_COMPACT) != n) {
        free(b);
        return -1;
    }
    b[0] = (uint8_t) (n >> 24);
    b[1] = (uint8_t) (n >> 16);
    b[2] = (uint8_t) (n >> 8);
    b[3] = (uint8_t) n;
    *out = b;
    *out_len = total;
    return 0;
}

bool cb_frame_needs_ack(const json_t *f) {
    static const char *const acked[] = {"display", "update_display", "execute_result",
                                        "clear_output", "error"};
    const char *t = json_string_value(json_object_get(f, "type"));
    for (size_t i = 0; t && i < sizeof acked / sizeof acked[0]; i++)
        if (strcmp(t, acked[i]) == 0) return true;
    return false;
}
