/*
 * test_debug_dap.c - DAP messages from the runner (kernel/debug_dap.c):
 * responses and events accepted with their shape, everything else refused
 * (requests, junk, wrong types, deep nesting, oversized events).
 */
#include "kernel/bounds.h"
#include "kernel/debug_dap.h"
#include "tap.h"

static int s_parse(const char *json, cb_dap_msg_t *m) {
    char why[256];
    int rc = cb_dap_parse((const uint8_t *) json, strlen(json), m, why, sizeof why);
    if (rc < 0) printf("#   refused: %s\n", why);
    return rc;
}

static void s_accepted(void) {
    cb_dap_msg_t m;
    TAP_EQ_INT(s_parse("{\"type\":\"response\",\"seq\":3,\"request_seq\":7,\"command\":\"next\","
                       "\"success\":true,\"body\":{}}",
                       &m),
               0, "a response");
    TAP_OK(m.kind == CB_DAP_RESPONSE && m.request_seq == 7 && m.success, "its fields");
    TAP_EQ_STR(m.command, "next", "its command");
    cb_dap_clear(&m);
    TAP_EQ_INT(s_parse("{\"type\":\"response\",\"request_seq\":1,\"command\":\"x\",\"success\":"
                       "false,\"message\":\"no\"}",
                       &m),
               0, "a failed response without a body");
    TAP_OK(!m.success && m.body == NULL, "success false, no body");
    cb_dap_clear(&m);
    TAP_EQ_INT(s_parse("{\"type\":\"event\",\"event\":\"stopped\",\"body\":{\"threadId\":1}}", &m),
               0, "an event");
    TAP_OK(m.kind == CB_DAP_EVENT && cb_dap_thread(&m) == 1, "its thread");
    TAP_EQ_STR(m.event, "stopped", "its name");
    cb_dap_clear(&m);
    TAP_EQ_INT(s_parse("{\"type\":\"event\",\"event\":\"initialized\"}", &m), 0,
               "an event without a body");
    TAP_EQ_INT(cb_dap_thread(&m), -1, "no thread");
    cb_dap_clear(&m);
}

static void s_refused(void) {
    static const char *const bad[] = {
        "{\"type\":\"request\",\"seq\":1,\"command\":\"runInTerminal\",\"arguments\":{}}",
        "{\"type\":\"response\",\"request_seq\":\"1\",\"command\":\"x\",\"success\":true}",
        "{\"type\":\"response\",\"request_seq\":1,\"command\":\"x\"}",
        "{\"type\":\"response\",\"request_seq\":1,\"command\":2,\"success\":true}",
        "{\"type\":\"response\",\"request_seq\":1,\"command\":\"x\",\"success\":true,\"body\":[]}",
        "{\"type\":\"response\",\"request_seq\":1,\"command\":\"x\",\"success\":true,"
        "\"message\":5}",
        "{\"type\":\"event\"}",
        "{\"type\":\"event\",\"event\":\"stopped\",\"body\":\"x\"}",
        "{\"type\":\"event\",\"event\":\"e\",\"seq\":\"1\"}",
        "{\"type\":\"event\",\"event\":\"e\",\"event\":\"f\"}",
        "{\"type\":1}",
        "[1,2]",
        "not json",
        "",
    };
    cb_dap_msg_t m;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TAP_EQ_INT(s_parse(bad[i], &m), -1, bad[i][0] ? bad[i] : "(empty)");
        TAP_OK(m.root == NULL, "nothing held");
    }
    size_t n = 2 * (CB_JSON_DEPTH_MAX + 2) + 64;
    char *deep = malloc(n);
    int off = snprintf(deep, n, "{\"type\":\"event\",\"event\":\"e\",\"body\":");
    for (int i = 0; i < CB_JSON_DEPTH_MAX + 1; i++)
        deep[off++] = '[';
    for (int i = 0; i < CB_JSON_DEPTH_MAX + 1; i++)
        deep[off++] = ']';
    deep[off++] = '}';
    deep[off] = '\0';
    TAP_EQ_INT(s_parse(deep, &m), -1, "nested deeper than CB_JSON_DEPTH_MAX");
    free(deep);
    size_t big = CB_DAP_EVENT_MAX + 64;
    char *ev = malloc(big + 64);
    off = snprintf(ev, big + 64, "{\"type\":\"event\",\"event\":\"output\",\"body\":{\"o\":\"");
    memset(ev + off, 'x', big - (size_t) off);
    off = (int) big;
    off += snprintf(ev + off, 64, "\"}}");
    TAP_EQ_INT(cb_dap_parse((const uint8_t *) ev, (size_t) off, &m, (char[64]){0}, 64), -1,
               "an event over CB_DAP_EVENT_MAX");
    free(ev);
}

int main(void) {
    s_accepted();
    s_refused();
    TAP_DONE();
}
