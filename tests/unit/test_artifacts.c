/*
 * test_artifacts.c - the artifact collector against real files in a temp
 * directory: every kind, change tracking, baselines, names, content checks,
 * limits and notices (the abuses are test_artifacts_abuse.c).  Prints TAP.
 * An alarm() turns any hang into a failure.
 */
#include "artifacts_kit.h"

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
               "[artifact] new\\nline.txt (2 B, text/plain)",
               "newline in a name stays on one line (ls -b style)");
    TAP_OK(s_notice(b) == NULL, "no notice for ordinary trees");
    json_decref(b);
    cb_artifacts_destroy(&a);
}

/* A name with a bidi override, a C1 control or DEL is shown escaped in the
 * description and in the notice (names.c), and kept exactly in the
 * metadata's path, which clients check against the same policy. */
static void test_names_shown_escaped(void) {
    s_fresh();
    s_puts("invoice\xe2\x80\xae"
           "fdp.txt",
           "x");
    s_puts("csi\xc2\x9b"
           "2J.txt",
           "x");
    s_puts("del\x7f.txt", "x");
    TAP_OK(symlinkat("/etc/passwd", s_dirfd, "link\xe2\x80\xae.txt") == 0,
           "symlink with a bidi name");
    cb_artifacts_t *a = s_new(CB_ARTIFACTS_ALL, false);
    json_t *b = s_collect(a, NULL);
    static const char *const cases[][2] = {
        {"invoice\xe2\x80\xae"
         "fdp.txt",
         "[artifact] invoice\\342\\200\\256fdp.txt (1 B, text/plain)"},
        {"csi\xc2\x9b"
         "2J.txt",
         "[artifact] csi\\302\\2332J.txt (1 B, text/plain)"},
        {"del\x7f.txt", "[artifact] del\\177.txt (1 B, text/plain)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *x = s_find(b, cases[i][0]);
        TAP_OK(x != NULL, "'%s' is returned under its exact path", cases[i][1]);
        json_t *art = json_object_get(json_object_get(json_object_get(x, "metadata"), "cellblock"),
                                      "artifact");
        TAP_EQ_STR(json_string_value(json_object_get(art, "description")), cases[i][1],
                   "its description shows the name escaped");
    }
    json_t *n = json_array_get(b, json_array_size(b) - 1);
    const char *text = json_string_value(json_object_get(json_object_get(n, "data"), "text/plain"));
    TAP_OK(text && strstr(text, "link\\342\\200\\256.txt: symbolic link") != NULL,
           "the notice shows a skipped name escaped");
    TAP_OK(text && strstr(text, "\xe2\x80\xae") == NULL, "... and never raw");
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


int main(void) {
    if (s_kit_start() < 0) return 2;

    test_api();
    test_kinds();
    test_changes();
    test_baseline();
    test_tree_and_names();
    test_names_shown_escaped();
    test_content_checks();
    test_limits();
    cb_artifacts_force_fallback(true);
    test_tree_and_names();
    cb_artifacts_force_fallback(false);

    s_kit_end();
    TAP_DONE();
}
