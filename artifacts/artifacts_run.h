/*
 * artifacts_run.h - the collector's private state, shared by its three files.
 *
 * artifacts.c owns the collector and the remembered state and drives one
 * collect; artifacts_item.c decides, for one item of the walk, whether it is
 * sent, skipped or unchanged, and builds its bundle; artifacts_notice.c
 * formats sizes, escapes raw paths for display and builds the notice of what
 * was skipped.  Nothing outside artifacts/ includes this header.
 */
#ifndef CB_ARTIFACTS_RUN_H
#define CB_ARTIFACTS_RUN_H

#include "artifacts/artifacts.h"
#include "artifacts/artifacts_fs.h"
#include "artifacts/artifacts_limits.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* What a collect remembers of one path. */
typedef struct {
    char *path;                             /* raw relative path (owned) */
    struct stat st;                         /* lstat when last examined (zeroed if none) */
    bool sent;                              /* published; sha is of the bytes sent */
    bool baseline;                          /* there at the start, untouched since */
    uint8_t sha[CB_ARTIFACTS_SHA256_BYTES]; /* valid when sent */
} cb_artifacts_seen_t;

struct cb_artifacts {
    cb_artifacts_limits_t limits; /* clamped copy of the caller's limits */
    cb_artifacts_seen_t *seen;    /* what the last collect saw, sorted by path */
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
    json_t *shown;             /* ... and each one's path as shown (names.c escaping) */
    size_t n_skipped;          /* items skipped in all */
    size_t files_sent;         /* bundles built (without the notice) */
    size_t bytes_sent;         /* file bytes in them */
    size_t bytes_read;         /* file bytes read, sent or not */
    size_t read_budget;        /* bytes_read stops here */
    cb_artifacts_seen_t *next; /* the state that replaces self->seen */
    size_t n_next;             /* entries used */
    size_t cap_next;           /* entries allocated */
} cb_artifacts_run_t;

/* ---- artifacts.c --------------------------------------------------------- */

/* Hands one finished bundle (a new reference, stolen) out or keeps it.
 * 0 ok, -1 out of memory. */
int cb_artifacts_emit(cb_artifacts_run_t *c, json_t *bundle);
/* Appends a record to the next state (path copied; st and sha may be NULL).
 * 0 ok, -1 out of memory. */
int cb_artifacts_record(cb_artifacts_run_t *c, const char *path, const struct stat *st, bool sent,
                        const uint8_t *sha);

/* ---- artifacts_item.c ---------------------------------------------------- */

/* A regular file found by the walk (old: what was remembered, or NULL).
 * 0 ok, -1 fatal. */
int cb_artifacts_file(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                      const cb_artifacts_seen_t *old);
/* Anything else the walk reported.  0 ok, -1 fatal. */
int cb_artifacts_other(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                       const cb_artifacts_seen_t *old);

/* ---- artifacts_notice.c -------------------------------------------------- */

/* "512 B", "12.3 KiB", "1.0 GiB". */
void cb_artifacts_fmt_size(uint64_t n, char out[CB_ARTIFACTS_SIZE_STR]);
/* A JSON-safe copy of a raw path for metadata (see artifacts_notice.c); NULL
 * on out of memory. */
char *cb_artifacts_meta_path(const char *raw, bool *escaped);
/* printf into a CB_ARTIFACTS_LINE_MAX line, truncated on a UTF-8 boundary. */
void cb_artifacts_line(char out[CB_ARTIFACTS_LINE_MAX], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Adds one skipped item (reason a stable code, detail a human phrase) and
 * logs it.  0 ok, -1 out of memory. */
int cb_artifacts_skip(cb_artifacts_run_t *c, const char *path, const char *reason,
                      const char *detail);
/* Skips a file and remembers its lstat, so the same problem is not reported
 * again until the file changes. */
int cb_artifacts_skip_record(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                             const char *reason, const char *detail);
/* Skips a file for a reason that may pass next cell, keeping what was
 * remembered before (old, may be NULL) as it was. */
int cb_artifacts_skip_retry(cb_artifacts_run_t *c, const cb_artifacts_fs_item_t *it,
                            const cb_artifacts_seen_t *old, const char *reason, const char *detail);
/* Appends the notice bundle if anything was skipped.  0 ok, -1 out of memory. */
int cb_artifacts_notice_append(cb_artifacts_run_t *c);

#endif
