/*
 * options.c - command-line parsing for cellblock-kernel (see options.h).
 */
#include <stdio.h>

#include "kernel/options.h"

#include "artifacts/artifacts.h"
#include "artifacts/artifacts_limits.h"
#include "limits.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    O_PYTHON = 256,
    O_LAUNCHER,
    O_RUNNER,
    O_LOGLEVEL,
    O_SANDBOX,
    O_ISOLATION,
    O_MEMORY,
    O_PIDS,
    O_CPUS,
    O_DISK,
    O_OPENFILES,
    O_TIMEOUT,
    O_MAXOUTPUT,
    O_NETWORK,
    O_UID,
    O_GID,
    O_ROBIND,
    O_REQUIRE,
    O_ARTIFACTS,
    O_ART_FILE,
    O_ART_CELL,
    O_ART_COUNT,
    O_PRELOAD,
    O_HELP,
    O_VERSION,
};

void cb_opts_usage(FILE *f) {
    fprintf(
        f,
        "usage: cellblock-kernel -f CONNECTION_FILE [options]\n"
        "       cellblock-kernel install [--user|--prefix P|--sys-prefix] [--name N] [options]\n"
        "       cellblock run [options] [--out DIR] [--json] FILE|-\n"
        "\n"
        "A Jupyter kernel for Python that runs every cell in a Linux sandbox.\n"
        "\n"
        "  -f, --connection-file FILE  Jupyter connection file (required)\n"
        "  --python PATH             interpreter run inside the sandbox (default "
        "/usr/bin/python3)\n"
        "  --log-level LEVEL         debug|info|warning|error|critical (default warning)\n"
        "\n"
        "sandbox:\n"
        "  --sandbox full|none       confinement; 'none' runs code UNCONFINED, for debugging "
        "(default full)\n"
        "  --isolation T             namespaces|gvisor|microvm: the kernel user code talks to "
        "(default namespaces)\n"
        "  --memory SIZE             memory limit, no swap; MiB or with K/M/G suffix (default %d "
        "MiB)\n"
        "  --pids N                  processes and threads (default %d)\n"
        "  --cpus F                  CPU share, e.g. 0.5 or 2 (default %.1f)\n"
        "  --disk SIZE               size of the working dir and /tmp tmpfs (default %d MiB)\n"
        "  --open-files N            open file descriptors (default %d)\n"
        "  --timeout SECONDS         wall-clock limit per cell, 0 = none (default %d)\n"
        "  --max-output SIZE         stdout+stderr bytes published per cell (default %d MiB)\n"
        "  --network none|host       'none': loopback only (default none)\n"
        "  --uid N, --gid N          ids the code runs as when the kernel is root (default %d)\n"
        "  --ro-bind HOST:SANDBOX    expose a host path read-only inside (repeatable)\n"
        "  --require-limits          fail instead of falling back to rlimits without cgroups\n"
        "\n"
        "outputs:\n"
        "  --artifacts none|images|all  files written in the working dir returned as outputs "
        "(default all)\n"
        "  --artifact-max-file SIZE  per file (default %u MiB)\n"
        "  --artifact-max-cell SIZE  per cell (default %u MiB)\n"
        "  --artifact-max-files N    files per cell (default %d)\n"
        "  --preload MODULES         comma-separated modules imported while idle (default none)\n"
        "\n"
        "  --launcher PATH, --runner PATH  override the installed helper paths\n"
        "  -h, --help, --version\n",
        CB_DEFAULT_MEMORY_MB, CB_DEFAULT_PIDS, CB_DEFAULT_CPUS, CB_DEFAULT_DISK_MB,
        CB_DEFAULT_OPEN_FILES, CB_DEFAULT_TIMEOUT_S, CB_DEFAULT_MAX_OUTPUT_MB, CB_SANDBOX_UID,
        CB_ARTIFACTS_DEFAULT_MAX_FILE_BYTES >> 20, CB_ARTIFACTS_DEFAULT_MAX_CELL_BYTES >> 20,
        CB_ARTIFACTS_DEFAULT_MAX_FILES);
}

static int s_bad(const char *flag, const char *val, const char *why) {
    fprintf(stderr, "cellblock-kernel: invalid value '%s' for %s: %s\n", val, flag, why);
    return CB_OPTS_EXIT_USAGE;
}

static int s_long(const char *flag, const char *val, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        char why[64];
        snprintf(why, sizeof why, "expected an integer in %ld..%ld", lo, hi);
        return s_bad(flag, val, why);
    }
    *out = v;
    return 0;
}

/* Sizes: plain number = MiB; suffix K, M, G (binary). Result in MiB (>= 1). */
static int s_size_mb(const char *flag, const char *val, long hi_mb, long *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || !(v > 0) || !isfinite(v))
        return s_bad(flag, val, "expected a size like 512, 512M or 2G");
    double mb = v;
    if (*end == 'k' || *end == 'K')
        mb = v / 1024.0, end++;
    else if (*end == 'm' || *end == 'M')
        end++;
    else if (*end == 'g' || *end == 'G')
        mb = v * 1024.0, end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return s_bad(flag, val, "expected a size like 512, 512M or 2G");
    if (mb < 1 || mb > (double) hi_mb) return s_bad(flag, val, "size out of range");
    *out = (long) mb;
    return 0;
}

static int s_choice(const char *flag, const char *val, const char *const *choices,
                    const char **out) {
    for (size_t i = 0; choices[i]; i++)
        if (strcmp(val, choices[i]) == 0) {
            *out = choices[i];
            return 0;
        }
    return s_bad(flag, val, "not one of the allowed choices (see --help)");
}

static void s_fwd(cb_opts_t *o, size_t *n, const char *flag, const char *val) {
    if (*n + 2 > CB_OPTS_FWD_MAX) return;
    o->fwd[(*n)++] = (char *) flag;
    if (val) o->fwd[(*n)++] = (char *) val;
}

static const char *s_num(cb_opts_t *o, size_t slot, long v) {
    snprintf(o->fwd_store[slot], sizeof o->fwd_store[slot], "%ld", v);
    return o->fwd_store[slot];
}

int cb_opts_parse(int argc, char **argv, cb_opts_t *o) {
    static const char *const sandboxes[] = {"full", "none", NULL};
    static const char *const isolations[] = {"namespaces", "gvisor", "microvm", NULL};
    static const char *const networks[] = {"none", "host", NULL};
    static const char *const artifacts[] = {"none", "images", "all", NULL};
    memset(o, 0, sizeof *o);
    o->python = "/usr/bin/python3";
    o->log_level = CB_LOG_WARNING;
    o->sandbox = "full";
    o->isolation = "namespaces";
    o->memory_mb = CB_DEFAULT_MEMORY_MB;
    o->pids = CB_DEFAULT_PIDS;
    o->cpus = CB_DEFAULT_CPUS;
    o->disk_mb = CB_DEFAULT_DISK_MB;
    o->open_files = CB_DEFAULT_OPEN_FILES;
    o->timeout_s = CB_DEFAULT_TIMEOUT_S;
    o->max_output_mb = CB_DEFAULT_MAX_OUTPUT_MB;
    o->network = "none";
    o->uid = o->gid = -1;
    o->artifacts = "all";
    o->artifact_max_file_mb = CB_ARTIFACTS_DEFAULT_MAX_FILE_BYTES >> 20;
    o->artifact_max_cell_mb = CB_ARTIFACTS_DEFAULT_MAX_CELL_BYTES >> 20;
    o->artifact_max_files = CB_ARTIFACTS_DEFAULT_MAX_FILES;

    static const struct option longopts[] = {
        {"connection-file", required_argument, 0, 'f'},
        {"python", required_argument, 0, O_PYTHON},
        {"launcher", required_argument, 0, O_LAUNCHER},
        {"runner", required_argument, 0, O_RUNNER},
        {"log-level", required_argument, 0, O_LOGLEVEL},
        {"sandbox", required_argument, 0, O_SANDBOX},
        {"isolation", required_argument, 0, O_ISOLATION},
        {"memory", required_argument, 0, O_MEMORY},
        {"pids", required_argument, 0, O_PIDS},
        {"cpus", required_argument, 0, O_CPUS},
        {"disk", required_argument, 0, O_DISK},
        {"open-files", required_argument, 0, O_OPENFILES},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"max-output", required_argument, 0, O_MAXOUTPUT},
        {"network", required_argument, 0, O_NETWORK},
        {"uid", required_argument, 0, O_UID},
        {"gid", required_argument, 0, O_GID},
        {"ro-bind", required_argument, 0, O_ROBIND},
        {"require-limits", no_argument, 0, O_REQUIRE},
        {"artifacts", required_argument, 0, O_ARTIFACTS},
        {"artifact-max-file", required_argument, 0, O_ART_FILE},
        {"artifact-max-cell", required_argument, 0, O_ART_CELL},
        {"artifact-max-files", required_argument, 0, O_ART_COUNT},
        {"preload", required_argument, 0, O_PRELOAD},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, O_VERSION},
        {0, 0, 0, 0},
    };
    optind = 1;
    opterr = 0;
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, ":f:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': o->connection_file = optarg; break;
        case O_PYTHON: o->python = optarg; break;
        case O_LAUNCHER: o->launcher = optarg; break;
        case O_RUNNER: o->runner = optarg; break;
        case O_LOGLEVEL:
            if (cb_log_parse_level(optarg, &o->log_level) < 0)
                rc = s_bad("--log-level", optarg, "debug|info|warning|error|critical");
            break;
        case O_SANDBOX: rc = s_choice("--sandbox", optarg, sandboxes, &o->sandbox); break;
        case O_ISOLATION:
            rc = s_choice("--isolation", optarg, isolations, &o->isolation);
            break;
        case O_MEMORY: rc = s_size_mb("--memory", optarg, 1L << 30, &o->memory_mb); break;
        case O_PIDS: rc = s_long("--pids", optarg, 1, 1L << 22, &o->pids); break;
        case O_CPUS: {
            char *end;
            o->cpus = strtod(optarg, &end);
            if (end == optarg || *end || !(o->cpus >= 0.01 && o->cpus <= 1024))
                rc = s_bad("--cpus", optarg, "expected a number in 0.01..1024");
            break;
        }
        case O_DISK: rc = s_size_mb("--disk", optarg, 1L << 30, &o->disk_mb); break;
        case O_OPENFILES: rc = s_long("--open-files", optarg, 16, 1L << 20, &o->open_files); break;
        case O_TIMEOUT: rc = s_long("--timeout", optarg, 0, 7L * 24 * 3600, &o->timeout_s); break;
        case O_MAXOUTPUT:
            rc = s_size_mb("--max-output", optarg, 1L << 20, &o->max_output_mb);
            break;
        case O_NETWORK: rc = s_choice("--network", optarg, networks, &o->network); break;
        case O_UID: rc = s_long("--uid", optarg, 1, 0x7fffffffL, &o->uid); break;
        case O_GID: rc = s_long("--gid", optarg, 1, 0x7fffffffL, &o->gid); break;
        case O_ROBIND:
            if (!strchr(optarg, ':') || optarg[0] != '/' || strchr(optarg, ':')[1] != '/')
                rc = s_bad("--ro-bind", optarg, "expected /HOST/PATH:/SANDBOX/PATH");
            else if (o->n_ro_binds == CB_OPTS_MAX_BINDS)
                rc = s_bad("--ro-bind", optarg, "too many");
            else
                o->ro_binds[o->n_ro_binds++] = optarg;
            break;
        case O_REQUIRE: o->require_limits = true; break;
        case O_ARTIFACTS: rc = s_choice("--artifacts", optarg, artifacts, &o->artifacts); break;
        case O_ART_FILE:
            rc = s_size_mb("--artifact-max-file", optarg, 1024, &o->artifact_max_file_mb);
            break;
        case O_ART_CELL:
            rc = s_size_mb("--artifact-max-cell", optarg, 4096, &o->artifact_max_cell_mb);
            break;
        case O_ART_COUNT:
            rc = s_long("--artifact-max-files", optarg, 0, 10000, &o->artifact_max_files);
            break;
        case O_PRELOAD:
            if (strlen(optarg) >= CB_OPTS_ARG_MAX ||
                strspn(optarg,
                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_., ") !=
                    strlen(optarg))
                rc = s_bad(
                    "--preload", optarg,
                    "expected comma-separated module names, e.g. numpy,pandas,matplotlib.pyplot");
            else
                o->preload = optarg;
            break;
        case 'h': cb_opts_usage(stdout); return CB_OPTS_EXIT_OK;
        case O_VERSION: printf("cellblock-kernel %s\n", CB_VERSION); return CB_OPTS_EXIT_OK;
        case ':':
            fprintf(stderr, "cellblock-kernel: option %s needs a value\n", argv[optind - 1]);
            return CB_OPTS_EXIT_USAGE;
        default:
            fprintf(stderr, "cellblock-kernel: unknown option '%s' (see --help)\n",
                    argv[optind - 1]);
            return CB_OPTS_EXIT_USAGE;
        }
        if (rc) return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "cellblock-kernel: unexpected argument '%s' (see --help)\n", argv[optind]);
        return CB_OPTS_EXIT_USAGE;
    }
    if (strcmp(o->sandbox, "none") == 0 && strcmp(o->isolation, "namespaces") != 0) {
        fprintf(stderr, "cellblock-kernel: --isolation %s needs --sandbox full\n", o->isolation);
        return CB_OPTS_EXIT_USAGE;
    }
    if (o->connection_file == NULL) {
        fprintf(stderr, "cellblock-kernel: -f CONNECTION_FILE is required (see --help)\n");
        return CB_OPTS_EXIT_USAGE;
    }

    /* Canonical launcher options. */
    size_t n = 0, slot = 0;
    s_fwd(o, &n, "--sandbox", o->sandbox);
    if (strcmp(o->isolation, "namespaces") != 0) s_fwd(o, &n, "--isolation", o->isolation);
    s_fwd(o, &n, "--memory", s_num(o, slot++, o->memory_mb));
    s_fwd(o, &n, "--pids", s_num(o, slot++, o->pids));
    snprintf(o->fwd_store[slot], sizeof o->fwd_store[slot], "%g", o->cpus);
    s_fwd(o, &n, "--cpus", o->fwd_store[slot++]);
    s_fwd(o, &n, "--disk", s_num(o, slot++, o->disk_mb));
    s_fwd(o, &n, "--open-files", s_num(o, slot++, o->open_files));
    s_fwd(o, &n, "--network", o->network);
    if (o->uid > 0) s_fwd(o, &n, "--uid", s_num(o, slot++, o->uid));
    if (o->gid > 0) s_fwd(o, &n, "--gid", s_num(o, slot++, o->gid));
    for (size_t i = 0; i < o->n_ro_binds; i++)
        s_fwd(o, &n, "--ro-bind", o->ro_binds[i]);
    if (o->require_limits) s_fwd(o, &n, "--require-limits", NULL);
    static const char *const lv[] = {"debug", "info", "warning", "error", "critical"};
    s_fwd(o, &n, "--log-level", lv[o->log_level]);
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
    int r1 = o->launcher
                 ? snprintf(launcher, llen, "%s", o->launcher)
                 : snprintf(launcher, llen, "%s/../libexec/cellblock/cellblock-launcher", dir);
    int r2 = o->runner ? snprintf(runner, rlen, "%s", o->runner)
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
    if (access(o->python, X_OK) != 0) {
        PLOG_E("python %s", o->python);
        return -1;
    }
    return 0;
}

cb_artifacts_t *cb_opts_new_artifacts(const cb_opts_t *o) {
    if (strcmp(o->artifacts, "none") == 0) return NULL;
    cb_artifacts_limits_t al;
    cb_artifacts_limits_default(&al);
    cb_artifacts_parse_mode(o->artifacts, &al.mode);
    al.max_file_bytes = (size_t) o->artifact_max_file_mb << 20;
    al.max_cell_bytes = (size_t) o->artifact_max_cell_mb << 20;
    al.max_files = (size_t) o->artifact_max_files;
    return cb_artifacts_new(&al);
}
