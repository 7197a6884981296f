/*
 * tier.h - isolation tiers (--isolation): which kernel the user's code talks to.
 *
 *   namespaces  the host's, behind namespaces, cgroups, seccomp and Landlock
 *               (launcher/sandbox*.c alone; no tier object)
 *   gvisor      gVisor's user-space kernel: the runner runs under `runsc`
 *               (tiers/gvisor*.c; inside it tiers/init_gvisor.c)
 *   microvm     a guest Linux kernel: the runner runs in a QEMU micro-VM
 *               (tiers/microvm*.c, tiers/vm_demux.c; guest side in
 *               tiers/init.c, tiers/init_mux.c)
 *
 * The stronger tiers do not replace the namespaces sandbox, they run inside
 * it: launcher/sandbox*.c still build the same filesystem (read-only system dirs,
 * tmpfs home and /tmp sized by --disk, the runner, --ro-bind), the cgroup,
 * the pid namespace whose init tears everything down, and the working
 * directory fd the kernel collects artifacts from.  A tier only changes
 * what the runner's slot starts: instead of execve(python) it runs a small
 * supervisor that starts runsc or QEMU with fds 0-3 carried through
 * (runsc: the event socket becomes the container's stdin, which
 * tiers/init_gvisor.c moves back to fd 3; QEMU: one virtio-serial port that the
 * supervisor relays to and from the very same fds, in order, tiers/vm_mux.h)
 * and turns SIGINT and the exit status into what the
 * launcher expects.  The kernel, the session driver and the runner
 * protocol do not change.
 *
 * A tier the host cannot provide fails closed: cb_tier_new returns NULL
 * with the cause and the fix, and the launcher sends `fatal`.
 */
#ifndef CB_TIERS_TIER_H
#define CB_TIERS_TIER_H

#include <stdbool.h>
#include <stddef.h>

#include "isolate/cgroup.h"
#include "isolate/childstep.h"
#include "isolate/mount.h"
#include "launcher/options.h" /* the options struct only: tiers call nothing in launcher/ */

typedef struct cb_tier cb_tier_t;

/* The tier for opts->isolation.  NULL with why[0] == '\0' for namespaces (no
 * tier object); NULL with the cause and the fix in why when the host cannot
 * provide the tier (or out of memory).  opts is borrowed. */
cb_tier_t *cb_tier_new(const cb_options_t *opts, char *why, size_t why_len);
/* The verified image directory to restore (--resume-image), owned by the
 * tier from now on (closed by a tier that restores nothing). */
void cb_tier_set_image(cb_tier_t *self, int fd);
/* Idempotent, NULL ok. */
void cb_tier_destroy(cb_tier_t **self_p);
/* Adds the tier's own mounts to the sandbox's plan (after the namespaces
 * tier planned its own) and its overhead to the cgroup limits, and
 * prepares everything the runner slot will need (argv, files).  uid/gid
 * are the runner's ids inside the sandbox; runner is the runner file as
 * the sandbox sees it; envp its environment (borrowed, NULL-terminated).
 * 0 ok, -1 with the cause in why. */
int cb_tier_plan(cb_tier_t *self, cb_mount_plan_t *mounts, cb_cgroup_limits_t *lim,
                 unsigned long uid, unsigned long gid, const char *runner, char *const *envp,
                 char *why, size_t why_len);
/* True when the tier's supervisor must keep the sandbox's capabilities
 * (runsc sets up its own namespaces, seccomp and capabilities). */
bool cb_tier_privileged(const cb_tier_t *self);
/* In the runner's slot of the sandbox, instead of execve(python): starts the
 * tier and supervises it; exits with the runner's status (a signal death
 * is re-raised).  Setup errors go to errfd as cb_child_err_t (step
 * CB_STEP_TIER); errfd reaches EOF once the tier's process is exec'd.
 * No malloc: everything was prepared by cb_tier_plan. */
__attribute__((noreturn)) void cb_tier_run(const cb_tier_t *self, int errfd);
/* The banner (`isolation` report): the tier, what it adds, and base (the
 * namespaces sandbox's own line) as what surrounds it. */
void cb_tier_describe(const cb_tier_t *self, const char *base, char *buf, size_t len);
/* True when *status (the runner slot's wait status) says the guest's own OOM
 * killer ended the runner; *status then becomes "killed by SIGKILL". */
bool cb_tier_guest_oom(const cb_tier_t *self, int *status);
/* The runner slot's end of init's channel for checkpoint commands and their
 * answers (docs/SNAPSHOTS.md; SOCK_SEQPACKET, a line per datagram, an fd
 * attached to `pause`): set in the slot before cb_tier_run; -1 = none. */
void cb_tier_set_ctl(int fd);
int cb_tier_ctl(void);
/* What the user can do about a failed CB_STEP_TIER (arg is the tier's own code). */
const char *cb_tier_hint(const cb_tier_t *self, int arg);

#endif
