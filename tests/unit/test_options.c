/*
 * test_options.c - the one flag table, through both parsers: every numeric
 * flag at its bounds (accepted by both) and just beyond them (refused by
 * both), defaults, the canonical forwarding from kernel to launcher, and
 * the kernel's own arguments (traitlets options ignored, -f).
 */
#include "kernel/options.h"
#include "launcher/flags.h"
#include "launcher/options.h"
#include "tap.h"

#include <fcntl.h>
#include <unistd.h>

/* The launcher's parser on --name value plus the required paths. 0 ok. */
static int s_launcher(const char *name, const char *value, char *err, size_t n) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", name);
    const char *av[] = {"x", flag, value, "--python", "/usr/bin/python3", "--runner", "/r/r.py"};
    cb_options_t o;
    int rc = cb_options_parse(
        value ? 7 : 6,
        value ? (char **) av
              : (char *[]){"x", flag, "--python", "/usr/bin/python3", "--runner", "/r/r.py"},
        &o, err, n);
    cb_options_fini(&o);
    return rc;
}

/* The kernel's parser (stderr silenced). 0 ok. */
static int s_kernel(const char *name, const char *value) {
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", name);
    const char *av[] = {"cellblock-kernel", "-f", "/c.json", flag, value};
    cb_opts_t *o = calloc(1, sizeof *o);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    int rc = cb_opts_parse(value ? 5 : 4, (char **) av, o, "test", NULL, NULL);
    dup2(saved, 2);
    close(saved);
    close(null);
    free(o);
    return rc == CB_OPTS_RUN ? 0 : -1;
}

static void s_num(char *buf, size_t n, const cb_flag_t *f, double v) {
    if (f->kind == CB_FK_FLOAT)
        snprintf(buf, n, "%.4f", v);
    else
        snprintf(buf, n, "%.0f", v);
}

int main(void) {
    size_t n;
    const cb_flag_t *t = cb_flags_table(&n);
    char err[CB_FLAG_ERR_MAX], v[64];
    for (size_t i = 0; i < n; i++) {
        const cb_flag_t *f = &t[i];
        bool launcher = f->who & CB_FLAG_LAUNCHER, kernel = f->who & CB_FLAG_KERNEL;
        if (f->kind != CB_FK_INT && f->kind != CB_FK_SIZE_MB && f->kind != CB_FK_FLOAT) continue;
        double step = f->kind == CB_FK_FLOAT ? 0.001 : 1;
        const double ok[] = {f->min, f->max}, bad[] = {f->min - step, f->max + step};
        for (int k = 0; k < 2; k++) {
            s_num(v, sizeof v, f, ok[k]);
            if (launcher)
                TAP_EQ_INT(s_launcher(f->name, v, err, sizeof err), 0, "launcher accepts bound");
            if (launcher || kernel)
                TAP_OK(s_kernel(f->name, v) == 0, "kernel accepts --%s %s", f->name, v);
            s_num(v, sizeof v, f, bad[k]);
            if (launcher) {
                int rc = s_launcher(f->name, v, err, sizeof err);
                TAP_OK(rc == -1 && strstr(err, f->name), "launcher refuses --%s %s (%s)", f->name,
                       v, err);
            }
            TAP_OK(s_kernel(f->name, v) == -1, "kernel refuses --%s %s", f->name, v);
        }
    }

    /* the case: the kernel refuses what the launcher would */
    TAP_OK(s_kernel("pids", "2") == -1, "kernel refuses --pids 2 at start-up");
    TAP_OK(s_kernel("memory", "8") == -1, "kernel refuses --memory 8 at start-up");
    TAP_OK(s_kernel("memory", "2G") == 0, "sizes take a suffix");
    TAP_OK(s_kernel("network", "bridge") == -1, "unknown choice refused");
    TAP_OK(s_kernel("ro-bind", "/a:/proc/x") == -1, "reserved sandbox path refused");
    TAP_OK(s_kernel("ro-bind", "/a:/b/../../etc") == -1, "'..' refused");
    TAP_OK(s_kernel("workdir-name", "x") == -1, "the dead --workdir-name is gone");
    TAP_OK(s_kernel("preload", "os;rm") == -1, "--preload takes module names only");
    TAP_OK(s_kernel("HistoryManager.hist_file=:memory:", NULL) == 0,
           "a traitlets option is ignored, not fatal");
    TAP_OK(s_kernel("bogus", "1") == -1, "an unknown option is refused");

    /* issue 11: --env and --workdir-source */
    TAP_OK(s_kernel("env", "API_KEY") == 0, "--env NAME");
    TAP_OK(s_kernel("env", "A_1=x=y") == 0, "--env NAME=VALUE (the value may hold '=')");
    TAP_OK(s_kernel("env", "PYTHONHASHSEED=0") == 0, "--env PYTHONHASHSEED allowed");
    TAP_OK(s_kernel("env", "TZ") == 0 && s_kernel("env", "LANG=de_DE.UTF-8") == 0,
           "locale and TZ may be set");
    static const char *const refused[] = {"LD_PRELOAD=/x.so",
                                          "LD_LIBRARY_PATH",
                                          "LD_AUDIT=x",
                                          "PYTHONPATH=/x",
                                          "PYTHONSTARTUP",
                                          "PYTHONHOME",
                                          "PATH=/x",
                                          "HOME",
                                          "TMPDIR=/",
                                          "HTTPS_PROXY=x",
                                          "GLIBC_TUNABLES",
                                          "CELLBLOCK_X",
                                          "1A",
                                          "A-B",
                                          "=x",
                                          ""};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int rc = s_launcher("env", refused[i], err, sizeof err);
        TAP_OK(rc == -1 && strstr(err, "--env") != NULL, "--env '%s' refused (%s)", refused[i],
               err);
        TAP_OK(s_kernel("env", refused[i]) == -1, "kernel refuses --env '%s'", refused[i]);
    }
    char longname[CB_ENV_NAME_MAX + 2];
    memset(longname, 'A', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    TAP_OK(s_kernel("env", longname) == -1, "--env NAME over %d bytes refused", CB_ENV_NAME_MAX);
    TAP_OK(s_kernel("workdir-source", "cwd") == 0, "--workdir-source cwd");
    TAP_OK(s_kernel("workdir-source", "/usr/share") == 0, "--workdir-source DIR");
    TAP_OK(s_kernel("workdir-source", "rel/dir") == -1, "relative DIR refused");
    TAP_OK(s_kernel("workdir-source", "/no/such/dir") == -1, "missing DIR refused");
    TAP_OK(s_kernel("workdir-source", "/etc/hostname") == -1, "a file is no DIR");
    static const char *const sys_dirs[] = {"/",     "/etc",       "/proc",   "/usr",
                                           "/home", "/proc/self", "/etc/ssl"};
    for (size_t i = 0; i < sizeof sys_dirs / sizeof sys_dirs[0]; i++)
        TAP_OK(s_kernel("workdir-source", sys_dirs[i]) == -1, "--workdir-source %s refused",
               sys_dirs[i]);
    {
        const char *av[] = {"k", "-f", "/c.json", "--sandbox", "none", "--workdir-source", "cwd"};
        cb_opts_t *ko2 = calloc(1, sizeof *ko2);
        int saved = dup(2), null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        int rc = cb_opts_parse(7, (char **) av, ko2, "test", NULL, NULL);
        dup2(saved, 2);
        close(saved);
        close(null);
        TAP_EQ_INT(rc, CB_OPTS_EXIT_USAGE, "--workdir-source with --sandbox none refused");
        free(ko2);
    }

    const char *la[] = {"x",         "--sandbox=none",   "--memory", "256",
                        "--pids=10", "--cpus",           "0.5",      "--ro-bind",
                        "/d:/mnt/d", "--require-limits", "--python", "/usr/bin/python3",
                        "--runner",  "/r/runner.py"};
    cb_options_t o;
    TAP_EQ_INT(cb_options_parse(14, (char **) la, &o, err, sizeof err), 0, "launcher: many flags");
    TAP_OK(o.sandbox == CB_SANDBOX_NONE && o.memory_mb == 256 && o.pids == 10 && o.cpus > 0.49 &&
               o.cpus < 0.51 && o.require_limits,
           "launcher: values");
    TAP_EQ_STR(o.ro_binds[0].host, "/d", "ro-bind host side");
    TAP_EQ_STR(o.ro_binds[0].sandbox, "/mnt/d", "ro-bind sandbox side");
    cb_options_fini(&o);
    const char *lb[] = {"x", "--python", "/p"};
    TAP_OK(cb_options_parse(3, (char **) lb, &o, err, sizeof err) == -1 && strstr(err, "--runner"),
           "launcher: missing --runner refused");
    cb_options_fini(&o);

    /* kernel -> launcher: canonical forms the launcher parses back to the same values */
    const char *ka[] = {"k",
                        "-f",
                        "/c.json",
                        "--memory",
                        "2g",
                        "--cpus",
                        "0.25",
                        "--ro-bind",
                        "/a:/b",
                        "--ro-bind",
                        "/c:/d",
                        "--require-limits",
                        "--timeout",
                        "5",
                        "--env",
                        "K1",
                        "--env",
                        "K2=v",
                        "--workdir-source",
                        "cwd"};
    cb_opts_t *ko = calloc(1, sizeof *ko);
    TAP_EQ_INT(cb_opts_parse(20, (char **) ka, ko, "test", NULL, NULL), CB_OPTS_RUN,
               "kernel: many flags");
    TAP_EQ_STR(ko->c.connection_file, "/c.json", "-f");
    TAP_EQ_INT(ko->c.memory_mb, 2048, "2g is 2048 MiB");
    const char *fwd[CB_OPTS_FWD_MAX + 4];
    size_t nf = 0;
    fwd[nf++] = "x";
    for (size_t i = 0; ko->fwd[i]; i++)
        fwd[nf++] = ko->fwd[i];
    fwd[nf++] = "--python";
    fwd[nf++] = "/usr/bin/python3";
    fwd[nf++] = "--runner";
    fwd[nf++] = "/r/r.py";
    TAP_EQ_INT(cb_options_parse((int) nf, (char **) fwd, &o, err, sizeof err), 0,
               "the launcher parses what the kernel forwards");
    TAP_OK(o.memory_mb == 2048 && o.cpus > 0.24 && o.cpus < 0.26 && o.n_ro_binds == 2 &&
               o.require_limits,
           "... to the same values");
    TAP_OK(o.n_env == 2 && strcmp(o.env[0], "K1") == 0 && strcmp(o.env[1], "K2=v") == 0,
           "--env forwarded as given: a bare NAME is resolved by the launcher, not on a "
           "command line");
    TAP_EQ_STR(o.workdir_source, "cwd", "--workdir-source forwarded");
    bool timeout_fwd = false;
    for (size_t i = 0; ko->fwd[i]; i++)
        timeout_fwd |= strcmp(ko->fwd[i], "--timeout") == 0;
    TAP_OK(!timeout_fwd, "kernel-only flags are not forwarded");
    cb_options_fini(&o);
    free(ko);

    /* --pausable: the namespaces tier's, started cold */
    const char *pa[] = {"x", "--pausable", "--python", "/usr/bin/python3", "--runner", "/r/r.py",
                        "--isolation", "gvisor"};
    TAP_OK(cb_options_parse(6, (char **) pa, &o, err, sizeof err) == 0 && o.pausable &&
               o.warm == CB_WARM_OFF,
           "--pausable parsed, and the warm start is off (the runner's channels are made in "
           "the sandbox)");
    cb_options_fini(&o);
    TAP_OK(cb_options_parse(8, (char **) pa, &o, err, sizeof err) < 0 &&
               strstr(err, "--pausable is for --isolation namespaces") != NULL,
           "--pausable with another tier refused: %s", err);
    cb_options_fini(&o);
    const char *pw[] = {"x", "--pausable", "--warm", "wait", "--python", "/usr/bin/python3",
                        "--runner", "/r/r.py"};
    TAP_OK(cb_options_parse(8, (char **) pw, &o, err, sizeof err) < 0 &&
               strstr(err, "drop --warm wait") != NULL,
           "--pausable with --warm wait refused: %s", err);
    cb_options_fini(&o);
    TAP_OK(s_kernel("pausable", NULL) == 0, "the kernel takes --pausable (and forwards it)");

    cb_config_t c;
    cb_config_defaults(&c);
    TAP_EQ_INT(c.memory_mb, CB_DEFAULT_MEMORY_MB, "memory default from the table");
    TAP_EQ_INT(c.timeout_s, CB_DEFAULT_TIMEOUT_S, "timeout default from the table");
    TAP_EQ_STR(c.network, "none", "network default");
    TAP_DONE();
}
