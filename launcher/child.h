/*
 * child.h - what the launcher's children do between fork/clone and execve.
 *
 * Everything the child needs (argv, envp, paths, file contents) is built by
 * the parent beforehand into a cb_exec_plan_t; the child only makes system
 * calls.  No malloc, no stdio, no logging there: errors travel back over an
 * error pipe as a cb_child_err_t (libuv style) and the parent turns them into
 * a `fatal` report naming the cause and the fix.
 */
#ifndef CB_LAUNCHER_CHILD_H
#define CB_LAUNCHER_CHILD_H

#include <stddef.h>
#include <sys/types.h>

#include "isolate/sandbox_limits.h"
#include "launcher/flags.h"

/* Setup steps, in the order they run; each has a name and a hint. */
typedef enum {
    CB_STEP_NONE = 0,
    CB_STEP_CLONE,     /* clone(CLONE_NEW*) */
    CB_STEP_IDMAP,     /* uid_map/gid_map */
    CB_STEP_SYNC,      /* waiting for the parent */
    CB_STEP_CGROUP_NS, /* unshare(CLONE_NEWCGROUP) */
    CB_STEP_HOSTNAME,  /* sethostname */
    CB_STEP_NET,       /* loopback up */
    CB_STEP_MOUNT,     /* building the root */
    CB_STEP_PROC,      /* mounting /proc */
    CB_STEP_PIVOT,     /* pivot_root */
    CB_STEP_WORKDIR,   /* sending the workdir fd */
    CB_STEP_FORK,      /* init forking the runner */
    CB_STEP_SETSID,    /* setsid */
    CB_STEP_CHDIR,     /* chdir to the workdir */
    CB_STEP_RLIMIT,    /* setrlimit */
    CB_STEP_CAPS,      /* dropping capabilities / ids */
    CB_STEP_NNP,       /* no_new_privs */
    CB_STEP_LANDLOCK,  /* landlock_restrict_self */
    CB_STEP_FDS,       /* close_range */
    CB_STEP_SECCOMP,   /* loading the filter */
    CB_STEP_EXEC,      /* execve */
    CB_STEP_TIER,      /* starting the isolation tier (launcher/tier.h) */
    CB_STEP_COUNT
} cb_step_t;

typedef struct {
    int step; /* cb_step_t */
    int err;  /* errno at the failing call */
    int arg;  /* index into the mount plan etc., -1 if none */
} cb_child_err_t;

typedef struct {
    char env_buf[CB_ENV_MAX][CB_ENV_ENTRY_MAX];      /* "NAME=value" strings */
    char *envp[CB_ENV_MAX + CB_FLAG_REPEAT_MAX + 1]; /* NULL-terminated, into env_buf/user_env */
    char user_env[CB_FLAG_REPEAT_MAX][CB_FLAG_VALUE_MAX]; /* --env entries, "NAME=value" */
    char python[CB_PATH_MAX];                             /* interpreter to execve */
    char runner[CB_PATH_MAX];                             /* runner file as the runner sees it */
    char workdir[CB_PATH_MAX];                            /* cwd of the runner */
    char *argv[CB_RUNNER_ARGC_MAX];                       /* python -I -u runner */
} cb_exec_plan_t;

/* Fills plan: argv = PYTHON -I -u RUNNER, the fixed env with HOME=workdir.
 * 0 ok, -1 a value did not fit (errno ENAMETOOLONG). */
int cb_exec_plan_init(cb_exec_plan_t *plan, const char *python, const char *runner,
                      const char *workdir, const char *user);
/* Adds the --env entries (checked by the flag table) after the fixed
 * environment: "NAME=VALUE" as given; a bare NAME takes its value from the
 * environment the process `parent` (the kernel, or `cellblock run`) was
 * started with (/proc/PID/environ), so values given that way never appear
 * on a command line; a NAME it lacks is left unset (logged).  An entry
 * replaces a fixed one of the same name (LANG, LC_ALL, TERM, MPLBACKEND).
 * With a PYTHON* entry the runner starts with -s -P instead of -I, so its
 * interpreter honours the (allowlisted) variable; the environment is then
 * exactly this plan's.  Call after every other step that adds entries.
 * 0 ok, -1 errno (E2BIG: too many entries). */
int cb_exec_plan_env(cb_exec_plan_t *plan, const char *const *env, size_t n, pid_t parent);
/* Name of a step, and what the user can do about a failure in it. */
const char *cb_step_name(int step);
/* Async-signal-safe: unblock all signals, default dispositions. */
void cb_child_reset_signals(void);
/* Async-signal-safe: report (step, errno, arg) on errfd and _exit(127). */
__attribute__((noreturn)) void cb_child_fail(int errfd, cb_step_t step, int arg);
/* Async-signal-safe: mark every fd >= 4 close-on-exec, clear it on 0..3.
 * 0 ok, -1 errno. */
int cb_child_prepare_fds(void);
/* Reads one cb_child_err_t from fd.  1 got one, 0 EOF (exec happened),
 * -1 errno. */
int cb_child_read_err(int fd, cb_child_err_t *out);

#endif
