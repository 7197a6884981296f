/*
 * session_loop.c - the session driver on the kernel's zloop (see
 * session_priv.h): which of the sandbox's fds are polled, for what, and the
 * one timer that wakes the session at its next deadline (stream batches,
 * the cell's timeout and its grace, the runner's hello, a retried start,
 * a bucket's refill, a checkpoint's deadline).  cb_session_sync is called
 * after anything that may change them; reading and handling what the fds
 * say is session_io.c's and session_dbg.c's.
 */
#include "kernel/session_priv.h"

#include "isolate/log.h"
#include "isolate/util.h"

#include <signal.h>
#include <stdio.h>

#define S_ASSIST_LATE_MSG_MAX 96 /* the sentence of an unanswered complete/inspect */

static int s_on_fd(zloop_t *loop, zmq_pollitem_t *item, void *arg);
static int s_on_timer(zloop_t *loop, int timer_id, void *arg);

/* `now` is the caller's: the fds it registers and this deadline must see the
 * buckets at the same instant (read the clock twice and a refill between the
 * two leaves the event fd unpolled with no timer to wake it). */
/* When a starting runner must have said hello: later by what the launcher
 * said it waits first (a warm template's build under --warm wait). */
static int64_t s_hello_due(const cb_session_t *s) {
    return s->proc.started_ms + CB_RUNNER_HELLO_TIMEOUT_MS + s->proc.wait_ms;
}

static int64_t s_next_deadline(cb_session_t *s, int64_t now) {
    int64_t d = 0;
#define S_MIN(x)                                                                                   \
    do {                                                                                           \
        int64_t x_ = (x);                                                                          \
        if (x_ > 0 && (d == 0 || x_ < d)) d = x_;                                                  \
    } while (0)
    for (int i = 0; i < 2; i++)
        if (s->streams[i].len > 0) S_MIN(s->streams[i].due_ms);
    S_MIN(s->deadline_ms);
    S_MIN(s->grace_ms);
    S_MIN(s->retry_at_ms);
    S_MIN(cb_sio_snap_deadline(s));
    if (s->state == S_STARTING) S_MIN(s_hello_due(s));
    if (s->state == S_DYING) S_MIN(s->proc.started_ms > 0 ? s->timer_at : 0);
    /* frames are waiting for the runner to read its ack */
    if (!s->paused && cb_sio_pending(s) > 0 && s->ack_pending) S_MIN(s->ack_check_ms);
    /* debugger messages buffered while the buckets were empty */
    if (!s->paused && cb_sdbg_pending(s)) S_MIN(now + cb_bucket_wait_ms(&s->frames, now) + 1);
    /* the rate: the event fd is not polled while the bucket is empty, so its
     * refill must wake the session even when nothing is buffered yet (the
     * runner's next frame is still in the socket) */
    if (!s->paused && !cb_bucket_ready(&s->frames, now))
        S_MIN(now + cb_bucket_wait_ms(&s->frames, now));
    if (!s->paused && !cb_bucket_ready(&s->bytes, now))
        S_MIN(now + cb_bucket_wait_ms(&s->bytes, now));
#undef S_MIN
    return d;
}

static void s_register(cb_session_t *s, int slot, int fd, short events) {
    zmq_pollitem_t *r = &s->reg[slot];
    if (r->events != 0 && (r->fd != fd || r->events != events)) {
        zloop_poller_end(s->loop, r);
        r->events = 0;
    }
    if (events != 0 && r->events == 0) {
        zmq_pollitem_t it = {NULL, fd, events, 0};
        if (zloop_poller(s->loop, &it, s_on_fd, s) == 0) {
            zloop_poller_set_tolerant(s->loop, &it);
            *r = it;
        }
    }
}

/* Whether more of the runner's events may be buffered now (rate, and at most
 * a frame's worth). */
static bool s_may_read_events(cb_session_t *s, int64_t now) {
    return !s->paused && cb_bucket_ready(&s->bytes, now) && cb_bucket_ready(&s->frames, now) &&
           cb_sio_pending(s) < CB_RUNNER_FRAME_MAX + CB_RUNNER_FRAME_HDR;
}

/* Registers exactly the fds the session may read now, and its next deadline. */
void cb_session_sync(cb_session_t *s) {
    int64_t now = cb_now_ms();
    bool bytes_ok = !s->paused && cb_bucket_ready(&s->bytes, now);
    /* while our last ack is unread and frames wait, the event fd is not
     * polled: the ack's recheck timer reads on instead, a chunk at a time
     * (s_on_timer).  Polling it cost a wakeup per write the sandbox trickles
     * in: under gVisor, whose writes come a few hundred bytes at a time, a
     * quarter of a core of the kernel's. */
    bool frames_ok = s_may_read_events(s, now) && !(s->ack_pending && cb_sio_pending(s) > 0);
    bool dbg_ok = bytes_ok && cb_bucket_ready(&s->frames, now) &&
                  s->dbg_in_len < CB_DAP_FRAME_MAX + CB_RUNNER_FRAME_HDR;
    int fds[S_FD_COUNT] = {s->proc.out_fd, s->proc.err_fd, s->proc.ev_fd, s->proc.rep_fd,
                           s->proc.dbg_fd};
    short ev[S_FD_COUNT] = {
        (short) (bytes_ok ? ZMQ_POLLIN : 0), (short) (bytes_ok ? ZMQ_POLLIN : 0),
        (short) ((frames_ok ? ZMQ_POLLIN : 0) | (s->out_off < s->out_len ? ZMQ_POLLOUT : 0)),
        ZMQ_POLLIN,
        (short) ((dbg_ok ? ZMQ_POLLIN : 0) |
                 (s->dbg_out_off < s->dbg_out_len ? ZMQ_POLLOUT : 0))};
    for (int i = 0; i < S_FD_COUNT; i++) /* ends first, so a reused fd number is never lost */
        if (s->reg[i].events != 0 && (fds[i] < 0 || s->reg[i].fd != fds[i] || ev[i] == 0)) {
            zloop_poller_end(s->loop, &s->reg[i]);
            s->reg[i].events = 0;
        }
    for (int i = 0; i < S_FD_COUNT; i++)
        if (fds[i] >= 0) s_register(s, i, fds[i], ev[i]);
    int64_t d = s_next_deadline(s, now);
    if (d == s->timer_at && s->timer_id >= 0) return;
    if (s->timer_id >= 0) zloop_timer_end(s->loop, s->timer_id);
    s->timer_id = -1;
    s->timer_at = d;
    if (d > 0) {
        int64_t delay = d > now ? d - now : 0;
        s->timer_id = zloop_timer(s->loop, (size_t) delay, 1, s_on_timer, s);
    }
}

static int s_on_fd(zloop_t *loop, zmq_pollitem_t *item, void *arg) {
    (void) loop;
    cb_session_t *s = arg;
    if (item->fd >= 0 && item->fd == s->proc.rep_fd) {
        cb_launch_read_reports(&s->proc);
        if (s->state == S_READY) cb_sio_take_isolation(s);
        cb_sio_snap_reports(s);
    }
    if (item->fd >= 0 && item->fd == s->proc.out_fd) cb_sio_read_pipe(s, 0, false);
    if (item->fd >= 0 && item->fd == s->proc.err_fd) cb_sio_read_pipe(s, 1, false);
    if (item->fd >= 0 && item->fd == s->proc.ev_fd) {
        if (item->revents & ZMQ_POLLOUT) cb_sio_flush_out(s);
        if (item->revents & (ZMQ_POLLIN | ZMQ_POLLERR)) cb_sio_read_events(s);
    }
    if (item->fd >= 0 && item->fd == s->proc.dbg_fd) {
        if (item->revents & ZMQ_POLLOUT) cb_sdbg_flush(s);
        if (s->proc.dbg_fd >= 0 && (item->revents & (ZMQ_POLLIN | ZMQ_POLLERR))) cb_sdbg_read(s);
    }
    cb_session_sync(s);
    return 0;
}

static int s_on_timer(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    cb_session_t *s = arg;
    if (timer_id == s->timer_id) s->timer_id = -1, s->timer_at = 0; /* fired: gone */
    int64_t now = cb_now_ms();
    for (int i = 0; i < 2; i++)
        if (cb_stream_due(&s->streams[i], now)) cb_sio_publish_stream(s, i, false);
    if (s->deadline_ms && now >= s->deadline_ms) {
        s->deadline_ms = 0;
        if (s->req == CB_REQ_EXECUTE || s->req == CB_REQ_COMM) {
            LOG_W("cell exceeded --timeout %ld s: interrupting", s->cfg->timeout_s);
            s->timed_out = true;
            s->grace_ms = now + CB_INTERRUPT_GRACE_MS;
            cb_launch_signal(&s->proc, SIGINT);
        } else if (s->req != CB_REQ_NONE) {
            LOG_W("the runner did not answer a %d request in time", (int) s->req);
            char msg[S_ASSIST_LATE_MSG_MAX];
            snprintf(msg, sizeof msg, "the sandbox did not answer within %d s",
                     CB_ASSIST_TIMEOUT_MS / 1000);
            cb_sio_end_request(s, NULL, "TimeoutError", msg, false);
        }
    }
    if (s->grace_ms && now >= s->grace_ms) {
        /* the kernel keeps this deadline alone: a stopped launcher cannot delay it */
        LOG_W("cell ignored the interrupt: killing the sandbox");
        s->grace_ms = 0;
        cb_sio_kill(s, SIGKILL);
    }
    if (s->state == S_STARTING && now >= s_hello_due(s)) {
        LOG_E("runner did not say hello within %lld ms: stopping it",
              (long long) (s_hello_due(s) - s->proc.started_ms));
        snprintf(s->proc.reason, sizeof s->proc.reason, "no hello from the runner in time");
        cb_sio_kill(s, SIGKILL);
    }
    if (s->state == S_DYING && s->timer_at == 0 && !s->proc.reaped)
        cb_launch_signal(&s->proc, SIGKILL); /* SIGTERM was not enough */
    if (s->retry_at_ms && now >= s->retry_at_ms && cb_sio_spawn(s) < 0 && s->req != CB_REQ_NONE) {
        /* a request waiting for this start gets the cause, not silence */
        char msg[CB_LAUNCH_TEXT_MAX + 64];
        snprintf(msg, sizeof msg, "The sandbox could not be started: %s", s->fatal);
        cb_sio_end_request(s, NULL, "SandboxError", msg, true);
    }
    cb_sio_snap_tick(s, now);
    if (cb_sio_pending(s) > 0) cb_sio_process(s);
    /* the ack is still unread: buffer one more chunk of what waits (see
     * cb_session_sync), so a runner that writes on stalls only once a
     * frame's worth is here */
    if (s->ack_pending && cb_sio_pending(s) > 0 && s->proc.ev_fd >= 0 &&
        s_may_read_events(s, now))
        cb_sio_read_events(s);
    if (cb_sdbg_pending(s)) cb_sdbg_process(s);
    cb_session_sync(s);
    return 0;
}
