/* test_options.c - the launcher's command line: defaults, values, errors. */
#include <string.h>

#include "launcher/options.h"
#include "tap.h"

static int parse(cb_options_t *o, char *err, size_t n, int argc, const char **argv) {
    return cb_options_parse(argc, (char **) argv, o, err, n);
}

int main(void) {
    char err[256];
    cb_options_t o;
    const char *a1[] = {"x", "--python", "/usr/bin/python3", "--runner", "/r/runner.py"};
    TAP_EQ_INT(parse(&o, err, sizeof err, 5, a1), 0, "minimal command line parses");
    TAP_EQ_INT(o.sandbox, CB_SANDBOX_FULL, "sandbox defaults to full");
    TAP_EQ_INT(o.memory_mb, CB_DEFAULT_MEMORY_MB, "memory default");
    TAP_EQ_INT(o.uid, CB_SANDBOX_UID, "uid default");
    TAP_OK(!o.network_host, "network defaults to none");
    cb_options_fini(&o);

    const char *a2[] = {"x",
                        "--sandbox=none",
                        "--memory",
                        "256",
                        "--pids=10",
                        "--cpus",
                        "0.5",
                        "--disk",
                        "20",
                        "--open-files",
                        "64",
                        "--network",
                        "host",
                        "--uid",
                        "1000",
                        "--gid=1001",
                        "--ro-bind",
                        "/data:/mnt/data",
                        "--require-limits",
                        "--log-level",
                        "debug",
                        "--python",
                        "/usr/bin/python3",
                        "--runner",
                        "/r/runner.py"};
    TAP_EQ_INT(parse(&o, err, sizeof err, (int) (sizeof a2 / sizeof a2[0]), a2), 0,
               "every option parses");
    TAP_EQ_INT(o.sandbox, CB_SANDBOX_NONE, "--sandbox=none");
    TAP_EQ_INT(o.memory_mb, 256, "--memory");
    TAP_EQ_INT(o.pids, 10, "--pids=");
    TAP_OK(o.cpus > 0.49 && o.cpus < 0.51, "--cpus 0.5");
    TAP_OK(o.network_host, "--network host");
    TAP_EQ_INT(o.gid, 1001, "--gid=");
    TAP_EQ_INT(o.n_ro_binds, 1, "one --ro-bind");
    TAP_EQ_STR(o.ro_binds[0].host, "/data", "ro-bind host side");
    TAP_EQ_STR(o.ro_binds[0].sandbox, "/mnt/data", "ro-bind sandbox side");
    TAP_OK(o.require_limits, "--require-limits");
    TAP_EQ_INT(o.log_level, CB_LOG_DEBUG, "--log-level debug");
    cb_options_fini(&o);

    static const struct {
        const char *opt, *val, *msg;
    } bad[] = {
        {"--memory", "abc", "not an integer"},  {"--memory", "1", "out of range"},
        {"--memory", "12x", "not an integer"},  {"--pids", "-5", "out of range"},
        {"--cpus", "nan", "not a number"},      {"--cpus", "0", "out of range"},
        {"--network", "bridge", "none|host"},   {"--sandbox", "half", "full|none"},
        {"--uid", "0", "out of range"},         {"--ro-bind", "/a", "HOST:SANDBOX"},
        {"--ro-bind", "a:/b", "absolute"},      {"--ro-bind", "/a:/b/../../etc", "absolute"},
        {"--ro-bind", "/a:/proc/x", "managed"}, {"--ro-bind", "/a:/", "must not be /"},
        {"--log-level", "loud", "debug"},       {"--python", "python3", "not absolute"},
        {"--bogus", "1", "unknown option"},     {"--workdir-name", "../x", "plain name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *av[] = {"x", bad[i].opt, bad[i].val, "--python", "/p", "--runner", "/r"};
        int rc = parse(&o, err, sizeof err, 7, av);
        TAP_OK(rc == -1 && strstr(err, bad[i].msg) != NULL, "%s %s rejected (%s)", bad[i].opt,
               bad[i].val, err);
        cb_options_fini(&o);
    }
    const char *a3[] = {"x", "--python", "/p"};
    TAP_OK(parse(&o, err, sizeof err, 3, a3) == -1 && strstr(err, "--runner"),
           "missing --runner rejected");
    cb_options_fini(&o);
    const char *a4[] = {"x", "--memory"};
    TAP_OK(parse(&o, err, sizeof err, 2, a4) == -1 && strstr(err, "needs a value"),
           "option without value rejected");
    cb_options_fini(&o);
    TAP_DONE();
}
