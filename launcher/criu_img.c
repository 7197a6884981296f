/*
 * criu_img.c - the launcher's two edits of a CRIU image (see criu_img.h).
 */
#include "launcher/criu_img.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolate/util.h"
#include "launcher/criu_img.pb-c.h"

#define S_WORD       4u /* a magic or an entry's size: a native u32, as CRIU writes them */
#define S_TMP_SUFFIX ".cb-new"
#define S_NAME_MAX   64 /* "ids-PID.img" and its temporary name */
#define S_TIMENS     "timens-0.img"

/* The whole of a small regular file of dirfd, not followed through a
 * symlink.  Returns its length, -1 with why. */
static ssize_t s_read_small(int dirfd, const char *name, uint8_t *buf, size_t cap, char *why,
                            size_t why_len) {
    cb_autofd int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        cb_fmt_why(why, why_len, "%s: %s", name, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (size_t) st.st_size > cap) {
        cb_fmt_why(why, why_len, "%s: not a regular file of at most %zu bytes", name, cap);
        return -1;
    }
    if (cb_read_all(fd, buf, (size_t) st.st_size) < 0) {
        cb_fmt_why(why, why_len, "%s: %s", name,
                   errno != 0 ? strerror(errno) : "shorter than it was");
        return -1;
    }
    return (ssize_t) st.st_size;
}

static uint32_t s_word(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The one entry after n_magic magic words: *payload and *len.  0 ok. */
static int s_one_entry(const char *name, const uint8_t *buf, size_t len, const uint32_t *magic,
                       size_t n_magic, const uint8_t **payload, size_t *plen, char *why,
                       size_t why_len) {
    size_t head = (n_magic + 1) * S_WORD;
    if (len < head) {
        cb_fmt_why(why, why_len, "%s: truncated (%zu bytes)", name, len);
        return -1;
    }
    for (size_t i = 0; i < n_magic; i++)
        if (s_word(buf + i * S_WORD) != magic[i]) {
            cb_fmt_why(why, why_len, "%s: not a CRIU image of the expected kind (magic)", name);
            return -1;
        }
    uint32_t size = s_word(buf + n_magic * S_WORD);
    if (size != len - head) {
        cb_fmt_why(why, why_len,
                   "%s: its entry is %lu bytes, the file holds %zu after it "
                   "(one entry expected)",
                   name, (unsigned long) size, len - head);
        return -1;
    }
    *payload = buf + head;
    *plen = size;
    return 0;
}

static int s_root_userns(int dirfd, uint32_t *root, char *why, size_t why_len) {
    static uint8_t buf[CB_CRIU_IMG_SMALL_MAX];
    ssize_t n = s_read_small(dirfd, "inventory.img", buf, sizeof buf, why, why_len);
    if (n < 0) return -1;
    const uint32_t magic[] = {CB_CRIU_MAGIC_INVENTORY};
    const uint8_t *pl;
    size_t pll;
    if (s_one_entry("inventory.img", buf, (size_t) n, magic, 1, &pl, &pll, why, why_len) < 0)
        return -1;
    CbCriuInventory *inv = cb_criu_inventory__unpack(NULL, pll, pl);
    if (inv == NULL) {
        cb_fmt_why(why, why_len, "inventory.img: its entry does not parse");
        return -1;
    }
    int rc = -1;
    if (inv->root_ids == NULL || !inv->root_ids->has_user_ns_id)
        cb_fmt_why(why, why_len, "inventory.img: no root user namespace id");
    else
        *root = inv->root_ids->user_ns_id, rc = 0;
    cb_criu_inventory__free_unpacked(inv, NULL);
    return rc;
}

/* Writes magic words, size and payload to a new file, renamed over name. */
static int s_write_over(int dirfd, const char *name, const uint32_t *magic, size_t n_magic,
                        const uint8_t *payload, uint32_t len, char *why, size_t why_len) {
    char tmp[S_NAME_MAX + sizeof S_TMP_SUFFIX];
    (void) snprintf(tmp, sizeof tmp, "%.*s%s", S_NAME_MAX - 1, name, S_TMP_SUFFIX);
    (void) unlinkat(dirfd, tmp, 0);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        cb_fmt_why(why, why_len, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    int ok = 0;
    for (size_t i = 0; i < n_magic && ok == 0; i++)
        ok = cb_write_all(fd, &magic[i], S_WORD);
    if (ok == 0) ok = cb_write_all(fd, &len, S_WORD);
    if (ok == 0) ok = cb_write_all(fd, payload, len);
    if (ok == 0) ok = fsync(fd);
    int e = errno;
    close(fd);
    if (ok < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
        cb_fmt_why(why, why_len, "%s: %s", name, strerror(ok < 0 ? e : errno));
        (void) unlinkat(dirfd, tmp, 0);
        return -1;
    }
    return 0;
}

static int s_edit_ids(int dirfd, const char *name, uint32_t root, char *why, size_t why_len) {
    static uint8_t buf[CB_CRIU_IMG_SMALL_MAX], out[CB_CRIU_IMG_SMALL_MAX];
    ssize_t n = s_read_small(dirfd, name, buf, sizeof buf, why, why_len);
    if (n < 0) return -1;
    const uint32_t magic[] = {CB_CRIU_MAGIC_COMMON, CB_CRIU_MAGIC_IDS};
    const uint8_t *pl;
    size_t pll;
    if (s_one_entry(name, buf, (size_t) n, magic, 2, &pl, &pll, why, why_len) < 0) return -1;
    CbCriuIds *ids = cb_criu_ids__unpack(NULL, pll, pl);
    if (ids == NULL) {
        cb_fmt_why(why, why_len, "%s: its entry does not parse", name);
        return -1;
    }
    ids->has_user_ns_id = 1;
    ids->user_ns_id = root;
    int rc = -1;
    if (cb_criu_ids__get_packed_size(ids) > sizeof out) {
        cb_fmt_why(why, why_len, "%s: too large once edited", name);
    } else {
        size_t len = cb_criu_ids__pack(ids, out);
        rc = s_write_over(dirfd, name, magic, 2, out, (uint32_t) len, why, why_len);
    }
    cb_criu_ids__free_unpacked(ids, NULL);
    return rc;
}

/* "ids-" digits ".img", nothing else */
static int s_is_ids(const char *name) {
    size_t n = strlen(name), d = strspn(name + 4, "0123456789");
    return n < S_NAME_MAX && strncmp(name, "ids-", 4) == 0 && d > 0 &&
           strcmp(name + 4 + d, ".img") == 0;
}

long cb_criu_img_max_pid(int dirfd) {
    long max = -1;
    DIR *d = cb_opendir_at(dirfd);
    if (d == NULL) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!s_is_ids(e->d_name)) continue;
        long v = strtol(e->d_name + 4, NULL, 10); /* s_is_ids: digits follow */
        if (v > max && v <= CB_CRIU_IMG_PID_MAX) max = v;
    }
    closedir(d);
    return max;
}

int cb_criu_img_join_userns(int dirfd, size_t *n_ids, char *why, size_t why_len) {
    *n_ids = 0;
    uint32_t root;
    if (s_root_userns(dirfd, &root, why, why_len) < 0) return -1;
    char names[CB_CRIU_IMG_IDS_MAX][S_NAME_MAX];
    size_t n = 0;
    DIR *d = cb_opendir_at(dirfd); /* an offset of its own: dirfd may have been walked */
    if (d == NULL) {
        cb_fmt_why(why, why_len, "reading the image directory: %s", strerror(errno));
        return -1;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!s_is_ids(e->d_name)) continue;
        if (n == CB_CRIU_IMG_IDS_MAX) {
            closedir(d);
            cb_fmt_why(why, why_len, "more than %d tasks in the image", CB_CRIU_IMG_IDS_MAX);
            return -1;
        }
        (void) snprintf(names[n++], S_NAME_MAX, "%.*s", S_NAME_MAX - 1,
                        e->d_name); /* s_is_ids: shorter */
    }
    closedir(d);
    if (n == 0) {
        cb_fmt_why(why, why_len, "no task in the image (no ids-PID.img)");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (s_edit_ids(dirfd, names[i], root, why, why_len) < 0) return -1;
        (*n_ids)++;
    }
    if (unlinkat(dirfd, S_TIMENS, 0) < 0 && errno != ENOENT) {
        cb_fmt_why(why, why_len, S_TIMENS ": %s", strerror(errno));
        return -1;
    }
    return 0;
}
