/*
 * artifacts.c - the artifact collector: which files a cell created or
 * changed, and the display_data bundles that carry them (see artifacts.h).
 *
 * One collect is: walk the working directory (artifacts_fs.c, bounded and
 * link-free), then go through what was found in path order.  A file whose
 * lstat (device, inode, size, mtime, ctime) matches what we remember is
 * skipped without being opened.  Otherwise it is checked against the limits
 * (per file, per cell count and bytes, and a read budget so rewriting the
 * metadata of many big files cannot make us read gigabytes), read, hashed,
 * and compared with what we sent last time: it is sent again only if its
 * size, mtime or sha256 differ.  Everything skipped is listed in one notice
 * bundle at the end and remembered (unless it may succeed next time), so the
 * same problem is reported once, not every cell.
 *
 * The remembered state is replaced as a whole at the end of a collect, so a
 * fatal error leaves it as it was, and it only holds paths of the latest
 * walk, so it is bounded by max_entries.
 */
#include "artifacts/artifacts.h"

#include "artifacts/artifacts_fs.h"
#include "artifacts/artifacts_limits.h"
#include "artifacts/artifacts_mime.h"
#include "isolate/cb_limits.h"
#include "isolate/log.h"
#include "isolate/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Static_assert(CB_ARTIFACTS_SHA256_BYTES == crypto_hash_sha256_BYTES, "sha256 size");
_Static_assert(CB_ARTIFACTS_SHA256_HEX == crypto_hash_sha256_BYTES * 2 + 1, "sha256 hex size");

typedef struct {
    char *path;                             /* raw relative path (owned) */
    struct stat st;                         /* lstat when last examined (zeroed if none) */
    bool sent;                              /* published; sha is of the bytes sent */
    bool baseline;                          /* there at the start, untouched since */
    uint8_t sha[CB_ARTIFACTS_SHA256_BYTES]; /* valid when sent */
} s_seen_t;

struct cb_artifacts {
    cb_artifacts_limits_t limits; /* clamped copy of the caller's limits */
    s_seen_t *seen;               /* what the last collect saw, sorted by path */
    size_t n_seen;                /* entries in seen */
    bool baseline_truncated;      /* the baseline scan stopped at max_entries */
    bool scan_noticed;            /* ... and a collect has said so once */
    cb_artifacts_hook_fn hook;    /* test hook, or NULL */
    void *hook_arg;               /* its argument */
};

/* State of one collect. */
typedef struct {
    cb_artifacts_t *self;      /* the collector */
    int rootfd;                /* readable fd of the working directory */
    json_t *bundles;           /* display_data contents (borrowed), unless emit is set */
    cb_artifacts_emit_fn emit; /* hands out each bundle as soon as it is built, or NULL */
    void *emit_ud;             /* for emit */
    json_t *summary;           /* execute_reply summary (borrowed) */
    json_t *skipped;           /* notice items, at most CB_ARTIFACTS_NOTICE_MAX_ITEMS */
    size_t n_skipped;          /* items skipped in all */
    size_t files_sent;         /* bundles built (without the notice) */
    size_t bytes_sent;         /* file bytes in them */
    size_t bytes_read;         /* file bytes read, sent or not */
    size_t read_budget;        /* bytes_read stops here */
    s_seen_t *next;            /* the state that replaces self->seen */
    size_t n_next;             /* entries used */
    size_t cap_next;           /* entries allocated */
} s_collect_t;

/* Hands one finished bundle (a new reference, stolen) out or keeps it. */
static int s_emit(s_collect_t *c, json_t *bundle) {
    if (c->emit == NULL) return json_array_append_new(c->bundles, bundle);
    c->emit(c->emit_ud, bundle);
    json_decref(bundle);
    return 0;
}

/* ---- limits and lifecycle --------------------------------------------- */

void cb_artifacts_limits_default(cb_artifacts_limits_t *out) {
    *out = (cb_artifacts_limits_t){
        .mode = CB_ARTIFACTS_ALL,
        .max_file_bytes = CB_ARTIFACTS_DEFAULT_MAX_FILE_BYTES,
        .max_cell_bytes = CB_ARTIFACTS_DEFAULT_MAX_CELL_BYTES,
        .max_files = CB_ARTIFACTS_DEFAULT_MAX_FILES,
        .max_depth = CB_ARTIFACTS_DEFAULT_MAX_DEPTH,
        .max_entries = CB_ARTIFACTS_DEFAULT_MAX_ENTRIES,
        .binary = false,
    };
}

int cb_artifacts_parse_mode(const char *s, cb_artifacts_mode_t *out) {
    if (s == NULL) return -1;
    if (strcmp(s, "none") == 0) {
        *out = CB_ARTIFACTS_NONE;
    } else if (strcmp(s, "images") == 0) {
        *out = CB_ARTIFACTS_IMAGES;
    } else if (strcmp(s, "all") == 0) {
        *out = CB_ARTIFACTS_ALL;
    } else {
        return -1;
    }
    return 0;
}

#define S_CLAMP(field, ceil)                                                                       \
    do {                                                                                           \
        if (self->limits.field > (ceil)) {                                                         \
            LOG_W("artifacts: " #field " %ju clamped to %ju", (uintmax_t) self->limits.field,      \
                  (uintmax_t) (ceil));                                                             \
            self->limits.field = (ceil);                                                           \
        }                                                                                          \
    } while (0)

cb_artifacts_t *cb_artifacts_new(const cb_artifacts_limits_t *limits) {
    if (sodium_init() < 0) {
        LOG_E("sodium_init failed");
        return NULL;
    }
    cb_artifacts_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        LOG_E("artifacts: out of memory");
        return NULL;
    }
    if (limits)
        self->limits = *limits;
    else
        cb_artifacts_limits_default(&self->limits);
    S_CLAMP(max_file_bytes, CB_ARTIFACTS_CEIL_FILE_BYTES);
    S_CLAMP(max_cell_bytes, CB_ARTIFACTS_CEIL_CELL_BYTES);
    S_CLAMP(max_files, CB_ARTIFACTS_CEIL_FILES);
    S_CLAMP(max_depth, CB_ARTIFACTS_CEIL_DEPTH);
    S_CLAMP(max_entries, CB_ARTIFACTS_CEIL_ENTRIES);
    return self;
}

static void s_seen_free(s_seen_t *seen, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(seen[i].path);
    free(seen);
}

void cb_artifacts_reset(cb_artifacts_t *self) {
    s_seen_free(self->seen, self->n_seen);
    self->seen = NULL;
    self->n_seen = 0;
    self->baseline_truncated = self->scan_noticed = false;
}

void cb_artifacts_destroy(cb_artifacts_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_artifacts_reset(*self_p);
    free(*self_p);
    *self_p = NULL;
}

void cb_artifacts_set_test_hook(cb_artifacts_t *self, cb_artifacts_hook_fn fn, void *arg) {
    self->hook = fn;
    self->hook_arg = arg;
}

void cb_artifacts_force_fallback(bool on) { cb_artifacts_fs_force_fallback(on); }

/* ---- remembered state -------------------------------------------------- */

static int s_cmp_seen(const void *key, const void *elem) {
    return strcmp((const char *) key, ((const s_seen_t *) elem)->path);
}

static const s_seen_t *s_find(const cb_artifacts_t *self, const char *path) {
    if (self->n_seen == 0) return NULL;
    return bsearch(path, self->seen, self->n_seen, sizeof *self->seen, s_cmp_seen);
}

static bool s_same_time(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The key that lets an unchanged file be skipped without opening it. */
static bool s_same_key(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
           a->st_size == b->st_size && s_same_time(&a->st_mtim, &b->st_mtim) &&
           s_same_time(&a->st_ctim, &b->st_ctim);
}

/* Appends a record to the next state.  0 ok, -1 out of memory. */
static int s_record(s_collect_t *c, const char *path, const struct stat *st, bool sent,
                    const uint8_t *sha) {
    if (c->n_next == c->cap_next) {
        size_t cap = c->cap_next ? c->cap_next : CB_ARTIFACTS_DIR_INITIAL, bytes;
        if (c->cap_next && __builtin_mul_overflow(cap, (size_t) 2, &cap)) return -1;
        if (__builtin_mul_overflow(cap, sizeof *c->next, &bytes)) return -1;
        s_seen_t *n = realloc(c->next, bytes);
        if (n == NULL) return -1;
        c->next = n;
        c->cap_next = cap;
    }
    s_seen_t *r = &c->next[c->n_next];
    memset(r, 0, sizeof *r);
    r->path = strdup(path);
    if (r->path == NULL) return -1;
    if (st) r->st = *st;
    r->sent = sent;
    if (sent) memcpy(r->sha, sha, sizeof r->sha);
    c->n_next++;
    return 0;
}

/* ---- strings ----------------------------------------------------------- */

/* "512 B", "12.3 KiB", "1.0 GiB". */
static void s_fmt_size(uint64_t n, char out[CB_ARTIFACTS_SIZE_STR]) {
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
 * A JSON-safe copy of a raw path.  For metadata (line false) a valid UTF-8
 * path is kept exactly; otherwise each ill-formed byte becomes \xNN and, so
 * the result stays unambiguous, each backslash \\ (and *escaped is set).  For
 * a display line (line true) control characters are also written \xNN so
 * the line stays one line.  NULL on out of memory.
 */
static char *s_escape(const char *raw, bool line, bool *escaped) {
    const uint8_t *p = (const uint8_t *) raw;
    size_t n = strlen(raw), cap;
    bool valid = cb_artifacts_mime_utf8_valid(p, n);
    if (escaped) *escaped = !valid;
    if (__builtin_mul_overflow(n, (size_t) 4, &cap) || __builtin_add_overflow(cap, 1, &cap))
        return NULL;
    char *out = malloc(cap), *o = out;
    if (out == NULL) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = cb_artifacts_mime_utf8_seq(p + i, n - i);
        if (k == 0 || (line && k == 1 && (p[i] < 0x20 || p[i] == 0x7f))) {
            static const char hex[] = "0123456789abcdef";
            *o++ = '\\';
            *o++ = 'x';
            *o++ = hex[p[i] >> 4];
            *o++ = hex[p[i] & 0xf];
            i++;
        } else if (!valid && !line && p[i] == '\\') {
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
        size_t k = cb_artifacts_mime_utf8_seq(p + i, n - i);
        if (k == 0) {
            s[i] = '\0';
            return;
        }
        i += k;
    }
}

/* printf into a CB_ARTIFACTS_LINE_MAX line, truncated on a UTF-8 boundary. */
static void s_line(char out[CB_ARTIFACTS_LINE_MAX], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_line(char out[CB_ARTIFACTS_LINE_MAX], const char *fmt, ...) {
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
static int s_skip(s_collect_t *c, const char *path, const char *reason, const char *detail) {
    c->n_skipped++;
    if (json_array_size(c->skipped) >= CB_ARTIFACTS_NOTICE_MAX_ITEMS) return 0; /* counted */
    cb_autofree char *shown = s_escape(path, true, NULL);
    if (shown == NULL) return -1;
    LOG_W("artifact %s skipped: %s (%s)", shown, reason, detail);
    bool escaped = false;
    cb_autofree char *meta = s_escape(path, false, &escaped);
    if (meta == NULL) return -1;
    char line[CB_ARTIFACTS_LINE_MAX];
    s_line(line, "%s", detail);
    json_t *item = json_pack("{s:s, s:s, s:s}", "path", meta, "reason", reason, "detail", line);
    if (item == NULL) return -1;
    if (escaped && json_object_set_new(item, "path_escaped", json_true()) < 0) {
        json_decref(item);
        return -1;
    }
    return json_array_append_new(c->skipped, item);
}

/* Skips a file and remembers its lstat so the same problem is not reported
 * again until the file changes. */
static int s_skip_record(s_collect_t *c, const cb_artifacts_fs_item_t *it, const char *reason,
                         const char *detail) {
    if (s_skip(c, it->path, reason, detail) < 0) return -1;
    return s_record(c, it->path, &it->st, false, NULL);
}

/* Skips a file for a reason that may pass (read budget, a change while
 * reading): whatever was remembered before is kept as it was, so the file is
 * examined again next cell and compared with what was really sent. */
static int s_skip_retry(s_collect_t *c, const cb_artifacts_fs_item_t *it, const s_seen_t *old,
                        const char *reason, const char *detail) {
    if (s_skip(c, it->path, reason, detail) < 0) return -1;
    return old ? s_record(c, old->path, &old->st, old->sent, old->sha) : 0;
}

/* Appends the notice bundle if anything was skipped.  0 ok, -1 out of memory. */
static int s_append_notice(s_collect_t *c) {
    if (c->n_skipped == 0) return 0;
    size_t listed = json_array_size(c->skipped);
    char line[CB_ARTIFACTS_LINE_MAX];
    s_line(line, "[artifacts] %zu item%s not returned:", c->n_skipped,
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
        const char *path = json_string_value(json_object_get(item, "path"));
        const char *detail = json_string_value(json_object_get(item, "detail"));
        cb_autofree char *shown = s_escape(path ? path : "", true, NULL);
        if (shown == NULL) return -1;
        s_line(line, "\n  %s: %s", shown, detail ? detail : "");
        r = snprintf(text + used, cap - used, "%s", line);
        if (r < 0 || (size_t) r >= cap - used) return -1;
        used += (size_t) r;
    }
    if (c->n_skipped > listed) {
        LOG_W("artifacts: %zu more items skipped", c->n_skipped - listed);
        s_line(line, "\n  ... and %zu more (see the kernel log)", c->n_skipped - listed);
        r = snprintf(text + used, cap - used, "%s", line);
        if (r < 0 || (size_t) r >= cap - used) return -1;
    }
    json_t *b = json_pack("{s:{s:s}, s:{s:{s:{s:O, s:I}}}}", "data", "text/plain", text, "metadata",
                          "cellblock", "artifact_notice", "skipped", c->skipped, "total",
                          (json_int_t) c->n_skipped);
    if (b == NULL) return -1;
    return s_emit(c, b);
}

/* ---- bundles ----------------------------------------------------------- */

/* Base64 (original alphabet, padded) of buf as a new JSON string, or NULL. */
static json_t *s_base64(const uint8_t *buf, size_t len) {
    size_t groups = len / 3 + (len % 3 != 0), b64_len, cap;
    if (__builtin_mul_overflow(groups, (size_t) 4, &b64_len) ||
        __builtin_add_overflow(b64_len, (size_t) 1, &cap))
        return NULL;
    if (cap != sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL)) return NULL;
    cb_autofree char *out = malloc(cap);
    if (out == NULL) return NULL;
    if (sodium_bin2base64(out, cap, buf, len, sodium_base64_VARIANT_ORIGINAL) == NULL) return NULL;
    return json_stringn_nocheck(out, b64_len);
}

typedef enum {
    S_BUILT,    /* bundle appended */
    S_REJECTED, /* content does not fit its type: skipped with a notice */
    S_FATAL,    /* out of memory */
} s_build_t;

/* Largest encoded payload allowed for a file of size bytes. */
static size_t s_encode_bound(size_t size) {
    size_t b;
    if (__builtin_mul_overflow(size, (size_t) CB_ARTIFACTS_ENCODE_FACTOR, &b) ||
        __builtin_add_overflow(b, (size_t) CB_ARTIFACTS_ENCODE_SLACK, &b))
        return SIZE_MAX;
    return b;
}

/*
 * Decides the final type of a file from its name's kind and its bytes, and
 * builds the value to send (new reference in *value).  A file whose bytes
 * disagree with its name is sent as application/octet-stream when binary
 * output is enabled, else rejected with *why set.
 */
static s_build_t s_encode(const cb_artifacts_t *self, cb_artifacts_kind_t *kind, const uint8_t *buf,
                          size_t len, json_t **value, const char **reason,
                          char why[CB_ARTIFACTS_LINE_MAX]) {
    bool can_binary = self->limits.mode == CB_ARTIFACTS_ALL && self->limits.binary;
    cb_artifacts_kind_t k = *kind;
    const char *bad = NULL;
    *value = NULL;
    if (cb_artifacts_mime_is_raster(k)) {
        cb_artifacts_kind_t sniffed = cb_artifacts_mime_sniff_raster(buf, len);
        if (sniffed == CB_ARTIFACTS_KIND_NONE)
            bad = "content_mismatch";
        else
            k = sniffed; /* a JPEG saved as .png is sent as the JPEG it is */
        if (bad)
            s_line(why, "named as %s but its bytes are not an image",
                   cb_artifacts_mime_type(*kind));
    } else if (k == CB_ARTIFACTS_KIND_PDF) {
        if (!cb_artifacts_mime_sniff_pdf(buf, len)) {
            bad = "content_mismatch";
            s_line(why, "named as a PDF but does not start with %%PDF-");
        }
    } else if (cb_artifacts_mime_is_text(k)) {
        if (!cb_artifacts_mime_utf8_valid(buf, len)) {
            bad = "not_utf8";
            s_line(why, "not valid UTF-8 text");
        } else if (cb_artifacts_mime_json_escaped_len(buf, len) > s_encode_bound(len)) {
            bad = "encoding";
            s_line(why, "too many control characters to send as text");
        } else if (k == CB_ARTIFACTS_KIND_SVG && !cb_artifacts_mime_sniff_svg(buf, len)) {
            bad = "content_mismatch";
            s_line(why, "named as SVG but has no <svg element near the start");
        }
    }
    if (bad) {
        if (!can_binary) {
            *reason = bad;
            return S_REJECTED;
        }
        k = CB_ARTIFACTS_KIND_BINARY;
    }
    if (k == CB_ARTIFACTS_KIND_JSON) {
        /* A parsed tree can take ~20x its text in memory: only small files. */
        json_t *v = len <= CB_ARTIFACTS_JSON_PARSE_MAX
                        ? json_loadb((const char *) buf, len, JSON_DECODE_ANY, NULL)
                        : NULL;
        if (v && json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) <= s_encode_bound(len)) {
            *kind = k;
            *value = v;
            return S_BUILT;
        }
        json_decref(v);
        k = CB_ARTIFACTS_KIND_TEXT; /* not JSON after all: its text (valid UTF-8) */
    }
    *kind = k;
    if (cb_artifacts_mime_is_text(k))
        *value = json_stringn_nocheck((const char *) buf, len);
    else
        *value = s_base64(buf, len);
    return *value ? S_BUILT : S_FATAL;
}

/* Builds and appends the bundle and summary entry of a file read into buf. */
static s_build_t s_bundle(s_collect_t *c, const cb_artifacts_fs_item_t *it,
                          cb_artifacts_kind_t kind, const uint8_t *buf, size_t len,
                          const uint8_t sha[CB_ARTIFACTS_SHA256_BYTES]) {
    const char *reason = NULL;
    char why[CB_ARTIFACTS_LINE_MAX];
    json_auto_t *value = NULL;
    s_build_t b = s_encode(c->self, &kind, buf, len, &value, &reason, why);
    if (b == S_REJECTED) return s_skip_record(c, it, reason, why) < 0 ? S_FATAL : S_REJECTED;
    if (b != S_BUILT) return b;

    const char *mime = cb_artifacts_mime_type(kind);
    char hex[CB_ARTIFACTS_SHA256_HEX], size_str[CB_ARTIFACTS_SIZE_STR], desc[CB_ARTIFACTS_LINE_MAX];
    sodium_bin2hex(hex, sizeof hex, sha, CB_ARTIFACTS_SHA256_BYTES);
    s_fmt_size(len, size_str);
    bool escaped = false;
    cb_autofree char *path = s_escape(it->path, false, &escaped);
    cb_autofree char *shown = s_escape(it->path, true, NULL);
    if (path == NULL || shown == NULL) return S_FATAL;
    s_line(desc, "[artifact] %s (%s, %s)", shown, size_str, mime);

    /* text/plain carries the description, except for a text/plain file, whose
     * content it carries byte-exactly (the description is in the metadata). */
    json_auto_t *data = json_object();
    if (data == NULL || json_object_set(data, mime, value) < 0) return S_FATAL;
    if (kind != CB_ARTIFACTS_KIND_TEXT &&
        json_object_set_new(data, "text/plain", json_string(desc)) < 0)
        return S_FATAL;
    json_auto_t *art =
        json_pack("{s:s, s:I, s:s, s:s, s:s}", "path", path, "size", (json_int_t) len, "sha256",
                  hex, "mime", mime, "description", desc);
    if (art == NULL) return S_FATAL;
    json_auto_t *summary = json_pack("{s:s, s:I, s:s, s:s}", "path", path, "size", (json_int_t) len,
                                     "sha256", hex, "mime", mime);
    if (summary == NULL) return S_FATAL;
    if (escaped && (json_object_set_new(art, "path_escaped", json_true()) < 0 ||
                    json_object_set_new(summary, "path_escaped", json_true()) < 0))
        return S_FATAL;
    json_auto_t *meta = json_pack("{s:{s:O}}", "cellblock", "artifact", art);
    if (meta == NULL) return S_FATAL;
    uint32_t w, h;
    if (cb_artifacts_mime_image_size(kind, buf, len, &w, &h) == 0) {
        json_t *dims = json_pack("{s:I, s:I}", "width", (json_int_t) w, "height", (json_int_t) h);
        if (dims == NULL || json_object_set_new(meta, mime, dims) < 0) return S_FATAL;
    }
    if (json_array_append(c->summary, summary) < 0) return S_FATAL;
    json_t *bundle = json_pack("{s:O, s:O}", "data", data, "metadata", meta);
    /* the file's bytes are no longer needed once encoded: publish at once, so
     * at most one bundle is held at a time */
    if (bundle == NULL || s_emit(c, bundle) < 0) return S_FATAL;
    LOG_D("artifact %s: %zu bytes as %s", shown, len, mime);
    return S_BUILT;
}

/* ---- one item ---------------------------------------------------------- */

/* A regular file found by the walk.  0 ok, -1 fatal. */
static int s_file(s_collect_t *c, const cb_artifacts_fs_item_t *it, const s_seen_t *old) {
    const cb_artifacts_limits_t *lim = &c->self->limits;
    cb_artifacts_kind_t kind = cb_artifacts_mime_from_name(it->path, lim->mode, lim->binary);
    if (kind == CB_ARTIFACTS_KIND_NONE) return 0; /* not a type we collect: no state either */
    /* unchanged; or a baseline file copied up or chmod'ed with the same
     * size and mtime: still the host's file */
    if (old &&
        (s_same_key(&old->st, &it->st) || (old->baseline && old->st.st_size == it->st.st_size &&
                                           s_same_time(&old->st.st_mtim, &it->st.st_mtim)))) {
        if (s_record(c, it->path, &it->st, old->sent, old->sha) < 0) return -1;
        c->next[c->n_next - 1].baseline = old->baseline;
        return 0;
    }

    char why[CB_ARTIFACTS_LINE_MAX], a[CB_ARTIFACTS_SIZE_STR], b[CB_ARTIFACTS_SIZE_STR];
    uint64_t size = (uint64_t) it->st.st_size;
    s_fmt_size(size, a);
    if (it->st.st_nlink > 1) {
        s_line(why, "has %ju hard links; only files with a single link are returned",
               (uintmax_t) it->st.st_nlink);
        return s_skip_record(c, it, "hard_link", why);
    }
    if (size > lim->max_file_bytes) {
        s_fmt_size(lim->max_file_bytes, b);
        s_line(why, "%s, larger than the per-file limit of %s", a, b);
        return s_skip_record(c, it, "file_too_large", why);
    }
    if (c->files_sent >= lim->max_files) {
        s_line(why, "the cell already returned %zu files (the per-cell limit)", c->files_sent);
        return s_skip_record(c, it, "cell_file_limit", why);
    }
    if (size > lim->max_cell_bytes - c->bytes_sent) { /* bytes_sent <= max_cell_bytes */
        s_fmt_size(lim->max_cell_bytes, b);
        s_line(why, "%s would pass the per-cell limit of %s", a, b);
        return s_skip_record(c, it, "cell_byte_limit", why);
    }
    if (size > c->read_budget - c->bytes_read) { /* bytes_read <= read_budget */
        s_line(why, "not examined: this cell already read %zu bytes; it is checked next cell",
               c->bytes_read);
        return s_skip_retry(c, it, old, "read_budget", why);
    }

    cb_autofree uint8_t *buf = NULL;
    size_t len = 0;
    int err = 0;
    cb_artifacts_fs_read_t r =
        cb_artifacts_fs_read(c->rootfd, it->path, &it->st, lim->max_file_bytes, c->self->hook,
                             c->self->hook_arg, &buf, &len, &err);
    switch (r) {
    case CB_ARTIFACTS_FS_READ_OK: break;
    case CB_ARTIFACTS_FS_READ_CHANGED:
        return s_skip_retry(c, it, old, "changed_while_read",
                            "changed while being read; it is checked again next cell");
    case CB_ARTIFACTS_FS_READ_SYMLINK:
        return s_skip_record(c, it, "symlink", "became a symbolic link; links are not followed");
    case CB_ARTIFACTS_FS_READ_NOT_REGULAR:
        return s_skip_record(c, it, "not_regular", "became something other than a regular file");
    case CB_ARTIFACTS_FS_READ_LINKED:
        return s_skip_record(c, it, "hard_link", "has several hard links; not returned");
    case CB_ARTIFACTS_FS_READ_TOO_LARGE:
        return s_skip_retry(c, it, old, "changed_while_read",
                            "grew past the per-file limit while read");
    case CB_ARTIFACTS_FS_READ_ERROR:
        if (err == ENOMEM) return -1;
        s_line(why, "cannot be read: %s", strerror(err));
        return s_skip_record(c, it, "unreadable", why);
    }
    c->bytes_read += len;

    uint8_t sha[CB_ARTIFACTS_SHA256_BYTES];
    crypto_hash_sha256(sha, buf, len);
    if (old && old->sent && (uint64_t) old->st.st_size == size &&
        s_same_time(&old->st.st_mtim, &it->st.st_mtim) && memcmp(old->sha, sha, sizeof sha) == 0)
        return s_record(c, it->path, &it->st, true, sha); /* only ctime/inode moved */

    s_build_t b2 = s_bundle(c, it, kind, buf, len, sha);
    if (b2 == S_FATAL) return -1;
    if (b2 == S_REJECTED) return 0; /* noticed and remembered by s_bundle */
    c->files_sent++;
    c->bytes_sent += len;
    return s_record(c, it->path, &it->st, true, sha);
}

/* Anything else the walk reported.  0 ok, -1 fatal. */
static int s_other(s_collect_t *c, const cb_artifacts_fs_item_t *it, const s_seen_t *old) {
    const cb_artifacts_limits_t *lim = &c->self->limits;
    char why[CB_ARTIFACTS_LINE_MAX];
    const char *reason = NULL;
    switch (it->what) {
    case CB_ARTIFACTS_FS_SYMLINK:
    case CB_ARTIFACTS_FS_SPECIAL:
        /* Only worth a notice where a file of that name would have been sent. */
        if (cb_artifacts_mime_from_name(it->path, lim->mode, lim->binary) == CB_ARTIFACTS_KIND_NONE)
            return 0;
        if (it->what == CB_ARTIFACTS_FS_SYMLINK) {
            reason = "symlink";
            s_line(why, "symbolic link; links are not followed");
        } else {
            reason = "not_regular";
            s_line(why, "not a regular file (%s)",
                   S_ISFIFO(it->st.st_mode)                             ? "fifo"
                   : S_ISSOCK(it->st.st_mode)                           ? "socket"
                   : S_ISCHR(it->st.st_mode) || S_ISBLK(it->st.st_mode) ? "device"
                                                                        : "special");
        }
        break;
    case CB_ARTIFACTS_FS_TOO_DEEP:
        reason = "too_deep";
        s_line(why, "directory deeper than %u levels; not scanned", lim->max_depth);
        break;
    case CB_ARTIFACTS_FS_MOUNT:
        reason = "mount_point";
        s_line(why, "another filesystem is mounted here; not scanned");
        break;
    case CB_ARTIFACTS_FS_TOO_LONG:
        reason = "path_too_long";
        s_line(why, "contains names whose paths would exceed %d bytes; those were not scanned",
               CB_PATH_MAX);
        break;
    case CB_ARTIFACTS_FS_ERROR:
        reason = "unreadable";
        s_line(why, "cannot be examined: %s", strerror(it->err));
        break;
    case CB_ARTIFACTS_FS_FILE: return 0; /* not reached */
    }
    if (old && !old->sent && s_same_key(&old->st, &it->st))
        return s_record(c, it->path, &it->st, false, NULL); /* reported before */
    return s_skip_record(c, it, reason, why);
}

/* ---- baseline ---------------------------------------------------------- */

int cb_artifacts_baseline(cb_artifacts_t *self, int dirfd) {
    cb_artifacts_reset(self);
    const cb_artifacts_limits_t *lim = &self->limits;
    if (lim->mode == CB_ARTIFACTS_NONE) return 0;
    cb_autofd int rootfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        PLOG_E("openat(%d, \".\", O_RDONLY|O_DIRECTORY)", dirfd);
        return -1;
    }
    cb_artifacts_fs_walk_t w;
    s_collect_t c = {.self = self};
    int rc = cb_artifacts_fs_walk(rootfd, lim->max_depth, lim->max_entries, &w);
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        rc = s_record(&c, w.items[i].path, &w.items[i].st, false, NULL);
        if (rc == 0) c.next[c.n_next - 1].baseline = true;
    }
    if (rc < 0) {
        LOG_E("artifacts: baseline scan failed");
        cb_artifacts_fs_walk_free(&w);
        s_seen_free(c.next, c.n_next);
        return -1;
    }
    self->seen = c.next; /* sorted: the walk's items are */
    self->n_seen = c.n_next;
    self->baseline_truncated = w.truncated;
    LOG_I("artifacts: baseline of %zu entries%s", c.n_next,
          w.truncated ? " (scan stopped at the entry limit)" : "");
    cb_artifacts_fs_walk_free(&w);
    return 0;
}

/* ---- collect ----------------------------------------------------------- */

json_t *cb_artifacts_collect(cb_artifacts_t *self, int dirfd, json_t **summary_out) {
    return cb_artifacts_collect_each(self, dirfd, NULL, NULL, summary_out);
}

json_t *cb_artifacts_collect_each(cb_artifacts_t *self, int dirfd, cb_artifacts_emit_fn emit,
                                  void *ud, json_t **summary_out) {
    if (summary_out) *summary_out = NULL;
    json_auto_t *bundles = json_array();
    json_auto_t *summary = json_array();
    json_auto_t *skipped = json_array();
    if (bundles == NULL || summary == NULL || skipped == NULL) {
        LOG_E("artifacts: out of memory");
        return NULL;
    }
    const cb_artifacts_limits_t *lim = &self->limits;
    if (lim->mode == CB_ARTIFACTS_NONE) {
        if (summary_out) *summary_out = json_incref(summary);
        return json_incref(bundles);
    }
    cb_autofd int rootfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        PLOG_E("openat(%d, \".\", O_RDONLY|O_DIRECTORY)", dirfd);
        return NULL;
    }
    cb_artifacts_fs_walk_t w;
    if (cb_artifacts_fs_walk(rootfd, lim->max_depth, lim->max_entries, &w) < 0) {
        cb_artifacts_fs_walk_free(&w);
        return NULL;
    }
    s_collect_t c = {
        .self = self,
        .rootfd = rootfd,
        .bundles = bundles,
        .emit = emit,
        .emit_ud = ud,
        .summary = summary,
        .skipped = skipped,
    };
    if (__builtin_mul_overflow(lim->max_cell_bytes, (size_t) CB_ARTIFACTS_READ_BUDGET_FACTOR,
                               &c.read_budget))
        c.read_budget = SIZE_MAX;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        const cb_artifacts_fs_item_t *it = &w.items[i];
        const s_seen_t *old = s_find(self, it->path);
        rc = it->what == CB_ARTIFACTS_FS_FILE ? s_file(&c, it, old) : s_other(&c, it, old);
    }
    /* after a truncated baseline (a large notebook folder) it is said once */
    if (rc == 0 && w.truncated && !(self->baseline_truncated && self->scan_noticed)) {
        self->scan_noticed = true;
        char why[CB_ARTIFACTS_LINE_MAX];
        s_line(why,
               "the scan stopped after %zu directory entries (the limit); files beyond were not "
               "examined. Keep bulk data in a hidden directory (.name) or /tmp",
               w.entries);
        rc = s_skip(&c, ".", "scan_limit", why);
    }
    if (rc == 0) rc = s_append_notice(&c);
    size_t entries = w.entries;
    cb_artifacts_fs_walk_free(&w);
    if (rc < 0) {
        LOG_E("artifacts: out of memory while collecting");
        s_seen_free(c.next, c.n_next);
        return NULL;
    }
    s_seen_free(self->seen, self->n_seen);
    self->seen = c.next;
    self->n_seen = c.n_next;
    LOG_D("artifacts: %zu sent (%zu bytes), %zu skipped, %zu entries scanned", c.files_sent,
          c.bytes_sent, c.n_skipped, entries);
    if (summary_out) *summary_out = json_incref(summary);
    return json_incref(bundles);
}
