/*
 * server.c - the kernel's sockets and its one event loop (see core.h).
 *
 * One thread runs everything except the heartbeat echo: shell, control and
 * stdin requests, iopub publishing, the session's fds and timer, signals
 * (signalfd) and the parent check, all on one czmq zloop.  Shell is read
 * only while no request is in flight (later ones wait in ZMQ, in order,
 * which is what makes stop_on_error's abort meaningful) and iopub is not
 * congested.
 *
 * iopub: the kernel's own messages (status, execute_input, replies' error
 * messages) are never dropped — the socket's high-water mark is far above
 * anything they reach — while sandbox output is paced: when ZMQ holds more
 * than CB_IOPUB_INFLIGHT_MSGS messages or CB_IOPUB_INFLIGHT_BYTES bytes for
 * slow subscribers, the session stops reading the runner until it drains;
 * if it does not drain within CB_IOPUB_STALL_MS, sandbox output is dropped
 * (and counted) until it does, so one stuck client cannot stall a cell.
 */
#include "kernel/core.h"

#include "artifacts/artifacts.h"
#include "isolate/log.h"
#include "isolate/util.h"
#include "kernel/kernel.h"
#include "kernel/launch.h"

#include <malloc.h>
#include <signal.h>
#include <sodium.h>
#include <string.h>
#include <sys/signalfd.h>

#define S_MMAP_THRESHOLD (256u << 10) /* larger blocks are mmapped: freed at once to the OS */

/* ---- sending ------------------------------------------------------------------------ */

void cb_server_publish(cb_kernel_t *k, const char *msg_type, const json_t *parent,
                       json_t *content) {
    (void) cb_wire_send(&k->wire, k->sock[CB_CH_IOPUB], NULL, 0, NULL, msg_type, parent, NULL,
                        content);
}

void cb_server_status(cb_kernel_t *k, const json_t *parent, const char *state) {
    cb_server_publish(k, "status", parent, json_pack("{s:s}", "execution_state", state));
}

void cb_server_reply(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *req, const char *type,
                     json_t *metadata, json_t *content) {
    (void) cb_wire_send(&k->wire, k->sock[ch], req->idents, req->n_idents, NULL, type, req->header,
                        metadata, content);
}

static bool s_iopub_full(const cb_kernel_t *k) {
    return atomic_load(&k->wire.queued_msgs) > CB_IOPUB_INFLIGHT_MSGS ||
           atomic_load(&k->wire.queued_bytes) > CB_IOPUB_INFLIGHT_BYTES;
}

static int s_on_congestion(zloop_t *loop, int timer_id, void *arg);

static void s_congestion_check(cb_kernel_t *k) {
    bool full = s_iopub_full(k);
    int64_t now = cb_now_ms();
    if (full && !k->congested) {
        k->congested = true;
        k->congested_since = now;
        LOG_I("iopub congested (%llu messages, %llu bytes queued): pausing the sandbox",
              (unsigned long long) atomic_load(&k->wire.queued_msgs),
              (unsigned long long) atomic_load(&k->wire.queued_bytes));
    } else if (!full && k->congested) {
        k->congested = false;
        if (k->stalled)
            LOG_W("iopub drained after a stall: %llu sandbox messages were dropped",
                  (unsigned long long) k->stall_dropped);
        k->stalled = false;
    }
    if (k->congested && !k->stalled && now - k->congested_since >= CB_IOPUB_STALL_MS) {
        LOG_W("a client has not read iopub for %d ms: dropping sandbox output until it does",
              CB_IOPUB_STALL_MS);
        k->stalled = true;
    }
    if (k->session) cb_session_pause(k->session, k->congested && !k->stalled);
    if (k->congested && k->congestion_timer < 0)
        k->congestion_timer = zloop_timer(k->loop, CB_CONGESTION_POLL_MS, 0, s_on_congestion, k);
    if (!k->congested && k->congestion_timer >= 0) {
        zloop_timer_end(k->loop, k->congestion_timer);
        k->congestion_timer = -1;
    }
    cb_server_sync_shell(k);
}

static int s_on_congestion(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    (void) timer_id;
    s_congestion_check(arg);
    return 0;
}

void cb_server_publish_output(cb_kernel_t *k, const char *msg_type, const json_t *parent,
                              json_t *content) {
    cb_server_publish_buffers(k, msg_type, parent, NULL, content, NULL, 0);
}

void cb_server_publish_buffers(cb_kernel_t *k, const char *msg_type, const json_t *parent,
                               json_t *metadata, json_t *content, const cb_wire_buf_t *buffers,
                               size_t n_buffers) {
    if (k->stalled) {
        k->stall_dropped++;
        json_decref(metadata);
        json_decref(content);
        return;
    }
    (void) cb_wire_send_ex(&k->wire, k->sock[CB_CH_IOPUB], NULL, 0, NULL, msg_type, parent,
                           metadata, content, buffers, n_buffers);
    if (s_iopub_full(k) != k->congested) s_congestion_check(k);
}

/* ---- receiving ---------------------------------------------------------------------- */

int cb_server_recv(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *out) {
    zmsg_t *raw = zmsg_recv(k->sock[ch]);
    if (raw == NULL) return 0;
    int rc = cb_wire_parse(k->auth, raw, out);
    size_t size = zmsg_content_size(raw);
    zmsg_destroy(&raw);
    if (rc == -CB_WIRE_EDEPTH) {
        LOG_W("%s: %s %s nested deeper than %d levels: refused", cb_channel_name(ch), out->msg_type,
              out->msg_id, CB_JSON_DEPTH_MAX);
        cb_dispatch_refuse(k, ch, out, "the request is nested too deeply to be read");
        cb_msg_clear(out);
        return -1;
    }
    if (rc < 0) {
        LOG_W("%s: dropped a message of %zu bytes: %s", cb_channel_name(ch), size,
              cb_wire_strerror(-rc));
        return -1;
    }
    LOG_D("%s: received %s %s (%zu bytes, %zu buffers)", cb_channel_name(ch), out->msg_type,
          out->msg_id, size, out->n_buffers);
    return 1;
}

/* ---- loop handlers -------------------------------------------------------------------- */

static int s_on_shell(zloop_t *loop, zsock_t *sock, void *arg) {
    (void) loop;
    (void) sock;
    cb_kernel_t *k = arg;
    cb_dispatch_pump_shell(k);
    return k->exiting ? -1 : 0;
}

void cb_server_serve_control(cb_kernel_t *k) {
    for (;;) {
        cb_msg_t m;
        int rc = cb_server_recv(k, CB_CH_CONTROL, &m);
        if (rc == 0) break;
        if (rc < 0) continue;
        cb_dispatch(k, CB_CH_CONTROL, &m, false);
        cb_msg_clear(&m);
        if (k->exiting) break;
    }
}

static int s_on_control(zloop_t *loop, zsock_t *sock, void *arg) {
    (void) loop;
    (void) sock;
    cb_kernel_t *k = arg;
    cb_server_serve_control(k);
    return k->exiting ? -1 : 0;
}

static int s_on_stdin(zloop_t *loop, zsock_t *sock, void *arg) {
    (void) loop;
    (void) sock;
    cb_dispatch_pump_stdin(arg);
    return 0;
}

static int s_on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg) {
    (void) loop;
    (void) item;
    cb_kernel_t *k = arg;
    struct signalfd_siginfo si;
    while (read(k->sigfd, &si, sizeof si) == (ssize_t) sizeof si) {
        switch (si.ssi_signo) {
        case SIGINT:
            LOG_I("SIGINT: interrupting the running cell, if any");
            cb_session_interrupt(k->session);
            break;
        case SIGTERM:
        case SIGHUP:
            LOG_I("signal %d: shutting down", (int) si.ssi_signo);
            k->exiting = true;
            break;
        case SIGCHLD: cb_session_reap(k->session); break;
        default: break;
        }
    }
    return k->exiting ? -1 : 0;
}

static int s_on_parent(zloop_t *loop, int timer_id, void *arg) {
    (void) loop;
    (void) timer_id;
    cb_kernel_t *k = arg;
    /* like ipykernel's ParentPollerUnix: orphaned kernels exit */
    if (getppid() != k->parent_pid && kill(k->parent_pid, 0) < 0 && errno == ESRCH) {
        LOG_W("parent process %d is gone: shutting down", (int) k->parent_pid);
        k->exiting = true;
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

void cb_server_stop(cb_kernel_t *k) {
    k->exiting = true;
    cb_server_sync_shell(k);
    zloop_timer(k->loop, 0, 1, s_stop, k);
}

void cb_server_sync_shell(cb_kernel_t *k) {
    bool want = k->cur_kind == CB_REQ_NONE && !k->congested && !k->exiting;
    if (want == k->shell_read) return;
    if (want)
        zloop_reader(k->loop, k->sock[CB_CH_SHELL], s_on_shell, k);
    else
        zloop_reader_end(k->loop, k->sock[CB_CH_SHELL]);
    k->shell_read = want;
}

/* ---- heartbeat ---------------------------------------------------------------------------- */

static void *s_heartbeat(void *arg) {
    cb_kernel_t *k = arg;
    zsock_t *hb = k->sock[CB_CH_HB];
    zmq_pollitem_t it[2] = {{zsock_resolve(hb), 0, ZMQ_POLLIN, 0},
                            {zsock_resolve(k->hb_stop_rx), 0, ZMQ_POLLIN, 0}};
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

static int s_bind(cb_kernel_t *k) {
    static const int types[CB_CH_COUNT] = {ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_REP};
    for (int ch = 0; ch < CB_CH_COUNT; ch++) {
        char ep[CB_PATH_MAX];
        if (cb_conn_endpoint(&k->conn, ch, ep, sizeof ep) < 0) {
            LOG_E("endpoint for %s too long", cb_channel_name(ch));
            return -1;
        }
        zsock_t *s = zsock_new(types[ch]);
        if (s == NULL) {
            LOG_E("zsock_new(%s) failed", cb_channel_name(ch));
            return -1;
        }
        zsock_set_maxmsgsize(s, (int64_t) CB_WIRE_MAX_FRAME_BYTES);
        zsock_set_linger(s, CB_ZMQ_LINGER_MS);
        if (types[ch] == ZMQ_ROUTER) {
            zsock_set_rcvtimeo(s, 0);
            zsock_set_router_handover(s, 1);
        }
        if (ch == CB_CH_IOPUB) zsock_set_sndhwm(s, CB_IOPUB_HWM);
        if (zsock_bind(s, "%s", ep) < 0) {
            LOG_E("cannot bind %s to %s: %s", cb_channel_name(ch), ep, zmq_strerror(zmq_errno()));
            zsock_destroy(&s);
            return -1;
        }
        k->sock[ch] = s;
        LOG_D("%s bound to %s", cb_channel_name(ch), ep);
    }
    return 0;
}

/* Until the runner says hello, the version is what the interpreter's real
 * name tells (python3.11 -> 3.11), so early kernel_info replies (and
 * notebooks' language_info) are not just "3". */
static void s_guess_python_version(cb_kernel_t *k) {
    char real[CB_PATH_MAX];
    if (realpath(k->opts->c.python, real) == NULL) return;
    const char *b = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    if (strncmp(b, "python", 6) == 0 && b[6] >= '0' && b[6] <= '9' &&
        strspn(b + 6, "0123456789.") == strlen(b + 6))
        snprintf(k->python_version, sizeof k->python_version, "%.16s", b + 6);
}

static int s_setup(cb_kernel_t *k) {
    const cb_opts_t *o = k->opts;
    if (cb_opts_find_helpers(o, k->launcher_path, sizeof k->launcher_path, k->runner_path,
                             sizeof k->runner_path) < 0) {
        fprintf(stderr, "cellblock-kernel: cannot find the launcher, runner or python (see log)\n");
        return -1;
    }
    s_guess_python_version(k);
    k->auth = cb_auth_new(k->conn.key, k->conn.key_len, CB_REPLAY_HISTORY);
    sodium_memzero(k->conn.key, sizeof k->conn.key);
    if (k->auth == NULL) return -1;
    cb_wire_ctx_init(&k->wire, k->auth);
    k->queue = calloc(CB_SHELL_QUEUE_MAX, sizeof *k->queue);
    k->history = cb_history_new();
    k->comms = cb_comms_new();
    k->loop = zloop_new();
    if (k->queue == NULL || k->history == NULL || k->comms == NULL || k->loop == NULL) return -1;
    k->artifacts = cb_opts_new_artifacts(o);
    k->scfg = (cb_session_cfg_t){
        .launcher = k->launcher_path,
        .python = o->c.python,
        .runner = k->runner_path,
        .launcher_args = o->fwd,
        .timeout_s = o->c.timeout_s,
        .memory_mb = o->c.memory_mb,
        .cell_output_max = (uint64_t) o->c.max_output_mb << 20,
        .artifacts = k->artifacts,
        .preload = o->c.preload,
    };
    k->session = cb_session_new(&k->scfg, &cb_relay_callbacks, k, k->loop);
    if (k->session == NULL) return -1;
    if (strcmp(o->c.sandbox, "none") == 0)
        LOG_W("--sandbox none: user code runs WITHOUT any confinement");
    if (strcmp(o->c.network, "host") == 0)
        LOG_W("--network host: the sandbox shares the host's network");

    /* Signals: blocked before any thread exists so libzmq's threads inherit the mask. */
    k->sigfd = cb_signalfd_supervision();
    signal(SIGPIPE, SIG_IGN);
    if (k->sigfd < 0) {
        PLOG_E("signalfd");
        return -1;
    }
    zsys_handler_set(NULL);
    zsys_set_logstream(NULL);
    zsys_init();
    if (s_bind(k) < 0) return -1;
    k->hb_stop_rx = zsock_new_pair("@inproc://cellblock-hb-stop");
    k->hb_stop_tx = zsock_new_pair(">inproc://cellblock-hb-stop");
    if (k->hb_stop_rx == NULL || k->hb_stop_tx == NULL ||
        pthread_create(&k->hb_thread, NULL, s_heartbeat, k) != 0) {
        LOG_E("pthread_create(heartbeat) failed");
        return -1;
    }
    k->hb_running = true;
    zmq_pollitem_t sig = {NULL, k->sigfd, ZMQ_POLLIN, 0};
    if (zloop_reader(k->loop, k->sock[CB_CH_CONTROL], s_on_control, k) < 0 ||
        zloop_reader(k->loop, k->sock[CB_CH_STDIN], s_on_stdin, k) < 0 ||
        zloop_poller(k->loop, &sig, s_on_signal, k) < 0)
        return -1;
    k->parent_pid = getppid();
    const char *jpy = getenv("JPY_PARENT_PID");
    if (jpy && atoi(jpy) > 1) k->parent_pid = (pid_t) atoi(jpy);
    if (k->parent_pid > 1) zloop_timer(k->loop, CB_PARENT_POLL_MS, 0, s_on_parent, k);
    return 0;
}

static void s_teardown(cb_kernel_t *k) {
    k->exiting = true;
    if (k->session) cb_session_quit(k->session);
    cb_session_destroy(&k->session);
    if (k->hb_running) {
        zstr_send(k->hb_stop_tx, "stop");
        pthread_join(k->hb_thread, NULL);
    }
    if (k->cur_kind != CB_REQ_NONE) cb_msg_clear(&k->cur);
    while (k->q_len > 0) {
        cb_msg_clear(&k->queue[k->q_head].msg);
        k->q_head = (k->q_head + 1) % CB_SHELL_QUEUE_MAX;
        k->q_len--;
    }
    free(k->queue);
    cb_history_destroy(&k->history);
    cb_comms_destroy(&k->comms);
    json_decref(k->last_parent);
    cb_relay_forget_all(k);
    zloop_destroy(&k->loop);
    for (int ch = 0; ch < CB_CH_COUNT; ch++)
        zsock_destroy(&k->sock[ch]);
    zsock_destroy(&k->hb_stop_tx);
    zsock_destroy(&k->hb_stop_rx);
    cb_artifacts_destroy(&k->artifacts);
    cb_auth_destroy(&k->auth);
    if (k->sigfd >= 0) close(k->sigfd);
}

int cb_kernel_main(cb_opts_t *opts) {
    /* big blocks (frames, artifacts) go back to the OS when freed, so a
     * sandbox's burst leaves nothing behind in the kernel */
    mallopt(M_MMAP_THRESHOLD, S_MMAP_THRESHOLD);
    cb_kernel_t *k = calloc(1, sizeof *k);
    if (k == NULL) return 1;
    k->opts = opts;
    k->sigfd = -1;
    k->congestion_timer = -1;
    int rc = cb_conn_load(opts->c.connection_file, &k->conn);
    if (rc != CB_CONN_OK) {
        fprintf(stderr, "cellblock-kernel: connection file %s: %s\n",
                opts->c.connection_file ? opts->c.connection_file : "(none: use -f)",
                k->conn.error);
        free(k);
        return rc == CB_CONN_EUNSUPPORTED || opts->c.connection_file == NULL ? 2 : 1;
    }
    int status = 1;
    if (s_setup(k) == 0) {
        cb_server_status(k, NULL, "starting");
        (void) cb_session_start(k->session);
        cb_server_sync_shell(k);
        LOG_I("cellblock-kernel %s ready (session %s)", CB_VERSION, k->wire.session);
        /* zloop_start returns 0 when poll was interrupted, -1 when a handler
         * asked to stop: only the latter ends the kernel */
        while (!k->exiting && zloop_start(k->loop) == 0) {
        }
        status = 0;
    }
    s_teardown(k);
    free(k);
    return status;
}
