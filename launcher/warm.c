/*
 * warm.c - the launcher's side of a warm start (see warm.h).
 *
 *   plan ──▶ cb_warm_new: eligible?  key of the configuration, connect to
 *            CB_WARM_DIR/<key>.sock, check that root answers
 *   clone ─▶ init closes our fds, keeps its handshake socket (SO_PASSCRED)
 *   maps ──▶ cb_warm_send: the request, with the runner's fds 0-3, init's
 *            net, user, ipc, uts and pid namespaces, the cgroup.procs files,
 *            the error pipe: the fork into the pid namespace happens while
 *            init builds the file system
 *   workdir ▶ cb_warm_send_fs: init's mount and cgroup namespaces, as built
 *   ... ───▶ cb_warm_wait: the template's reply (the serving fork's pid),
 *            then EOF on the error pipe (or the failing step)
 *
 * The key hashes everything a template's memory depends on: the launcher's
 * euid, the interpreter (path and file identity), its flags and the
 * runner's whole environment (so --env values and PYTHON* flags are part of
 * it), the runner's files, the shared object and this launcher's build, the
 * --preload set and the ids inside.  Two kernels share a template only when
 * all of these are equal; anything that changes them makes another key,
 * hence another template (the old one idles out).  Changes the key cannot
 * see (a package upgraded below the interpreter) are the template's to
 * notice (inotify, runner/cb_warm.py): it then refuses and exits.
 */
#include "launcher/warm.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/util.h"
#include "isolate/warm_enter.h"
#include "isolate/warm_proto.h"
#include "launcher/report.h"
#include "launcher/sandbox_priv.h"
#include "launcher/warm_limits.h"
#include "launcher/warm_trust.h"

_Static_assert(RLIM_NLIMITS <= CB_WARM_RLIMITS_ALL, "CB_WARM_RLIMITS_ALL below RLIM_NLIMITS");
_Static_assert(CB_WARM_FDS_MAX <= CB_SCM_FDS_MAX, "a request's fds fit one message");

struct cb_warm {
    bool on;                          /* this start goes to the template */
    bool missing;                     /* none answered: --warm auto starts one afterwards */
    bool failed;                      /* the attempt failed after clone */
    bool retire;                      /* the template itself failed: retire it */
    bool died;                        /* the last template died (killed, failed): warn */
    int stopped;                      /* SIGTERM/SIGHUP during --warm wait: no start, 0 */
    char why[CB_REPORT_LINE_MAX / 2]; /* why cold, or how the attempt failed */
    char key[CB_WARM_KEY_LEN + 1];    /* the configuration's key */
    char so[CB_PATH_MAX];             /* libcellblock-warm.so next to the launcher */
    int sock;                         /* connection to the template, -1 */
    int err[2];                       /* error pipe: [0] ours, [1] the serving fork's */
    int init[2];                      /* handshake: [0] init's (SO_PASSCRED), [1] the fork's */
    int server;                       /* pidfd of the fork serving the request, -1 */
};

static void s_why(cb_warm_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_why(cb_warm_t *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void) vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
}

static void s_close(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* ---- the key ------------------------------------------------------------------ */

static void s_hash_str(crypto_generichash_state *h, const char *s) {
    (void) crypto_generichash_update(h, (const unsigned char *) s, strlen(s) + 1);
}

static void s_hash_stat(crypto_generichash_state *h, const char *path) {
    struct stat st;
    memset(&st, 0, sizeof st);
    (void) stat(path, &st);
    const unsigned long long v[] = {st.st_dev,
                                    st.st_ino,
                                    (unsigned long long) st.st_size,
                                    (unsigned long long) st.st_mtim.tv_sec,
                                    (unsigned long long) st.st_mtim.tv_nsec,
                                    st.st_mode};
    s_hash_str(h, path);
    (void) crypto_generichash_update(h, (const unsigned char *) v, sizeof v);
}

/* The runner's directory as the sandbox gets it (launcher: copied, two levels). */
static void s_hash_dir(crypto_generichash_state *h, const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[CB_PATH_MAX];
        int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (n < 0 || (size_t) n >= sizeof path) continue;
        s_hash_stat(h, path);
        if (e->d_type == DT_DIR && depth > 0) s_hash_dir(h, path, depth - 1);
    }
    closedir(d);
}

static void s_key(const cb_sandbox_t *sb, const char *so, char *out, size_t len) {
    crypto_generichash_state h;
    unsigned char d[CB_WARM_KEY_BYTES];
    char tmp[CB_PATH_MAX], real[CB_PATH_MAX];
    (void) crypto_generichash_init(&h, NULL, 0, sizeof d);
    (void) snprintf(tmp, sizeof tmp, "cellblock-warm %u %lu %lu %lu", CB_WARM_VERSION,
                    (unsigned long) geteuid(), (unsigned long) sb->uid, (unsigned long) sb->gid);
    s_hash_str(&h, tmp);
    s_hash_str(&h, sb->opts->python);
    if (realpath(sb->opts->python, real) != NULL) s_hash_stat(&h, real);
    for (char *const *a = sb->exec.argv + 1; *a != NULL; a++)
        s_hash_str(&h, *a);
    for (char *const *e = sb->exec.envp; *e != NULL; e++)
        s_hash_str(&h, *e);
    (void) snprintf(tmp, sizeof tmp, "%s", sb->opts->runner);
    s_hash_dir(&h, dirname(tmp), CB_WARM_KEY_DEPTH);
    s_hash_stat(&h, so);
    s_hash_stat(&h, "/proc/self/exe");
    s_hash_str(&h, sb->opts->preload != NULL ? sb->opts->preload : "");
    (void) crypto_generichash_final(&h, d, sizeof d);
    (void) sodium_bin2hex(out, len, d, sizeof d);
}

/* ---- the template's socket ------------------------------------------------------- */

/* CB_WARM_DIR exists, is a directory of ours and nobody else's.  0 or -1 (why). */
static int s_dir(cb_warm_t *w) {
    (void) mkdir(CB_WARM_DIR_PARENT, CB_WARM_DIR_MODE);
    if (mkdir(CB_WARM_DIR, CB_WARM_DIR_MODE) < 0 && errno != EEXIST) {
        s_why(w, "cannot create %s: %s", CB_WARM_DIR, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(CB_WARM_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077) != 0) {
        s_why(w, "%s is not a directory of this user's alone (mode 0700)", CB_WARM_DIR);
        return -1;
    }
    return 0;
}

/* Connects to the template of `key`; -1 with errno (ENOENT, ECONNREFUSED:
 * there is none; EPERM: something else answers). */
static int s_connect(const char *key) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s.sock", CB_WARM_DIR, key);
    if (n < 0 || (size_t) n >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct ucred uc;
    socklen_t ul = sizeof uc;
    if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0 || uc.uid != geteuid()) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* Eligible for a warm start?  NULL yes, else why not. */
static const char *s_refused(const cb_sandbox_t *sb) {
    const cb_options_t *o = sb->opts;
    if (o->warm == CB_WARM_OFF) return "--warm off";
    if (sb->tier != NULL)
        return "--isolation gvisor/microvm: a template's fork cannot enter that tier";
    if (!sb->root)
        return "the kernel does not run as root (a template needs a filesystem view of its own "
               "and must still be able to enter the sandboxes' user namespaces)";
    if (!sb->userns) return "no user namespace on this host";
    if (sb->np != NULL) return "--network allow: the egress proxy's sandboxes start cold";
    return NULL;
}

static void s_so_path(char *buf, size_t len) {
    char exe[CB_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    (void) snprintf(buf, len, "%s/%s", dirname(exe), CB_WARM_SO_NAME);
}

cb_warm_t *cb_warm_new(cb_sandbox_t *sb) {
    cb_warm_t *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->sock = w->server = -1;
    w->err[0] = w->err[1] = w->init[0] = w->init[1] = -1;
    const char *no = s_refused(sb);
    if (no != NULL) {
        s_why(w, "%s", no);
        return w;
    }
    char why[CB_REPORT_LINE_MAX / 4];
    if (cb_warm_tree_trusted(sb->opts->python, sb->opts->runner, why, sizeof why) < 0) {
        s_why(w,
              "a template would run the interpreter's tree as this user on the host, and "
              "someone else can change it: %s",
              why);
        return w;
    }
    s_so_path(w->so, sizeof w->so);
    if (access(w->so, R_OK) < 0) {
        s_why(w, "%s: %s", w->so, strerror(errno));
        return w;
    }
    if (s_dir(w) < 0) return w;
    s_key(sb, w->so, w->key, sizeof w->key);
    w->sock = s_connect(w->key);
    if (w->sock < 0 && cb_warm_failed_lately(w->key)) {
        s_why(w,
              "the last build of this configuration's template failed less than %d s ago "
              "(%s/%s.log)",
              CB_WARM_RETRY_S, CB_WARM_DIR, w->key);
        return w;
    }
    if (w->sock < 0 && sb->opts->warm == CB_WARM_WAIT) {
        if (!cb_warm_busy(w->key)) cb_warm_spawn(w->key, w->so, sb);
        /* the kernel's deadline for the runner's hello waits for this too */
        (void) cb_report("waiting %d", CB_WARM_WAIT_MS);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = CB_WARM_WAIT_POLL_MS * 1000000L};
        for (int64_t until = cb_now_ms() + CB_WARM_WAIT_MS; w->sock < 0 && cb_now_ms() < until;) {
            /* the signalfd is read only once the sandbox runs: a kernel shut
             * down (or dead) meanwhile must not wait for the build, which goes
             * on for the next start */
            if ((w->stopped = cb_stop_pending()) != 0) {
                s_why(w, "signal %d while waiting for the template's first build: not starting",
                      w->stopped);
                return w;
            }
            (void) nanosleep(&ts, NULL);
            w->sock = s_connect(w->key);
            if (w->sock < 0 && !cb_warm_busy(w->key)) break; /* its build failed */
        }
    }
    if (w->sock < 0) {
        w->missing = errno == ENOENT || errno == ECONNREFUSED;
        const char *now = w->missing ? "one is being started" : strerror(errno);
        char last[CB_WARM_ENDED_MAX];
        if (cb_warm_last_end(w->key, last, sizeof last) == 0) {
            w->died = strncmp(last, "died:", 5) == 0;
            s_why(w, "no template for this configuration (the last one %s; %s/%s.log): %s", last,
                  CB_WARM_DIR, w->key, now);
        } else {
            s_why(w, "no template for this configuration yet (%s)", now);
        }
        return w;
    }
    w->on = true;
    return w;
}

bool cb_warm_on(const cb_warm_t *w) { return w != NULL && w->on; }

const char *cb_warm_why(const cb_warm_t *w) { return w == NULL ? "out of memory" : w->why; }

bool cb_warm_failed(const cb_warm_t *w) { return w != NULL && w->failed; }

bool cb_warm_died(const cb_warm_t *w) { return w != NULL && w->died; }

bool cb_warm_stopped(const cb_warm_t *w) { return w != NULL && w->stopped != 0; }

/* ---- around clone ------------------------------------------------------------------ */

int cb_warm_prepare(cb_warm_t *w) {
    int one = 1;
    if (pipe2(w->err, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, w->init) < 0 ||
        setsockopt(w->init[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0) {
        s_why(w, "warm start: pipe/socketpair: %s", strerror(errno));
        w->on = false;
        return -1;
    }
    return 0;
}

int cb_warm_in_init(const cb_warm_t *w) {
    if (w == NULL || !w->on) return -1;
    int fds[] = {w->sock, w->err[0], w->err[1], w->init[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0) close(fds[i]);
    return w->init[0];
}

void cb_warm_after_clone(cb_warm_t *w) {
    if (w != NULL && w->on) s_close(&w->init[0]);
}

/* ---- the request --------------------------------------------------------------------- */

static int s_launcher_attrs(cb_warm_req_t *q) {
    mode_t m = umask(0);
    (void) umask(m);
    q->umask = (uint32_t) m;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (nice == -1 && errno != 0) return -1;
    q->nice = nice;
    char buf[CB_WARM_FILE_MAX] = "";
    cb_autofd int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (n <= 0) return -1;
    buf[n] = '\0';
    q->oom_score_adj = atoi(buf);
    q->n_limits = RLIM_NLIMITS;
    for (int i = 0; i < RLIM_NLIMITS; i++)
        if (getrlimit(i, &q->limits[i]) < 0) return -1;
    return sched_getaffinity(0, sizeof q->affinity, &q->affinity);
}

static int s_open_ns(pid_t init, const char *name) {
    char path[CB_PROC_PATH_MAX];
    (void) snprintf(path, sizeof path, "/proc/%ld/ns/%s", (long) init, name);
    return open(path, O_RDONLY | O_CLOEXEC);
}

int cb_warm_send(cb_warm_t *w, const cb_sandbox_t *sb, pid_t init) {
    static const char *const ns[] = {"net", "user", "ipc", "uts", "pid"};
    _Static_assert(sizeof ns / sizeof ns[0] == CB_WARM_FD_FIXED - CB_WARM_FD_NET, "ns fds");
    size_t len = sizeof(cb_warm_req_t);
    cb_autofree cb_warm_req_t *q = calloc(1, len);
    int fds[CB_WARM_FDS_MAX];
    size_t n = 0;
    int rc = -1;
    if (q == NULL) {
        s_why(w, "out of memory");
        goto out;
    }
    q->magic = CB_WARM_MAGIC;
    q->version = CB_WARM_VERSION;
    q->header_size = sizeof *q;
    (void) snprintf(q->key, sizeof q->key, "%s", w->key);
    q->clear_groups = sb->root;
    q->uid = sb->uid;
    q->gid = sb->gid;
    q->last_cap = sb->last_cap;
    q->landlock_abi = sb->landlock_abi;
    q->rlimits = sb->rlimits;
    q->init_pid = init;
    if (s_launcher_attrs(q) < 0) {
        s_why(w, "reading the launcher's own limits: %s", strerror(errno));
        goto out;
    }
    fds[n++] = w->err[1];
    fds[n++] = w->init[1];
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        if ((fds[n] = s_open_ns(sb->init, ns[i])) < 0) {
            s_why(w, "/proc/%ld/ns/%s: %s", (long) sb->init, ns[i], strerror(errno));
            goto out;
        }
        n++;
    }
    /* the runner's fds: the launcher's own 0..3, as a cold runner inherits
     * them, and the debugger's channel as its fd 4 (cb_child_prepare_fds) */
    q->n_runner_fds = CB_FD_EVENT + 1;
    for (int fd = 0; fd <= CB_FD_EVENT; fd++)
        fds[n++] = fd;
    if (sb->opts->debug_channel) {
        _Static_assert(CB_FD_DEBUG == CB_FD_EVENT + 1, "the debugger's fd follows the event fd");
        fds[n++] = CB_FD_LAUNCHER_DEBUG;
        q->n_runner_fds++;
    }
    if (sb->cg != NULL) {
        int k = cb_cgroup_procs_fds(sb->cg, fds + n, CB_WARM_CGROUP_FDS);
        if (k < 0) {
            s_why(w, "opening the sandbox's cgroup.procs: %s", strerror(errno));
            goto out;
        }
        q->n_cgroup_fds = (uint32_t) k;
        n += (size_t) k;
    }
    if (cb_send_with_fds(w->sock, q, len, fds, n) < 0) {
        s_why(w, "sending the request to the template: %s", strerror(errno));
        w->retire = true;
        goto out;
    }
    rc = 0;
out:
    /* ours only: the ns and cgroup fds, and the fork's ends of the pipes */
    for (size_t i = CB_WARM_FD_NET; i < n; i++)
        if (i < CB_WARM_FD_FIXED || i >= CB_WARM_FD_FIXED + q->n_runner_fds) close(fds[i]);
    s_close(&w->err[1]);
    s_close(&w->init[1]);
    if (rc < 0) w->failed = true;
    return rc;
}

int cb_warm_send_fs(cb_warm_t *w, const cb_sandbox_t *sb) {
    static const char *const ns[CB_WARM_FS_FDS] = {
        [CB_WARM_FS_MNT] = "mnt", [CB_WARM_FS_CGROUP] = "cgroup"};
    int fds[CB_WARM_FS_FDS] = {-1, -1}, rc = -1;
    size_t n = sb->filter.prog.len;
    if (n == 0 || n > CB_WARM_FILTER_MAX) {
        s_why(w, "the seccomp filter (%zu instructions) does not fit a request", n);
        w->failed = true;
        return -1;
    }
    size_t len = sizeof(cb_warm_fs_t) + n * sizeof(struct sock_filter);
    cb_autofree cb_warm_fs_t *m = calloc(1, len);
    if (m == NULL) {
        s_why(w, "out of memory");
        w->failed = true;
        return -1;
    }
    m->magic = CB_WARM_FS_MAGIC;
    m->filter_len = (uint32_t) n;
    memcpy(m + 1, sb->filter.prog.filter, n * sizeof(struct sock_filter));
    for (size_t i = 0; i < CB_WARM_FS_FDS; i++)
        if ((fds[i] = s_open_ns(sb->init, ns[i])) < 0) {
            s_why(w, "/proc/%ld/ns/%s: %s", (long) sb->init, ns[i], strerror(errno));
            goto out;
        }
    if (cb_send_with_fds(w->sock, m, len, fds, CB_WARM_FS_FDS) < 0) {
        s_why(w, "sending the file system's namespaces: %s", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    for (size_t i = 0; i < CB_WARM_FS_FDS; i++)
        if (fds[i] >= 0) close(fds[i]);
    if (rc < 0) w->failed = true;
    return rc;
}

/* ---- the outcome --------------------------------------------------------------------- */

static int s_poll_in(int fd, int ms) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&pf, 1, ms);
    while (r < 0 && errno == EINTR);
    if (r == 0) errno = ETIMEDOUT;
    return r > 0 ? 0 : -1;
}

static const char *const s_stages[CB_WARM_STAGE_COUNT] = {
    [CB_WARM_STAGE_REQUEST] = "reading the request",
    [CB_WARM_STAGE_ATTRS] = "taking the launcher's limits and attributes",
    [CB_WARM_STAGE_CGROUP] = "joining the sandbox's cgroup",
    [CB_WARM_STAGE_SETNS] = "joining the sandbox's namespaces",
    [CB_WARM_STAGE_FORK] = "forking into the pid namespace",
    [CB_WARM_STAGE_ADOPT] = "waiting for the sandbox's init to adopt the runner",
    [CB_WARM_STAGE_HANDSHAKE] = "telling init the runner's pid",
    [CB_WARM_STAGE_FDS] = "setting up the runner's fds",
    [CB_WARM_STAGE_PYTHON] = "the runner's last steps (cb_warm.py)",
};

static const char *s_stage(const cb_child_err_t *e) {
    return e->step == CB_STEP_WARM && e->arg >= 0 && e->arg < CB_WARM_STAGE_COUNT
               ? s_stages[e->arg]
               : cb_step_name(e->step);
}

int cb_warm_attached(cb_warm_t *w) {
    cb_warm_reply_t r;
    memset(&r, 0, sizeof r);
    ssize_t n = -1;
    if (s_poll_in(w->sock, CB_WARM_REPLY_MS) == 0) {
        do
            n = recv(w->sock, &r, sizeof r, 0);
        while (n < 0 && errno == EINTR);
    }
    if (n != (ssize_t) sizeof r || r.magic != CB_WARM_MAGIC) {
        /* (EOF: the fork failed before it answered; its step is on the pipe) */
        cb_child_err_t ce;
        if (n == 0 && s_poll_in(w->err[0], 0) == 0 && cb_child_read_err(w->err[0], &ce) > 0)
            s_why(w, "the template's fork failed while %s: %s", s_stage(&ce), strerror(ce.err));
        else
            s_why(w, "the template did not answer (%s)", n < 0 ? strerror(errno) : "bad reply");
        w->retire = n >= 0 || errno == ETIMEDOUT;
        w->failed = true;
        return -1;
    }
    r.reason[sizeof r.reason - 1] = '\0';
    if (!r.ok) {
        s_why(w, "the template refused: %s", r.reason);
        w->failed = true;
        return -1;
    }
    w->server = (int) syscall(SYS_pidfd_open, (pid_t) r.pid, 0);
    return 0;
}

int cb_warm_wait(cb_warm_t *w) {
    cb_child_err_t ce;
    int got = s_poll_in(w->err[0], CB_WARM_READY_MS) == 0 ? cb_child_read_err(w->err[0], &ce) : -1;
    if (got == 0) {
        s_close(&w->sock);
        s_close(&w->err[0]);
        s_close(&w->server);
        return 0;
    }
    if (got > 0) {
        s_why(w, "the template's fork failed while %s: %s", s_stage(&ce), strerror(ce.err));
        /* its own stages failing says the template is broken, not this sandbox */
        w->retire = ce.step == CB_STEP_WARM &&
                    (ce.arg == CB_WARM_STAGE_REQUEST || ce.arg == CB_WARM_STAGE_FORK ||
                     ce.arg == CB_WARM_STAGE_PYTHON || ce.arg == CB_WARM_STAGE_FDS);
    } else {
        s_why(w, "waiting for the template's fork: %s", strerror(errno));
        w->retire = true;
    }
    if (w->server >= 0) (void) syscall(SYS_pidfd_send_signal, w->server, SIGKILL, NULL, 0);
    w->failed = true;
    return -1;
}

void cb_warm_after_start(cb_warm_t *w, cb_sandbox_t *sb) {
    if (w == NULL || w->key[0] == '\0') return;
    if (w->retire) {
        LOG_W("warm start: retiring the template %s (%s)", w->key, w->why);
        cb_warm_retire(w->key);
    }
    if ((w->missing || w->retire) && sb->opts->warm == CB_WARM_AUTO && !cb_warm_busy(w->key))
        cb_warm_spawn(w->key, w->so, sb);
}

void cb_warm_destroy(cb_warm_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_warm_t *w = *self_p;
    *self_p = NULL;
    int *fds[] = {&w->sock, &w->err[0], &w->err[1], &w->init[0], &w->init[1], &w->server};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        s_close(fds[i]);
    free(w);
}
