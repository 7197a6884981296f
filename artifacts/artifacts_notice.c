/*
 * artifacts_notice.c - the collector's words: sizes, raw paths escaped for
 * metadata and for display, and the one text/plain notice per collect that
 * lists what was skipped and why (each item also logged once).
 */
#include "artifacts/artifacts_mime.h"
#include "artifacts/artifacts_run.h"
#include "isolate/log.h"
#include "isolate/names.h"
#include "isolate/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings ----------------------------------------------------------- */

/* "512 B", "12.3 KiB", "1.0 GiB". */
void cb_artifacts_fmt_size(uint64_t n, char out[CB_ARTIFACTS_SIZE_STR]) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        (void) snprintf(out, CB_ARTIFACTS_SIZE_STR, "%" PRIu64 " B", n);
        return;
    }
    double v = (double) n / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    (void) snprintf(out, CB_ARTIFACTS_SIZE_STR, "%.1f %s", v, units[u]);
}

/*
 * A JSON-safe copy of a raw path for metadata: a valid UTF-8 path is kept
 * exactly; otherwise each ill-formed byte becomes \xNN and, so the result
 * stays unambiguous, each backslash \\ (and *escaped is set).  What is
 * shown to people goes through names.c's escaping instead.  NULL on out of
 * memory.
 */
char *cb_artifacts_meta_path(const char *raw, bool *escaped) {
    const uint8_t *p = (const uint8_t *) raw;
    size_t n = strlen(raw), cap;
    bool valid = cb_artifacts_mime_utf8_valid(p, n);
    *escaped = !valid;
    if (__builtin_mul_overflow(n, (size_t) 4, &cap) || __builtin_add_overflow(cap, 1, &cap))
        return NULL;
    char *out = malloc(cap), *o = out;
    if (out == NULL) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = cb_names_utf8_seq(p + i, n - i, NULL);
        if (k == 0) {
            static const char hex[] = "0123456789abcdef";
            *o++ = '\\';
            *o++ = 'x';
            *o++ = hex[p[i] >> 4];
            *o++ = hex[p[i] & 0xf];
            i++;
        } else if (!valid && p[i] == '\\') {
            *o++ = '\\';
            *o++ = '\\';
            i++;
        } else {
            memcpy(o, p + i, k);
            o += k;
            i += k;
        }
    }
    *o = '\0';
    return out;
}

/* Cuts s at the first ill-formed UTF-8 sequence (what snprintf truncation
 * can leave at the end). */
static void s_utf8_trim(char *s) {
    const uint8_t *p = (const uint8_t *) s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = cb_names_utf8_seq((const uint8_t *) p + i, n - i, NULL);
        if (k == 0) {
            s[i] = '\0';
            return;
        }
        i += k;
    }
}

/* printf into a CB_ARTIFACTS_LINE_MAX line, truncated on a UTF-8 boundary. */
void cb_artifacts_line(char out[CB_ARTIFACTS_LINE_MAX], const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(out, CB_ARTIFACTS_LINE_MAX, fmt, ap);
    va_end(ap);
    if (r < 0) out[0] = '\0';
    if (r >= CB_ARTIFACTS_LINE_MAX) s_utf8_trim(out);
}

/* ---- notices ----------------------------------------------------------- */

/* Adds one skipped item (reason is a stable code, detail a human phrase) and
 * logs it.  0 ok, -1 out of memory. */
int cb_artifacts_skip(cb_artifacts_run_t *c, const char *path, const char *reason,
                      const char *detail) {
    c->n_skipped++;
    if (json_array_size(c->skipped) >= CB_ARTIFACTS_NOTICE_MAX_ITEMS) return 0; /* counted */
    cb_autofree char *shown = cb_names_escape_dup(path);
    if (shown == NULL) return -1;
    LOG_W("artifact %s skipped: %s (%s)", shown, reason, detail);
    bool escaped = false;
    cb_autofree char *meta = cb_artifacts_meta_path(path, &escaped);
    if (meta == NULL) return -1;
    char line[CB_ARTIFACTS_LINE_MAX];
    cb_artifacts_line(line, "%s", detail);
    json_t *item = json_pack("{s:s, s:s, s:s}", "path", meta, "reason", reason, "detail", line);
    if (item == NULL) return -1;
    if (escaped && json_object_set_new(item, "path_escaped", json_true()) < 0) {
        json_decref(item);
        return -1;
    }
    if (json_array_append_new(c->shown, json_string(shown)) < 0) {
        json_decref(item);
        return -1;
    }
    return json_array_append_new(c->skipped, item);
}

/* Skips a file and remembers its lstat so the same problem is not reported
 * again until the file changes. */
int cb_artifacts_skip_record(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                             const char *reason, const char *detail) {
    if (cb_artifacts_skip(c, it->path, reason, detail) < 0) return -1;
    return cb_artifacts_record(c, it->path, &it->st, false, NULL);
}

/* Skips a file for a reason that may pass (read budget, a change while
 * reading): whatever was remembered before is kept as it was, so the file is
 * examined again next cell and compared with what was really sent. */
int cb_artifacts_skip_retry(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                            const cb_artifacts_seen_t *old, const char *reason,
                            const char *detail) {
    if (cb_artifacts_skip(c, it->path, reason, detail) < 0) return -1;
    return old ? cb_artifacts_record(c, old->path, &old->st, old->sent, old->sha) : 0;
}

/* Appends the notice bundle if anything was skipped.  0 ok, -1 out of memory. */
int cb_artifacts_notice_append(cb_artifacts_run_t *c) {
    if (c->n_skipped == 0) return 0;
    size_t listed = json_array_size(c->skipped);
    char line[CB_ARTIFACTS_LINE_MAX];
    cb_artifacts_line(line, "[artifacts] %zu item%s not returned:", c->n_skipped,
                      c->n_skipped == 1 ? "" : "s");
    /* Bounded: (NOTICE_MAX_ITEMS + 2) lines of at most LINE_MAX bytes. */
    size_t cap = (CB_ARTIFACTS_NOTICE_MAX_ITEMS + 2) * (CB_ARTIFACTS_LINE_MAX + 1) + 1;
    cb_autofree char *text = malloc(cap);
    if (text == NULL) return -1;
    size_t used = 0;
    int r = snprintf(text, cap, "%s", line);
    if (r < 0 || (size_t) r >= cap) return -1;
    used = (size_t) r;
    for (size_t i = 0; i < listed; i++) {
        json_t *item = json_array_get(c->skipped, i);
        const char *shown = json_string_value(json_array_get(c->shown, i));
        const char *detail = json_string_value(json_object_get(item, "detail"));
        if (shown == NULL) return -1;
        cb_artifacts_line(line, "\n  %s: %s", shown, detail ? detail : "");
        r = snprintf(text + used, cap - used, "%s", line);
        if (r < 0 || (size_t) r >= cap - used) return -1;
        used += (size_t) r;
    }
    if (c->n_skipped > listed) {
        LOG_W("artifacts: %zu more items skipped", c->n_skipped - listed);
        cb_artifacts_line(line, "\n  ... and %zu more (see the kernel log)", c->n_skipped - listed);
        r = snprintf(text + used, cap - used, "%s", line);
        if (r < 0 || (size_t) r >= cap - used) return -1;
    }
    json_t *b = json_pack("{s:{s:s}, s:{s:{s:{s:O, s:I}}}}", "data", "text/plain", text, "metadata",
                          "cellblock", "artifact_notice", "skipped", c->skipped, "total",
                          (json_int_t) c->n_skipped);
    if (b == NULL) return -1;
    return cb_artifacts_emit(c, b);
}
