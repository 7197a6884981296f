/*
 * main.c - cellblock-launcher: sets up the sandbox, starts the runner in it,
 * supervises it and reports to the kernel (docs/RUNNER_PROTOCOL.md 1-2).
 *
 * The launcher is single-threaded.  It dies with the kernel (PDEATHSIG),
 * blocks the signals it handles and reads them from a signalfd (bubblewrap
 * monitor_child), reaps with a waitpid(WNOHANG) loop since SIGCHLDs
 * coalesce, and sends exactly one `exit` or `fatal` report at the end.
 *
 *   --sandbox none: fork, exec the runner in a host temp dir; nothing else.
 *   --sandbox full: see launcher/sandbox.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/cgroup.h"
#include "launcher/child.h"
#include "isolate/log.h"
#include "launcher/netproxy.h"
#include "launcher/netproxy_limits.h"
#include "launcher/options.h"
#include "launcher/report.h"
#include "launcher/sandbox.h"
#include "launcher/snapimage.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"
#include "launcher/workdir.h"

#define EXIT_USAGE 2 /* bad command line */
/* one command datagram from the kernel: the longest is a network policy */
#define S_COMMAND_MAX (CB_PROXY_SPEC_MAX + 64)
#define EXIT_FATAL 3 /* sandbox could not be set up (contract) */

typedef struct {
    cb_options_t opts;         /* parsed command line */
    int sfd;                   /* signalfd: INT TERM CHLD HUP */
    int pump_fd;               /* log relay read end */
    cb_sandbox_t *sb;          /* full mode: the sandbox, else NULL */
    pid_t child;               /* the process we reap: runner (none) / init (full) */
    bool child_done;           /* child reaped */
    int child_status;          /* its wait status */
    bool terminating;          /* SIGTERM/SIGHUP seen */
    char workdir[CB_PATH_MAX]; /* none mode: host workdir, "" if none */
    cb_netproxy_t *np;         /* --network allow: the egress proxy, else NULL */
    bool commands_closed;      /* the kernel's end of fd 4 is gone: stop polling it */
} s_launcher_t;

static void s_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void s_fatal(const char *fmt, ...) {
    char buf[CB_REPORT_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    LOG_E("fatal: %s", buf);
    cb_report_pump();
    (void) cb_report("fatal %s", buf);
}

/* ---- --sandbox none ------------------------------------------------------ */

static int s_spawn_none(s_launcher_t *L) {
    if (cb_workdir_create(L->workdir, sizeof L->workdir) < 0) {
        s_fatal("cannot create a working directory under /tmp: %s", strerror(errno));
        return -1;
    }
    (void) cb_report("isolation NO SANDBOX (--sandbox none): user code runs unconfined; "
                     "working directory %s",
                     L->workdir);
    {
        cb_autofd int wfd = open(L->workdir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (wfd < 0 || cb_report_fd("workdir", wfd) < 0) {
            s_fatal("cannot pass the working directory %s: %s", L->workdir, strerror(errno));
            return -1;
        }
    }
    static cb_exec_plan_t plan; /* large; static keeps it off the stack */
    if (cb_exec_plan_init(&plan, L->opts.python, L->opts.runner, L->workdir, CB_SANDBOX_USER) < 0 ||
        cb_exec_plan_env(&plan, L->opts.env, L->opts.n_env, getppid()) < 0) {
        s_fatal("runner command line or environment too long");
        return -1;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        s_fatal("pipe2: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        s_fatal("fork: %s", strerror(e));
        return -1;
    }
    if (pid == 0) {
        close(ep[0]);
        cb_child_reset_signals();
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) cb_child_fail(ep[1], CB_STEP_CAPS, -1);
        if (getppid() != parent) _exit(127);
        if (setsid() < 0) cb_child_fail(ep[1], CB_STEP_SETSID, -1);
        if (chdir(plan.workdir) < 0) cb_child_fail(ep[1], CB_STEP_CHDIR, -1);
        if (cb_child_prepare_fds() < 0) cb_child_fail(ep[1], CB_STEP_FDS, -1);
        execve(plan.python, plan.argv, plan.envp);
        cb_child_fail(ep[1], CB_STEP_EXEC, -1);
    }
    close(ep[1]);
    L->child = pid;
    cb_child_err_t ce;
    int r = cb_child_read_err(ep[0], &ce);
    close(ep[0]);
    if (r != 0) {
        (void) waitpid(pid, NULL, 0);
        L->child_done = true;
        s_fatal("%s failed (%s): %s", cb_step_name(ce.step), plan.python,
                r > 0 ? strerror(ce.err) : strerror(errno));
        return -1;
    }
    (void) cb_report("started %ld", (long) pid);
    return 0;
}

/* ---- supervision ----------------------------------------------------------- */

static void s_reap(s_launcher_t *L) {
    for (int i = 0; i < CB_REAP_LOOP_MAX; i++) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p <= 0) return;
        if (cb_netproxy_reaped(L->np, p, st)) continue;
        if (p == L->child) {
            L->child_done = true;
            L->child_status = st;
        }
    }
}

static void s_kill_all(s_launcher_t *L) {
    cb_netproxy_kill(L->np);
    if (L->sb != NULL) {
        cb_sandbox_kill(L->sb);
    } else if (L->child > 0 && !L->child_done) {
        (void) kill(-L->child, SIGKILL); /* the runner's session/process group */
        (void) kill(L->child, SIGKILL);
    }
}

static void s_on_signal(s_launcher_t *L) {
    struct signalfd_siginfo si;
    for (;;) {
        ssize_t r = read(L->sfd, &si, sizeof si);
        if (r < 0 && errno == EINTR) continue;
        if (r != (ssize_t) sizeof si) return;
        switch (si.ssi_signo) {
        case SIGINT:
            LOG_D("SIGINT: interrupting the runner");
            if (L->sb != NULL)
                cb_sandbox_interrupt(L->sb);
            else if (!L->child_done)
                (void) kill(L->child, SIGINT);
            break;
        case SIGTERM:
        case SIGHUP:
            LOG_I("signal %u: tearing the sandbox down", si.ssi_signo);
            L->terminating = true;
            s_kill_all(L);
            break;
        case SIGCHLD: s_reap(L); break;
        default: break;
        }
    }
}

/* A command from the kernel on fd 4 (one datagram each): `snap CMD` goes to
 * the sandbox's checkpoint agent (docs/SNAPSHOTS.md), `net SEQ ...` to the
 * egress proxy (netctl.c); nothing else is a command. */
static void s_on_command(s_launcher_t *L) {
    char line[S_COMMAND_MAX];
    int fd = -1;
    int r = cb_recv_line_with_fd(CB_FD_REPORT, line, sizeof line, &fd);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) {
        L->commands_closed = true;
        return;
    }
    if (strncmp(line, "net ", 4) == 0) {
        cb_netproxy_kernel_line(L->np, line, (size_t) r);
    } else if (strncmp(line, "snap ", 5) != 0) {
        LOG_W("unknown command from the kernel: dropped");
    } else if (L->sb == NULL) {
        (void) cb_report("snap unavailable --sandbox none has no trusted init to keep checkpoints");
    } else if (cb_snapimage_command(L->sb, line + 5, fd) < 0) {
        (void) cb_report("snap fail 0 the sandbox's init did not take the command: %s",
                         strerror(errno));
    }
    if (fd >= 0) close(fd);
}

static int s_supervise(s_launcher_t *L) {
    while (!L->child_done) {
        short oom_events = 0;
        int oom = L->sb != NULL ? cb_sandbox_oom_fd(L->sb, &oom_events) : -1;
        struct pollfd pf[5] = {
            {.fd = L->sfd, .events = POLLIN},
            {.fd = L->pump_fd, .events = POLLIN},
            {.fd = L->sb != NULL ? cb_sandbox_poll_fd(L->sb) : -1, .events = POLLIN},
            {.fd = L->commands_closed ? -1 : CB_FD_REPORT, .events = POLLIN},
            {.fd = oom, .events = oom_events},
        };
        if (poll(pf, 5, -1) < 0) {
            if (errno == EINTR) continue;
            PLOG_E("poll");
            s_kill_all(L);
            (void) waitpid(L->child, &L->child_status, 0);
            L->child_done = true;
            break;
        }
        if (pf[1].revents) cb_report_pump();
        if (pf[2].revents) cb_sandbox_on_ready(L->sb);
        if (pf[3].revents) s_on_command(L);
        if (pf[4].revents) cb_sandbox_on_oom(L->sb);
        if (pf[0].revents) s_on_signal(L);
        s_reap(L);
    }
    return 0;
}

static void s_report_exit(s_launcher_t *L) {
    int st = L->child_status;
    bool oom = false;
    const char *reason = L->terminating ? "terminated" : NULL;
    if (L->sb != NULL) cb_sandbox_exit_status(L->sb, &st, &oom, &reason);
    char extra[CB_REPORT_LINE_MAX / 2] = "";
    if (reason != NULL) (void) snprintf(extra, sizeof extra, " reason=%s", reason);
    if (WIFSIGNALED(st)) {
        LOG_I("runner killed by signal %d%s", WTERMSIG(st), oom ? " (out of memory)" : "");
        cb_report_pump();
        (void) cb_report("exit signal=%d oom=%d%s", WTERMSIG(st), oom ? 1 : 0, extra);
    } else {
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 255;
        LOG_I("runner exited with code %d", code);
        cb_report_pump();
        (void) cb_report("exit code=%d oom=%d%s", code, oom ? 1 : 0, extra);
    }
}

/* fd 5: the debugger's channel (docs/RUNNER_PROTOCOL.md section 4), a
 * socket the kernel passes on to the runner as its fd 4.  Without one the
 * slot is held by /dev/null, so that no fd the launcher opens later lands
 * there and is taken for it.  Close-on-exec here: only the runner gets it
 * (cb_child_prepare_fds). */
static bool s_debug_channel(void) {
    struct stat st;
    if (fstat(CB_FD_LAUNCHER_DEBUG, &st) == 0) {
        (void) fcntl(CB_FD_LAUNCHER_DEBUG, F_SETFD, FD_CLOEXEC);
        return S_ISSOCK(st.st_mode);
    }
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fd != CB_FD_LAUNCHER_DEBUG) {
        (void) dup3(fd, CB_FD_LAUNCHER_DEBUG, O_CLOEXEC);
        close(fd);
    }
    return false;
}

static int s_check_fds(void) {
    struct stat st;
    if (fstat(CB_FD_REPORT, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        dprintf(2,
                "cellblock-launcher: fd %d must be the report socket (see "
                "docs/RUNNER_PROTOCOL.md)\n",
                CB_FD_REPORT);
        return -1;
    }
    if (fstat(CB_FD_EVENT, &st) < 0) {
        dprintf(2, "cellblock-launcher: fd %d must be the event socket\n", CB_FD_EVENT);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    /* The kernel's death is a SIGTERM: the launcher tears the sandbox down
     * and removes its cgroup, as on an ordinary shutdown (a SIGKILL would
     * leave the group behind).  init and the runner still die by SIGKILL. */
    pid_t ppid = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != ppid) return EXIT_FATAL;
    (void) signal(SIGPIPE, SIG_IGN);

    static s_launcher_t L;
    L.sfd = L.pump_fd = -1;
    bool debug_channel = s_debug_channel(); /* before any fd of ours is opened */
    char err[CB_REPORT_LINE_MAX / 2];
    int prc = cb_options_parse(argc, argv, &L.opts, err, sizeof err);
    if (prc == 0 && L.opts.help) {
        cb_options_usage(1);
        cb_options_fini(&L.opts);
        return 0;
    }
    if (s_check_fds() < 0) {
        if (prc < 0) dprintf(2, "cellblock-launcher: %s\n", err);
        cb_options_fini(&L.opts);
        return EXIT_USAGE;
    }
    cb_log_set_ident("cellblock-launcher");
    if (cb_report_init(CB_FD_REPORT, &L.pump_fd) < 0) {
        (void) cb_report("fatal cannot set up logging: %s", strerror(errno));
        return EXIT_FATAL;
    }
    if (prc < 0) {
        s_fatal("bad launcher arguments: %s", err);
        cb_options_fini(&L.opts);
        return EXIT_FATAL; /* the contract: a fatal report means exit 3 */
    }
    cb_log_threshold = L.opts.log_level;
    L.opts.debug_channel = debug_channel;

    if ((L.sfd = cb_signalfd_supervision()) < 0) {
        s_fatal("signalfd: %s", strerror(errno));
        return EXIT_FATAL;
    }

    int rc;
    bool stopped = false; /* a SIGTERM ended the start before the runner ran */
    if (L.opts.sandbox == CB_SANDBOX_NONE) {
        LOG_W("--sandbox none: user code runs UNCONFINED, with the kernel's user and files");
        cb_report_pump();
        rc = s_spawn_none(&L);
    } else {
        L.sb = cb_sandbox_new(&L.opts);
        char nerr[CB_REPORT_LINE_MAX / 2];
        if (L.sb != NULL) {
            L.np = cb_netproxy_new(&L.opts, nerr, sizeof nerr);
            if (L.np == NULL && nerr[0] != '\0') {
                s_fatal("%s", nerr);
                cb_sandbox_destroy(&L.sb);
                cb_options_fini(&L.opts);
                return EXIT_FATAL;
            }
            cb_sandbox_set_netproxy(L.sb, L.np);
        }
        rc = L.sb == NULL ? -1 : cb_sandbox_start(L.sb, &L.child);
        if (rc < 0 && cb_sandbox_warm_failed(L.sb)) {
            /* issue 21: a warm start that fails is a cold start, never an error */
            char why[CB_REPORT_LINE_MAX];
            cb_sandbox_error(L.sb, why, sizeof why);
            LOG_W("%s; starting cold", why);
            s_kill_all(&L);
            if (L.child > 0) (void) waitpid(L.child, NULL, 0);
            L.child = -1;
            cb_sandbox_after_start(L.sb); /* retires a template that failed */
            cb_sandbox_destroy(&L.sb);
            L.opts.warm = CB_WARM_OFF;
            L.sb = cb_sandbox_new(&L.opts);
            if (L.sb != NULL) cb_sandbox_set_netproxy(L.sb, L.np);
            rc = L.sb == NULL ? -1 : cb_sandbox_start(L.sb, &L.child);
        }
        if (rc < 0) {
            char why[CB_REPORT_LINE_MAX];
            cb_sandbox_error(L.sb, why, sizeof why);
            stopped = cb_sandbox_stopped(L.sb); /* asked to end before anything ran */
            if (stopped)
                LOG_I("%s", why);
            else
                s_fatal("%s", why);
            if (L.sb != NULL) {
                s_kill_all(&L);
                if (L.child > 0) (void) waitpid(L.child, NULL, 0);
            }
        }
    }
    if (rc == 0) {
        /* groups left by killed kernels and launchers, once the runner is
         * on its way (off the start-up path) */
        if (L.sb != NULL) (void) cb_cgroup_sweep();
        cb_sandbox_after_start(L.sb); /* --warm auto: a template for the next start */
        s_supervise(&L);
        s_kill_all(&L); /* leftovers: background processes of the runner */
        s_report_exit(&L);
    }
    cb_sandbox_destroy(&L.sb);
    cb_netproxy_destroy(&L.np);
    if (L.workdir[0] != '\0' && cb_workdir_remove(L.workdir) < 0)
        LOG_W("could not remove all of %s", L.workdir);
    cb_report_pump();
    cb_options_fini(&L.opts);
    return rc == 0 || stopped ? 0 : EXIT_FATAL;
}
