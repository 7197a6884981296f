/*
 * sandbox.c - --sandbox full: plan, start, supervise and tear down.
 *
 *   launcher (host)                       init (pid 1 inside)            runner
 *   plan mounts/filter/env/limits
 *   cgroup (v2 | v1 | rlimits, degraded)
 *   clone(NEWUSER?|NEWPID|NEWNS|NEWNET|NEWIPC|NEWUTS) ─▶ waits for "go"
 *   uid/gid maps, "go" ─────────────────────▶ hostname, lo up,
 *   cgroup.procs (meanwhile), "go" ─────────▶ mounts + pivot_root, then
 *                                           unshare(NEWCGROUP),
 *   ◀──────── workdir fd (SCM_RIGHTS) ───── sends /home/user O_PATH
 *                                           fork ─────────────────────▶ setsid, rlimits,
 *                                           drop caps, reap, forward    ids + caps + nnp,
 *   ◀──────────────────────── error pipe: EOF at exec, or (step, errno) Landlock, fds,
 *   `started`                                                           seccomp, execve
 *   ◀──────── runner's wait status ──────── runner died: kill(-1), exit
 *
 * Between clone and execve nothing allocates, uses stdio or logs: every
 * string the children use is prepared here first.  The init keeps the pid
 * namespace alive; when it exits the kernel kills everything left in it,
 * and the cgroup kill covers anything that might still hold on.
 */
#include "launcher/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/caps.h"
#include "isolate/cgroup.h"
#include "launcher/child.h"
#include "isolate/landlock.h"
#include "isolate/log.h"
#include "isolate/mount.h"
#include "isolate/net.h"
#include "isolate/overlay.h"
#include "launcher/netproxy.h"
#include "launcher/report.h"
#include "isolate/sandbox_limits.h"
#include "isolate/seccomp_filter.h"
#include "isolate/idpool.h"
#include "isolate/userns.h"
#include "isolate/util.h"
#include "launcher/tier.h"

#define S_GO            'g' /* launcher -> init: ids and cgroup are set */
#define S_STR(x)        S_STR2(x)
#define S_STR2(x)       #x
#define S_CHILDREN_BUF  64 /* bytes of /proc/PID/task/PID/children read */
#define S_ISOLATION_MAX CB_REPORT_LINE_MAX

enum { S_MSG_ERR = 1, S_MSG_WORKDIR = 2, S_MSG_STATUS = 3 };

typedef struct {
    int type;               /* S_MSG_* */
    cb_child_err_t err;     /* S_MSG_ERR */
    int status;             /* S_MSG_STATUS: the runner's wait status */
    cb_overlay_stats_t ovl; /* S_MSG_WORKDIR: what --workdir-source's walk hid */
} s_msg_t;

struct cb_sandbox {
    const cb_options_t *opts;              /* borrowed */
    bool userns;                           /* a user namespace (always, in full mode) */
    bool root;                             /* launched as root: ids from the pool */
    pid_t kernel_pid;                      /* our parent (parent-death checks) */
    cb_idlease_t lease;                    /* root: the sandbox's own host id */
    uid_t uid;                             /* runner's uid (inside) */
    gid_t gid;                             /* runner's gid (inside) */
    int last_cap;                          /* cap_last_cap */
    int landlock_abi;                      /* 0 = unavailable */
    cb_mount_plan_t mounts;                /* the filesystem */
    cb_exec_plan_t exec;                   /* argv/envp of the runner */
    cb_seccomp_t filter;                   /* exported BPF */
    cb_rlimits_t rlimits;                  /* applied in the runner */
    cb_cgroup_t *cg;                       /* NULL: degraded to rlimits */
    char limits_desc[S_ISOLATION_MAX / 2]; /* how limits are enforced */
    pid_t init;                            /* host pid of the sandbox's init */
    pid_t runner;                          /* host pid of the runner, or init's */
    int ctl;                               /* socket to init, -1 when closed */
    bool have_status;                      /* init reported the runner's status */
    int runner_status;                     /* that status */
    char error[CB_REPORT_LINE_MAX];        /* cause and fix of the last failure */
    cb_netproxy_t *np;                     /* --network allow: the egress proxy (borrowed) */
    char wd_source[CB_PATH_MAX];           /* --workdir-source, resolved ("" = none) */
    cb_overlay_stats_t ovl;                /* its walk, as init reported it */
    cb_tier_t *tier;                       /* --isolation gvisor|microvm; NULL: namespaces */
};

static void s_err(cb_sandbox_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_err(cb_sandbox_t *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(sb->error, sizeof sb->error, fmt, ap);
    va_end(ap);
}

/* ---- planning -------------------------------------------------------------- */

/* /etc entries Python, SSL, fonts, locales and BLAS (alternatives) need. */
static const char *const s_etc[] = {
    "/etc/ld.so.cache", "/etc/ld.so.conf",      "/etc/ld.so.conf.d",
    "/etc/localtime",   "/etc/timezone",        "/etc/alternatives",
    "/etc/ssl",         "/etc/ca-certificates", "/etc/ca-certificates.conf",
    "/etc/pki",         "/etc/fonts",           "/etc/matplotlibrc",
    "/etc/python3",     "/etc/python3.11",      "/etc/python3.12",
    "/etc/python3.13",  "/etc/mime.types",      "/etc/protocols",
    "/etc/services",    "/etc/os-release",      "/etc/debian_version",
    "/etc/gai.conf",    "/etc/host.conf",       "/etc/locale.alias",
    "/etc/papersize",
};
static const char *const s_top[] = {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"};
static const char *const s_devs[] = {"null", "zero", "full", "random", "urandom"};

/* --workdir-source: "cwd" is the directory the kernel started in (ours).
 * The upper tmpfs has the home's size, plus inodes for the whiteouts. */
static int s_plan_workdir_source(cb_sandbox_t *sb, char *buf, size_t len) {
    const cb_options_t *o = sb->opts;
    char src[CB_PATH_MAX], why[CB_REPORT_LINE_MAX / 2];
    if (strcmp(o->workdir_source, "cwd") == 0 ? getcwd(src, sizeof src) == NULL
                                              : realpath(o->workdir_source, src) == NULL) {
        s_err(sb, "--workdir-source %s: %s", o->workdir_source, strerror(errno));
        return -1;
    }
    if (realpath(src, sb->wd_source) == NULL ||
        cb_flags_workdir_refused(sb->wd_source, why, sizeof why) < 0) {
        s_err(sb, "--workdir-source %s: %s", o->workdir_source,
              sb->wd_source[0] ? why : strerror(errno));
        return -1;
    }
    (void) snprintf(buf, len, "mode=0700,size=%ldm,nr_inodes=%d,uid=%lu,gid=%lu", o->disk_mb,
                    CB_SANDBOX_TMPFS_INODES + CB_OVERLAY_SCAN_MAX, (unsigned long) sb->uid,
                    (unsigned long) sb->gid);
    if (cb_overlay_plan(&sb->mounts, sb->wd_source, CB_SANDBOX_HOME, buf, sb->uid, sb->gid,
                        sb->root ? sb->lease.id : 0, &sb->ovl.idmapped, why, sizeof why) < 0) {
        s_err(sb, "%s", why);
        return -1;
    }
    return 0;
}

static int s_plan_mounts(cb_sandbox_t *sb) {
    const cb_options_t *o = sb->opts;
    cb_mount_plan_t *p = &sb->mounts;
    char buf[CB_SANDBOX_FILE_MAX];
    if (cb_mount_plan_bind(p, "/usr", "/usr", false, false) < 0) return -1;
    for (size_t i = 0; i < sizeof s_top / sizeof s_top[0]; i++)
        if (cb_mount_plan_bind(p, s_top[i], s_top[i], true, true) < 0) return -1;
    /* the interpreter's prefix, when it is not below /usr (venvs, conda) */
    char real[CB_PATH_MAX];
    if (realpath(o->python, real) == NULL) {
        s_err(sb, "--python %s: %s", o->python, strerror(errno));
        return -1;
    }
    const char *cands[] = {real, o->python};
    for (size_t i = 0; i < 2; i++) {
        char tmp[CB_PATH_MAX];
        (void) snprintf(tmp, sizeof tmp, "%s", cands[i]);
        char *prefix = dirname(dirname(tmp));
        if (strcmp(prefix, "/") == 0 || strncmp(prefix, "/usr/", 5) == 0 ||
            strcmp(prefix, "/usr") == 0)
            continue;
        if (cb_mount_plan_bind(p, prefix, prefix, true, false) < 0) return -1;
    }
    for (size_t i = 0; i < sizeof s_etc / sizeof s_etc[0]; i++)
        if (cb_mount_plan_bind(p, s_etc[i], s_etc[i], true, false) < 0) return -1;
    if (o->network_host &&
        cb_mount_plan_bind(p, "/etc/resolv.conf", "/etc/resolv.conf", true, false) < 0)
        return -1;
    (void) snprintf(buf, sizeof buf,
                    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                    "%s:x:%lu:%lu:cellblock sandbox:%s:/bin/sh\n",
                    CB_SANDBOX_USER, (unsigned long) sb->uid, (unsigned long) sb->gid,
                    CB_SANDBOX_HOME);
    if (cb_mount_plan_file(p, "/etc/passwd", buf, 0644) < 0) return -1;
    (void) snprintf(buf, sizeof buf, "root:x:0:\n%s:x:%lu:\n", CB_SANDBOX_USER,
                    (unsigned long) sb->gid);
    if (cb_mount_plan_file(p, "/etc/group", buf, 0644) < 0) return -1;
    (void) snprintf(buf, sizeof buf, "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t%s\n",
                    CB_SANDBOX_HOSTNAME);
    if (cb_mount_plan_file(p, "/etc/hosts", buf, 0644) < 0 ||
        cb_mount_plan_file(p, "/etc/hostname", CB_SANDBOX_HOSTNAME "\n", 0644) < 0 ||
        cb_mount_plan_file(p, "/etc/nsswitch.conf",
                           "passwd: files\ngroup: files\nhosts: files dns\n", 0644) < 0)
        return -1;
    /* /dev: a few nodes, no tty, no /dev/pts */
    (void) snprintf(buf, sizeof buf, "mode=0755,size=%dk", CB_SANDBOX_DEV_TMPFS_KB);
    if (cb_mount_plan_tmpfs(p, "/dev", buf) < 0) return -1;
    for (size_t i = 0; i < sizeof s_devs / sizeof s_devs[0]; i++)
        if (cb_mount_plan_dev(p, s_devs[i]) < 0) {
            s_err(sb, "/dev/%s is missing on this host", s_devs[i]);
            return -1;
        }
    if (cb_mount_plan_symlink(p, "/proc/self/fd", "/dev/fd") < 0 ||
        cb_mount_plan_symlink(p, "/proc/self/fd/0", "/dev/stdin") < 0 ||
        cb_mount_plan_symlink(p, "/proc/self/fd/1", "/dev/stdout") < 0 ||
        cb_mount_plan_symlink(p, "/proc/self/fd/2", "/dev/stderr") < 0)
        return -1;
    long shm = o->disk_mb < CB_SANDBOX_SHM_MB_MAX ? o->disk_mb : CB_SANDBOX_SHM_MB_MAX;
    (void) snprintf(buf, sizeof buf, "mode=1777,size=%ldm,nr_inodes=%d", shm,
                    CB_SANDBOX_TMPFS_INODES);
    if (cb_mount_plan_tmpfs(p, "/dev/shm", buf) < 0) return -1;
    if (cb_mount_plan_rdonly(p, "/dev") < 0) return -1;
    /* gvisor: the code sees gVisor's own /proc, and runsc must mount new ones,
     * which a masked /proc forbids in a user namespace (mount_too_revealing) */
    if (cb_mount_plan_proc(p, "/proc") < 0 ||
        (!cb_tier_privileged(sb->tier) && cb_mount_plan_proc_masks(p, "/proc") < 0))
        return -1;
    (void) snprintf(buf, sizeof buf, "mode=1777,size=%ldm,nr_inodes=%d", o->disk_mb,
                    CB_SANDBOX_TMPFS_INODES);
    if (cb_mount_plan_tmpfs(p, "/tmp", buf) < 0) return -1;
    if (o->workdir_source != NULL) { /* issue 11: the notebook folder, read-only below */
        if (s_plan_workdir_source(sb, buf, sizeof buf) < 0) return -1;
    } else {
        (void) snprintf(buf, sizeof buf, "mode=0700,size=%ldm,nr_inodes=%d,uid=%lu,gid=%lu",
                        o->disk_mb, CB_SANDBOX_TMPFS_INODES, (unsigned long) sb->uid,
                        (unsigned long) sb->gid);
        if (cb_mount_plan_tmpfs(p, CB_SANDBOX_HOME, buf) < 0) return -1;
    }
    /* the runner: a copy of its directory in a small read-only tmpfs (a
     * bind would show the build or install path in /proc/self/mountinfo) */
    char rdir[CB_PATH_MAX];
    (void) snprintf(rdir, sizeof rdir, "%s", o->runner);
    if (cb_mount_plan_copy_dir(p, dirname(rdir), CB_SANDBOX_RUNNER_DIR) < 0) {
        s_err(sb, "--runner %s: its directory cannot be copied: %s", o->runner, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < o->n_ro_binds; i++) {
        if (cb_mount_plan_bind(p, o->ro_binds[i].host, o->ro_binds[i].sandbox, false, false) < 0) {
            s_err(sb, "--ro-bind %s:%s: %s", o->ro_binds[i].host, o->ro_binds[i].sandbox,
                  strerror(errno));
            return -1;
        }
    }
    return 0;
}

cb_sandbox_t *cb_sandbox_new(const cb_options_t *opts) {
    cb_sandbox_t *sb = calloc(1, sizeof *sb);
    if (sb == NULL) return NULL;
    sb->opts = opts;
    sb->ctl = -1;
    sb->userns = true;
    sb->root = geteuid() == 0;
    sb->kernel_pid = getppid();
    sb->lease.lock_fd = sb->lease.dir_fd = -1;
    sb->uid = opts->uid;
    sb->gid = opts->gid;
    sb->last_cap = cb_caps_last_cap();
    sb->landlock_abi = cb_landlock_abi();
    cb_mount_plan_init(&sb->mounts);
    return sb;
}

void cb_sandbox_set_netproxy(cb_sandbox_t *sb, cb_netproxy_t *np) { sb->np = np; }

void cb_sandbox_error(const cb_sandbox_t *sb, char *buf, size_t len) {
    (void) snprintf(buf, len, "%s", sb == NULL ? "out of memory" : sb->error);
}

/* ---- inside: init and runner (no malloc, no stdio, no logging) ------------- */

static int s_send_msg(int fd, const s_msg_t *m, int pass_fd) {
    return cb_send_with_fd(fd, m, sizeof *m, pass_fd);
}

__attribute__((noreturn)) static void s_init_fail(int ctl, cb_step_t step, int arg) {
    s_msg_t m = {.type = S_MSG_ERR, .err = {.step = (int) step, .err = errno, .arg = arg}};
    (void) s_send_msg(ctl, &m, -1);
    _exit(127);
}

__attribute__((noreturn)) static void s_runner_main(const cb_sandbox_t *sb, int errfd) {
    static const char *const dirs[] = {CB_SANDBOX_HOME, "/tmp", "/dev/shm", NULL};
    static const char *const files[] = {"/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                                        "/dev/urandom", "/dev/kvm",  NULL};
    cb_child_reset_signals();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) cb_child_fail(errfd, CB_STEP_CAPS, -1);
    if (setsid() < 0) cb_child_fail(errfd, CB_STEP_SETSID, -1);
    /* gvisor: runsc builds its own namespaces, seccomp, capability drop and rlimits */
    if (cb_tier_privileged(sb->tier)) cb_tier_run(sb->tier, errfd);
    if (cb_rlimits_apply(&sb->rlimits) < 0) cb_child_fail(errfd, CB_STEP_RLIMIT, -1);
    if (cb_caps_drop_all(sb->last_cap, !sb->userns, sb->uid, sb->gid) < 0)
        cb_child_fail(errfd, CB_STEP_CAPS, -1);
    /* changing credentials cleared the parent-death signal: arm it again */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) cb_child_fail(errfd, CB_STEP_CAPS, -1);
    if (chdir(CB_SANDBOX_HOME) < 0) cb_child_fail(errfd, CB_STEP_CHDIR, -1);
    if (sb->landlock_abi > 0 && cb_landlock_apply(sb->landlock_abi, dirs, files) < 0)
        cb_child_fail(errfd, CB_STEP_LANDLOCK, -1);
    if (cb_child_prepare_fds() < 0) cb_child_fail(errfd, CB_STEP_FDS, -1);
    if (cb_seccomp_install(&sb->filter) < 0) cb_child_fail(errfd, CB_STEP_SECCOMP, -1);
    if (sb->tier != NULL) cb_tier_run(sb->tier, errfd); /* microvm: QEMU, confined like this */
    execve(sb->exec.python, sb->exec.argv, sb->exec.envp);
    cb_child_fail(errfd, CB_STEP_EXEC, -1);
}

/* Blocks for one S_GO byte from the launcher. 0 ok, -1 launcher gone. */
static int s_wait_go(int ctl) {
    char go = 0;
    ssize_t r;
    do
        r = read(ctl, &go, 1);
    while (r < 0 && errno == EINTR);
    return (r == 1 && go == S_GO) ? 0 : -1;
}

__attribute__((noreturn)) static void s_init_main(const cb_sandbox_t *sb, int ctl, int errfd) {
    sigset_t all;
    sigfillset(&all);
    (void) sigprocmask(SIG_SETMASK, &all, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) s_init_fail(ctl, CB_STEP_CLONE, -1);
    /* first go: the id maps are written, so the filesystem can be built */
    if (s_wait_go(ctl) < 0) _exit(127); /* launcher gone or gave up */
    /* become the sandbox's (mapped) ids with the namespace's capabilities:
     * launched as root, our uid 0 is not mapped inside */
    if (sb->userns && cb_caps_become(sb->uid, sb->gid, sb->root) < 0)
        s_init_fail(ctl, CB_STEP_IDMAP, -1);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) s_init_fail(ctl, CB_STEP_IDMAP, -1);
    if (sethostname(CB_SANDBOX_HOSTNAME, sizeof CB_SANDBOX_HOSTNAME - 1) < 0)
        s_init_fail(ctl, CB_STEP_HOSTNAME, -1);
    if (!sb->opts->network_host && cb_net_lo_up() < 0) s_init_fail(ctl, CB_STEP_NET, -1);
    int failed = -1;
    if (cb_mount_run(&sb->mounts, &failed) < 0) {
        cb_step_t step = CB_STEP_MOUNT;
        if (failed >= 0 && sb->mounts.ops[failed].kind == CB_MNT_PROC) step = CB_STEP_PROC;
        if (failed < 0) step = CB_STEP_PIVOT;
        s_init_fail(ctl, step, failed);
    }
    /* second go: init is in its cgroup (the attach ran while we mounted), so
     * the cgroup namespace is rooted there and the runner is born inside it */
    if (s_wait_go(ctl) < 0) _exit(127);
    if (unshare(CLONE_NEWCGROUP) < 0) s_init_fail(ctl, CB_STEP_CGROUP_NS, -1);
    /* --network allow: the proxy's listeners, made in this network namespace */
    if (sb->np != NULL && cb_netproxy_child_listen(sb->np) < 0) s_init_fail(ctl, CB_STEP_NET, -1);
    int wfd = open(CB_SANDBOX_HOME, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    s_msg_t wm = {.type = S_MSG_WORKDIR};
    cb_overlay_last_stats(&wm.ovl);
    if (wfd < 0 || s_send_msg(ctl, &wm, wfd) < 0) s_init_fail(ctl, CB_STEP_WORKDIR, -1);
    close(wfd);

    long runner = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (runner < 0) s_init_fail(ctl, CB_STEP_FORK, -1);
    if (runner == 0) {
        close(ctl);
        s_runner_main(sb, errfd);
    }
    /* init keeps only ctl; no caps, not dumpable, no new privs */
    close(errfd);
    if (ctl > 0) (void) syscall(SYS_close_range, 0, ctl - 1, 0);
    (void) syscall(SYS_close_range, ctl + 1, ~0U, 0);
    (void) prctl(PR_SET_DUMPABLE, 0);
    if (cb_caps_drop_all(sb->last_cap, !sb->userns, sb->uid, sb->gid) < 0) {
        (void) kill((pid_t) runner, SIGKILL);
        s_init_fail(ctl, CB_STEP_CAPS, -1);
    }
    (void) prctl(PR_SET_DUMPABLE, 0);
    /* changing credentials cleared the parent-death signal: arm it again,
     * then make sure the launcher did not die in between */
    (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd pf = {.fd = ctl, .events = POLLIN};
    if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR))) {
        (void) kill((pid_t) runner, SIGKILL);
        _exit(127);
    }
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&all, &si);
        if (sig < 0) continue;
        if (sig != SIGCHLD) {
            (void) kill((pid_t) runner, sig); /* INT, TERM, HUP, ... */
            continue;
        }
        for (;;) {
            int st;
            pid_t p = waitpid(-1, &st, WNOHANG);
            if (p <= 0) break;
            if (p != runner) continue;
            /* the runner is gone: so is everything else in the sandbox */
            (void) kill(-1, SIGKILL);
            while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
            }
            s_msg_t m = {.type = S_MSG_STATUS, .status = st};
            (void) s_send_msg(ctl, &m, -1);
            _exit(0);
        }
    }
}

/* ---- launcher side ------------------------------------------------------------ */

static const char *s_hint(const cb_sandbox_t *sb, const cb_child_err_t *e, char *buf, size_t len) {
    switch (e->step) {
    case CB_STEP_PROC:
        return "the host hides parts of /proc (container runtimes mask it); run the container "
               "with /proc unmasked (podman: --security-opt unmask=/proc/*; Docker: "
               "systempaths=unconfined; docs/DEPLOY.md), or on the host";
    case CB_STEP_MOUNT:
        if (e->arg >= 0 && (size_t) e->arg < sb->mounts.n &&
            sb->mounts.ops[e->arg].kind == CB_MNT_OVERLAY)
            return e->err == E2BIG ? "--workdir-source: the folder has more than " S_STR(
                                         CB_OVERLAY_SCAN_MAX) " entries at its top level"
                                   : "while overlaying the --workdir-source folder";
        if (e->arg >= 0 && (size_t) e->arg < sb->mounts.n) {
            const cb_mount_op_t *op = &sb->mounts.ops[e->arg];
            bool bind = op->kind == CB_MNT_BIND_RO && op->src != NULL;
            (void) snprintf(buf, len, "mounting %s%s%s%s", op->dst + strlen(CB_SANDBOX_NEWROOT) + 1,
                            bind ? " from " : "",
                            bind ? op->src + strlen(CB_SANDBOX_OLDROOT) + 1 : "",
                            bind && e->err == EACCES
                                ? " (the sandbox's ids cannot reach that host path: is it "
                                  "under a private home? --ro-bind a world-readable copy)"
                                : "");
            return buf;
        }
        return "mounting failed";
    case CB_STEP_PIVOT:
        if (e->err == EINVAL)
            return "pivot_root refused the launcher's root even after the chroot fallback "
                   "(the staging dir " CB_SANDBOX_STAGE " must be a plain directory on a "
                   "mounted file system)";
        return "the host refuses namespace operations (container seccomp profile or LSM); "
               "see docs/SECURITY.md 'Hosts that refuse'";
    case CB_STEP_CGROUP_NS:
    case CB_STEP_HOSTNAME:
    case CB_STEP_NET:
        return "the host refuses namespace operations (container seccomp profile or LSM); "
               "see docs/SECURITY.md 'Hosts that refuse'";
    case CB_STEP_LANDLOCK: return "Landlock refused the ruleset";
    case CB_STEP_SECCOMP: return "the kernel refused the seccomp filter (CONFIG_SECCOMP_FILTER?)";
    case CB_STEP_EXEC: return "check --python (it must exist below /usr or a bound prefix)";
    case CB_STEP_CAPS: return "could not drop privileges";
    case CB_STEP_TIER: return cb_tier_hint(sb->tier, e->arg);
    default: return "";
    }
}

static void s_child_error(cb_sandbox_t *sb, const cb_child_err_t *e) {
    char hb[CB_REPORT_LINE_MAX / 2];
    const char *hint = s_hint(sb, e, hb, sizeof hb);
    s_err(sb, "sandbox setup failed while %s: %s%s%s", cb_step_name(e->step), strerror(e->err),
          hint[0] != '\0' ? "; " : "", hint);
}

static int s_recv_msg(int fd, s_msg_t *m, int *got_fd) {
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    struct iovec iov = {.iov_base = m, .iov_len = sizeof *m};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    if (got_fd) *got_fd = -1;
    ssize_t r;
    do
        r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r <= 0) return (int) r;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int f;
            memcpy(&f, CMSG_DATA(c), sizeof f);
            if (got_fd)
                *got_fd = f;
            else
                close(f);
        }
    }
    if ((size_t) r != sizeof *m) {
        errno = EPROTO;
        return -1;
    }
    return 1;
}

static void s_describe(const cb_sandbox_t *sb, char *buf, size_t len) {
    char net[S_ISOLATION_MAX / 6];
    if (sb->np != NULL)
        cb_netproxy_describe(sb->np, net, sizeof net);
    else
        (void) snprintf(net, sizeof net, "%s",
                        sb->opts->network_host ? "NETWORK HOST" : "net (lo only)");
    char ll[CB_DESC_PART_MAX];
    if (sb->landlock_abi > 0)
        (void) snprintf(ll, sizeof ll, "Landlock ABI %d (writes: home, /tmp, /dev/shm)",
                        sb->landlock_abi);
    else
        (void) snprintf(ll, sizeof ll, "Landlock unavailable");
    char conf[S_ISOLATION_MAX / 4];
    if (cb_tier_privileged(sb->tier))
        (void) snprintf(conf, sizeof conf, "runsc's own seccomp filters and capability drops");
    else
        (void) snprintf(conf, sizeof conf,
                        "seccomp allowlist (%u syscalls, native ABI only); %s; no capabilities, "
                        "no_new_privs",
                        sb->filter.n_allowed, ll);
    char base[S_ISOLATION_MAX * 2];             /* the tier's line is cut to len */
    char *line = sb->tier != NULL ? base : buf; /* a tier wraps the namespaces line */
    (void) snprintf(line, sb->tier != NULL ? sizeof base : len,
                    "cellblock sandbox: namespaces %spid,mount,%.160s,ipc,uts,cgroup; uid %lu "
                    "(host uid %lu%s); %s; "
                    "disk %ld MiB tmpfs (home, /tmp); open files %ld; %s",
                    sb->userns ? "user," : "", net, (unsigned long) sb->uid,
                    sb->root ? sb->lease.id : (unsigned long) getuid(),
                    !sb->root    ? ", the kernel's user"
                    : sb->userns ? ", the sandbox's own"
                                 : ", the sandbox's own, no user namespace",
                    sb->limits_desc, sb->opts->disk_mb, sb->opts->open_files, conf);
    size_t line_len = sb->tier != NULL ? sizeof base : len;
    size_t used = strlen(line);
    if (sb->wd_source[0] && used < line_len) /* --workdir-source (truncated, never overrun) */
        (void) snprintf(line + used, line_len - used,
                        "; home: a host folder read-only below the tmpfs (dotfiles hidden, %s%s)",
                        sb->ovl.idmapped ? "read as its owner" : "read as others",
                        sb->ovl.dirs_cut ? ", directories past the bounds hidden" : "");
    if (sb->tier != NULL) cb_tier_describe(sb->tier, base, buf, len);
}

static int s_plan(cb_sandbox_t *sb) {
    const cb_options_t *o = sb->opts;
    char why[CB_REPORT_LINE_MAX / 2] = "";
    sb->tier = cb_tier_new(o, why, sizeof why);
    if (sb->tier == NULL && why[0] != '\0') {
        s_err(sb, "%s", why);
        return -1;
    }
    /* as root: a host id of this sandbox's own (per-uid counters, finding 8
     * of issue 10); unprivileged, the kernel's user is the only id we have */
    if (sb->root && cb_idpool_acquire(CB_SANDBOX_ID_DIR, o->uid_first, o->uid_count, &sb->lease,
                                      why, sizeof why) < 0) {
        s_err(sb, "cannot give the sandbox a host id of its own: %s", why);
        return -1;
    }
    /* Where the kernel refuses user namespaces (a chroot; none configured),
     * root still gives the runner the sandbox's own host id, directly: it is
     * then also its id inside. */
    if (sb->root && !cb_userns_possible(why, sizeof why)) {
        LOG_W("no user namespace (%s): the runner's id inside is its host id %lu", why,
              sb->lease.id);
        sb->userns = false;
        sb->uid = (uid_t) sb->lease.id;
        sb->gid = (gid_t) sb->lease.id;
    } else if (sb->root && cb_tier_privileged(sb->tier)) {
        /* gvisor: runsc builds its own user namespace and needs real root
         * for it; the code runs as the sandbox's own host id in gVisor */
        sb->userns = false;
        sb->uid = (uid_t) sb->lease.id;
        sb->gid = (gid_t) sb->lease.id;
    }
    if (s_plan_mounts(sb) < 0) {
        if (sb->error[0] == '\0') s_err(sb, "planning the sandbox filesystem: %s", strerror(errno));
        return -1;
    }
    char runner_in[CB_PATH_MAX], tmp[CB_PATH_MAX];
    (void) snprintf(tmp, sizeof tmp, "%s", o->runner);
    int n = snprintf(runner_in, sizeof runner_in, "%s/%s", CB_SANDBOX_RUNNER_DIR, basename(tmp));
    if (n < 0 || (size_t) n >= sizeof runner_in ||
        cb_exec_plan_init(&sb->exec, o->python, runner_in, CB_SANDBOX_HOME, CB_SANDBOX_USER) < 0) {
        s_err(sb, "runner command line too long");
        return -1;
    }
    if (sb->np != NULL && cb_netproxy_plan(sb->np, &sb->mounts, &sb->exec) < 0) {
        s_err(sb, "planning the egress proxy: %s", strerror(errno));
        return -1;
    }
    if (cb_exec_plan_env(&sb->exec, o->env, o->n_env, sb->kernel_pid) < 0) {
        s_err(sb, "--env: %s", strerror(errno));
        return -1;
    }
    if (cb_seccomp_build(&sb->filter, why, sizeof why) < 0) {
        s_err(sb, "building the seccomp filter: %s", why);
        return -1;
    }
    (void) cb_rlimits_add(&sb->rlimits, RLIMIT_NOFILE, (rlim_t) o->open_files);
    (void) cb_rlimits_add(&sb->rlimits, RLIMIT_CORE, 0);
    /* one parent group per kernel (our parent process), one group per
     * launcher, both named by pid and start time (isolate/cgroup.h) */
    char name[CB_CGROUP_NAME_MAX], parent[CB_CGROUP_NAME_MAX];
    /* (our parent gone already: no parent group, we are about to end) */
    bool has_parent = getppid() == sb->kernel_pid && sb->kernel_pid > 1 &&
                      cb_cgroup_kernel_name(sb->kernel_pid, parent, sizeof parent) == 0;
    if (cb_cgroup_launcher_name(getpid(), name, sizeof name) < 0) {
        s_err(sb, "cannot read /proc/self/stat: %s", strerror(errno));
        return -1;
    }
    cb_cgroup_limits_t lim = {.memory_mb = o->memory_mb, .pids = o->pids, .cpus = o->cpus};
    if (sb->tier != NULL && cb_tier_plan(sb->tier, &sb->mounts, &lim, sb->uid, sb->gid, runner_in,
                                         sb->exec.envp, why, sizeof why) < 0) {
        s_err(sb, "%s", why);
        return -1;
    }
    sb->cg = cb_cgroup_new_auto(has_parent ? parent : NULL, name, &lim, why, sizeof why);
    if (sb->cg != NULL) {
        cb_cgroup_describe(sb->cg, sb->limits_desc, sizeof sb->limits_desc);
    } else {
        if (o->require_limits) {
            s_err(sb, "--require-limits: cgroup limits cannot be applied: %s", why);
            return -1;
        }
        if (sb->tier != NULL) { /* rlimits cannot bound runsc or QEMU: no silent downgrade */
            s_err(sb, "--isolation %s needs cgroup limits, which cannot be applied: %s",
                  o->isolation == CB_ISOLATION_GVISOR ? "gvisor" : "microvm", why);
            return -1;
        }
        LOG_W("DEGRADED: no usable cgroup (%s); falling back to rlimits", why);
        (void) cb_rlimits_add(&sb->rlimits, RLIMIT_AS, (rlim_t) o->memory_mb << 20);
        (void) cb_rlimits_add(&sb->rlimits, RLIMIT_NPROC, (rlim_t) o->pids);
        (void) cb_rlimits_add(&sb->rlimits, RLIMIT_FSIZE, (rlim_t) o->disk_mb << 20);
        (void) snprintf(sb->limits_desc, sizeof sb->limits_desc,
                        "DEGRADED limits: no cgroup, rlimits only (address space %ld MiB, "
                        "nproc %ld, CPU not limited, no kill-all)",
                        o->memory_mb, o->pids);
    }
    return 0;
}

/* Root launcher: switch the effective ids to the sandbox's host id (on) or
 * back to root (off).  Changing them clears our parent-death signal: re-arm
 * it, and if the kernel died in between, take the signal we missed. */
static int s_owner_ids(cb_sandbox_t *sb, bool on) {
    if (on) {
        if (setresgid((gid_t) -1, (gid_t) sb->lease.id, (gid_t) -1) < 0) return -1;
        return setresuid((uid_t) -1, (uid_t) sb->lease.id, (uid_t) -1);
    }
    if (setresuid((uid_t) -1, 0, (uid_t) -1) < 0 || setresgid((gid_t) -1, 0, (gid_t) -1) < 0)
        return -1;
    (void) prctl(PR_SET_DUMPABLE, 1);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0) return -1;
    if (getppid() != sb->kernel_pid) (void) kill(getpid(), SIGTERM);
    return 0;
}

static pid_t s_runner_host_pid(pid_t init) {
    char path[CB_PROC_PATH_MAX], buf[S_CHILDREN_BUF] = "";
    (void) snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long) init, (long) init);
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return init;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n <= 0) return init;
    buf[n] = '\0';
    long v = atol(buf);
    return v > 0 ? (pid_t) v : init;
}

int cb_sandbox_start(cb_sandbox_t *sb, pid_t *child) {
    *child = -1;
    if (s_plan(sb) < 0) return -1;
    const cb_options_t *o = sb->opts;
    if (o->network_host)
        LOG_W("--network host: the sandbox shares the host's network (and can reach its "
              "loopback services)");

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        s_err(sb, "socketpair: %s", strerror(errno));
        return -1;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        s_err(sb, "pipe2: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    unsigned long flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
    if (!o->network_host) flags |= CLONE_NEWNET;
    if (sb->userns) flags |= CLONE_NEWUSER;
    cb_report_pump();
    /* As root, create the user namespace with the sandbox's host id as
     * effective id: the namespace's owner is who the kernel charges per-user
     * counts to (ucounts: inotify instances, user namespaces, RLIMIT_NPROC,
     * mqueue bytes are charged at every level up to the owner), so an owner
     * of root would share root's limits among all sandboxes. */
    if (sb->root && sb->userns && s_owner_ids(sb, true) < 0) {
        s_err(sb, "setresuid(-1, %lu, -1): %s", sb->lease.id, strerror(errno));
        close(sv[0]);
        close(sv[1]);
        close(ep[0]);
        close(ep[1]);
        return -1;
    }
    long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        close(sv[0]);
        close(ep[0]);
        s_init_main(sb, sv[1], ep[1]);
    }
    int clone_err = errno;
    if (sb->root && sb->userns && s_owner_ids(sb, false) < 0) {
        s_err(sb, "cannot get root back after clone: %s", strerror(errno));
        if (pid > 0) (void) kill((pid_t) pid, SIGKILL);
        return -1;
    }
    close(sv[1]);
    close(ep[1]);
    cb_autofd int errp = ep[0];
    sb->ctl = sv[0];
    if (pid < 0) {
        char why[CB_REPORT_LINE_MAX / 2];
        cb_userns_diagnose(clone_err, why, sizeof why);
        s_err(sb, "cannot create the sandbox namespaces (%s): %s", strerror(clone_err), why);
        return -1;
    }
    sb->init = (pid_t) pid;
    *child = sb->init;
    uid_t host_uid = sb->root ? (uid_t) sb->lease.id : getuid();
    gid_t host_gid = sb->root ? (gid_t) sb->lease.id : getgid();
    if (sb->userns &&
        cb_userns_write_maps(sb->init, sb->uid, host_uid, sb->gid, host_gid, !sb->root) < 0) {
        int e = errno; /* the diagnosis reads files: keep the write's errno */
        char why[CB_REPORT_LINE_MAX / 2];
        cb_userns_diagnose(e, why, sizeof why);
        s_err(sb, "cannot map ids into the user namespace (%s): %s", strerror(e), why);
        return -1;
    }
    /* Two steps: init builds the filesystem while the cgroup attach runs
     * (a cgroup v1 attach can wait ~10 ms for an RCU grace period), and it
     * forks the runner only after the second go. */
    char go = S_GO;
    if (cb_write_all(sb->ctl, &go, 1) < 0) {
        s_err(sb, "the sandbox's init died before setup: %s", strerror(errno));
        return -1;
    }
    if (sb->cg != NULL && cb_cgroup_add(sb->cg, sb->init) < 0) {
        s_err(sb, "cannot move the sandbox into its cgroup: %s", strerror(errno));
        return -1;
    }
    /* If init already failed (say, a mount), this send fails quietly (no
     * SIGPIPE) and its error message is read just below. */
    while (send(sb->ctl, &go, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
    s_msg_t m;
    int wfd = -1;
    int r = s_recv_msg(sb->ctl, &m, &wfd);
    if (r <= 0 || m.type != S_MSG_WORKDIR || wfd < 0) {
        if (wfd >= 0) close(wfd);
        if (r > 0 && m.type == S_MSG_ERR)
            s_child_error(sb, &m.err);
        else
            s_err(sb, "the sandbox's init died during setup");
        return -1;
    }
    if (sb->wd_source[0]) {
        sb->ovl = m.ovl;
        LOG_I("--workdir-source %s: %lu entries examined, %lu dotfiles and %lu special files "
              "hidden, %lu directories hidden whole (bounds, mounts, unreadable)%s",
              sb->wd_source, m.ovl.scanned, m.ovl.dotfiles, m.ovl.specials, m.ovl.dirs_cut,
              m.ovl.idmapped ? "; read as its owner" : "");
    }
    if (sb->np != NULL) {
        char why[CB_REPORT_LINE_MAX / 2];
        if (cb_netproxy_start(sb->np, why, sizeof why) < 0) {
            close(wfd);
            s_err(sb, "%s", why);
            return -1;
        }
    }
    char iso[S_ISOLATION_MAX];
    s_describe(sb, iso, sizeof iso);
    LOG_I("%s", iso);
    cb_report_pump();
    (void) cb_report("isolation %s", iso);
    (void) cb_report_fd("workdir", wfd);
    close(wfd);
    cb_child_err_t ce;
    r = cb_child_read_err(errp, &ce);
    if (r != 0) {
        if (r > 0)
            s_child_error(sb, &ce);
        else
            s_err(sb, "reading the runner's setup status: %s", strerror(errno));
        return -1;
    }
    sb->runner = s_runner_host_pid(sb->init);
    (void) cb_report("started %ld", (long) sb->runner);
    return 0;
}

void cb_sandbox_interrupt(cb_sandbox_t *sb) {
    /* gvisor's supervisor keeps root, which init (no capabilities) may not signal */
    if (cb_tier_privileged(sb->tier) && sb->runner > 0 && sb->runner != sb->init)
        (void) kill(sb->runner, SIGINT);
    else if (sb->init > 0)
        (void) kill(sb->init, SIGINT);
}

void cb_sandbox_kill(cb_sandbox_t *sb) {
    if (sb == NULL) return;
    if (sb->cg != NULL) (void) cb_cgroup_kill(sb->cg);
    if (sb->init > 0) (void) kill(sb->init, SIGKILL); /* the pid namespace goes with it */
}

int cb_sandbox_poll_fd(const cb_sandbox_t *sb) { return sb->ctl; }

void cb_sandbox_on_ready(cb_sandbox_t *sb) {
    s_msg_t m;
    int r = s_recv_msg(sb->ctl, &m, NULL);
    if (r <= 0) {
        close(sb->ctl);
        sb->ctl = -1;
        return;
    }
    if (m.type == S_MSG_STATUS) {
        sb->have_status = true;
        sb->runner_status = m.status;
    }
}

void cb_sandbox_exit_status(cb_sandbox_t *sb, int *status, bool *oom, const char **reason) {
    while (sb->ctl >= 0 && !sb->have_status)
        cb_sandbox_on_ready(sb); /* init has exited */
    if (sb->have_status) *status = sb->runner_status;
    *oom = sb->cg != NULL && cb_cgroup_oom(sb->cg);
    if (sb->tier != NULL && cb_tier_guest_oom(sb->tier, status)) *oom = true; /* microvm */
    if (*oom) *reason = "memory-limit";
}

void cb_sandbox_destroy(cb_sandbox_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_sandbox_t *sb = *self_p;
    *self_p = NULL;
    cb_cgroup_destroy(&sb->cg);
    cb_tier_destroy(&sb->tier);
    /* the id goes back only now: every process of the sandbox is gone */
    cb_idpool_release(&sb->lease);
    if (sb->ctl >= 0) close(sb->ctl);
    cb_mount_plan_fini(&sb->mounts);
    cb_seccomp_fini(&sb->filter);
    free(sb);
}
