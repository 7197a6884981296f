/*
 * test_artifacts.c - the artifact collector against real files in a temp
 * directory: every kind, change tracking, limits and notices, and every abuse
 * the sandbox can try (symlinks, hard links, FIFOs, sockets, huge sparse
 * files, thousands of files, deep trees, bad names, files changing while
 * read).  Each abuse runs with openat2 and with the O_NOFOLLOW fallback.
 * Prints TAP.  An alarm() turns any hang into a failure.
 */
#include "artifacts/artifacts.h"
#include "artifacts/artifacts_fs.h"
#include "artifacts/artifacts_limits.h"
#include "isolate/log.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    T_ALARM_S = 300,       /* whole run */
    T_FIFO_ALARM_S = 10,   /* a collect next to a FIFO */
    T_MANY_FILES = 20000,  /* more than the default max_entries */
    T_DEEP = 20,           /* more levels than the default max_depth */
    T_SLEEP_NS = 20000000, /* past a coarse timestamp tick */
};

static char s_root[64];    /* the workdir of the current test */
static int s_dirfd = -1;   /* O_PATH fd of it */
static char s_outside[64]; /* a directory outside the workdir */
static char s_nm[256];     /* a formatted test name */
#define NM(...) (snprintf(s_nm, sizeof s_nm, __VA_ARGS__), s_nm)

/* ---- helpers ----------------------------------------------------------- */

static int s_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void) st;
    (void) flag;
    (void) ftw;
    return remove(path);
}

static void s_fresh(void) {
    if (s_dirfd >= 0) {
        close(s_dirfd);
        nftw(s_root, s_rm, 64, FTW_DEPTH | FTW_PHYS);
    }
    snprintf(s_root, sizeof s_root, "/tmp/cb-art.XXXXXX");
    if (mkdtemp(s_root) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    s_dirfd = open(s_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (s_dirfd < 0) {
        perror("open workdir");
        exit(2);
    }
}

static void s_write(const char *rel, const void *data, size_t len) {
    int fd = openat(s_dirfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t) len) {
        printf("# write %s: %s\n", rel, strerror(errno));
        exit(2);
    }
    close(fd);
}

static void s_puts(const char *rel, const char *text) { s_write(rel, text, strlen(text)); }

static void s_mkdir(const char *rel) {
    if (mkdirat(s_dirfd, rel, 0755) < 0 && errno != EEXIST) {
        printf("# mkdir %s: %s\n", rel, strerror(errno));
        exit(2);
    }
}

static void s_set_mtime(const char *rel, time_t sec, long nsec) {
    struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
    if (utimensat(s_dirfd, rel, ts, AT_SYMLINK_NOFOLLOW) < 0)
        printf("# utimensat: %s\n", strerror(errno));
}

static void s_sleep_tick(void) {
    struct timespec ts = {0, T_SLEEP_NS};
    nanosleep(&ts, NULL);
}

static cb_artifacts_t *s_new(cb_artifacts_mode_t mode, bool binary) {
    cb_artifacts_limits_t lim;
    cb_artifacts_limits_default(&lim);
    lim.mode = mode;
    lim.binary = binary;
    return cb_artifacts_new(&lim);
}

/* The bundle for path, borrowed from bundles, or NULL. */
static json_t *s_find(json_t *bundles, const char *path) {
    size_t i;
    json_t *b;
    json_array_foreach(bundles, i, b) {
        json_t *p = json_object_get(
            json_object_get(json_object_get(json_object_get(b, "metadata"), "cellblock"),
                            "artifact"),
            "path");
        if (p && strcmp(json_string_value(p), path) == 0) return b;
    }
    return NULL;
}

/* The notice's skipped list (borrowed), or NULL. */
static json_t *s_notice(json_t *bundles) {
    json_t *last = json_array_get(bundles, json_array_size(bundles) - 1);
    return json_object_get(
        json_object_get(json_object_get(json_object_get(last, "metadata"), "cellblock"),
                        "artifact_notice"),
        "skipped");
}

static size_t s_notice_total(json_t *bundles) {
    json_t *last = json_array_get(bundles, json_array_size(bundles) - 1);
    return (size_t) json_integer_value(json_object_get(
        json_object_get(json_object_get(json_object_get(last, "metadata"), "cellblock"),
                        "artifact_notice"),
        "total"));
}

/* The reason the notice gives for path, or NULL. */
static const char *s_reason(json_t *bundles, const char *path) {
    json_t *sk = s_notice(bundles);
    size_t i;
    json_t *it;
    json_array_foreach(sk, i, it) {
        if (strcmp(json_string_value(json_object_get(it, "path")), path) == 0)
            return json_string_value(json_object_get(it, "reason"));
    }
    return NULL;
}

static const char *s_mime_of(json_t *b) {
    return json_string_value(json_object_get(
        json_object_get(json_object_get(json_object_get(b, "metadata"), "cellblock"), "artifact"),
        "mime"));
}

static const char *s_data(json_t *b, const char *mime) {
    return json_string_value(json_object_get(json_object_get(b, "data"), mime));
}

/* True if base64 text decodes to exactly want[0..len). */
static bool s_b64_eq(const char *text, const uint8_t *want, size_t len) {
    if (text == NULL) return false;
    size_t tlen = strlen(text), cap = tlen, got = 0;
    uint8_t *bin = malloc(cap + 1);
    bool ok = sodium_base642bin(bin, cap + 1, text, tlen, NULL, &got, NULL,
                                sodium_base64_VARIANT_ORIGINAL) == 0 &&
              got == len && memcmp(bin, want, len) == 0;
    free(bin);
    return ok;
}

static void s_sha_hex(const void *data, size_t len, char hex[65]) {
    uint8_t sha[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(sha, data, len);
    sodium_bin2hex(hex, 65, sha, sizeof sha);
}

/* True if no string anywhere in v contains needle. */
static bool s_nowhere(json_t *v, const char *needle) {
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    bool ok = s && strstr(s, needle) == NULL;
    free(s);
    return ok;
}

/* Collects, checks the common shape of every bundle, returns bundles (new
 * reference) and the summary in *sum (new reference or NULL if not wanted). */
static json_t *s_collect(cb_artifacts_t *a, json_t **sum) {
    json_t *summary = NULL;
    json_t *b = cb_artifacts_collect(a, s_dirfd, &summary);
    if (b == NULL) {
        printf("# collect returned NULL\n");
        exit(2);
    }
    size_t i;
    json_t *x;
    bool shape = true;
    json_array_foreach(b, i, x) {
        json_t *data = json_object_get(x, "data");
        if (!json_is_string(json_object_get(data, "text/plain"))) shape = false;
        if (!json_is_object(json_object_get(x, "metadata"))) shape = false;
    }
    if (!shape) TAP_OK(false, "every bundle has data.text/plain and metadata");
    if (sum)
        *sum = summary;
    else
        json_decref(summary);
    return b;
}

/* ---- tests ------------------------------------------------------------- */

/* A fake but well-formed-looking PNG: signature, IHDR 3x2, then every byte value. */
static size_t s_png(uint8_t *out) {
    static const uint8_t head[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0,
                                   0,    13,  'I', 'H', 'D',  'R',  0,    0,    0, 3,
                                   0,    0,   0,   2,   8,    6,    0,    0,    0};
    memcpy(out, head, sizeof head);
    for (int i = 0; i < 256; i++)
        out[sizeof head + (size_t) i] = (uint8_t) i;
    return sizeof head + 256;
}

static void test_api(void) {
    cb_artifacts_mode_t m = CB_ARTIFACTS_ALL;
    TAP_OK(cb_artifacts_parse_mode("none", &m) == 0 && m == CB_ARTIFACTS_NONE, "parse none");
    TAP_OK(cb_artifacts_parse_mode("images", &m) == 0 && m == CB_ARTIFACTS_IMAGES, "parse images");
    TAP_OK(cb_artifacts_parse_mode("all", &m) == 0 && m == CB_ARTIFACTS_ALL, "parse all");
    TAP_OK(cb_artifacts_parse_mode("ALL", &m) < 0 && cb_artifacts_parse_mode("", &m) < 0 &&
               cb_artifacts_parse_mode(NULL, &m) < 0,
           "parse rejects others");
    cb_artifacts_limits_t lim;
    cb_artifacts_limits_default(&lim);
    TAP_EQ_INT(lim.max_file_bytes, 10u << 20, "default per-file 10 MiB");
    TAP_EQ_INT(lim.max_cell_bytes, 25u << 20, "default per-cell 25 MiB");
    TAP_EQ_INT(lim.max_files, 50, "default 50 files");
    TAP_OK(lim.mode == CB_ARTIFACTS_ALL && !lim.binary, "default mode all, binary off");
    cb_artifacts_t *a = cb_artifacts_new(NULL);
    TAP_OK(a != NULL, "new(NULL) uses defaults");
    cb_artifacts_destroy(&a);
    TAP_OK(a == NULL, "destroy nulls the pointer");
    cb_artifacts_destroy(&a);
    TAP_OK(true, "destroy is idempotent");
}

static void test_kinds(void) {
    s_fresh();
    uint8_t png[512];
    size_t png_len = s_png(png);
    s_mkdir("plots");
    s_write("plots/fig.png", png, png_len);
    static const uint8_t jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 0, 16,   'J', 'F',
                                   'I',  'F',  0,    1,    2, 0xff, 0xd9};
    s_write("photo.JPG", jpeg, sizeof jpeg);
    static const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a', 5, 0, 7, 0, 0x80, 0, 0, 0x3b};
    s_write("anim.gif", gif, sizeof gif);
    static const uint8_t webp[] = {'R', 'I', 'F', 'F', 4,   0,   0,   0,
                                   'W', 'E', 'B', 'P', 'V', 'P', '8', ' '};
    s_write("pic.webp", webp, sizeof webp);
    const char *svg = "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n";
    s_puts("chart.svg", svg);
    static const char pdf[] = "%PDF-1.4\n\x80\x81\x82 binary\n%%EOF\n";
    s_write("report.pdf", pdf, sizeof pdf - 1);
    const char *csv = "a,b\n1,\"x y\"\n2,é\n";
    s_puts("results.csv", csv);
    s_puts("results.tsv", "a\tb\n1\t2\n");
    s_puts("data.json", "{\"k\": [1, 2.5, \"v\"], \"n\": null}");
    s_puts("broken.json", "{not json");
    s_puts("page.html", "<b>hi</b>");
    s_puts("notes.md", "# Title\n");
    s_puts("out.txt", "plain \"quoted\" text\n");
    s_puts("run.log", "line1\nline2\n");
    s_puts("blob.bin", "unknown type");

    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *sum = NULL;
    json_t *b = s_collect(a, &sum);
    TAP_EQ_INT(json_array_size(b), 14, "14 bundles (blob.bin not sent without binary opt-in)");
    TAP_EQ_INT(json_array_size(sum), 14, "summary has 14 entries");
    TAP_OK(s_notice(b) == NULL, "no notice");

    json_t *x = s_find(b, "plots/fig.png");
    TAP_OK(x != NULL, "png found under its relative path");
    TAP_EQ_STR(s_mime_of(x), "image/png", "png mime");
    TAP_OK(s_b64_eq(s_data(x, "image/png"), png, png_len), "png base64 round trip is byte-exact");
    char hex[65];
    s_sha_hex(png, png_len, hex);
    json_t *art =
        json_object_get(json_object_get(json_object_get(x, "metadata"), "cellblock"), "artifact");
    TAP_EQ_STR(json_string_value(json_object_get(art, "sha256")), hex, "png sha256");
    TAP_EQ_INT(json_integer_value(json_object_get(art, "size")), png_len, "png size");
    json_t *dims = json_object_get(json_object_get(x, "metadata"), "image/png");
    TAP_OK(json_integer_value(json_object_get(dims, "width")) == 3 &&
               json_integer_value(json_object_get(dims, "height")) == 2,
           "png width/height metadata");
    TAP_EQ_STR(s_data(x, "text/plain"), "[artifact] plots/fig.png (285 B, image/png)",
               "png one-line description");

    x = s_find(b, "photo.JPG");
    TAP_EQ_STR(s_mime_of(x), "image/jpeg", "jpeg (upper-case extension)");
    TAP_OK(s_b64_eq(s_data(x, "image/jpeg"), jpeg, sizeof jpeg), "jpeg bytes");
    x = s_find(b, "anim.gif");
    TAP_EQ_STR(s_mime_of(x), "image/gif", "gif");
    dims = json_object_get(json_object_get(x, "metadata"), "image/gif");
    TAP_OK(json_integer_value(json_object_get(dims, "width")) == 5 &&
               json_integer_value(json_object_get(dims, "height")) == 7,
           "gif width/height metadata");
    TAP_EQ_STR(s_mime_of(s_find(b, "pic.webp")), "image/webp", "webp");
    x = s_find(b, "chart.svg");
    TAP_EQ_STR(s_data(x, "image/svg+xml"), svg, "svg as text");
    x = s_find(b, "report.pdf");
    TAP_OK(s_b64_eq(s_data(x, "application/pdf"), (const uint8_t *) pdf, sizeof pdf - 1),
           "pdf base64");
    x = s_find(b, "results.csv");
    TAP_EQ_STR(s_data(x, "text/csv"), csv, "csv as exact text");
    s_sha_hex(csv, strlen(csv), hex);
    art = json_object_get(json_object_get(json_object_get(x, "metadata"), "cellblock"), "artifact");
    TAP_EQ_STR(json_string_value(json_object_get(art, "sha256")), hex, "csv sha256");
    TAP_EQ_STR(s_data(s_find(b, "results.tsv"), "text/tab-separated-values"), "a\tb\n1\t2\n",
               "tsv");
    json_t *jv =
        json_object_get(json_object_get(s_find(b, "data.json"), "data"), "application/json");
    json_t *want = json_loads("{\"k\": [1, 2.5, \"v\"], \"n\": null}", 0, NULL);
    TAP_OK(json_equal(jv, want), "json parsed into a value");
    json_decref(want);
    x = s_find(b, "broken.json");
    TAP_EQ_STR(s_mime_of(x), "text/plain", "unparseable json falls back to text/plain");
    TAP_EQ_STR(s_data(x, "text/plain"), "{not json", "... with its content");
    TAP_EQ_STR(s_data(s_find(b, "page.html"), "text/html"), "<b>hi</b>", "html");
    TAP_EQ_STR(s_data(s_find(b, "notes.md"), "text/markdown"), "# Title\n", "markdown");
    x = s_find(b, "out.txt");
    TAP_EQ_STR(s_data(x, "text/plain"), "plain \"quoted\" text\n", "txt content in text/plain");
    art = json_object_get(json_object_get(json_object_get(x, "metadata"), "cellblock"), "artifact");
    TAP_EQ_STR(json_string_value(json_object_get(art, "description")),
               "[artifact] out.txt (20 B, text/plain)", "txt description in metadata");
    TAP_EQ_STR(s_data(s_find(b, "run.log"), "text/plain"), "line1\nline2\n", "log as text");

    /* Deterministic order: sorted by path. */
    bool sorted = true;
    for (size_t i = 1; i < json_array_size(sum); i++) {
        const char *p0 = json_string_value(json_object_get(json_array_get(sum, i - 1), "path"));
        const char *p1 = json_string_value(json_object_get(json_array_get(sum, i), "path"));
        if (strcmp(p0, p1) >= 0) sorted = false;
    }
    TAP_OK(sorted, "bundles and summary sorted by path");
    json_t *s0 = json_array_get(sum, 0);
    TAP_OK(json_is_string(json_object_get(s0, "path")) &&
               json_is_integer(json_object_get(s0, "size")) &&
               json_is_string(json_object_get(s0, "sha256")) &&
               json_is_string(json_object_get(s0, "mime")),
           "summary entries have path, size, sha256, mime");
    json_decref(b);
    json_decref(sum);

    json_t *b2 = s_collect(a, &sum);
    TAP_EQ_INT(json_array_size(b2), 0, "second collect without changes returns nothing");
    TAP_EQ_INT(json_array_size(sum), 0, "... and an empty summary");
    json_decref(b2);
    json_decref(sum);

    /* A big JSON document is not parsed (memory): its text is sent instead. */
    size_t jlen = (size_t) CB_ARTIFACTS_JSON_PARSE_MAX + 2;
    char *big = malloc(jlen);
    memset(big, ' ', jlen); /* "[1      ...      ]" */
    big[0] = '[';
    big[1] = '1';
    big[jlen - 1] = ']';
    s_write("big.json", big, jlen);
    b = s_collect(a, NULL);
    x = s_find(b, "big.json");
    TAP_EQ_STR(s_mime_of(x), "text/plain",
               "JSON above CB_ARTIFACTS_JSON_PARSE_MAX is sent as text");
    const char *t = s_data(x, "text/plain");
    TAP_OK(t && strlen(t) == jlen && memcmp(t, big, jlen) == 0, "... byte-exact");
    json_decref(b);
    free(big);
    cb_artifacts_destroy(&a);

    a = s_new(CB_ARTIFACTS_ALL, true);
    b = s_collect(a, NULL);
    x = s_find(b, "blob.bin");
    TAP_EQ_STR(s_mime_of(x), "application/octet-stream", "binary opt-in sends unknown types");
    TAP_OK(s_b64_eq(s_data(x, "application/octet-stream"), (const uint8_t *) "unknown type", 12),
           "... as base64");
    json_decref(b);
    cb_artifacts_destroy(&a);

    a = s_new(CB_ARTIFACTS_IMAGES, true);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 5, "images mode: png, jpeg, gif, webp, svg only");
    TAP_OK(s_find(b, "results.csv") == NULL && s_find(b, "blob.bin") == NULL,
           "images mode skips csv and binary");
    json_decref(b);
    cb_artifacts_destroy(&a);

    a = s_new(CB_ARTIFACTS_NONE, true);
    b = s_collect(a, &sum);
    TAP_OK(json_array_size(b) == 0 && json_array_size(sum) == 0, "none mode returns nothing");
    json_decref(b);
    json_decref(sum);
    cb_artifacts_destroy(&a);
}

static void test_changes(void) {
    s_fresh();
    s_puts("a.csv", "1,2\n");
    s_puts("b.csv", "3,4\n");
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 2, "first collect: both files");
    json_decref(b);

    s_set_mtime("a.csv", 1000000000, 0);
    b = s_collect(a, NULL);
    TAP_OK(json_array_size(b) == 1 && s_find(b, "a.csv"), "touched file is returned again");
    json_decref(b);

    struct stat st;
    fstatat(s_dirfd, "b.csv", &st, 0);
    s_sleep_tick();
    s_puts("b.csv", "9,9\n");                                    /* same size */
    s_set_mtime("b.csv", st.st_mtim.tv_sec, st.st_mtim.tv_nsec); /* and the old mtime */
    b = s_collect(a, NULL);
    TAP_OK(json_array_size(b) == 1 && s_find(b, "b.csv"),
           "same size, forged mtime: sha256 change is caught");
    TAP_EQ_STR(s_data(s_find(b, "b.csv"), "text/csv"), "9,9\n", "... with the new content");
    json_decref(b);

    s_sleep_tick();
    fchmodat(s_dirfd, "a.csv", 0600, 0);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0, "chmod alone (ctime) does not resend");
    json_decref(b);

    s_puts("a.csv", "1,2,3\n");
    b = s_collect(a, NULL);
    TAP_OK(json_array_size(b) == 1 && s_find(b, "a.csv"), "modified file is returned again");
    json_decref(b);

    unlinkat(s_dirfd, "a.csv", 0);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0, "deleting a file returns nothing");
    json_decref(b);
    s_puts("a.csv", "1,2,3\n");
    b = s_collect(a, NULL);
    TAP_OK(json_array_size(b) == 1 && s_find(b, "a.csv"), "re-created file is returned");
    json_decref(b);

    cb_artifacts_reset(a);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 2, "after reset everything is new again");
    json_decref(b);
    TAP_OK(faccessat(s_dirfd, "a.csv", F_OK, 0) == 0 && faccessat(s_dirfd, "b.csv", F_OK, 0) == 0,
           "files are never deleted");
    cb_artifacts_destroy(&a);
}

/* cb_artifacts_baseline: what is there when the sandbox starts (a
 * --workdir-source folder) is not an artifact until a cell changes it. */
static void test_baseline(void) {
    s_fresh();
    s_puts("a.csv", "1,2\n");
    s_puts("b.csv", "3,4\n");
    s_mkdir("sub");
    uint8_t png[512];
    size_t n = s_png(png);
    s_write("sub/c.png", png, n);
    TAP_EQ_INT(symlinkat("a.csv", s_dirfd, "l.csv"), 0, "a symlink in the folder");
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    TAP_EQ_INT(cb_artifacts_baseline(a, s_dirfd), 0, "baseline");
    json_t *b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0, "baseline files, a symlink included: nothing returned");
    json_decref(b);

    s_sleep_tick();
    fchmodat(s_dirfd, "a.csv", 0600, 0);
    /* an overlay's copy-up: a new inode, same bytes, same size and mtime */
    struct stat st;
    fstatat(s_dirfd, "b.csv", &st, 0);
    s_puts("b.tmp", "3,4\n");
    s_set_mtime("b.tmp", st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    renameat(s_dirfd, "b.tmp", s_dirfd, "b.csv");
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0, "chmod and copy-up of baseline files: not returned");
    json_decref(b);

    s_puts("a.csv", "1,2\n5,6\n");
    s_puts("d.csv", "new\n");
    s_set_mtime("sub/c.png", 1000000000, 0);
    b = s_collect(a, NULL);
    TAP_OK(json_array_size(b) == 3 && s_find(b, "a.csv") && s_find(b, "d.csv") &&
               s_find(b, "sub/c.png"),
           "changed, new and touched files are returned (%zu)", json_array_size(b));
    json_decref(b);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0, "and only once");
    json_decref(b);
    TAP_EQ_INT(cb_artifacts_baseline(a, s_dirfd), 0, "a new baseline (a fresh sandbox)");
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0, "... forgets what was sent and takes all as seen");
    json_decref(b);
    cb_artifacts_destroy(&a);

    /* a folder larger than the scan: the notice comes once, not every cell */
    cb_artifacts_limits_t lim;
    cb_artifacts_limits_default(&lim);
    lim.max_entries = 4;
    a = cb_artifacts_new(&lim);
    TAP_EQ_INT(cb_artifacts_baseline(a, s_dirfd), 0, "truncated baseline");
    b = s_collect(a, NULL);
    TAP_EQ_STR(s_reason(b, "."), "scan_limit", "first collect says the scan stopped");
    json_decref(b);
    b = s_collect(a, NULL);
    TAP_OK(s_notice(b) == NULL, "later collects do not repeat it");
    json_decref(b);
    cb_artifacts_reset(a);
    b = s_collect(a, NULL);
    TAP_EQ_STR(s_reason(b, "."), "scan_limit", "without a baseline it is said every time");
    json_decref(b);
    TAP_EQ_INT(cb_artifacts_baseline(a, -1), -1, "a bad dirfd fails");
    cb_artifacts_destroy(&a);
    a = s_new(CB_ARTIFACTS_NONE, false);
    TAP_EQ_INT(cb_artifacts_baseline(a, s_dirfd), 0, "--artifacts none: nothing to do");
    cb_artifacts_destroy(&a);
}

static void test_tree_and_names(void) {
    s_fresh();
    s_mkdir("out");
    s_mkdir("out/sub");
    s_puts("out/sub/deep.txt", "x");
    s_mkdir("données");
    s_puts("données/résumé.csv", "é,ü\n");
    s_mkdir(".cache");
    s_mkdir(".cache/matplotlib");
    s_puts(".cache/matplotlib/fontlist.json", "{}");
    s_puts(".hidden.txt", "secret");
    s_puts("caf\xe9.txt", "latin1 name");
    s_puts("new\nline.txt", "nl");
    s_puts("back\\slash\xff.txt", "bs");
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *b = s_collect(a, NULL);
    TAP_OK(s_find(b, "out/sub/deep.txt") != NULL, "subdirectories are scanned");
    TAP_EQ_STR(s_data(s_find(b, "données/résumé.csv"), "text/csv"), "é,ü\n",
               "unicode names kept exactly");
    TAP_OK(s_nowhere(b, "fontlist") && s_nowhere(b, "hidden") && s_nowhere(b, "secret"),
           "hidden names (.cache, dotfiles) are skipped silently");
    json_t *x = s_find(b, "caf\\xe9.txt");
    TAP_OK(x != NULL, "non-UTF-8 name is escaped as \\xNN");
    json_t *art =
        json_object_get(json_object_get(json_object_get(x, "metadata"), "cellblock"), "artifact");
    TAP_OK(json_is_true(json_object_get(art, "path_escaped")), "... and flagged path_escaped");
    TAP_EQ_STR(s_data(x, "text/plain"), "latin1 name", "... content still sent");
    TAP_OK(s_find(b, "back\\\\slash\\xff.txt") != NULL, "backslash doubled in an escaped name");
    x = s_find(b, "new\nline.txt");
    art = json_object_get(json_object_get(json_object_get(x, "metadata"), "cellblock"), "artifact");
    TAP_EQ_STR(json_string_value(json_object_get(art, "description")),
               "[artifact] new\\x0aline.txt (2 B, text/plain)",
               "newline in a name stays on one line");
    TAP_OK(s_notice(b) == NULL, "no notice for ordinary trees");
    json_decref(b);
    cb_artifacts_destroy(&a);
}

static void test_content_checks(void) {
    s_fresh();
    s_puts("fake.png", "this is not a png");
    static const uint8_t jpeg[] = {0xff, 0xd8, 0xff, 0xdb, 1, 2, 3};
    s_write("really_jpeg.png", jpeg, sizeof jpeg);
    s_puts("bad.txt", "caf\xe9\n");
    s_puts("nopdf.pdf", "hello");
    s_puts("notsvg.svg", "<html/>");
    uint8_t ctl[1000];
    memset(ctl, 1, sizeof ctl);
    s_write("ctl.txt", ctl, sizeof ctl);
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *b = s_collect(a, NULL);
    TAP_OK(s_find(b, "fake.png") == NULL, "non-PNG named .png is not sent as image/png");
    TAP_EQ_STR(s_reason(b, "fake.png"), "content_mismatch", "... notice says why");
    TAP_EQ_STR(s_mime_of(s_find(b, "really_jpeg.png")), "image/jpeg",
               "JPEG bytes in .png sent as image/jpeg");
    TAP_EQ_STR(s_reason(b, "bad.txt"), "not_utf8", "non-UTF-8 text skipped with notice");
    TAP_EQ_STR(s_reason(b, "nopdf.pdf"), "content_mismatch", "non-PDF .pdf skipped");
    TAP_EQ_STR(s_reason(b, "notsvg.svg"), "content_mismatch", "non-SVG .svg skipped");
    TAP_EQ_STR(s_reason(b, "ctl.txt"), "encoding", "text that would blow up as JSON is skipped");
    json_t *last = json_array_get(b, json_array_size(b) - 1);
    const char *text = s_data(last, "text/plain");
    TAP_OK(text && strncmp(text, "[artifacts] 5 items not returned:", 33) == 0,
           "notice text header");
    TAP_OK(text && strstr(text, "fake.png") != NULL, "notice text lists the file");
    json_decref(b);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0, "a skipped file is reported once, not every cell");
    json_decref(b);
    cb_artifacts_destroy(&a);

    a = s_new(CB_ARTIFACTS_ALL, true);
    b = s_collect(a, NULL);
    TAP_EQ_STR(s_mime_of(s_find(b, "fake.png")), "application/octet-stream",
               "with binary on: octet-stream");
    TAP_EQ_STR(s_mime_of(s_find(b, "bad.txt")), "application/octet-stream",
               "non-UTF-8 text as octet-stream");
    json_decref(b);
    cb_artifacts_destroy(&a);
}

static void test_limits(void) {
    s_fresh();
    char big[3000];
    memset(big, 'x', sizeof big);
    s_write("big.txt", big, sizeof big);
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%d.txt", i);
        s_write(name, big, 900);
    }
    cb_artifacts_limits_t lim;
    cb_artifacts_limits_default(&lim);
    lim.max_file_bytes = 2000;
    lim.max_cell_bytes = 2500;
    lim.max_files = 50;
    cb_artifacts_t *a = cb_artifacts_new(&lim);
    json_t *sum = NULL;
    json_t *b = s_collect(a, &sum);
    TAP_EQ_STR(s_reason(b, "big.txt"), "file_too_large", "per-file limit: notice");
    TAP_OK(s_find(b, "big.txt") == NULL, "... and not sent");
    TAP_EQ_INT(json_array_size(sum), 2, "per-cell bytes: 2 x 900 fit in 2500");
    TAP_EQ_STR(s_reason(b, "f2.txt"), "cell_byte_limit",
               "... the third gets a cell_byte_limit notice");
    TAP_EQ_INT(s_notice_total(b), 4, "notice counts 4 skipped (big + 3)");
    json_t *last = json_array_get(b, json_array_size(b) - 1);
    TAP_OK(json_object_get(json_object_get(last, "data"), "text/plain") && s_notice(b) != NULL,
           "notice is the last bundle");
    json_decref(b);
    json_decref(sum);
    cb_artifacts_destroy(&a);

    lim.max_cell_bytes = 1u << 20;
    lim.max_files = 3;
    a = cb_artifacts_new(&lim);
    b = s_collect(a, &sum);
    TAP_EQ_INT(json_array_size(sum), 3, "per-cell count: 3 files");
    TAP_EQ_STR(s_reason(b, "f3.txt"), "cell_file_limit", "... others get cell_file_limit");
    TAP_EQ_STR(s_reason(b, "f4.txt"), "cell_file_limit", "... every one of them");
    json_decref(b);
    json_decref(sum);
    cb_artifacts_destroy(&a);

    /* Read budget: files whose content did not change still cost reads. */
    s_fresh();
    lim.max_cell_bytes = 1000;
    lim.max_files = 50;
    a = cb_artifacts_new(&lim);
    const char *names[] = {"r0.txt", "r1.txt", "r2.txt", "r3.txt"};
    for (int i = 0; i < 4; i++) {
        s_write(names[i], big, 600);
        json_decref(s_collect(a, NULL));
    }
    s_sleep_tick();
    for (int i = 0; i < 4; i++)
        fchmodat(s_dirfd, names[i], 0600, 0);
    b = s_collect(a, NULL);
    TAP_EQ_STR(s_reason(b, "r3.txt"), "read_budget", "read budget stops reading (2 x cell bytes)");
    TAP_EQ_INT(json_array_size(b), 1, "... and nothing unchanged is resent");
    json_decref(b);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 0,
               "the unexamined file is checked next cell (unchanged: silent)");
    json_decref(b);
    cb_artifacts_destroy(&a);
}

static bool s_hook_saw_huge;
static void s_hook_huge(cb_artifacts_hook_stage_t stage, const char *path, void *arg) {
    (void) stage;
    (void) arg;
    if (strcmp(path, "huge.csv") == 0) s_hook_saw_huge = true;
}

static void test_abuse(const char *mode) {
    char name[128];
    s_fresh();
    /* symlinks: to a host file, and as a directory component */
    symlinkat("/etc/passwd", s_dirfd, "passwd.txt");
    symlinkat("/etc", s_dirfd, "etc");
    symlinkat("/etc/hostname", s_dirfd, "hostname.txt");
    /* hard link to a file outside the workdir */
    char outside_file[128];
    snprintf(outside_file, sizeof outside_file, "%s/host-secret.txt", s_outside);
    int ofd = open(outside_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    (void) !write(ofd, "HOSTSECRET", 10);
    close(ofd);
    snprintf(name, sizeof name, "%s/hard.txt", s_root);
    bool have_link = link(outside_file, name) == 0;
    /* FIFO and socket with collectable names */
    mkfifoat(s_dirfd, "pipe.txt", 0644);
    int sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock.csv", s_root);
    bool have_sock = bind(sfd, (struct sockaddr *) &sa, sizeof sa) == 0;
    /* a huge sparse file */
    int hfd = openat(s_dirfd, "huge.csv", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    bool have_huge = hfd >= 0 && ftruncate(hfd, (off_t) 1 << 30) == 0;
    if (hfd >= 0) close(hfd);
    s_puts("ok.txt", "fine");

    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, true);
    s_hook_saw_huge = false;
    cb_artifacts_set_test_hook(a, s_hook_huge, NULL);
    alarm(T_FIFO_ALARM_S);
    json_t *b = s_collect(a, NULL);
    alarm(T_ALARM_S);
    TAP_OK(true, "%s: collect next to a FIFO returns (no hang)", mode);
    TAP_OK(s_nowhere(b, "root:") && s_nowhere(b, "HOSTSECRET"), "%s: no host file content anywhere",
           mode);
    TAP_EQ_STR(s_reason(b, "passwd.txt"), "symlink",
               NM("%s: symlink to /etc/passwd: notice, not followed", mode));
    TAP_EQ_STR(s_reason(b, "hostname.txt"), "symlink", NM("%s: second symlink: notice", mode));
    TAP_OK(s_find(b, "etc/passwd") == NULL && s_reason(b, "etc/passwd") == NULL,
           "%s: symlinked directory is not entered", mode);
    if (have_link)
        TAP_EQ_STR(s_reason(b, "hard.txt"), "hard_link",
                   NM("%s: hard link to an outside file refused", mode));
    else
        TAP_SKIP("cannot hard-link across these directories");
    TAP_EQ_STR(s_reason(b, "pipe.txt"), "not_regular", NM("%s: FIFO skipped with notice", mode));
    if (have_sock)
        TAP_EQ_STR(s_reason(b, "sock.csv"), "not_regular",
                   NM("%s: socket skipped with notice", mode));
    else
        TAP_SKIP("cannot bind a unix socket in the temp dir");
    if (have_huge) {
        TAP_EQ_STR(s_reason(b, "huge.csv"), "file_too_large",
                   NM("%s: 1 GiB sparse file skipped by size", mode));
        TAP_OK(!s_hook_saw_huge, "%s: ... without being opened", mode);
    } else {
        TAP_SKIP("cannot create a sparse file");
        TAP_SKIP("cannot create a sparse file");
    }
    TAP_EQ_STR(s_data(s_find(b, "ok.txt"), "text/plain"), "fine",
               NM("%s: the honest file still arrives", mode));
    json_decref(b);
    cb_artifacts_destroy(&a);
    close(sfd);

    /* The safe-open primitive itself. */
    int rfd = openat(s_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    errno = 0;
    int fd = cb_artifacts_fs_open_beneath(rfd, "etc/passwd", O_RDONLY);
    TAP_OK(fd < 0 && (errno == ELOOP || errno == ENOTDIR),
           "%s: open_beneath refuses a symlinked component (%s)", mode, strerror(errno));
    fd = cb_artifacts_fs_open_beneath(rfd, "passwd.txt", O_RDONLY);
    TAP_OK(fd < 0 && errno == ELOOP, "%s: open_beneath refuses a final symlink", mode);
    fd = cb_artifacts_fs_open_beneath(rfd, "../etc/passwd", O_RDONLY);
    TAP_OK(fd < 0 && errno == EINVAL, "%s: open_beneath refuses ..", mode);
    fd = cb_artifacts_fs_open_beneath(rfd, "/etc/passwd", O_RDONLY);
    TAP_OK(fd < 0 && errno == EINVAL, "%s: open_beneath refuses absolute paths", mode);
    fd = cb_artifacts_fs_open_beneath(rfd, "pipe.txt", O_RDONLY | O_NONBLOCK);
    TAP_OK(fd >= 0, "%s: open_beneath of a FIFO with O_NONBLOCK does not block", mode);
    if (fd >= 0) close(fd);
    close(rfd);
    unlink(outside_file);
}

/* ---- races via the test hook ------------------------------------------ */

typedef enum { R_GROW, R_SHRINK, R_REWRITE, R_SYMLINK, R_FIFO, R_HARDLINK } s_race_t;

static void s_hook_race(cb_artifacts_hook_stage_t stage, const char *path, void *arg) {
    s_race_t r = *(s_race_t *) arg;
    if (strcmp(path, "victim.txt") != 0) return;
    bool before_open = stage == CB_ARTIFACTS_HOOK_BEFORE_OPEN;
    if (r == R_GROW && !before_open) {
        int fd = openat(s_dirfd, "victim.txt", O_WRONLY | O_APPEND | O_CLOEXEC);
        (void) !write(fd, "MORE", 4);
        close(fd);
    } else if (r == R_SHRINK && !before_open) {
        int fd = openat(s_dirfd, "victim.txt", O_WRONLY | O_CLOEXEC);
        (void) !ftruncate(fd, 2);
        close(fd);
    } else if (r == R_REWRITE && !before_open) {
        s_sleep_tick();
        int fd = openat(s_dirfd, "victim.txt", O_WRONLY | O_CLOEXEC);
        (void) !write(fd, "XXXX", 4);
        close(fd);
    } else if (r == R_SYMLINK && before_open) {
        unlinkat(s_dirfd, "victim.txt", 0);
        symlinkat("/etc/passwd", s_dirfd, "victim.txt");
    } else if (r == R_FIFO && before_open) {
        unlinkat(s_dirfd, "victim.txt", 0);
        mkfifoat(s_dirfd, "victim.txt", 0644);
    } else if (r == R_HARDLINK && before_open) {
        char src[128];
        snprintf(src, sizeof src, "%s/host-secret.txt", s_outside);
        int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        (void) !write(fd, "HOSTSECRET", 10);
        close(fd);
        unlinkat(s_dirfd, "victim.txt", 0);
        (void) !linkat(AT_FDCWD, src, s_dirfd, "victim.txt", 0);
        unlink(src); /* the link in the workdir keeps it alive with nlink 1 */
    }
}

static void test_races(const char *mode) {
    static const struct {
        s_race_t race;
        const char *name;
        const char *reason;
    } cases[] = {
        {R_GROW, "grows between fstat and read", "changed_while_read"},
        {R_SHRINK, "shrinks between fstat and read", "changed_while_read"},
        {R_REWRITE, "rewritten in place between fstat and read", "changed_while_read"},
        {R_SYMLINK, "replaced by a symlink before open", "symlink"},
        {R_FIFO, "replaced by a FIFO before open", "not_regular"},
        {R_HARDLINK, "replaced by a link to an outside file before open", "changed_while_read"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_fresh();
        s_puts("victim.txt", "original content");
        cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
        s_race_t r = cases[i].race;
        cb_artifacts_set_test_hook(a, s_hook_race, &r);
        alarm(T_FIFO_ALARM_S);
        json_t *b = s_collect(a, NULL);
        alarm(T_ALARM_S);
        const char *reason = s_reason(b, "victim.txt");
        bool sym_or_changed = reason && (strcmp(reason, cases[i].reason) == 0 ||
                                         strcmp(reason, "changed_while_read") == 0);
        TAP_OK(s_find(b, "victim.txt") == NULL && sym_or_changed, "%s: file %s: skipped (%s)", mode,
               cases[i].name, reason ? reason : "no notice");
        TAP_OK(s_nowhere(b, "root:") && s_nowhere(b, "HOSTSECRET"), "%s: ... no host content",
               mode);
        json_decref(b);
        if (r == R_GROW) {
            cb_artifacts_set_test_hook(a, NULL, NULL);
            b = s_collect(a, NULL);
            TAP_EQ_STR(s_data(s_find(b, "victim.txt"), "text/plain"), "original contentMORE",
                       "... and returned whole next cell");
            json_decref(b);
        }
        cb_artifacts_destroy(&a);
    }
}

static void test_many_and_deep(void) {
    s_fresh();
    s_mkdir("many");
    for (int i = 0; i < T_MANY_FILES; i++) {
        char name[64];
        snprintf(name, sizeof name, "many/f%05d.txt", i);
        int fd = openat(s_dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) break;
        (void) !write(fd, "x", 1);
        close(fd);
    }
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *sum = NULL;
    json_t *b = s_collect(a, &sum);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
    TAP_EQ_INT(json_array_size(sum), CB_ARTIFACTS_DEFAULT_MAX_FILES, "20000 files: 50 sent");
    TAP_OK(s_reason(b, ".") == NULL, "scan_limit item is beyond the listed 50");
    size_t total = s_notice_total(b);
    TAP_OK(total == CB_ARTIFACTS_DEFAULT_MAX_ENTRIES - 1 - CB_ARTIFACTS_DEFAULT_MAX_FILES + 1,
           "notice counts every skipped file plus the scan limit (%zu)", total);
    json_t *last = json_array_get(b, json_array_size(b) - 1);
    const char *text = s_data(last, "text/plain");
    TAP_OK(text && strstr(text, "more (see the kernel log)") != NULL,
           "notice is bounded (... and N more)");
    char *dump = json_dumps(b, JSON_COMPACT);
    TAP_OK(dump && strlen(dump) < (1u << 20), "whole reply stays small (%zu bytes)",
           dump ? strlen(dump) : 0);
    free(dump);
    TAP_OK(secs < 20.0, "bounded scan is quick (%.2fs)", secs);
    json_decref(b);
    json_decref(sum);
    b = s_collect(a, NULL);
    TAP_EQ_INT(json_array_size(b), 1, "next cell: only the scan-limit notice");
    TAP_EQ_STR(json_string_value(json_object_get(json_array_get(s_notice(b), 0), "reason")),
               "scan_limit", "... reason scan_limit");
    json_decref(b);
    cb_artifacts_destroy(&a);

    s_fresh();
    char path[1024] = "";
    for (int i = 0; i < T_DEEP; i++) {
        size_t used = strlen(path);
        snprintf(path + used, sizeof path - used, "%s", i ? "/d" : "d");
        s_mkdir(path);
        char f[1100];
        snprintf(f, sizeof f, "%s/level%02d.txt", path, i + 1);
        s_puts(f, "deep");
    }
    a = s_new(CB_ARTIFACTS_ALL, false);
    b = s_collect(a, &sum);
    TAP_EQ_INT(json_array_size(sum), CB_ARTIFACTS_DEFAULT_MAX_DEPTH,
               "deep tree: files in the first max_depth levels are sent");
    json_t *sk = s_notice(b);
    TAP_OK(json_array_size(sk) == 1 &&
               strcmp(json_string_value(json_object_get(json_array_get(sk, 0), "reason")),
                      "too_deep") == 0,
           "... one too_deep notice for the directory below");
    json_decref(b);
    json_decref(sum);
    cb_artifacts_destroy(&a);
}

/* A mount inside the workdir is not crossed (RESOLVE_NO_XDEV, or the device
 * check of the fallback).  Needs a private mount namespace: done in a child,
 * which exits 0 (pass), 1 (fail) or T_SKIP (cannot set up). */
enum { T_SKIP = 77 };

static int s_mount_child(bool fallback) {
    if (unshare(CLONE_NEWNS) < 0) {
        /* Unprivileged: a user namespace grants mounting (if the host allows it). */
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return T_SKIP;
        char map[64];
        int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            (void) !write(fd, "deny", 4);
            close(fd);
        }
        snprintf(map, sizeof map, "0 %u 1", (unsigned) uid);
        fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) < 0) return T_SKIP;
        close(fd);
        snprintf(map, sizeof map, "0 %u 1", (unsigned) gid);
        fd = open("/proc/self/gid_map", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, map, strlen(map)) < 0) return T_SKIP;
        close(fd);
    }
    if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0) return T_SKIP;
    s_mkdir("mnt");
    char where[128];
    snprintf(where, sizeof where, "%s/mnt", s_root);
    if (mount("tmpfs", where, "tmpfs", 0, "size=1m") < 0) return T_SKIP;
    close(s_dirfd); /* the old fd still sees the parent namespace's mounts */
    s_dirfd = open(s_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (s_dirfd < 0) return 1;
    s_puts("mnt/inside.txt", "on another fs");
    s_puts("top.txt", "top");
    cb_artifacts_force_fallback(fallback);
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *b = s_collect(a, NULL);
    const char *reason = s_reason(b, "mnt");
    bool ok = s_find(b, "mnt/inside.txt") == NULL && s_find(b, "top.txt") != NULL && reason &&
              strcmp(reason, "mount_point") == 0;
    json_decref(b);
    cb_artifacts_destroy(&a);
    umount2(where, MNT_DETACH);
    close(s_dirfd);
    return ok ? 0 : 1;
}

static void test_mount(void) {
    for (int fallback = 0; fallback < 2; fallback++) {
        s_fresh();
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) _exit(s_mount_child(fallback));
        int status = 0;
        waitpid(pid, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code == T_SKIP)
            TAP_SKIP("mount point test needs a private mount namespace (CAP_SYS_ADMIN or user "
                     "namespaces)");
        else
            TAP_OK(code == 0, "%s: a mount point inside the workdir is not crossed",
                   fallback ? "fallback" : "openat2");
    }
}

static void test_bad_dirfd(void) {
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *sum = (json_t *) 1;
    json_t *b = cb_artifacts_collect(a, -1, &sum);
    TAP_OK(b == NULL && sum == NULL, "bad dirfd: NULL and NULL summary");
    cb_artifacts_destroy(&a);
}

int main(void) {
    alarm(T_ALARM_S);
    cb_log_threshold = getenv("CB_TEST_LOG") ? CB_LOG_DEBUG : CB_LOG_CRITICAL;
    if (sodium_init() < 0) return 2;
    snprintf(s_outside, sizeof s_outside, "/tmp/cb-art-out.XXXXXX");
    if (mkdtemp(s_outside) == NULL) return 2;

    test_api();
    test_kinds();
    test_changes();
    test_baseline();
    test_tree_and_names();
    test_content_checks();
    test_limits();
    test_abuse("openat2");
    test_races("openat2");
    cb_artifacts_force_fallback(true);
    test_abuse("fallback");
    test_races("fallback");
    test_tree_and_names();
    cb_artifacts_force_fallback(false);
    test_many_and_deep();
    test_mount();
    test_bad_dirfd();

    close(s_dirfd);
    nftw(s_root, s_rm, 64, FTW_DEPTH | FTW_PHYS);
    rmdir(s_outside);
    TAP_DONE();
}
