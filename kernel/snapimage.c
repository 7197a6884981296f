/*
 * snapimage.c - the kernel's store of paused sessions' images (see
 * snapimage.h).  Everything it reads back is checked before it is used:
 * kernel.mac (HMAC-SHA256, libsodium) over the exact bytes of kernel.json
 * before jansson sees them, both bounded in size; names are ids of 32 hex
 * digits or absolute directories, never anything from a sandbox.
 */
#include "kernel/snapimage.h"

#include "isolate/log.h"
#include "isolate/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_KEY        ".key"
#define S_RECORD     "kernel.json"
#define S_RECORD_MAC "kernel.mac"
#define S_RECORD_MAX (1u << 20) /* bytes of kernel.json */
#define S_NFTW_FDS   16         /* fds nftw may hold while removing an image */

/* mkdir -p for the store, each level 0700 when we make it. */
static int s_mkdirs(const char *path) {
    char buf[CB_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int) sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0700) < 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

static int s_key_fd(const char *store, uint8_t key[CB_IMAGE_KEY_LEN]) {
    char path[CB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", store, S_KEY);
    cb_autofd int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0 || st.st_size != CB_IMAGE_KEY_LEN)
        return -1;
    return cb_read_all(fd, key, CB_IMAGE_KEY_LEN);
}

int cb_image_store(const cb_opts_t *o, char *dir, size_t len, char *why, size_t why_len) {
    int n;
    if (o->c.image_dir) {
        n = snprintf(dir, len, "%s", o->c.image_dir);
    } else if (geteuid() == 0) {
        n = snprintf(dir, len, "%s", CB_IMAGE_DIR_ROOT);
    } else {
        const char *home = getenv("HOME");
        struct passwd *pw = home && home[0] == '/' ? NULL : getpwuid(geteuid());
        if (pw) home = pw->pw_dir;
        n = snprintf(dir, len, "%s/%s", home ? home : "/nonexistent", CB_IMAGE_DIR_USER);
    }
    struct stat st;
    if (n < 0 || (size_t) n >= len || s_mkdirs(dir) < 0 || lstat(dir, &st) < 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        cb_fmt_why(why, why_len, "the image store %s is not a private directory of ours (0700): %s",
                   dir, errno ? strerror(errno) : "check its owner and mode, or pass --image-dir");
        return -1;
    }
    uint8_t key[CB_IMAGE_KEY_LEN];
    if (s_key_fd(dir, key) == 0) {
        sodium_memzero(key, sizeof key);
        return 0;
    }
    char path[CB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, S_KEY);
    cb_autofd int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    randombytes_buf(key, sizeof key);
    int rc = fd >= 0 && cb_write_all(fd, key, sizeof key) == 0 && fsync(fd) == 0 ? 0 : -1;
    sodium_memzero(key, sizeof key);
    if (rc < 0) cb_fmt_why(why, why_len, "the image store's key %s: %s", path, strerror(errno));
    return rc;
}

int cb_image_create(const char *store, char id[CB_IMAGE_ID_HEX + 1], int *fd, char *why,
                    size_t why_len) {
    unsigned char raw[CB_IMAGE_ID_HEX / 2];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(id, CB_IMAGE_ID_HEX + 1, raw, sizeof raw);
    char path[CB_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", store, id);
    if (mkdir(path, 0700) < 0 ||
        (*fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        cb_fmt_why(why, why_len, "making the image %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int s_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void) st, (void) ftw;
    (void) (flag == FTW_DP ? rmdir(path) : unlink(path)); /* best effort: go on */
    return 0;
}

void cb_image_discard(const char *store, const char *id) {
    char path[CB_PATH_MAX];
    if (strlen(id) != CB_IMAGE_ID_HEX || strspn(id, "0123456789abcdef") != CB_IMAGE_ID_HEX) return;
    snprintf(path, sizeof path, "%s/%s", store, id);
    (void) nftw(path, s_rm, S_NFTW_FDS, FTW_DEPTH | FTW_PHYS);
}

/* The store a directory of an image belongs to (its parent). */
static void s_parent(const char *dir, char *buf, size_t len) {
    snprintf(buf, len, "%s", dir);
    char *slash = strrchr(buf, '/');
    if (slash && slash != buf) *slash = '\0';
}

int cb_image_seal_record(int fd, const json_t *record, char *why, size_t why_len) {
    char self[64], dir[CB_PATH_MAX], store[CB_PATH_MAX];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, dir, sizeof dir - 1);
    uint8_t key[CB_IMAGE_KEY_LEN];
    if (n <= 0) {
        cb_fmt_why(why, why_len, "the image directory is gone");
        return -1;
    }
    dir[n] = '\0';
    s_parent(dir, store, sizeof store);
    cb_autofree char *text = json_dumps(record, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL || s_key_fd(store, key) < 0) {
        cb_fmt_why(why, why_len, "the image store's key cannot be read");
        return -1;
    }
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256(mac, (const unsigned char *) text, strlen(text), key);
    sodium_memzero(key, sizeof key);
    char hex[2 * sizeof mac + 1];
    sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
    cb_autofd int a = openat(fd, S_RECORD, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    cb_autofd int b = openat(fd, S_RECORD_MAC, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (a < 0 || b < 0 || cb_write_all(a, text, strlen(text)) < 0 ||
        cb_write_all(b, hex, strlen(hex)) < 0 || fsync(a) < 0 || fsync(b) < 0) {
        cb_fmt_why(why, why_len, "writing the kernel's record: %s", strerror(errno));
        return -1;
    }
    return 0;
}

json_t *cb_image_open(const cb_opts_t *o, const char *ref, char *dir, size_t len, char *why,
                      size_t why_len) {
    char store[CB_PATH_MAX];
    if (ref[0] == '/') { /* a directory: its store is its parent */
        if (realpath(ref, dir) == NULL || strlen(dir) >= len) {
            cb_fmt_why(why, why_len, "the image %s: %s", ref, strerror(errno));
            return NULL;
        }
        s_parent(dir, store, sizeof store);
    } else {
        if (cb_image_store(o, store, sizeof store, why, why_len) < 0) return NULL;
        snprintf(dir, len, "%s/%s", store, ref);
    }
    char p[CB_PATH_MAX + 16], hex[2 * crypto_auth_hmacsha256_BYTES + 1] = "";
    snprintf(p, sizeof p, "%s/%s", dir, S_RECORD);
    cb_autofd int f = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    snprintf(p, sizeof p, "%s/%s", dir, S_RECORD_MAC);
    cb_autofd int m = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (f < 0 || m < 0 || fstat(f, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        st.st_size > S_RECORD_MAX || cb_read_all(m, hex, sizeof hex - 1) < 0) {
        cb_fmt_why(why, why_len, "%s is not a paused session's image (no sealed kernel.json)", dir);
        return NULL;
    }
    cb_autofree char *text = malloc((size_t) st.st_size);
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    uint8_t key[CB_IMAGE_KEY_LEN];
    if (text == NULL || cb_read_all(f, text, (size_t) st.st_size) < 0 ||
        sodium_hex2bin(mac, sizeof mac, hex, strlen(hex), NULL, NULL, NULL) != 0 ||
        s_key_fd(store, key) < 0) {
        cb_fmt_why(why, why_len, "the image %s cannot be checked (its seal or its store's key)",
                   dir);
        return NULL;
    }
    int bad =
        crypto_auth_hmacsha256_verify(mac, (const unsigned char *) text, (size_t) st.st_size, key);
    sodium_memzero(key, sizeof key);
    if (bad) {
        cb_fmt_why(why, why_len,
                   "the image %s is refused: its seal does not match (it was changed, or it was "
                   "made by another store)",
                   dir);
        return NULL;
    }
    json_error_t e;
    json_t *r = json_loadb(text, (size_t) st.st_size, 0, &e);
    if (!json_is_object(r)) {
        json_decref(r);
        cb_fmt_why(why, why_len, "the image %s: its record is not a JSON object", dir);
        return NULL;
    }
    return r;
}
