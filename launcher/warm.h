/*
 * warm.h - warm starts (issue 21): the runner as a fork of a template that
 * has imported the runner, IPython's shell and the --preload set.
 *
 * The launcher builds the sandbox exactly as for a cold start (namespaces,
 * id maps, mounts and pivot_root, cgroup, init as pid 1); only the runner
 * slot changes.  Instead of init forking a runner that execs Python, the
 * launcher hands the template (a per-configuration service, root-owned, in
 * CB_WARM_DIR) the runner's fds, the sandbox's namespace fds, its
 * cgroup.procs files and the plan's ids, limits and seccomp filter; the
 * template's fork joins all of it and applies every layer
 * (isolate/warm_enter.h), and the sandbox's init adopts it.  No template,
 * a template that is gone or refuses, a failure anywhere: a cold start, the
 * reason in the log.  docs/ARCHITECTURE.md says why this design.
 *
 * warm.c is the launcher's side (decision, key, request); warm_tpl.c starts
 * a template and supervises it.
 */
#ifndef CB_LAUNCHER_WARM_H
#define CB_LAUNCHER_WARM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct cb_warm cb_warm_t;
struct cb_sandbox;

/* After planning: whether this start can be warm, and if so connects to the
 * template of its configuration (--warm wait: starts one and waits).  Never
 * fails a start: NULL only when out of memory (then cold). */
cb_warm_t *cb_warm_new(struct cb_sandbox *sb);
/* Closes what is left.  Idempotent, NULL ok. */
void cb_warm_destroy(cb_warm_t **self_p);
/* This start is to be warm (a template answered). */
bool cb_warm_on(const cb_warm_t *self);
/* Why this start is cold, or how the warm attempt failed ("" if neither). */
const char *cb_warm_why(const cb_warm_t *self);

/* Before clone: the error pipe and init's handshake socket.  -1: cold after
 * all (why set). */
int cb_warm_prepare(cb_warm_t *self);
/* In init, right after clone: closes what is the launcher's.  The socket
 * init takes the runner on (cb_warm_adopt), -1 when not warm. */
int cb_warm_in_init(const cb_warm_t *self);
/* In the launcher after clone: closes init's end. */
void cb_warm_after_clone(cb_warm_t *self);
/* Once the id maps are written (init builds the file system meanwhile):
 * sends the request; the template's fork moves `init` (host pid; 0: it is
 * there already) into the sandbox's cgroup.  -1 failed (why). */
int cb_warm_send(cb_warm_t *self, const struct cb_sandbox *sb, pid_t init);
/* Waits for the template's answer: init is in the sandbox's cgroup.  -1
 * refused or failed (why; cb_warm_failed is then true). */
int cb_warm_attached(cb_warm_t *self);
/* Once init has built the file system and rooted its cgroup namespace:
 * sends those two namespaces and the seccomp filter.  -1 failed (why). */
int cb_warm_send_fs(cb_warm_t *self, const struct cb_sandbox *sb);
/* Waits for the runner's steps.  0 the runner is up, -1 failed (why;
 * cb_warm_failed is then true: start again cold). */
int cb_warm_wait(cb_warm_t *self);
/* The warm attempt failed after clone: the caller starts a cold sandbox. */
bool cb_warm_failed(const cb_warm_t *self);

/* The cold start's reason is that the last template died (logged as a warning). */
bool cb_warm_died(const cb_warm_t *self);
/* A SIGTERM or SIGHUP came while --warm wait waited for a template (it
 * stays pending): the launcher is to end, starting nothing (why says so). */
bool cb_warm_stopped(const cb_warm_t *self);
/* Once the sandbox runs: --warm auto starts a template when none answered,
 * and retires one that failed. */
void cb_warm_after_start(cb_warm_t *self, struct cb_sandbox *sb);

/* warm_tpl.c: starts the template of sb's configuration (key), detached;
 * returns at once (the build takes seconds).  Nothing when one is being
 * built or served. */
void cb_warm_spawn(const char *key, const char *so_path, struct cb_sandbox *sb);
/* warm_tpl.c: SIGTERMs the supervisor of the template `key` (its pid file),
 * so that the next start builds a new one. */
void cb_warm_retire(const char *key);
/* warm_tpl.c: true while some process holds the template's lock (building
 * or serving). */
bool cb_warm_busy(const char *key);
/* warm_tpl.c: true when the last build of this template failed less than
 * CB_WARM_RETRY_S ago (no new one is started before that). */
bool cb_warm_failed_lately(const char *key);

/* How the last template of this configuration ended, as its supervisor saw
 * it (<key>.ended: "died: ..." when it was killed or failed, "ended: ..."
 * otherwise), into buf.  0 there is a record, -1 none. */
int cb_warm_last_end(const char *key, char *buf, size_t len);

#endif
