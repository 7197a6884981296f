/*
 * artifacts_mime.h - what kind of artifact a file is, and whether its bytes
 * agree.
 *
 * The extension picks a candidate kind (and the --artifacts mode filters it);
 * the content then has to agree: image magic bytes are sniffed so a file
 * named .png that is not a PNG is never labelled image/png, text must be
 * valid UTF-8.  Also: cheap width/height from PNG and GIF headers, and the
 * exact length a byte string takes once escaped as a JSON string (so the
 * collector can bound the message it builds before building it).
 * Pure functions on memory: no I/O, no allocation.
 */
#ifndef CB_ARTIFACTS_MIME_H
#define CB_ARTIFACTS_MIME_H

#include "artifacts/artifacts.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    CB_ARTIFACTS_KIND_NONE = 0, /* not collected (type filtered by mode) */
    CB_ARTIFACTS_KIND_PNG,      /* image/png, base64 */
    CB_ARTIFACTS_KIND_JPEG,     /* image/jpeg, base64 */
    CB_ARTIFACTS_KIND_GIF,      /* image/gif, base64 */
    CB_ARTIFACTS_KIND_WEBP,     /* image/webp, base64 */
    CB_ARTIFACTS_KIND_SVG,      /* image/svg+xml, text */
    CB_ARTIFACTS_KIND_PDF,      /* application/pdf, base64 */
    CB_ARTIFACTS_KIND_CSV,      /* text/csv, text */
    CB_ARTIFACTS_KIND_TSV,      /* text/tab-separated-values, text */
    CB_ARTIFACTS_KIND_JSON,     /* application/json, parsed value (else text/plain) */
    CB_ARTIFACTS_KIND_HTML,     /* text/html, text */
    CB_ARTIFACTS_KIND_MARKDOWN, /* text/markdown, text */
    CB_ARTIFACTS_KIND_TEXT,     /* text/plain, text */
    CB_ARTIFACTS_KIND_BINARY,   /* application/octet-stream, base64 */
} cb_artifacts_kind_t;

/* Kind for a file name (last path component, case-insensitive extension)
 * under mode/binary; NONE when such files are not collected. */
cb_artifacts_kind_t cb_artifacts_mime_from_name(const char *name, cb_artifacts_mode_t mode,
                                                bool binary);
/* The mime type string of kind (static storage). */
const char *cb_artifacts_mime_type(cb_artifacts_kind_t kind);
/* True for PNG, JPEG, GIF, WEBP (base64 raster images). */
bool cb_artifacts_mime_is_raster(cb_artifacts_kind_t kind);
/* True for the kinds whose content is sent as text. */
bool cb_artifacts_mime_is_text(cb_artifacts_kind_t kind);
/* The raster kind buf[0..len) really is by its magic bytes, or NONE. */
cb_artifacts_kind_t cb_artifacts_mime_sniff_raster(const uint8_t *buf, size_t len);
/* True if buf looks like a PDF ("%PDF-" at the start). */
bool cb_artifacts_mime_sniff_pdf(const uint8_t *buf, size_t len);
/* True if the (UTF-8) buf has "<svg" within its first CB_ARTIFACTS_SNIFF_SVG_BYTES. */
bool cb_artifacts_mime_sniff_svg(const uint8_t *buf, size_t len);
/* Width and height from a PNG IHDR or GIF logical screen. 0 ok, -1 not readable. */
int cb_artifacts_mime_image_size(cb_artifacts_kind_t kind, const uint8_t *buf, size_t len,
                                 uint32_t *w, uint32_t *h);
/* True if buf[0..len) is entirely well-formed UTF-8 (isolate/names.c's
 * strict decoder: no overlongs, surrogates or code points past U+10FFFF). */
bool cb_artifacts_mime_utf8_valid(const uint8_t *buf, size_t len);
/* Bytes buf[0..len) take inside a JSON string as jansson dumps it (without the
 * quotes), saturating at SIZE_MAX. */
size_t cb_artifacts_mime_json_escaped_len(const uint8_t *buf, size_t len);

#endif
