/* Experiment (not shipped): the launcher's restorer (launcher/criu_restore.c)
 * on a real image, in the sandbox restore2.py makes, instead of its Python
 * restorer (RESTORER=launcher).  Arguments: INIT IMAGE WORKDIR CGROUP_PROCS;
 * the new sandbox's ends come at 200 + the copy's fd number (fds.txt). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/criu_restore.h"

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    static const char *const dirs[] = {"/tmp", "/home/user", "/dev/shm", "/opt/cellblock/park",
                                       NULL};
    static const char *const files[] = {"/dev/null", "/proc/self/loginuid", NULL};
    cb_criu_restore_t r = {.init = (pid_t) atol(argv[1]), .rw_dirs = dirs, .rw_files = files};
    r.imgfd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    r.workfd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < CB_CRIU_CGROUP_FDS; i++)
        r.cgroup_procs[i] = -1;
    r.cgroup_procs[0] = open(argv[4], O_WRONLY | O_CLOEXEC);
    int fds[CB_CRIU_FDS_MAX];
    char names[CB_CRIU_FDS_MAX][CB_CRIU_LINK_MAX], why[512] = "";
    int n =
        r.imgfd < 0 ? -1 : cb_criu_read_fds(r.imgfd, fds, names, CB_CRIU_FDS_MAX, why, sizeof why);
    printf("fds.txt: %d entries %s\n", n, why);
    for (int i = 0; i < n; i++) {
        if (fcntl(200 + fds[i], F_GETFD) < 0) {
            printf("no end given for the copy's fd %d (%s)\n", fds[i], names[i]);
            continue;
        }
        r.inherit[r.n_inherit].fd = 200 + fds[i];
        memcpy(r.inherit[r.n_inherit++].name, names[i], CB_CRIU_LINK_MAX);
        printf("  fd %d -> %s\n", fds[i], names[i]);
    }
    int rc = n < 0 ? -1 : cb_criu_restore(&r, why, sizeof why);
    printf("cb_criu_restore: %d; %s\n", rc, why);
    return rc == 0 ? 0 : 1;
}
