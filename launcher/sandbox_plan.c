/*
 * sandbox_plan.c - planning the namespaces sandbox: everything init and the
 * runner will need is prepared here, in the launcher, before clone (the
 * children only make system calls): the isolation tier, the sandbox's host
 * id, the filesystem, the runner's argv and environment, the seccomp
 * filter, rlimits and the cgroup; and the banner's isolation line.
 */
#include "launcher/sandbox_priv.h"

#include "launcher/criu_dump.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/userns.h"
#include "isolate/util.h"
#include "launcher/snapimage.h"

void cb_sb_err(cb_sandbox_t *sb, const char *fmt, ...) {
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
        cb_sb_err(sb, "--workdir-source %s: %s", o->workdir_source, strerror(errno));
        return -1;
    }
    if (realpath(src, sb->wd_source) == NULL ||
        cb_flags_workdir_refused(sb->wd_source, why, sizeof why) < 0) {
        cb_sb_err(sb, "--workdir-source %s: %s", o->workdir_source,
                  sb->wd_source[0] ? why : strerror(errno));
        return -1;
    }
    (void) snprintf(buf, len, "mode=0700,size=%ldm,nr_inodes=%d,uid=%lu,gid=%lu", o->disk_mb,
                    CB_SANDBOX_TMPFS_INODES + CB_OVERLAY_SCAN_MAX, (unsigned long) sb->uid,
                    (unsigned long) sb->gid);
    if (cb_overlay_plan(&sb->mounts, sb->wd_source, CB_SANDBOX_HOME, buf, sb->uid, sb->gid,
                        sb->root ? sb->lease.id : 0, &sb->ovl.idmapped, why, sizeof why) < 0) {
        cb_sb_err(sb, "%s", why);
        return -1;
    }
    return 0;
}

/* The sandbox's filesystem into p.  tpl: a warm-start template's view of it
 * (launcher/warm_tpl.c): the same paths, without what one kernel adds
 * (--ro-bind, --workdir-source), so that what the template's imports see and
 * write is what a sandbox's would, and nothing of one kernel's. */
static int s_plan_mounts(cb_sandbox_t *sb, cb_mount_plan_t *p, bool tpl) {
    const cb_options_t *o = sb->opts;
    char buf[CB_SANDBOX_FILE_MAX];
    if (cb_mount_plan_bind(p, "/usr", "/usr", false, false) < 0) return -1;
    for (size_t i = 0; i < sizeof s_top / sizeof s_top[0]; i++)
        if (cb_mount_plan_bind(p, s_top[i], s_top[i], true, true) < 0) return -1;
    /* the interpreter's prefix, when it is not below /usr (venvs, conda) */
    char real[CB_PATH_MAX];
    if (realpath(o->python, real) == NULL) {
        cb_sb_err(sb, "--python %s: %s", o->python, strerror(errno));
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
            cb_sb_err(sb, "/dev/%s is missing on this host", s_devs[i]);
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
    /* checkpoints in place: the fifos parked copies wait on (init writes,
     * the runner only reads: Landlock) */
    (void) snprintf(buf, sizeof buf, "%s,uid=%lu,gid=%lu", CB_SNAP_PARK_OPTS,
                    (unsigned long) sb->uid, (unsigned long) sb->gid);
    if (sb->tier == NULL && cb_mount_plan_tmpfs(p, CB_SNAP_PARK_DIR, buf) < 0) return -1;
    /* --pausable: where the launcher mounts CRIU's feature cache for a dump
     * (launcher/criu_dump.c: criu reads it from /run, else it probes by
     * writing in /tmp, the code's); an empty directory of the read-only root */
    if (o->pausable && !tpl && cb_mount_plan_dir(p, CB_SNAP_CRIU_RUN, CB_SNAP_CRIU_RUN_MODE) < 0)
        return -1;
    if (o->workdir_source != NULL && !tpl) { /* issue 11: the notebook folder, read-only below */
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
        cb_sb_err(sb, "--runner %s: its directory cannot be copied: %s",
                  o->runner, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < o->n_ro_binds && !tpl; i++) {
        if (cb_mount_plan_bind(p, o->ro_binds[i].host, o->ro_binds[i].sandbox, false, false) < 0) {
            cb_sb_err(sb, "--ro-bind %s:%s: %s", o->ro_binds[i].host,
                      o->ro_binds[i].sandbox, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int cb_sb_plan_template_mounts(cb_sandbox_t *sb, cb_mount_plan_t *p) {
    return s_plan_mounts(sb, p, true);
}

void cb_sb_describe(const cb_sandbox_t *sb, char *buf, size_t len) {
    char net[CB_SB_ISOLATION_MAX / 6];
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
    char conf[CB_SB_ISOLATION_MAX / 4];
    if (cb_tier_privileged(sb->tier))
        (void) snprintf(conf, sizeof conf, "runsc's own seccomp filters and capability drops");
    else
        (void) snprintf(conf, sizeof conf,
                        "seccomp allowlist (%u syscalls, native ABI only); %s; no capabilities, "
                        "no_new_privs",
                        sb->filter.n_allowed, ll);
    char base[CB_SB_ISOLATION_MAX * 2];         /* the tier's line is cut to len */
    char *line = sb->tier != NULL ? base : buf; /* a tier wraps the namespaces line */
    (void) snprintf(line, sb->tier != NULL ? sizeof base : len,
                    "cellblock sandbox: namespaces %spid,mount,%.160s,ipc,uts,cgroup; uid %lu "
                    "(host uid %lu%s); %s; "
                    "disk %ld MiB tmpfs (home, /tmp); working directory " CB_SANDBOX_HOME
                    "; open files %ld; %s",
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
    used = strlen(line);
    if (sb->root_lease.lock_fd >= 0 && used < line_len)
        (void) snprintf(line + used, line_len - used,
                        "; pausable: uid 0 inside is host id %lu, the runner's channels are "
                        "sockets of the sandbox's network namespace",
                        sb->root_lease.id);
    used = strlen(line);
    if (cb_warm_on(sb->warm) && used < line_len) /* issue 21 (docs/SECURITY.md) */
        (void) snprintf(line + used, line_len - used,
                        "; runner forked from a template (read-only pages shared)");
    if (sb->tier != NULL) cb_tier_describe(sb->tier, base, buf, len);
}

/* --pausable (docs/SNAPSHOTS.md): CRIU converts every id it dumps through
 * the user namespace's maps and refuses a namespace where uid 0 is not
 * mapped, so uid and gid 0 inside map to a second host id of this
 * sandbox's own.  No process of the sandbox runs as it (init and the
 * runner take the sandbox's ids, with no capability to change them) and no
 * host file belongs to it. */
static int s_plan_pausable(cb_sandbox_t *sb) {
    const cb_options_t *o = sb->opts;
    char why[CB_REPORT_LINE_MAX / 2];
    if (!sb->root || !sb->userns) {
        cb_sb_err(sb, "--pausable needs a root launcher and user namespaces: it maps the "
                      "sandbox's uid 0 to a second host id of its own, which only root may; "
                      "run the kernel as root or drop --pausable");
        return -1;
    }
    if (sb->uid == 0 || sb->gid == 0) {
        cb_sb_err(sb, "--pausable maps uid and gid 0 inside to a host id of their own: the "
                      "runner's --uid and --gid must not be 0");
        return -1;
    }
    if (cb_idpool_acquire(CB_SANDBOX_ID_DIR, o->uid_first, o->uid_count, &sb->root_lease, why,
                          sizeof why) < 0) {
        cb_sb_err(sb, "--pausable: cannot give the sandbox's uid 0 a host id of its own "
                      "(a pausable sandbox takes two): %s",
                   why);
        return -1;
    }
    LOG_I("--pausable: uid 0 inside is host id %lu", sb->root_lease.id);
    return 0;
}

int cb_sb_plan(cb_sandbox_t *sb) {
    const cb_options_t *o = sb->opts;
    char why[CB_REPORT_LINE_MAX / 2] = "";
    /* a paused session's image: refused before anything reads it, unless it
     * is exactly what the store's key sealed and fits this host and limits */
    cb_autofd int imgfd = -1;
    if (o->resume_image != NULL && (imgfd = cb_snapimage_verify(o, why, sizeof why)) < 0) {
        cb_sb_err(sb, "%s", why);
        return -1;
    }
    sb->tier = cb_tier_new(o, why, sizeof why);
    if (sb->tier == NULL && why[0] != '\0') {
        cb_sb_err(sb, "%s", why);
        return -1;
    }
    if (imgfd >= 0 && sb->tier == NULL) { /* namespaces: restored by CRIU once it runs */
        sb->resume_fd = imgfd;
        imgfd = -1;
        /* the restored runner's hello (its resume answer) comes after the
         * image is copied and criu has restored it: the kernel waits longer */
        (void) cb_report("waiting %d", CB_CRIU_RESUME_WAIT_MS);
    } else if (imgfd >= 0) { /* the directory checked, not its path again */
        cb_tier_set_image(sb->tier, imgfd);
        imgfd = -1;
    }
    /* as root: a host id of this sandbox's own (per-uid counters, finding 8
     * of issue 10); unprivileged, the kernel's user is the only id we have */
    if (sb->root && cb_idpool_acquire(CB_SANDBOX_ID_DIR, o->uid_first, o->uid_count, &sb->lease,
                                      why, sizeof why) < 0) {
        cb_sb_err(sb, "cannot give the sandbox a host id of its own: %s", why);
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
    if (o->pausable && s_plan_pausable(sb) < 0) return -1;
    if (s_plan_mounts(sb, &sb->mounts, false) < 0) {
        if (sb->error[0] == '\0')
            cb_sb_err(sb, "planning the sandbox filesystem: %s", strerror(errno));
        return -1;
    }
    char runner_in[CB_PATH_MAX], tmp[CB_PATH_MAX];
    (void) snprintf(tmp, sizeof tmp, "%s", o->runner);
    int n = snprintf(runner_in, sizeof runner_in, "%s/%s", CB_SANDBOX_RUNNER_DIR, basename(tmp));
    if (n < 0 || (size_t) n >= sizeof runner_in ||
        cb_exec_plan_init(&sb->exec, o->python, runner_in, CB_SANDBOX_HOME, CB_SANDBOX_USER) < 0) {
        cb_sb_err(sb, "runner command line too long");
        return -1;
    }
    if (sb->np != NULL && cb_netproxy_plan(sb->np, &sb->mounts, &sb->exec) < 0) {
        cb_sb_err(sb, "planning the egress proxy: %s", strerror(errno));
        return -1;
    }
    if (cb_exec_plan_env(&sb->exec, o->env, o->n_env, sb->kernel_pid) < 0) {
        cb_sb_err(sb, "--env: %s", strerror(errno));
        return -1;
    }
    /* issue 21: the runner from a template, or why not (never an error); a
     * warm start builds the filter while init builds the file system */
    sb->warm = cb_warm_new(sb);
    if (cb_warm_stopped(sb->warm)) { /* the kernel ended meanwhile: nothing to start */
        cb_sb_err(sb, "%s", cb_warm_why(sb->warm));
        return -1;
    }
    if (!cb_warm_on(sb->warm))
        CB_LOG_(o->warm == CB_WARM_OFF   ? CB_LOG_DEBUG
                : cb_warm_died(sb->warm) ? CB_LOG_WARNING
                                         : CB_LOG_INFO,
                false, "cold start: %s",
                cb_warm_why(sb->warm));
    if (!cb_warm_on(sb->warm) && cb_sb_plan_filter(sb) < 0) return -1;
    (void) cb_rlimits_add(&sb->rlimits, RLIMIT_NOFILE, (rlim_t) o->open_files);
    (void) cb_rlimits_add(&sb->rlimits, RLIMIT_CORE, 0);
    /* one parent group per kernel (our parent process), one group per
     * launcher, both named by pid and start time (isolate/cgroup.h) */
    char name[CB_CGROUP_NAME_MAX], parent[CB_CGROUP_NAME_MAX];
    /* (our parent gone already: no parent group, we are about to end) */
    bool has_parent = getppid() == sb->kernel_pid && sb->kernel_pid > 1 &&
                      cb_cgroup_kernel_name(sb->kernel_pid, parent, sizeof parent) == 0;
    if (cb_cgroup_launcher_name(getpid(), name, sizeof name) < 0) {
        cb_sb_err(sb, "cannot read /proc/self/stat: %s", strerror(errno));
        return -1;
    }
    cb_cgroup_limits_t lim = {.memory_mb = o->memory_mb, .pids = o->pids, .cpus = o->cpus};
    if (sb->tier != NULL && cb_tier_plan(sb->tier, &sb->mounts, &lim, sb->uid, sb->gid, runner_in,
                                         sb->exec.envp, why, sizeof why) < 0) {
        cb_sb_err(sb, "%s", why);
        return -1;
    }
    sb->cg = cb_cgroup_new_auto(has_parent ? parent : NULL, name, &lim, why, sizeof why);
    if (sb->cg != NULL) {
        cb_cgroup_describe(sb->cg, sb->limits_desc, sizeof sb->limits_desc);
    } else {
        if (o->require_limits) {
            cb_sb_err(sb, "--require-limits: cgroup limits cannot be applied: %s", why);
            return -1;
        }
        if (sb->tier != NULL) { /* rlimits cannot bound runsc or QEMU: no silent downgrade */
            cb_sb_err(sb, "--isolation %s needs cgroup limits, which cannot be applied: %s",
                      o->isolation == CB_ISOLATION_GVISOR ? "gvisor" : "microvm", why);
            return -1;
        }
        LOG_W("DEGRADED: no usable cgroup (%s); falling back to rlimits", why);
        (void) cb_rlimits_add(&sb->rlimits, RLIMIT_AS, (rlim_t) o->memory_mb << 20);
        (void) cb_rlimits_add(&sb->rlimits, RLIMIT_NPROC, (rlim_t) o->pids);
        (void) cb_rlimits_add(&sb->rlimits, RLIMIT_FSIZE, (rlim_t) o->disk_mb << 20);
        /* the banner names the cause (why up to its first ';', the same shape
         * on v1 and v2); the fix is in the log line above */
        int cause = (int) strcspn(why, ";");
        if (cause > CB_SB_CAUSE_MAX) cause = CB_SB_CAUSE_MAX;
        (void) snprintf(sb->limits_desc, sizeof sb->limits_desc,
                        "DEGRADED limits: no cgroup (%.*s), rlimits only (address space %ld MiB, "
                        "nproc %ld, CPU not limited, no kill-all)",
                        cause, why, o->memory_mb, o->pids);
    }
    return 0;
}

int cb_sb_plan_filter(cb_sandbox_t *sb) {
    char why[CB_REPORT_LINE_MAX / 2] = "";
    if (sb->filter.prog.len > 0) return 0;
    if (cb_seccomp_build(&sb->filter, why, sizeof why) < 0) {
        cb_sb_err(sb, "building the seccomp filter: %s", why);
        return -1;
    }
    return 0;
}
