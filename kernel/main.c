/*
 * main.c - cellblock-kernel entry point: parse options, set up logging,
 * run the kernel.  Exit status 2 = bad usage or unsupported connection file.
 */
#include "kernel/kernel.h"
#include "kernel/options.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    cb_opts_t *opts = calloc(1, sizeof *opts);
    if (opts == NULL) return 1;
    int rc = cb_opts_parse(argc, argv, opts);
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
