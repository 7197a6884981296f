/* Experiment (not shipped): the launcher's image edits (launcher/criu_img.c)
 * on a real dump, instead of parked.py's crit edits.  parked.py builds it
 * against the build tree's archives when EDIT_IDS=launcher. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "launcher/criu_img.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int d = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char why[256] = "";
    size_t n = 0;
    int rc = d < 0 ? -1 : cb_criu_img_join_userns(d, &n, why, sizeof why);
    printf("cb_criu_img_join_userns: %d, %zu ids images; %s\n", rc, n, why);
    return rc == 0 ? 0 : 1;
}
