/*
 * fuzz_artifacts.c - the names and trees the artifact collector walks
 * (artifacts/), and `cellblock run --out DIR`'s writes (kernel/outdir.c).
 *
 * Each input builds a small tree on tmpfs, as code in a sandbox would leave
 * its working directory, and runs the real collector on it twice; then the
 * names it returned, and the raw names of the input, are written with
 * cb_outdir_write into an output directory that already holds traps.
 *
 *   base/            (a fresh temporary directory per input)
 *     root/          the working directory handed to cb_artifacts_collect
 *     outside/       secret.txt, secret.png: a canary no collect may read
 *     out/           the --out DIR: existing.png, link.png -> ../victim/owned.png,
 *                    sub -> ../victim, .hidden.txt
 *     victim/        empty: nothing may ever appear in it
 *
 * Input: one mode byte (bit 0: images only, bit 1: unknown types as binary,
 * bit 2: the O_NOFOLLOW fallback instead of openat2, bits 3-7: limits),
 * then entries separated by 0xff, each "<kind byte><path>\0<data>":
 *   kind % 8: 0 file with data, 1 directory, 2 symlink to data (anywhere:
 *   ../outside/secret.txt, /etc, ...), 3 hard link to outside/secret.png,
 *   4 fifo, 5 after the first collect: rewrite the file with data, 6 after
 *   the first collect: rename to data, 7 after the first collect: remove.
 * The harness creates entries only beneath root/, a component at a time
 * without following links; paths with ".." or a leading "/" are skipped.
 *
 * Properties: every artifact returned names a regular file with one link,
 * beneath root without any link on the way, not hidden, within the depth
 * limit, whose bytes hash to the sha256 and size reported; the summary lists
 * exactly the artifacts; the per-cell file and byte limits hold; the canary
 * appears in nothing returned; at most one notice, last.  cb_outdir_write
 * refuses every name cb_outdir_name_ok refuses (EINVAL), writes exactly the
 * bytes under a name beneath out/ without links, never overwrites, and
 * nothing appears in victim/ or next to the four directories.
 */
#include "fuzz/common.h"
#include "artifacts/artifacts.h"
#include "kernel/outdir.h"
#include "isolate/names.h"

#include <linux/openat2.h>
#include <sodium.h>
#include <sys/syscall.h>

#define FZ_ENTRIES_MAX 48   /* entries of one input */
#define FZ_CANARY_LEN  32   /* random bytes of the canary */
#define FZ_NAME_MAX    1024 /* bytes of one entry's path */

static char g_canary[2 * FZ_CANARY_LEN + 1]; /* hex, fresh per process */
static uint8_t g_secret_sha[crypto_hash_sha256_BYTES];
static uint8_t g_secret_png_sha[crypto_hash_sha256_BYTES];
static const uint8_t s_png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    fz_quiet_log();
    if (sodium_init() < 0) return -1;
    uint8_t r[FZ_CANARY_LEN];
    randombytes_buf(r, sizeof r);
    sodium_bin2hex(g_canary, sizeof g_canary, r, sizeof r);
    crypto_hash_sha256(g_secret_sha, (const uint8_t *) g_canary, strlen(g_canary));
    uint8_t png[sizeof s_png_magic + sizeof g_canary];
    memcpy(png, s_png_magic, sizeof s_png_magic);
    memcpy(png + sizeof s_png_magic, g_canary, sizeof g_canary);
    crypto_hash_sha256(g_secret_png_sha, png, sizeof png);
    return 0;
}

/* ---- files ------------------------------------------------------------------------------ */

static int s_open_beneath(int dirfd, const char *path, int flags) {
    struct open_how how = {.flags = (unsigned long long) (flags | O_CLOEXEC | O_NOFOLLOW),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    return (int) syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

static int s_write_file(int dirfd, const char *name, const void *data, size_t len, int flags) {
    /* O_NONBLOCK: a FIFO an earlier entry made under this name fails (ENXIO)
     * instead of blocking the harness */
    int fd =
        openat(dirfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | flags, 0644);
    if (fd < 0) return -1;
    ssize_t w = len ? write(fd, data, len) : 0;
    close(fd);
    return w == (ssize_t) len ? 0 : -1;
}

/* Reads a whole (small) file beneath dirfd without links: malloc'd, or NULL. */
static uint8_t *s_slurp(int dirfd, const char *path, size_t *len, struct stat *st) {
    int fd = s_open_beneath(dirfd, path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return NULL;
    uint8_t *buf = NULL;
    if (fstat(fd, st) == 0 && S_ISREG(st->st_mode)) {
        buf = malloc((size_t) st->st_size + 1);
        ssize_t r = buf ? pread(fd, buf, (size_t) st->st_size, 0) : -1;
        if (r != st->st_size) {
            free(buf);
            buf = NULL;
        }
        *len = (size_t) st->st_size;
    }
    close(fd);
    return buf;
}

/* An entry's path is usable when it is relative, has no "." or ".."
 * component and no empty one.  Hidden names are allowed: the walk must skip
 * them itself. */
static bool s_harness_path_ok(const char *p) {
    if (p[0] == '\0' || p[0] == '/') return false;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t) (e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        s += n + (e ? 1 : 0);
    }
    return true;
}

/* Opens (creating with mkdir when asked) the parent directory of path
 * beneath rootfd, one component at a time without following links; *base
 * points at the last component.  fd or -1. */
static int s_parent(int rootfd, const char *path, bool create, const char **base) {
    int dfd = dup(rootfd);
    const char *s = path;
    for (const char *e; dfd >= 0 && (e = strchr(s, '/')) != NULL; s = e + 1) {
        char comp[FZ_NAME_MAX];
        snprintf(comp, sizeof comp, "%.*s", (int) (e - s), s);
        if (create) (void) mkdirat(dfd, comp, 0755);
        int next = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        dfd = next;
    }
    *base = s;
    return dfd;
}

/* ---- the tree ---------------------------------------------------------------------------- */

typedef struct {
    unsigned kind; /* 0..7, see the top */
    char path[FZ_NAME_MAX];
    const uint8_t *data; /* borrowed from the input */
    size_t len;
} s_entry_t;

static void s_apply(int basefd, int rootfd, const s_entry_t *e) {
    if (!s_harness_path_ok(e->path)) return;
    const char *base;
    int dfd = s_parent(rootfd, e->path, e->kind <= 4, &base);
    if (dfd < 0) return;
    char target[FZ_NAME_MAX];
    snprintf(target, sizeof target, "%.*s", (int) e->len, (const char *) e->data);
    switch (e->kind) {
    case 0: (void) s_write_file(dfd, base, e->data, e->len, O_TRUNC); break;
    case 1: (void) mkdirat(dfd, base, 0755); break;
    case 2: (void) symlinkat(target, dfd, base); break;
    case 3: (void) linkat(basefd, "outside/secret.png", dfd, base, 0); break;
    case 4: (void) mkfifoat(dfd, base, 0644); break;
    case 5: {
        struct stat st;
        if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_nlink == 1)
            (void) s_write_file(dfd, base, e->data, e->len, O_TRUNC);
        break;
    }
    case 6:
        /* to a single new name in the same directory: never out of root */
        if (strchr(target, '/') == NULL && s_harness_path_ok(target))
            (void) renameat(dfd, base, dfd, target);
        break;
    default: (void) unlinkat(dfd, base, 0); break;
    }
    close(dfd);
}

/* ---- checks of what the collector returned ----------------------------------------------- */

/* A search by hand: libFuzzer watches strstr/memcmp and would learn the
 * canary from the check itself, then write it into the tree. */
static bool s_contains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (const char *h = hay; *h; h++) {
        size_t k = 0;
        while (k < n && h[k] == needle[k])
            k++;
        if (k == n) return true;
    }
    return false;
}

static void s_check_no_canary(const json_t *v) {
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    FZ_CHECK(text != NULL, "bundles serialise");
    FZ_CHECK(!s_contains(text, g_canary), "the outside canary was returned");
    free(text);
}

static unsigned s_depth(const char *p) {
    unsigned d = 0;
    for (; *p; p++)
        d += *p == '/';
    return d;
}

static bool s_hidden(const char *p) {
    if (p[0] == '.') return true;
    return strstr(p, "/.") != NULL;
}

/* Returns the number of artifact bundles; checks each against the tree. */
static size_t s_check_bundles(int rootfd, const json_t *bundles, const json_t *summary,
                              const cb_artifacts_limits_t *lim, size_t *bytes) {
    FZ_CHECK(json_is_array(bundles) && json_is_array(summary), "arrays");
    size_t n = json_array_size(bundles), arts = 0;
    *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *b = json_array_get(bundles, i);
        FZ_CHECK(json_is_object(json_object_get(b, "data")), "bundle data");
        const json_t *cb = json_object_get(json_object_get(b, "metadata"), "cellblock");
        const json_t *art = json_object_get(cb, "artifact");
        if (art == NULL) {
            FZ_CHECK(json_object_get(cb, "artifact_notice") != NULL, "an artifact or a notice");
            FZ_CHECK(i == n - 1, "the notice comes last");
            continue;
        }
        const char *path = json_string_value(json_object_get(art, "path"));
        const char *sha = json_string_value(json_object_get(art, "sha256"));
        json_int_t size = json_integer_value(json_object_get(art, "size"));
        FZ_CHECK(path && sha && strlen(sha) == 64 && size >= 0, "artifact fields");
        const json_t *s = json_array_get(summary, arts);
        FZ_CHECK(s && json_equal(json_object_get(s, "path"), json_object_get(art, "path")) &&
                     json_equal(json_object_get(s, "sha256"), json_object_get(art, "sha256")),
                 "the summary lists artifact %zu", arts);
        arts++;
        *bytes += (size_t) size;
        FZ_CHECK(!s_hidden(path), "hidden path returned: %s", path);
        FZ_CHECK(s_depth(path) <= lim->max_depth, "%s deeper than %u", path, lim->max_depth);
        if (json_is_true(json_object_get(art, "path_escaped"))) continue;
        size_t len = 0;
        struct stat st;
        uint8_t *buf = s_slurp(rootfd, path, &len, &st);
        FZ_CHECK(buf != NULL, "%s is not a regular file beneath root without links (errno %d)",
                 path, errno);
        FZ_CHECK(st.st_nlink == 1, "%s has %ju links", path, (uintmax_t) st.st_nlink);
        FZ_CHECK(len == (size_t) size, "%s: size %zu, reported %lld", path, len, (long long) size);
        uint8_t d[crypto_hash_sha256_BYTES];
        char hex[2 * crypto_hash_sha256_BYTES + 1];
        crypto_hash_sha256(d, buf, len);
        sodium_bin2hex(hex, sizeof hex, d, sizeof d);
        FZ_CHECK(strcmp(hex, sha) == 0, "%s: sha256 of the bytes sent", path);
        FZ_CHECK(memcmp(d, g_secret_sha, sizeof d) != 0 &&
                     memcmp(d, g_secret_png_sha, sizeof d) != 0,
                 "%s: the outside secret", path);
        free(buf);
    }
    FZ_CHECK(json_array_size(summary) == arts, "summary has %zu entries for %zu artifacts",
             json_array_size(summary), arts);
    FZ_CHECK(arts <= lim->max_files, "%zu files over the limit %zu", arts, lim->max_files);
    FZ_CHECK(*bytes <= lim->max_cell_bytes, "%zu bytes over the limit", *bytes);
    s_check_no_canary(bundles);
    return arts;
}

static void s_collect(cb_artifacts_t *a, int rootfd, const cb_artifacts_limits_t *lim,
                      json_t **summary_out) {
    json_t *summary = NULL;
    json_t *bundles = cb_artifacts_collect(a, rootfd, &summary);
    FZ_CHECK(bundles != NULL && summary != NULL, "a collect succeeds");
    size_t bytes;
    (void) s_check_bundles(rootfd, bundles, summary, lim, &bytes);
    json_decref(bundles);
    if (summary_out)
        *summary_out = summary;
    else
        json_decref(summary);
}

/* ---- --out DIR ------------------------------------------------------------------------------ */

static bool s_name_props(const char *rel) {
    if (rel[0] == '\0' || rel[0] == '/' || !cb_names_path_ok(rel)) return false;
    for (const char *s = rel; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t) (e - s) : strlen(s);
        if (n == 0 || s[0] == '.') return false;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char) s[i] < 0x20) return false;
        s += n + (e ? 1 : 0);
    }
    const char *b = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    return strrchr(b, '.') != NULL && strrchr(b, '.') != b;
}

static void s_out_write(cb_outdir_t *o, int outfd, const char *rel, const uint8_t *data,
                        size_t len) {
    bool ok = cb_outdir_name_ok(rel);
    if (ok) FZ_CHECK(s_name_props(rel), "cb_outdir_name_ok accepted '%s'", rel);
    char used[FZ_NAME_MAX * 2];
    memset(used, 0, sizeof used);
    errno = 0;
    int rc = cb_outdir_write(o, rel, data, len, used, sizeof used);
    if (!ok) {
        FZ_CHECK(rc == -1 && errno == EINVAL, "a refused name was written: '%s'", rel);
        return;
    }
    if (rc != 0) return; /* ENAMETOOLONG, EEXIST on the way, ... */
    FZ_CHECK(s_name_props(used), "written under a name it would refuse: '%s'", used);
    FZ_CHECK(strcmp(used, "existing.png") != 0, "an existing file was overwritten");
    size_t got = 0;
    struct stat st;
    uint8_t *buf = s_slurp(outfd, used, &got, &st);
    FZ_CHECK(buf != NULL, "'%s' (for '%s') is not a file beneath out/ without links", used, rel);
    FZ_CHECK(got == len && (len == 0 || memcmp(buf, data, len) == 0), "'%s' holds the bytes", used);
    free(buf);
}

static size_t s_count_entries(int dirfd) {
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0) close(fd);
        return (size_t) -1;
    }
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Every entry below dirfd is a regular file or a directory (the traps aside). */
static void s_check_out_tree(int dirfd, int level) {
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    FZ_CHECK(d != NULL, "out/ readable");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        FZ_CHECK(fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0, "stat");
        if (level == 0 && (strcmp(e->d_name, "link.png") == 0 || strcmp(e->d_name, "sub") == 0)) {
            FZ_CHECK(S_ISLNK(st.st_mode), "trap %s replaced", e->d_name);
            continue;
        }
        FZ_CHECK(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode), "out/ holds a %o: %s", st.st_mode,
                 e->d_name);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            FZ_CHECK(sub >= 0, "subdirectory");
            s_check_out_tree(sub, level + 1);
            close(sub);
        }
    }
    closedir(d);
}

/* ---- one input ------------------------------------------------------------------------------ */

static void s_limits(uint8_t mode, cb_artifacts_limits_t *lim) {
    cb_artifacts_limits_default(lim);
    lim->mode = (mode & 1u) ? CB_ARTIFACTS_IMAGES : CB_ARTIFACTS_ALL;
    lim->binary = (mode & 2u) != 0;
    unsigned l = mode >> 3;
    lim->max_files = 1 + (l & 3u) * 3;        /* 1, 4, 7, 10 */
    lim->max_depth = (l >> 2) & 3u;           /* 0..3 */
    lim->max_entries = (l & 16u) ? 8 : 10000; /* the scan limit, or plenty */
    lim->max_file_bytes = 1024;
    lim->max_cell_bytes = 2048;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t mode = data[0];
    cb_artifacts_limits_t lim;
    s_limits(mode, &lim);
    static fz_part_t parts[FZ_ENTRIES_MAX];
    static s_entry_t ents[FZ_ENTRIES_MAX];
    size_t n = fz_split(data + 1, size - 1, parts, FZ_ENTRIES_MAX);
    for (size_t i = 0; i < n; i++) {
        s_entry_t *e = &ents[i];
        const uint8_t *p = parts[i].p;
        size_t len = parts[i].n;
        e->kind = len ? p[0] % 8u : 0;
        const uint8_t *name = len ? p + 1 : p, *end = p + len;
        const uint8_t *nul = memchr(name, '\0', (size_t) (end - name));
        size_t nl = (size_t) ((nul ? nul : end) - name);
        snprintf(e->path, sizeof e->path, "%.*s", (int) (nl < FZ_NAME_MAX ? nl : FZ_NAME_MAX - 1),
                 (const char *) name);
        e->data = nul ? nul + 1 : end;
        e->len = (size_t) (end - e->data);
    }

    char base[FZ_TMP_PATH_MAX];
    FZ_CHECK(fz_mkdtemp("artifacts", base) == 0, "a temporary directory (errno %d)", errno);
    int basefd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FZ_CHECK(basefd >= 0, "open base");
    mkdirat(basefd, "root", 0755);
    mkdirat(basefd, "outside", 0755);
    mkdirat(basefd, "out", 0755);
    mkdirat(basefd, "victim", 0755);
    int rootfd = openat(basefd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int outsidefd = openat(basefd, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int outfd = openat(basefd, "out", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int victimfd = openat(basefd, "victim", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    FZ_CHECK(rootfd >= 0 && outsidefd >= 0 && outfd >= 0 && victimfd >= 0, "the layout");
    uint8_t png[sizeof s_png_magic + sizeof g_canary];
    memcpy(png, s_png_magic, sizeof s_png_magic);
    memcpy(png + sizeof s_png_magic, g_canary, sizeof g_canary);
    FZ_CHECK(s_write_file(outsidefd, "secret.txt", g_canary, strlen(g_canary), O_EXCL) == 0 &&
                 s_write_file(outsidefd, "secret.png", png, sizeof png, O_EXCL) == 0 &&
                 s_write_file(outfd, "existing.png", "keep", 4, O_EXCL) == 0 &&
                 s_write_file(outfd, ".hidden.txt", "keep", 4, O_EXCL) == 0 &&
                 symlinkat("../victim/owned.png", outfd, "link.png") == 0 &&
                 symlinkat("../victim", outfd, "sub") == 0,
             "the traps");

    /* the cell: phase 1 builds, collect; phase 2 changes, collect again */
    cb_artifacts_force_fallback((mode & 4u) != 0);
    cb_artifacts_t *a = cb_artifacts_new(&lim);
    FZ_CHECK(a != NULL, "a collector");
    for (size_t i = 0; i < n; i++)
        if (ents[i].kind <= 4) s_apply(basefd, rootfd, &ents[i]);
    s_collect(a, rootfd, &lim, NULL);
    for (size_t i = 0; i < n; i++)
        if (ents[i].kind > 4) s_apply(basefd, rootfd, &ents[i]);
    json_t *summary = NULL;
    s_collect(a, rootfd, &lim, &summary);
    cb_artifacts_destroy(&a);
    cb_artifacts_force_fallback(false);

    /* --out DIR: what the collector returned, then every raw name */
    char outpath[FZ_TMP_PATH_MAX + 8];
    snprintf(outpath, sizeof outpath, "%s/out", base);
    cb_outdir_t *o = cb_outdir_open(outpath);
    FZ_CHECK(o != NULL, "cb_outdir_open");
    size_t i;
    json_t *s;
    json_array_foreach(summary, i, s) {
        const char *rel = json_string_value(json_object_get(s, "path"));
        size_t len = 0;
        struct stat st;
        uint8_t *buf = rel ? s_slurp(rootfd, rel, &len, &st) : NULL;
        if (buf) s_out_write(o, outfd, rel, buf, len);
        free(buf);
    }
    json_decref(summary);
    for (i = 0; i < n; i++)
        s_out_write(o, outfd, ents[i].path, ents[i].data, ents[i].len);
    cb_outdir_close(&o);

    FZ_CHECK(s_count_entries(victimfd) == 0, "something was written through a link into victim/");
    FZ_CHECK(s_count_entries(basefd) == 4, "something appeared next to root/, out/, ...");
    FZ_CHECK(s_count_entries(outsidefd) == 2, "something appeared in outside/");
    size_t len = 0;
    struct stat st;
    uint8_t *keep = s_slurp(outfd, "existing.png", &len, &st);
    FZ_CHECK(keep && len == 4 && memcmp(keep, "keep", 4) == 0, "existing.png overwritten");
    free(keep);
    s_check_out_tree(outfd, 0);

    close(rootfd);
    close(outsidefd);
    close(outfd);
    close(victimfd);
    close(basefd);
    fz_rmtree(base);
    return 0;
}
