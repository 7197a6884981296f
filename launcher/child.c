/*
 * child.c - the parts of the launcher that run in a freshly forked or
 * cloned child, plus the plan the parent prepares for it.
 *
 * The child of a single-threaded parent could in principle call malloc, but
 * the init of the sandbox lives on for the whole session and the runner's
 * setup happens in a new mount namespace with no /etc: we keep both to raw
 * system calls on memory prepared beforehand (nsjail, libuv).
 */
#include "launcher/child.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "isolate/log.h"
#include "isolate/util.h"

#include <stdlib.h>

static const char *const s_step_names[CB_STEP_COUNT] = {
    [CB_STEP_NONE] = "none",
    [CB_STEP_CLONE] = "clone(CLONE_NEWUSER|NEWPID|NEWNS|NEWNET|NEWIPC|NEWUTS)",
    [CB_STEP_IDMAP] = "writing uid_map/gid_map",
    [CB_STEP_SYNC] = "waiting for the launcher",
    [CB_STEP_CGROUP_NS] = "unshare(CLONE_NEWCGROUP)",
    [CB_STEP_HOSTNAME] = "sethostname",
    [CB_STEP_NET] = "bringing up loopback",
    [CB_STEP_MOUNT] = "building the sandbox filesystem",
    [CB_STEP_PROC] = "mounting /proc",
    [CB_STEP_PIVOT] = "pivot_root",
    [CB_STEP_WORKDIR] = "passing the workdir",
    [CB_STEP_FORK] = "forking the runner",
    [CB_STEP_SETSID] = "setsid",
    [CB_STEP_CHDIR] = "chdir to the workdir",
    [CB_STEP_RLIMIT] = "setrlimit",
    [CB_STEP_CAPS] = "dropping ids and capabilities",
    [CB_STEP_NNP] = "prctl(PR_SET_NO_NEW_PRIVS)",
    [CB_STEP_LANDLOCK] = "landlock_restrict_self",
    [CB_STEP_FDS] = "close_range",
    [CB_STEP_SECCOMP] = "loading the seccomp filter",
    [CB_STEP_EXEC] = "execve of the interpreter",
    [CB_STEP_TIER] = "starting the isolation tier",
    [CB_STEP_WARM] = "starting the runner from its template",
};

const char *cb_step_name(int step) {
    if (step < 0 || step >= CB_STEP_COUNT || s_step_names[step] == NULL) return "unknown step";
    return s_step_names[step];
}

static int s_env(cb_exec_plan_t *p, size_t *n, const char *name, const char *value) {
    if (*n >= CB_ENV_MAX) {
        errno = E2BIG;
        return -1;
    }
    int w = snprintf(p->env_buf[*n], CB_ENV_ENTRY_MAX, "%s=%s", name, value);
    if (w < 0 || (size_t) w >= CB_ENV_ENTRY_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    p->envp[*n] = p->env_buf[*n];
    (*n)++;
    return 0;
}

static int s_copy(char *dst, size_t len, const char *src) {
    int w = snprintf(dst, len, "%s", src);
    if (w < 0 || (size_t) w >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int cb_exec_plan_init(cb_exec_plan_t *p, const char *python, const char *runner,
                      const char *workdir, const char *user) {
    memset(p, 0, sizeof *p);
    if (s_copy(p->python, sizeof p->python, python) < 0 ||
        s_copy(p->runner, sizeof p->runner, runner) < 0 ||
        s_copy(p->workdir, sizeof p->workdir, workdir) < 0)
        return -1;
    size_t n = 0;
    if (s_env(p, &n, "PATH", CB_SANDBOX_PATH) < 0 || s_env(p, &n, "HOME", workdir) < 0 ||
        s_env(p, &n, "LANG", CB_SANDBOX_LANG) < 0 || s_env(p, &n, "LC_ALL", CB_SANDBOX_LANG) < 0 ||
        s_env(p, &n, "TERM", "dumb") < 0 || s_env(p, &n, "MPLBACKEND", "Agg") < 0 ||
        s_env(p, &n, "PYTHONDONTWRITEBYTECODE", "1") < 0 || s_env(p, &n, "CELLBLOCK", "1") < 0 ||
        s_env(p, &n, "TMPDIR", "/tmp") < 0 || s_env(p, &n, "USER", user) < 0 ||
        /* IPython's profile (history, %store) outside the working directory,
         * which is also HOME: under ipykernel a notebook's folder has no
         * .ipython in it either */
        s_env(p, &n, "IPYTHONDIR", CB_SANDBOX_IPYTHONDIR) < 0)
        return -1;
    p->envp[n] = NULL;
    p->argv[0] = p->python;
    p->argv[1] = (char *) "-I";
    p->argv[2] = (char *) "-u";
    p->argv[3] = p->runner;
    p->argv[4] = NULL;
    return 0;
}

/* The value of NAME (n bytes) in a NUL-separated environment block, or NULL. */
const char *cb_env_lookup(const char *blk, size_t len, const char *name, size_t n) {
    for (size_t off = 0; off < len;) {
        const char *e = blk + off;
        size_t el = strnlen(e, len - off);
        if (el > n && memcmp(e, name, n) == 0 && e[n] == '=') return e + n + 1;
        off += el + 1;
    }
    return NULL;
}

/* Reads /proc/PID/environ into a new NUL-terminated buffer (at most
 * CB_ENV_PARENT_MAX bytes).  NULL with errno on failure. */
char *cb_env_read(pid_t pid, size_t *len) {
    char path[CB_PROC_PATH_MAX];
    (void) snprintf(path, sizeof path, "/proc/%ld/environ", (long) pid);
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    char *buf = malloc(CB_ENV_PARENT_MAX + 1);
    if (buf == NULL) return NULL;
    size_t got = 0;
    while (got < CB_ENV_PARENT_MAX) {
        ssize_t r = read(fd, buf + got, CB_ENV_PARENT_MAX - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            errno = e;
            return NULL;
        }
        if (r == 0) break;
        got += (size_t) r;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

int cb_exec_plan_env(cb_exec_plan_t *p, const char *const *env, size_t n_env, pid_t parent) {
    size_t n = 0;
    while (p->envp[n] != NULL)
        n++;
    cb_autofree char *blk = NULL;
    size_t blk_len = 0;
    bool python = false;
    for (size_t i = 0; i < n_env && i < CB_FLAG_REPEAT_MAX; i++) {
        const char *e = env[i], *eq = strchr(e, '=');
        size_t nl = eq ? (size_t) (eq - e) : strlen(e);
        const char *value = eq ? eq + 1 : NULL;
        if (value == NULL) {
            if (blk == NULL && (blk = cb_env_read(parent, &blk_len)) == NULL) {
                PLOG_W("--env %s: cannot read the environment of process %ld", e, (long) parent);
                continue;
            }
            value = cb_env_lookup(blk, blk_len, e, nl);
            if (value == NULL) {
                LOG_W("--env %s: not set in the kernel's environment; left unset", e);
                continue;
            }
        }
        int w = snprintf(p->user_env[i], CB_FLAG_VALUE_MAX, "%.*s=%s", (int) nl, e, value);
        if (w < 0 || (size_t) w >= CB_FLAG_VALUE_MAX) {
            LOG_W("--env %.*s: value longer than %d bytes; left unset", (int) nl, e,
                  CB_FLAG_VALUE_MAX);
            continue;
        }
        if (nl >= 6 && memcmp(e, "PYTHON", 6) == 0) python = true;
        /* the same name twice, or a fixed one (LANG...): the last one wins */
        size_t k = 0;
        while (k < n && !(strncmp(p->envp[k], e, nl) == 0 && p->envp[k][nl] == '='))
            k++;
        if (k == n) {
            if (n >= CB_ENV_MAX + CB_FLAG_REPEAT_MAX) {
                errno = E2BIG;
                return -1;
            }
            n++;
        }
        p->envp[k] = p->user_env[i];
    }
    p->envp[n] = NULL;
    if (python) {
        /* -I is -E -P -s: keep -P and -s, drop -E so the allowlisted
         * PYTHON* entries (and PYTHONDONTWRITEBYTECODE) take effect */
        p->argv[1] = (char *) "-s";
        p->argv[2] = (char *) "-P";
        p->argv[3] = (char *) "-u";
        p->argv[4] = p->runner;
        p->argv[5] = NULL;
    }
    return 0;
}
