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
#include "isolate/childstep.h"
#include "launcher/flags.h"


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
/* Reads /proc/PID/environ into a new NUL-terminated buffer (at most
 * CB_ENV_PARENT_MAX bytes; free it).  NULL with errno on failure. */
char *cb_env_read(pid_t pid, size_t *len);
/* The value of NAME (n bytes) in such a block, or NULL. */
const char *cb_env_lookup(const char *blk, size_t len, const char *name, size_t n);
/* Name of a step, and what the user can do about a failure in it. */
const char *cb_step_name(int step);
#endif
