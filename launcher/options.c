/*
 * options.c - parse and validate the launcher's command line.
 *
 * Every value is range-checked against a named bound so that a typo in a
 * kernelspec fails at start-up with a clear message instead of producing a
 * sandbox with surprising limits.  getopt_long is not used: its error
 * messages go to stderr (the runner's stderr pipe) and it permutes argv.
 */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(char *err, size_t err_len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

static int s_long(const char *opt, const char *s, long lo, long hi, long *out, char *err,
                  size_t err_len) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return s_fail(err, err_len, "%s: '%s' is not an integer", opt, s);
    if (v < lo || v > hi)
        return s_fail(err, err_len, "%s: %ld is out of range [%ld, %ld]", opt, v, lo, hi);
    *out = v;
    return 0;
}

static bool s_path_ok(const char *p) {
    if (p[0] != '/') return false;
    /* no ".." component: the sandbox side must not climb out of the new root */
    for (const char *c = p; (c = strstr(c, "..")) != NULL; c += 2) {
        bool starts = c[-1] == '/';
        bool ends = c[2] == '/' || c[2] == '\0';
        if (starts && ends) return false;
    }
    return true;
}

static int s_ro_bind(cb_options_t *o, const char *arg, char *err, size_t err_len) {
    if (o->n_ro_binds >= CB_OPT_MAX_RO_BINDS)
        return s_fail(err, err_len, "--ro-bind: more than %d given", CB_OPT_MAX_RO_BINDS);
    const char *colon = strchr(arg, ':');
    if (colon == NULL || strchr(colon + 1, ':') != NULL)
        return s_fail(err, err_len, "--ro-bind: '%s' is not HOST:SANDBOX", arg);
    cb_ro_bind_t *b = &o->ro_binds[o->n_ro_binds];
    b->buf = strdup(arg);
    if (b->buf == NULL) return s_fail(err, err_len, "--ro-bind: out of memory");
    o->n_ro_binds++;
    size_t hl = (size_t) (colon - arg);
    b->buf[hl] = '\0';
    b->host = b->buf;
    b->sandbox = b->buf + hl + 1;
    if (!s_path_ok(b->host) || !s_path_ok(b->sandbox) || strcmp(b->sandbox, "/") == 0)
        return s_fail(err, err_len,
                      "--ro-bind: '%s': both sides must be absolute paths without '..', "
                      "and SANDBOX must not be /",
                      arg);
    if (strlen(b->host) >= CB_PATH_MAX / 2 || strlen(b->sandbox) >= CB_PATH_MAX / 2)
        return s_fail(err, err_len, "--ro-bind: '%s': path too long", arg);
    static const char *const reserved[] = {
        "/proc",       "/dev",      CB_SANDBOX_HOME, "/tmp", CB_SANDBOX_RUNNER_DIR,
        "/etc/passwd", "/etc/group"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        size_t rl = strlen(reserved[i]);
        if (strncmp(b->sandbox, reserved[i], rl) == 0 &&
            (b->sandbox[rl] == '\0' || b->sandbox[rl] == '/'))
            return s_fail(err, err_len, "--ro-bind: '%s': %s is managed by the sandbox", arg,
                          reserved[i]);
    }
    return 0;
}

int cb_options_parse(int argc, char **argv, cb_options_t *o, char *err, size_t err_len) {
    memset(o, 0, sizeof *o);
    o->sandbox = CB_SANDBOX_FULL;
    o->memory_mb = CB_DEFAULT_MEMORY_MB;
    o->pids = CB_DEFAULT_PIDS;
    o->cpus = CB_DEFAULT_CPUS;
    o->disk_mb = CB_DEFAULT_DISK_MB;
    o->open_files = CB_DEFAULT_OPEN_FILES;
    o->uid = CB_SANDBOX_UID;
    o->gid = CB_SANDBOX_UID;
    o->log_level = CB_LOG_INFO;
    if (err_len > 0) err[0] = '\0';

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            o->help = true;
            continue;
        }
        if (strcmp(a, "--require-limits") == 0) {
            o->require_limits = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) return s_fail(err, err_len, "unexpected argument '%s'", a);
        /* every other option takes a value: --opt VALUE or --opt=VALUE */
        char name[CB_OPT_MAX_NAME];
        const char *val;
        const char *eq = strchr(a, '=');
        if (eq != NULL) {
            size_t nl = (size_t) (eq - a);
            if (nl >= sizeof name) return s_fail(err, err_len, "unknown option '%s'", a);
            memcpy(name, a, nl);
            name[nl] = '\0';
            val = eq + 1;
        } else {
            if (strlen(a) >= sizeof name) return s_fail(err, err_len, "unknown option '%s'", a);
            memcpy(name, a, strlen(a) + 1);
            if (i + 1 >= argc) return s_fail(err, err_len, "%s needs a value", a);
            val = argv[++i];
        }
        long v = 0;
        if (strcmp(name, "--sandbox") == 0) {
            if (strcmp(val, "full") == 0)
                o->sandbox = CB_SANDBOX_FULL;
            else if (strcmp(val, "none") == 0)
                o->sandbox = CB_SANDBOX_NONE;
            else
                return s_fail(err, err_len, "--sandbox: '%s' is not full|none", val);
        } else if (strcmp(name, "--isolation") == 0) {
            if (strcmp(val, "namespaces") == 0)
                o->isolation = CB_ISOLATION_NAMESPACES;
            else if (strcmp(val, "gvisor") == 0)
                o->isolation = CB_ISOLATION_GVISOR;
            else if (strcmp(val, "microvm") == 0)
                o->isolation = CB_ISOLATION_MICROVM;
            else
                return s_fail(err, err_len, "--isolation: '%s' is not namespaces|gvisor|microvm",
                              val);
        } else if (strcmp(name, "--memory") == 0) {
            if (s_long(name, val, CB_OPT_MIN_MEMORY_MB, CB_OPT_MAX_MEMORY_MB, &o->memory_mb, err,
                       err_len) < 0)
                return -1;
        } else if (strcmp(name, "--pids") == 0) {
            if (s_long(name, val, CB_OPT_MIN_PIDS, CB_OPT_MAX_PIDS, &o->pids, err, err_len) < 0)
                return -1;
        } else if (strcmp(name, "--cpus") == 0) {
            char *end = NULL;
            errno = 0;
            double d = strtod(val, &end);
            if (errno != 0 || end == val || *end != '\0' || !isfinite(d))
                return s_fail(err, err_len, "--cpus: '%s' is not a number", val);
            if (d < CB_OPT_MIN_CPUS || d > CB_OPT_MAX_CPUS)
                return s_fail(err, err_len, "--cpus: %g is out of range [%g, %g]", d,
                              CB_OPT_MIN_CPUS, CB_OPT_MAX_CPUS);
            o->cpus = d;
        } else if (strcmp(name, "--disk") == 0) {
            if (s_long(name, val, CB_OPT_MIN_DISK_MB, CB_OPT_MAX_DISK_MB, &o->disk_mb, err,
                       err_len) < 0)
                return -1;
        } else if (strcmp(name, "--open-files") == 0) {
            if (s_long(name, val, CB_OPT_MIN_OPEN_FILES, CB_OPT_MAX_OPEN_FILES, &o->open_files, err,
                       err_len) < 0)
                return -1;
        } else if (strcmp(name, "--network") == 0) {
            if (strcmp(val, "none") == 0)
                o->network_host = false;
            else if (strcmp(val, "host") == 0)
                o->network_host = true;
            else
                return s_fail(err, err_len, "--network: '%s' is not none|host", val);
        } else if (strcmp(name, "--uid") == 0) {
            if (s_long(name, val, 1, CB_OPT_MAX_ID, &v, err, err_len) < 0) return -1;
            o->uid = (uid_t) v;
        } else if (strcmp(name, "--gid") == 0) {
            if (s_long(name, val, 1, CB_OPT_MAX_ID, &v, err, err_len) < 0) return -1;
            o->gid = (gid_t) v;
        } else if (strcmp(name, "--ro-bind") == 0) {
            if (s_ro_bind(o, val, err, err_len) < 0) return -1;
        } else if (strcmp(name, "--log-level") == 0) {
            if (cb_log_parse_level(val, &o->log_level) < 0)
                return s_fail(err, err_len, "--log-level: '%s' is not debug|info|warning|error",
                              val);
        } else if (strcmp(name, "--workdir-name") == 0) {
            if (val[0] == '\0' || strlen(val) >= CB_OPT_MAX_NAME || strchr(val, '/') != NULL ||
                strcmp(val, ".") == 0 || strcmp(val, "..") == 0)
                return s_fail(err, err_len, "--workdir-name: '%s' is not a plain name", val);
            o->workdir_name = val;
        } else if (strcmp(name, "--python") == 0) {
            if (val[0] != '/') return s_fail(err, err_len, "--python: '%s' is not absolute", val);
            o->python = val;
        } else if (strcmp(name, "--runner") == 0) {
            if (val[0] != '/') return s_fail(err, err_len, "--runner: '%s' is not absolute", val);
            o->runner = val;
        } else {
            return s_fail(err, err_len, "unknown option '%s'", name);
        }
    }
    if (o->help) return 0;
    if (o->sandbox == CB_SANDBOX_NONE && o->isolation != CB_ISOLATION_NAMESPACES)
        return s_fail(err, err_len, "--isolation gvisor|microvm needs --sandbox full");
    if (o->python == NULL) return s_fail(err, err_len, "--python PATH is required");
    if (o->runner == NULL) return s_fail(err, err_len, "--runner FILE is required");
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
    dprintf(fd,
            "usage: cellblock-launcher [OPTIONS] --python PATH --runner FILE\n"
            "\n"
            "Starts the cellblock runner in a sandbox and supervises it.  Meant to be\n"
            "spawned by cellblock-kernel with fd 3 = event socket, fd 4 = report socket.\n"
            "\n"
            "  --sandbox full|none     confinement (default full; none = debugging only)\n"
            "  --isolation T           namespaces|gvisor|microvm: the kernel user code talks to\n"
            "                          (default namespaces: the host's)\n"
            "  --memory MB             memory limit, no swap (default %d)\n"
            "  --pids N                process/thread limit (default %d)\n"
            "  --cpus F                CPU quota in CPUs (default %.1f)\n"
            "  --disk MB               size of the working dir and of /tmp (default %d)\n"
            "  --open-files N          RLIMIT_NOFILE (default %d)\n"
            "  --network none|host     none: loopback only (default none)\n"
            "  --uid N, --gid N        runner's ids when launched as root (default %d)\n"
            "  --ro-bind HOST:SANDBOX  extra read-only bind, repeatable (max %d)\n"
            "  --require-limits        fail when cgroup limits cannot be applied\n"
            "  --log-level L           debug|info|warning|error (default info)\n"
            "  --workdir-name NAME     accepted, unused in v1\n",
            CB_DEFAULT_MEMORY_MB, CB_DEFAULT_PIDS, CB_DEFAULT_CPUS, CB_DEFAULT_DISK_MB,
            CB_DEFAULT_OPEN_FILES, CB_SANDBOX_UID, CB_OPT_MAX_RO_BINDS);
}
