/*
 * names.h - the host's one policy for names that come from the sandbox.
 *
 * A file name a cell picks ends up in a host directory (`cellblock run
 * --out`, the client's Result.save) and in cellblock's own messages and
 * logs.  There it must not break or mislead an `ls`, a shell loop, a file
 * manager or a terminal, so a name is refused, with a reason, when it is
 * empty, longer than CB_NAMES_NAME_MAX bytes, "." or "..", hidden (a leading
 * '.'), holds a '/', is not valid UTF-8 (overlong forms, surrogates and code
 * points past U+10FFFF included), or holds a C0 control (U+0000-U+001F), DEL,
 * a C1 control (U+0080-U+009F) or a bidirectional-text control (U+202A-U+202E,
 * U+2066-U+2069, U+200E, U+200F, U+061C).  A relative path is checked
 * component by component and as a whole (not absolute, at most
 * CB_NAMES_PATH_MAX bytes).
 *
 * Wherever cellblock shows such a name it writes it escaped the way `ls -b`
 * does: \a \b \t \n \v \f \r, \\ for a backslash, and \ooo (octal) for every
 * byte of any other character the policy refuses; other characters,
 * non-ASCII letters and spaces included, stay as they are.
 *
 * The Python client has the same policy (client/cellblock/names.py); both
 * read the cases of tests/unit/names_vectors.json.
 */
#ifndef CB_NAMES_H
#define CB_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why a name is refused; CB_NAMES_OK when it is not. */
typedef enum {
    CB_NAMES_OK,       /* acceptable */
    CB_NAMES_EMPTY,    /* "" or an empty path component ("a//b", "a/") */
    CB_NAMES_TOO_LONG, /* a component over CB_NAMES_NAME_MAX or a path over CB_NAMES_PATH_MAX */
    CB_NAMES_DOT,      /* "." or ".." */
    CB_NAMES_HIDDEN,   /* starts with '.' */
    CB_NAMES_SLASH,    /* a '/' in a single name */
    CB_NAMES_ABSOLUTE, /* a path starting with '/' */
    CB_NAMES_UTF8,     /* not valid UTF-8 */
    CB_NAMES_C0,       /* U+0000-U+001F */
    CB_NAMES_DEL,      /* U+007F */
    CB_NAMES_C1,       /* U+0080-U+009F */
    CB_NAMES_BIDI,     /* a bidirectional-text control */
} cb_names_verdict_t;

/* A verdict and where it was found. */
typedef struct {
    cb_names_verdict_t verdict; /* CB_NAMES_OK or the first problem */
    size_t offset;              /* byte offset of the offending character (0 if not one) */
    uint32_t cp;                /* its code point (C0, DEL, C1, BIDI), else 0 */
} cb_names_check_t;

/* Checks one name of len bytes (it may hold NULs: they are refused). */
cb_names_check_t cb_names_check(const char *name, size_t len);
/* Checks a '/'-separated relative path of len bytes, component by component. */
cb_names_check_t cb_names_check_path(const char *path, size_t len);
/* True when cb_names_check_path accepts the NUL-terminated path. */
bool cb_names_path_ok(const char *path);
/* The verdict's stable code ("c1", "bidi", ...), for logs and JSON. */
const char *cb_names_code(cb_names_verdict_t v);
/* A sentence on why it was refused ("contains U+202E, a bidirectional-text
 * control"), written to buf (always terminated).  Returns buf. */
const char *cb_names_reason(const cb_names_check_t *c, char *buf, size_t len);


/*
 * Writes raw (len bytes) escaped as described above into out (out_len bytes,
 * always terminated when out_len > 0), cut only between whole escapes.  With
 * keep_backslash a backslash stays single (for whole log lines, where
 * unambiguity is not the point, only that nothing reaches the terminal raw).
 * Returns the length the whole escaped string needs (without the NUL): the
 * output was cut when that is >= out_len.  At most CB_NAMES_ESCAPE_FACTOR
 * bytes per input byte.
 */
size_t cb_names_escape(const char *raw, size_t len, char *out, size_t out_len, bool keep_backslash);
/* The same into a new malloc'd string (NULL on out of memory). */
char *cb_names_escape_dup(const char *raw);

/*
 * Length of the well-formed UTF-8 sequence at p (n bytes available): 1..4,
 * or 0 for an ill-formed one (a stray continuation byte, an overlong form,
 * a surrogate, past U+10FFFF, or cut short).  *cp (may be NULL) gets the
 * code point.
 */
size_t cb_names_utf8_seq(const uint8_t *p, size_t n, uint32_t *cp);

#endif
