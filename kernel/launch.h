/*
 * launch.h - one cellblock-launcher process as the kernel sees it: spawned
 * with posix_spawn, its fds (the runner's stdout/stderr pipes, the event
 * socket, the report socket, the debugger's socket), and what it reported (docs/RUNNER_PROTOCOL.md
 * sections 1-2).  The session driver (session.c) is its only user.
 *
 * The kernel never forks: the launcher is started with posix_spawn, an
 * explicit argv and envp, a clean signal mask, a new session, and exactly
 * fds 0-5 placed by dup2.  The launcher is trusted; everything read from
 * the runner's fds is not, and is read by the session, not here.
 */
#ifndef CB_LAUNCH_H
#define CB_LAUNCH_H

#include "isolate/cb_limits.h"
#include "isolate/util.h" /* cb_now_ms */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CB_LAUNCH_TEXT_MAX CB_REPORT_LINE_MAX /* isolation and fatal descriptions kept */
#define CB_LAUNCH_NET_MAX  (64 * CB_REPORT_LINE_MAX) /* an answer to a network request */

typedef struct {
    const char *launcher;     /* path of cellblock-launcher */
    const char *python;       /* sandboxed interpreter */
    const char *runner;       /* runner.py on the host */
    const char *const *extra; /* further launcher flags (borrowed), NULL-terminated */
    const char *resume;       /* a verified image to restore the sandbox from, or NULL */
} cb_launch_cfg_t;

typedef struct cb_launch {
    pid_t pid;                          /* launcher pid, -1 when none */
    pid_t runner_pid;                   /* runner pid as reported ("started"), -1 unknown */
    int out_fd, err_fd;                 /* read ends of the runner's stdout/stderr, -1 closed */
    int ev_fd;                          /* event socket, -1 when closed */
    int rep_fd;                         /* report socket, -1 when closed */
    int dbg_fd;                         /* the debugger's socket (section 4), -1 when closed */
    int workdir_fd;                     /* O_PATH fd of the sandbox working dir, -1 unknown */
    bool chan_moved[2];                 /* --pausable: the event [0] and debug [1] sockets are
                                         * the ones the sandbox made ("channel" reports) */
    char isolation[CB_LAUNCH_TEXT_MAX]; /* the launcher's description of confinement */
    char fatal[CB_LAUNCH_TEXT_MAX];     /* set-up failure reported by the launcher */
    bool exit_reported;                 /* launcher sent "exit ..." */
    int exit_code, exit_signal;         /* from the report (or waitpid), -1 unknown */
    bool oom;                           /* memory limit killed it */
    char reason[256];                   /* extra reason from the report */
    bool reaped;                        /* launcher waited for */
    int64_t started_ms;                 /* monotonic time of spawn */
    int64_t wait_ms;                    /* the launcher waits this long before it can start
                                         * the runner ("waiting MS": --warm wait's build) */
    long long net_seq;                  /* the network request waiting for its answer (netctl.c) */
    char net_buf[CB_LAUNCH_NET_MAX];    /* its answer's lines so far, NUL-separated */
    size_t net_len;                     /* bytes of them */
    bool net_done;                      /* the answer is complete */
    /* `snap LINE` reports (the checkpoint agent's answers, docs/SNAPSHOTS.md)
     * go here, set by the session after each spawn (cb_launch_init clears it) */
    void (*on_snap)(void *ud, const char *line);
    void *snap_ud; /* its argument */
} cb_launch_t;

void cb_launch_init(cb_launch_t *l);
/* Spawns the launcher. 0 ok, -1 (logged). */
int cb_launch_spawn(cb_launch_t *l, const cb_launch_cfg_t *cfg);
/* Handles every pending report datagram. 0 ok, -1 socket closed. */
int cb_launch_read_reports(cb_launch_t *l);
/* Sends one command datagram ("snap CMD") to the launcher on the report
 * socket.  0 ok, -1 (the launcher is gone or not reading). */
int cb_launch_command_fd(cb_launch_t *l, int fd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define cb_launch_command(l, ...) cb_launch_command_fd((l), -1, __VA_ARGS__)
/* Sends sig to the launcher if it is still ours to signal. */
void cb_launch_signal(cb_launch_t *l, int sig);
/* Reaps the launcher if it has exited (WNOHANG). true when reaped now or before. */
bool cb_launch_reap(cb_launch_t *l);
/* Closes every fd. Does not signal or reap. */
void cb_launch_close_fds(cb_launch_t *l);
/* Describes how the runner ended into buf ("exited with code 3", ...). */
void cb_launch_describe_exit(const cb_launch_t *l, char *buf, size_t len);


#endif
