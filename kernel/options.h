/*
 * options.h - cellblock-kernel's command line, on top of the flag table.
 *
 * Every flag, the sandbox's included, is parsed and checked here with the
 * table the launcher uses (launcher/flags.c) before anything is bound or
 * spawned: a bad value is a message naming the flag and exit status 2.  The
 * launcher's flags are then rendered once, in canonical form, for every
 * launcher the kernel starts.  Unknown traitlets-style options
 * (--HistoryManager.hist_file=:memory:, which nbclient adds for kernels
 * named python3) are ignored with a warning, as ipykernel would accept them.
 */
#ifndef CB_OPTIONS_H
#define CB_OPTIONS_H

#include "isolate/log.h"
#include "launcher/flags.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CB_OPTS_FWD_MAX 192 /* launcher argv entries built from the flags */
#define CB_VERSION      "0.2.0"

typedef struct {
    cb_config_t c;                            /* every flag's value */
    cb_log_level_t log_level;                 /* c.log_level, parsed */
    const char *fwd[CB_OPTS_FWD_MAX + 1];     /* launcher flags, NULL-terminated */
    cb_flag_num_t fwd_store[CB_OPTS_FWD_MAX]; /* text of the forwarded names and numbers */
} cb_opts_t;

enum { CB_OPTS_RUN = 0, CB_OPTS_EXIT_OK = 1, CB_OPTS_EXIT_USAGE = 2 };

/* Extra arguments a caller understands (`cellblock run`: --out, --json,
 * FILE).  Same contract as cb_flags_other_fn. */
typedef cb_flags_other_fn cb_opts_extra_fn;

/* Parses argv into *o (argv strings are borrowed).  prog names the program
 * in messages.  Returns CB_OPTS_RUN, or EXIT_OK after --help/--version, or
 * EXIT_USAGE after printing why to stderr. */
int cb_opts_parse(int argc, char **argv, cb_opts_t *o, const char *prog, cb_opts_extra_fn extra,
                  void *ud);
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
