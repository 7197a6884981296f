/*
 * debug_dap.c - DAP messages from the runner, checked (see debug_dap.h).
 */
#include "kernel/debug_dap.h"

#include "kernel/bounds.h"
#include "kernel/frame.h"

#include <stdio.h>
#include <string.h>

void cb_dap_clear(cb_dap_msg_t *m) {
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

static int s_no(cb_dap_msg_t *out, char *why, size_t why_len, const char *msg) {
    snprintf(why, why_len, "%s", msg);
    cb_dap_clear(out);
    return -1;
}

int cb_dap_parse(const uint8_t *body, size_t len, cb_dap_msg_t *out, char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    size_t nodes, depth;
    cb_json_measure((const char *) body, len, &nodes, &depth);
    if (depth > CB_JSON_DEPTH_MAX || nodes > CB_RUNNER_FRAME_NODES_MAX) {
        snprintf(why, why_len, "JSON too complex (%zu values, depth %zu; limits %u, %u)", nodes,
                 depth, CB_RUNNER_FRAME_NODES_MAX, CB_JSON_DEPTH_MAX);
        return -1;
    }
    json_error_t e;
    out->root = json_loadb((const char *) body, len, JSON_REJECT_DUPLICATES, &e);
    if (out->root == NULL) {
        snprintf(why, why_len, "not JSON: %s", e.text);
        return -1;
    }
    out->bytes = len;
    const char *type = NULL, *message = NULL;
    json_t *seq = NULL;
    if (json_unpack_ex(out->root, &e, 0, "{s:s, s?o, s?o}", "type", &type, "seq", &seq, "body",
                       &out->body) < 0)
        return s_no(out, why, why_len, "not an object with a string \"type\"");
    if (seq != NULL && !json_is_integer(seq))
        return s_no(out, why, why_len, "seq is not an integer");
    if (out->body != NULL && !json_is_object(out->body))
        return s_no(out, why, why_len, "body is not an object");
    if (strcmp(type, "response") == 0) {
        int ok = 0;
        out->kind = CB_DAP_RESPONSE;
        if (json_unpack_ex(out->root, &e, 0, "{s:I, s:s, s:b, s?s}", "request_seq",
                           &out->request_seq, "command", &out->command, "success", &ok, "message",
                           &message) < 0) {
            snprintf(why, why_len, "response: %s", e.text);
            cb_dap_clear(out);
            return -1;
        }
        out->success = ok != 0;
        return 0;
    }
    if (strcmp(type, "event") == 0) {
        out->kind = CB_DAP_EVENT;
        if (len > CB_DAP_EVENT_MAX) return s_no(out, why, why_len, "event over its size limit");
        if (json_unpack_ex(out->root, &e, 0, "{s:s}", "event", &out->event) < 0)
            return s_no(out, why, why_len, "event without a string \"event\"");
        return 0;
    }
    /* a request (DAP's reverse requests: runInTerminal, startDebugging) or
     * anything else: the kernel takes none from the sandbox */
    return s_no(out, why, why_len, "only responses and events are accepted from the sandbox");
}

json_int_t cb_dap_thread(const cb_dap_msg_t *m) {
    json_t *t = json_object_get(m->body, "threadId");
    return json_is_integer(t) ? json_integer_value(t) : -1;
}
