/*
 * artifacts.h - files a cell wrote, turned into display_data bundles.
 *
 * After each cell the kernel hands cb_artifacts_collect() a directory fd of
 * the sandbox's working directory.  The collector walks it (bounded depth and
 * entry count, hidden names skipped, links never followed, only regular files
 * read, sizes taken from fstat and never exceeded), remembers what it has
 * already sent, and returns the new or changed files as Jupyter display_data
 * contents: images/pdf/unknown binary as base64, text as text, JSON parsed.
 * Whatever it skips because of a limit or an abuse is listed in a text/plain
 * notice bundle, never dropped silently.  See docs/ARTIFACTS.md.
 *
 * Not thread-safe: one collector per kernel, called from the kernel's loop.
 */
#ifndef CB_ARTIFACTS_H
#define CB_ARTIFACTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum {
    CB_ARTIFACTS_NONE,   /* collect nothing */
    CB_ARTIFACTS_IMAGES, /* png, jpeg, gif, webp, svg only */
    CB_ARTIFACTS_ALL,    /* every known type (and unknown ones if .binary) */
} cb_artifacts_mode_t;

typedef struct {
    cb_artifacts_mode_t mode; /* what to collect */
    size_t max_file_bytes;    /* larger files are skipped with a notice */
    size_t max_cell_bytes;    /* file bytes sent per collect */
    size_t max_files;         /* bundles (not counting the notice) per collect */
    unsigned max_depth;       /* directory levels below the root that are scanned */
    size_t max_entries;       /* directory entries examined per collect */
    bool binary;              /* ALL mode: unknown types as application/octet-stream */
} cb_artifacts_limits_t;

typedef struct cb_artifacts cb_artifacts_t;

/* Fills *out with the defaults of artifacts_limits.h (mode ALL, binary off). */
void cb_artifacts_limits_default(cb_artifacts_limits_t *out);
/* Parses "none", "images" or "all". 0 ok, -1 unknown (and *out untouched). */
int cb_artifacts_parse_mode(const char *s, cb_artifacts_mode_t *out);

/* Copies *limits (NULL: defaults), clamping each to the CEIL_* of
 * artifacts_limits.h.  NULL on out of memory. */
cb_artifacts_t *cb_artifacts_new(const cb_artifacts_limits_t *limits);
/* Frees the collector and its memory of seen files; idempotent, nulls *self_p. */
void cb_artifacts_destroy(cb_artifacts_t **self_p);
/* Forgets every file seen so far (a new sandbox starts empty). */
void cb_artifacts_reset(cb_artifacts_t *self);
/*
 * Forgets what was seen, then scans dirfd (borrowed, as for collect) and
 * takes everything found as the baseline: nothing is read, and what is there
 * now is never returned unless a cell changes it.  Called when a sandbox's
 * working directory is known and no cell has run yet: with --workdir-source
 * the host folder's files are the baseline, not artifacts.  A baseline file
 * whose size and mtime are unchanged counts as unchanged even if its inode
 * or ctime moved (an overlay copies a file up on a chmod or an open for
 * writing).  The scan has collect's bounds; when it stops at max_entries,
 * that is said once, by the first collect, not after every cell.
 * 0 ok, -1 out of memory or an unreadable dirfd (logged; the state is then
 * empty, as after reset).
 */
int cb_artifacts_baseline(cb_artifacts_t *self, int dirfd);

/*
 * Scans dirfd (borrowed; may be an O_PATH|O_DIRECTORY fd) and returns a NEW
 * reference: a JSON array of display_data contents, each
 *   {"data": {<mime>: ..., "text/plain": "..."}, "metadata": {...}},
 * sorted by path, followed by at most one text/plain notice bundle listing what
 * was skipped and why.  A cell that changed nothing gets an empty array.
 *
 * If summary_out is not NULL, *summary_out receives a NEW reference: an array
 * of {"path","size","sha256","mime"} for the files returned, for the
 * execute_reply metadata.  On a fatal error (bad dirfd, out of memory) the
 * error is logged, NULL is returned and *summary_out is NULL; what was seen is
 * unchanged.
 */
json_t *cb_artifacts_collect(cb_artifacts_t *self, int dirfd, json_t **summary_out);
/* The same, but each bundle is handed to emit (borrowed, valid during the
 * call) as soon as it is built and then freed, so a collect holds at most
 * one file's bundle at a time; the array returned is then empty. */
typedef void (*cb_artifacts_emit_fn)(void *ud, const json_t *bundle);
json_t *cb_artifacts_collect_each(cb_artifacts_t *self, int dirfd, cb_artifacts_emit_fn emit,
                                  void *ud, json_t **summary_out);

/* ---- test hooks (tests/unit/test_artifacts.c) -------------------------- */

typedef enum {
    CB_ARTIFACTS_HOOK_BEFORE_OPEN, /* after the scan's lstat, before the file is opened */
    CB_ARTIFACTS_HOOK_BEFORE_READ, /* after open and fstat, before the first read */
} cb_artifacts_hook_stage_t;
/* Called with the raw relative path (borrowed) at each stage of reading a file;
 * lets a test change the file at the worst moment.  NULL removes it. */
typedef void (*cb_artifacts_hook_fn)(cb_artifacts_hook_stage_t stage, const char *path, void *arg);
void cb_artifacts_set_test_hook(cb_artifacts_t *self, cb_artifacts_hook_fn fn, void *arg);
/* Forces (true) or releases (false) the per-component O_NOFOLLOW fallback used
 * where openat2(2) is unavailable, for every collector in the process. */
void cb_artifacts_force_fallback(bool on);

#endif
