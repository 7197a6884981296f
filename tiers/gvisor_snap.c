/*
 * gvisor_snap.c - the gvisor tier's supervisor once runsc is started: it
 * turns signals into what runsc needs (SIGINT -> `runsc kill INT`), serves
 * the checkpoint commands init relays to it (docs/SNAPSHOTS.md), and ends
 * as `runsc run|restore` ends.
 *
 *   pause ID (+ the image directory's fd, made by the kernel in its store)
 *       `runsc checkpoint` writes checkpoint.img there (gVisor's memory and
 *       its /tmp; the container stops), then the home (a host tmpfs that
 *       gVisor only binds, so not in runsc's image) is copied beside it;
 *       -> `paused ID`, which the launcher seals before the kernel hears it
 *
 * Restoring is the start's business (gvisor.c): the launcher has verified
 * the image, the home goes back first, then `runsc restore` reads
 * checkpoint.img as its fd 3.  In the runner's slot: no malloc.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/snap_limits.h"
#include "isolate/util.h"
#include "tiers/gvisor_priv.h"
#include "tiers/snap_tree.h"

#define S_RUNSC_FAILED 128 /* runsc's exit code for its own errors */

/* One line to init outside, printable (reasons quote runsc's words). */
static void s_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void s_say(const char *fmt, ...) {
    int ctl = cb_tier_ctl();
    if (ctl < 0) return;
    char line[CB_SNAP_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *c = line; *c; c++)
        if ((unsigned char) *c < 0x20 || (unsigned char) *c == 0x7f) *c = '?';
    if (n > 0) (void) cb_send_with_fd(ctl, line, strlen(line), -1);
}

/* The home (stopped: nothing writes it now) into the image directory. */
static int s_save_home(int dir, char *why, size_t len) {
    cb_snap_tree_t t = {.own = true};
    int live = open(CB_SANDBOX_HOME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int dst = mkdirat(dir, "home", 0700) == 0
                  ? openat(dir, "home", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                  : -1;
    int rc = live >= 0 && dst >= 0 ? cb_snap_tree_copy(&t, live, dst) : -1;
    if (rc < 0) (void) snprintf(why, len, "%s", t.why[0] ? t.why : strerror(errno));
    if (live >= 0) close(live);
    if (dst >= 0) close(dst);
    return rc;
}

int cb_gvisor_restore_home(const cb_gvisor_t *g) {
    cb_snap_tree_t t = {.own = true};
    int saved = openat(g->image_fd, "home", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int live = open(CB_SANDBOX_HOME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = saved >= 0 && live >= 0 ? cb_snap_tree_restore(&t, saved, live) : -1;
    if (saved >= 0) close(saved);
    if (live >= 0) close(live);
    return rc;
}

typedef struct {
    pid_t pid;    /* runsc checkpoint, -1 when none */
    int dir;      /* the image directory */
    char id[CB_IMAGE_ID_HEX + 1]; /* the kernel's id of the image */
    bool waiting; /* for no relay to run in gVisor (and init to hang up the debugger's socket) */
} s_pause_t;

/* runsc checkpoint's stderr, in the supervisor's private dir: it says why it failed */
#define S_CKPT_ERR CB_TIER_STATE "/checkpoint.err"

static void s_pause_run(const cb_gvisor_t *g, int rootless, s_pause_t *p) {
    p->waiting = false;
    int dir = p->dir;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    int err = open(S_CKPT_ERR, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    const int fds[4] = {devnull, devnull, err >= 0 ? err : devnull, dir};
    p->pid = devnull < 0
                 ? -1
                 : cb_tier_spawn(CB_GVISOR_RUNSC, g->ckpt[rootless].argv, g->env.argv, fds, 4);
    if (devnull >= 0) close(devnull);
    if (err >= 0) close(err);
    if (p->pid < 0) {
        s_say("fail 0 runsc checkpoint could not be started: %s", strerror(errno));
        close(dir);
        p->dir = -1;
    }
}

/* Why runsc checkpoint failed, from its stderr: the first line that says
 * (a Go panic's, or one naming an error), else the last one; bounded
 * (s_say makes it printable).  A panic's stack after it is not read. */
static bool s_says_why(const char *l) {
    return strncmp(l, "panic: ", 7) == 0 || strncmp(l, "fatal error: ", 13) == 0 ||
           strstr(l, "error") != NULL || strstr(l, "failed") != NULL;
}

static void s_ckpt_why(char *why, size_t len) {
    char buf[CB_GVISOR_LOG_TAIL];
    why[0] = '\0';
    int fd = open(S_CKPT_ERR, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    if (n <= 0) return;
    buf[n] = '\0';
    const char *pick = NULL, *last = NULL;
    for (char *l = buf, *nl; l != NULL && *l != '\0'; l = nl) {
        nl = strchr(l, '\n');
        if (nl != NULL) *nl++ = '\0';
        if (l[0] == '\0' || l[0] == '\t' || l[0] == ' ') continue;
        last = l;
        if (s_says_why(l)) {
            pick = l;
            break;
        }
    }
    const char *l = pick != NULL ? pick : last != NULL ? last : "";
    (void) snprintf(why, len, "%.*s", (int) (len - 1), l);
}

static void s_pause_end(s_pause_t *p, int st, cb_gvisor_dbg_t *dbg) {
    char why[CB_SNAP_WHY_MAX] = "";
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        s_ckpt_why(why, sizeof why);
        s_say("fail 0 runsc checkpoint failed (%s %d): %s",
              WIFEXITED(st) ? "exit status" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
              why[0] ? why : "it said nothing on stderr");
    } else if (s_save_home(p->dir, why, sizeof why) < 0)
        s_say("fail 0 copying the home into the image: %.120s", why);
    else
        s_say("paused %s", p->id);
    close(p->dir);
    p->pid = -1;
    p->dir = -1;
    /* the sandbox goes on (the checkpoint failed): init dials the debugger's socket again */
    if (dbg->detaching && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
        dbg->detaching = false;
        if (dbg->kfd >= 0 && dbg->conn < 0 && dbg->lfd < 0) (void) cb_gvisor_dbg_listen(dbg);
    }
}

/* Checkpoints in place: each command goes to gVisor's init by a `runsc exec`
 * of the relay (cellblock-init --agent LINE), one at a time; its stdout,
 * the agent's answers a line each, is relayed to init outside. */
typedef struct {
    pid_t pid;                                         /* the relay running, -1 */
    int out;                                           /* its stdout, -1 */
    char buf[CB_SNAP_LINE_MAX * 2];                    /* a partial line of it */
    size_t len;                                        /* bytes in buf */
    char queue[CB_SNAP_AGENT_QUEUE][CB_SNAP_LINE_MAX]; /* commands waiting */
    int queued;                                        /* how many */
} s_relay_t;

static s_relay_t s_relay = {.pid = -1, .out = -1};

static void s_relay_start(const cb_gvisor_t *g, int rootless) {
    s_relay_t *r = &s_relay;
    if (r->pid > 0 || r->queued == 0) return;
    static cb_tier_argv_t argv; /* the prefix and the command: no malloc here */
    argv = g->agent[rootless];
    for (size_t i = 0; i < argv.n; i++)
        argv.argv[i] = argv.buf[i];
    int p[2];
    if (cb_tier_argv_add(&argv, "%s", r->queue[0]) < 0 || pipe2(p, O_CLOEXEC) < 0) {
        s_say("fail 0 the command could not be relayed into gVisor");
    } else {
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        const int fds[3] = {devnull, p[1], devnull};
        r->pid = cb_tier_spawn(CB_GVISOR_RUNSC, argv.argv, g->env.argv, fds, 3);
        close(p[1]);
        if (devnull >= 0) close(devnull);
        if (r->pid < 0) {
            close(p[0]);
            s_say("fail 0 runsc exec could not be started: %s", strerror(errno));
        } else {
            r->out = p[0];
            (void) fcntl(r->out, F_SETFL, O_NONBLOCK);
            r->len = 0;
        }
    }
    memmove(r->queue[0], r->queue[1], sizeof r->queue[0] * (size_t) (--r->queued));
}

static void s_relay_read(void) {
    s_relay_t *r = &s_relay;
    for (;;) {
        ssize_t n = r->out < 0 ? 0 : read(r->out, r->buf + r->len, sizeof r->buf - 1 - r->len);
        if (n <= 0) {
            if (n == 0 && r->out >= 0) close(r->out), r->out = -1;
            return;
        }
        r->len += (size_t) n;
        r->buf[r->len] = '\0';
        char *nl;
        while ((nl = strchr(r->buf, '\n')) != NULL) {
            *nl = '\0';
            /* "debug off" is ours (a pause), not the kernel's */
            if (strcmp(r->buf, "debug off") != 0 && nl != r->buf)
                s_say("%s", r->buf); /* the agent's answers; init relays them on */
            r->len -= (size_t) (nl + 1 - r->buf);
            memmove(r->buf, nl + 1, r->len + 1);
        }
        if (r->len >= sizeof r->buf - 1) r->len = 0; /* an overlong line: dropped */
    }
}

static void s_relay_queue(const cb_gvisor_t *g, int rootless, const char *line);

/* pause ID: runsc checkpoint, once gVisor holds no host socket, which it
 * cannot save: with a debugger's channel, this end stops listening and
 * init hangs up its connection, made or about to be (a just restored
 * sandbox's init dials every 50 ms); and once no `runsc exec` relay runs
 * in gVisor (its stdio are host fds).  The loop starts it then. */
static void s_pause_start(const cb_gvisor_t *g, int rootless, s_pause_t *p, cb_gvisor_dbg_t *dbg,
                          const char *id, int fd) {
    if (p->pid > 0 || p->waiting) {
        s_say("fail 0 a pause is in progress");
        return;
    }
    p->dir = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    (void) snprintf(p->id, sizeof p->id, "%s", id);
    if (p->dir < 0) {
        s_say("fail 0 the image directory: %s", strerror(errno));
        return;
    }
    p->waiting = true;
    if (dbg->kfd < 0) return;
    cb_gvisor_dbg_unlisten(dbg);
    dbg->detaching = true;
    s_relay_queue(g, rootless, "debug off");
}

static void s_command(const cb_gvisor_t *g, int rootless, s_pause_t *p, cb_gvisor_dbg_t *dbg,
                      const char *line, int fd) {
    char id[CB_IMAGE_ID_HEX + 1];
    if (sscanf(line, "pause " CB_IMAGE_ID_SCAN, id) == 1 && fd >= 0) {
        s_pause_start(g, rootless, p, dbg, id, fd);
        return;
    }
    s_relay_queue(g, rootless, line);
}

static void s_relay_queue(const cb_gvisor_t *g, int rootless, const char *line) {
    if (s_relay.queued >= CB_SNAP_AGENT_QUEUE) {
        s_say("fail 0 too many checkpoint commands waiting");
        return;
    }
    (void) snprintf(s_relay.queue[s_relay.queued++], CB_SNAP_LINE_MAX, "%s", line);
    s_relay_start(g, rootless);
}

void cb_gvisor_supervise(const cb_gvisor_t *g, pid_t run, int rootless, cb_gvisor_dbg_t *dbg) {
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    const int quiet[3] = {devnull, devnull, devnull};
    sigset_t all;
    sigfillset(&all);
    int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    int ctl = cb_tier_ctl();
    s_pause_t pause = {-1, -1, "", false};
    s_say("pausable");
    s_say("ready %d", CB_SNAP_MAX); /* gVisor's init is the agent: the relay reaches it */
    for (;;) {
        struct pollfd pf[3 + CB_GVISOR_DBG_NPOLL] = {{.fd = sfd, .events = POLLIN},
                                                     {.fd = ctl, .events = POLLIN},
                                                     {.fd = s_relay.out, .events = POLLIN}};
        cb_gvisor_dbg_events(dbg, pf + 3);
        if (poll(pf, 3 + CB_GVISOR_DBG_NPOLL, -1) < 0) continue;
        cb_gvisor_dbg_step(dbg, pf + 3);
        if (pf[2].revents) s_relay_read();
        if (pf[1].revents & POLLIN) {
            char line[CB_SNAP_LINE_MAX];
            int fd, r = cb_recv_line_with_fd(ctl, line, sizeof line, &fd);
            if (r > 0) s_command(g, rootless, &pause, dbg, line, fd);
            if (fd >= 0) close(fd);
            if (r == 0) ctl = -1; /* init is gone: so are we, soon */
        }
        struct signalfd_siginfo si;
        bool chld = false;
        while (sfd >= 0 && read(sfd, &si, sizeof si) == (ssize_t) sizeof si) {
            if (si.ssi_signo == SIGINT) /* gVisor's processes are not host processes: ask runsc */
                (void) cb_tier_spawn(CB_GVISOR_RUNSC, g->kill[rootless].argv, g->env.argv, quiet,
                                     3);
            else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP)
                (void) kill(run, SIGKILL); /* the sandbox process dies with it (--attached) */
            else if (si.ssi_signo == SIGCHLD)
                chld = true;
        }
        for (; chld;) {
            int st;
            pid_t p = waitpid(-1, &st, WNOHANG);
            if (p <= 0) break;
            if (p == pause.pid) s_pause_end(&pause, st, dbg);
            if (p == s_relay.pid) { /* the relay is done: its last words, then the next */
                s_relay_read();
                if (s_relay.out >= 0) close(s_relay.out), s_relay.out = -1;
                s_relay.pid = -1;
                s_relay_start(g, rootless);
            }
            if (p != run) continue;
            int pst; /* the container stopped for a checkpoint: finish that first */
            if (pause.pid > 0 && waitpid(pause.pid, &pst, 0) == pause.pid)
                s_pause_end(&pause, pst, dbg);
            /* runsc run exits with the container's status; cellblock-init
             * turns a signal death into 128+N */
            if (WIFEXITED(st) && WEXITSTATUS(st) == S_RUNSC_FAILED) cb_gvisor_log_tail(2);
            if (WIFEXITED(st) && WEXITSTATUS(st) > 128 && WEXITSTATUS(st) < 128 + NSIG)
                st = WEXITSTATUS(st) - 128; /* a wait status "killed by signal N" */
            cb_tier_exit_like(st);
        }
        /* no relay in gVisor (init hung up, if asked): the checkpoint now */
        if (pause.waiting && s_relay.pid < 0 && s_relay.queued == 0)
            s_pause_run(g, rootless, &pause);
    }
}
