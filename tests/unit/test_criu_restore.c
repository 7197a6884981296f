/*
 * test_criu_restore.c - the launcher's restore of a parked copy's image
 * (launcher/criu_restore.c): the image's list of the copy's pipes and
 * sockets read back exactly as the dump wrote it and refused when it is
 * anything else (the image is sealed, but a parser still trusts nothing),
 * and criu's command line: in order, bounded, the ends at the fds the
 * restorer moves them to.  The restore itself runs in the test guest
 * (tests/security/test_pausable.py: pause, resume and fork).
 */
#include "launcher/criu_restore.h"
#include "tap.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[] = "/tmp/cb-criu-restore-XXXXXX";
static int g_dfd = -1;

static void s_put(const char *text) {
    (void) unlinkat(g_dfd, CB_CRIU_FDS, 0);
    int fd = openat(g_dfd, CB_CRIU_FDS, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text)) abort();
    close(fd);
}

static int s_read(int *fds, char (*names)[CB_CRIU_LINK_MAX], char *why, size_t len) {
    why[0] = '\0';
    return cb_criu_read_fds(g_dfd, fds, names, CB_CRIU_FDS_MAX, why, len);
}

static void test_read_fds(void) {
    int fds[CB_CRIU_FDS_MAX];
    char names[CB_CRIU_FDS_MAX][CB_CRIU_LINK_MAX], why[256];
    /* what cb_criu_write_fds writes for a runner's copy */
    cb_criu_target_t t = {.n_fds = 4, .fd = {1, 2, 3, 4}};
    strcpy(t.link[0], "pipe:[11]");
    strcpy(t.link[1], "pipe:[12]");
    strcpy(t.link[2], "socket:[4026531]");
    strcpy(t.link[3], "socket:[99]");
    (void) unlinkat(g_dfd, CB_CRIU_FDS, 0);
    TAP_EQ_INT(cb_criu_write_fds(&t, g_dfd), 0, "the dump's list written");
    TAP_EQ_INT(s_read(fds, names, why, sizeof why), 4, "read back: four entries");
    bool same = true;
    for (int i = 0; i < 4; i++)
        same = same && fds[i] == t.fd[i] && !strcmp(names[i], t.link[i]);
    TAP_OK(same, "the same numbers and names, in order");

    static const struct {
        const char *text, *what;
    } bad[] = {
        {"1 pipe:[11]", "an unfinished line"},
        {"1 file:[11]\n", "a kind that is neither pipe nor socket"},
        {"1 pipe:[11] x\n", "anything after the name"},
        {"-1 pipe:[11]\n", "a negative fd"},
        {"4096 pipe:[11]\n", "an fd past the bound"},
        {"1 pipe:[]\n", "no inode"},
        {"1 pipe:[11\n", "no closing bracket"},
        {"x\n", "no fd"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s_put(bad[i].text);
        TAP_EQ_INT(s_read(fds, names, why, sizeof why), -1, bad[i].what);
    }
    TAP_OK(strstr(why, "line 1") != NULL, "the refusal names the line: %s", why);
    char many[CB_CRIU_FDS_MAX * 24 + 32] = "";
    for (int i = 0; i <= CB_CRIU_FDS_MAX; i++)
        (void) snprintf(many + strlen(many), sizeof many - strlen(many), "%d pipe:[%d]\n", i, i);
    s_put(many);
    TAP_EQ_INT(s_read(fds, names, why, sizeof why), -1, "more entries than the bound: refused");
    s_put("");
    TAP_EQ_INT(s_read(fds, names, why, sizeof why), 0, "an empty list is a list");
    (void) unlinkat(g_dfd, CB_CRIU_FDS, 0);
    TAP_EQ_INT(s_read(fds, names, why, sizeof why), -1, "no list: refused");
    TAP_OK(strstr(why, CB_CRIU_FDS) != NULL, "naming it: %s", why);
}

static void test_argv(void) {
    cb_criu_restore_t r = {.init = 5, .imgfd = 7, .workfd = 8, .n_inherit = 2};
    strcpy(r.inherit[0].name, "pipe:[11]");
    strcpy(r.inherit[1].name, "socket:[99]");
    static cb_tier_argv_t a;
    char **argv = a.argv;
    TAP_EQ_INT(cb_criu_restore_argv(&r, &a), 0, "criu's command line is built");
    char user[48], in0[48], in1[48];
    (void) snprintf(user, sizeof user, "user:/proc/self/fd/%d,0,0", CB_CRIU_USERNS_FD);
    (void) snprintf(in0, sizeof in0, "fd[%d]:pipe:[11]", CB_CRIU_INHERIT_FD0);
    (void) snprintf(in1, sizeof in1, "fd[%d]:socket:[99]", CB_CRIU_INHERIT_FD0 + 1);
    const char *want[] = {"restore",
                          "-D",
                          "/proc/self/fd/7",
                          "-W",
                          "/proc/self/fd/8",
                          "-o",
                          CB_CRIU_RESTORE_LOG,
                          "--restore-detached",
                          "--manage-cgroups=ignore",
                          "--join-ns",
                          user,
                          "--inherit-fd",
                          in0,
                          "--inherit-fd",
                          in1,
                          NULL};
    bool same = strstr(argv[0], "criu") != NULL;
    size_t i = 0;
    for (; want[i] != NULL; i++)
        same = same && argv[i + 1] && strcmp(argv[i + 1], want[i]) == 0;
    TAP_OK(same && argv[i + 1] == NULL,
           "restore from the image's fd, detached, joining the sandbox's user namespace, "
           "each end by the image's name");
    size_t words = a.n;
    TAP_OK(cb_criu_restore_argv(&r, &a) == 0 && a.n == words,
           "built again into the same argv: afresh, not appended");
    r.n_inherit = CB_CRIU_FDS_MAX + 1;
    TAP_EQ_INT(cb_criu_restore_argv(&r, &a), -1, "more ends than the bound: refused");
    r.n_inherit = CB_CRIU_FDS_MAX;
    for (size_t k = 0; k < CB_CRIU_FDS_MAX; k++)
        (void) snprintf(r.inherit[k].name, CB_CRIU_LINK_MAX, "socket:[%lu]",
                        18446744073709551615ul);
    TAP_EQ_INT(cb_criu_restore_argv(&r, &a), 0,
               "the most ends, the longest names: within the named bounds");
}

static void test_fds_below_the_moved_ones(void) {
    cb_criu_restore_t r = {.init = 1, .imgfd = CB_CRIU_USERNS_FD, .workfd = 5};
    char why[256] = "";
    TAP_EQ_INT(cb_criu_restore(&r, why, sizeof why), -1,
               "an image fd where the ends are moved to: refused before anything runs");
    TAP_OK(strstr(why, "must be 3 to") != NULL, "saying which it may be: %s", why);
}

int main(void) {
    if (mkdtemp(g_dir) == NULL || (g_dfd = open(g_dir, O_RDONLY | O_DIRECTORY)) < 0) {
        perror("scratch directory");
        return 1;
    }
    test_read_fds();
    test_argv();
    test_fds_below_the_moved_ones();
    close(g_dfd);
    (void) rmdir(g_dir);
    TAP_DONE();
}
