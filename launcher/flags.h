/*
 * flags.h - the one table of cellblock's command-line flags.
 *
 * cellblock-kernel, `cellblock run`, `cellblock-kernel install` and
 * cellblock-launcher all parse their flags from this table, so a bound (the
 * smallest --memory, the largest --pids, ...) is written once and can never
 * disagree between the program that accepts a kernelspec and the one that
 * builds the sandbox.  Both --help texts are printed from it too.
 *
 * A row says which program reads the flag: CB_FLAG_LAUNCHER rows are sandbox
 * flags (the kernel checks them at start-up and forwards them, in canonical
 * form, to every launcher it spawns); CB_FLAG_KERNEL rows are read by the
 * kernel (and `cellblock run`) alone.  Values land in a cb_config_t; strings
 * are borrowed from argv.
 */
#ifndef CB_FLAGS_H
#define CB_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CB_FLAG_REPEAT_MAX 32   /* values of one repeatable flag (--ro-bind, --env) */
#define CB_FLAG_VALUE_MAX  4200 /* bytes of one flag value */
#define CB_FLAG_NUM_MAX    32   /* bytes of a number rendered for the launcher */
#define CB_FLAG_ERR_MAX    512  /* bytes of one parse error message */

typedef enum {
    CB_FK_BOOL,    /* no value: present = true */
    CB_FK_INT,     /* integer in [min, max] */
    CB_FK_SIZE_MB, /* size in MiB: 512, 512M, 2G, 1.5g; result in [min, max] MiB */
    CB_FK_FLOAT,   /* number in [min, max] */
    CB_FK_CHOICE,  /* one of the '|'-separated choices */
    CB_FK_PATH,    /* an absolute path */
    CB_FK_TEXT,    /* anything the row's check accepts */
} cb_flag_kind_t;

/* Who reads a flag (a row's `who` bits). */
#define CB_FLAG_LAUNCHER 1u /* a sandbox flag: checked by the kernel, forwarded to the launcher */
#define CB_FLAG_KERNEL   2u /* read by the kernel and `cellblock run` only */
#define CB_FLAG_REPEAT   4u /* may be given several times (max = CB_FLAG_REPEAT_MAX) */
#define CB_FLAG_NOFWD    8u /* a launcher flag the kernel passes itself (--python, --runner) */

/* Every flag's value.  Defaults come from the table (cb_config_defaults). */
typedef struct {
    /* sandbox: read by the launcher */
    const char *sandbox;                     /* full | none */
    const char *isolation;                   /* namespaces | gvisor | microvm */
    long memory_mb;                          /* --memory */
    long pids;                               /* --pids */
    double cpus;                             /* --cpus */
    long disk_mb;                            /* --disk */
    long open_files;                         /* --open-files */
    const char *network;                     /* none | host | allow:HOST[:PORT],... */
    long uid, gid;                           /* 0 = the launcher's default */
    const char *uid_range;                   /* FIRST:COUNT host ids (isolate/idpool.h) */
    const char *ro_bind[CB_FLAG_REPEAT_MAX]; /* HOST:SANDBOX values */
    size_t n_ro_bind;                        /* used entries of ro_bind */
    bool require_limits;                     /* --require-limits */
    bool no_clone_into_cgroup;               /* --no-clone-into-cgroup */
    bool pausable;                           /* --pausable */
    const char *log_level;                   /* debug | info | warning | error | critical */
    const char *python;                      /* sandboxed interpreter */
    const char *runner;                      /* runner.py on the host (NULL = installed one) */
    /* kernel and `cellblock run` */
    const char *connection_file; /* -f */
    const char *launcher;        /* NULL = the installed one */
    long timeout_s;              /* per cell, 0 = none */
    long max_output_mb;          /* output bytes per cell */
    const char *artifacts;       /* none | images | all */
    long artifact_max_file_mb;   /* per file */
    long artifact_max_cell_mb;   /* per cell */
    long artifact_max_files;     /* per cell */
    const char *preload;         /* comma-separated modules, or NULL (also the launcher's) */
    const char *warm;            /* auto | off | wait: a template's fork (launcher/warm.h) */

    /* --network allow: the egress proxy (launcher/netproxy.c) */
    const char *network_resolve[CB_FLAG_REPEAT_MAX]; /* NAME=ADDR pins */
    size_t n_network_resolve;                        /* used entries */
    long network_max_conns;                          /* concurrent connections */
    long network_max_mb;                             /* bytes relayed per session, MiB */
    const char *secret[CB_FLAG_REPEAT_MAX];          /* NAME@HOST[,HOST...] (issue 22) */
    size_t n_secret;                                 /* used entries */
    const char *network_upstream_ca;                 /* CAs the proxy checks upstreams with */

    /* notebook folders and environment (issue 11) */
    const char *workdir_source;          /* DIR or "cwd": host dir overlaid on the home, or NULL */
    const char *env[CB_FLAG_REPEAT_MAX]; /* NAME or NAME=VALUE, checked by cb_flags_env_check */
    size_t n_env;                        /* used entries of env */

    /* snapshots (issue 20, docs/SNAPSHOTS.md) */
    const char *resume;       /* kernel: a paused session's image (id or directory), or NULL */
    const char *image_dir;    /* kernel: where images are kept (NULL = the default) */
    const char *resume_image; /* launcher: the verified image directory to restore, or NULL */
} cb_config_t;

typedef struct {
    const char *name;    /* long name without "--" */
    cb_flag_kind_t kind; /* how the value is parsed */
    double min, max;     /* bounds of INT, SIZE_MB and FLOAT values (inclusive) */
    const char *unit;    /* "MiB", "s", ... for help and errors ("" = none) */
    const char *def;     /* default, as it would be written on the command line (NULL = none) */
    const char *choices; /* CHOICE: "full|none" */
    const char *metavar; /* shown in --help: SIZE, N, PATH, ... */
    const char *group;   /* --help section */
    const char *help;    /* one line */
    unsigned who;        /* CB_FLAG_* bits */
    size_t off;          /* offset of the value in cb_config_t */
    size_t count_off;    /* REPEAT: offset of the size_t count in cb_config_t */
    /* Further checks of a value already of the right kind, or NULL.
     * 0 ok, -1 with a reason in err. */
    int (*check)(const char *val, char *err, size_t err_len);
} cb_flag_t;

/* The table and its length. */
const cb_flag_t *cb_flags_table(size_t *n);
/* The row named `name` (without "--") read by a program in `who`, or NULL. */
const cb_flag_t *cb_flags_find(const char *name, unsigned who);
/* Every value set to its row's default. */
void cb_config_defaults(cb_config_t *c);
/* Parses and checks `val` for row f into c.  0 ok, -1 with a message naming
 * the flag in err. */
int cb_flags_set(cb_config_t *c, const cb_flag_t *f, const char *val, char *err, size_t err_len);

/* Called for an argument no row of `who` knows.  argv[*i] is it; the hook may
 * consume following arguments by advancing *i.  1 handled, 0 not an option
 * it knows (parse fails), -1 failed with err set. */
typedef int (*cb_flags_other_fn)(int argc, char **argv, int *i, void *ud, char *err,
                                 size_t err_len);

/* Parses argv[1..argc) into c (which the caller has set to defaults).
 * `--name value` and `--name=value`.  0 ok, -1 with err set. */
int cb_flags_parse(cb_config_t *c, unsigned who, int argc, char **argv, cb_flags_other_fn other,
                   void *ud, char *err, size_t err_len);

/* Checks that the sandbox flags fit together: allow: needs --sandbox full,
 * --network-resolve needs allow:, --workdir-source needs --sandbox full.
 * 0 ok, -1 with err. */
int cb_flags_check_network(const cb_config_t *c, char *err, size_t err_len);

/* Checks that --isolation fits the other flags: a stronger tier needs
 * --sandbox full and --network none.  0 ok, -1 with err. */
int cb_flags_check_isolation(const cb_config_t *c, char *err, size_t err_len);
/* What --env accepts (flags.c is its only judge, the launcher applies it).
 * NAME must be [A-Za-z_][A-Za-z0-9_]* of at most CB_ENV_NAME_MAX bytes and
 * not one the sandbox fixes or that changes what the runner loads before
 * user code (cb_flags_env_refused).  0 ok, -1 with a reason in err. */
int cb_flags_env_check(const char *val, char *err, size_t err_len);
/* --workdir-source: 0 when the resolved path real may be exposed, -1 with
 * a reason for "/", system directories and what lies below /proc, /etc... */
int cb_flags_workdir_refused(const char *real, char *err, size_t err_len);
/* Why NAME (name_len bytes) may not be set with --env, or NULL when it may. */
const char *cb_flags_env_refused(const char *name, size_t name_len);

/* Prints the flags read by `who`, grouped, with defaults and bounds. */
void cb_flags_usage(FILE *f, unsigned who);

/* Renders c's launcher flags (rows with CB_FLAG_LAUNCHER, not NOFWD) as
 * canonical "--name value" argv entries into out[0..max); numbers are
 * written into store.  Returns the count, or -1 when max is too small. */
typedef char cb_flag_num_t[CB_FLAG_NUM_MAX];
int cb_flags_forward(const cb_config_t *c, const char **out, size_t max, cb_flag_num_t *store,
                     size_t store_n);

#endif
