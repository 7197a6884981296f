/*
 * options.h - cellblock-kernel's command line.
 *
 * Every limit is a flag so a kernelspec's argv fixes it.  Values are
 * validated here, with a message naming the flag, before anything starts;
 * the sandbox flags are forwarded to the launcher in canonical form.
 */
#ifndef CB_OPTIONS_H
#define CB_OPTIONS_H

#include "log.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CB_OPTS_MAX_BINDS 32   /* --ro-bind occurrences */
#define CB_OPTS_FWD_MAX   96   /* launcher argv entries we build */
#define CB_OPTS_ARG_MAX   4200 /* bytes of one forwarded option value */
#define CB_VERSION        "0.1.0"

typedef struct {
    const char *connection_file;             /* -f */
    const char *python;                      /* sandboxed interpreter */
    const char *launcher;                    /* NULL = next to the binary */
    const char *runner;                      /* NULL = next to the binary */
    cb_log_level_t log_level;                /* --log-level */
    const char *sandbox;                     /* full | none */
    const char *isolation;                   /* namespaces | gvisor | microvm */
    long memory_mb;                          /* --memory */
    long pids;                               /* --pids */
    double cpus;                             /* --cpus */
    long disk_mb;                            /* --disk */
    long open_files;                         /* --open-files */
    long timeout_s;                          /* --timeout (0 = none) */
    long max_output_mb;                      /* --max-output */
    const char *network;                     /* none | host */
    long uid, gid;                           /* -1 = launcher default */
    const char *ro_binds[CB_OPTS_MAX_BINDS]; /* HOST:SANDBOX */
    size_t n_ro_binds;                       /* used entries */
    bool require_limits;                     /* --require-limits */
    const char *artifacts;                   /* none | images | all */
    long artifact_max_file_mb;               /* per file */
    long artifact_max_cell_mb;               /* per cell */
    long artifact_max_files;                 /* per cell */
    const char *preload;                     /* comma-separated modules, or NULL */
    char fwd_store[CB_OPTS_FWD_MAX][32];     /* numeric values rendered for the launcher */
    char *fwd[CB_OPTS_FWD_MAX + 1];          /* launcher options, NULL-terminated */
} cb_opts_t;

enum { CB_OPTS_RUN = 0, CB_OPTS_EXIT_OK = 1, CB_OPTS_EXIT_USAGE = 2 };

/* Parses argv into *o (argv strings are borrowed).  Returns CB_OPTS_RUN, or
 * EXIT_OK after --help/--version, or EXIT_USAGE after printing why. */
int cb_opts_parse(int argc, char **argv, cb_opts_t *o);
void cb_opts_usage(FILE *f);
/* The artifact collector for these options: a new one, or NULL when
 * --artifacts none. */
struct cb_artifacts;
struct cb_artifacts *cb_opts_new_artifacts(const cb_opts_t *o);
/* Resolves the launcher and runner (options, else next to this binary:
 * ../libexec/cellblock/cellblock-launcher, ../share/cellblock/runner/runner.py)
 * and checks that they and the python exist. 0 ok, -1 (logged). */
int cb_opts_find_helpers(const cb_opts_t *o, char *launcher, size_t llen, char *runner,
                         size_t rlen);

#endif
