/*
 * init_gvisor.c - cellblock-init as pid 1 inside gVisor (tiers/gvisor.c),
 * and as the one-shot relay of a checkpoint command into it.
 *
 *   cellblock-init --gvisor SECCOMP_BPF UID GID [--debug-socket PATH] -- PROGRAM ARGS...
 *       root in gVisor (gVisor's own root: the host sees runsc's processes),
 *       with only the capabilities it needs to be the trusted agent of
 *       checkpoints in place (tiers/snap_agent.c; docs/SNAPSHOTS.md): its
 *       store is a root-only tmpfs of gVisor's (CB_SNAP_AGENT_RUN), the park
 *       fifos are root's and only readable by the runner.  It moves fd 0
 *       (the event socket runsc donated) to fd 3, starts PROGRAM as UID/GID
 *       with no capability left, no_new_privs and the namespaces tier's
 *       seccomp allowlist, forwards signals to it (runsc kill INT arrives
 *       here), reaps, serves the agent's socket, and exits with the runner's
 *       status (128+N for a signal death).  With --debug-socket, PATH (the
 *       supervisor's listener, bound in) is dialled and init copies between
 *       it and the runner's fd 4, the debugger's channel (see below).
 *
 *   cellblock-init --agent LINE
 *       run by the supervisor with `runsc exec` (root in the container): hands
 *       LINE to pid 1's agent socket and prints its answers, one per line,
 *       until the one that ends LINE's command; the rollback spares it (its
 *       pid comes with the connection).  A connection per command keeps no
 *       host socket in gVisor, so runsc can checkpoint the sandbox whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "tiers/init_priv.h"
#include "tiers/snap_agent.h"
#include "tiers/splice.h"
#include "tiers/tier_limits.h"

#define S_CAP_LAST     63 /* bounding-set drops go up to this (EINVAL beyond the kernel's) */
#define S_AGENT_WAIT_S 20 /* the relay gives up on an answer after this */
#define S_REDIAL_MS    50 /* the debugger's socket is dialled again this often, once hung up */

/* ---- the agent's clients ------------------------------------------------------------- */

static int s_client = -1;                                   /* connected relay, -1 */
static char s_queue[CB_SNAP_AGENT_QUEUE][CB_SNAP_LINE_MAX]; /* lines for the next one */
static int s_queued;                                        /* used */

static void s_say(void *ud, const char *line) {
    (void) ud;
    if (s_client >= 0 && send(s_client, line, strlen(line), MSG_NOSIGNAL) >= 0) return;
    if (s_queued < CB_SNAP_AGENT_QUEUE)
        (void) snprintf(s_queue[s_queued++], CB_SNAP_LINE_MAX, "%s", line);
}

static void s_accept(int lfd, cb_snap_agent_t *a) {
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;
    if (s_client >= 0) close(s_client); /* one relay at a time: the newest */
    s_client = c;
    struct ucred cred;
    socklen_t cl = sizeof cred;
    a->keep = getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 ? cred.pid : 0;
    for (int i = 0; i < s_queued; i++)
        (void) send(s_client, s_queue[i], strlen(s_queue[i]), MSG_NOSIGNAL);
    s_queued = 0;
}

static int s_listen(void) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    (void) snprintf(sa.sun_path, sizeof sa.sun_path, "%s", CB_SNAP_AGENT_SOCK);
    (void) unlink(CB_SNAP_AGENT_SOCK);
    if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 ||
        chmod(CB_SNAP_AGENT_SOCK, 0600) < 0 || listen(fd, 2) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* ---- pid 1 ------------------------------------------------------------------------------- */

/* Reads a classic-BPF seccomp program (the launcher's export) into prog. */
static int s_load_bpf(const char *path, struct sock_fprog *prog) {
    static struct sock_filter insns[CB_TIER_BPF_MAX / sizeof(struct sock_filter)];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t off = 0;
    for (;;) {
        ssize_t r = read(fd, (char *) insns + off, sizeof insns - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        off += (size_t) r;
    }
    close(fd);
    if (off == 0 || off % sizeof insns[0] != 0 || off >= sizeof insns) {
        errno = EINVAL;
        return -1;
    }
    prog->len = (unsigned short) (off / sizeof insns[0]);
    prog->filter = insns;
    return 0;
}

/* ---- the debugger's channel ---------------------------------------------------------------
 * The runner's fd CB_FD_DEBUG is one end of a socketpair inside gVisor; init
 * copies between the other end and its connection to the supervisor's socket
 * (bound in), a host socket, which runsc checkpoint cannot save: before a
 * pause the supervisor has init hang up ("debug off"), and init dials again
 * every S_REDIAL_MS until a listener answers (the restored sandbox's
 * supervisor, or this one after a failed pause).  Parked copies share the
 * socketpair's end with the runner, so a rollback keeps the channel. */

typedef struct {
    struct sockaddr_un addr; /* the supervisor's socket */
    int pair;                /* our end of the runner's socketpair, -1 none */
    int host;                /* the connection to the supervisor, -1 none */
    bool redial;             /* hung up for a pause: dial again */
    cb_splice_t splice;      /* pair <-> host */
} s_dbg_t;

static s_dbg_t s_dbg = {.pair = -1, .host = -1};

static int s_debug_dial(s_dbg_t *d) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *) &d->addr, sizeof d->addr) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* At the start, before any other fd of init's is made: the socketpair (the
 * runner's end on CB_FD_DEBUG) and the connection.  -1: the runner runs
 * without a debugger. */
static int s_debug_open(s_dbg_t *d, const char *path) {
    int sp[2];
    if (strlen(path) >= sizeof d->addr.sun_path) return -1;
    d->addr.sun_family = AF_UNIX;
    memcpy(d->addr.sun_path, path, strlen(path) + 1);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) return -1;
    for (int k = 0; k < 2; k++) { /* above CB_FD_DEBUG, which the runner's end takes */
        int moved = sp[k] > CB_FD_DEBUG ? sp[k] : fcntl(sp[k], F_DUPFD_CLOEXEC, CB_FD_DEBUG + 1);
        if (moved != sp[k]) close(sp[k]);
        sp[k] = moved;
    }
    if (sp[0] < 0 || sp[1] < 0) {
        if (sp[0] >= 0) close(sp[0]);
        if (sp[1] >= 0) close(sp[1]);
        return -1;
    }
    /* CB_FD_DEBUG taken before the dial, whose socket would otherwise get it */
    if (dup2(sp[1], CB_FD_DEBUG) < 0 || (d->host = s_debug_dial(d)) < 0 ||
        fcntl(sp[0], F_SETFL, O_NONBLOCK) < 0) {
        dprintf(2, "cellblock-init: the debugger's socket %s: %s\n", path, strerror(errno));
        if (d->host >= 0) close(d->host);
        close(sp[0]);
        close(sp[1]);
        (void) close(CB_FD_DEBUG);
        d->host = -1;
        return -1;
    }
    close(sp[1]);
    d->pair = sp[0];
    return 0;
}

static void s_debug_close(s_dbg_t *d) {
    if (d->host >= 0) close(d->host);
    if (d->pair >= 0) close(d->pair);
    d->host = d->pair = -1;
    d->redial = false;
    cb_splice_clear(&d->splice);
}

/* "debug off": hang up the host socket, keep the runner's end */
static void s_debug_off(s_dbg_t *d) {
    if (d->host >= 0) close(d->host);
    d->host = -1;
    d->redial = d->pair >= 0;
    cb_splice_clear(&d->splice);
    s_say(NULL, "debug off");
}

/* After poll: bytes moved, an end that closed ends the channel; a redial
 * when it is due. */
static void s_debug_step(s_dbg_t *d, const struct pollfd pf[2]) {
    if (d->host >= 0 && !cb_splice_step(&d->splice, d->pair, d->host, pf)) s_debug_close(d);
    if (d->redial && d->host < 0 && (d->host = s_debug_dial(d)) >= 0) d->redial = false;
}

__attribute__((noreturn)) static void s_runner(char **argv, uid_t uid, gid_t gid,
                                               struct sock_fprog *prog) {
    cb_init_child_signals();
    (void) setsid();
    for (int cap = 0; cap <= S_CAP_LAST; cap++) /* none of init's capabilities survive */
        (void) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    /* (ambient: gVisor may not know the call; leaving root empties it anyway, with the
     * permitted set) */
    (void) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) < 0) {
        dprintf(2, "cellblock-init: dropping to the runner's ids and filter: %s\n",
                strerror(errno));
        _exit(125);
    }
    execv(argv[0], argv);
    dprintf(2, "cellblock-init: execv %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

int cb_init_gvisor(int argc, char **argv) {
    int i = 5;
    const char *dbg_path = NULL;
    if (i + 1 < argc && strcmp(argv[i], "--debug-socket") == 0) {
        dbg_path = argv[i + 1];
        i += 2;
    }
    if (i < argc && strcmp(argv[i], "--") == 0) i++;
    char *end1, *end2;
    unsigned long uid = argc > 4 ? strtoul(argv[3], &end1, 10) : 0;
    unsigned long gid = argc > 4 ? strtoul(argv[4], &end2, 10) : 0;
    if (i >= argc || uid == 0 || gid == 0 || *end1 || *end2) {
        dprintf(2, "usage: cellblock-init --gvisor SECCOMP_BPF UID GID [--debug-socket PATH] -- "
                   "PROGRAM ARGS...\n");
        return 2;
    }
    struct sock_fprog prog;
    if (s_load_bpf(argv[2], &prog) < 0) {
        dprintf(2, "cellblock-init: seccomp program %s: %s\n", argv[2], strerror(errno));
        return 125;
    }
    if (dup2(0, CB_FD_EVENT) < 0) return 125;
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0) return 125;
    close(null);
    bool debug = dbg_path != NULL && s_debug_open(&s_dbg, dbg_path) == 0;
    /* the agent's store, park directory and socket, before the runner exists */
    (void) mkdir(CB_SNAP_AGENT_STORE, 0700);
    int store = open(CB_SNAP_AGENT_STORE, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int park = open(CB_SNAP_PARK_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int lfd = s_listen();
    if (lfd < 0) { /* no checkpoints, and no fd of the store in /proc/1/fd (below) */
        if (store >= 0) close(store);
        if (park >= 0) close(park);
        store = park = -1;
    }
    sigset_t all;
    sigfillset(&all);
    (void) sigprocmask(SIG_SETMASK, &all, NULL);
    pid_t child = fork();
    if (child < 0) return 125;
    if (child == 0) s_runner(argv + i, (uid_t) uid, (gid_t) gid, &prog);
    close(CB_FD_EVENT); /* the runner holds it; its EOF must follow the runner's exit */
    if (debug) close(CB_FD_DEBUG);
    static cb_snap_agent_t agent;
    cb_snap_agent_init(&agent, store, park, CB_SANDBOX_HOME, "/tmp", child, true,
                       lfd < 0 ? "the agent's socket could not be made" : NULL, s_say, NULL);
    /* gVisor lists /proc/1/fd to any uid (its procfs: fd directories 0555, no
     * dumpability for them): between commands the store is only a path under
     * the root-only CB_SNAP_AGENT_RUN, never an fd of ours */
    cb_snap_agent_store_by_path(&agent, CB_SNAP_AGENT_STORE);
    int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    for (;;) {
        struct pollfd pf[5] = {{.fd = sfd, .events = POLLIN},
                               {.fd = lfd, .events = POLLIN},
                               {.fd = s_client, .events = POLLIN}};
        cb_splice_events(&s_dbg.splice, s_dbg.pair, s_dbg.host, pf + 3);
        int wait = cb_snap_agent_wait_ms(&agent);
        if (s_dbg.redial && (wait < 0 || wait > S_REDIAL_MS)) wait = S_REDIAL_MS;
        (void) poll(pf, 5, wait);
        cb_snap_agent_tick(&agent);
        s_debug_step(&s_dbg, pf + 3);
        if (pf[1].revents & POLLIN) s_accept(lfd, &agent);
        if (s_client >= 0 && (pf[2].revents & (POLLIN | POLLHUP))) {
            char line[CB_SNAP_LINE_MAX];
            ssize_t r = recv(s_client, line, sizeof line - 1, MSG_DONTWAIT);
            if (r > 0) {
                line[r] = '\0';
                if (strcmp(line, "debug off") == 0) /* the supervisor's, before a pause */
                    s_debug_off(&s_dbg);
                else
                    cb_snap_agent_command(&agent, line);
            } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                close(s_client);
                s_client = -1;
                agent.keep = 0;
            }
        }
        struct signalfd_siginfo si;
        bool chld = false;
        while (sfd >= 0 && read(sfd, &si, sizeof si) == (ssize_t) sizeof si) {
            if (si.ssi_signo == SIGCHLD)
                chld = true;
            else
                (void) kill(agent.runner, (int) si.ssi_signo); /* runsc kill INT, TERM, ... */
        }
        for (; chld;) {
            int st;
            pid_t p = waitpid(-1, &st, WNOHANG | WUNTRACED);
            if (p <= 0) break;
            if (cb_snap_agent_child(&agent, p, st)) continue;
            if (p != agent.runner || (!WIFEXITED(st) && !WIFSIGNALED(st))) continue;
            cb_snap_agent_end(&agent);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    }
}

/* ---- the relay ------------------------------------------------------------------------------ */

/* Whether line (an answer) ends the command cmd ("arm", "roll", "drop"). */
static bool s_final(const char *cmd, const char *line) {
    if (strncmp(line, "fail ", 5) == 0 || strncmp(line, "refused ", 8) == 0) return true;
    if (strcmp(cmd, "arm") == 0) /* after "armed": the fork parked, or never did */
        return strncmp(line, "saved ", 6) == 0 || strncmp(line, "lost ", 5) == 0;
    if (strcmp(cmd, "roll") == 0) return strncmp(line, "rolled ", 7) == 0;
    if (strcmp(cmd, "debug") == 0) return strncmp(line, "debug ", 6) == 0;
    return strncmp(line, "dropped ", 8) == 0;
}

int cb_init_agent_client(const char *cmdline) {
    char cmd[16] = "";
    if (sscanf(cmdline, "%15s", cmd) != 1) return 2;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    (void) snprintf(sa.sun_path, sizeof sa.sun_path, "%s", CB_SNAP_AGENT_SOCK);
    if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0 ||
        send(fd, cmdline, strlen(cmdline), MSG_NOSIGNAL) < 0) {
        printf("fail 0 the sandbox's checkpoint agent is not reachable: %s\n", strerror(errno));
        return 1;
    }
    alarm(S_AGENT_WAIT_S);
    for (;;) {
        char line[CB_SNAP_LINE_MAX];
        ssize_t r = recv(fd, line, sizeof line - 1, 0);
        if (r <= 0) {
            printf("fail 0 the sandbox's checkpoint agent did not answer\n");
            return 1;
        }
        line[r] = '\0';
        printf("%s\n", line);
        (void) fflush(stdout);
        if (s_final(cmd, line)) return 0;
    }
}
