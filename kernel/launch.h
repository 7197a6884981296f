/*
 * runner.h - the kernel's handle on one sandbox: the launcher process, the
 * runner's stdout/stderr pipes, the event socket (frames) and the launcher's
 * report socket (docs/RUNNER_PROTOCOL.md).
 *
 * The kernel never forks: the launcher is started with posix_spawn, an
 * explicit argv and envp, a clean signal mask, a new session, and exactly
 * fds 0-4 placed by dup2.  Everything read from these fds is untrusted.
 */
#ifndef CB_RUNNER_H
#define CB_RUNNER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum {
    CB_RUNNER_DOWN,     /* no process */
    CB_RUNNER_STARTING, /* spawned, waiting for hello */
    CB_RUNNER_READY,    /* hello received */
    CB_RUNNER_DYING,    /* EOF seen or kill sent; waiting to reap the launcher */
} cb_runner_state_t;

typedef struct {
    const char *launcher; /* path of cellblock-launcher */
    const char *python;   /* sandboxed interpreter */
    const char *runner;   /* runner.py on the host */
    char *const *extra;   /* further launcher options (borrowed), NULL-terminated */
} cb_runner_cfg_t;

typedef struct {
    cb_runner_state_t state;    /* see above */
    pid_t pid;                  /* launcher pid, -1 when none */
    pid_t runner_pid;           /* runner pid as reported ("started"), -1 unknown */
    int out_fd, err_fd;         /* read ends of the runner's stdout/stderr, -1 when closed */
    int ev_fd;                  /* event socket, -1 when closed */
    int rep_fd;                 /* report socket, -1 when closed */
    int workdir_fd;             /* O_PATH fd of the sandbox working dir, -1 unknown */
    uint8_t *in;                /* received, unparsed event bytes */
    size_t in_len, in_cap;      /* bytes used / allocated in `in` */
    uint8_t *out;               /* frames waiting to be written */
    size_t out_len, out_off;    /* bytes queued / already written */
    char isolation[512];        /* the launcher's description of confinement */
    char fatal[512];            /* set-up failure reported by the launcher */
    char python_version[32];    /* from hello */
    bool exit_reported;         /* launcher sent "exit ..." */
    int exit_code, exit_signal; /* from the report (or waitpid), -1 unknown */
    bool oom;                   /* memory limit killed it */
    char reason[256];           /* extra reason from the report */
    bool reaped;                /* launcher waited for */
    int wait_status;            /* launcher's waitpid status */
    bool protocol_error;        /* runner broke the frame protocol */
    char protocol_what[128];    /* how */
    int64_t started_ms;         /* monotonic time of spawn */
} cb_runner_t;

void cb_runner_init(cb_runner_t *r);
/* Spawns the launcher. 0 ok, -1 (logged). */
int cb_runner_spawn(cb_runner_t *r, const cb_runner_cfg_t *cfg);
/* Reads what is available on the event socket into the buffer.
 * Returns 0, or -1 on EOF/error (state becomes DYING). */
int cb_runner_read_events(cb_runner_t *r);
/* Takes the next complete frame: 1 and *out (new reference), 0 none yet.
 * A fatal framing error sets protocol_error and returns 0. */
int cb_runner_next_frame(cb_runner_t *r, json_t **out);
/* Queues a frame (borrowed) for the runner. 0 ok, -1 too large. */
int cb_runner_send(cb_runner_t *r, const json_t *frame);
/* Queues {"type":"ack"}: the runner may go on after an ordered frame. */
void cb_runner_send_ack(cb_runner_t *r);
/* Writes queued bytes without blocking. 0 ok (maybe partial), -1 peer gone. */
int cb_runner_flush(cb_runner_t *r);
bool cb_runner_wants_write(const cb_runner_t *r);
/* Handles every pending report datagram. 0 ok, -1 socket closed. */
int cb_runner_read_reports(cb_runner_t *r);
/* SIGINT to the launcher (forwarded to the runner). */
void cb_runner_interrupt(cb_runner_t *r);
/* SIGTERM to the launcher: tear the sandbox down. */
void cb_runner_kill(cb_runner_t *r);
/* Records the launcher's wait status (after waitpid). */
void cb_runner_reaped(cb_runner_t *r, int status);
/* Closes every fd and frees buffers; state DOWN. Does not signal. */
void cb_runner_close(cb_runner_t *r);
/* Describes how the runner ended into buf ("exited with code 3", ...). */
void cb_runner_describe_exit(const cb_runner_t *r, char *buf, size_t len);

int64_t cb_now_ms(void);

#endif
