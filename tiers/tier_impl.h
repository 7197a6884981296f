/*
 * tier_impl.h - what tier.c, gvisor.c and microvm.c share: the
 * two tiers' entry points, their fixed paths inside the sandbox, and the
 * helpers their supervisors use in the runner's slot (no malloc there).
 */
#ifndef CB_TIERS_TIER_IMPL_H
#define CB_TIERS_TIER_IMPL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tiers/tier.h"
#include "tiers/tier_limits.h"

/* One prepared argv (or envp): fixed storage, NULL-terminated. */
typedef struct {
    char buf[CB_TIER_ARGV_MAX][CB_TIER_ARG_MAX]; /* the strings */
    char *argv[CB_TIER_ARGV_MAX + 1];            /* pointers into buf, NULL-terminated */
    size_t n;                                    /* used entries */
} cb_tier_argv_t;

typedef struct cb_gvisor cb_gvisor_t;
typedef struct cb_microvm cb_microvm_t;

cb_gvisor_t *cb_gvisor_new(const cb_options_t *opts, char *why, size_t why_len);
void cb_gvisor_set_image(cb_gvisor_t *self, int fd); /* owns fd */
void cb_gvisor_destroy(cb_gvisor_t **self_p);
int cb_gvisor_plan(cb_gvisor_t *self, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim,
                   unsigned long uid, unsigned long gid, const char *runner, char *const *envp,
                   char *why, size_t why_len);
__attribute__((noreturn)) void cb_gvisor_run(const cb_gvisor_t *self, int errfd);
void cb_gvisor_describe(const cb_gvisor_t *self, const char *base, char *buf, size_t len);
const char *cb_gvisor_hint(int arg);

cb_microvm_t *cb_microvm_new(const cb_options_t *opts, char *why, size_t why_len);
void cb_microvm_destroy(cb_microvm_t **self_p);
int cb_microvm_plan(cb_microvm_t *self, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim,
                    unsigned long uid, unsigned long gid, const char *runner, char *const *envp,
                    char *why, size_t why_len);
__attribute__((noreturn)) void cb_microvm_run(const cb_microvm_t *self, int errfd);
void cb_microvm_describe(const cb_microvm_t *self, const char *base, char *buf, size_t len);
const char *cb_microvm_hint(int arg);

/* The directory the launcher binary lives in (its helpers sit beside it).
 * 0 ok, -1 errno. */
int cb_tier_helper_dir(char *buf, size_t len);
/* waitpid with a deadline; the child is killed at it.  0 (status in *st),
 * -1 on timeout or error. */
int cb_tier_wait(pid_t pid, int timeout_ms, int *st);
/* Runs path (stdin /dev/null) and keeps what it writes to stdout and stderr
 * in out (at most out_len - 1 bytes, NUL-terminated; more is read and
 * dropped); it is killed after timeout_ms.  Its wait status, or -1 (errno:
 * it could not start, ETIMEDOUT). */
int cb_tier_output(const char *path, char *const argv[], char *const envp[], char *out,
                   size_t out_len, int timeout_ms);
/* First executable dirs[i]/name, resolved with realpath.  0 ok, -1 ENOENT. */
int cb_tier_find_program(const char *const *dirs, const char *name, char *buf, size_t len);
/* Appends one formatted entry.  0 ok, -1 (E2BIG, ENAMETOOLONG). */
int cb_tier_argv_add(cb_tier_argv_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- in the runner's slot (async-signal-safe, no malloc) ---------------------- */

/* fork + execve(path, argv, envp) with fd i = fds[i] for i < nfds, every
 * other fd closed; PDEATHSIG SIGKILL, default signals, own session.
 * Returns the pid once the exec happened, or -1 with the child's errno. */
pid_t cb_tier_spawn(const char *path, char *const argv[], char *const envp[], const int *fds,
                    size_t nfds);
/* Blocks every signal: the supervisor reads them with sigwaitinfo. */
void cb_tier_block_signals(void);
/* Ends this process the way status says (exit code, or the same signal). */
__attribute__((noreturn)) void cb_tier_exit_like(int status);
/* Writes the whole file (O_EXCL, mode).  0 ok, -1 errno. */
int cb_tier_write_file(const char *path, const char *data, size_t len, unsigned mode);

#endif
