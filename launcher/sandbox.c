/*
 * sandbox.c - --sandbox full: plan, start, supervise and tear down.
 *
 *   launcher (host)                       init (pid 1 inside)            runner
 *   plan mounts/filter/env/limits
 *   cgroup (v2 | v1 | rlimits, degraded)
 *   clone3(NEWUSER?|NEWPID|NEWNS|NEWNET|NEWIPC|NEWUTS
 *          |INTO_CGROUP on v2) ───────────▶ waits for "go"
 *   uid/gid maps, "go" ─────────────────────▶ hostname, lo up,
 *   cgroup.procs (v1, meanwhile), "go" ─────▶ mounts + pivot_root, then
 *                                           unshare(NEWCGROUP),
 *   ◀──────── workdir fd (SCM_RIGHTS) ───── sends /home/user O_PATH
 *                                           fork ─────────────────────▶ setsid, rlimits,
 *                                           drop caps, reap, forward    ids + caps + nnp,
 *   ◀──────────────────────── error pipe: EOF at exec, or (step, errno) Landlock, fds,
 *   `started`                                                           seccomp, execve
 *   ◀──────── runner's wait status ──────── runner died: kill(-1), exit
 *
 * Planning is in sandbox_plan.c, init and the runner's last steps before
 * execve in sandbox_init.c; between clone and execve nothing allocates,
 * uses stdio or logs.  The init keeps the pid
 * namespace alive; when it exits the kernel kills everything left in it,
 * and the cgroup kill covers anything that might still hold on.
 */
#include "launcher/sandbox_priv.h"

#include "launcher/criu_dump.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/landlock.h"
#include "isolate/log.h"
#include "isolate/userns.h"
#include "isolate/util.h"
#include "launcher/snapimage.h"

cb_sandbox_t *cb_sandbox_new(const cb_options_t *opts) {
    cb_sandbox_t *sb = calloc(1, sizeof *sb);
    if (sb == NULL) return NULL;
    sb->opts = opts;
    sb->ctl = -1;
    sb->userns = true;
    sb->root = geteuid() == 0;
    sb->kernel_pid = getppid();
    sb->lease.lock_fd = sb->lease.dir_fd = -1;
    sb->root_lease.lock_fd = sb->root_lease.dir_fd = -1;
    sb->chan_keep[0] = sb->chan_keep[1] = -1;
    sb->resume_fd = -1;
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
            return e->err == E2BIG ? "--workdir-source: the folder has more than " CB_SB_STR(
                                         CB_OVERLAY_SCAN_MAX) " entries at its top level"
                                   : "while overlaying the --workdir-source folder";
        if (e->arg >= 0 && (size_t) e->arg < sb->mounts.n) {
            const cb_mount_op_t *op = &sb->mounts.ops[e->arg];
            bool bind = op->kind == CB_MNT_BIND_RO && op->src != NULL;
            (void) snprintf(
                buf, len, "mounting %s%s%s%s", op->dst + strlen(CB_SANDBOX_NEWROOT) + 1,
                bind ? " from " : "", bind ? op->src + strlen(CB_SANDBOX_OLDROOT) + 1 : "",
                bind && e->err == EACCES ? " (the sandbox's ids cannot reach that host path: is it "
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
    cb_sb_err(sb, "sandbox setup failed while %s: %s%s%s", cb_step_name(e->step), strerror(e->err),
              hint[0] != '\0' ? "; " : "", hint);
}

/* One message from init, and the fd it carries (closed when got_fd is
 * NULL).  1 ok, 0 init closed, -1 errno (EPROTO: not a whole message). */
static int s_recv_msg(int fd, cb_sb_msg_t *m, int *got_fd) {
    int f = -1;
    ssize_t r = cb_recv_with_fd(fd, m, sizeof *m, &f, 0);
    if (got_fd != NULL)
        *got_fd = f;
    else if (f >= 0)
        close(f);
    if (r <= 0) return (int) r;
    if ((size_t) r != sizeof *m) {
        errno = EPROTO;
        return -1;
    }
    return 1;
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

/* Root launcher with the sandbox's host id as effective id (s_owner_ids):
 * clone3(CLONE_INTO_CGROUP) checks, with those ids, write access to the
 * cgroup.procs of the common ancestor of our group and the sandbox's, which
 * is root's.  CAP_DAC_OVERRIDE is still permitted (the saved id is 0):
 * raise it in the effective set for the clone alone; s_owner_ids(off)
 * restores the full set. */
static int s_dac_override(bool on) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) < 0) return -1;
    if (on)
        d[0].effective |= 1u << CAP_DAC_OVERRIDE;
    else
        d[0].effective &= ~(1u << CAP_DAC_OVERRIDE);
    return (int) syscall(SYS_capset, &h, d);
}

/* clone3 into the sandbox's v2 cgroup (cgfd), so it is accounted and limited
 * from its first instruction and no attach is needed afterwards (a write to
 * cgroup.procs, also the v1 one, waits for the RCU grace period the
 * migration needs).  *into: it worked.  Falls back to clone where clone3 or
 * CLONE_INTO_CGROUP is missing or refused (kernels before 5.7, container
 * seccomp profiles that answer ENOSYS or EPERM). */
static long s_clone(unsigned long flags, int cgfd, bool *into) {
    *into = false;
    if (cgfd >= 0) {
        struct clone_args ca = {.flags = flags | CLONE_INTO_CGROUP,
                                .exit_signal = SIGCHLD,
                                .cgroup = (unsigned long long) cgfd};
        long pid = syscall(SYS_clone3, &ca, sizeof ca);
        if (pid >= 0) {
            *into = true;
            return pid;
        }
        /* missing (ENOSYS, E2BIG, EINVAL), refused by a filter (EPERM), or the
         * group refuses a clone into it (EACCES, EBUSY, EOPNOTSUPP): the
         * attach after clone reports those with the group's name */
        if (errno != ENOSYS && errno != E2BIG && errno != EINVAL && errno != EPERM &&
            errno != EACCES && errno != EBUSY && errno != EOPNOTSUPP)
            return -1;
        LOG_I("clone3(CLONE_INTO_CGROUP): %s; attaching after clone", strerror(errno));
    }
    return syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
}

static pid_t s_runner_host_pid(pid_t init) {
    char path[CB_PROC_PATH_MAX], buf[CB_SB_CHILDREN_BUF] = "";
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
    if (cb_sb_plan(sb) < 0) return -1;
    const cb_options_t *o = sb->opts;
    if (o->network_host)
        LOG_W("--network host: the sandbox shares the host's network (and can reach its "
              "loopback services)");

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        cb_sb_err(sb, "socketpair: %s", strerror(errno));
        return -1;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        cb_sb_err(sb, "pipe2: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    bool warm = cb_warm_on(sb->warm) && cb_warm_prepare(sb->warm) == 0; /* issue 21 */
    if (!warm && cb_sb_plan_filter(sb) < 0) {
        close(sv[0]);
        close(sv[1]);
        close(ep[0]);
        close(ep[1]);
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
        cb_sb_err(sb, "setresuid(-1, %lu, -1): %s", sb->lease.id, strerror(errno));
        close(sv[0]);
        close(sv[1]);
        close(ep[0]);
        close(ep[1]);
        return -1;
    }
    int cgfd = o->no_clone_into_cgroup ? -1 : cb_cgroup_dirfd(sb->cg);
    if (cgfd >= 0 && sb->root && sb->userns && s_dac_override(true) < 0) {
        close(cgfd);
        cgfd = -1;
    }
    bool placed = false;
    long pid = s_clone(flags, cgfd, &placed);
    if (pid == 0) {
        close(sv[0]);
        close(ep[0]);
        cb_sb_init_main(sb, sv[1], ep[1]);
    }
    int clone_err = errno;
    if (cgfd >= 0) close(cgfd);
    if (sb->root && sb->userns && s_owner_ids(sb, false) < 0) {
        cb_sb_err(sb, "cannot get root back after clone: %s", strerror(errno));
        if (pid > 0) (void) kill((pid_t) pid, SIGKILL);
        return -1;
    }
    close(sv[1]);
    close(ep[1]);
    cb_warm_after_clone(sb->warm);
    cb_autofd int errp = ep[0];
    sb->ctl = sv[0];
    if (pid < 0) {
        char why[CB_REPORT_LINE_MAX / 2];
        cb_userns_diagnose(clone_err, why, sizeof why);
        cb_sb_err(sb, "cannot create the sandbox namespaces (%s): %s", strerror(clone_err), why);
        return -1;
    }
    sb->init = (pid_t) pid;
    *child = sb->init;
    uid_t host_uid = sb->root ? (uid_t) sb->lease.id : getuid();
    gid_t host_gid = sb->root ? (gid_t) sb->lease.id : getgid();
    long root_id = sb->root_lease.lock_fd >= 0 ? (long) sb->root_lease.id : -1; /* --pausable */
    if (sb->userns && cb_userns_write_maps(sb->init, sb->uid, host_uid, sb->gid, host_gid,
                                           !sb->root, root_id) < 0) {
        int e = errno; /* the diagnosis reads files: keep the write's errno */
        char why[CB_REPORT_LINE_MAX / 2];
        cb_userns_diagnose(e, why, sizeof why);
        cb_sb_err(sb, "cannot map ids into the user namespace (%s): %s", strerror(e), why);
        return -1;
    }
    /* Two steps: init builds the filesystem while the cgroup attach runs
     * (a cgroup v1 attach can wait ~10 ms for an RCU grace period), and it
     * forks the runner only after the second go. */
    char go = CB_SB_GO;
    if (cb_write_all(sb->ctl, &go, 1) < 0) {
        cb_sb_err(sb, "the sandbox's init died before setup: %s", strerror(errno));
        return -1;
    }
    /* warm (issue 21): the template's fork moves init into the cgroup, then
     * joins and forks while init builds; we build the filter meanwhile */
    if (warm && (cb_warm_send(sb->warm, sb, placed ? 0 : sb->init) < 0 ||
                 cb_sb_plan_filter(sb) < 0 || cb_warm_attached(sb->warm) < 0)) {
        if (sb->error[0] == '\0') cb_sb_err(sb, "warm start: %s", cb_warm_why(sb->warm));
        return -1;
    }
    if (sb->cg != NULL && !placed && !warm && cb_cgroup_add(sb->cg, sb->init) < 0) {
        cb_sb_err(sb, "cannot move the sandbox into its cgroup: %s", strerror(errno));
        return -1;
    }
    if (sb->cg != NULL) /* how it got there: the v2 guest's tests read this line */
        LOG_I("the sandbox's init %ld %s", (long) sb->init,
              placed ? "started in its cgroup (clone3 CLONE_INTO_CGROUP)"
              : cb_cgroup_version(sb->cg) != CB_CGROUP_V2
                  ? "was moved into its cgroup after clone (cgroup v1)"
              : o->no_clone_into_cgroup
                  ? "was moved into its cgroup after clone (--no-clone-into-cgroup)"
                  : "was moved into its cgroup after clone (clone3 refused it)");
    /* If init already failed (say, a mount), this send fails quietly (no
     * SIGPIPE) and its error message is read just below. */
    while (send(sb->ctl, &go, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
    cb_sb_msg_t m;
    int wfd = -1;
    int r = s_recv_msg(sb->ctl, &m, &wfd);
    /* --pausable: the kernel's ends of the channels init made come first */
    for (int c = 0; r > 0 && m.type == CB_SB_MSG_CHANNEL && wfd >= 0 && c < 2 * CB_SB_CHANS;
         c++) {
        int ch = m.chan == CB_SB_CHAN_EVENT ? CB_SB_CHAN_EVENT : CB_SB_CHAN_DEBUG;
        if (m.runner_end && sb->chan_keep[ch] < 0) {
            sb->chan_keep[ch] = wfd;
        } else if (ch == CB_SB_CHAN_EVENT && cb_sb_criu_resync(sb, wfd) < 0) {
            cb_sb_err(sb, "writing the restored runner's resync frame: %s", strerror(errno));
            close(wfd);
            return -1;
        } else {
            (void) cb_report_fd(ch == CB_SB_CHAN_EVENT ? "channel event" : "channel debug", wfd);
            close(wfd);
        }
        r = s_recv_msg(sb->ctl, &m, &wfd);
    }
    if (r <= 0 || m.type != CB_SB_MSG_WORKDIR || wfd < 0) {
        if (wfd >= 0) close(wfd);
        if (r > 0 && m.type == CB_SB_MSG_ERR)
            s_child_error(sb, &m.err);
        else
            cb_sb_err(sb, "the sandbox's init died during setup");
        return -1;
    }
    /* the working directory goes to the kernel before any runner can run:
     * the kernel takes its baseline (what a --workdir-source folder holds,
     * not artifacts) when the runner's hello arrives, and a warm runner,
     * once it has the file system, can say hello before the rest of this
     * function has run */
    (void) cb_report_fd("workdir", wfd);
    close(wfd);
    /* warm: the file system is built; the runner joins it while we report */
    if (warm && cb_warm_send_fs(sb->warm, sb) < 0) {
        cb_sb_err(sb, "warm start: %s", cb_warm_why(sb->warm));
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
            cb_sb_err(sb, "%s", why);
            return -1;
        }
    }
    char iso[CB_SB_ISOLATION_MAX];
    cb_sb_describe(sb, iso, sizeof iso);
    LOG_I("%s", iso);
    cb_report_pump();
    (void) cb_report("isolation %s", iso);
    if (warm) {
        if (cb_warm_wait(sb->warm) < 0) {
            cb_sb_err(sb, "warm start: %s", cb_warm_why(sb->warm));
            return -1;
        }
        sb->runner = s_runner_host_pid(sb->init);
        (void) cb_report("started %ld", (long) sb->runner);
        return 0;
    }
    cb_child_err_t ce;
    r = cb_child_read_err(errp, &ce);
    if (r != 0) {
        if (r > 0)
            s_child_error(sb, &ce);
        else
            cb_sb_err(sb, "reading the runner's setup status: %s", strerror(errno));
        return -1;
    }
    sb->runner = s_runner_host_pid(sb->init);
    (void) cb_report("started %ld", (long) sb->runner);
    if (cb_sb_criu_resuming(sb)) { /* the runner is a placeholder: the image's takes over */
        cb_sb_criu_resume_begin(sb, sb->resume_fd);
        sb->resume_fd = -1;
    }
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
    cb_sb_msg_t m;
    int r = s_recv_msg(sb->ctl, &m, NULL);
    if (r <= 0) {
        close(sb->ctl);
        sb->ctl = -1;
        return;
    }
    if (m.type == CB_SB_MSG_STATUS) {
        sb->have_status = true;
        sb->runner_status = m.status;
    }
    if (m.type == CB_SB_MSG_SNAP) { /* the checkpoint agent: relayed as it is */
        m.text[sizeof m.text - 1] = '\0';
        if (cb_sb_criu_line(sb, m.text)) return; /* a pause's or resume's own checkpoint */
        cb_snapimage_answer(sb->opts, m.text); /* reported (an image sealed first) */
        /* this tier can write itself into an image where criu can dump */
        char why[CB_REPORT_LINE_MAX / 2];
        if (strncmp(m.text, "ready ", 6) == 0 && sb->tier == NULL && sb->opts->pausable &&
            sb->root) {
            if (cb_criu_usable(why, sizeof why) == 0)
                (void) cb_report("snap pausable");
            else
                (void) cb_report("snap unpausable %s", why);
        }
    }
}

int cb_sandbox_oom_fd(cb_sandbox_t *sb, short *events) {
    if (sb == NULL || sb->cg == NULL || sb->opts->isolation != CB_ISOLATION_GVISOR ||
        sb->init <= 0 || sb->oom_unwatched)
        return -1;
    int fd = cb_cgroup_oom_watch(sb->cg, events);
    if (fd < 0) {
        sb->oom_unwatched = true;
        PLOG_W("the gVisor sandbox's OOM kills cannot be watched (a runsc that hangs after one "
               "then ends only at --timeout)");
    }
    return fd;
}

void cb_sandbox_on_oom(cb_sandbox_t *sb) {
    if (sb->cg == NULL || !cb_cgroup_oom_fired(sb->cg)) return;
    LOG_W("out of memory: the host killed one of gVisor's processes; ending the sandbox");
    cb_sandbox_kill(sb);
}

void cb_sandbox_exit_status(cb_sandbox_t *sb, int *status, bool *oom, const char **reason) {
    while (sb->ctl >= 0 && !sb->have_status)
        cb_sandbox_on_ready(sb); /* init has exited */
    if (sb->have_status) *status = sb->runner_status;
    *oom = sb->cg != NULL && cb_cgroup_oom(sb->cg);
    if (sb->tier != NULL && cb_tier_guest_oom(sb->tier, status)) *oom = true; /* microvm */
    if (*oom) *reason = "memory-limit";
}

bool cb_sandbox_warm_failed(const cb_sandbox_t *sb) {
    return sb != NULL && cb_warm_failed(sb->warm);
}

bool cb_sandbox_stopped(const cb_sandbox_t *sb) { return sb != NULL && cb_warm_stopped(sb->warm); }

void cb_sandbox_after_start(cb_sandbox_t *sb) {
    if (sb != NULL) cb_warm_after_start(sb->warm, sb);
}

void cb_sandbox_destroy(cb_sandbox_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_sandbox_t *sb = *self_p;
    *self_p = NULL;
    cb_warm_destroy(&sb->warm);
    cb_cgroup_destroy(&sb->cg);
    cb_tier_destroy(&sb->tier);
    /* the id goes back only now: every process of the sandbox is gone */
    cb_idpool_release(&sb->lease);
    cb_idpool_release(&sb->root_lease);
    if (sb->ctl >= 0) close(sb->ctl);
    if (sb->resume_fd >= 0) close(sb->resume_fd);
    for (int c = 0; c < CB_SB_CHANS; c++)
        if (sb->chan_keep[c] >= 0) close(sb->chan_keep[c]);
    cb_mount_plan_fini(&sb->mounts);
    cb_seccomp_fini(&sb->filter);
    free(sb);
}
