/*
 * warm_enter.h - the template's side of a warm start (issue 21): what its
 * fork does to become a sandbox's runner.  Built, with the isolate/ steps it
 * calls, into libcellblock-warm.so, which the template (runner/cb_warm.py)
 * loads with ctypes.PyDLL: the calls hold the GIL, and the fork in the
 * middle is os.fork()'s own sequence (PyOS_BeforeFork, fork, PyOS_AfterFork_*).
 *
 * The process shape, and why it has an intermediate inside the pid
 * namespace:
 *
 *   template ── fork (spare, waits in accept) ──▶ C: joins the cgroup and the
 *   sandbox's net, user, ipc, uts and pid namespaces (its children are born
 *   in the pid namespace) while init still builds the file system
 *       └─ vfork ─▶ P (in the pid namespace, shares C's memory)
 *                     └─ fork ─▶ R, the runner; P exits at once.  R joins the
 *                        mount and cgroup namespaces once they are built
 *
 * An orphan is adopted by the reaper of its dead parent's pid namespace:
 * had C itself forked R and exited, R would have gone to the host's init
 * (measured).  P is inside, so R goes to the sandbox's init, which then
 * supervises it as it does a cold runner; R tells init its pid (SCM_CREDENTIALS,
 * so the kernel vouches for it) and waits for init's answer before any other
 * step, let alone a request.  P costs no copy of the address space (vfork).
 *
 * Everything is reported on the request's error pipe the libuv way
 * (isolate/childstep.h): a failing step writes (step, errno, stage) and the
 * process exits; EOF once R closes it means the runner is up.
 */
#ifndef CB_ISOLATE_WARM_ENTER_H
#define CB_ISOLATE_WARM_ENTER_H

#include <stddef.h>

/* CB_STEP_WARM's arg: where a warm start failed. */
typedef enum {
    CB_WARM_STAGE_REQUEST = 0, /* the request does not parse */
    CB_WARM_STAGE_ATTRS,       /* the launcher's rlimits, umask, nice, oom_score_adj, affinity */
    CB_WARM_STAGE_CGROUP,      /* joining the sandbox's cgroup */
    CB_WARM_STAGE_SETNS,       /* joining a namespace (the fd's index is in errno's company) */
    CB_WARM_STAGE_FORK,        /* vfork / fork into the pid namespace */
    CB_WARM_STAGE_ADOPT,       /* the sandbox's init did not adopt the runner */
    CB_WARM_STAGE_HANDSHAKE,   /* init did not take the runner's pid */
    CB_WARM_STAGE_FDS,         /* the runner's fds */
    CB_WARM_STAGE_PYTHON,      /* the runner's last steps in Python (cb_warm.py) */
    CB_WARM_STAGE_COUNT
} cb_warm_stage_t;

/* Checks a request (len bytes) against the template's key and the number of
 * fds that came with it.  0 ok, -1 with a reason in why. */
int cb_warm_check(const void *req, size_t len, int nfds, const char *key, char *why,
                  size_t why_len);

/* In the template's fork C, before it answers: the launcher's process
 * attributes, then the sandbox's init and C itself into the sandbox's cgroup
 * (the launcher goes on meanwhile).  Reports a failure on the error pipe and
 * exits. */
void cb_warm_attach(const void *req, size_t len, const int *fds, int nfds);

/* In the template's fork C, after cb_warm_attach: becomes the runner.  req was checked; fds are
 * the request's fds in order; conn the launcher's connection, on which R
 * then reads the second message (the file system's namespaces).  Returns 1
 * in C once R exists (C should exit), 0 in R with every layer applied and
 * *err_fd the error pipe (R closes it when its Python steps are done, or
 * reports a failure on it).  On failure it reports on the error pipe and
 * exits. */
int cb_warm_enter(const void *req, size_t len, const int *fds, int nfds, int conn, int *err_fd);

/* For the runner's Python steps (cb_warm.py): reports a failure of stage
 * CB_WARM_STAGE_PYTHON with errno err on err_fd (the caller then exits). */
void cb_warm_report(int err_fd, int err);

/* Async-signal-safe, for the sandbox's init: takes the runner a warm start
 * made, over sock (SO_PASSCRED set on it before the runner could send):
 * reads its one-byte message and the kernel's credentials, checks that the
 * pid is init's child, answers.  The pid, or -1 with errno. */
int cb_warm_adopt(int sock);

#endif
