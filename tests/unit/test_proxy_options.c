/* test_proxy_options.c - the launcher's --network allow: flags: parsed,
 * validated with the proxy's own grammar, and refused in combinations that
 * would leave the allowlist unenforced. */
#include <string.h>

#include "launcher/netproxy_limits.h"
#include "launcher/options.h"
#include "tap.h"

static int parse(cb_options_t *o, char *err, size_t n, int argc, const char **argv) {
    return cb_options_parse(argc, (char **) argv, o, err, n);
}

#define BASE "x", "--python", "/usr/bin/python3", "--runner", "/r/runner.py"

int main(void) {
    char err[256];
    cb_options_t o;
    const char *a1[] = {BASE,
                        "--network",
                        "allow:pypi.org,*.corp.example:8443,[::1]:9000",
                        "--network-resolve",
                        "pypi.org=127.0.0.1",
                        "--network-max-conns=8",
                        "--network-max-bytes",
                        "16"};
    TAP_EQ_INT(parse(&o, err, sizeof err, (int) (sizeof a1 / sizeof a1[0]), a1), 0,
               "allow: with pins and bounds parses");
    TAP_EQ_STR(o.network_allow, "pypi.org,*.corp.example:8443,[::1]:9000",
               "the spec, without allow:");
    TAP_OK(!o.network_host, "not the host's network");
    TAP_EQ_INT(o.n_network_resolve, 1, "one pin");
    TAP_EQ_INT(o.network_max_conns, 8, "max conns");
    TAP_EQ_INT(o.network_max_mb, 16, "max MiB");
    cb_options_fini(&o);

    const char *a2[] = {BASE};
    TAP_EQ_INT(parse(&o, err, sizeof err, 5, a2), 0, "defaults");
    TAP_OK(o.network_allow == NULL, "no allowlist by default");
    TAP_EQ_INT(o.network_max_conns, CB_PROXY_DEFAULT_MAX_CONNS, "default max conns");
    TAP_EQ_INT(o.network_max_mb, CB_PROXY_DEFAULT_MAX_MB, "default max MiB");
    cb_options_fini(&o);

    static const struct {
        const char *flag, *value, *needle;
    } bad[] = {
        {"--network", "allow:", "empty"},
        {"--network", "allow:a.org:0", "port"},
        {"--network", "allow:::1", "IPv6"},
        {"--network", "allowed:a.org", "none|host|allow"},
        {"--network-resolve", "a.org=not-an-address", "ADDRESS"},
        {"--network-max-conns", "0", "out of range"},
        {"--network-max-bytes", "x", "not a size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *a[] = {BASE, "--network", "allow:a.org", bad[i].flag, bad[i].value};
        int rc = parse(&o, err, sizeof err, 9, a);
        TAP_OK(rc < 0 && strstr(err, bad[i].needle) != NULL, "%s %s refused: %s", bad[i].flag,
               bad[i].value, err);
        cb_options_fini(&o);
    }
    const char *a3[] = {BASE, "--network-resolve", "a.org=127.0.0.1"};
    TAP_OK(parse(&o, err, sizeof err, 7, a3) < 0 && strstr(err, "needs --network allow"),
           "a pin without an allowlist is refused: %s", err);
    cb_options_fini(&o);
    const char *a4[] = {BASE, "--network", "allow:a.org", "--sandbox", "none"};
    TAP_OK(parse(&o, err, sizeof err, 9, a4) < 0 && strstr(err, "needs --sandbox full"),
           "an allowlist without a sandbox is refused: %s", err);
    cb_options_fini(&o);
    TAP_DONE();
}
