/*
 * artifacts_limits.h - bounds and defaults of the artifact collector.
 *
 * The numbers a flag can change (defaults and ceilings of the per-file,
 * per-cell and file-count limits) live in isolate/cb_limits.h with the other
 * option defaults, where the flag table reads them.  The DEFAULT_* values are what
 * cb_artifacts_limits_default() hands out; the CEIL_* values clamp whatever
 * a caller configures, so no flag can make one collect unbounded.  Sizes are
 * in bytes.
 */
#ifndef CB_ARTIFACTS_LIMITS_H
#define CB_ARTIFACTS_LIMITS_H

#include "isolate/cb_limits.h" /* the defaults and ceilings users can set by flag */

/* ---- defaults (flags of cellblock-kernel may override) ---------------- */
#define CB_ARTIFACTS_DEFAULT_MAX_FILE_BYTES ((size_t) CB_DEFAULT_ARTIFACT_FILE_MB << 20)
#define CB_ARTIFACTS_DEFAULT_MAX_CELL_BYTES ((size_t) CB_DEFAULT_ARTIFACT_CELL_MB << 20)
#define CB_ARTIFACTS_DEFAULT_MAX_FILES      CB_DEFAULT_ARTIFACT_FILES
#define CB_ARTIFACTS_DEFAULT_MAX_DEPTH      8     /* directory levels below the workdir */
#define CB_ARTIFACTS_DEFAULT_MAX_ENTRIES    10000 /* directory entries looked at per scan */

/* ---- hard ceilings on configured values ------------------------------ */
#define CB_ARTIFACTS_CEIL_FILE_BYTES ((size_t) CB_OPT_MAX_ARTIFACT_FILE_MB << 20) /* clamp */
#define CB_ARTIFACTS_CEIL_CELL_BYTES ((size_t) CB_OPT_MAX_ARTIFACT_CELL_MB << 20) /* clamp */
#define CB_ARTIFACTS_CEIL_FILES      CB_OPT_MAX_ARTIFACT_FILES                    /* clamp */
#define CB_ARTIFACTS_CEIL_DEPTH      64      /* max_depth is clamped to this */
#define CB_ARTIFACTS_CEIL_ENTRIES    1000000 /* max_entries is clamped to this */

/* ---- internal bounds ------------------------------------------------- */
#define CB_ARTIFACTS_READ_BUDGET_FACTOR 2    /* bytes read per cell <= this * max_cell_bytes */
#define CB_ARTIFACTS_ENCODE_FACTOR      2    /* encoded payload <= this * file size (+ slack) */
#define CB_ARTIFACTS_ENCODE_SLACK       64   /* ... so tiny files (e.g. "1") still fit */
#define CB_ARTIFACTS_NOTICE_MAX_ITEMS   50   /* skipped items listed in one notice */
#define CB_ARTIFACTS_LINE_MAX           1024 /* one description / notice line, truncated beyond */
/* A .json larger than this is sent as text/plain: a parsed tree costs up to
 * ~30x its text (a file of "[{},{},...]"), and the kernel's memory per
 * session is bounded. */
#define CB_ARTIFACTS_JSON_PARSE_MAX  (256u << 10)
#define CB_ARTIFACTS_SNIFF_SVG_BYTES 4096 /* "<svg" must appear within this prefix */
#define CB_ARTIFACTS_SHA256_BYTES    32   /* crypto_hash_sha256_BYTES, for struct sizing */
#define CB_ARTIFACTS_SHA256_HEX      65   /* 64 hex digits and NUL */
#define CB_ARTIFACTS_SIZE_STR        32   /* "1023.9 GiB" and friends */
#define CB_ARTIFACTS_DIR_INITIAL     64   /* initial capacity of a directory listing */
#define CB_ARTIFACTS_OPENAT2_RETRIES 8    /* openat2 EAGAIN (rename race) retries */

#endif
