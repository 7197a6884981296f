/*
 * main.c - cellblock-kernel entry point: parse options, set up logging,
 * run the kernel.  Exit status 2 = bad usage or unsupported connection file.
 */
#include "isolate/cgroup.h"
#include "isolate/log.h"
#include "kernel/install.h"
#include "kernel/kernel.h"
#include "kernel/options.h"
#include "kernel/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `cellblock-kernel sweep`: the groups that killed kernels and launchers
 * left below this process's own cgroups (every launcher sweeps when it
 * starts; this is for the last one killed, after a SIGKILL of a whole
 * kernel's process group, say).  Prints how many were removed. */
static int s_sweep_main(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "usage: cellblock-kernel sweep   (no options: removes the cgroups killed "
                        "kernels and launchers left below this process's cgroups)\n");
        return strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    cb_log_set_ident("cellblock-kernel sweep");
    cb_log_threshold = CB_LOG_INFO;
    int n = cb_cgroup_sweep();
    if (n < 0) {
        fprintf(stderr, "cellblock-kernel sweep: some stale groups stayed (see the log above)\n");
        return 1;
    }
    printf("removed %d stale cellblock cgroup(s)\n", n);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "sweep") == 0) return s_sweep_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "install") == 0) return cb_install_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "run") == 0) return cb_run_main(argc - 1, argv + 1);
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (strcmp(base, "cellblock") == 0) {
        fprintf(stderr,
                "usage: cellblock run [options] FILE | -     (see cellblock run --help)\n"
                "       cellblock install [options]          (see cellblock install --help)\n"
                "       cellblock sweep                      (cgroups killed kernels left)\n");
        return 2;
    }
    cb_opts_t *opts = calloc(1, sizeof *opts);
    if (opts == NULL) return 1;
    int rc = cb_opts_parse(argc, argv, opts, "cellblock-kernel", NULL, NULL);
    if (rc != CB_OPTS_RUN) {
        free(opts);
        return rc == CB_OPTS_EXIT_OK ? 0 : 2;
    }
    cb_log_set_ident("cellblock-kernel");
    cb_log_threshold = opts->log_level;
    int status = cb_kernel_main(opts);
    free(opts);
    return status;
}
