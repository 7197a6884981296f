/*
 * init.c - cellblock-init: pid 1 of the stronger isolation tiers.  Static,
 * no dependencies, so the same binary runs under gVisor and as /init of
 * the micro-VM's initramfs.
 *
 *   cellblock-init --gvisor SECCOMP_BPF UID GID [--debug-socket PATH] -- PROGRAM ARGS...
 *   cellblock-init --agent LINE
 *       pid 1 inside gVisor, and the relay of a checkpoint command into it:
 *       tiers/init_gvisor.c.
 *
 *   cellblock-init            (as /init of the micro-VM, tiers/microvm.c)
 *       loads the virtio modules listed in /modules.order, mounts the
 *       host's read-only 9p tree (the sandbox's filesystem plan) and the
 *       read-write 9p home (the sandbox's tmpfs home, so files come back
 *       to the host's artifact collector), a tmpfs /tmp and /dev/shm sized
 *       by --disk, a minimal /dev and /proc; puts the runner in a cgroup
 *       with --memory and --pids; gives the runner pipes for fds 1 and 2
 *       and a socket for fd 3 and carries them, in order, over the one
 *       virtio-serial port cb.io (tiers/init_mux.c); drops to the runner's
 *       uid with no capabilities and no_new_privs; and execs python -I -u
 *       runner.py (argv, env and limits from /.cellblock/vm.conf in the 9p
 *       tree).  The cb.ctl port carries SIGINT in ('i') and "ready" out;
 *       the runner's status is the last record on cb.io, after its output,
 *       and the host then ends the VM.
 *
 * Everything arriving here is from the trusted launcher; everything leaving
 * on cb.ctl and cb.io is read by the host as untrusted (user code may become
 * root in the guest through a guest-kernel bug, and the host assumes it did).
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "tiers/init_mux.h"
#include "tiers/init_priv.h"
#include "tiers/snap_agent.h"
#include "tiers/tier_limits.h"

#define S_ARGS_MAX    32 /* runner argv entries */
#define S_ENVS_MAX    32 /* runner env entries */
#define S_LINE_MAX    (CB_PATH_MAX + 64)
#define S_NEWROOT     "/newroot"
#define S_CGROUP      "/sys/fs/cgroup"
#define S_RUNNER_CG   S_CGROUP "/runner"
#define S_SNAP_STORE  "/ckpt" /* the agent's store: outside the runner's chroot */
#define S_PORT_POLLMS 5       /* between looks for the virtio ports */

#ifndef MODULE_INIT_IGNORE_MODVERSIONS
#define MODULE_INIT_IGNORE_MODVERSIONS 1
#endif

static int s_console = -1; /* /dev/console in the VM (debugging), -1 otherwise */
static int s_ctl = -1;     /* cb.ctl port */

static void s_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void s_say(const char *fmt, ...) {
    if (s_console < 0) return;
    char buf[S_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) (void) !write(s_console, buf, (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1);
}

static int s_write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        len -= (size_t) w;
    }
    return 0;
}

/* A setup step failed: tell the host (cb.ctl) and the console, then stop. */
__attribute__((noreturn)) static void s_die(const char *what) {
    int e = errno;
    char line[CB_VM_STATUS_MAX];
    int n = snprintf(line, sizeof line, "fail %d %s\n", e, what);
    s_say("cellblock-init: %s: %s\n", what, strerror(e));
    if (s_ctl >= 0 && n > 0) (void) s_write_all(s_ctl, line, strlen(line));
    if (getpid() == 1) {
        sync();
        (void) reboot(RB_POWER_OFF);
    }
    _exit(125);
}

/* ---- supervising one child (both modes) ------------------------------------ */

static void s_block_all(sigset_t *all) {
    sigfillset(all);
    (void) sigprocmask(SIG_SETMASK, all, NULL);
}

void cb_init_child_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP) (void) sigaction(sig, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    (void) sigprocmask(SIG_SETMASK, &none, NULL);
}

/* ---- micro-VM mode ------------------------------------------------------------ */

typedef struct {
    unsigned long uid, gid;            /* runner's ids */
    long nofile, pids, memory_mb;      /* limits */
    long tmp_mb, shm_mb;               /* tmpfs sizes */
    char cwd[CB_PATH_MAX];             /* working dir (home) */
    char args[S_ARGS_MAX][S_LINE_MAX]; /* argv strings */
    char *argv[S_ARGS_MAX + 1];        /* into args */
    size_t nargs;                      /* used */
    char envs[S_ENVS_MAX][S_LINE_MAX]; /* env strings */
    char *envp[S_ENVS_MAX + 1];        /* into envs */
    size_t nenvs;                      /* used */
    bool debug;                        /* the host gave the debugger's port */
} s_conf_t;

static s_conf_t s_conf;

static int s_read_file(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off + 1 < len) {
        ssize_t r = read(fd, buf + off, len - 1 - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        off += (size_t) r;
    }
    close(fd);
    buf[off] = '\0';
    return (int) off;
}

static int s_write_str(const char *dir, const char *file, const char *value) {
    char path[CB_PATH_MAX];
    (void) snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = s_write_all(fd, value, strlen(value));
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

static void s_load_modules(void) {
    static char list[16384];
    if (s_read_file("/modules.order", list, sizeof list) < 0) s_die("reading /modules.order");
    for (char *save = NULL, *name = strtok_r(list, "\n", &save); name != NULL;
         name = strtok_r(NULL, "\n", &save)) {
        char path[CB_PATH_MAX];
        (void) snprintf(path, sizeof path, "/lib/modules/%s", name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) s_die("opening a module");
        if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST) {
            s_say("cellblock-init: module %s: %s\n", name, strerror(errno));
            s_die("loading a module");
        }
        close(fd);
    }
}

static void s_parse_conf(void) {
    static char text[CB_VM_CONF_MAX + 1];
    char path[CB_PATH_MAX];
    (void) snprintf(path, sizeof path, "%s%s", S_NEWROOT, CB_VM_CONF);
    if (s_read_file(path, text, sizeof text) < 0) s_die("reading vm.conf");
    s_conf_t *c = &s_conf;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (sp == NULL) continue;
        *sp = '\0';
        const char *key = line, *val = sp + 1;
        if (strcmp(key, "arg") == 0 && c->nargs < S_ARGS_MAX) {
            (void) snprintf(c->args[c->nargs], S_LINE_MAX, "%s", val);
            c->argv[c->nargs] = c->args[c->nargs];
            c->nargs++;
        } else if (strcmp(key, "env") == 0 && c->nenvs < S_ENVS_MAX) {
            (void) snprintf(c->envs[c->nenvs], S_LINE_MAX, "%s", val);
            c->envp[c->nenvs] = c->envs[c->nenvs];
            c->nenvs++;
        } else if (strcmp(key, "cwd") == 0) {
            (void) snprintf(c->cwd, sizeof c->cwd, "%s", val);
        } else {
            long v = strtol(val, NULL, 10);
            if (strcmp(key, "uid") == 0)
                c->uid = (unsigned long) v;
            else if (strcmp(key, "gid") == 0)
                c->gid = (unsigned long) v;
            else if (strcmp(key, "nofile") == 0)
                c->nofile = v;
            else if (strcmp(key, "pids") == 0)
                c->pids = v;
            else if (strcmp(key, "memory_mb") == 0)
                c->memory_mb = v;
            else if (strcmp(key, "tmp_mb") == 0)
                c->tmp_mb = v;
            else if (strcmp(key, "shm_mb") == 0)
                c->shm_mb = v;
            else if (strcmp(key, "debug") == 0)
                c->debug = v == 1;
        }
    }
    c->argv[c->nargs] = NULL;
    c->envp[c->nenvs] = NULL;
    if (c->nargs == 0 || c->cwd[0] != '/' || c->uid == 0) {
        errno = EINVAL;
        s_die("vm.conf is incomplete");
    }
}

static void s_mount_or_die(const char *src, const char *dst, const char *type, unsigned long fl,
                           const char *data, const char *what) {
    (void) mkdir(dst, 0755);
    if (mount(src, dst, type, fl, data) < 0) s_die(what);
}

static void s_build_root(void) {
    char opts[S_LINE_MAX];
    (void) snprintf(opts, sizeof opts, "trans=virtio,version=9p2000.L,msize=%u,cache=loose",
                    CB_VM_9P_MSIZE);
    s_mount_or_die(CB_VM_TAG_ROOT, S_NEWROOT, "9p", MS_RDONLY | MS_NOSUID | MS_NODEV, opts,
                   "mounting the 9p root");
    s_parse_conf();
    char home[CB_PATH_MAX + sizeof S_NEWROOT];
    (void) snprintf(home, sizeof home, "%s%s", S_NEWROOT, s_conf.cwd);
    /* the home: no caching in the guest, so the host sees each write when it returns */
    (void) snprintf(opts, sizeof opts, "trans=virtio,version=9p2000.L,msize=%u,cache=mmap",
                    CB_VM_9P_MSIZE);
    if (mount(CB_VM_TAG_HOME, home, "9p", MS_NOSUID | MS_NODEV, opts) < 0)
        s_die("mounting the 9p home");
    (void) snprintf(opts, sizeof opts, "mode=1777,size=%ldm,nr_inodes=%d", s_conf.tmp_mb,
                    CB_SANDBOX_TMPFS_INODES);
    if (mount("tmpfs", S_NEWROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
        s_die("mounting /tmp");
    if (mount("proc", S_NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        s_die("mounting /proc");
    (void) snprintf(opts, sizeof opts, "mode=0755,size=%dk", CB_SANDBOX_DEV_TMPFS_KB);
    if (mount("tmpfs", S_NEWROOT "/dev", "tmpfs", MS_NOSUID, opts) < 0) s_die("mounting /dev");
    static const struct {
        const char *name; /* under /dev */
        unsigned minor;   /* of major 1 (mem) */
    } devs[] = {{"null", 3}, {"zero", 5}, {"full", 7}, {"random", 8}, {"urandom", 9}};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
        char p[CB_DEV_PATH_MAX];
        (void) snprintf(p, sizeof p, S_NEWROOT "/dev/%s", devs[i].name);
        if (mknod(p, S_IFCHR | 0666, makedev(1, devs[i].minor)) < 0 || chmod(p, 0666) < 0)
            s_die("creating /dev nodes");
    }
    static const char *const links[][2] = {{"/proc/self/fd", "fd"},
                                           {"/proc/self/fd/0", "stdin"},
                                           {"/proc/self/fd/1", "stdout"},
                                           {"/proc/self/fd/2", "stderr"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        char p[CB_DEV_PATH_MAX];
        (void) snprintf(p, sizeof p, S_NEWROOT "/dev/%s", links[i][1]);
        if (symlink(links[i][0], p) < 0) s_die("creating /dev links");
    }
    (void) snprintf(opts, sizeof opts, "mode=1777,size=%ldm,nr_inodes=%d", s_conf.shm_mb,
                    CB_SANDBOX_TMPFS_INODES);
    s_mount_or_die("tmpfs", S_NEWROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts,
                   "mounting /dev/shm");
}

static void s_cgroup(void) {
    char v[CB_CGROUP_VALUE_MAX];
    s_mount_or_die("cgroup2", S_CGROUP, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
                   "mounting cgroup2");
    if (s_write_str(S_CGROUP, "cgroup.subtree_control", "+memory +pids") < 0)
        s_die("enabling memory and pids controllers");
    if (mkdir(S_RUNNER_CG, 0755) < 0) s_die("creating the runner's cgroup");
    (void) snprintf(v, sizeof v, "%ld", s_conf.memory_mb << 20);
    if (s_write_str(S_RUNNER_CG, "memory.max", v) < 0) s_die("setting memory.max");
    (void) s_write_str(S_RUNNER_CG, "memory.swap.max", "0"); /* no swap in the guest anyway */
    (void) snprintf(v, sizeof v, "%ld", s_conf.pids);
    if (s_write_str(S_RUNNER_CG, "pids.max", v) < 0) s_die("setting pids.max");
}

static bool s_oom(void) {
    char buf[512];
    char path[CB_PATH_MAX];
    (void) snprintf(path, sizeof path, "%s/memory.events", S_RUNNER_CG);
    if (s_read_file(path, buf, sizeof buf) < 0) return false;
    const char *p = strstr(buf, "oom_kill ");
    return p != NULL && strtol(p + strlen("oom_kill "), NULL, 10) > 0;
}

/* The /dev/vportNpM whose name is `name`; waits for the ports to appear. */
static int s_open_port(const char *name, int flags) {
    struct timespec nap = {.tv_sec = 0, .tv_nsec = S_PORT_POLLMS * 1000000L};
    for (int waited = 0; waited < CB_VM_PORT_WAIT_MS; waited += S_PORT_POLLMS) {
        DIR *d = opendir("/sys/class/virtio-ports");
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[CB_PATH_MAX], got[CB_DESC_PART_MAX]; /* a virtio port name */
            (void) snprintf(path, sizeof path, "/sys/class/virtio-ports/%s/name", e->d_name);
            if (s_read_file(path, got, sizeof got) <= 0) continue;
            got[strcspn(got, "\n")] = '\0';
            if (strcmp(got, name) != 0) continue;
            (void) snprintf(path, sizeof path, "/dev/%s", e->d_name);
            closedir(d);
            int fd = open(path, flags | O_CLOEXEC);
            if (fd < 0) s_die("opening a virtio port");
            return fd;
        }
        if (d != NULL) closedir(d);
        nanosleep(&nap, NULL);
    }
    errno = ETIMEDOUT;
    s_die("waiting for the virtio ports");
}

__attribute__((noreturn)) static void s_runner(int out, int err, int ev, int dbg) {
    const s_conf_t *c = &s_conf;
    cb_init_child_signals();
    if (setsid() < 0) _exit(125);
    char pid[CB_CGROUP_VALUE_MAX];
    (void) snprintf(pid, sizeof pid, "%d", (int) getpid());
    if (s_write_str(S_RUNNER_CG, "cgroup.procs", pid) < 0) _exit(125);
    int null = open(S_NEWROOT "/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
        dup2(ev, CB_FD_EVENT) < 0 || (dbg >= 0 && dup2(dbg, CB_FD_DEBUG) < 0))
        _exit(125);
    /* the runner's slots only cross the exec: a dup2 onto the fd itself (this
     * init may start without fds 0-2) would leave its close-on-exec flag */
    int last = dbg >= 0 ? CB_FD_DEBUG : CB_FD_EVENT;
    for (int fd = 0; fd <= last; fd++)
        if (fcntl(fd, F_SETFD, 0) < 0) _exit(125);
    if (syscall(SYS_close_range, last + 1, ~0U, 0) < 0) _exit(125);
    if (chroot(S_NEWROOT) < 0 || chdir(c->cwd) < 0) _exit(125);
    struct rlimit nofile = {(rlim_t) c->nofile, (rlim_t) c->nofile}, core = {0, 0};
    if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 || setrlimit(RLIMIT_CORE, &core) < 0) _exit(125);
    if (setgroups(0, NULL) < 0 || setresgid((gid_t) c->gid, (gid_t) c->gid, (gid_t) c->gid) < 0 ||
        setresuid((uid_t) c->uid, (uid_t) c->uid, (uid_t) c->uid) < 0)
        _exit(125);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) _exit(125);
    execve(c->argv[0], c->argv, c->envp);
    dprintf(2, "cellblock-init: execve %s: %s\n", c->argv[0], strerror(errno));
    _exit(127);
}

/* ---- checkpoints in place in the guest (docs/SNAPSHOTS.md) --------------------
 * The agent is this init (root in the guest); its store is a tmpfs outside
 * the runner's chroot; the park fifos are root's in a tmpfs the runner can
 * only read.  Commands come on cb.ctl as "snap LINE\n" lines among the 'i'
 * bytes of interrupts; answers go back as "snap LINE\n". */

static void s_snap_dirs(int *store, int *park) {
    *store = *park = -1;
    char opts[S_LINE_MAX];
    (void) snprintf(opts, sizeof opts, "mode=0700,size=%ldm,nr_inodes=%d", s_conf.tmp_mb,
                    CB_SANDBOX_TMPFS_INODES);
    (void) mkdir(S_SNAP_STORE, 0700);
    if (mount("tmpfs", S_SNAP_STORE, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0 ||
        mount("tmpfs", S_NEWROOT CB_SNAP_PARK_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "mode=0755,size=16k") < 0)
        return;
    *store = open(S_SNAP_STORE, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *park = open(S_NEWROOT CB_SNAP_PARK_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void s_snap_say(void *ud, const char *line) {
    (void) ud;
    char out[CB_VM_STATUS_MAX];
    int n = snprintf(out, sizeof out, "snap %s\n", line);
    if (n > 0 && (size_t) n < sizeof out) (void) s_write_all(s_ctl, out, (size_t) n);
}

/* Bytes from the host on cb.ctl: 'i' interrupts the runner, "snap LINE\n" is
 * a checkpoint command (a line longer than allowed is dropped whole). */
static void s_read_host(cb_snap_agent_t *a) {
    static char line[CB_SNAP_LINE_MAX + 8];
    static size_t used;
    static bool overlong;
    char buf[CB_SNAP_LINE_MAX];
    ssize_t n = read(s_ctl, buf, sizeof buf);
    for (ssize_t k = 0; k < n; k++) {
        char c = buf[k];
        if (used == 0 && !overlong && c == 'i') {
            (void) kill(a->runner, SIGINT);
            continue;
        }
        if (c == '\n') {
            line[used] = '\0';
            if (!overlong && strncmp(line, "snap ", 5) == 0) cb_snap_agent_command(a, line + 5);
            used = 0;
            overlong = false;
            continue;
        }
        if (used + 1 >= sizeof line)
            overlong = true;
        else
            line[used++] = c;
    }
}

__attribute__((noreturn)) static void s_microvm(void) {
    (void) mkdir("/proc", 0755);
    (void) mkdir("/sys", 0755);
    (void) mkdir("/dev", 0755);
    if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") < 0) s_die("mounting /dev");
    char cmdline[1024] = "";
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        s_die("mounting /proc");
    (void) s_read_file("/proc/cmdline", cmdline, sizeof cmdline);
    if (strstr(cmdline, "cb.debug") != NULL) s_console = open("/dev/console", O_WRONLY | O_CLOEXEC);
    if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        s_die("mounting /sys");
    s_load_modules();
    s_ctl = s_open_port(CB_VM_PORT_CTL, O_RDWR);
    s_build_root();
    s_cgroup();
    static cb_init_mux_t mux; /* the runner's fds 1-3 over cb.io, in order */
    int rfd[3];
    if (cb_init_mux_open(&mux, s_open_port(CB_VM_PORT_IO, O_RDWR | O_NONBLOCK), rfd) < 0)
        s_die("setting up the runner's channel");
    int dbg = s_conf.debug ? s_open_port(CB_VM_PORT_DEBUG, O_RDWR) : -1;
    sigset_t all;
    s_block_all(&all);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
    if (sfd < 0) s_die("signalfd");
    int store, park;
    s_snap_dirs(&store, &park); /* before the runner: its copies need the park fifos */
    pid_t child = fork();
    if (child < 0) s_die("fork");
    if (child == 0) s_runner(rfd[0], rfd[1], rfd[2], dbg);
    for (int i = 0; i < 3; i++)
        close(rfd[i]);
    if (dbg >= 0) close(dbg);
    s_say("cellblock-init: runner %d started\n", (int) child);
    (void) s_write_all(s_ctl, "ready\n", strlen("ready\n"));
    static cb_snap_agent_t agent; /* checkpoints in place, kept in the guest */
    char home[CB_PATH_MAX + sizeof S_NEWROOT];
    (void) snprintf(home, sizeof home, "%s%s", S_NEWROOT, s_conf.cwd);
    cb_snap_agent_init(&agent, store, park, home, S_NEWROOT "/tmp", child, true,
                       store < 0 ? "the guest could not make its checkpoint store" : NULL,
                       s_snap_say, NULL);
    int status = 0;
    for (;;) {
        struct pollfd pf[2 + CB_INIT_MUX_NFDS] = {{.fd = sfd, .events = POLLIN},
                                                  {.fd = s_ctl, .events = POLLIN}};
        cb_init_mux_poll(&mux, pf + 2);
        int r = poll(pf, 2 + CB_INIT_MUX_NFDS, mux.more ? 0 : cb_snap_agent_wait_ms(&agent));
        (void) cb_init_mux_pump(&mux);
        if (r < 0) continue;
        cb_snap_agent_tick(&agent);
        if (pf[1].revents & POLLIN) s_read_host(&agent);
        if (pf[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            (void) !read(sfd, &si, sizeof si);
            bool gone = false;
            for (;;) {
                int st;
                pid_t p = waitpid(-1, &st, WNOHANG | WUNTRACED);
                if (p <= 0) break;
                if (cb_snap_agent_child(&agent, p, st)) continue;
                if (p == agent.runner && (WIFEXITED(st) || WIFSIGNALED(st))) {
                    status = st;
                    gone = true;
                }
            }
            if (gone) break;
        }
    }
    cb_snap_agent_end(&agent);
    /* the runner is gone: so is everything it started */
    (void) s_write_str(S_RUNNER_CG, "cgroup.kill", "1");
    bool oom = s_oom();
    s_say("cellblock-init: runner ended, status %d oom %d\n", status, oom ? 1 : 0);
    sync(); /* the host ends the VM once it has the status */
    cb_init_mux_end(&mux, status, oom);
    if (mux.host_gone) (void) reboot(RB_POWER_OFF); /* nobody to wait for */
    for (;;)
        pause();
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--gvisor") == 0) return cb_init_gvisor(argc, argv);
    if (argc == 3 && strcmp(argv[1], "--agent") == 0) return cb_init_agent_client(argv[2]);
    if (getpid() != 1) {
        dprintf(2, "usage: cellblock-init --gvisor SECCOMP_BPF UID GID [--debug-socket PATH] -- "
                   "PROGRAM ARGS...  (or as the VM's /init)\n");
        return 2;
    }
    s_microvm();
}
