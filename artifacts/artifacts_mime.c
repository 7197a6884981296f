/*
 * artifacts_mime.c - artifact kinds, magic-byte sniffing, UTF-8 checks
 * (see artifacts_mime.h).
 *
 * Everything here reads only the bytes it is given and trusts none of them:
 * lengths are checked before every header field is read.
 */
#include "artifacts/artifacts_mime.h"

#include "artifacts/artifacts_limits.h"
#include "isolate/names.h"

#include <string.h>
#include <strings.h>

typedef struct {
    const char *ext;          /* lower-case extension without the dot */
    cb_artifacts_kind_t kind; /* what it maps to */
} s_ext_t;

static const s_ext_t s_exts[] = {
    {"png", CB_ARTIFACTS_KIND_PNG},     {"jpg", CB_ARTIFACTS_KIND_JPEG},
    {"jpeg", CB_ARTIFACTS_KIND_JPEG},   {"gif", CB_ARTIFACTS_KIND_GIF},
    {"webp", CB_ARTIFACTS_KIND_WEBP},   {"svg", CB_ARTIFACTS_KIND_SVG},
    {"pdf", CB_ARTIFACTS_KIND_PDF},     {"csv", CB_ARTIFACTS_KIND_CSV},
    {"tsv", CB_ARTIFACTS_KIND_TSV},     {"json", CB_ARTIFACTS_KIND_JSON},
    {"html", CB_ARTIFACTS_KIND_HTML},   {"htm", CB_ARTIFACTS_KIND_HTML},
    {"md", CB_ARTIFACTS_KIND_MARKDOWN}, {"markdown", CB_ARTIFACTS_KIND_MARKDOWN},
    {"txt", CB_ARTIFACTS_KIND_TEXT},    {"log", CB_ARTIFACTS_KIND_TEXT},
};

static const uint8_t s_png_magic[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const uint8_t s_jpeg_magic[] = {0xff, 0xd8, 0xff};

enum {
    S_PNG_IHDR_OFF = 12,  /* "IHDR" chunk type */
    S_PNG_WIDTH_OFF = 16, /* big-endian u32 width, then height */
    S_PNG_HDR_LEN = 24,   /* bytes needed to read the size */
    S_GIF_MAGIC_LEN = 6,  /* "GIF87a" / "GIF89a" */
    S_GIF_HDR_LEN = 10,   /* magic + little-endian u16 width, height */
    S_WEBP_HDR_LEN = 12,  /* "RIFF" size "WEBP" */
    S_WEBP_TAG_OFF = 8,   /* where "WEBP" sits */
    S_JSON_ESC_SHORT = 2, /* \n, \", \\ ... */
    S_JSON_ESC_LONG = 6,  /* \u00XX */
};

cb_artifacts_kind_t cb_artifacts_mime_from_name(const char *name, cb_artifacts_mode_t mode,
                                                bool binary) {
    if (mode == CB_ARTIFACTS_NONE) return CB_ARTIFACTS_KIND_NONE;
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    const char *dot = strrchr(base, '.');
    cb_artifacts_kind_t kind = CB_ARTIFACTS_KIND_NONE;
    if (dot != NULL && dot != base) {
        for (size_t i = 0; i < sizeof s_exts / sizeof s_exts[0]; i++) {
            if (strcasecmp(dot + 1, s_exts[i].ext) == 0) {
                kind = s_exts[i].kind;
                break;
            }
        }
    }
    if (mode == CB_ARTIFACTS_IMAGES) {
        return (cb_artifacts_mime_is_raster(kind) || kind == CB_ARTIFACTS_KIND_SVG)
                   ? kind
                   : CB_ARTIFACTS_KIND_NONE;
    }
    if (kind == CB_ARTIFACTS_KIND_NONE && binary) return CB_ARTIFACTS_KIND_BINARY;
    return kind;
}

const char *cb_artifacts_mime_type(cb_artifacts_kind_t kind) {
    switch (kind) {
    case CB_ARTIFACTS_KIND_PNG: return "image/png";
    case CB_ARTIFACTS_KIND_JPEG: return "image/jpeg";
    case CB_ARTIFACTS_KIND_GIF: return "image/gif";
    case CB_ARTIFACTS_KIND_WEBP: return "image/webp";
    case CB_ARTIFACTS_KIND_SVG: return "image/svg+xml";
    case CB_ARTIFACTS_KIND_PDF: return "application/pdf";
    case CB_ARTIFACTS_KIND_CSV: return "text/csv";
    case CB_ARTIFACTS_KIND_TSV: return "text/tab-separated-values";
    case CB_ARTIFACTS_KIND_JSON: return "application/json";
    case CB_ARTIFACTS_KIND_HTML: return "text/html";
    case CB_ARTIFACTS_KIND_MARKDOWN: return "text/markdown";
    case CB_ARTIFACTS_KIND_TEXT: return "text/plain";
    case CB_ARTIFACTS_KIND_BINARY: return "application/octet-stream";
    case CB_ARTIFACTS_KIND_NONE: break;
    }
    return "application/octet-stream";
}

bool cb_artifacts_mime_is_raster(cb_artifacts_kind_t kind) {
    return kind == CB_ARTIFACTS_KIND_PNG || kind == CB_ARTIFACTS_KIND_JPEG ||
           kind == CB_ARTIFACTS_KIND_GIF || kind == CB_ARTIFACTS_KIND_WEBP;
}

bool cb_artifacts_mime_is_text(cb_artifacts_kind_t kind) {
    switch (kind) {
    case CB_ARTIFACTS_KIND_SVG:
    case CB_ARTIFACTS_KIND_CSV:
    case CB_ARTIFACTS_KIND_TSV:
    case CB_ARTIFACTS_KIND_JSON:
    case CB_ARTIFACTS_KIND_HTML:
    case CB_ARTIFACTS_KIND_MARKDOWN:
    case CB_ARTIFACTS_KIND_TEXT: return true;
    default: return false;
    }
}

cb_artifacts_kind_t cb_artifacts_mime_sniff_raster(const uint8_t *buf, size_t len) {
    if (len >= sizeof s_png_magic && memcmp(buf, s_png_magic, sizeof s_png_magic) == 0)
        return CB_ARTIFACTS_KIND_PNG;
    if (len >= sizeof s_jpeg_magic && memcmp(buf, s_jpeg_magic, sizeof s_jpeg_magic) == 0)
        return CB_ARTIFACTS_KIND_JPEG;
    if (len >= S_GIF_MAGIC_LEN && (memcmp(buf, "GIF87a", S_GIF_MAGIC_LEN) == 0 ||
                                   memcmp(buf, "GIF89a", S_GIF_MAGIC_LEN) == 0))
        return CB_ARTIFACTS_KIND_GIF;
    if (len >= S_WEBP_HDR_LEN && memcmp(buf, "RIFF", 4) == 0 &&
        memcmp(buf + S_WEBP_TAG_OFF, "WEBP", 4) == 0)
        return CB_ARTIFACTS_KIND_WEBP;
    return CB_ARTIFACTS_KIND_NONE;
}

bool cb_artifacts_mime_sniff_pdf(const uint8_t *buf, size_t len) {
    static const char magic[] = "%PDF-";
    return len >= sizeof magic - 1 && memcmp(buf, magic, sizeof magic - 1) == 0;
}

bool cb_artifacts_mime_sniff_svg(const uint8_t *buf, size_t len) {
    static const char tag[] = "<svg";
    size_t n = len < CB_ARTIFACTS_SNIFF_SVG_BYTES ? len : CB_ARTIFACTS_SNIFF_SVG_BYTES;
    return memmem(buf, n, tag, sizeof tag - 1) != NULL;
}

static uint32_t s_be32(const uint8_t *p) {
    return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) |
           (uint32_t) p[3];
}

int cb_artifacts_mime_image_size(cb_artifacts_kind_t kind, const uint8_t *buf, size_t len,
                                 uint32_t *w, uint32_t *h) {
    if (kind == CB_ARTIFACTS_KIND_PNG) {
        if (len < S_PNG_HDR_LEN || memcmp(buf + S_PNG_IHDR_OFF, "IHDR", 4) != 0) return -1;
        *w = s_be32(buf + S_PNG_WIDTH_OFF);
        *h = s_be32(buf + S_PNG_WIDTH_OFF + 4);
    } else if (kind == CB_ARTIFACTS_KIND_GIF) {
        if (len < S_GIF_HDR_LEN) return -1;
        *w = (uint32_t) buf[6] | ((uint32_t) buf[7] << 8);
        *h = (uint32_t) buf[8] | ((uint32_t) buf[9] << 8);
    } else {
        return -1;
    }
    /* PNG forbids 0 and values above 2^31-1; GIF 0 means "unknown". */
    if (*w == 0 || *h == 0 || *w > INT32_MAX || *h > INT32_MAX) return -1;
    return 0;
}

bool cb_artifacts_mime_utf8_valid(const uint8_t *buf, size_t len) {
    size_t i = 0;
    while (i < len) {
        if (buf[i] < 0x80) { /* fast path for ASCII runs */
            i++;
            continue;
        }
        size_t k = cb_names_utf8_seq(buf + i, len - i, NULL);
        if (k == 0) return false;
        i += k;
    }
    return true;
}

size_t cb_artifacts_mime_json_escaped_len(const uint8_t *buf, size_t len) {
    size_t total = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = buf[i];
        size_t add = 1;
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            add = S_JSON_ESC_SHORT;
        else if (c < 0x20)
            add = S_JSON_ESC_LONG;
        if (__builtin_add_overflow(total, add, &total)) return SIZE_MAX;
    }
    return total;
}
