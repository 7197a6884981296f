/*
 * names.c - the host's name policy and `ls -b` escaping (see names.h).
 *
 * One strict UTF-8 decoder serves both: a name is checked character by
 * character, and escaping writes every refused character (and every byte of
 * an ill-formed sequence) as octal escapes, so what is printed is printable
 * ASCII plus the characters the policy lets through.  No allocation except
 * cb_names_escape_dup; no logging (log.c calls in here).
 */
#include "isolate/names.h"

#include "isolate/cb_limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t cb_names_utf8_seq(const uint8_t *p, size_t n, uint32_t *cp_out) {
    if (n == 0) return 0;
    uint8_t c = p[0];
    if (c < 0x80) {
        if (cp_out) *cp_out = c;
        return 1;
    }
    size_t need;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        cp = c & 0x07;
    } else {
        return 0; /* continuation byte, overlong lead C0/C1, or F5..FF */
    }
    if (n < need) return 0;
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (need == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) return 0;
    if (need == 4 && (cp < 0x10000 || cp > 0x10ffff)) return 0;
    if (cp_out) *cp_out = cp;
    return need;
}

static bool s_bidi(uint32_t cp) {
    return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e ||
           cp == 0x200f || cp == 0x061c;
}

/* The characters the policy refuses inside a name (C0, DEL, C1, bidi controls). */
static bool s_cp_refused(uint32_t cp) {
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || s_bidi(cp);
}

static cb_names_check_t s_verdict(cb_names_verdict_t v, size_t offset, uint32_t cp) {
    return (cb_names_check_t){.verdict = v, .offset = offset, .cp = cp};
}

cb_names_check_t cb_names_check(const char *name, size_t len) {
    const uint8_t *p = (const uint8_t *) name;
    if (len == 0) return s_verdict(CB_NAMES_EMPTY, 0, 0);
    if (len > CB_NAMES_NAME_MAX) return s_verdict(CB_NAMES_TOO_LONG, 0, 0);
    if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
        return s_verdict(CB_NAMES_DOT, 0, 0);
    if (p[0] == '.') return s_verdict(CB_NAMES_HIDDEN, 0, 0);
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = cb_names_utf8_seq(p + i, len - i, &cp);
        if (k == 0) return s_verdict(CB_NAMES_UTF8, i, 0);
        if (cp == '/') return s_verdict(CB_NAMES_SLASH, i, 0);
        if (cp < 0x20) return s_verdict(CB_NAMES_C0, i, cp);
        if (cp == 0x7f) return s_verdict(CB_NAMES_DEL, i, cp);
        if (cp >= 0x80 && cp <= 0x9f) return s_verdict(CB_NAMES_C1, i, cp);
        if (s_bidi(cp)) return s_verdict(CB_NAMES_BIDI, i, cp);
        i += k;
    }
    return s_verdict(CB_NAMES_OK, 0, 0);
}

cb_names_check_t cb_names_check_path(const char *path, size_t len) {
    if (len == 0) return s_verdict(CB_NAMES_EMPTY, 0, 0);
    if (len > CB_NAMES_PATH_MAX) return s_verdict(CB_NAMES_TOO_LONG, 0, 0);
    if (path[0] == '/') return s_verdict(CB_NAMES_ABSOLUTE, 0, 0);
    for (size_t start = 0; start <= len;) {
        const char *slash = memchr(path + start, '/', len - start);
        size_t end = slash ? (size_t) (slash - path) : len;
        cb_names_check_t c = cb_names_check(path + start, end - start);
        if (c.verdict != CB_NAMES_OK) {
            c.offset += start;
            return c;
        }
        if (slash == NULL) break;
        start = end + 1;
    }
    return s_verdict(CB_NAMES_OK, 0, 0);
}

bool cb_names_path_ok(const char *path) {
    return cb_names_check_path(path, strlen(path)).verdict == CB_NAMES_OK;
}

const char *cb_names_code(cb_names_verdict_t v) {
    static const char *const codes[] = {
        [CB_NAMES_OK] = "ok",
        [CB_NAMES_EMPTY] = "empty",
        [CB_NAMES_TOO_LONG] = "too_long",
        [CB_NAMES_DOT] = "dot",
        [CB_NAMES_HIDDEN] = "hidden",
        [CB_NAMES_SLASH] = "slash",
        [CB_NAMES_ABSOLUTE] = "absolute",
        [CB_NAMES_UTF8] = "utf8",
        [CB_NAMES_C0] = "c0",
        [CB_NAMES_DEL] = "del",
        [CB_NAMES_C1] = "c1",
        [CB_NAMES_BIDI] = "bidi",
    };
    return (size_t) v < sizeof codes / sizeof codes[0] ? codes[v] : "unknown";
}

const char *cb_names_reason(const cb_names_check_t *c, char *buf, size_t len) {
    if (len == 0) return buf;
    switch (c->verdict) {
    case CB_NAMES_OK: snprintf(buf, len, "is acceptable"); break;
    case CB_NAMES_EMPTY: snprintf(buf, len, "is empty or has an empty path component"); break;
    case CB_NAMES_TOO_LONG:
        snprintf(buf, len, "is too long (at most %d bytes a name, %d a path)", CB_NAMES_NAME_MAX,
                 CB_NAMES_PATH_MAX);
        break;
    case CB_NAMES_DOT: snprintf(buf, len, "has a '.' or '..' component"); break;
    case CB_NAMES_HIDDEN: snprintf(buf, len, "is hidden (starts with '.')"); break;
    case CB_NAMES_SLASH: snprintf(buf, len, "contains '/'"); break;
    case CB_NAMES_ABSOLUTE: snprintf(buf, len, "is an absolute path"); break;
    case CB_NAMES_UTF8: snprintf(buf, len, "is not valid UTF-8 (at byte %zu)", c->offset); break;
    case CB_NAMES_C0:
    case CB_NAMES_DEL:
        snprintf(buf, len, "contains U+%04X, a control character", (unsigned) c->cp);
        break;
    case CB_NAMES_C1:
        snprintf(buf, len, "contains U+%04X, a C1 control character", (unsigned) c->cp);
        break;
    case CB_NAMES_BIDI:
        snprintf(buf, len,
                 "contains U+%04X, a bidirectional-text control (it can make a name display as "
                 "another)",
                 (unsigned) c->cp);
        break;
    }
    return buf;
}

/* Appends piece (n bytes) if it fits whole; *used counts what it needs either way. */
static void s_put(char *out, size_t out_len, size_t *used, bool *cut, const char *piece, size_t n) {
    if (!*cut && out_len > 0 && *used + n < out_len)
        memcpy(out + *used, piece, n);
    else
        *cut = true;
    *used += n;
}

size_t cb_names_escape(const char *raw, size_t len, char *out, size_t out_len,
                       bool keep_backslash) {
    static const char cesc[] = {['\a'] = 'a', ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n',
                                ['\v'] = 'v', ['\f'] = 'f', ['\r'] = 'r'};
    const uint8_t *p = (const uint8_t *) raw;
    size_t used = 0, kept = 0;
    bool cut = false;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = cb_names_utf8_seq(p + i, len - i, &cp);
        bool refused = k == 0 || s_cp_refused(cp);
        if (k == 0) k = 1; /* one ill-formed byte at a time */
        if (refused && cp < sizeof cesc && cesc[cp]) {
            char e[2] = {'\\', cesc[cp]};
            s_put(out, out_len, &used, &cut, e, sizeof e);
        } else if (refused) {
            for (size_t j = 0; j < k; j++) {
                char e[4] = {'\\', (char) ('0' + (p[i + j] >> 6)),
                             (char) ('0' + ((p[i + j] >> 3) & 7)), (char) ('0' + (p[i + j] & 7))};
                s_put(out, out_len, &used, &cut, e, sizeof e);
            }
        } else if (cp == '\\' && !keep_backslash) {
            s_put(out, out_len, &used, &cut, "\\\\", 2);
        } else {
            s_put(out, out_len, &used, &cut, (const char *) p + i, k);
        }
        if (!cut) kept = used;
        i += k;
    }
    if (out_len > 0) out[kept < out_len ? kept : out_len - 1] = '\0';
    return used;
}

char *cb_names_escape_dup(const char *raw) {
    size_t len = strlen(raw), cap;
    if (__builtin_mul_overflow(len, (size_t) CB_NAMES_ESCAPE_FACTOR, &cap) ||
        __builtin_add_overflow(cap, (size_t) 1, &cap))
        return NULL;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    (void) cb_names_escape(raw, len, out, cap, false);
    return out;
}
