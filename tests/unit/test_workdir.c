/* test_workdir.c - the none-mode workdir is removed without following
 * symlinks planted in it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/workdir.h"
#include "tap.h"

int main(void) {
    char wd[4096], outside[] = "/tmp/cb-test-outside-XXXXXX", p[8192];
    TAP_EQ_INT(cb_workdir_create(wd, sizeof wd), 0, "workdir created");
    TAP_OK(mkdtemp(outside) != NULL, "outside dir");
    snprintf(p, sizeof p, "%s/keep", outside);
    close(open(p, O_CREAT | O_WRONLY, 0600));
    snprintf(p, sizeof p, "%s/link", wd);
    TAP_EQ_INT(symlink(outside, p), 0, "symlink to outside planted");
    snprintf(p, sizeof p, "%s/a/b/c", wd);
    char q[8192];
    snprintf(q, sizeof q, "%s/a", wd);
    mkdir(q, 0700);
    snprintf(q, sizeof q, "%s/a/b", wd);
    mkdir(q, 0700);
    mkdir(p, 0700);
    snprintf(q, sizeof q, "%s/a/b/c/f", wd);
    close(open(q, O_CREAT | O_WRONLY, 0600));
    snprintf(q, sizeof q, "%s/a/b", wd);
    chmod(q, 0); /* user code made a dir unreadable */
    TAP_EQ_INT(cb_workdir_remove(wd), 0, "removed");
    TAP_OK(access(wd, F_OK) != 0, "workdir gone");
    snprintf(p, sizeof p, "%s/keep", outside);
    TAP_OK(access(p, F_OK) == 0, "file behind the symlink untouched");
    cb_workdir_remove(outside);
    TAP_DONE();
}
