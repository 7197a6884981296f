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

#include "artifacts/artifacts_run.h"
#include "isolate/log.h"
#include "isolate/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>

_Static_assert(CB_ARTIFACTS_SHA256_BYTES == crypto_hash_sha256_BYTES, "sha256 size");
_Static_assert(CB_ARTIFACTS_SHA256_HEX == crypto_hash_sha256_BYTES * 2 + 1, "sha256 hex size");

/* Hands one finished bundle (a new reference, stolen) out or keeps it. */
int cb_artifacts_emit(cb_artifacts_run_t *c, json_t *bundle) {
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

static void s_seen_free(cb_artifacts_seen_t *seen, size_t n) {
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
    return strcmp((const char *) key, ((const cb_artifacts_seen_t *) elem)->path);
}

static const cb_artifacts_seen_t *s_find(const cb_artifacts_t *self, const char *path) {
    if (self->n_seen == 0) return NULL;
    return bsearch(path, self->seen, self->n_seen, sizeof *self->seen, s_cmp_seen);
}

/* Appends a record to the next state.  0 ok, -1 out of memory. */
int cb_artifacts_record(cb_artifacts_run_t *c, const char *path, const struct stat *st, bool sent,
                        const uint8_t *sha) {
    if (c->n_next == c->cap_next) {
        size_t cap = c->cap_next ? c->cap_next : CB_ARTIFACTS_DIR_INITIAL, bytes;
        if (c->cap_next && __builtin_mul_overflow(cap, (size_t) 2, &cap)) return -1;
        if (__builtin_mul_overflow(cap, sizeof *c->next, &bytes)) return -1;
        cb_artifacts_seen_t *n = realloc(c->next, bytes);
        if (n == NULL) return -1;
        c->next = n;
        c->cap_next = cap;
    }
    cb_artifacts_seen_t *r = &c->next[c->n_next];
    memset(r, 0, sizeof *r);
    r->path = strdup(path);
    if (r->path == NULL) return -1;
    if (st) r->st = *st;
    r->sent = sent;
    if (sent) memcpy(r->sha, sha, sizeof r->sha);
    c->n_next++;
    return 0;
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
    cb_artifacts_run_t c = {.self = self};
    int rc = cb_artifacts_fs_walk(rootfd, lim->max_depth, lim->max_entries, &w);
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        rc = cb_artifacts_record(&c, w.items[i].path, &w.items[i].st, false, NULL);
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
    json_auto_t *shown = json_array();
    if (bundles == NULL || summary == NULL || skipped == NULL || shown == NULL) {
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
    cb_artifacts_run_t c = {
        .self = self,
        .rootfd = rootfd,
        .bundles = bundles,
        .emit = emit,
        .emit_ud = ud,
        .summary = summary,
        .skipped = skipped,
        .shown = shown,
    };
    if (__builtin_mul_overflow(lim->max_cell_bytes, (size_t) CB_ARTIFACTS_READ_BUDGET_FACTOR,
                               &c.read_budget))
        c.read_budget = SIZE_MAX;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        const cb_artifacts_fs_item_t *it = &w.items[i];
        const cb_artifacts_seen_t *old = s_find(self, it->path);
        rc = it->what == CB_ARTIFACTS_FS_FILE ? cb_artifacts_file(&c, it, old)
                                              : cb_artifacts_other(&c, it, old);
    }
    /* after a truncated baseline (a large notebook folder) it is said once */
    if (rc == 0 && w.truncated && !(self->baseline_truncated && self->scan_noticed)) {
        self->scan_noticed = true;
        char why[CB_ARTIFACTS_LINE_MAX];
        cb_artifacts_line(
            why,
            "the scan stopped after %zu directory entries (the limit); files beyond were not "
            "examined. Keep bulk data in a hidden directory (.name) or /tmp",
            w.entries);
        rc = cb_artifacts_skip(&c, ".", "scan_limit", why);
    }
    if (rc == 0) rc = cb_artifacts_notice_append(&c);
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
