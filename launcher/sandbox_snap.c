/*
 * sandbox_snap.c - checkpoints in place in the namespaces sandbox: the
 * sandbox's init as their trusted agent (tiers/snap_agent.c), and the
 * launcher relaying the kernel's commands to it (docs/SNAPSHOTS.md).
 *
 *   kernel ──"snap CMD" on fd 4──▶ launcher ──CMD on ctl──▶ init (agent)
 *   kernel ◀──"snap REPLY" report── launcher ◀──CB_SB_MSG_SNAP── init
 *
 * Init keeps the checkpoints' files in a tmpfs it makes with the new mount
 * API and never attaches (fsopen/fsmount): no path leads to it, only init's
 * fd, and init is not dumpable, so the runner can neither read nor write it.
 * Its size is --disk; its pages are charged to the sandbox's memory cgroup.
 * Init supervises with a signalfd and poll (it used sigwaitinfo alone): it
 * now also serves commands, and the runner it watches is replaced by a
 * rollback.  Inside init nothing allocates (the agent is libc only).
 */
#include "launcher/sandbox_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/util.h"
#include "tiers/snap_agent.h"

#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC      0x00000001
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
#define FSMOUNT_CLOEXEC     0x00000001
#endif
#ifndef MOUNT_ATTR_NOSUID
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV  0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif

/* ---- launcher side ------------------------------------------------------------- */

int cb_sandbox_snap_command(cb_sandbox_t *sb, const char *line, int fd) {
    size_t n = strlen(line);
    if (sb == NULL || sb->ctl < 0 || n == 0 || n >= CB_SNAP_LINE_MAX) {
        errno = EINVAL;
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) line[i] < 0x20 || (unsigned char) line[i] >= 0x7f) {
            errno = EINVAL;
            return -1;
        }
    return cb_send_with_fd(sb->ctl, line, n, fd);
}

/* ---- inside: init (no malloc, no stdio, no logging) ------------------------------- */

/* The checkpoint store: a detached tmpfs of --disk MiB.  -1 with *why. */
static int s_store(const cb_sandbox_t *sb, const char **why) {
    char size[32];
    (void) snprintf(size, sizeof size, "%ldm", sb->opts->disk_mb);
    int fs = (int) syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0) {
        *why = "this kernel lacks the new mount API (fsopen, Linux 5.2)";
        return -1;
    }
    int m = -1;
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", size, 0) == 0 &&
        syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "nr_inodes",
                CB_SB_STR(CB_SANDBOX_TMPFS_INODES), 0) == 0 &&
        syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0700", 0) == 0 &&
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
        m = (int) syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    close(fs);
    if (m < 0) *why = "the checkpoint store (a tmpfs) could not be made";
    return m;
}

void cb_sb_snap_prepare(const cb_sandbox_t *sb, int *store, int *park, const char **why) {
    *store = *park = -1;
    *why = "";
    if (sb->tier != NULL) {
        *why = "checkpoints in place are kept by the tier's own init (not yet for this tier)";
        return;
    }
    if ((*store = s_store(sb, why)) < 0) return;
    *park = open(CB_SNAP_PARK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*park < 0) {
        close(*store);
        *store = -1;
        *why = "the park directory is missing";
    }
}

int cb_sb_snap_keep_fds(int ctl, int tier) {
    if (tier >= 0 && tier != ctl + 1) {
        if (dup2(tier, ctl + 1) < 0)
            tier = -1; /* a tier without checkpoints, then */
        else
            close(tier), tier = ctl + 1;
        if (tier >= 0) (void) fcntl(tier, F_SETFD, FD_CLOEXEC);
    }
    if (ctl > 0) (void) syscall(SYS_close_range, 0, ctl - 1, 0);
    (void) syscall(SYS_close_range, (unsigned) (tier >= 0 ? tier + 1 : ctl + 1), ~0U, 0);
    return tier;
}

static void s_say(void *ud, const char *line) {
    int ctl = *(int *) ud;
    cb_sb_msg_t m = {.type = CB_SB_MSG_SNAP};
    (void) snprintf(m.text, sizeof m.text, "%s", line);
    (void) cb_send_with_fd(ctl, &m, sizeof m, -1);
}

static cb_snap_agent_t s_agent; /* init's only one; static keeps it off the stack */

__attribute__((noreturn)) static void s_end(int ctl, int status) {
    cb_snap_agent_end(&s_agent);
    (void) kill(-1, SIGKILL); /* the runner is gone: so is everything else in the sandbox */
    while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR) {
    }
    cb_sb_msg_t m = {.type = CB_SB_MSG_STATUS, .status = status};
    (void) cb_send_with_fd(ctl, &m, sizeof m, -1);
    _exit(0);
}

__attribute__((noreturn)) void cb_sb_init_supervise(const cb_sandbox_t *sb, int ctl, int tier,
                                                    pid_t runner, int store, int park,
                                                    const char *why) {
    static int s_ctl;
    s_ctl = ctl;
    /* with a tier, its supervisor (or the agent inside it) answers: say nothing here */
    cb_snap_agent_init(&s_agent, store, park, CB_SANDBOX_HOME, "/tmp", runner, false, why,
                       tier >= 0 ? NULL : s_say, &s_ctl);
    (void) sb;
    sigset_t all;
    sigfillset(&all);
    int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        (void) kill(runner, SIGKILL);
        s_end(ctl, SIGKILL);
    }
    for (;;) {
        struct pollfd pf[3] = {{.fd = sfd, .events = POLLIN},
                               {.fd = ctl, .events = POLLIN},
                               {.fd = tier, .events = POLLIN}};
        int n = poll(pf, 3, cb_snap_agent_wait_ms(&s_agent));
        if (n < 0 && errno != EINTR) continue;
        cb_snap_agent_tick(&s_agent);
        if (pf[1].revents & (POLLHUP | POLLERR)) s_end(ctl, SIGKILL); /* launcher gone */
        if (pf[1].revents & POLLIN) {
            char line[CB_SNAP_LINE_MAX];
            int fd, r = cb_recv_line_with_fd(ctl, line, sizeof line, &fd);
            if (r == 0) s_end(ctl, SIGKILL);
            if (r > 0 && tier >= 0)
                (void) cb_send_with_fd(tier, line, (size_t) r, fd); /* the tier's business */
            else if (r > 0)
                cb_snap_agent_command_fd(&s_agent, line, fd);
            if (fd >= 0) close(fd);
        }
        if (pf[2].revents & POLLIN) { /* the tier's answers, relayed as they are */
            char line[CB_SNAP_LINE_MAX];
            int fd, r = cb_recv_line_with_fd(tier, line, sizeof line, &fd);
            if (fd >= 0) close(fd);
            if (r > 0) s_say(&s_ctl, line);
        }
        if (!(pf[0].revents & POLLIN)) continue;
        struct signalfd_siginfo si;
        bool chld = false;
        while (read(sfd, &si, sizeof si) == (ssize_t) sizeof si) {
            if (si.ssi_signo == SIGCHLD)
                chld = true;
            else
                (void) kill(s_agent.runner, (int) si.ssi_signo); /* INT, TERM, HUP, ... */
        }
        if (!chld) continue;
        for (;;) {
            int st;
            pid_t p = waitpid(-1, &st, WNOHANG | WUNTRACED);
            if (p <= 0) break;
            if (cb_snap_agent_child(&s_agent, p, st)) continue;
            if (p == s_agent.runner && (WIFEXITED(st) || WIFSIGNALED(st))) s_end(ctl, st);
        }
    }
}
