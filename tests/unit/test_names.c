/*
 * test_names.c - the host's name policy (isolate/names.c): every case of
 * names_vectors.json (the Python client's tests read the same file), then
 * escaping's bounds and the refusal sentences.
 */
#include "isolate/names.h"
#include "tap.h"

#include "isolate/cb_limits.h"

#include "isolate/log.h"

#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <unistd.h>

static size_t s_unhex(const char *hex, char *out, size_t cap) {
    size_t n = strlen(hex) / 2;
    if (n > cap) return (size_t) -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return (size_t) -1;
        out[i] = (char) v;
    }
    return n;
}

static void test_vectors(void) {
    const char *path = getenv("CB_NAMES_VECTORS");
    char buf[CB_PATH_MAX];
    if (path == NULL) {
        char here[CB_PATH_MAX];
        snprintf(here, sizeof here, "%s", __FILE__);
        snprintf(buf, sizeof buf, "%s/names_vectors.json", dirname(here));
        path = buf;
    }
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    TAP_OK(doc != NULL, "vectors load from %s (%s)", path, doc ? "ok" : err.text);
    json_t *cases = json_object_get(doc, "cases");
    TAP_OK(json_array_size(cases) > 100, "%zu cases", json_array_size(cases));
    size_t i, bad = 0, n_escape_bad = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        char raw[CB_NAMES_PATH_MAX * 2];
        size_t len = s_unhex(json_string_value(json_object_get(c, "hex")), raw, sizeof raw);
        const char *kind = json_string_value(json_object_get(c, "kind"));
        const char *want = json_string_value(json_object_get(c, "verdict"));
        if (len == (size_t) -1 || kind == NULL || want == NULL) {
            TAP_OK(0, "case %zu is well-formed", i);
            continue;
        }
        cb_names_check_t got =
            strcmp(kind, "path") == 0 ? cb_names_check_path(raw, len) : cb_names_check(raw, len);
        json_int_t off = json_integer_value(json_object_get(c, "offset"));
        json_t *cp = json_object_get(c, "cp");
        bool ok = strcmp(cb_names_code(got.verdict), want) == 0 && (json_int_t) got.offset == off &&
                  (cp == NULL || (json_int_t) got.cp == json_integer_value(cp));
        if (!ok) {
            bad++;
            printf("# case %zu (%s %s): got %s at %zu cp %u, want %s at %lld\n", i, kind,
                   json_string_value(json_object_get(c, "hex")), cb_names_code(got.verdict),
                   got.offset, (unsigned) got.cp, want, (long long) off);
        }
        char esc[CB_NAMES_PATH_MAX * 2 * CB_NAMES_ESCAPE_FACTOR + 1];
        size_t need = cb_names_escape(raw, len, esc, sizeof esc, false);
        const char *want_esc = json_string_value(json_object_get(c, "escaped"));
        if (want_esc == NULL || need != strlen(want_esc) || strcmp(esc, want_esc) != 0) {
            n_escape_bad++;
            printf("# case %zu: escaped '%s', want '%s'\n", i, esc, want_esc ? want_esc : "?");
        }
    }
    TAP_EQ_INT(bad, 0, "every vector gets its verdict, offset and code point");
    TAP_EQ_INT(n_escape_bad, 0, "every vector is escaped as listed (ls -b style)");
    json_decref(doc);
}

static void test_escape_bounds(void) {
    char out[8];
    /* "ab\033cd": the escape is 4 bytes; out holds 7 characters */
    size_t need = cb_names_escape("ab\x1b"
                                  "cd",
                                  5, out, sizeof out, false);
    TAP_EQ_INT(need, 8, "the length needed is returned");
    TAP_EQ_STR(out, "ab\\033c", "cut only after a whole escape");
    need = cb_names_escape("abcdef\x1b", 7, out, sizeof out, false);
    TAP_EQ_STR(out, "abcdef", "an escape that does not fit is left out whole");
    TAP_EQ_INT(need, 10, "... and counted");
    need = cb_names_escape("x", 1, out, 0, false);
    TAP_EQ_INT(need, 1, "out_len 0 writes nothing and counts");
    char big[64];
    cb_names_escape("a\\b\nc\xe2\x80\xae", 8, big, sizeof big, true);
    TAP_EQ_STR(big, "a\\b\\nc\\342\\200\\256", "keep_backslash: controls escaped, '\\' single");
    cb_names_escape("\xc3\xa9\xe2\x82", 4, big, sizeof big, false);
    TAP_EQ_STR(big, "\xc3\xa9\\342\\202", "a cut-short sequence at the end: its bytes escaped");
    char *d = cb_names_escape_dup("tab\there");
    TAP_EQ_STR(d, "tab\\there", "escape_dup");
    free(d);
    cb_names_check_t c = cb_names_check("a\0b", 3);
    TAP_OK(c.verdict == CB_NAMES_C0 && c.offset == 1 && c.cp == 0,
           "a NUL inside a name is refused");
    TAP_OK(cb_names_path_ok("plots/sq.png") && !cb_names_path_ok("../x.png") &&
               !cb_names_path_ok("x\xc2\x9b.png"),
           "path_ok");
}

static void test_reasons(void) {
    char r[CB_NAMES_REASON_MAX];
    cb_names_check_t c = cb_names_check("report\xe2\x80\xae"
                                        "fdp.exe",
                                        16);
    TAP_EQ_STR(cb_names_reason(&c, r, sizeof r),
               "contains U+202E, a bidirectional-text control (it can make a name display as "
               "another)",
               "bidi reason names the code point");
    c = cb_names_check("c\xc2\x9b", 3);
    TAP_EQ_STR(cb_names_reason(&c, r, sizeof r), "contains U+009B, a C1 control character",
               "C1 reason");
    c = cb_names_check("x\x7f", 2);
    TAP_EQ_STR(cb_names_reason(&c, r, sizeof r), "contains U+007F, a control character",
               "DEL reason");
    c = cb_names_check("caf\xe9", 4);
    TAP_EQ_STR(cb_names_reason(&c, r, sizeof r), "is not valid UTF-8 (at byte 3)", "UTF-8 reason");
    c = cb_names_check_path("a/../b", 6);
    TAP_EQ_STR(cb_names_reason(&c, r, sizeof r), "has a '.' or '..' component", "dot reason");
    c = cb_names_check_path("/etc/passwd", 11);
    TAP_EQ_STR(cb_names_code(c.verdict), "absolute", "absolute code");
    char tiny[8];
    cb_names_reason(&c, tiny, sizeof tiny);
    TAP_EQ_INT(strlen(tiny), 7, "a short buffer is terminated");
}

/* The log sink (isolate/log.c) escapes every line, whatever a call site passed. */
static void test_log_sink(void) {
    int p[2];
    TAP_EQ_INT(pipe2(p, O_CLOEXEC), 0, "pipe");
    int old = cb_log_get_fd();
    cb_log_set_fd(p[1]);
    LOG_W("unknown type '%s' from %s", "\x1b]2;owned\x07\xc2\x9b\xe2\x80\xae", "a\\b");
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[CB_LOG_LINE_MAX - 100] = '\x1b';
    LOG_E("%s", big);
    cb_log_set_fd(old);
    close(p[1]);
    char got[2 * CB_LOG_LINE_MAX + 1];
    ssize_t n = read(p[0], got, sizeof got - 1);
    close(p[0]);
    got[n > 0 ? n : 0] = '\0';
    char *second = strchr(got, '\n');
    TAP_OK(second != NULL, "two lines");
    if (second == NULL) return;
    *second++ = '\0';
    TAP_OK(strstr(got, "unknown type '\\033]2;owned\\a\\302\\233\\342\\200\\256' from a\\b") !=
               NULL,
           "controls, C1 and bidi escaped; a backslash left single");
    size_t l2 = strlen(second);
    TAP_OK(l2 > 0 && second[l2 - 1] == '\n' && l2 <= CB_LOG_LINE_MAX, "a long line is cut to %zu",
           l2);
    TAP_OK(l2 > 4 && memcmp(second + l2 - 4, "...\n", 4) == 0, "... and marked");
    TAP_OK(strstr(second, "\\033") != NULL && strchr(second, '\x1b') == NULL,
           "... its escapes intact");
}

int main(void) {
    test_vectors();
    test_escape_bounds();
    test_reasons();
    test_log_sink();
    TAP_DONE();
}
