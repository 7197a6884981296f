/*
 * artifacts_kit.h - what the artifact collector's unit tests share: a fresh
 * workdir in a temp directory, files written into it, and the bundles a
 * collect returns looked up by path.  Header-only (static), like tap.h.
 */
#ifndef CB_TEST_ARTIFACTS_KIT_H
#define CB_TEST_ARTIFACTS_KIT_H

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
#define NM(...) (snprintf(s_nm, sizeof s_nm, __VA_ARGS__), s_nm)

/* ---- helpers ----------------------------------------------------------- */

static int s_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void) st;
    (void) flag;
    (void) ftw;
    return remove(path);
}

static inline void s_fresh(void) {
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

static inline void s_write(const char *rel, const void *data, size_t len) {
    int fd = openat(s_dirfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t) len) {
        printf("# write %s: %s\n", rel, strerror(errno));
        exit(2);
    }
    close(fd);
}

static inline void s_puts(const char *rel, const char *text) { s_write(rel, text, strlen(text)); }

static inline void s_mkdir(const char *rel) {
    if (mkdirat(s_dirfd, rel, 0755) < 0 && errno != EEXIST) {
        printf("# mkdir %s: %s\n", rel, strerror(errno));
        exit(2);
    }
}

static inline void s_set_mtime(const char *rel, time_t sec, long nsec) {
    struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
    if (utimensat(s_dirfd, rel, ts, AT_SYMLINK_NOFOLLOW) < 0)
        printf("# utimensat: %s\n", strerror(errno));
}

static inline void s_sleep_tick(void) {
    struct timespec ts = {0, T_SLEEP_NS};
    nanosleep(&ts, NULL);
}

static inline cb_artifacts_t *s_new(cb_artifacts_mode_t mode, bool binary) {
    cb_artifacts_limits_t lim;
    cb_artifacts_limits_default(&lim);
    lim.mode = mode;
    lim.binary = binary;
    return cb_artifacts_new(&lim);
}

/* The bundle for path, borrowed from bundles, or NULL. */
static inline json_t *s_find(json_t *bundles, const char *path) {
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
static inline json_t *s_notice(json_t *bundles) {
    json_t *last = json_array_get(bundles, json_array_size(bundles) - 1);
    return json_object_get(
        json_object_get(json_object_get(json_object_get(last, "metadata"), "cellblock"),
                        "artifact_notice"),
        "skipped");
}

static inline size_t s_notice_total(json_t *bundles) {
    json_t *last = json_array_get(bundles, json_array_size(bundles) - 1);
    return (size_t) json_integer_value(json_object_get(
        json_object_get(json_object_get(json_object_get(last, "metadata"), "cellblock"),
                        "artifact_notice"),
        "total"));
}

/* The reason the notice gives for path, or NULL. */
static inline const char *s_reason(json_t *bundles, const char *path) {
    json_t *sk = s_notice(bundles);
    size_t i;
    json_t *it;
    json_array_foreach(sk, i, it) {
        if (strcmp(json_string_value(json_object_get(it, "path")), path) == 0)
            return json_string_value(json_object_get(it, "reason"));
    }
    return NULL;
}

static inline const char *s_mime_of(json_t *b) {
    return json_string_value(json_object_get(
        json_object_get(json_object_get(json_object_get(b, "metadata"), "cellblock"), "artifact"),
        "mime"));
}

static inline const char *s_data(json_t *b, const char *mime) {
    return json_string_value(json_object_get(json_object_get(b, "data"), mime));
}

/* True if base64 text decodes to exactly want[0..len). */
static inline bool s_b64_eq(const char *text, const uint8_t *want, size_t len) {
    if (text == NULL) return false;
    size_t tlen = strlen(text), cap = tlen, got = 0;
    uint8_t *bin = malloc(cap + 1);
    bool ok = sodium_base642bin(bin, cap + 1, text, tlen, NULL, &got, NULL,
                                sodium_base64_VARIANT_ORIGINAL) == 0 &&
              got == len && memcmp(bin, want, len) == 0;
    free(bin);
    return ok;
}

static inline void s_sha_hex(const void *data, size_t len, char hex[65]) {
    uint8_t sha[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(sha, data, len);
    sodium_bin2hex(hex, 65, sha, sizeof sha);
}

/* True if no string anywhere in v contains needle. */
static inline bool s_nowhere(json_t *v, const char *needle) {
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    bool ok = s && strstr(s, needle) == NULL;
    free(s);
    return ok;
}

/* Collects, checks the common shape of every bundle, returns bundles (new
 * reference) and the summary in *sum (new reference or NULL if not wanted). */
static inline json_t *s_collect(cb_artifacts_t *a, json_t **sum) {
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

/* Each test program's start (the alarm, logging, libsodium, the directory
 * outside the workdir) and end (both trees removed).  -1: cannot run. */
static inline int s_kit_start(void) {
    alarm(T_ALARM_S);
    cb_log_threshold = getenv("CB_TEST_LOG") ? CB_LOG_DEBUG : CB_LOG_CRITICAL;
    if (sodium_init() < 0) return -1;
    snprintf(s_outside, sizeof s_outside, "/tmp/cb-art-out.XXXXXX");
    return mkdtemp(s_outside) == NULL ? -1 : 0;
}

static inline void s_kit_end(void) {
    close(s_dirfd);
    nftw(s_root, s_rm, 64, FTW_DEPTH | FTW_PHYS);
    rmdir(s_outside);
}

#endif
