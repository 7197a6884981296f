/* test_gvisor.c - the gVisor tier restores only an image the launcher
 * verified.  --resume-image names a directory, but runsc restore reads the
 * one the launcher opened and checked (cb_snapimage_verify), handed over with
 * cb_gvisor_set_image; a caller that plans a resume without handing one over
 * is refused by cb_gvisor_plan, before anything starts, and never falls back
 * to the path.  Today the launcher always verifies first (launcher/
 * sandbox_plan.c), so only this test reaches the refusal.
 *
 * cb_gvisor_new refuses without root, runsc and cellblock-init beside the
 * running binary (a unit test's is in build/tests), none of which the plan's
 * check depends on: the object is built here the way cb_gvisor_new builds it
 * (gvisor_priv.h), with files of our own as the two host programs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/options.h"
#include "tiers/gvisor_priv.h"
#include "tap.h"

static char s_dir[] = "/tmp/cb-gvisor-XXXXXX"; /* runsc, cellblock-init, image/ */
static char s_runsc[64], s_init[64], s_image[64];

static void s_files_make(void) {
    if (mkdtemp(s_dir) == NULL) abort();
    (void) snprintf(s_runsc, sizeof s_runsc, "%s/runsc", s_dir);
    (void) snprintf(s_init, sizeof s_init, "%s/cellblock-init", s_dir);
    (void) snprintf(s_image, sizeof s_image, "%s/image", s_dir);
    const char *files[] = {s_runsc, s_init};
    for (size_t i = 0; i < 2; i++) {
        int fd = open(files[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        if (fd < 0 || write(fd, "#!/bin/false\n", 13) != 13) abort();
        close(fd);
    }
    if (mkdir(s_image, 0700) < 0) abort();
}

static void s_files_remove(void) {
    (void) unlink(s_runsc);
    (void) unlink(s_init);
    (void) rmdir(s_image);
    (void) rmdir(s_dir);
}

/* What cb_gvisor_new makes of opts once its host checks passed. */
static cb_gvisor_t *s_gvisor(const cb_options_t *opts) {
    cb_gvisor_t *g = calloc(1, sizeof *g);
    if (g == NULL) abort();
    g->opts = opts;
    g->image_fd = -1;
    (void) snprintf(g->runsc, sizeof g->runsc, "%s", s_runsc);
    (void) snprintf(g->init, sizeof g->init, "%s", s_init);
    return g;
}

/* cb_gvisor_plan into a fresh plan: 0 ok, -1 with why. */
static int s_plan(cb_gvisor_t *g, char *why, size_t why_len) {
    static cb_mount_plan_t mounts;
    cb_mount_plan_init(&mounts);
    cb_cgroup_limits_t lim = {.memory_mb = 512, .pids = 64, .cpus = 1.0};
    char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
    why[0] = '\0';
    int rc = cb_gvisor_plan(g, &mounts, &lim, 65534, 65534, "/opt/cellblock/runner/runner.py", envp,
                            why, why_len);
    cb_mount_plan_fini(&mounts);
    return rc;
}

/* Does argv hold arg? */
static bool s_has(const cb_tier_argv_t *a, const char *arg) {
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->argv[i], arg) == 0) return true;
    return false;
}

/* No child of ours exists, nor has ended unreaped: nothing was started. */
static bool s_no_child(void) {
    errno = 0;
    return waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD;
}

int main(void) {
    s_files_make();
    char err[256], why[512];
    cb_options_t o;
    const char *resume[] = {
        "x",        "--isolation",  "gvisor",         "--python", "/usr/bin/python3",
        "--runner", "/r/runner.py", "--resume-image", s_image};
    TAP_EQ_INT(cb_options_parse(9, (char **) resume, &o, err, sizeof err), 0,
               "--isolation gvisor --resume-image parses");

    /* a resume planned without the verified directory: refused */
    cb_gvisor_t *g = s_gvisor(&o);
    TAP_EQ_INT(s_plan(g, why, sizeof why), -1, "a resume without a verified image is refused");
    TAP_OK(strstr(why, "was not verified") != NULL && strstr(why, s_image) != NULL,
           "and says which image was not verified: %s", why);
    TAP_EQ_INT(g->image_fd, -1, "no image for runsc restore");
    TAP_OK(s_no_child(), "nothing was started");

    /* the same plan once the launcher's directory is handed over: the
     * refusal was the missing image alone */
    int fd = open(s_image, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    TAP_OK(fd >= 0, "the image directory opens");
    cb_gvisor_set_image(g, fd);
    TAP_EQ_INT(s_plan(g, why, sizeof why), 0, "with the verified image, the resume is planned");
    if (why[0] != '\0') printf("#   why: %s\n", why);
    TAP_OK(s_has(&g->run[0], "restore") && s_has(&g->run[0], "--image-path=/proc/self/fd/3"),
           "as runsc restore of the image given (fd 3)");
    TAP_EQ_INT(g->image_fd, fd, "the tier holds the image");
    cb_gvisor_destroy(&g);
    TAP_OK(g == NULL, "destroy nulls the pointer");
    cb_options_fini(&o);

    /* a fresh start needs no image */
    const char *fresh[] = {"x",        "--isolation", "gvisor", "--python", "/usr/bin/python3",
                           "--runner", "/r/runner.py"};
    TAP_EQ_INT(cb_options_parse(7, (char **) fresh, &o, err, sizeof err), 0,
               "--isolation gvisor parses");
    g = s_gvisor(&o);
    TAP_EQ_INT(s_plan(g, why, sizeof why), 0, "a fresh start is planned without an image");
    TAP_OK(s_has(&g->run[0], "run") && !s_has(&g->run[0], "restore"), "as runsc run");
    TAP_OK(s_no_child(), "planning starts nothing");
    cb_gvisor_destroy(&g);
    cb_options_fini(&o);
    s_files_remove();
    TAP_DONE();
}
