/*
 * options.c - cellblock-kernel's command line (see options.h).
 */
#include "kernel/options.h"

#include "artifacts/artifacts.h"
#include "isolate/cb_limits.h"

#include <ctype.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cb_opts_usage(FILE *f) {
    fprintf(
        f, "usage: cellblock-kernel -f CONNECTION_FILE [options]\n"
           "       cellblock-kernel install [--user|--prefix P|--sys-prefix] [--name N] [options]\n"
           "       cellblock run [options] [--out DIR] [--json] FILE|-\n"
           "\n"
           "A Jupyter kernel for Python that runs every cell in a Linux sandbox.\n"
           "\n"
           "  -f, --connection-file FILE   Jupyter connection file (required)\n"
           "  -h, --help, --version\n");
    cb_flags_usage(f, CB_FLAG_KERNEL | CB_FLAG_LAUNCHER);
}

/* --Class.trait=value, as traitlets writes it (jupyter_client passes such
 * options to any kernel named python3, e.g. nbclient's
 * --HistoryManager.hist_file=:memory:). */
static bool s_traitlet(const char *a) {
    if (strncmp(a, "--", 2) != 0 || !(isalpha((unsigned char) a[2]) || a[2] == '_')) return false;
    const char *dot = strchr(a, '.');
    const char *eq = strchr(a, '=');
    if (dot == NULL || (eq != NULL && dot > eq)) return false;
    for (const char *p = a + 2; p < (eq ? eq : a + strlen(a)); p++)
        if (!(isalnum((unsigned char) *p) || *p == '_' || *p == '.')) return false;
    return true;
}

typedef struct {
    cb_opts_t *o;           /* being filled */
    const char *prog;       /* for messages */
    cb_opts_extra_fn extra; /* the caller's own arguments, or NULL */
    void *ud;               /* for extra */
    int exit;               /* CB_OPTS_EXIT_OK after --help/--version */
} s_parse_t;

static int s_other(int argc, char **argv, int *i, void *ud, char *err, size_t err_len) {
    s_parse_t *p = ud;
    const char *a = argv[*i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        cb_opts_usage(stdout);
        p->exit = CB_OPTS_EXIT_OK;
        return 1;
    }
    if (strcmp(a, "--version") == 0) {
        printf("cellblock-kernel %s\n", CB_VERSION);
        p->exit = CB_OPTS_EXIT_OK;
        return 1;
    }
    if (strcmp(a, "-f") == 0 || strcmp(a, "--connection-file") == 0) {
        if (*i + 1 >= argc) {
            snprintf(err, err_len, "%s needs a value", a);
            return -1;
        }
        p->o->c.connection_file = argv[++*i];
        return 1;
    }
    if (strncmp(a, "--connection-file=", 18) == 0) {
        p->o->c.connection_file = a + 18;
        return 1;
    }
    if (p->extra != NULL) {
        int r = p->extra(argc, argv, i, p->ud, err, err_len);
        if (r != 0) return r;
    }
    if (s_traitlet(a)) {
        fprintf(stderr, "%s: ignoring the IPython option %.200s (cellblock has no such setting)\n",
                p->prog, a);
        return 1;
    }
    return 0;
}

int cb_opts_parse(int argc, char **argv, cb_opts_t *o, const char *prog, cb_opts_extra_fn extra,
                  void *ud) {
    memset(o, 0, sizeof *o);
    cb_config_defaults(&o->c);
    s_parse_t p = {o, prog, extra, ud, CB_OPTS_RUN};
    char err[CB_FLAG_ERR_MAX];
    if (cb_flags_parse(&o->c, CB_FLAG_KERNEL | CB_FLAG_LAUNCHER, argc, argv, s_other, &p, err,
                       sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return CB_OPTS_EXIT_USAGE;
    }
    if (p.exit != CB_OPTS_RUN) return p.exit;
    if (cb_flags_check_network(&o->c, err, sizeof err) < 0 ||
        cb_flags_check_isolation(&o->c, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return CB_OPTS_EXIT_USAGE;
    }
    (void) cb_log_parse_level(o->c.log_level, &o->log_level); /* the table checked the name */
    int n = cb_flags_forward(&o->c, o->fwd, CB_OPTS_FWD_MAX, o->fwd_store, CB_OPTS_FWD_MAX);
    if (n < 0) {
        fprintf(stderr, "%s: too many sandbox options\n", prog);
        return CB_OPTS_EXIT_USAGE;
    }
    o->fwd[n] = NULL;
    return CB_OPTS_RUN;
}

int cb_opts_find_helpers(const cb_opts_t *o, char *launcher, size_t llen, char *runner,
                         size_t rlen) {
    char exe[CB_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        PLOG_E("readlink(/proc/self/exe)");
        return -1;
    }
    exe[n] = '\0';
    char *dir = dirname(exe);
    int r1 = o->c.launcher
                 ? snprintf(launcher, llen, "%s", o->c.launcher)
                 : snprintf(launcher, llen, "%s/../libexec/cellblock/cellblock-launcher", dir);
    int r2 = o->c.runner ? snprintf(runner, rlen, "%s", o->c.runner)
                         : snprintf(runner, rlen, "%s/../share/cellblock/runner/runner.py", dir);
    if (r1 < 0 || (size_t) r1 >= llen || r2 < 0 || (size_t) r2 >= rlen) {
        LOG_E("helper paths too long");
        return -1;
    }
    char real[CB_PATH_MAX];
    if (realpath(launcher, real) == NULL || access(real, X_OK) != 0) {
        PLOG_E("launcher %s", launcher);
        return -1;
    }
    snprintf(launcher, llen, "%s", real);
    if (realpath(runner, real) == NULL) {
        PLOG_E("runner %s", runner);
        return -1;
    }
    snprintf(runner, rlen, "%s", real);
    if (access(o->c.python, X_OK) != 0) {
        PLOG_E("python %s", o->c.python);
        return -1;
    }
    return 0;
}

cb_artifacts_t *cb_opts_new_artifacts(const cb_opts_t *o) {
    if (strcmp(o->c.artifacts, "none") == 0) return NULL;
    cb_artifacts_limits_t al;
    cb_artifacts_limits_default(&al);
    cb_artifacts_parse_mode(o->c.artifacts, &al.mode);
    al.max_file_bytes = (size_t) o->c.artifact_max_file_mb << 20;
    al.max_cell_bytes = (size_t) o->c.artifact_max_cell_mb << 20;
    al.max_files = (size_t) o->c.artifact_max_files;
    return cb_artifacts_new(&al);
}
