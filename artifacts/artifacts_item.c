/*
 * artifacts_item.c - one item of the walk: unchanged (skipped without being
 * opened), refused by a limit (noticed), or read, hashed and, when new or
 * changed, encoded as the display_data bundle of its type (base64 for
 * images, PDF and binary; text as text; small JSON parsed).
 */
#include "artifacts/artifacts_mime.h"
#include "artifacts/artifacts_run.h"
#include "isolate/cb_limits.h"
#include "isolate/log.h"
#include "isolate/names.h"
#include "isolate/util.h"

#include <errno.h>
#include <sodium.h>
#include <string.h>

static bool s_same_time(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The key that lets an unchanged file be skipped without opening it. */
static bool s_same_key(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
           a->st_size == b->st_size && s_same_time(&a->st_mtim, &b->st_mtim) &&
           s_same_time(&a->st_ctim, &b->st_ctim);
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
            cb_artifacts_line(why, "named as %s but its bytes are not an image",
                              cb_artifacts_mime_type(*kind));
    } else if (k == CB_ARTIFACTS_KIND_PDF) {
        if (!cb_artifacts_mime_sniff_pdf(buf, len)) {
            bad = "content_mismatch";
            cb_artifacts_line(why, "named as a PDF but does not start with %%PDF-");
        }
    } else if (cb_artifacts_mime_is_text(k)) {
        if (!cb_artifacts_mime_utf8_valid(buf, len)) {
            bad = "not_utf8";
            cb_artifacts_line(why, "not valid UTF-8 text");
        } else if (cb_artifacts_mime_json_escaped_len(buf, len) > s_encode_bound(len)) {
            bad = "encoding";
            cb_artifacts_line(why, "too many control characters to send as text");
        } else if (k == CB_ARTIFACTS_KIND_SVG && !cb_artifacts_mime_sniff_svg(buf, len)) {
            bad = "content_mismatch";
            cb_artifacts_line(why, "named as SVG but has no <svg element near the start");
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
static s_build_t s_bundle(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                          cb_artifacts_kind_t kind, const uint8_t *buf, size_t len,
                          const uint8_t sha[CB_ARTIFACTS_SHA256_BYTES]) {
    const char *reason = NULL;
    char why[CB_ARTIFACTS_LINE_MAX];
    json_auto_t *value = NULL;
    s_build_t b = s_encode(c->self, &kind, buf, len, &value, &reason, why);
    if (b == S_REJECTED)
        return cb_artifacts_skip_record(c, it, reason, why) < 0 ? S_FATAL : S_REJECTED;
    if (b != S_BUILT) return b;

    const char *mime = cb_artifacts_mime_type(kind);
    char hex[CB_ARTIFACTS_SHA256_HEX], size_str[CB_ARTIFACTS_SIZE_STR], desc[CB_ARTIFACTS_LINE_MAX];
    sodium_bin2hex(hex, sizeof hex, sha, CB_ARTIFACTS_SHA256_BYTES);
    cb_artifacts_fmt_size(len, size_str);
    bool escaped = false;
    cb_autofree char *path = cb_artifacts_meta_path(it->path, &escaped);
    cb_autofree char *shown = cb_names_escape_dup(it->path);
    if (path == NULL || shown == NULL) return S_FATAL;
    cb_artifacts_line(desc, "[artifact] %s (%s, %s)", shown, size_str, mime);

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
    if (bundle == NULL || cb_artifacts_emit(c, bundle) < 0) return S_FATAL;
    LOG_D("artifact %s: %zu bytes as %s", shown, len, mime);
    return S_BUILT;
}

/* ---- one item ---------------------------------------------------------- */

/* A regular file found by the walk.  0 ok, -1 fatal. */
int cb_artifacts_file(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                      const cb_artifacts_seen_t *old) {
    const cb_artifacts_limits_t *lim = &c->self->limits;
    cb_artifacts_kind_t kind = cb_artifacts_mime_from_name(it->path, lim->mode, lim->binary);
    if (kind == CB_ARTIFACTS_KIND_NONE) return 0; /* not a type we collect: no state either */
    /* unchanged; or a baseline file copied up or chmod'ed with the same
     * size and mtime: still the host's file */
    if (old &&
        (s_same_key(&old->st, &it->st) || (old->baseline && old->st.st_size == it->st.st_size &&
                                           s_same_time(&old->st.st_mtim, &it->st.st_mtim)))) {
        if (cb_artifacts_record(c, it->path, &it->st, old->sent, old->sha) < 0) return -1;
        c->next[c->n_next - 1].baseline = old->baseline;
        return 0;
    }

    char why[CB_ARTIFACTS_LINE_MAX], a[CB_ARTIFACTS_SIZE_STR], b[CB_ARTIFACTS_SIZE_STR];
    uint64_t size = (uint64_t) it->st.st_size;
    cb_artifacts_fmt_size(size, a);
    if (it->st.st_nlink > 1) {
        cb_artifacts_line(why, "has %ju hard links; only files with a single link are returned",
                          (uintmax_t) it->st.st_nlink);
        return cb_artifacts_skip_record(c, it, "hard_link", why);
    }
    if (size > lim->max_file_bytes) {
        cb_artifacts_fmt_size(lim->max_file_bytes, b);
        cb_artifacts_line(why, "%s, larger than the per-file limit of %s", a, b);
        return cb_artifacts_skip_record(c, it, "file_too_large", why);
    }
    if (c->files_sent >= lim->max_files) {
        cb_artifacts_line(why, "the cell already returned %zu files (the per-cell limit)",
                          c->files_sent);
        return cb_artifacts_skip_record(c, it, "cell_file_limit", why);
    }
    if (size > lim->max_cell_bytes - c->bytes_sent) { /* bytes_sent <= max_cell_bytes */
        cb_artifacts_fmt_size(lim->max_cell_bytes, b);
        cb_artifacts_line(why, "%s would pass the per-cell limit of %s", a, b);
        return cb_artifacts_skip_record(c, it, "cell_byte_limit", why);
    }
    if (size > c->read_budget - c->bytes_read) { /* bytes_read <= read_budget */
        cb_artifacts_line(why,
                          "not examined: this cell already read %zu bytes; it is checked next cell",
                          c->bytes_read);
        return cb_artifacts_skip_retry(c, it, old, "read_budget", why);
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
        return cb_artifacts_skip_retry(c, it, old, "changed_while_read",
                                       "changed while being read; it is checked again next cell");
    case CB_ARTIFACTS_FS_READ_SYMLINK:
        return cb_artifacts_skip_record(c, it, "symlink",
                                        "became a symbolic link; links are not followed");
    case CB_ARTIFACTS_FS_READ_NOT_REGULAR:
        return cb_artifacts_skip_record(c, it, "not_regular",
                                        "became something other than a regular file");
    case CB_ARTIFACTS_FS_READ_LINKED:
        return cb_artifacts_skip_record(c, it, "hard_link", "has several hard links; not returned");
    case CB_ARTIFACTS_FS_READ_TOO_LARGE:
        return cb_artifacts_skip_retry(c, it, old, "changed_while_read",
                                       "grew past the per-file limit while read");
    case CB_ARTIFACTS_FS_READ_ERROR:
        if (err == ENOMEM) return -1;
        cb_artifacts_line(why, "cannot be read: %s", strerror(err));
        return cb_artifacts_skip_record(c, it, "unreadable", why);
    }
    c->bytes_read += len;

    uint8_t sha[CB_ARTIFACTS_SHA256_BYTES];
    crypto_hash_sha256(sha, buf, len);
    if (old && old->sent && (uint64_t) old->st.st_size == size &&
        s_same_time(&old->st.st_mtim, &it->st.st_mtim) && memcmp(old->sha, sha, sizeof sha) == 0)
        return cb_artifacts_record(c, it->path, &it->st, true, sha); /* only ctime/inode moved */

    s_build_t b2 = s_bundle(c, it, kind, buf, len, sha);
    if (b2 == S_FATAL) return -1;
    if (b2 == S_REJECTED) return 0; /* noticed and remembered by s_bundle */
    c->files_sent++;
    c->bytes_sent += len;
    return cb_artifacts_record(c, it->path, &it->st, true, sha);
}

/* Anything else the walk reported.  0 ok, -1 fatal. */
int cb_artifacts_other(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                       const cb_artifacts_seen_t *old) {
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
            cb_artifacts_line(why, "symbolic link; links are not followed");
        } else {
            reason = "not_regular";
            cb_artifacts_line(why, "not a regular file (%s)",
                              S_ISFIFO(it->st.st_mode)                             ? "fifo"
                              : S_ISSOCK(it->st.st_mode)                           ? "socket"
                              : S_ISCHR(it->st.st_mode) || S_ISBLK(it->st.st_mode) ? "device"
                                                                                   : "special");
        }
        break;
    case CB_ARTIFACTS_FS_TOO_DEEP:
        reason = "too_deep";
        cb_artifacts_line(why, "directory deeper than %u levels; not scanned", lim->max_depth);
        break;
    case CB_ARTIFACTS_FS_MOUNT:
        reason = "mount_point";
        cb_artifacts_line(why, "another filesystem is mounted here; not scanned");
        break;
    case CB_ARTIFACTS_FS_TOO_LONG:
        reason = "path_too_long";
        cb_artifacts_line(
            why, "contains names whose paths would exceed %d bytes; those were not scanned",
            CB_PATH_MAX);
        break;
    case CB_ARTIFACTS_FS_ERROR:
        reason = "unreadable";
        cb_artifacts_line(why, "cannot be examined: %s", strerror(it->err));
        break;
    case CB_ARTIFACTS_FS_FILE: return 0; /* not reached */
    }
    if (old && !old->sent && s_same_key(&old->st, &it->st))
        return cb_artifacts_record(c, it->path, &it->st, false, NULL); /* reported before */
    return cb_artifacts_skip_record(c, it, reason, why);
}
