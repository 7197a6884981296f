/*
 * history.c - cells remembered for history_request (see history.h).
 */
#include "kernel/history.h"

#include "kernel/bounds.h"
#include "kernel/stream.h"

#include <fnmatch.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define S_FIRST_CAP 64 /* entries allocated at first */

typedef struct {
    int line;     /* execution count */
    char *input;  /* code */
    char *output; /* text/plain of the result, or NULL */
    size_t bytes; /* of input and output */
} s_entry_t;

struct cb_history {
    s_entry_t *e;  /* oldest first */
    size_t n, cap; /* used / allocated */
    size_t bytes;  /* held in all entries */
};

cb_history_t *cb_history_new(void) { return calloc(1, sizeof(cb_history_t)); }

static void s_drop_oldest(cb_history_t *h) {
    h->bytes -= h->e[0].bytes;
    free(h->e[0].input);
    free(h->e[0].output);
    memmove(h->e, h->e + 1, (h->n - 1) * sizeof *h->e);
    h->n--;
}

void cb_history_destroy(cb_history_t **self_p) {
    cb_history_t *h = *self_p;
    if (h == NULL) return;
    while (h->n > 0)
        s_drop_oldest(h);
    free(h->e);
    free(h);
    *self_p = NULL;
}

void cb_history_add(cb_history_t *h, int line, const char *code) {
    size_t len = strlen(code);
    while (h->n > 0 && (h->n >= CB_HISTORY_MAX_ENTRIES || h->bytes + len > CB_HISTORY_MAX_BYTES))
        s_drop_oldest(h);
    if (len > CB_HISTORY_MAX_BYTES) return; /* one cell larger than the whole history */
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : S_FIRST_CAP;
        s_entry_t *n = realloc(h->e, cap * sizeof *n);
        if (n == NULL) return;
        h->e = n;
        h->cap = cap;
    }
    char *in = strdup(code);
    if (in == NULL) return;
    h->e[h->n++] = (s_entry_t){line, in, NULL, len};
    h->bytes += len;
}

void cb_history_set_output(cb_history_t *h, int line, const char *text, size_t len) {
    if (h->n == 0 || h->e[h->n - 1].line != line || h->e[h->n - 1].output != NULL) return;
    len = cb_utf8_prefix(text, len, CB_HISTORY_OUTPUT_MAX); /* whole characters only */
    if (h->bytes + len > CB_HISTORY_MAX_BYTES) return;
    char *out = strndup(text, len);
    if (out == NULL) return;
    h->e[h->n - 1].output = out;
    h->e[h->n - 1].bytes += len;
    h->bytes += len;
}

static json_t *s_entry(const s_entry_t *e, bool output) {
    if (output) return json_pack("[i, i, [s, s?]]", 1, e->line, e->input, e->output);
    return json_pack("[i, i, s]", 1, e->line, e->input);
}

static void s_append(json_t *list, const s_entry_t *e, bool output) {
    json_t *v = s_entry(e, output);
    if (v) json_array_append_new(list, v);
}

json_t *cb_history_query(const cb_history_t *h, const json_t *c) {
    const char *access = json_string_value(json_object_get(c, "hist_access_type"));
    bool output = json_is_true(json_object_get(c, "output"));
    json_t *list = json_array();
    if (list == NULL || access == NULL) return list;
    json_int_t n = json_integer_value(json_object_get(c, "n"));
    if (strcmp(access, "tail") == 0) {
        size_t start = (n > 0 && (size_t) n < h->n) ? h->n - (size_t) n : 0;
        for (size_t i = start; i < h->n; i++)
            s_append(list, &h->e[i], output);
    } else if (strcmp(access, "range") == 0) {
        json_int_t start = json_integer_value(json_object_get(c, "start"));
        json_t *stopv = json_object_get(c, "stop");
        json_int_t stop = json_is_integer(stopv) ? json_integer_value(stopv) : INT32_MAX;
        for (size_t i = 0; i < h->n; i++)
            if (h->e[i].line >= start && h->e[i].line < stop) s_append(list, &h->e[i], output);
    } else if (strcmp(access, "search") == 0) {
        const char *pat = json_string_value(json_object_get(c, "pattern"));
        bool unique = json_is_true(json_object_get(c, "unique"));
        size_t found = 0;
        size_t *pick = calloc(h->n ? h->n : 1, sizeof *pick); /* newest first */
        json_t *seen = unique ? json_object() : NULL;         /* inputs taken, hashed */
        if (pick == NULL || (unique && seen == NULL)) {
            free(pick);
            json_decref(seen);
            return list;
        }
        for (size_t i = h->n; i-- > 0;) {
            if (pat && fnmatch(pat, h->e[i].input, 0) != 0) continue;
            if (unique) {
                if (json_object_get(seen, h->e[i].input) != NULL) continue;
                json_object_set_new(seen, h->e[i].input, json_true());
            }
            pick[found++] = i;
            if (n > 0 && (json_int_t) found >= n) break;
        }
        for (size_t j = found; j-- > 0;)
            s_append(list, &h->e[pick[j]], output);
        free(pick);
        json_decref(seen);
    }
    return list;
}
