/*
 * server.c - the kernel's sockets and its one event loop (see server.h).
 *
 * One thread runs everything except the heartbeat echo: shell, control and
 * stdin requests, iopub publishing, the session's fds and timer (registered
 * by the session on this loop), signals (signalfd) and the parent check.
 * Shell is read only while the layer above wants it (no request in flight:
 * later ones wait in ZMQ, in order, which is what makes stop_on_error's
 * abort meaningful) and iopub is not congested.
 *
 * iopub is a PUB socket, so each subscriber has a queue of its own
 * (CB_IOPUB_SUB_HWM messages): one that stops reading loses its own
 * messages once its queue is full, the kernel's included, as with
 * ipykernel, and costs nobody else anything.  The sandbox is paced by the
 * subscribers that read: wire.c numbers iopub messages and records the
 * highest ZMQ has let go of (every subscriber that took it has it in its
 * TCP buffer); while the slowest reader is more than CB_IOPUB_LAG_MSGS or
 * CB_IOPUB_LAG_BYTES behind, on_pace asks the layer above to stop reading
 * the sandbox.  If nothing is let go of for CB_IOPUB_STUCK_MS and there is
 * more than one subscriber, what is held is held by subscribers that do not
 * read (one alone is paced, never dropped): the count restarts from the
 * newest message (the floor) and the sandbox goes on; they fill their queue
 * (allowed for until something past the floor is let go of) and drop the
 * rest.  Memory: messages are shared by the queues that hold them, and
 * while ZMQ holds more than CB_IOPUB_INFLIGHT_BYTES/_MSGS in all the
 * sandbox is paused too, whoever holds them: the kernel's memory is bounded
 * however many subscribers there are.  If the cap is still exceeded after
 * CB_IOPUB_STALL_MS (stopped subscribers holding that much, each at most
 * its queue), or a pause has seen nothing read for that long (a lone
 * subscriber that stopped), sandbox output is dropped, and counted, until
 * it drains — so no subscriber can stall a cell for longer.  (Evicting
 * stopped subscribers with TCP_USER_TIMEOUT was tried: it also cut off
 * clients that were merely slow to read.)
 */
#include "kernel/server.h"

#include "isolate/log.h"
#include "isolate/util.h" /* cb_now_ms */
#include "kernel/bounds.h"

#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define S_ZMQ_LINGER_MS  1000 /* let final replies leave on exit */
#define S_PARENT_POLL_MS 1000 /* how often the parent's life is checked */

struct cb_server {
    cb_server_cbs_t cbs;              /* the layer above */
    void *ud;                         /* ... its argument */
    cb_auth_t *auth;                  /* HMAC + replay history */
    cb_wire_ctx_t wire;               /* session id, queued-bytes counters */
    zsock_t *sock[CB_CH_COUNT];       /* hb is used by the heartbeat thread only */
    pthread_t hb_thread;              /* heartbeat echo */
    bool hb_running;                  /* hb_thread was started */
    zsock_t *hb_stop_tx, *hb_stop_rx; /* inproc pair: a message ends the heartbeat thread */
    int sigfd;                        /* signalfd for INT, TERM, CHLD, HUP, -1 = none */
    pid_t parent_pid;                 /* exit when it is gone */
    zloop_t *loop;                    /* the one event loop */
    bool want_shell;                  /* the layer above takes requests */
    bool shell_read;                  /* shell is registered on the loop */
    bool stopping;                    /* leave the loop */
    bool stop_timer;                  /* a timer to leave it was set */
    /* iopub pacing */
    bool congested;         /* readers behind, or ZMQ holds too much: the sandbox is paused */
    bool paused;            /* what on_pace last said */
    uint64_t floor_msgs;    /* the ledger's messages up to here are held by non-readers */
    uint64_t seen_released; /* pub_released_msgs at the last check */
    int64_t progress_ms;    /* when it last moved (or the pause began) */
    int64_t full_since;     /* when ZMQ began to hold over the cap, 0 = it does not */
    bool stalled;           /* over the cap too long: sandbox output is dropped */
    uint64_t stall_dropped; /* messages dropped that way */
    int congestion_timer;   /* zloop timer id, -1 when none */
    uint64_t subscribers;   /* iopub connections now (accepted minus disconnected) */
    zsock_t *iopub_mon;     /* PAIR: ZMQ's monitor events of iopub */
};

static void s_sync_shell(cb_server_t *self);

/* ---- sending ------------------------------------------------------------------------ */

void cb_server_publish(cb_server_t *self, const char *type, const json_t *parent, json_t *content) {
    (void) cb_wire_send(&self->wire, self->sock[CB_CH_IOPUB], NULL, 0, NULL, type, parent, NULL,
                        content);
}

void cb_server_reply(cb_server_t *self, cb_channel_t ch, const cb_msg_t *req, const char *type,
                     json_t *metadata, json_t *content) {
    (void) cb_wire_send(&self->wire, self->sock[ch], req->idents, req->n_idents, NULL, type,
                        req->header, metadata, content);
}

/* Over the memory cap: ZMQ holds too much of iopub, whoever holds it. */
static bool s_iopub_full(const cb_server_t *self) {
    return atomic_load(&self->wire.queued_msgs) > CB_IOPUB_INFLIGHT_MSGS ||
           atomic_load(&self->wire.queued_bytes) > CB_IOPUB_INFLIGHT_BYTES;
}

/* The slowest subscriber still reading is too far behind: sent minus the
 * highest message ZMQ let go of, counted from the floor up.  Just after the
 * floor moved, subscribers that do not read may still be filling their
 * queues (nothing is let go of until they are full): up to a queue more
 * is allowed then, and the memory cap alone bounds the bytes. */
static bool s_iopub_behind(const cb_server_t *self) {
    uint64_t rel_m = atomic_load(&self->wire.pub_released_msgs);
    uint64_t rel_b = atomic_load(&self->wire.pub_released_bytes);
    if (rel_m < self->floor_msgs)
        return self->wire.pub_sent_msgs - self->floor_msgs > CB_IOPUB_LAG_MSGS + CB_IOPUB_SUB_HWM;
    return self->wire.pub_sent_msgs - rel_m > CB_IOPUB_LAG_MSGS ||
           self->wire.pub_sent_bytes - rel_b > CB_IOPUB_LAG_BYTES;
}

static int s_on_congestion(zloop_t *loop, int timer_id, void *arg);

static void s_congestion_check(cb_server_t *self) {
    int64_t now = cb_now_ms();
    bool full = s_iopub_full(self), behind = s_iopub_behind(self);
    uint64_t released = atomic_load(&self->wire.pub_released_msgs);
    if (released != self->seen_released) {
        self->seen_released = released;
        self->progress_ms = now;
    }
    if ((full || behind) && !self->congested) {
        self->congested = true;
        self->progress_ms = now;
        LOG_D("iopub: readers behind (%llu messages, %llu bytes held): pausing the sandbox",
              (unsigned long long) atomic_load(&self->wire.queued_msgs),
              (unsigned long long) atomic_load(&self->wire.queued_bytes));
    }
    /* with one subscriber there is no one to go on for: it is paced, never dropped */
    if (self->congested && behind && self->subscribers > 1 &&
        now - self->progress_ms >= CB_IOPUB_STUCK_MS) {
        /* nothing let go of for a while: what is held is held by subscribers
         * that do not read; they drop the rest at their own queue's limit */
        LOG_I("iopub: %llu messages held by subscribers that read nothing for %d ms: "
              "going on without them (%llu subscribers)",
              (unsigned long long) (self->wire.pub_sent_msgs - released), CB_IOPUB_STUCK_MS,
              (unsigned long long) self->subscribers);
        self->floor_msgs = self->wire.pub_sent_msgs;
        self->progress_ms = now;
        behind = false;
    }
    if (full && self->full_since == 0) self->full_since = now;
    if (!full) self->full_since = 0;
    if (!full && !behind && self->congested) {
        self->congested = false;
        if (self->stalled)
            LOG_W("iopub drained after a stall: %llu sandbox messages were dropped",
                  (unsigned long long) self->stall_dropped);
        self->stalled = false;
    }
    /* the last resort: held over the cap, or nothing read at all, for long */
    bool over = full && now - self->full_since >= CB_IOPUB_STALL_MS;
    if (!self->stalled && (over || (behind && now - self->progress_ms >= CB_IOPUB_STALL_MS))) {
        LOG_W("iopub: %s: dropping sandbox output until it drains",
              over ? "ZMQ has held more than the cap for the stall time"
                   : "no subscriber has read anything for the stall time");
        self->stalled = true;
        self->stall_dropped = 0;
    }
    bool paused = self->congested && !self->stalled;
    if (paused != self->paused) {
        self->paused = paused;
        if (self->cbs.on_pace) self->cbs.on_pace(self->ud, paused);
    }
    if (self->congested && self->congestion_timer < 0)
        self->congestion_timer =
            zloop_timer(self->loop, CB_CONGESTION_POLL_MS, 0, s_on_congestion, self);
    if (!self->congested && self->congestion_timer >= 0) {
        zloop_timer_end(self->loop, self->congestion_timer);
        self->congestion_timer = -1;
    }
    s_sync_shell(self);
}

static int s_on_congestion(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    (void) timer_id;
    s_congestion_check(arg);
    return 0;
}

bool cb_server_congested(const cb_server_t *self) { return self->congested; }

/* Sandbox output while iopub is stalled is dropped (and counted). */
static bool s_output_dropped(cb_server_t *self) {
    if (self->stalled) self->stall_dropped++;
    return self->stalled;
}

static void s_output_sent(cb_server_t *self) {
    if (!self->congested && (s_iopub_full(self) || s_iopub_behind(self))) s_congestion_check(self);
}

void cb_server_publish_output(cb_server_t *self, const char *type, const json_t *parent,
                              json_t *metadata, json_t *content, const cb_wire_buf_t *buffers,
                              size_t n_buffers) {
    if (s_output_dropped(self)) {
        json_decref(metadata);
        json_decref(content);
        return;
    }
    (void) cb_wire_send_ex(&self->wire, self->sock[CB_CH_IOPUB], NULL, 0, NULL, type, parent,
                           metadata, content, buffers, n_buffers);
    s_output_sent(self);
}

void cb_server_publish_output_json(cb_server_t *self, const char *type, const json_t *parent,
                                   char *content, size_t len) {
    if (s_output_dropped(self)) {
        free(content);
        return;
    }
    (void) cb_wire_send_json(&self->wire, self->sock[CB_CH_IOPUB], NULL, type, parent, content,
                             len);
    s_output_sent(self);
}

/* ---- receiving ---------------------------------------------------------------------- */

int cb_server_recv(cb_server_t *self, cb_channel_t ch, cb_msg_t *out) {
    zmsg_t *raw = zmsg_recv(self->sock[ch]);
    if (raw == NULL) return CB_RECV_NONE;
    int rc = cb_wire_parse(self->auth, raw, out);
    size_t size = zmsg_content_size(raw);
    zmsg_destroy(&raw);
    if (rc == -CB_WIRE_EDEPTH) {
        LOG_W("%s: %s %s nested deeper than %d levels: refused", cb_channel_name(ch), out->msg_type,
              out->msg_id, CB_JSON_DEPTH_MAX);
        return CB_RECV_TOO_DEEP;
    }
    if (rc < 0) {
        LOG_W("%s: dropped a message of %zu bytes: %s", cb_channel_name(ch), size,
              cb_wire_strerror(-rc));
        return CB_RECV_DROPPED;
    }
    LOG_D("%s: received %s %s (%zu bytes, %zu buffers)", cb_channel_name(ch), out->msg_type,
          out->msg_id, size, out->n_buffers);
    return CB_RECV_OK;
}

void cb_server_discard(cb_server_t *self, cb_channel_t ch) {
    zmsg_t *stale;
    while ((stale = zmsg_recv(self->sock[ch])) != NULL)
        zmsg_destroy(&stale);
}

/* ---- loop handlers -------------------------------------------------------------------- */

static int s_on_socket(zloop_t *loop, zsock_t *sock, void *arg) {
    (void) loop;
    cb_server_t *self = arg;
    for (int ch = 0; ch < CB_CH_COUNT; ch++)
        if (self->sock[ch] == sock) self->cbs.on_readable(self->ud, (cb_channel_t) ch);
    return self->stopping ? -1 : 0;
}

/* iopub's monitor: connections accepted and ended (a peer that never
 * subscribes counts too; it holds nothing). */
static int s_on_iopub_event(zloop_t *loop, zsock_t *sock, void *arg) {
    (void) loop;
    cb_server_t *self = arg;
    for (;;) {
        zmsg_t *ev = zmsg_recv_nowait(sock);
        if (ev == NULL) break;
        zframe_t *f = zmsg_first(ev);
        if (f && zframe_size(f) >= 2) {
            uint16_t id;
            memcpy(&id, zframe_data(f), sizeof id);
            if (id == ZMQ_EVENT_ACCEPTED && self->subscribers < CB_IOPUB_SUBS_MAX)
                self->subscribers++;
            else if (id == ZMQ_EVENT_DISCONNECTED && self->subscribers > 0)
                self->subscribers--;
        }
        zmsg_destroy(&ev);
    }
    return 0;
}

static int s_on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg) {
    (void) loop;
    (void) item;
    cb_server_t *self = arg;
    struct signalfd_siginfo si;
    while (read(self->sigfd, &si, sizeof si) == (ssize_t) sizeof si) {
        switch (si.ssi_signo) {
        case SIGINT:
            LOG_I("SIGINT: interrupting the running cell, if any");
            if (self->cbs.on_interrupt) self->cbs.on_interrupt(self->ud);
            break;
        case SIGTERM:
        case SIGHUP:
            LOG_I("signal %d: shutting down", (int) si.ssi_signo);
            self->stopping = true;
            break;
        case SIGCHLD:
            if (self->cbs.on_child) self->cbs.on_child(self->ud);
            break;
        default: break;
        }
    }
    return self->stopping ? -1 : 0;
}

static int s_on_parent(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    (void) timer_id;
    cb_server_t *self = arg;
    /* like ipykernel's ParentPollerUnix: orphaned kernels exit */
    if (getppid() != self->parent_pid && kill(self->parent_pid, 0) < 0 && errno == ESRCH) {
        LOG_W("parent process %d is gone: shutting down", (int) self->parent_pid);
        self->stopping = true;
        return -1;
    }
    return 0;
}

static int s_stop(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    (void) timer_id;
    (void) arg;
    return -1;
}

void cb_server_stop(cb_server_t *self) {
    self->stopping = true;
    s_sync_shell(self);
    if (!self->stop_timer) zloop_timer(self->loop, 0, 1, s_stop, self);
    self->stop_timer = true;
}

static void s_sync_shell(cb_server_t *self) {
    bool want = self->want_shell && !self->congested && !self->stopping;
    if (want == self->shell_read) return;
    if (want)
        zloop_reader(self->loop, self->sock[CB_CH_SHELL], s_on_socket, self);
    else
        zloop_reader_end(self->loop, self->sock[CB_CH_SHELL]);
    self->shell_read = want;
}

void cb_server_want_shell(cb_server_t *self, bool want) {
    self->want_shell = want;
    s_sync_shell(self);
}

void cb_server_run(cb_server_t *self) {
    /* zloop_start returns 0 when poll was interrupted, -1 when a handler
     * asked to stop: only the latter ends the kernel */
    while (!self->stopping && zloop_start(self->loop) == 0) {
    }
}

zloop_t *cb_server_loop(cb_server_t *self) { return self->loop; }

const char *cb_server_session(const cb_server_t *self) { return self->wire.session; }

/* ---- heartbeat ---------------------------------------------------------------------------- */

static void *s_heartbeat(void *arg) {
    cb_server_t *self = arg;
    zsock_t *hb = self->sock[CB_CH_HB];
    zmq_pollitem_t it[2] = {{zsock_resolve(hb), 0, ZMQ_POLLIN, 0},
                            {zsock_resolve(self->hb_stop_rx), 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(it, 2, -1) < 0) {
            if (zmq_errno() == EINTR) continue;
            break;
        }
        if (it[1].revents) break; /* the main thread asks us to stop: at once */
        if (it[0].revents) {
            zmsg_t *m = zmsg_recv(hb);
            if (m) zmsg_send(&m, hb);
        }
    }
    return NULL;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

/* ZMQ's monitor of iopub, read on the loop: how many subscribers there are. */
static int s_monitor_iopub(cb_server_t *self) {
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://cellblock-iopub-mon-%p", (void *) self);
    if (zmq_socket_monitor(zsock_resolve(self->sock[CB_CH_IOPUB]), ep,
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) < 0) {
        LOG_E("zmq_socket_monitor(iopub): %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    self->iopub_mon = zsock_new_pair(NULL);
    if (self->iopub_mon == NULL || zsock_connect(self->iopub_mon, "%s", ep) < 0) return -1;
    return zloop_reader(self->loop, self->iopub_mon, s_on_iopub_event, self);
}

static int s_bind(cb_server_t *self, const cb_server_cfg_t *cfg) {
    static const int types[CB_CH_COUNT] = {ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_REP};
    for (int ch = 0; ch < CB_CH_COUNT; ch++) {
        zsock_t *s = zsock_new(types[ch]);
        if (s == NULL) {
            LOG_E("zsock_new(%s) failed", cb_channel_name(ch));
            return -1;
        }
        zsock_set_maxmsgsize(s, (int64_t) CB_WIRE_MAX_FRAME_BYTES);
        zsock_set_linger(s, S_ZMQ_LINGER_MS);
        if (types[ch] == ZMQ_ROUTER) {
            zsock_set_rcvtimeo(s, 0);
            zsock_set_router_handover(s, 1);
        }
        self->sock[ch] = s; /* destroyed by the caller's clean-up from here on */
        if (ch == CB_CH_IOPUB) {
            /* per subscriber: a full queue drops that subscriber's messages only */
            zsock_set_sndhwm(s, CB_IOPUB_SUB_HWM);
            /* watched before it is bound: a frontend that connected first
             * (jupyter_client's do, retrying until the bind) is counted too;
             * one missed made a slow reader beside it stall everyone's output */
            if (s_monitor_iopub(self) < 0) return -1;
        }
        if (zsock_bind(s, "%s", cfg->endpoints[ch]) < 0) {
            LOG_E("cannot bind %s to %s: %s", cb_channel_name(ch), cfg->endpoints[ch],
                  zmq_strerror(zmq_errno()));
            return -1;
        }
        LOG_D("%s bound to %s", cb_channel_name(ch), cfg->endpoints[ch]);
    }
    return 0;
}

cb_server_t *cb_server_new(const cb_server_cfg_t *cfg, const cb_server_cbs_t *cbs, void *ud) {
    cb_server_t *self = calloc(1, sizeof *self);
    if (self == NULL) return NULL;
    self->cbs = *cbs;
    self->ud = ud;
    self->sigfd = -1;
    self->congestion_timer = -1;
    self->auth = cb_auth_new(cfg->key, cfg->key_len, CB_REPLAY_HISTORY);
    if (self->auth == NULL) goto fail;
    cb_wire_ctx_init(&self->wire, self->auth);
    if (cfg->signals) {
        /* blocked before any thread exists, so libzmq's threads inherit the mask */
        self->sigfd = cb_signalfd_supervision();
        signal(SIGPIPE, SIG_IGN);
        if (self->sigfd < 0) {
            PLOG_E("signalfd");
            goto fail;
        }
    }
    zsys_handler_set(NULL);
    zsys_set_logstream(NULL);
    zsys_init();
    self->loop = zloop_new();
    if (self->loop == NULL || s_bind(self, cfg) < 0) goto fail;
    self->hb_stop_rx = zsock_new_pair("@inproc://cellblock-hb-stop");
    self->hb_stop_tx = zsock_new_pair(">inproc://cellblock-hb-stop");
    if (self->hb_stop_rx == NULL || self->hb_stop_tx == NULL ||
        pthread_create(&self->hb_thread, NULL, s_heartbeat, self) != 0) {
        LOG_E("pthread_create(heartbeat) failed");
        goto fail;
    }
    self->hb_running = true;
    if (zloop_reader(self->loop, self->sock[CB_CH_CONTROL], s_on_socket, self) < 0 ||
        zloop_reader(self->loop, self->sock[CB_CH_STDIN], s_on_socket, self) < 0)
        goto fail;
    if (self->sigfd >= 0) {
        zmq_pollitem_t sig = {NULL, self->sigfd, ZMQ_POLLIN, 0};
        if (zloop_poller(self->loop, &sig, s_on_signal, self) < 0) goto fail;
    }
    self->parent_pid = cfg->parent_pid;
    if (self->parent_pid > 1) zloop_timer(self->loop, S_PARENT_POLL_MS, 0, s_on_parent, self);
    return self;
fail:
    cb_server_destroy(&self);
    return NULL;
}

void cb_server_destroy(cb_server_t **self_p) {
    if (self_p == NULL || *self_p == NULL) return;
    cb_server_t *self = *self_p;
    if (self->hb_running) {
        zstr_send(self->hb_stop_tx, "stop");
        pthread_join(self->hb_thread, NULL);
    }
    zloop_destroy(&self->loop);
    if (self->iopub_mon && self->sock[CB_CH_IOPUB])
        zmq_socket_monitor(zsock_resolve(self->sock[CB_CH_IOPUB]), NULL, 0);
    zsock_destroy(&self->iopub_mon);
    for (int ch = 0; ch < CB_CH_COUNT; ch++)
        zsock_destroy(&self->sock[ch]);
    zsock_destroy(&self->hb_stop_tx);
    zsock_destroy(&self->hb_stop_rx);
    cb_auth_destroy(&self->auth);
    if (self->sigfd >= 0) close(self->sigfd);
    free(self);
    *self_p = NULL;
}
