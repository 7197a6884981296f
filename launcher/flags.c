/*
 * flags.c - the flag table and its parser (see flags.h); the --help text
 * and the forwarded argv are read out of it by flags_usage.c.
 *
 * Every bound below is a named constant of sandbox_limits.h or limits.h; a
 * row is the only place where a flag's name, kind, bounds, default and help
 * are written.  The parser is pure: it fills a cb_config_t or writes a
 * one-line message naming the flag, and never prints or exits, so the unit
 * test drives it and each program decides how to report.
 */
#include "launcher/flags.h"

#include "isolate/cb_limits.h"
#include "isolate/idpool.h"
#include "isolate/sandbox_limits.h"
#include "isolate/snap_limits.h"
#include "launcher/netproxy_limits.h"
#include "launcher/netrules.h"
#include "launcher/netsecrets.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int s_fail(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- checks of single values ---------------------------------------------- */

/* An absolute path with no ".." component: the sandbox side must not climb
 * out of its new root, and nothing we bind should be ambiguous. */
static bool s_abs_clean(const char *p) {
    if (p[0] != '/') return false;
    for (const char *c = p; (c = strstr(c, "..")) != NULL; c += 2) {
        bool starts = c[-1] == '/';
        bool ends = c[2] == '/' || c[2] == '\0';
        if (starts && ends) return false;
    }
    return true;
}

static int s_check_ro_bind(const char *v, char *err, size_t len) {
    const char *colon = strchr(v, ':');
    if (colon == NULL || strchr(colon + 1, ':') != NULL)
        return s_fail(err, len, "'%s' is not HOST:SANDBOX", v);
    size_t hl = (size_t) (colon - v);
    char host[CB_PATH_MAX / 2], sb[CB_PATH_MAX / 2];
    if (hl >= sizeof host || strlen(colon + 1) >= sizeof sb)
        return s_fail(err, len, "'%s': path too long", v);
    memcpy(host, v, hl);
    host[hl] = '\0';
    snprintf(sb, sizeof sb, "%s", colon + 1);
    if (!s_abs_clean(host) || !s_abs_clean(sb) || strcmp(sb, "/") == 0)
        return s_fail(err, len,
                      "'%s': both sides must be absolute paths without '..', and SANDBOX must "
                      "not be /",
                      v);
    static const char *const reserved[] = {
        "/proc",       "/dev",      CB_SANDBOX_HOME, "/tmp", CB_SANDBOX_RUNNER_DIR,
        "/etc/passwd", "/etc/group"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        size_t rl = strlen(reserved[i]);
        if (strncmp(sb, reserved[i], rl) == 0 && (sb[rl] == '\0' || sb[rl] == '/'))
            return s_fail(err, len, "'%s': %s is managed by the sandbox", v, reserved[i]);
    }
    return 0;
}

/* --resume: an image id (lowercase hex digits) or an absolute directory. */
static int s_check_image(const char *v, char *err, size_t len) {
    size_t n = strlen(v), hex = strspn(v, "0123456789abcdef");
    if ((n == CB_IMAGE_ID_HEX && hex == n) || (v[0] == '/' && s_abs_clean(v))) return 0;
    return s_fail(err, len,
                  "'%.64s' is neither an image id (%d hex digits) nor an absolute path", v,
                  CB_IMAGE_ID_HEX);
}

static int s_check_uid_range(const char *v, char *err, size_t len) {
    unsigned long first, count;
    return cb_idpool_parse_range(v, &first, &count, err, len);
}

static int s_check_preload(const char *v, char *err, size_t len) {
    if (v[0] == '\0' ||
        strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_., ") !=
            strlen(v))
        return s_fail(err, len,
                      "'%s': expected comma-separated module names, e.g. "
                      "numpy,pandas,matplotlib.pyplot",
                      v);
    return 0;
}

/* none | host | allow:HOST[:PORT],... (the egress proxy's grammar) */
static int s_check_network(const char *v, char *err, size_t len) {
    if (strcmp(v, "none") == 0 || strcmp(v, "host") == 0) return 0;
    if (strncmp(v, "allow:", 6) != 0)
        return s_fail(err, len, "'%s' is not none|host|allow:HOST[:PORT],...", v);
    static cb_netrules_t scratch; /* large: off the stack */
    cb_netrules_init(&scratch);
    return cb_netrules_parse(&scratch, v + 6, err, len);
}

static int s_check_secret(const char *v, char *err, size_t len) {
    cb_secret_spec_t sp;
    return cb_secret_spec_parse(v, &sp, err, len);
}

static int s_check_pin(const char *v, char *err, size_t len) {
    static cb_netrules_t scratch;
    cb_netrules_init(&scratch);
    return cb_netrules_add_pin(&scratch, v, err, len);
}

/* --workdir-source DIR|cwd: "cwd" is resolved by the launcher (it starts in
 * the kernel's working directory); DIR must be an existing directory, and
 * never one that holds the system or every user's home. */
static const char *const s_wd_refused[] = {"/",    "/proc", "/sys",  "/dev", "/run",
                                           "/etc", "/boot", "/usr",  "/var", "/home",
                                           "/lib", "/bin",  "/sbin", "/tmp"};
/* below these, nothing may be a notebook folder */
static const char *const s_wd_refused_below[] = {"/proc", "/sys", "/dev", "/run", "/etc", "/boot"};

int cb_flags_workdir_refused(const char *real, char *err, size_t len) {
    for (size_t i = 0; i < sizeof s_wd_refused / sizeof s_wd_refused[0]; i++)
        if (strcmp(real, s_wd_refused[i]) == 0)
            return s_fail(err, len,
                          "%s: refusing to expose a system directory (everything in it but "
                          "dotfiles would be readable in the sandbox)",
                          real);
    for (size_t i = 0; i < sizeof s_wd_refused_below / sizeof s_wd_refused_below[0]; i++) {
        size_t n = strlen(s_wd_refused_below[i]);
        if (strncmp(real, s_wd_refused_below[i], n) == 0 && real[n] == '/')
            return s_fail(err, len, "%s: refusing a folder below %s", real, s_wd_refused_below[i]);
    }
    return 0;
}

static int s_check_workdir_source(const char *v, char *err, size_t len) {
    if (strcmp(v, "cwd") == 0) return 0;
    if (!s_abs_clean(v))
        return s_fail(err, len, "'%s' is neither 'cwd' nor an absolute path without '..'", v);
    char real[CB_PATH_MAX];
    if (realpath(v, real) == NULL) return s_fail(err, len, "%s: %s", v, strerror(errno));
    struct stat st;
    if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
        return s_fail(err, len, "%s is not a directory", v);
    return cb_flags_workdir_refused(real, err, len);
}

/* ---- --env ------------------------------------------------------------------ */

/* PYTHON* variables that change no import path and run no code before the
 * runner's own: honoured by the runner's interpreter (see child.c). */
static const char *const s_env_python_ok[] = {"PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8",
                                              "PYTHONWARNINGS", "PYTHONFAULTHANDLER"};
/* Names the sandbox sets itself (child.c, netproxy.c): its layout and its
 * only way out. */
static const char *const s_env_fixed[] = {
    "PATH",      "HOME",       "USER",        "LOGNAME",    "TMPDIR",
    "CELLBLOCK", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
    "NO_PROXY",  "no_proxy",   "ALL_PROXY",   "all_proxy",  "GLIBC_TUNABLES"};

static bool s_name_is(const char *name, size_t n, const char *what) {
    return strlen(what) == n && memcmp(name, what, n) == 0;
}

const char *cb_flags_env_refused(const char *name, size_t n) {
    if (n >= 3 && memcmp(name, "LD_", 3) == 0)
        return "the dynamic loader reads LD_* before any Python runs (LD_PRELOAD and "
               "LD_AUDIT load code into the runner, LD_LIBRARY_PATH swaps the libraries "
               "Python loads)";
    if (n >= 10 && memcmp(name, "CELLBLOCK_", 10) == 0)
        return "CELLBLOCK_* names are the sandbox's own";
    for (size_t i = 0; i < sizeof s_env_fixed / sizeof s_env_fixed[0]; i++)
        if (s_name_is(name, n, s_env_fixed[i]))
            return s_name_is(name, n, "GLIBC_TUNABLES")
                       ? "the dynamic loader parses it before any Python runs"
                       : "the sandbox sets it (its paths, its user, its only way out)";
    if (n >= 6 && memcmp(name, "PYTHON", 6) == 0) {
        for (size_t i = 0; i < sizeof s_env_python_ok / sizeof s_env_python_ok[0]; i++)
            if (s_name_is(name, n, s_env_python_ok[i])) return NULL;
        return "PYTHON* variables other than PYTHONHASHSEED, PYTHONIOENCODING, PYTHONUTF8, "
               "PYTHONWARNINGS and PYTHONFAULTHANDLER change what the runner's interpreter "
               "imports or runs before its own code";
    }
    return NULL;
}

int cb_flags_env_check(const char *v, char *err, size_t len) {
    const char *eq = strchr(v, '=');
    size_t n = eq ? (size_t) (eq - v) : strlen(v);
    if (n == 0 || n > CB_ENV_NAME_MAX)
        return s_fail(err, len, "'%.64s': expected NAME or NAME=VALUE (NAME of 1 to %d bytes)", v,
                      CB_ENV_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char ch = v[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' ||
                  (i > 0 && ch >= '0' && ch <= '9');
        if (!ok)
            return s_fail(err, len, "'%.*s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
                          (int) n, v);
    }
    const char *why = cb_flags_env_refused(v, n);
    if (why != NULL) return s_fail(err, len, "%.*s may not be set: %s", (int) n, v, why);
    return 0;
}

/* ---- the table -------------------------------------------------------------- */

#define S_OFF(field) offsetof(cb_config_t, field)
#define S_L          CB_FLAG_LAUNCHER
#define S_K          CB_FLAG_KERNEL
#define S_NUM(x)     ((double) (x))
#define S_NO         0.0, 0.0
#define S_STR(x)     S_STR2(x)
#define S_STR2(x)    #x

static const cb_flag_t s_table[] = {
    /* name, kind, min, max, unit, default, choices, metavar, group, help, who, off, count, check */
    {"python", CB_FK_PATH, S_NO, "", "/usr/bin/python3", NULL, "PATH", "kernel",
     "interpreter run inside the sandbox", S_L | S_K | CB_FLAG_NOFWD, S_OFF(python), 0, NULL},
    {"log-level", CB_FK_CHOICE, S_NO, "", "warning", "debug|info|warning|error|critical", "LEVEL",
     "kernel", "what goes to the log (stderr)", S_L | S_K, S_OFF(log_level), 0, NULL},
    {"sandbox", CB_FK_CHOICE, S_NO, "", "full", "full|none", "MODE", "sandbox",
     "confinement; 'none' runs code UNCONFINED, for debugging", S_L, S_OFF(sandbox), 0, NULL},
    {"isolation", CB_FK_CHOICE, S_NO, "", "namespaces", "namespaces|gvisor|microvm", "TIER",
     "sandbox",
     "the kernel the code talks to: the host's behind namespaces, gVisor's user-space kernel, or "
     "a guest kernel in a QEMU micro-VM (docs/SECURITY.md)",
     S_L, S_OFF(isolation), 0, NULL},
    {"memory", CB_FK_SIZE_MB, S_NUM(CB_OPT_MIN_MEMORY_MB), S_NUM(CB_OPT_MAX_MEMORY_MB), "MiB",
     S_STR(CB_DEFAULT_MEMORY_MB), NULL, "SIZE", "sandbox",
     "memory limit, no swap (MiB, or with a K/M/G suffix)", S_L, S_OFF(memory_mb), 0, NULL},
    {"pids", CB_FK_INT, S_NUM(CB_OPT_MIN_PIDS), S_NUM(CB_OPT_MAX_PIDS), "", S_STR(CB_DEFAULT_PIDS),
     NULL, "N", "sandbox", "processes and threads", S_L, S_OFF(pids), 0, NULL},
    {"cpus", CB_FK_FLOAT, CB_OPT_MIN_CPUS, CB_OPT_MAX_CPUS, "", S_STR(CB_DEFAULT_CPUS), NULL, "F",
     "sandbox", "CPU share, e.g. 0.5 or 2", S_L, S_OFF(cpus), 0, NULL},
    {"disk", CB_FK_SIZE_MB, S_NUM(CB_OPT_MIN_DISK_MB), S_NUM(CB_OPT_MAX_DISK_MB), "MiB",
     S_STR(CB_DEFAULT_DISK_MB), NULL, "SIZE", "sandbox", "size of the working dir and /tmp (tmpfs)",
     S_L, S_OFF(disk_mb), 0, NULL},
    {"open-files", CB_FK_INT, S_NUM(CB_OPT_MIN_OPEN_FILES), S_NUM(CB_OPT_MAX_OPEN_FILES), "",
     S_STR(CB_DEFAULT_OPEN_FILES), NULL, "N", "sandbox", "open file descriptors", S_L,
     S_OFF(open_files), 0, NULL},
    {"network", CB_FK_TEXT, S_NO, "", "none", NULL, "none|host|allow:HOST[:PORT],...", "sandbox",
     "'none': loopback only; 'host': the host's network; 'allow:': loopback plus an HTTP(S) "
     "proxy outside that reaches only these hosts (no port: 80 and 443; *.example.com: the "
     "names below it; 127.0.0.1:PORT or localhost:PORT: that port of the host's loopback)",
     S_L, S_OFF(network), 0, s_check_network},
    {"network-resolve", CB_FK_TEXT, S_NO, "", NULL, NULL, "NAME=ADDR", "sandbox",
     "with allow: the proxy resolves NAME to ADDR, no DNS (repeatable)", S_L | CB_FLAG_REPEAT,
     S_OFF(network_resolve), S_OFF(n_network_resolve), s_check_pin},
    {"network-max-conns", CB_FK_INT, 1, S_NUM(CB_PROXY_MAX_CONNS_LIMIT), "",
     S_STR(CB_PROXY_DEFAULT_MAX_CONNS), NULL, "N", "sandbox",
     "with allow: concurrent connections through the proxy", S_L, S_OFF(network_max_conns), 0,
     NULL},
    {"network-max-bytes", CB_FK_SIZE_MB, 1, S_NUM(CB_PROXY_MAX_MB_LIMIT), "MiB",
     S_STR(CB_PROXY_DEFAULT_MAX_MB), NULL, "SIZE", "sandbox",
     "with allow: bytes the proxy relays per session, both directions", S_L, S_OFF(network_max_mb),
     0, NULL},
    {"secret", CB_FK_TEXT, S_NO, "", NULL, NULL, "NAME@HOST[,HOST...]", "sandbox",
     "with allow: the proxy puts the value of the kernel's variable NAME into request headers "
     "to these hosts (TLS to them ends at the proxy); inside, NAME holds a placeholder "
     "(repeatable)",
     S_L | CB_FLAG_REPEAT, S_OFF(secret), S_OFF(n_secret), s_check_secret},
    {"network-upstream-ca", CB_FK_PATH, S_NO, "", NULL, NULL, "FILE", "sandbox",
     "with --secret: the CAs (PEM) the proxy checks those hosts' servers against, instead of "
     "the host's trust store; only its certificates reach the sandbox's bundle",
     S_L, S_OFF(network_upstream_ca), 0, NULL},
    {"uid", CB_FK_INT, 1, S_NUM(CB_OPT_MAX_ID), "", NULL, NULL, "N", "sandbox",
     "id the code runs as inside the sandbox; " S_STR(CB_SANDBOX_UID) " when not given", S_L,
     S_OFF(uid),
     0, NULL},
    {"gid", CB_FK_INT, 1, S_NUM(CB_OPT_MAX_ID), "", NULL, NULL, "N", "sandbox",
     "group id the code runs as inside the sandbox; " S_STR(CB_SANDBOX_UID) " when not given",
     S_L, S_OFF(gid), 0, NULL},
    {"uid-range", CB_FK_TEXT, S_NO, "", CB_SANDBOX_ID_RANGE, NULL, "FIRST:COUNT", "sandbox",
     "host ids, one per sandbox, when the kernel is root", S_L, S_OFF(uid_range), 0,
     s_check_uid_range},
    {"ro-bind", CB_FK_TEXT, S_NO, "", NULL, NULL, "HOST:SANDBOX", "sandbox",
     "expose a host path read-only inside (repeatable)", S_L | CB_FLAG_REPEAT, S_OFF(ro_bind),
     S_OFF(n_ro_bind), s_check_ro_bind},
    {"require-limits", CB_FK_BOOL, S_NO, "", NULL, NULL, NULL, "sandbox",
     "fail instead of falling back to rlimits without cgroups", S_L, S_OFF(require_limits), 0,
     NULL},
    {"no-clone-into-cgroup", CB_FK_BOOL, S_NO, "", NULL, NULL, NULL, "sandbox",
     "cgroup v2: move the sandbox into its cgroup after clone, not by clone3(CLONE_INTO_CGROUP) "
     "(for comparisons)", S_L, S_OFF(no_clone_into_cgroup), 0, NULL},
    {"runner", CB_FK_PATH, S_NO, "", NULL, NULL, "PATH", "kernel",
     "runner.py to start in the sandbox (default: the installed one)", S_L | S_K | CB_FLAG_NOFWD,
     S_OFF(runner), 0, NULL},
    {"launcher", CB_FK_PATH, S_NO, "", NULL, NULL, "PATH", "kernel",
     "cellblock-launcher to use (default: the installed one)", S_K, S_OFF(launcher), 0, NULL},
    {"timeout", CB_FK_INT, 0, S_NUM(CB_OPT_MAX_TIMEOUT_S), "s", S_STR(CB_DEFAULT_TIMEOUT_S), NULL,
     "SECONDS", "limits", "wall-clock limit per cell, 0 = none", S_K, S_OFF(timeout_s), 0, NULL},
    {"max-output", CB_FK_SIZE_MB, 1, S_NUM(CB_OPT_MAX_OUTPUT_MB), "MiB",
     S_STR(CB_DEFAULT_MAX_OUTPUT_MB), NULL, "SIZE", "limits",
     "bytes of output (streams, displays, results, errors) per cell", S_K, S_OFF(max_output_mb), 0,
     NULL},
    {"artifacts", CB_FK_CHOICE, S_NO, "", "all", "none|images|all", "MODE", "outputs",
     "files written in the working dir returned as outputs", S_K, S_OFF(artifacts), 0, NULL},
    {"artifact-max-file", CB_FK_SIZE_MB, 1, S_NUM(CB_OPT_MAX_ARTIFACT_FILE_MB), "MiB",
     S_STR(CB_DEFAULT_ARTIFACT_FILE_MB), NULL, "SIZE", "outputs", "per file", S_K,
     S_OFF(artifact_max_file_mb), 0, NULL},
    {"artifact-max-cell", CB_FK_SIZE_MB, 1, S_NUM(CB_OPT_MAX_ARTIFACT_CELL_MB), "MiB",
     S_STR(CB_DEFAULT_ARTIFACT_CELL_MB), NULL, "SIZE", "outputs", "per cell", S_K,
     S_OFF(artifact_max_cell_mb), 0, NULL},
    {"artifact-max-files", CB_FK_INT, 0, S_NUM(CB_OPT_MAX_ARTIFACT_FILES), "",
     S_STR(CB_DEFAULT_ARTIFACT_FILES), NULL, "N", "outputs", "files per cell", S_K,
     S_OFF(artifact_max_files), 0, NULL},
    {"preload", CB_FK_TEXT, S_NO, "", NULL, NULL, "MODULES", "outputs",
     "comma-separated modules imported while the sandbox is idle (by its template, with "
     "--warm)",
     S_L | S_K, S_OFF(preload), 0, s_check_preload},
    {"warm", CB_FK_CHOICE, S_NO, "", "auto", "auto|off|wait", "MODE", "sandbox",
     "start the runner as a fork of a template that has imported IPython and --preload "
     "(docs/ARCHITECTURE.md): 'auto' when there is one (and start one when not), 'wait' for "
     "it, 'off' never",
     S_L, S_OFF(warm), 0, NULL},
    {"workdir-source", CB_FK_TEXT, S_NO, "", NULL, NULL, "DIR|cwd", "sandbox",
     "the working dir is an overlay of this host folder ('cwd': the kernel's): reads see "
     "its files but dotfiles, writes stay in the sandbox",
     S_L, S_OFF(workdir_source), 0, s_check_workdir_source},
    {"env", CB_FK_TEXT, S_NO, "", NULL, NULL, "NAME[=VALUE]", "sandbox",
     "set a variable in the sandbox; NAME alone: its value in the kernel's environment at "
     "start (repeatable)",
     S_L | CB_FLAG_REPEAT, S_OFF(env), S_OFF(n_env), cb_flags_env_check},
    /* snapshots (docs/SNAPSHOTS.md) */
    {"resume", CB_FK_TEXT, S_NO, "", NULL, NULL, "IMAGE", "snapshots",
     "start from a paused session's image: its id (Sandbox.pause(), cellblock_pause_request) "
     "or its directory; it runs in its own tier (a gVisor image in gVisor; a namespaces one "
     "is --pausable), refused if --isolation asks for a stronger one",
     S_K, S_OFF(resume), 0, s_check_image},
    {"image-dir", CB_FK_PATH, S_NO, "", NULL, NULL, "DIR", "snapshots",
     "where paused sessions' images are kept (default: " CB_IMAGE_DIR_ROOT " as root, else "
     "~/" CB_IMAGE_DIR_USER ")",
     S_K, S_OFF(image_dir), 0, NULL},
    {"pausable", CB_FK_BOOL, S_NO, "", NULL, NULL, NULL, "snapshots",
     "a sandbox CRIU can dump, so the session can pause (docs/SNAPSHOTS.md): its uid 0 mapped "
     "to a second host id, the runner's channels made in its network namespace; root "
     "launcher, no warm start",
     S_L, S_OFF(pausable), 0, NULL},
    {"resume-image", CB_FK_PATH, S_NO, "", NULL, NULL, "DIR", "snapshots",
     "restore the sandbox from this image (given by the kernel once it has verified it)",
     S_L | CB_FLAG_NOFWD, S_OFF(resume_image), 0, NULL},
};

const cb_flag_t *cb_flags_table(size_t *n) {
    *n = sizeof s_table / sizeof s_table[0];
    return s_table;
}

const cb_flag_t *cb_flags_find(const char *name, unsigned who) {
    for (size_t i = 0; i < sizeof s_table / sizeof s_table[0]; i++)
        if ((s_table[i].who & who) && strcmp(s_table[i].name, name) == 0) return &s_table[i];
    return NULL;
}

/* ---- values ------------------------------------------------------------------ */

static void *s_field(cb_config_t *c, size_t off) { return (char *) c + off; }

/* Sizes: a plain number is MiB; K, M, G (binary, optional "i"/"B") scale it. */
static int s_size_mb(const char *v, double *mb) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || !isfinite(x) || x < 0) return -1;
    switch (*end) {
    case 'k':
    case 'K': x /= 1024.0, end++; break;
    case 'm':
    case 'M': end++; break;
    case 'g':
    case 'G': x *= 1024.0, end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end != '\0') return -1;
    *mb = x;
    return 0;
}

static bool s_choice_ok(const char *choices, const char *v) {
    size_t vl = strlen(v);
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t cl = bar ? (size_t) (bar - c) : strlen(c);
        if (cl == vl && memcmp(c, v, vl) == 0) return true;
        if (bar == NULL) break;
        c = bar + 1;
    }
    return false;
}

int cb_flags_set(cb_config_t *c, const cb_flag_t *f, const char *val, char *err, size_t len) {
    if (strlen(val) >= CB_FLAG_VALUE_MAX)
        return s_fail(err, len, "--%s: value longer than %d bytes", f->name, CB_FLAG_VALUE_MAX);
    void *p = s_field(c, f->off);
    char *end;
    switch (f->kind) {
    case CB_FK_BOOL: *(bool *) p = true; return 0;
    case CB_FK_INT: {
        errno = 0;
        long long x = strtoll(val, &end, 10);
        if (errno || end == val || *end != '\0')
            return s_fail(err, len, "--%s: '%s' is not an integer", f->name, val);
        if ((double) x < f->min || (double) x > f->max)
            return s_fail(err, len, "--%s: %lld is out of range [%.0f, %.0f]", f->name, x, f->min,
                          f->max);
        *(long *) p = (long) x;
        return 0;
    }
    case CB_FK_SIZE_MB: {
        double mb;
        if (s_size_mb(val, &mb) < 0)
            return s_fail(err, len, "--%s: '%s' is not a size like 512, 512M or 2G", f->name, val);
        if (mb < f->min || mb > f->max)
            return s_fail(err, len, "--%s: %s is out of range [%.0f, %.0f] MiB", f->name, val,
                          f->min, f->max);
        *(long *) p = (long) mb;
        return 0;
    }
    case CB_FK_FLOAT: {
        errno = 0;
        double x = strtod(val, &end);
        if (errno || end == val || *end != '\0' || !isfinite(x))
            return s_fail(err, len, "--%s: '%s' is not a number", f->name, val);
        if (x < f->min || x > f->max)
            return s_fail(err, len, "--%s: %g is out of range [%g, %g]", f->name, x, f->min,
                          f->max);
        *(double *) p = x;
        return 0;
    }
    case CB_FK_CHOICE:
        if (!s_choice_ok(f->choices, val))
            return s_fail(err, len, "--%s: '%s' is not %s", f->name, val, f->choices);
        break;
    case CB_FK_PATH:
        if (val[0] != '/')
            return s_fail(err, len, "--%s: '%s' is not an absolute path", f->name, val);
        break;
    case CB_FK_TEXT: break;
    }
    if (f->check != NULL) {
        char why[CB_FLAG_ERR_MAX];
        if (f->check(val, why, sizeof why) < 0) return s_fail(err, len, "--%s: %s", f->name, why);
    }
    if (f->who & CB_FLAG_REPEAT) {
        size_t *n = s_field(c, f->count_off);
        if (*n >= CB_FLAG_REPEAT_MAX)
            return s_fail(err, len, "--%s: given more than %d times", f->name, CB_FLAG_REPEAT_MAX);
        ((const char **) p)[(*n)++] = val;
    } else {
        *(const char **) p = val;
    }
    return 0;
}

void cb_config_defaults(cb_config_t *c) {
    memset(c, 0, sizeof *c);
    char err[CB_FLAG_ERR_MAX];
    for (size_t i = 0; i < sizeof s_table / sizeof s_table[0]; i++) {
        const cb_flag_t *f = &s_table[i];
        if (f->def == NULL) continue;
        /* a default that fails its own row is a programming error */
        if (cb_flags_set(c, f, f->def, err, sizeof err) < 0) abort();
    }
}

/* ---- argv --------------------------------------------------------------------- */

int cb_flags_parse(cb_config_t *c, unsigned who, int argc, char **argv, cb_flags_other_fn other,
                   void *ud, char *err, size_t len) {
    if (len > 0) err[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const cb_flag_t *f = NULL;
        const char *val = NULL;
        if (strncmp(a, "--", 2) == 0 && a[2] != '\0') {
            char name[CB_FLAG_NUM_MAX * 2];
            const char *eq = strchr(a + 2, '=');
            size_t nl = eq ? (size_t) (eq - a - 2) : strlen(a + 2);
            if (nl < sizeof name) {
                memcpy(name, a + 2, nl);
                name[nl] = '\0';
                f = cb_flags_find(name, who);
                if (f && eq) val = eq + 1;
            }
        }
        if (f == NULL) {
            int r = other ? other(argc, argv, &i, ud, err, len) : 0;
            if (r < 0) return -1;
            if (r == 0) return s_fail(err, len, "unknown option '%s' (see --help)", a);
            continue;
        }
        if (f->kind == CB_FK_BOOL) {
            if (val != NULL) return s_fail(err, len, "--%s takes no value", f->name);
            val = "1";
        } else if (val == NULL) {
            if (i + 1 >= argc) return s_fail(err, len, "--%s needs a value", f->name);
            val = argv[++i];
        }
        if (cb_flags_set(c, f, val, err, len) < 0) return -1;
    }
    return 0;
}

int cb_flags_check_network(const cb_config_t *c, char *err, size_t len) {
    bool allow = strncmp(c->network, "allow:", 6) == 0;
    if (allow && strcmp(c->sandbox, "none") == 0)
        return s_fail(err, len,
                      "--network allow: needs --sandbox full (without a sandbox there is no "
                      "allowlist to enforce)");
    if (c->n_network_resolve > 0 && !allow)
        return s_fail(err, len, "--network-resolve needs --network allow:...");
    if (c->network_upstream_ca != NULL && c->n_secret == 0)
        return s_fail(err, len,
                      "--network-upstream-ca is for the hosts of a --secret (the proxy reads "
                      "no other TLS)");
    if (cb_secret_specs_check(allow ? c->network + 6 : NULL, c->secret, c->n_secret, c->env,
                              c->n_env, err, len) < 0)
        return -1;
    if (c->network_upstream_ca != NULL &&
        cb_netsecrets_ca_check(c->network_upstream_ca, err, len) < 0)
        return -1;
    if (c->workdir_source != NULL && strcmp(c->sandbox, "none") == 0)
        return s_fail(err, len,
                      "--workdir-source needs --sandbox full (without a sandbox nothing would "
                      "keep the host folder read-only)");
    return 0;
}

int cb_flags_check_isolation(const cb_config_t *c, char *err, size_t len) {
    if (c->pausable && strcmp(c->isolation, "namespaces") != 0)
        return s_fail(err, len,
                      "--pausable is for --isolation namespaces (the gvisor tier pauses without "
                      "it; the microvm tier cannot pause)");
    if (c->pausable && strcmp(c->sandbox, "none") == 0)
        return s_fail(err, len, "--pausable needs --sandbox full");
    if (c->pausable && strcmp(c->warm, "wait") == 0)
        return s_fail(err, len,
                      "--pausable starts the runner cold (its channels are made in the "
                      "sandbox): drop --warm wait");
    if (strcmp(c->isolation, "namespaces") == 0) return 0;
    if (strcmp(c->sandbox, "none") == 0)
        return s_fail(err, len, "--isolation %s needs --sandbox full", c->isolation);
    if (strcmp(c->network, "none") != 0)
        return s_fail(err, len,
                      "--isolation %s supports --network none only (its sandbox has no network "
                      "device and no route to the allowlist proxy)",
                      c->isolation);
    if (c->workdir_source != NULL)
        return s_fail(err, len, "--isolation %s does not take --workdir-source (yet)",
                      c->isolation);
    return 0;
}
