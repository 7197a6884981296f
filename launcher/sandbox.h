/*
 * sandbox.h - --sandbox full: build the sandbox from the isolate/ steps,
 * start the runner in it, and tear it all down.
 *
 * Process shape: launcher (host, supervisor) -> init (pid 1 of the new pid
 * namespace; reaps, forwards signals, reports the runner's status) -> runner.
 */
#ifndef CB_LAUNCHER_SANDBOX_H
#define CB_LAUNCHER_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "launcher/options.h"

typedef struct cb_sandbox cb_sandbox_t;

/* Plans the sandbox (paths, filter, limits) from opts (borrowed; must
 * outlive the object).  NULL on failure (out of memory). */
cb_sandbox_t *cb_sandbox_new(const cb_options_t *opts);
/* Kills what is left, removes cgroups and staging.  Idempotent, NULL ok. */
void cb_sandbox_destroy(cb_sandbox_t **self_p);
/* Sets everything up and starts the runner; sends the isolation, workdir
 * and started reports.  *child = the pid to reap (init).  0 ok, -1 error
 * (cb_sandbox_error says what and how to fix it). */
int cb_sandbox_start(cb_sandbox_t *self, pid_t *child);
/* The start failed in its warm part (issue 21): the caller destroys it and
 * starts a cold one (--warm off), which has none. */
bool cb_sandbox_warm_failed(const cb_sandbox_t *self);
/* The start was given up for a SIGTERM or SIGHUP that came while it waited
 * (--warm wait): no error, the launcher ends. */
bool cb_sandbox_stopped(const cb_sandbox_t *self);
/* Once the runner runs: --warm auto starts a template when there was none. */
void cb_sandbox_after_start(cb_sandbox_t *self);
/* --network allow: the egress proxy (borrowed; NULL = none).  Before start. */
struct cb_netproxy;
void cb_sandbox_set_netproxy(cb_sandbox_t *self, struct cb_netproxy *np);
/* One line naming the cause and the fix of the last failure. */
void cb_sandbox_error(const cb_sandbox_t *self, char *buf, size_t len);
/* Interrupt the runner (SIGINT through init). */
void cb_sandbox_interrupt(cb_sandbox_t *self);
/* Kill every process of the sandbox (cgroup kill, then init). */
void cb_sandbox_kill(cb_sandbox_t *self);
/* fd to poll for messages from init, -1 if none. */
int cb_sandbox_poll_fd(const cb_sandbox_t *self);
/* Reads what init sent (the runner's wait status). */
void cb_sandbox_on_ready(cb_sandbox_t *self);
/* gvisor tier: an fd to poll (for *events) for an OOM kill in the sandbox's
 * cgroup, -1 when none (other tiers, no cgroup, a host without the event). */
int cb_sandbox_oom_fd(cb_sandbox_t *self, short *events);
/* It fired: an OOM kill in a gVisor sandbox can only have hit gVisor's own
 * processes (the code's memory is inside the Sentry's), after which gVisor
 * may hang instead of ending: the sandbox is ended, and reported as out of
 * memory. */
void cb_sandbox_on_oom(cb_sandbox_t *self);
/* Hands one checkpoint command line (docs/SNAPSHOTS.md) to the sandbox's
 * init; its answers come back as CB_SB_MSG_SNAP and are reported to the
 * kernel as `snap LINE`.  fd (-1 = none) travels with it (SCM_RIGHTS).
 * 0 ok, -1 errno. */
int cb_sandbox_snap_command(cb_sandbox_t *self, const char *line, int fd);
/* True when this sandbox's tier writes itself into an image by CRIU
 * (namespaces, no tier supervisor): its "pause IMG CKPT" goes to
 * cb_sandbox_criu_pause, which answers (reports) as the tier's would. */
bool cb_sandbox_pauses_by_criu(const cb_sandbox_t *self);
int cb_sandbox_criu_pause(cb_sandbox_t *self, const char *line, int fd);
/* Runner's wait status (replaces *status when init reported one), and
 * whether the memory cgroup OOM-killed; *reason may be set. */
void cb_sandbox_exit_status(cb_sandbox_t *self, int *status, bool *oom, const char **reason);

#endif
