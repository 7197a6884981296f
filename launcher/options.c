/*
 * options.c - parse and validate the launcher's command line.
 *
 * Values are parsed and range-checked by the one flag table (flags.c) that
 * the kernel also uses, so a kernelspec the kernel accepted never fails
 * here; this file only turns the table's values into the launcher's own
 * struct (modes as enums, --ro-bind split into its two sides).
 */
#include "launcher/options.h"

#include "isolate/idpool.h"
#include "isolate/landlock.h"
#include "isolate/landlock_abi.h"
#include "launcher/flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int s_fail(char *err, size_t err_len, const char *msg) {
    (void) snprintf(err, err_len, "%s", msg);
    return -1;
}

/* Splits one checked "HOST:SANDBOX" value into an owned copy. */
static int s_ro_bind(cb_options_t *o, const char *arg, char *err, size_t err_len) {
    cb_ro_bind_t *b = &o->ro_binds[o->n_ro_binds];
    b->buf = strdup(arg);
    if (b->buf == NULL) return s_fail(err, err_len, "--ro-bind: out of memory");
    o->n_ro_binds++;
    char *colon = strchr(b->buf, ':');
    *colon = '\0'; /* the table's check guarantees exactly one */
    b->host = b->buf;
    b->sandbox = colon + 1;
    return 0;
}

int cb_options_parse(int argc, char **argv, cb_options_t *o, char *err, size_t err_len) {
    memset(o, 0, sizeof *o);
    if (err_len > 0) err[0] = '\0';
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            o->help = true;
            return 0;
        }
    cb_config_t c;
    cb_config_defaults(&c);
    c.python = NULL; /* required from the kernel, not defaulted */
    if (cb_flags_parse(&c, CB_FLAG_LAUNCHER, argc, argv, NULL, NULL, err, err_len) < 0) return -1;
    o->sandbox = strcmp(c.sandbox, "none") == 0 ? CB_SANDBOX_NONE : CB_SANDBOX_FULL;
    o->memory_mb = c.memory_mb;
    o->pids = c.pids;
    o->cpus = c.cpus;
    o->disk_mb = c.disk_mb;
    o->open_files = c.open_files;
    o->network_host = strcmp(c.network, "host") == 0;
    o->uid = c.uid > 0 ? (uid_t) c.uid : CB_SANDBOX_UID;
    o->gid = c.gid > 0 ? (gid_t) c.gid : CB_SANDBOX_UID;
    if (cb_idpool_parse_range(c.uid_range, &o->uid_first, &o->uid_count, err, err_len) < 0)
        return -1;
    o->require_limits = c.require_limits;
    o->no_clone_into_cgroup = c.no_clone_into_cgroup;
    (void) cb_log_parse_level(c.log_level, &o->log_level); /* checked by the table */
    o->python = c.python;
    o->runner = c.runner;
    for (size_t i = 0; i < c.n_ro_bind; i++)
        if (s_ro_bind(o, c.ro_bind[i], err, err_len) < 0) return -1;
    if (o->python == NULL) return s_fail(err, err_len, "--python PATH is required");
    if (o->runner == NULL) return s_fail(err, err_len, "--runner FILE is required");
    /* --network allow: (the table checked the grammar) */
    if (strncmp(c.network, "allow:", 6) == 0) o->network_allow = c.network + 6;
    for (size_t i = 0; i < c.n_network_resolve; i++)
        o->network_resolve[i] = c.network_resolve[i];
    o->n_network_resolve = c.n_network_resolve;
    o->network_max_conns = c.network_max_conns;
    o->network_max_mb = c.network_max_mb;
    for (size_t i = 0; i < c.n_secret; i++)
        o->secret[i] = c.secret[i];
    o->n_secret = c.n_secret;
    o->network_upstream_ca = c.network_upstream_ca;
    o->workdir_source = c.workdir_source;
    for (size_t i = 0; i < c.n_env; i++)
        o->env[i] = c.env[i];
    o->n_env = c.n_env;
    o->warm = strcmp(c.warm, "off") == 0    ? CB_WARM_OFF
              : strcmp(c.warm, "wait") == 0 ? CB_WARM_WAIT
                                            : CB_WARM_AUTO;
    o->preload = c.preload;
    o->resume_image = c.resume_image;
    o->pausable = c.pausable;
    /* an image of the namespaces tier restores into a --pausable sandbox only
     * (its uid 0 mapped, its channels its own), which can pause again */
    if (c.resume_image != NULL && strcmp(c.isolation, "namespaces") == 0) o->pausable = true;
    if (o->pausable && o->warm != CB_WARM_OFF) o->warm = CB_WARM_OFF; /* its runner's channels */
    char why[CB_FLAG_ERR_MAX];
    if (cb_flags_check_network(&c, why, sizeof why) < 0 ||
        cb_flags_check_isolation(&c, why, sizeof why) < 0)
        return s_fail(err, err_len, why);
    /* a pausable sandbox leaves abstract sockets unscoped for criu's parasite,
     * which is safe only in a network namespace of its own (isolate/landlock.c) */
    if (o->pausable && o->network_host && cb_landlock_abi() >= CB_LANDLOCK_ABI_SCOPE)
        return s_fail(err, err_len,
                      "--pausable cannot be used with --network host on this kernel: criu's "
                      "dump needs abstract sockets unscoped, which is safe only in the "
                      "sandbox's own network namespace (use --network none or allow:...)");
    o->isolation = strcmp(c.isolation, "gvisor") == 0    ? CB_ISOLATION_GVISOR
                   : strcmp(c.isolation, "microvm") == 0 ? CB_ISOLATION_MICROVM
                                                         : CB_ISOLATION_NAMESPACES;
    return 0;
}

void cb_options_fini(cb_options_t *o) {
    for (size_t i = 0; i < o->n_ro_binds; i++) {
        free(o->ro_binds[i].buf);
        o->ro_binds[i].buf = NULL;
    }
    o->n_ro_binds = 0;
}

void cb_options_usage(int fd) {
    FILE *f = fdopen(dup(fd), "w");
    if (f == NULL) return;
    fprintf(f, "usage: cellblock-launcher [OPTIONS] --python PATH --runner FILE\n"
               "\n"
               "Starts the cellblock runner in a sandbox and supervises it.  Meant to be\n"
               "spawned by cellblock-kernel with fd 3 = event socket, fd 4 = report socket.\n"
               "The kernel checks these flags with the same table before it spawns.\n");
    cb_flags_usage(f, CB_FLAG_LAUNCHER);
    fclose(f);
}
