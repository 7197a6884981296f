/*
 * test_criu_pack.c - a CRIU image's memory pages compressed in the image and
 * written back raw at a resume (launcher/criu_pack.c): the pages files, and
 * only they, are packed smaller and unpacked byte for byte, 0600 and owned
 * as asked; the bound of the session's limits holds; a truncated, changed
 * or symlinked file, a directory in a pages file's place and too many
 * files are refused with the name.
 */
#include "launcher/criu_pack.h"
#include "tap.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_PAGES (3u << 20) /* bytes of the test's pages file */

static char g_dirs[2][64];
static uint8_t g_pages[S_PAGES];

static void s_put(int dirfd, const char *name, const void *buf, size_t len) {
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, buf, len) != (ssize_t) len) abort();
    close(fd);
}

/* the whole file into buf (at most cap bytes): its length, -1 */
static ssize_t s_get(int dirfd, const char *name, uint8_t *buf, size_t cap) {
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t n = 0;
    for (ssize_t r; n < cap && (r = read(fd, buf + n, cap - n)) > 0;)
        n += (size_t) r;
    close(fd);
    return (ssize_t) n;
}

static int s_fresh(int k) {
    char cmd[96];
    if (g_dirs[k][0]) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dirs[k]);
        if (system(cmd) != 0) abort();
    }
    snprintf(g_dirs[k], sizeof g_dirs[k], "/tmp/cb-criu-pack-XXXXXX");
    if (mkdtemp(g_dirs[k]) == NULL) abort();
    return open(g_dirs[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static off_t s_size(int dirfd, const char *name) {
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_size : -1;
}

int main(void) {
    static uint8_t back[S_PAGES + 16];
    char why[256] = "";
    uint64_t raw = 0, packed = 0, bytes = 0;
    struct stat st;
    /* memory as a session's looks: runs of zeros, text, and bytes that do not compress */
    uint32_t x = 12345;
    for (size_t i = 0; i < S_PAGES; i++) {
        x = x * 1103515245u + 12345u;
        g_pages[i] = i < S_PAGES / 3       ? 0
                     : i < 2 * S_PAGES / 3 ? (uint8_t) "session"[i % 7]
                                           : (uint8_t) (x >> 24);
    }

    int img = s_fresh(0), stage = s_fresh(1);
    s_put(img, "pages-1.img", g_pages, S_PAGES);
    s_put(img, "pages-2.img", "tiny", 4);
    s_put(img, "pagemap-1.img", "map", 3);
    s_put(img, "core-1.img", "core", 4);
    TAP_OK(cb_criu_pack(img, &raw, &packed, why, sizeof why) == 0, "an image is packed (%s)", why);
    TAP_EQ_INT((long long) raw, S_PAGES + 4, "... every byte of its pages files read");
    TAP_OK(packed > 0 && packed < raw * 3 / 4, "... and written smaller (%llu of %llu bytes)",
           (unsigned long long) packed, (unsigned long long) raw);
    TAP_OK(s_size(img, "pages-1.img") < 0 && s_size(img, "pages-2.img") < 0,
           "the raw pages files are gone");
    TAP_OK(fstatat(img, "pages-1.img.zst", &st, 0) == 0 && (st.st_mode & 0777) == 0600,
           "the packed one is 0600");
    TAP_EQ_INT(s_size(img, "pagemap-1.img"), 3, "a pagemap is not a pages file: left alone");
    TAP_EQ_INT(s_size(img, "core-1.img"), 4, "other files are left alone");

    TAP_OK(cb_criu_unpack(img, stage, getuid(), getgid(), S_PAGES + 4, &bytes, why, sizeof why) ==
               0,
           "it is unpacked into the stage (%s)", why);
    TAP_EQ_INT((long long) bytes, S_PAGES + 4, "... every byte");
    TAP_OK(s_get(stage, "pages-1.img", back, sizeof back) == (ssize_t) S_PAGES &&
               memcmp(back, g_pages, S_PAGES) == 0,
           "... as it was, byte for byte");
    TAP_OK(s_get(stage, "pages-2.img", back, sizeof back) == 4 && memcmp(back, "tiny", 4) == 0,
           "... the small one too");
    TAP_OK(fstatat(stage, "pages-1.img", &st, 0) == 0 && (st.st_mode & 0777) == 0600 &&
               st.st_uid == getuid() && st.st_gid == getgid(),
           "... 0600 and owned as asked");
    TAP_OK(s_size(stage, "core-1.img") < 0 && s_size(stage, "pages-1.img.zst") < 0,
           "only pages files are written to the stage");
    TAP_OK(s_size(img, "pages-1.img.zst") > 0, "the image keeps its packed file");

    close(stage);
    stage = s_fresh(1);
    TAP_OK(cb_criu_unpack(img, stage, getuid(), getgid(), S_PAGES - 1, &bytes, why, sizeof why) <
                   0 &&
               strstr(why, "more than the session's limits") != NULL,
           "pages that would not fit the session's limits are refused (%s)", why);

    /* a truncated file */
    ssize_t n = s_get(img, "pages-1.img.zst", back, sizeof back);
    TAP_OK(n > 100, "the packed file read back");
    close(stage);
    stage = s_fresh(1);
    s_put(img, "pages-1.img.zst", back, (size_t) n - 40);
    TAP_OK(cb_criu_unpack(img, stage, getuid(), getgid(), S_PAGES + 4, &bytes, why, sizeof why) <
                   0 &&
               strstr(why, "pages-1.img.zst") != NULL,
           "a truncated pages file is refused with its name (%s)", why);

    /* a changed byte: zstd's checksum or its framing says so */
    back[n / 2] ^= 0x5a;
    s_put(img, "pages-1.img.zst", back, (size_t) n);
    close(stage);
    stage = s_fresh(1);
    TAP_OK(cb_criu_unpack(img, stage, getuid(), getgid(), S_PAGES + 4, &bytes, why, sizeof why) <
                   0 &&
               strstr(why, "pages-1.img.zst") != NULL,
           "a changed pages file is refused (%s)", why);

    /* a symlink in a pages file's place, then a directory */
    close(img);
    img = s_fresh(0);
    close(stage);
    stage = s_fresh(1);
    if (symlinkat("/etc/passwd", img, "pages-3.img.zst") < 0) abort();
    TAP_OK(cb_criu_unpack(img, stage, getuid(), getgid(), S_PAGES, &bytes, why, sizeof why) < 0 &&
               strstr(why, "pages-3.img.zst") != NULL,
           "a symlink is not followed (%s)", why);
    if (symlinkat("/etc/passwd", img, "pages-3.img") < 0) abort();
    TAP_OK(cb_criu_pack(img, &raw, &packed, why, sizeof why) < 0 &&
               strstr(why, "pages-3.img") != NULL,
           "... not at a pause either (%s)", why);
    close(img);
    img = s_fresh(0);
    if (mkdirat(img, "pages-4.img", 0700) < 0) abort();
    TAP_OK(cb_criu_pack(img, &raw, &packed, why, sizeof why) < 0 &&
               strstr(why, "pages-4.img") != NULL,
           "a directory in a pages file's place is refused (%s)", why);

    /* too many files */
    close(img);
    img = s_fresh(0);
    for (int i = 0; i <= CB_CRIU_PACK_FILES; i++) {
        char name[32];
        snprintf(name, sizeof name, "pages-%d.img", i);
        s_put(img, name, "p", 1);
    }
    TAP_OK(cb_criu_pack(img, &raw, &packed, why, sizeof why) < 0 &&
               strstr(why, "more than") != NULL,
           "more pages files than an image may hold are refused (%s)", why);

    close(img);
    close(stage);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", g_dirs[0], g_dirs[1]);
    if (system(cmd) != 0) abort();
    TAP_DONE();
}
