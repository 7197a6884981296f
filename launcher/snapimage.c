/*
 * snapimage.c - sealing and verifying images of paused sessions (see
 * snapimage.h and docs/SNAPSHOTS.md).
 *
 * The manifest (files.json) is a JSON object built the same way twice: at
 * sealing, from the image directory the sandbox's supervisor wrote, and at
 * resume, from the directory as it is then; the resume goes on only when
 * files.mac (HMAC-SHA256, libsodium) vouches for the text of files.json
 * before a byte of it is parsed, and the object rebuilt equals it.  So a
 * file changed, added or removed, an image of another host (another key),
 * or one of other host software (the pins) is refused before runsc or our
 * own tree restore reads anything.  File digests are OpenSSL's SHA-256
 * (SHA-NI where the CPU has it).  The walk never follows a symlink (they
 * are entries with their target), opens nothing but regular files and
 * directories, and is bounded in depth, entries and bytes.
 */
#include "launcher/snapimage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/snap_limits.h"
#include "isolate/util.h"
#include "launcher/report.h"
#include "tiers/tier_limits.h"

#define S_KEY_FILE   "../.key"
#define S_FILES      "files.json"
#define S_FILES_MAC  "files.mac"
#define S_READ_CHUNK (1u << 20) /* bytes hashed at once */

static int s_pause_fd = -1;      /* the image being written (a copy of the kernel's fd) */
static char s_pause_id[CB_IMAGE_ID_HEX + 1] = ""; /* its id */

/* ---- the key ------------------------------------------------------------------------ */

/* The store's key, next to the image directory: ours, 0600, 32 bytes. */
static int s_key(int imgfd, uint8_t key[CB_IMAGE_KEY_LEN], char *why, size_t len) {
    cb_autofd int fd = openat(imgfd, S_KEY_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0 || st.st_size != CB_IMAGE_KEY_LEN ||
        cb_read_all(fd, key, CB_IMAGE_KEY_LEN) < 0) {
        cb_fmt_why(why, len, "the image store's key is missing or not private (0600, ours)");
        return -1;
    }
    return 0;
}

/* ---- the manifest ------------------------------------------------------------------ */

typedef struct {
    json_t *files;      /* path -> entry */
    uint64_t bytes;     /* regular files' bytes */
    size_t entries;     /* entries seen */
    char why[160];      /* the first failure */
    unsigned char *buf; /* S_READ_CHUNK */
} s_walk_t;

static int s_digest(s_walk_t *w, int fd, char hex[65]) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, w->buf, S_READ_CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            EVP_MD_CTX_free(ctx);
            return -1;
        }
        if (r == 0) break;
        (void) EVP_DigestUpdate(ctx, w->buf, (size_t) r);
    }
    unsigned char md[32];
    unsigned int mdlen = 0;
    (void) EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    sodium_bin2hex(hex, 65, md, sizeof md);
    return 0;
}

static int s_walk(s_walk_t *w, int dir, const char *prefix, int depth) {
    if (depth > CB_SNAP_DEPTH_MAX) {
        snprintf(w->why, sizeof w->why, "more than %d directory levels", CB_SNAP_DEPTH_MAX);
        return -1;
    }
    DIR *d = cb_opendir_at(dir);
    if (d == NULL) return -1;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0) continue;
        if (depth == 0 && (strcmp(n, S_FILES) == 0 || strcmp(n, S_FILES_MAC) == 0 ||
                           strncmp(n, "kernel.", 7) == 0))
            continue; /* the seals themselves */
        if (++w->entries > CB_SNAP_FILES_MAX + 8) {
            snprintf(w->why, sizeof w->why, "more than %d entries", CB_SNAP_FILES_MAX);
            rc = -1;
            break;
        }
        char path[CB_PATH_MAX];
        if (snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "/" : "", n) >=
            (int) sizeof path) {
            snprintf(w->why, sizeof w->why, "a path too long");
            rc = -1;
            break;
        }
        struct stat st;
        if (fstatat(dir, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = -1;
            break;
        }
        json_t *entry = NULL;
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dir, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            rc = sub < 0 ? -1 : s_walk(w, sub, path, depth + 1);
            if (sub >= 0) close(sub);
            entry = json_pack("{s:s, s:i}", "type", "d", "mode", (int) (st.st_mode & 07777));
        } else if (S_ISREG(st.st_mode)) {
            int f = openat(dir, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            char hex[65];
            struct stat fs;
            if (f < 0 || fstat(f, &fs) < 0 || fs.st_ino != st.st_ino || s_digest(w, f, hex) < 0)
                rc = -1;
            else
                entry =
                    json_pack("{s:s, s:I, s:s, s:i}", "type", "f", "size", (json_int_t) st.st_size,
                              "sha256", hex, "mode", (int) (st.st_mode & 07777));
            if (f >= 0) close(f);
            w->bytes += (uint64_t) st.st_size;
        } else if (S_ISLNK(st.st_mode)) {
            char target[CB_PATH_MAX];
            ssize_t tl = readlinkat(dir, n, target, sizeof target - 1);
            if (tl < 0)
                rc = -1;
            else {
                target[tl] = '\0';
                entry = json_pack("{s:s, s:s}", "type", "l", "target", target);
            }
        } else if (S_ISFIFO(st.st_mode)) {
            entry = json_pack("{s:s}", "type", "p");
        } else {
            snprintf(w->why, sizeof w->why, "a device or socket in the image");
            rc = -1;
        }
        if (entry) json_object_set_new(w->files, path, entry);
    }
    closedir(d);
    if (rc < 0 && w->why[0] == '\0') snprintf(w->why, sizeof w->why, "%s", strerror(errno));
    return rc;
}

static const char *s_tier(const cb_options_t *o) {
    return o->isolation == CB_ISOLATION_GVISOR ? "gvisor" : "namespaces";
}

/* What the image's processes depend on of the host: resuming with any of it
 * changed would map files that are not the ones they had. */
static json_t *s_pins(const cb_options_t *o) {
    json_t *p = json_object();
    /* runsc where the gvisor tier looks for it (tiers/gvisor.c), criu where the launcher does */
    const char *files[] = {o->python,
                           "/var/lib/dpkg/status",
                           "/usr/local/sbin/runsc",
                           "/usr/local/bin/runsc",
                           "/usr/sbin/runsc",
                           "/usr/bin/runsc",
                           "/usr/local/sbin/criu",
                           "/usr/sbin/criu",
                           "/sbin/criu"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char real[CB_PATH_MAX];
        struct stat st;
        if (realpath(files[i], real) == NULL || stat(real, &st) < 0) continue;
        json_object_set_new(
            p, real,
            json_pack("{s:I, s:I, s:I}", "size", (json_int_t) st.st_size, "mtime",
                      (json_int_t) st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec, "ino",
                      (json_int_t) st.st_ino));
    }
    return p;
}

uint64_t cb_snapimage_max_bytes(const cb_options_t *o) {
    /* gVisor's memory holds the sentry's own too, which its cgroup has room for */
    uint64_t tier = o->isolation == CB_ISOLATION_GVISOR ? CB_GVISOR_MEM_MB : 0;
    return ((uint64_t) o->memory_mb + tier + 2 * (uint64_t) o->disk_mb + CB_IMAGE_SLACK_MB)
           << 20;
}

/* The manifest of the image open at imgfd: a new reference, or NULL with why. */
static json_t *s_manifest(const cb_options_t *o, int imgfd, char *why, size_t len) {
    s_walk_t w = {.files = json_object(), .buf = malloc(S_READ_CHUNK)};
    json_t *m = NULL;
    if (w.files == NULL || w.buf == NULL || s_walk(&w, imgfd, "", 0) < 0) {
        cb_fmt_why(why, len, "reading the image: %s", w.why[0] ? w.why : "out of memory");
    } else {
        uint64_t max = cb_snapimage_max_bytes(o);
        if (w.bytes > max)
            cb_fmt_why(why, len,
                       "the image holds %llu MiB, more than the session's limits allow (%llu "
                       "MiB: --memory, the tier's own, twice --disk, and %d MiB)",
                       (unsigned long long) (w.bytes >> 20), (unsigned long long) (max >> 20),
                       CB_IMAGE_SLACK_MB);
        else
            m = json_pack("{s:i, s:s, s:o, s:O, s:I}", "version", 1, "tier", s_tier(o), "pins",
                          s_pins(o), "files", w.files, "bytes", (json_int_t) w.bytes);
    }
    json_decref(w.files);
    free(w.buf);
    return m;
}

/* ---- sealing --------------------------------------------------------------------------- */

/* The image's own files 0600 (runsc and criu make theirs 0644; the
 * directory is 0700 too): the session's memory is the user's secret. */
static void s_private(int imgfd) {
    DIR *dir = cb_opendir_at(imgfd);
    if (dir == NULL) return;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(dir)) != NULL)
        if (fstatat(imgfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            (st.st_mode & 07777) != 0600)
            (void) fchmodat(imgfd, e->d_name, 0600, 0);
    closedir(dir);
}

static int s_seal(const cb_options_t *o, int imgfd, uint64_t *bytes, char *why, size_t len) {
    s_private(imgfd);
    json_auto_t *m = s_manifest(o, imgfd, why, len);
    if (m == NULL) return -1;
    *bytes = (uint64_t) json_integer_value(json_object_get(m, "bytes"));
    cb_autofree char *text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    uint8_t key[CB_IMAGE_KEY_LEN];
    if (text == NULL || s_key(imgfd, key, why, len) < 0) return -1;
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256(mac, (const unsigned char *) text, strlen(text), key);
    sodium_memzero(key, sizeof key);
    char hex[2 * sizeof mac + 1];
    sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
    int fds[2] = {openat(imgfd, S_FILES, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600),
                  openat(imgfd, S_FILES_MAC, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
    int rc = fds[0] >= 0 && fds[1] >= 0 && cb_write_all(fds[0], text, strlen(text)) == 0 &&
                     cb_write_all(fds[1], hex, strlen(hex)) == 0 && fsync(fds[0]) == 0 &&
                     fsync(fds[1]) == 0
                 ? 0
                 : -1;
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) close(fds[i]);
    if (rc < 0) cb_fmt_why(why, len, "writing the image's seal: %s", strerror(errno));
    return rc;
}

int cb_snapimage_command(cb_sandbox_t *sb, const char *line, int fd) {
    char id[CB_IMAGE_ID_HEX + 1];
    bool is_pause = sscanf(line, "pause " CB_IMAGE_ID_SCAN, id) == 1 && fd >= 0;
    if (is_pause) {
        if (s_pause_fd >= 0) close(s_pause_fd);
        s_pause_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        snprintf(s_pause_id, sizeof s_pause_id, "%s", id);
    }
    if (is_pause && cb_sandbox_pauses_by_criu(sb)) return cb_sandbox_criu_pause(sb, line, fd);
    int rc = cb_sandbox_snap_command(sb, line, fd);
    if (rc < 0 && is_pause && s_pause_fd >= 0) { /* this pause is not coming: its fd goes now */
        int e = errno;
        close(s_pause_fd);
        s_pause_fd = -1;
        errno = e;
    }
    return rc;
}

int cb_snapimage_sealed(const cb_options_t *o, const char *id) {
    char why[CB_REPORT_LINE_MAX / 2];
    uint64_t bytes = 0;
    int rc = -1;
    if (s_pause_fd < 0 || strcmp(id, s_pause_id) != 0)
        (void) cb_report("snap fail 0 the sandbox says it paused an image it was not asked for");
    else if (s_seal(o, s_pause_fd, &bytes, why, sizeof why) < 0)
        (void) cb_report("snap fail 0 the image could not be sealed: %s", why);
    else
        rc = cb_report("snap paused %s %llu", id, (unsigned long long) bytes) < 0 ? -1 : 0;
    if (s_pause_fd >= 0) close(s_pause_fd);
    s_pause_fd = -1;
    return rc;
}

void cb_snapimage_abandon(void) {
    if (s_pause_fd >= 0) close(s_pause_fd);
    s_pause_fd = -1;
}

void cb_snapimage_answer(const cb_options_t *o, const char *line) {
    char id[CB_IMAGE_ID_HEX + 1];
    if (sscanf(line, "paused " CB_IMAGE_ID_SCAN, id) != 1)
        (void) cb_report("snap %s", line);
    else
        (void) cb_snapimage_sealed(o, id);
}

/* ---- verifying ---------------------------------------------------------------------------- */

static json_t *s_read_sealed(int imgfd, char *why, size_t len) {
    cb_autofd int f = openat(imgfd, S_FILES, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    cb_autofd int mf = openat(imgfd, S_FILES_MAC, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    char hex[2 * crypto_auth_hmacsha256_BYTES + 1] = "";
    if (f < 0 || mf < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        st.st_size > CB_IMAGE_MANIFEST_MAX || cb_read_all(mf, hex, sizeof hex - 1) < 0) {
        cb_fmt_why(why, len, "it is not a sealed image of this kernel (files.json, files.mac)");
        return NULL;
    }
    cb_autofree char *text = malloc((size_t) st.st_size + 1);
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    uint8_t key[CB_IMAGE_KEY_LEN];
    if (text == NULL || cb_read_all(f, text, (size_t) st.st_size) < 0 ||
        sodium_hex2bin(mac, sizeof mac, hex, strlen(hex), NULL, NULL, NULL) != 0 ||
        s_key(imgfd, key, why, len) < 0) {
        if (why[0] == '\0') cb_fmt_why(why, len, "its seal cannot be read");
        return NULL;
    }
    int bad =
        crypto_auth_hmacsha256_verify(mac, (const unsigned char *) text, (size_t) st.st_size, key);
    sodium_memzero(key, sizeof key);
    if (bad) { /* before any parser reads it */
        cb_fmt_why(why, len, "its seal does not match: it was changed, or it is another store's");
        return NULL;
    }
    json_error_t e;
    json_t *m = json_loadb(text, (size_t) st.st_size, 0, &e);
    if (m == NULL) cb_fmt_why(why, len, "its manifest is not JSON: %s", e.text);
    return m;
}

int cb_snapimage_verify(const cb_options_t *o, char *why, size_t len) {
    why[0] = '\0';
    if (o->isolation != CB_ISOLATION_GVISOR && o->isolation != CB_ISOLATION_NAMESPACES) {
        cb_fmt_why(why, len,
                   "--resume-image: the microvm tier cannot pause (--isolation gvisor or "
                   "namespaces can)");
        return -1;
    }
    cb_autofd int imgfd = open(o->resume_image, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (imgfd < 0) {
        cb_fmt_why(why, len, "the image %s cannot be opened: %s", o->resume_image, strerror(errno));
        return -1;
    }
    char w[CB_REPORT_LINE_MAX / 2] = "";
    json_auto_t *sealed = s_read_sealed(imgfd, w, sizeof w);
    if (sealed == NULL) {
        cb_fmt_why(why, len, "the image %s is refused: %s", o->resume_image, w);
        return -1;
    }
    const char *tier = json_string_value(json_object_get(sealed, "tier"));
    if (tier == NULL || strcmp(tier, s_tier(o)) != 0) {
        cb_fmt_why(why, len, "the image %s is of the %.32s tier: resume it with --isolation %.32s",
                   o->resume_image, tier ? tier : "?", tier ? tier : "?");
        return -1;
    }
    json_t *pins = json_object_get(sealed, "pins");
    json_auto_t *now = s_pins(o);
    if (!json_equal(pins, now)) {
        char changed[CB_REPORT_LINE_MAX / 4] = "";
        const char *k;
        json_t *v;
        json_object_foreach(pins, k, v) if (!json_equal(v, json_object_get(now, k))) {
            size_t used = strlen(changed);
            snprintf(changed + used, sizeof changed - used, "%s%s", used ? ", " : "", k);
        }
        cb_fmt_why(why, len,
                   "the image %s was made with other host software (changed since: %s): the "
                   "processes it holds map files that are no longer there; start a new session "
                   "instead",
                   o->resume_image, changed[0] ? changed : "the set of pinned files");
        return -1;
    }
    json_auto_t *m = s_manifest(o, imgfd, w, sizeof w);
    if (m == NULL || !json_equal(json_object_get(m, "files"), json_object_get(sealed, "files"))) {
        cb_fmt_why(why, len, "the image %s is refused: %s", o->resume_image,
                   m == NULL ? w : "its files are not the ones sealed");
        return -1;
    }
    int checked = imgfd;
    imgfd = -1;
    return checked;
}
