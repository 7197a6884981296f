/*
 * test_outdir.c - `cellblock run --out DIR` (kernel/outdir.c): the name
 * policy with its reasons, existing names (never overwritten), symlinks at
 * the name and on the way (never followed), and what was written.
 */
#include "kernel/outdir.h"
#include "tap.h"

#include "isolate/cb_limits.h"
#include "isolate/names.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_root[] = "/tmp/cb-test-outdir-XXXXXX";

static int s_rm(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    (void) st;
    (void) flag;
    (void) ftw;
    return remove(p);
}

static char *s_path(const char *rel) {
    static char buf[CB_PATH_MAX];
    snprintf(buf, sizeof buf, "%s/%s", s_root, rel);
    return buf;
}

static char *s_slurp(const char *rel) {
    static char buf[256];
    int fd = open(s_path(rel), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void test_policy(void) {
    char why[CB_NAMES_REASON_MAX];
    static const char *const ok[] = {"chart.png", "plots/sq.png", "données/résumé.csv", "a b.JSON",
                                     "display-1.svg"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        TAP_OK(cb_outdir_refusal(ok[i], why, sizeof why) == NULL, "'%s' is saved", ok[i]);
    static const char *const bad[][2] = {
        {"invoice\xe2\x80\xae"
         "fdp.csv",
         "contains U+202E, a bidirectional-text control (it can make a name display as another)"},
        {"csi\xc2\x9b.png", "contains U+009B, a C1 control character"},
        {"del\x7f.png", "contains U+007F, a control character"},
        {"esc\x1b.png", "contains U+001B, a control character"},
        {"caf\xe9.csv", "is not valid UTF-8 (at byte 3)"},
        {"../up.png", "has a '.' or '..' component"},
        {"a/../b.png", "has a '.' or '..' component"},
        {"/tmp/abs.png", "is an absolute path"},
        {".hidden.png", "is hidden (starts with '.')"},
        {"sub/.git/x.png", "is hidden (starts with '.')"},
        {"", "is empty or has an empty path component"},
        {"a//b.png", "is empty or has an empty path component"},
        {"conftest.py", "has no extension of a type cellblock saves (.png, .csv, .json, ...)"},
        {"noext", "has no extension of a type cellblock saves (.png, .csv, .json, ...)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *r = cb_outdir_refusal(bad[i][0], why, sizeof why);
        char shown[256];
        cb_names_escape(bad[i][0], strlen(bad[i][0]), shown, sizeof shown, false);
        TAP_EQ_STR(r, bad[i][1], shown);
        TAP_OK(!cb_outdir_name_ok(bad[i][0]), "... name_ok agrees");
    }
    char long_name[300];
    memset(long_name, 'a', 256);
    memcpy(long_name + 256, ".png", 5);
    TAP_OK(cb_outdir_refusal(long_name, why, sizeof why) != NULL, "a 260-byte name is refused");
}

static void test_writes(void) {
    TAP_OK(mkdtemp(s_root) != NULL, "temporary root");
    char out[CB_PATH_MAX], outside[CB_PATH_MAX];
    snprintf(out, sizeof out, "%s/out", s_root);
    snprintf(outside, sizeof outside, "%s/outside", s_root);
    TAP_EQ_INT(mkdir(outside, 0755), 0, "outside/");
    cb_outdir_t *o = cb_outdir_open(out);
    TAP_OK(o != NULL, "--out is created and opened");
    char used[CB_NAMES_PATH_MAX + 16];

    TAP_EQ_INT(cb_outdir_write(o, "plots/sq.png", "png", 3, used, sizeof used), 0, "a new name");
    TAP_EQ_STR(used, "plots/sq.png", "... saved under it");
    TAP_EQ_STR(s_slurp("out/plots/sq.png"), "png", "... with its bytes");

    TAP_EQ_INT(cb_outdir_write(o, "plots/sq.png", "two", 3, used, sizeof used), 0,
               "the same again");
    TAP_EQ_STR(used, "plots/sq-1.png", "an existing name gets a variant");
    TAP_EQ_STR(s_slurp("out/plots/sq.png"), "png", "... and the existing file is untouched");

    char target[CB_PATH_MAX + 16];
    snprintf(target, sizeof target, "%s/victim.csv", outside);
    TAP_EQ_INT(symlink(target, s_path("out/report.csv")), 0, "a dangling symlink at the name");
    TAP_EQ_INT(cb_outdir_write(o, "report.csv", "x", 1, used, sizeof used), 0, "write report.csv");
    TAP_EQ_STR(used, "report-1.csv", "the link is not written through: a variant");
    TAP_OK(access(target, F_OK) != 0, "nothing appeared at the link's target");

    TAP_EQ_INT(symlink(outside, s_path("out/link")), 0, "a symlink to a directory outside");
    errno = 0;
    TAP_EQ_INT(cb_outdir_write(o, "link/through.png", "x", 1, used, sizeof used), -1,
               "a link on the way is refused");
    TAP_OK(errno == ELOOP || errno == ENOTDIR, "... with ELOOP (errno %d)", errno);
    TAP_OK(access(s_path("outside/through.png"), F_OK) != 0, "nothing written through it");

    errno = 0;
    TAP_EQ_INT(cb_outdir_write(o,
                               "r\xe2\x80\xae"
                               "fdp.csv",
                               "x", 1, used, sizeof used),
               -1, "a bidi name is refused by write too");
    TAP_EQ_INT(errno, EINVAL, "... with EINVAL");
    cb_outdir_close(&o);
    TAP_OK(o == NULL, "close nulls the pointer");
    nftw(s_root, s_rm, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    test_policy();
    test_writes();
    TAP_DONE();
}
