/*
 * gvisor.c - --isolation gvisor: the runner runs under gVisor's runsc.
 *
 * Inside the namespaces sandbox (same filesystem, cgroup, pid namespace),
 * the runner's slot keeps its capabilities and becomes a supervisor that
 * starts `runsc run` on an OCI bundle whose root is the sandbox's own
 * read-only root:
 *
 *   sandbox init (pid 1) ─▶ supervisor ─▶ runsc run ─▶ runsc-gofer, runsc-sandbox (the Sentry)
 *                            SIGINT → runsc kill INT          └▶ cellblock-init (pid 1 in gVisor)
 *                                                                 └▶ python -I -u runner.py
 *
 * What the user's code sees is gVisor's kernel: its own /proc, /dev, /tmp
 * and /dev/shm (gVisor tmpfs sized by --disk), no network (--network=none),
 * and the sandbox's tmpfs home bound in read-write (a gVisor "shared"
 * mount), so the kernel still collects artifacts from the host side
 * through the O_PATH fd init sends.  The runner's channels: runsc hands
 * its own stdin/stdout/stderr to the container (donated host fds), so the
 * supervisor starts runsc with fd 0 = the event socket and fds 1/2 = the
 * output pipes; cellblock-init moves fd 0 to fd 3 and puts /dev/null on 0.
 * No byte of those is relayed by us.  The debugger's channel cannot ride on
 * stdio: the supervisor listens on a unix socket in a directory bound into
 * the container (runsc --host-uds=open lets gVisor connect to it, nothing
 * else), cellblock-init connects to it before the runner starts and copies
 * between that connection and the runner's fd 4 (a socketpair in gVisor:
 * runsc checkpoint cannot save a host socket, see init_gvisor.c), and the
 * supervisor copies bytes between the connection and the kernel's debug
 * socket, without reading them (gvisor_dbg.c: fixed buffers, each direction
 * paused while its buffer is full).  The socket's directory is root's: only
 * cellblock-init, root in gVisor, reaches it, not the runner's uid.
 *
 * runsc's own state (--root), bundle and log live in the sandbox's /tmp,
 * which gVisor's /tmp hides from the code; they vanish with the sandbox.
 * Limits: the sandbox's cgroup holds runsc's processes, with room added for
 * the Sentry and gofer (CB_GVISOR_MEM_MB, CB_GVISOR_PIDS); the code's own
 * open files are capped by RLIMIT_NOFILE inside gVisor.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/seccomp_filter.h"
#include "tiers/gvisor_priv.h"
#include "isolate/snap_limits.h"
#include "isolate/util.h"

enum { S_ERR_STATE = 1, S_ERR_CONFIG = 2, S_ERR_EXEC = 3, S_ERR_IMAGE = 5 };

static const char *const s_bin_dirs[] = {
    "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", NULL};

/* Whether runsc's help (argv: what it is asked) lists -flag with word in
 * that flag's own lines. */
static bool s_runsc_has(const char *runsc, char *const argv[], const char *flag,
                        const char *word) {
    char *env[] = {(char *) "PATH=" CB_SANDBOX_PATH, NULL};
    static char out[CB_GVISOR_HELP_MAX];
    if (cb_tier_output(runsc, argv, env, out, sizeof out, CB_GVISOR_HELP_MS) < 0) return false;
    char key[CB_GVISOR_FLAG_MAX];
    if (snprintf(key, sizeof key, "\n  -%s ", flag) >= (int) sizeof key) return false;
    const char *f = strstr(out, key);
    const char *next = f == NULL ? NULL : strstr(f + 1, "\n  -");
    const char *w = f == NULL ? NULL : strstr(f, word);
    return w != NULL && (next == NULL || w < next);
}

static const char *s_platform(const cb_gvisor_t *g) { return g->systrap ? "systrap" : "ptrace"; }

/* What this runsc can do, asked of runsc itself on the host before anything
 * is in the sandbox (two --help answers, about 15 ms each):
 * - checkpoint --compression=none (gVisor from 2023 on: Debian 12's
 *   bookworm-backports, Debian 13): a restore then reads the memory as it is
 *   instead of inflating it on the sandbox's CPU quota, and a session of
 *   100 MiB of random floats resumes in about 0.5 s instead of 2 s
 *   (docs/SNAPSHOTS.md); an older runsc (Debian 12's own) compresses;
 * - the systrap platform (gVisor's default from 2023 on), else ptrace: named
 *   on the command line, so the banner says which one runs. */
static void s_probe(cb_gvisor_t *g) {
    char *ckpt[] = {g->runsc, (char *) "checkpoint", (char *) "--help", NULL};
    char *flags[] = {g->runsc, (char *) "flags", NULL}; /* its global flags */
    g->ckpt_raw = s_runsc_has(g->runsc, ckpt, "compression", "none");
    g->systrap = s_runsc_has(g->runsc, flags, "platform", "systrap");
}

cb_gvisor_t *cb_gvisor_new(const cb_options_t *opts, char *why, size_t why_len) {
    cb_gvisor_t *g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    g->opts = opts;
    g->image_fd = -1;
    if (geteuid() != 0) {
        /* runsc --rootless would run the code as uid 0 in gVisor (the only id
         * it can map) and weaken the uid story: refuse instead */
        (void) snprintf(why, why_len,
                        "--isolation gvisor needs the kernel to run as root (runsc builds its "
                        "own namespaces, chroot and seccomp sandbox): run the kernel as root, "
                        "or use --isolation microvm|namespaces");
        free(g);
        return NULL;
    }
    if (cb_tier_find_program(s_bin_dirs, "runsc", g->runsc, sizeof g->runsc) < 0) {
        (void) snprintf(why, why_len,
                        "--isolation gvisor needs gVisor's runsc, which is not installed: "
                        "apt-get install runsc (Debian/Ubuntu), or use --isolation namespaces");
        free(g);
        return NULL;
    }
    s_probe(g);
    char dir[CB_PATH_MAX];
    if (cb_tier_helper_dir(dir, sizeof dir) < 0 ||
        snprintf(g->init, sizeof g->init, "%s/%s", dir, CB_TIER_INIT_NAME) >=
            (int) sizeof g->init ||
        access(g->init, X_OK) != 0) {
        (void) snprintf(why, why_len,
                        "--isolation gvisor: %s is missing beside the launcher; rebuild (make)",
                        CB_TIER_INIT_NAME);
        free(g);
        return NULL;
    }
    return g;
}

void cb_gvisor_set_image(cb_gvisor_t *g, int fd) {
    if (g->image_fd >= 0) close(g->image_fd);
    g->image_fd = fd;
}

void cb_gvisor_destroy(cb_gvisor_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_gvisor_t *g = *self_p;
    *self_p = NULL;
    free(g->config);
    cb_seccomp_fini(&g->filter);
    if (g->image_fd >= 0) close(g->image_fd);
    free(g);
}

/* ---- planning (launcher side) ------------------------------------------------ */

static json_t *s_mount(const char *dst, const char *type, const char *src, json_t *options) {
    return json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src,
                     "options", options);
}

/* Appends b's items to a; steals b. */
static void s_extend(json_t *a, json_t *b) {
    if (b != NULL) (void) json_array_extend(a, b);
    json_decref(b);
}

static json_t *s_rlimit(const char *type, long v) {
    return json_pack("{s:s, s:I, s:I}", "type", type, "hard", (json_int_t) v, "soft",
                     (json_int_t) v);
}

/* The OCI runtime spec runsc runs: the sandbox's root read-only, gVisor's own
 * /proc, /dev, /dev/shm and /tmp, the sandbox's home read-write. */
static char *s_config(const cb_gvisor_t *g, unsigned long uid, unsigned long gid,
                      const char *runner, char *const *envp) {
    const cb_options_t *o = g->opts;
    char tmp_opt[CB_MOUNT_OPTS_MAX], shm_opt[CB_MOUNT_OPTS_MAX];
    long shm = o->disk_mb < CB_GVISOR_SHM_MB_MAX ? o->disk_mb : CB_GVISOR_SHM_MB_MAX;
    (void) snprintf(tmp_opt, sizeof tmp_opt, "size=%ldm", o->disk_mb);
    (void) snprintf(shm_opt, sizeof shm_opt, "size=%ldm", shm);
    json_auto_t *env = json_array();
    for (size_t i = 0; env != NULL && envp[i] != NULL; i++)
        if (json_array_append_new(env, json_string(envp[i])) < 0) return NULL;
    /* cellblock-init is root in gVisor, the trusted agent of checkpoints in
     * place (docs/SNAPSHOTS.md); it drops the runner to uid/gid with none of these */
    char run_opt[CB_MOUNT_OPTS_MAX], ids[2][24];
    (void) snprintf(run_opt, sizeof run_opt, "size=%ldm", o->disk_mb);
    (void) snprintf(ids[0], sizeof ids[0], "%lu", uid);
    (void) snprintf(ids[1], sizeof ids[1], "%lu", gid);
#define S_CAPS                                                                                     \
    "[s, s, s, s, s, s, s, s]", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL",             \
        "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH"
    json_auto_t *caps =
        json_pack("{s:o, s:o, s:[], s:o, s:[]}", "bounding", json_pack(S_CAPS), "effective",
                  json_pack(S_CAPS), "inheritable", "permitted", json_pack(S_CAPS), "ambient");
#undef S_CAPS
    json_auto_t *args =
        json_pack("[s, s, s, s, s]", CB_TIER_INIT, "--gvisor", CB_GVISOR_BPF, ids[0], ids[1]);
    if (args != NULL && o->debug_channel)
        s_extend(args, json_pack("[s, s]", "--debug-socket", CB_GVISOR_DBG_DIR "/" CB_GVISOR_DBG_NAME));
    if (args != NULL) s_extend(args, json_pack("[s, s, s, s, s]", "--", o->python, "-I", "-u", runner));
    json_auto_t *spec = json_pack(
        "{s:s, s:{s:b, s:{s:I, s:I}, s:O, s:O, s:s, s:O, s:b, s:[o, o]},"
        " s:{s:s, s:b}, s:s,"
        " s:[o, o, o, o, o, o, o, o, o],"
        " s:{s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]}}",
        "ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", (json_int_t) 0, "gid",
        (json_int_t) 0, "args", args, "env", env, "cwd", CB_SANDBOX_HOME, "capabilities", caps,
        "noNewPrivileges", 1, "rlimits", s_rlimit("RLIMIT_NOFILE", o->open_files),
        s_rlimit("RLIMIT_CORE", 0), "root", "path", "/", "readonly", 1, "hostname",
        CB_SANDBOX_HOSTNAME, "mounts",
        s_mount("/proc", "proc", "proc", json_pack("[s, s, s]", "nosuid", "nodev", "noexec")),
        s_mount("/dev", "tmpfs", "tmpfs", json_pack("[s, s]", "nosuid", "mode=755")),
        /* no ptys, as in the namespaces tier (runsc would add a devpts) */
        s_mount("/dev/pts", "tmpfs", "none",
                json_pack("[s, s, s, s, s]", "ro", "nosuid", "nodev", "noexec", "size=4k")),
        s_mount("/dev/shm", "tmpfs", "shm",
                json_pack("[s, s, s, s]", "nosuid", "nodev", "mode=1777", shm_opt)),
        s_mount("/tmp", "tmpfs", "tmpfs",
                json_pack("[s, s, s, s]", "nosuid", "nodev", "mode=1777", tmp_opt)),
        s_mount(CB_SANDBOX_HOME, "bind", CB_SANDBOX_HOME,
                json_pack("[s, s, s, s]", "rbind", "rw", "nosuid", "nodev")),
        s_mount(CB_GVISOR_BPF, "bind", CB_TIER_STATE "/seccomp.bpf",
                json_pack("[s, s, s, s]", "bind", "ro", "nosuid", "nodev")),
        /* checkpoints in place: the agent's store and socket (root only), the park fifos */
        s_mount(CB_SNAP_AGENT_RUN, "tmpfs", "tmpfs",
                json_pack("[s, s, s, s, s]", "nosuid", "nodev", "noexec", "mode=0700", run_opt)),
        s_mount(CB_SNAP_PARK_DIR, "tmpfs", "tmpfs",
                json_pack("[s, s, s, s, s]", "nosuid", "nodev", "noexec", "mode=0755", "size=16k")),
        "linux", "namespaces", "type", "pid", "type", "network", "type", "ipc", "type", "uts",
        "type", "mount");
    if (spec == NULL) return NULL;
    if (o->debug_channel)
        json_array_append_new(
            json_object_get(spec, "mounts"),
            s_mount(CB_GVISOR_DBG_DIR, "bind", CB_GVISOR_DBG_HOST,
                    json_pack("[s, s, s, s, s]", "bind", "rw", "nosuid", "nodev", "noexec")));
    return json_dumps(spec, JSON_COMPACT);
}

static int s_runsc_argv(cb_tier_argv_t *a, bool rootless, bool debug, bool raw,
                        const char *platform, const char *cmd) {
    if (cb_tier_argv_add(a, "%s", CB_GVISOR_RUNSC) < 0 ||
        cb_tier_argv_add(a, "--platform=%s", platform) < 0 ||
        cb_tier_argv_add(a, "--root=%s/state", CB_TIER_STATE) < 0 ||
        cb_tier_argv_add(a, "--log=%s/runsc.log", CB_TIER_STATE) < 0 ||
        cb_tier_argv_add(a, "--network=none") < 0 || cb_tier_argv_add(a, "--ignore-cgroups") < 0)
        return -1;
    if (rootless && cb_tier_argv_add(a, "--rootless") < 0) return -1;
    /* the debugger's socket: gVisor may connect to host sockets, never create them */
    if (debug && cb_tier_argv_add(a, "--host-uds=open") < 0) return -1;
    /* an image comes as the spawned runsc's fd 3 (docs/SNAPSHOTS.md) */
    if (strcmp(cmd, "restore") == 0 || strcmp(cmd, "checkpoint") == 0)
        return cb_tier_argv_add(a, "%s", cmd) < 0 ||
                       (strcmp(cmd, "checkpoint") == 0 && raw &&
                        cb_tier_argv_add(a, "--compression=none") < 0) ||
                       (strcmp(cmd, "restore") == 0 &&
                        cb_tier_argv_add(a, "--bundle=%s/bundle", CB_TIER_STATE) < 0) ||
                       cb_tier_argv_add(a, "--image-path=/proc/self/fd/3") < 0 ||
                       cb_tier_argv_add(a, "%s", CB_GVISOR_ID) < 0
                   ? -1
                   : 0;
    if (strcmp(cmd, "agent") == 0) /* the command line follows, added by the supervisor */
        return cb_tier_argv_add(a, "exec") < 0 || cb_tier_argv_add(a, "--user") < 0 ||
                       cb_tier_argv_add(a, "0:0") < 0 ||
                       cb_tier_argv_add(a, "%s", CB_GVISOR_ID) < 0 ||
                       cb_tier_argv_add(a, "%s", CB_TIER_INIT) < 0 ||
                       cb_tier_argv_add(a, "--agent") < 0
                   ? -1
                   : 0;
    if (strcmp(cmd, "run") == 0)
        return cb_tier_argv_add(a, "run") < 0 ||
                       cb_tier_argv_add(a, "--bundle=%s/bundle", CB_TIER_STATE) < 0 ||
                       cb_tier_argv_add(a, "%s", CB_GVISOR_ID) < 0
                   ? -1
                   : 0;
    return cb_tier_argv_add(a, "kill") < 0 || cb_tier_argv_add(a, "%s", CB_GVISOR_ID) < 0 ||
                   cb_tier_argv_add(a, "INT") < 0
               ? -1
               : 0;
}

int cb_gvisor_plan(cb_gvisor_t *g, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim,
                   unsigned long uid, unsigned long gid, const char *runner, char *const *envp,
                   char *why, size_t why_len) {
    /* the filter's mountpoint: gVisor cannot create one in the read-only root */
    /* cellblock-init is copied, not bound: an install under a 0700 home is
     * out of the sandbox's ids' reach */
    const char *own[] = {g->init};
    if (cb_mount_plan_bind(mounts, g->runsc, CB_GVISOR_RUNSC, false, false) < 0 ||
        cb_mount_plan_copy_files(mounts, CB_TIER_OWN_DIR, own, 1) < 0 ||
        cb_mount_plan_file(mounts, CB_GVISOR_BPF, "", 0444) < 0 ||
        cb_mount_plan_dir(mounts, CB_SNAP_AGENT_RUN, 0755) < 0 ||
        cb_mount_plan_dir(mounts, CB_SNAP_PARK_DIR, 0755) < 0 ||
        (g->opts->debug_channel && cb_mount_plan_dir(mounts, CB_GVISOR_DBG_DIR, 0755) < 0)) {
        (void) snprintf(why, why_len, "planning the gvisor tier's mounts: %s", strerror(errno));
        return -1;
    }
    cb_seccomp_fini(&g->filter);
    if (cb_seccomp_build(&g->filter, why, why_len) < 0) return -1;
    lim->memory_mb += CB_GVISOR_MEM_MB;
    lim->pids += CB_GVISOR_PIDS;
    free(g->config);
    g->config = s_config(g, uid, gid, runner, envp);
    if (g->config == NULL || (g->config_len = strlen(g->config)) > CB_GVISOR_CONFIG_MAX) {
        (void) snprintf(why, why_len, "building runsc's OCI config.json failed");
        return -1;
    }
    for (int rootless = 0; rootless <= 1; rootless++) {
        memset(&g->run[rootless], 0, sizeof g->run[rootless]);
        memset(&g->kill[rootless], 0, sizeof g->kill[rootless]);
        memset(&g->ckpt[rootless], 0, sizeof g->ckpt[rootless]);
        memset(&g->agent[rootless], 0, sizeof g->agent[rootless]);
        bool dbg = g->opts->debug_channel, raw = g->ckpt_raw;
        const char *pf = s_platform(g);
        if (s_runsc_argv(&g->run[rootless], rootless, dbg, raw, pf,
                         g->opts->resume_image ? "restore" : "run") < 0 ||
            s_runsc_argv(&g->kill[rootless], rootless, dbg, raw, pf, "kill") < 0 ||
            s_runsc_argv(&g->ckpt[rootless], rootless, dbg, raw, pf, "checkpoint") < 0 ||
            s_runsc_argv(&g->agent[rootless], rootless, dbg, raw, pf, "agent") < 0) {
            (void) snprintf(why, why_len, "runsc command line too long");
            return -1;
        }
    }
    /* --resume-image: runsc restore reads the directory the launcher verified
     * (cb_gvisor_set_image) as fd 3 */
    if (g->opts->resume_image != NULL && g->image_fd < 0) {
        (void) snprintf(why, why_len, "the image %s was not verified", g->opts->resume_image);
        return -1;
    }
    memset(&g->env, 0, sizeof g->env);
    if (cb_tier_argv_add(&g->env, "PATH=%s", CB_SANDBOX_PATH) < 0 ||
        cb_tier_argv_add(&g->env, "TMPDIR=%s/tmp", CB_TIER_STATE) < 0 ||
        cb_tier_argv_add(&g->env, "LANG=%s", CB_SANDBOX_LANG) < 0) {
        (void) snprintf(why, why_len, "runsc environment too long");
        return -1;
    }
    return 0;
}

void cb_gvisor_describe(const cb_gvisor_t *g, const char *base, char *buf, size_t len) {
    (void) snprintf(buf, len,
                    "gVisor: the code's system calls go to gVisor's user-space kernel (runsc, "
                    "%s platform), not the host's; runsc runs in the %s",
                    s_platform(g), base);
}

const char *cb_gvisor_hint(int arg) {
    switch (arg) {
    case S_ERR_STATE:
    case S_ERR_CONFIG:
        return "the sandbox's /tmp is not writable for runsc's state (--disk too small?)";
    case S_ERR_EXEC: return "runsc could not be started (see the kernel log)";
    case S_ERR_IMAGE:
        return "the image's copy of the home could not be put back (--disk too small?)";
    default: return "";
    }
}

/* ---- the supervisor (runner slot; no malloc) ----------------------------------- */

/* True when this process is in a user namespace other than the initial one:
 * runsc must then run --rootless. */
static bool s_in_userns(void) {
    char buf[CB_PROC_PATH_MAX] = ""; /* the first uid_map line */
    int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    /* the initial namespace maps everything: "0 0 4294967295" */
    unsigned long a = 1, b = 1, c = 0;
    char *p = buf, *end;
    a = strtoul(p, &end, 10);
    p = end;
    b = strtoul(p, &end, 10);
    p = end;
    c = strtoul(p, &end, 10);
    return !(a == 0 && b == 0 && c == 4294967295UL);
}

/* runsc failed before or without the container (its own exit code): its log's
 * tail goes to the runner's stderr, where the kernel shows it. */
void cb_gvisor_log_tail(int fd) {
    static char buf[CB_GVISOR_LOG_TAIL];
    int lf = open(CB_TIER_STATE "/runsc.log", O_RDONLY | O_CLOEXEC);
    if (lf < 0) return;
    off_t end = lseek(lf, 0, SEEK_END);
    off_t from = end > (off_t) sizeof buf ? end - (off_t) sizeof buf : 0;
    ssize_t n = pread(lf, buf, sizeof buf, from);
    close(lf);
    if (n <= 0) return;
    static const char head[] = "\n[cellblock] runsc failed; the end of its log:\n";
    (void) cb_write_all(fd, head, sizeof head - 1);
    (void) cb_write_all(fd, buf, (size_t) n);
}

__attribute__((noreturn)) static void s_fail(int errfd, int what) {
    cb_child_fail(errfd, CB_STEP_TIER, what);
}

void cb_gvisor_run(const cb_gvisor_t *g, int errfd) {
    cb_tier_block_signals();
    if (cb_child_prepare_fds() < 0) s_fail(errfd, S_ERR_STATE);
    static const char *const dirs[] = {CB_TIER_STATE, CB_TIER_STATE "/state",
                                       CB_TIER_STATE "/bundle", CB_TIER_STATE "/tmp", NULL};
    for (size_t i = 0; dirs[i] != NULL; i++)
        if (mkdir(dirs[i], 0755) < 0)
            s_fail(errfd, S_ERR_STATE); /* runsc's sandbox user walks it */
    if (cb_tier_write_file(CB_TIER_STATE "/bundle/config.json", g->config, g->config_len, 0644) <
            0 ||
        cb_tier_write_file(CB_TIER_STATE "/seccomp.bpf", (const char *) g->filter.prog.filter,
                           g->filter.prog.len * sizeof g->filter.prog.filter[0], 0644) < 0)
        s_fail(errfd, S_ERR_CONFIG);
    /* the gofer and the Sentry hold host fds for the files the code has open
     * or cached; the code's own limit is RLIMIT_NOFILE inside gVisor */
    struct rlimit nofile, core = {0, 0};
    if (getrlimit(RLIMIT_NOFILE, &nofile) < 0) s_fail(errfd, S_ERR_STATE);
    nofile.rlim_cur = nofile.rlim_max; /* raising the hard limit needs CAP_SYS_RESOURCE */
    if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 || setrlimit(RLIMIT_CORE, &core) < 0)
        s_fail(errfd, S_ERR_STATE);
    int rootless = s_in_userns() ? 1 : 0;
    static cb_gvisor_dbg_t dbg; /* the debugger's channel, copied (gvisor_dbg.c) */
    if (cb_gvisor_dbg_open(&dbg, g->opts->debug_channel) < 0) s_fail(errfd, S_ERR_STATE);
    if (g->image_fd >= 0 && cb_gvisor_restore_home(g) < 0) s_fail(errfd, S_ERR_IMAGE);
    /* runsc gives its stdio to the container: the event socket rides on stdin;
     * an image to restore is its fd 3 */
    const int fds[4] = {CB_FD_EVENT, 1, 2, g->image_fd};
    pid_t run = cb_tier_spawn(CB_GVISOR_RUNSC, g->run[rootless].argv, g->env.argv, fds,
                              g->image_fd >= 0 ? 4 : 3);
    if (run < 0) s_fail(errfd, S_ERR_EXEC);
    close(errfd); /* EOF: the launcher reports `started` */
    close(CB_FD_EVENT);
    cb_gvisor_supervise(g, run, rootless, &dbg);
}
