/*
 * session_priv.h - the session driver's state, shared by its two files:
 * session.c (the sandbox's life, requests, deadlines, the loop) and
 * session_io.c (reading the runner under pacing and budgets, the ack
 * discipline, writing frames).  Nothing else includes it.
 */
#ifndef CB_SESSION_PRIV_H
#define CB_SESSION_PRIV_H

#include "kernel/bounds.h"
#include "kernel/launch.h"
#include "kernel/pace.h"
#include "kernel/session.h"
#include "kernel/stream.h"

#define S_FACT_MAX 64 /* bytes of a fact from hello (versions, shell name) */

typedef enum { S_DOWN, S_STARTING, S_READY, S_DYING } s_state_t;
enum { S_FD_OUT, S_FD_ERR, S_FD_EV, S_FD_REP, S_FD_COUNT };

struct cb_session {
    const cb_session_cfg_t *cfg;        /* borrowed */
    cb_session_cbs_t cbs;               /* callbacks */
    void *ud;                           /* their argument */
    zloop_t *loop;                      /* borrowed */
    cb_launch_t proc;                   /* the launcher and its fds */
    s_state_t state;                    /* see above */
    bool quitting;                      /* no more starts */
    zmq_pollitem_t reg[S_FD_COUNT];     /* what is registered on the loop (events 0 = none) */
    int timer_id;                       /* the one timer, -1 when none */
    int64_t timer_at;                   /* when it fires */
    cb_stream_t streams[2];             /* stdout, stderr */
    uint8_t *in;                        /* event bytes read, not yet handled */
    size_t in_off;                      /* bytes of `in` already handled */
    size_t in_len, in_cap;              /* used / allocated */
    uint8_t *out;                       /* frames to write */
    size_t out_len, out_off;            /* queued / written */
    bool ack_pending;                   /* an ack sent that the runner may not have read */
    int64_t ack_check_ms;               /* look again then (backs off while unread) */
    int ack_backoff;                    /* rechecks in a row */
    bool paused;                        /* the caller's sink is congested */
    cb_bucket_t frames, bytes;          /* rates */
    cb_budget_t cell, idle, life;       /* output budgets */
    uint64_t dropped;                   /* output bytes dropped for budgets */
    char broke[128];                    /* how the runner broke the protocol, "" if not */
    cb_req_kind_t req;                  /* request in flight */
    json_t *req_frame;                  /* ... not yet sent (waiting for hello) */
    json_int_t seq;                     /* its sequence number */
    json_int_t runner_seq;              /* the execute the runner said it started last */
    int64_t deadline_ms, grace_ms;      /* execute timeout phases / assist deadline */
    bool timed_out;                     /* the timeout interrupted it */
    bool waiting_input;                 /* an input_request is unanswered */
    char isolation[CB_LAUNCH_TEXT_MAX]; /* last isolation report */
    char fatal[CB_LAUNCH_TEXT_MAX];     /* last set-up failure */
    char python_version[S_FACT_MAX];    /* from hello */
    char shell[S_FACT_MAX];             /* from hello */
    char shell_version[S_FACT_MAX];     /* from hello */
    bool was_ready;                     /* the current sandbox said hello */
    int failures;                       /* failed starts in a row */
    int64_t retry_at_ms;                /* next start after a failure, 0 = none */
    int64_t tried_ms;                   /* last start */
};

/* Event bytes read and not yet handled. */
static inline size_t cb_sio_pending(const cb_session_t *s) { return s->in_len - s->in_off; }

/* session_io.c */
void cb_sio_reset(cb_session_t *s, int64_t now);
uint64_t cb_sio_charge(cb_session_t *s, uint64_t n, bool late);
void cb_sio_notice(cb_session_t *s, cb_budget_t *b, bool late, const char *text);
void cb_sio_publish_stream(cb_session_t *s, int which, bool final);
void cb_sio_read_pipe(cb_session_t *s, int which, bool all);
void cb_sio_drain(cb_session_t *s, bool final);
void cb_sio_flush_out(cb_session_t *s);
int cb_sio_send(cb_session_t *s, const json_t *frame);
void cb_sio_send_ack(cb_session_t *s);
bool cb_sio_ack_unread(cb_session_t *s);
void cb_sio_process(cb_session_t *s);
void cb_sio_read_events(cb_session_t *s);

/* session.c */
bool cb_sio_in_exec(const cb_session_t *s);
bool cb_sio_pipes_current(const cb_session_t *s);
void cb_sio_kill(cb_session_t *s, int sig);
void cb_sio_frame(cb_session_t *s, const cb_rframe_t *f);

#endif
