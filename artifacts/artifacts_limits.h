/*
 * artifacts_limits.h - bounds and defaults of the artifact collector.
 *
 * Kept apart from isolate/limits.h (which the lead owns) so the artifacts
 * module can tune its own numbers.  The DEFAULT_* values are what
 * cb_artifacts_limits_default() hands out; the CEIL_* values clamp whatever
 * a caller configures, so no flag can make one collect unbounded.  Sizes are
 * in bytes.
 */
#ifndef CB_ARTIFACTS_LIMITS_H
#define CB_ARTIFACTS_LIMITS_H

/* ---- defaults (flags of cellblock-kernel may override) ---------------- */
#define CB_ARTIFACTS_DEFAULT_MAX_FILE_BYTES (10u << 20) /* one file */
#define CB_ARTIFACTS_DEFAULT_MAX_CELL_BYTES (25u << 20) /* file bytes sent per cell */
#define CB_ARTIFACTS_DEFAULT_MAX_FILES      50          /* bundles sent per cell */
#define CB_ARTIFACTS_DEFAULT_MAX_DEPTH      8           /* directory levels below the workdir */
#define CB_ARTIFACTS_DEFAULT_MAX_ENTRIES    10000       /* directory entries looked at per scan */

/* ---- hard ceilings on configured values ------------------------------ */
#define CB_ARTIFACTS_CEIL_FILE_BYTES (256u << 20) /* max_file_bytes is clamped to this */
#define CB_ARTIFACTS_CEIL_CELL_BYTES (512u << 20) /* max_cell_bytes is clamped to this */
#define CB_ARTIFACTS_CEIL_FILES      10000        /* max_files is clamped to this */
#define CB_ARTIFACTS_CEIL_DEPTH      64           /* max_depth is clamped to this */
#define CB_ARTIFACTS_CEIL_ENTRIES    1000000      /* max_entries is clamped to this */

/* ---- internal bounds ------------------------------------------------- */
#define CB_ARTIFACTS_READ_BUDGET_FACTOR 2    /* bytes read per cell <= this * max_cell_bytes */
#define CB_ARTIFACTS_ENCODE_FACTOR      2    /* encoded payload <= this * file size (+ slack) */
#define CB_ARTIFACTS_ENCODE_SLACK       64   /* ... so tiny files (e.g. "1") still fit */
#define CB_ARTIFACTS_NOTICE_MAX_ITEMS   50   /* skipped items listed in one notice */
#define CB_ARTIFACTS_LINE_MAX           1024 /* one description / notice line, truncated beyond */
/* A .json larger than this is sent as text/plain: a parsed tree costs ~20x its text. */
#define CB_ARTIFACTS_JSON_PARSE_MAX  (2u << 20)
#define CB_ARTIFACTS_SNIFF_SVG_BYTES 4096 /* "<svg" must appear within this prefix */
#define CB_ARTIFACTS_SHA256_BYTES    32   /* crypto_hash_sha256_BYTES, for struct sizing */
#define CB_ARTIFACTS_SHA256_HEX      65   /* 64 hex digits and NUL */
#define CB_ARTIFACTS_SIZE_STR        32   /* "1023.9 GiB" and friends */
#define CB_ARTIFACTS_DIR_INITIAL     64   /* initial capacity of a directory listing */
#define CB_ARTIFACTS_OPENAT2_RETRIES 8    /* openat2 EAGAIN (rename race) retries */

#endif
