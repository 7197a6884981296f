/*
 * test_history.c - history_request answers (tail, range, search with
 * unique and n, output) and the bounds: entries, bytes, and the part of a
 * sandbox-sent result that is kept.
 */
#include "kernel/bounds.h"
#include "kernel/history.h"
#include "tap.h"

static json_t *s_q(cb_history_t *h, const char *json) {
    json_t *c = json_loads(json, 0, NULL);
    json_t *r = cb_history_query(h, c);
    json_decref(c);
    return r;
}

int main(void) {
    cb_history_t *h = cb_history_new();
    cb_history_add(h, 1, "a = 1");
    cb_history_add(h, 2, "print(a)");
    cb_history_add(h, 3, "a = 1");
    cb_history_set_output(h, 3, "1", 1);
    json_t *r = s_q(h, "{\"hist_access_type\":\"tail\",\"n\":2}");
    TAP_EQ_INT(json_array_size(r), 2, "tail n=2");
    TAP_EQ_INT(json_integer_value(json_array_get(json_array_get(r, 0), 1)), 2, "tail starts at 2");
    json_decref(r);
    r = s_q(h, "{\"hist_access_type\":\"range\",\"start\":2,\"stop\":4,\"output\":true}");
    TAP_EQ_INT(json_array_size(r), 2, "range [2, 4)");
    json_t *last = json_array_get(json_array_get(r, 1), 2);
    TAP_OK(json_is_array(last) && strcmp(json_string_value(json_array_get(last, 1)), "1") == 0,
           "output=true gives [input, output]");
    json_decref(r);
    r = s_q(h, "{\"hist_access_type\":\"search\",\"pattern\":\"a*\",\"unique\":true}");
    TAP_EQ_INT(json_array_size(r), 1, "search unique drops the duplicate");
    TAP_EQ_INT(json_integer_value(json_array_get(json_array_get(r, 0), 1)), 3,
               "... keeping the newest");
    json_decref(r);
    r = s_q(h, "{\"hist_access_type\":\"search\",\"pattern\":\"*\",\"n\":1}");
    TAP_EQ_INT(json_array_size(r), 1, "search n=1");
    json_decref(r);
    r = s_q(h, "{\"hist_access_type\":\"bogus\"}");
    TAP_EQ_INT(json_array_size(r), 0, "unknown access type: empty");
    json_decref(r);

    /* a result from the sandbox is kept only in part, on a character boundary */
    size_t big = CB_HISTORY_OUTPUT_MAX * 4;
    char *out = malloc(big + 1);
    memset(out, 'x', big);
    out[CB_HISTORY_OUTPUT_MAX - 1] = '\xc3', out[CB_HISTORY_OUTPUT_MAX] = '\xa9';
    out[big] = '\0';
    cb_history_add(h, 4, "big");
    cb_history_set_output(h, 4, out, big);
    r = s_q(h, "{\"hist_access_type\":\"range\",\"start\":4,\"stop\":5,\"output\":true}");
    const char *kept =
        json_string_value(json_array_get(json_array_get(json_array_get(r, 0), 2), 1));
    TAP_OK(kept && strlen(kept) == CB_HISTORY_OUTPUT_MAX - 1,
           "output cut before the character that would cross the bound");
    json_decref(r);
    free(out);

    /* bounded in bytes: the oldest go */
    size_t cell = CB_HISTORY_MAX_BYTES / 4 + 1;
    char *code = malloc(cell + 1);
    memset(code, 'c', cell);
    code[cell] = '\0';
    for (int i = 0; i < 8; i++)
        cb_history_add(h, 10 + i, code);
    r = s_q(h, "{\"hist_access_type\":\"tail\",\"n\":100}");
    TAP_OK(json_array_size(r) <= 4, "history kept within CB_HISTORY_MAX_BYTES (%zu entries)",
           json_array_size(r));
    TAP_EQ_INT(json_integer_value(json_array_get(json_array_get(r, json_array_size(r) - 1), 1)), 17,
               "the newest is kept");
    json_decref(r);
    free(code);
    cb_history_destroy(&h);
    TAP_OK(h == NULL, "destroy nulls the pointer");
    TAP_DONE();
}
