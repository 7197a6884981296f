/*
 * test_criu_img.c - the launcher's edits of a CRIU image (launcher/criu_img.c):
 * images framed as CRIU frames them, made here with the same records; the
 * task's user namespace id becomes the root one and nothing else of the
 * record changes, the time namespace image goes, and every malformed,
 * foreign, oversized or symlinked file is refused with its name.
 */
#include "launcher/criu_img.h"
#include "launcher/criu_img.pb-c.h"
#include "tap.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

static void s_put(int dirfd, const char *name, const void *buf, size_t len) {
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, buf, len) != (ssize_t) len) abort();
    close(fd);
}

/* magic words, then one entry per payload (size, bytes) */
static size_t s_frame(uint8_t *out, const uint32_t *magic, size_t n_magic, const uint8_t *pl,
                      uint32_t len, uint32_t claimed) {
    size_t o = 0;
    for (size_t i = 0; i < n_magic; i++, o += 4)
        memcpy(out + o, &magic[i], 4);
    memcpy(out + o, &claimed, 4);
    o += 4;
    memcpy(out + o, pl, len);
    return o + len;
}

static CbCriuIds s_ids(uint32_t user) {
    CbCriuIds ids = CB_CRIU_IDS__INIT;
    ids.vm_id = 2, ids.files_id = 2, ids.fs_id = 2, ids.sighand_id = 2;
    ids.has_pid_ns_id = ids.has_net_ns_id = ids.has_ipc_ns_id = ids.has_uts_ns_id = 1;
    ids.pid_ns_id = 1, ids.net_ns_id = 2, ids.ipc_ns_id = 3, ids.uts_ns_id = 4;
    ids.has_mnt_ns_id = ids.has_user_ns_id = ids.has_cgroup_ns_id = ids.has_time_ns_id = 1;
    ids.mnt_ns_id = 6, ids.user_ns_id = user, ids.cgroup_ns_id = 8, ids.time_ns_id = 5;
    return ids;
}

static void s_put_ids(int dirfd, const char *name, uint32_t user) {
    CbCriuIds ids = s_ids(user);
    uint8_t pl[256], out[512];
    uint32_t len = (uint32_t) cb_criu_ids__pack(&ids, pl);
    const uint32_t m[] = {CB_CRIU_MAGIC_COMMON, CB_CRIU_MAGIC_IDS};
    s_put(dirfd, name, out, s_frame(out, m, 2, pl, len, len));
}

static void s_put_inventory(int dirfd, bool with_root) {
    CbCriuIds root = s_ids(7);
    CbCriuInventory inv = CB_CRIU_INVENTORY__INIT;
    inv.img_version = 2;
    if (with_root) inv.root_ids = &root;
    uint8_t pl[256], out[512];
    uint32_t len = (uint32_t) cb_criu_inventory__pack(&inv, pl);
    const uint32_t m[] = {CB_CRIU_MAGIC_INVENTORY};
    s_put(dirfd, "inventory.img", out, s_frame(out, m, 1, pl, len, len));
}

/* the user namespace id of an ids image, -1 unreadable, -2 other fields changed */
static long s_user_of(int dirfd, const char *name) {
    uint8_t buf[512];
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
    if (fd >= 0) close(fd);
    if (n < 12) return -1;
    CbCriuIds *ids = cb_criu_ids__unpack(NULL, (size_t) n - 12, buf + 12);
    if (ids == NULL) return -1;
    CbCriuIds want = s_ids(ids->user_ns_id);
    long r = ids->vm_id == want.vm_id && ids->net_ns_id == want.net_ns_id &&
                     ids->mnt_ns_id == want.mnt_ns_id && ids->time_ns_id == want.time_ns_id &&
                     ids->cgroup_ns_id == want.cgroup_ns_id && ids->ipc_ns_id == want.ipc_ns_id
                 ? (long) ids->user_ns_id
                 : -2;
    cb_criu_ids__free_unpacked(ids, NULL);
    return r;
}

static int s_fresh(void) {
    char cmd[96];
    if (g_dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        if (system(cmd) != 0) abort();
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/cb-criu-img-XXXXXX");
    if (mkdtemp(g_dir) == NULL) abort();
    return open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int s_run(int dirfd, size_t *n, char *why, size_t len) {
    why[0] = '\0';
    return cb_criu_img_join_userns(dirfd, n, why, len);
}

int main(void) {
    char why[256];
    size_t n = 0;
    struct stat st;

    int d = s_fresh();
    s_put_inventory(d, true);
    s_put_ids(d, "ids-5.img", 9);
    s_put(d, "timens-0.img", "t", 1);
    s_put(d, "userns-9.img", "u", 1);
    s_put(d, "ids-5.img.bak", "x", 1);
    TAP_OK(s_run(d, &n, why, sizeof why) == 0, "an image of one task is edited (%s)", why);
    TAP_EQ_INT((int) n, 1, "... one ids image");
    TAP_EQ_INT((int) s_user_of(d, "ids-5.img"), 7,
               "its user namespace id is the root one, the "
               "other ids as they were");
    TAP_OK(fstatat(d, "timens-0.img", &st, 0) < 0, "the time namespace image is gone");
    TAP_OK(fstatat(d, "userns-9.img", &st, 0) == 0 && fstatat(d, "ids-5.img.bak", &st, 0) == 0,
           "other files are left alone");
    TAP_OK(fstatat(d, "ids-5.img", &st, 0) == 0 && (st.st_mode & 0777) == 0600,
           "the rewritten file is 0600");
    TAP_OK(fstatat(d, "ids-5.img.cb-new", &st, 0) < 0, "no temporary file is left");
    TAP_OK(s_run(d, &n, why, sizeof why) == 0, "editing again changes nothing (%s)", why);
    TAP_EQ_INT((int) s_user_of(d, "ids-5.img"), 7, "... the id stays the root one");
    close(d);

    d = s_fresh();
    s_put_inventory(d, true);
    s_put_ids(d, "ids-5.img", 9);
    s_put_ids(d, "ids-6.img", 11);
    TAP_OK(s_run(d, &n, why, sizeof why) == 0 && n == 2 && s_user_of(d, "ids-5.img") == 7 &&
               s_user_of(d, "ids-6.img") == 7,
           "two tasks, both edited; no time namespace image is no error");
    close(d);

    /* the largest task pid: criu's helpers in the restore's namespace start after it */
    d = s_fresh();
    TAP_EQ_INT((int) cb_criu_img_max_pid(d), -1, "no task: no largest pid");
    s_put(d, "ids-12.img", "i", 1);
    s_put(d, "ids-7.img", "i", 1);
    s_put(d, "ids-900.img.bak", "x", 1);
    s_put(d, "core-4000.img", "c", 1);
    s_put(d, "ids-99999999.img", "i", 1);
    TAP_EQ_INT((int) cb_criu_img_max_pid(d), 12,
               "the largest pid of the ids-PID.img names, none past the kernel's limit");
    close(d);

    d = s_fresh();
    s_put_ids(d, "ids-5.img", 9);
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "inventory.img"),
           "no inventory: refused (%s)", why);
    s_put_inventory(d, false);
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "no root user namespace id"),
           "an inventory without root ids: refused (%s)", why);
    s_put(d, "inventory.img", "\x16\x31\x31\x58\xff\x00\x00\x00zz", 10);
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "inventory.img"),
           "an inventory whose entry is larger than the file: refused (%s)", why);
    close(d);

    d = s_fresh();
    s_put_inventory(d, true);
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "no task"),
           "no ids image: refused (%s)", why);
    uint8_t out[512];
    const uint32_t bad[] = {CB_CRIU_MAGIC_COMMON, CB_CRIU_MAGIC_INVENTORY};
    s_put(d, "ids-5.img", out, s_frame(out, bad, 2, (const uint8_t *) "\x08\x01", 2, 2));
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "ids-5.img") && strstr(why, "magic"),
           "an ids image of another kind: refused (%s)", why);
    const uint32_t good[] = {CB_CRIU_MAGIC_COMMON, CB_CRIU_MAGIC_IDS};
    s_put(d, "ids-5.img", out, s_frame(out, good, 2, (const uint8_t *) "\x08\x01", 2, 1));
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "one entry expected"),
           "an entry shorter than the file (two entries): refused (%s)", why);
    s_put(d, "ids-5.img", out, s_frame(out, good, 2, (const uint8_t *) "\xff\xff\xff", 3, 3));
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "does not parse"),
           "an entry that is no record: refused (%s)", why);
    s_put(d, "ids-5.img", out, s_frame(out, good, 2, (const uint8_t *) "\x50\x07", 2, 2));
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "does not parse"),
           "a record without its required fields: refused (%s)", why);
    s_put(d, "ids-5.img", out, 6);
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "truncated"),
           "a truncated file: refused (%s)", why);
    static uint8_t big[CB_CRIU_IMG_SMALL_MAX + 1];
    s_put(d, "ids-5.img", big, sizeof big);
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "at most"),
           "a file past the bound: refused (%s)", why);
    unlinkat(d, "ids-5.img", 0);
    s_put_ids(d, "elsewhere", 9);
    TAP_OK(symlinkat("elsewhere", d, "ids-5.img") == 0, "ids-5.img is a symlink");
    TAP_OK(s_run(d, &n, why, sizeof why) < 0 && strstr(why, "ids-5.img"),
           "... and refused, not followed (%s)", why);
    TAP_EQ_INT((int) s_user_of(d, "elsewhere"), 9, "... its target untouched");
    unlinkat(d, "ids-5.img", 0);
    TAP_OK(mkdirat(d, "ids-5.img", 0700) == 0 && s_run(d, &n, why, sizeof why) < 0 &&
               strstr(why, "regular file"),
           "a directory named like an ids image: refused (%s)", why);
    close(d);

    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    TAP_EQ_INT(system(cmd), 0, "cleaned up");
    TAP_DONE();
}
