/*
 * microvm_run.c - the micro-VM's supervisor, in the runner's slot of the
 * namespaces sandbox and confined like the runner (no malloc: everything
 * was prepared by cb_microvm_plan).
 *
 * It starts QEMU (KVM, or TCG when a KVM guest does not come up), relays
 * cb.io between the guest and the kernel's pipes and event socket
 * (vm_demux.c: output before the frame written after it, with
 * backpressure), forwards SIGINT ('i') and checkpoint commands on cb.ctl,
 * and ends the way the guest's runner ended: its status is the last record
 * on cb.io, after all its output, and then QEMU is killed (the guest synced
 * its files before it sent it).  Nothing from the guest is trusted: lines on
 * cb.ctl are bounded and parsed, records on cb.io checked by the demux, and
 * only process-ending signals are re-raised (cb_tier_exit_like).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/snap_limits.h"
#include "isolate/util.h"
#include "tiers/microvm_priv.h"
#include "tiers/vm_demux.h"

typedef struct {
    char line[CB_VM_STATUS_MAX];       /* partial line from cb.ctl */
    size_t used;                       /* bytes in line */
    bool ready;                        /* the guest said "ready" */
    char fail[CB_VM_STATUS_MAX];       /* "fail ..." text, or why the channel broke */
    char qemu_err[CB_VM_QEMU_ERR_MAX]; /* the start of QEMU's stderr */
    size_t qemu_err_used;              /* bytes in it */
} s_vm_t;

/* A checkpoint answer of the guest's agent, to init outside (and on to the
 * kernel, which checks it against what it asked): printable, bounded. */
static void s_snap_out(const char *l) {
    int ctl = cb_tier_ctl();
    char out[CB_SNAP_LINE_MAX];
    size_t k = 0;
    for (const char *c = l; *c != '\0' && k + 1 < sizeof out; c++)
        out[k++] = (*c >= ' ' && *c < 0x7f) ? *c : '?';
    out[k] = '\0';
    if (ctl >= 0 && k > 0) (void) cb_send_with_fd(ctl, out, k, -1);
}

/* One line from the guest on cb.ctl: bounded, parsed as untrusted. */
static void s_guest_line(s_vm_t *v, const char *l) {
    if (strncmp(l, "snap ", 5) == 0) {
        s_snap_out(l + 5);
    } else if (strcmp(l, "ready") == 0) {
        v->ready = true;
    } else if (strncmp(l, "fail ", 5) == 0) {
        size_t k = 0;
        for (const char *c = l + 5; *c != '\0' && k + 1 < sizeof v->fail; c++)
            v->fail[k++] = (*c >= ' ' && *c < 0x7f) ? *c : '?';
        v->fail[k] = '\0';
    }
}

static ssize_t s_read_ctl(s_vm_t *v, int ctl) {
    char buf[CB_VM_STATUS_MAX];
    ssize_t n = read(ctl, buf, sizeof buf);
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || v->used + 1 >= sizeof v->line) {
            v->line[v->used] = '\0';
            s_guest_line(v, v->line);
            v->used = 0;
            if (buf[i] == '\n') continue;
        }
        v->line[v->used++] = buf[i];
    }
    return n;
}

static void s_read_err(s_vm_t *v, int fd) {
    char buf[CB_VM_STATUS_MAX];
    ssize_t n = read(fd, buf, sizeof buf);
    for (ssize_t i = 0; i < n && v->qemu_err_used + 1 < sizeof v->qemu_err; i++)
        v->qemu_err[v->qemu_err_used++] = buf[i];
}

/* Starts QEMU with its channels; *io is our end of cb.io (a socketpair of
 * its own for each QEMU, so it reads EOF once that QEMU is gone).  QEMU gets
 * neither the kernel's pipes nor its event socket: the runner's stderr only
 * for the guest's console under --log-level debug.  Returns QEMU's pid or -1. */
static pid_t s_start(const cb_microvm_t *m, int k, int devnull, int err_w, int ctl_w, int *io) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) return -1;
    int console = m->opts->log_level == CB_LOG_DEBUG ? 2 : devnull;
    const int fds[CB_VM_QFDS] = {devnull, devnull, err_w, sp[1], ctl_w, console, CB_FD_DEBUG};
    pid_t pid = cb_tier_spawn(m->qemu, m->argv[k].argv, m->env.argv, fds,
                              m->opts->debug_channel ? CB_VM_QFDS : CB_VM_QFDS - 1);
    int e = errno;
    close(sp[1]);
    if (pid < 0) {
        close(sp[0]);
        errno = e;
        return -1;
    }
    *io = sp[0];
    return pid;
}

/* QEMU is gone: what it passed on before goes to the kernel, for a bounded
 * time (the kernel may be slow to read, it is never waited for forever). */
static void s_io_finish(cb_vm_demux_t *io) {
    int64_t until = cb_now_ms() + CB_VM_END_FLUSH_MS;
    while (!cb_vm_demux_over(io)) {
        if (cb_vm_demux_pump(io) || cb_vm_demux_over(io)) continue;
        int64_t left = until - cb_now_ms();
        if (left <= 0) break;
        struct pollfd pf[CB_VM_DEMUX_NFDS];
        cb_vm_demux_poll(io, pf);
        if (poll(pf, CB_VM_DEMUX_NFDS, (int) left) < 0 && errno != EINTR) break;
    }
}

/* Ends the supervisor as the guest's runner ended, or says why it cannot. */
__attribute__((noreturn)) static void s_end(s_vm_t *v, const cb_vm_demux_t *io) {
    if (io->have_exit) {
        if (io->oom) _exit(CB_VM_EXIT_OOM); /* the launcher reports oom=1 (cb_tier_guest_oom) */
        cb_tier_exit_like(io->status);
    }
    if (io->broken)
        (void) snprintf(v->fail, sizeof v->fail, "it broke its channel (a record over %u bytes)",
                        CB_VM_MUX_PAYLOAD_MAX);
    /* no status from the guest: say why on the runner's stderr */
    (void) cb_set_nonblock(2, 0);
    static const char head[] = "[cellblock] the micro-VM stopped before its runner ended: ";
    (void) cb_write_all(2, head, sizeof head - 1);
    if (v->fail[0] != '\0') (void) cb_write_all(2, v->fail, strlen(v->fail));
    (void) cb_write_all(2, "\n", 1);
    if (v->qemu_err_used > 0) (void) cb_write_all(2, v->qemu_err, v->qemu_err_used);
    _exit(125);
}

enum { S_PF_SIG, S_PF_CTL, S_PF_ERR, S_PF_CMDS, S_PF_IO, S_PF_N = S_PF_IO + CB_VM_DEMUX_NFDS };

void cb_microvm_run(const cb_microvm_t *m, int errfd) {
    cb_tier_block_signals();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    int ctl[2], err[2];
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (sfd < 0 || devnull < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0 ||
        pipe2(err, O_CLOEXEC) < 0)
        cb_child_fail(errfd, CB_STEP_TIER, CB_VM_ERR_SETUP);
    /* the demux writes to the kernel's pipes without blocking: a full pipe
     * stops it reading cb.io, and that throttles the guest (backpressure) */
    if (cb_set_nonblock(1, 1) < 0 || cb_set_nonblock(2, 1) < 0)
        cb_child_fail(errfd, CB_STEP_TIER, CB_VM_ERR_SETUP);
    int k = m->kvm ? CB_VM_KVM : CB_VM_TCG;
    int port = -1;
    pid_t qemu = s_start(m, k, devnull, err[1], ctl[1], &port);
    if (qemu < 0) cb_child_fail(errfd, CB_STEP_TIER, CB_VM_ERR_EXEC);
    close(errfd);
    static s_vm_t v;
    static cb_vm_demux_t io;
    cb_vm_demux_init(&io, port, 1, 2, CB_FD_EVENT);
    int64_t deadline = k == CB_VM_KVM ? cb_now_ms() + CB_VM_KVM_BOOT_MS : -1;
    int cmds = cb_tier_ctl(); /* checkpoint commands from init: to the guest's agent */
    bool busy = false, qemu_gone = false;
    for (;;) {
        struct pollfd pf[S_PF_N] = {[S_PF_SIG] = {.fd = sfd, .events = POLLIN},
                                    [S_PF_CTL] = {.fd = ctl[0], .events = POLLIN},
                                    [S_PF_ERR] = {.fd = err[0], .events = POLLIN},
                                    [S_PF_CMDS] = {.fd = cmds, .events = POLLIN}};
        cb_vm_demux_poll(&io, pf + S_PF_IO);
        int timeout = deadline < 0 ? -1 : (int) (deadline - cb_now_ms());
        if ((deadline >= 0 && timeout < 0) || busy) timeout = 0;
        int r = poll(pf, S_PF_N, timeout);
        if (r < 0 && errno != EINTR) break;
        if (pf[S_PF_CMDS].revents & POLLIN) {
            char line[CB_SNAP_LINE_MAX + 8];
            ssize_t n = recv(cmds, line + 5, CB_SNAP_LINE_MAX, MSG_DONTWAIT);
            if (n == 0) cmds = -1;
            if (n > 0 && memchr(line + 5, '\n', (size_t) n) == NULL) {
                memcpy(line, "snap ", 5);
                line[5 + n] = '\n';
                (void) cb_write_all(ctl[0], line, (size_t) n + 6);
            }
        }
        if (pf[S_PF_CTL].revents & (POLLIN | POLLHUP)) s_read_ctl(&v, ctl[0]);
        if (pf[S_PF_ERR].revents & (POLLIN | POLLHUP)) s_read_err(&v, err[0]);
        busy = cb_vm_demux_pump(&io);
        if (io.have_exit || io.broken) break; /* everything before the status is delivered */
        if (v.ready) deadline = -1;
        if (pf[S_PF_SIG].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t) sizeof si) {
                if (si.ssi_signo == SIGINT) (void) !write(ctl[0], "i", 1);
                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP) (void) kill(qemu, SIGKILL);
            }
            int st;
            pid_t p;
            while ((p = waitpid(-1, &st, WNOHANG)) > 0)
                if (p == qemu) qemu_gone = true;
        }
        bool kvm_stuck = deadline >= 0 && cb_now_ms() >= deadline;
        if (k == CB_VM_KVM && !v.ready && (kvm_stuck || qemu_gone)) {
            /* KVM that runs a probe but not this guest (nested virtualisation) */
            if (!qemu_gone) {
                (void) kill(qemu, SIGKILL);
                (void) waitpid(qemu, NULL, 0);
            }
            close(port);
            k = CB_VM_TCG;
            deadline = -1;
            qemu_gone = false;
            v.qemu_err_used = 0;
            qemu = s_start(m, k, devnull, err[1], ctl[1], &port);
            if (qemu < 0) break;
            cb_vm_demux_restart(&io, port);
            continue;
        }
        if (qemu_gone) break;
    }
    if (qemu > 0 && !qemu_gone) { /* the status is in: the guest has nothing more to say */
        (void) kill(qemu, SIGKILL);
        (void) waitpid(qemu, NULL, 0);
    }
    if (!io.have_exit && !io.broken) s_io_finish(&io); /* what QEMU passed on before it went */
    /* a failure the guest reported on cb.ctl before QEMU exited */
    (void) cb_set_nonblock(ctl[0], 1);
    for (int i = 0; i < CB_VM_CTL_DRAIN_MAX && !io.have_exit && s_read_ctl(&v, ctl[0]) > 0; i++) {
    }
    s_end(&v, &io);
}
