/*
 * sandbox_init.c - inside the namespaces sandbox: its init (pid 1), which
 * builds the filesystem, roots the cgroup namespace, hands the working
 * directory to the launcher, forks the runner and reaps; and the runner's
 * last steps before execve (rlimits, ids and capabilities, Landlock, fds,
 * seccomp).  Between clone and execve nothing allocates, uses stdio or
 * logs: every string is prepared by sandbox_plan.c.
 */
#include "launcher/sandbox_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/landlock.h"
#include "isolate/net.h"
#include "isolate/util.h"
#include "isolate/warm_enter.h"

/* ---- inside: init and runner (no malloc, no stdio, no logging) ------------- */

static int s_send_msg(int fd, const cb_sb_msg_t *m, int pass_fd) {
    return cb_send_with_fd(fd, m, sizeof *m, pass_fd);
}

__attribute__((noreturn)) static void s_init_fail(int ctl, cb_step_t step, int arg) {
    cb_sb_msg_t m = {.type = CB_SB_MSG_ERR, .err = {.step = (int) step, .err = errno, .arg = arg}};
    (void) s_send_msg(ctl, &m, -1);
    _exit(127);
}

__attribute__((noreturn)) static void s_runner_main(const cb_sandbox_t *sb, int errfd,
                                                    const int chans[CB_SB_CHANS]) {
    cb_child_reset_signals();
    /* --pausable: the channels init made take the kernel's places */
    if ((chans[CB_SB_CHAN_EVENT] >= 0 && dup2(chans[CB_SB_CHAN_EVENT], CB_FD_EVENT) < 0) ||
        (chans[CB_SB_CHAN_DEBUG] >= 0 && dup2(chans[CB_SB_CHAN_DEBUG], CB_FD_LAUNCHER_DEBUG) < 0))
        cb_child_fail(errfd, CB_STEP_FDS, -1);
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
    if (sb->landlock_abi > 0 &&
        (sb->opts->pausable ? cb_landlock_apply_pausable : cb_landlock_apply)(
            sb->landlock_abi, cb_landlock_sandbox_dirs, cb_landlock_sandbox_files) < 0)
        cb_child_fail(errfd, CB_STEP_LANDLOCK, -1);
    if (cb_child_prepare_fds() < 0) cb_child_fail(errfd, CB_STEP_FDS, -1);
    if (cb_seccomp_install(&sb->filter) < 0) cb_child_fail(errfd, CB_STEP_SECCOMP, -1);
    if (sb->tier != NULL) cb_tier_run(sb->tier, errfd); /* microvm: QEMU, confined like this */
    if (sb->opts->resume_image != NULL && sb->tier == NULL) {
        /* resuming by CRIU: a placeholder, confined as the runner, that runs
         * nothing and reads nothing until the rollback to the restored copy
         * ends it (sandbox_criu.c) */
        close(errfd);
        for (;;)
            (void) poll(NULL, 0, -1);
    }
    execve(sb->exec.python, sb->exec.argv, sb->exec.envp);
    cb_child_fail(errfd, CB_STEP_EXEC, -1);
}

/* --pausable: the runner's channels as socketpairs of this (the sandbox's)
 * network namespace; the kernel's ends go to the launcher, which passes
 * them on ("channel" reports), and the runner's ends too, which it keeps
 * (as it kept the kernel's: the kernel ends the sandbox when the channel
 * closes, and a runner that exits must not close it before the launcher
 * has reported how).  The debugger's only when the kernel gave
 * one.  mine[] gets the runner's ends (-1: keep the kernel's).  0 ok. */
static int s_make_channels(const cb_sandbox_t *sb, int ctl, int mine[CB_SB_CHANS]) {
    mine[CB_SB_CHAN_EVENT] = mine[CB_SB_CHAN_DEBUG] = -1;
    if (!sb->opts->pausable) return 0;
    for (int c = 0; c < CB_SB_CHANS; c++) {
        if (c == CB_SB_CHAN_DEBUG && !sb->opts->debug_channel) continue;
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) return -1;
        for (int e = 0; e < 2; e++) {
            int high = fcntl(sp[e], F_DUPFD_CLOEXEC, CB_SB_CHAN_FD_MIN);
            close(sp[e]);
            sp[e] = high;
        }
        if (sp[0] < 0 || sp[1] < 0) {
            if (sp[0] >= 0) close(sp[0]);
            if (sp[1] >= 0) close(sp[1]);
            return -1;
        }
        cb_sb_msg_t m = {.type = CB_SB_MSG_CHANNEL, .chan = c};
        cb_sb_msg_t k = {.type = CB_SB_MSG_CHANNEL, .chan = c, .runner_end = true};
        int r = s_send_msg(ctl, &m, sp[0]) < 0 || s_send_msg(ctl, &k, sp[1]) < 0 ? -1 : 0;
        close(sp[0]);
        if (r < 0) {
            close(sp[1]);
            return -1;
        }
        mine[c] = sp[1];
    }
    return 0;
}

/* Blocks for one CB_SB_GO byte from the launcher. 0 ok, -1 launcher gone. */
static int s_wait_go(int ctl) {
    char go = 0;
    ssize_t r;
    do
        r = read(ctl, &go, 1);
    while (r < 0 && errno == EINTR);
    return (r == 1 && go == CB_SB_GO) ? 0 : -1;
}

__attribute__((noreturn)) void cb_sb_init_main(const cb_sandbox_t *sb, int ctl, int errfd) {
    sigset_t all;
    sigfillset(&all);
    (void) sigprocmask(SIG_SETMASK, &all, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) s_init_fail(ctl, CB_STEP_CLONE, -1);
    int warm = cb_warm_in_init(sb->warm); /* issue 21: the runner comes from a template */
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
    int chans[CB_SB_CHANS];
    if (s_make_channels(sb, ctl, chans) < 0) s_init_fail(ctl, CB_STEP_NET, -1);
    int wfd = open(CB_SANDBOX_HOME, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    cb_sb_msg_t wm = {.type = CB_SB_MSG_WORKDIR};
    cb_overlay_last_stats(&wm.ovl);
    if (wfd < 0 || s_send_msg(ctl, &wm, wfd) < 0) s_init_fail(ctl, CB_STEP_WORKDIR, -1);
    close(wfd);

    /* a tier's supervisor gets the checkpoint commands through init */
    int tier[2] = {-1, -1};
    if (sb->tier != NULL && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, tier) < 0)
        s_init_fail(ctl, CB_STEP_FORK, -1);
    /* warm: the template's fork is adopted by us (isolate/warm_enter.h) */
    long runner = warm >= 0 ? cb_warm_adopt(warm) : syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (runner < 0) s_init_fail(ctl, warm >= 0 ? CB_STEP_WARM : CB_STEP_FORK, -1);
    if (runner == 0) {
        close(ctl);
        if (tier[0] >= 0) close(tier[0]);
        cb_tier_set_ctl(tier[1]);
        s_runner_main(sb, errfd, chans);
    }
    if (tier[1] >= 0) close(tier[1]);
    for (int c = 0; c < CB_SB_CHANS; c++)
        if (chans[c] >= 0) close(chans[c]);
    /* init keeps only ctl and the tier's channel (and the checkpoints' store
     * and park directory, made now, with the namespace's capabilities); no
     * caps, not dumpable */
    close(errfd);
    int tier_fd = cb_sb_snap_keep_fds(ctl, tier[0]);
    int store, park;
    const char *why;
    cb_sb_snap_prepare(sb, &store, &park, &why);
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
    cb_sb_init_supervise(sb, ctl, tier_fd, (pid_t) runner, store, park, why);
}
