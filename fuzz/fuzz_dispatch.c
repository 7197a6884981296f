/*
 * fuzz_dispatch.c - signed Jupyter requests of every type, with fuzzed
 * content, through the kernel's own receive and dispatch path
 * (server.c cb_server_recv, dispatch.c's table and handlers, relay.c's
 * replies), on a kernel whose server binds inproc and whose sandbox cannot
 * start (its launcher does not exist), so execute, complete, inspect and
 * is_complete end at once with the kernel's own SandboxError or empty
 * reply, through the same on_end a real sandbox's end takes.
 *
 * This is where issue 9's "jansson references leak on malformed complete,
 * inspect and execute requests" lived: under LeakSanitizer (on in every
 * run) a leaked reference is a finding.
 *
 * Input: up to FZ_MSGS_MAX requests separated by 0xff, each
 *   <type byte><flags byte><content bytes>
 * type byte: an index into s_types (request types, a few the kernel does
 * not know, and the stdin channel's input_reply); flags bit 0-1: channel
 * (shell, control, stdin); the content is signed as it is, so it may be
 * anything: not JSON, not an object, too deep, of the wrong shape.  All
 * requests are sent first, then the kernel serves them as its loop would
 * (so an execute that fails with stop_on_error aborts the executes queued
 * behind it).
 *
 * Properties: every request whose content is an object (or is too deep to
 * read) gets exactly the replies the protocol gives its type on its
 * channel — one, or none for comm_* and unknown types — on that channel;
 * a request that cannot be read gets none; every "busy" has its "idle".
 */
#include "fuzz/common.h"
#include "kernel/debug_kernel.h"
#include "kernel/dispatch.h"
#include "kernel/relay.h"

#include <czmq.h>

#define FZ_KEY      "fuzz-dispatch-key"
#define FZ_MSGS_MAX 8   /* requests of one input */
#define FZ_WAIT_MS  200 /* a subscription must arrive within this at start */

static const struct {
    const char *type; /* msg_type */
    unsigned replies; /* channels (1 << cb_channel_t) that answer it with one reply */
} s_types[] = {
    {"kernel_info_request", (1u << CB_CH_SHELL) | (1u << CB_CH_CONTROL)},
    {"execute_request", 1u << CB_CH_SHELL},
    {"complete_request", 1u << CB_CH_SHELL},
    {"inspect_request", 1u << CB_CH_SHELL},
    {"is_complete_request", 1u << CB_CH_SHELL},
    {"history_request", 1u << CB_CH_SHELL},
    {"comm_info_request", 1u << CB_CH_SHELL},
    {"comm_open", 0},
    {"comm_msg", 0},
    {"comm_close", 0},
    {"connect_request", 1u << CB_CH_SHELL},
    {"interrupt_request", 1u << CB_CH_CONTROL},
    {"shutdown_request", (1u << CB_CH_SHELL) | (1u << CB_CH_CONTROL)},
    {"input_reply", 0},
    {"debug_request", 1u << CB_CH_CONTROL}, /* debug_kernel.c: answered whatever it holds */
    {"x", 0},
};
#define FZ_TYPES (sizeof s_types / sizeof s_types[0])

static cb_opts_t g_opts;
static cb_kernel_t g_k;
static zsock_t *g_client[CB_CH_COUNT]; /* DEALERs to shell, stdin, control */
static zsock_t *g_sub;                 /* iopub subscriber */
static cb_auth_t *g_sign;              /* the kernel's key: signs the requests */
static cb_auth_t *g_predict;           /* keyless: what the kernel's parse will say */
static unsigned long g_counter;        /* makes every msg_id, so every signature, new */

static void s_readable(void *ud, cb_channel_t ch) { cb_dispatch_serve(ud, ch); }

static zsock_t *s_connect(int type, const char *ep) {
    zsock_t *s = zsock_new(type);
    if (s == NULL) abort();
    zsock_set_rcvtimeo(s, 0);
    zsock_set_linger(s, 0);
    if (type == ZMQ_SUB) zsock_set_subscribe(s, "");
    if (zsock_connect(s, "%s", ep) < 0) abort();
    return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    zsys_handler_set(NULL);
    zsys_set_logstream(NULL);
    zsys_init();
    fz_quiet_log();
    char *args[] = {"cellblock-kernel", NULL};
    if (cb_opts_parse(1, args, &g_opts, "fuzz_dispatch", NULL, NULL) != CB_OPTS_RUN) abort();
    cb_kernel_t *k = &g_k;
    k->opts = &g_opts;
    static const cb_server_cbs_t cbs = {.on_readable = s_readable};
    cb_server_cfg_t cfg = {
        .endpoints = {"inproc://fz-shell", "inproc://fz-iopub", "inproc://fz-stdin",
                      "inproc://fz-control", "inproc://fz-hb"},
        .key = (const uint8_t *) FZ_KEY,
        .key_len = strlen(FZ_KEY),
    };
    k->srv = cb_server_new(&cfg, &cbs, k);
    k->up = &cb_relay_upcalls;
    g_sign = cb_auth_new((const uint8_t *) FZ_KEY, strlen(FZ_KEY), 1);
    g_predict = cb_auth_new(NULL, 0, 1);
    k->queue = calloc(CB_SHELL_QUEUE_MAX, sizeof *k->queue);
    k->history = cb_history_new();
    k->comms = cb_comms_new();
    snprintf(k->launcher_path, sizeof k->launcher_path, "/nonexistent/cellblock-launcher");
    snprintf(k->runner_path, sizeof k->runner_path, "/nonexistent/runner.py");
    k->scfg = (cb_session_cfg_t){
        .launcher = k->launcher_path,
        .python = g_opts.c.python,
        .runner = k->runner_path,
        .launcher_args = g_opts.fwd,
        .timeout_s = g_opts.c.timeout_s,
        .memory_mb = g_opts.c.memory_mb,
        .cell_output_max = (uint64_t) g_opts.c.max_output_mb << 20,
    };
    if (!k->srv || !g_sign || !g_predict || !k->queue || !k->history || !k->comms) abort();
    k->session = cb_session_new(&k->scfg, &cb_relay_callbacks, k, cb_server_loop(k->srv));
    if (!k->session || cb_debug_kernel_init(k) < 0) abort();
    g_client[CB_CH_SHELL] = s_connect(ZMQ_DEALER, "inproc://fz-shell");
    g_client[CB_CH_CONTROL] = s_connect(ZMQ_DEALER, "inproc://fz-control");
    g_client[CB_CH_STDIN] = s_connect(ZMQ_DEALER, "inproc://fz-stdin");
    g_sub = s_connect(ZMQ_SUB, "inproc://fz-iopub");
    /* wait until the subscription has reached the publisher */
    zsock_set_rcvtimeo(g_sub, 10);
    bool ok = false;
    for (int i = 0; i < FZ_WAIT_MS / 10 && !ok; i++) {
        cb_server_publish(k->srv, "hello", NULL, json_object());
        zmsg_t *m = zmsg_recv(g_sub);
        ok = m != NULL;
        zmsg_destroy(&m);
    }
    zsock_set_rcvtimeo(g_sub, 0);
    if (!ok) abort();
    cb_dispatch_sync_shell(k);
    return 0;
}

/* The four signed parts of a request and the frames the kernel receives. */
static zmsg_t *s_request(const char *type, const uint8_t *content, size_t len) {
    char hdr[256];
    snprintf(hdr, sizeof hdr,
             "{\"msg_id\":\"fz-%lu\",\"msg_type\":\"%s\",\"session\":\"fz\",\"username\":\"fz\","
             "\"date\":\"2024-01-01T00:00:00.000000Z\",\"version\":\"5.3\"}",
             g_counter++, type);
    cb_auth_part_t p[4] = {{hdr, strlen(hdr)}, {"{}", 2}, {"{}", 2}, {content, len}};
    char sig[CB_WIRE_SIG_HEX_LEN + 1];
    cb_auth_sign(g_sign, p, sig);
    zmsg_t *z = zmsg_new();
    zmsg_addstr(z, CB_WIRE_DELIM);
    zmsg_addstr(z, sig);
    for (int i = 0; i < 4; i++)
        zmsg_addmem(z, p[i].data, p[i].len);
    return z;
}

/* Messages waiting on a client socket, each checked to be a reply. */
static size_t s_drain(zsock_t *s, const char *what) {
    size_t n = 0;
    zmsg_t *m;
    while ((m = zmsg_recv(s)) != NULL) {
        zframe_t *f = zmsg_first(m);
        FZ_CHECK(f && zframe_streq(f, CB_WIRE_DELIM), "%s: a reply starts with the delimiter",
                 what);
        n++;
        zmsg_destroy(&m);
    }
    return n;
}

/* iopub: counts status busy and idle. */
static void s_drain_iopub(size_t *busy, size_t *idle) {
    zmsg_t *m;
    while ((m = zmsg_recv(g_sub)) != NULL) {
        zmsg_first(m); /* topic */
        zframe_t *delim = zmsg_next(m);
        FZ_CHECK(delim && zframe_streq(delim, CB_WIRE_DELIM), "iopub: topic then delimiter");
        zmsg_next(m); /* signature */
        zframe_t *h = zmsg_next(m);
        zmsg_next(m); /* parent */
        zmsg_next(m); /* metadata */
        zframe_t *c = zmsg_next(m);
        FZ_CHECK(h && c, "iopub: all parts");
        json_t *hj = json_loadb((const char *) zframe_data(h), zframe_size(h), 0, NULL);
        json_t *cj = json_loadb((const char *) zframe_data(c), zframe_size(c), 0, NULL);
        FZ_CHECK(hj && cj, "iopub: JSON the kernel wrote");
        if (strcmp(json_string_value(json_object_get(hj, "msg_type")) ?: "", "status") == 0) {
            const char *st = json_string_value(json_object_get(cj, "execution_state")) ?: "";
            *busy += strcmp(st, "busy") == 0;
            *idle += strcmp(st, "idle") == 0;
        }
        json_decref(hj);
        json_decref(cj);
        zmsg_destroy(&m);
    }
}

/* Every input starts from the same kernel state: a fresh session (whose
 * first starts fail again), history, comms and parents. */
static void s_reset(cb_kernel_t *k) {
    cb_session_destroy(&k->session);
    cb_debug_kernel_fini(k);
    k->session = cb_session_new(&k->scfg, &cb_relay_callbacks, k, cb_server_loop(k->srv));
    if (k->session && cb_debug_kernel_init(k) < 0) abort();
    cb_history_destroy(&k->history);
    k->history = cb_history_new();
    cb_comms_destroy(&k->comms);
    k->comms = cb_comms_new();
    FZ_CHECK(k->session && k->history && k->comms, "a fresh session, history and comms");
    k->exec_count = 0;
    json_decref(k->last_parent);
    k->last_parent = NULL;
    cb_relay_forget_all(k);
    k->recent_next = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cb_kernel_t *k = &g_k;
    s_reset(k);
    fz_part_t parts[FZ_MSGS_MAX];
    size_t n = fz_split(data, size, parts, FZ_MSGS_MAX);
    size_t want[CB_CH_COUNT] = {0}, dispatched = 0;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].n < 2) continue;
        const char *type = s_types[parts[i].p[0] % FZ_TYPES].type;
        unsigned replies = s_types[parts[i].p[0] % FZ_TYPES].replies;
        cb_channel_t ch = (cb_channel_t[]){CB_CH_SHELL, CB_CH_CONTROL, CB_CH_STDIN,
                                           CB_CH_SHELL}[parts[i].p[1] & 3u];
        zmsg_t *z = s_request(type, parts[i].p + 2, parts[i].n - 2);
        cb_msg_t pm;
        int pred = cb_wire_parse(g_predict, z, &pm);
        cb_msg_clear(&pm);
        FZ_CHECK(pred == 0 || pred == -CB_WIRE_EDEPTH || pred == -CB_WIRE_EJSON,
                 "the harness's own message: %d", pred);
        if (pred == -CB_WIRE_EDEPTH) {
            want[ch]++; /* refused with an error reply, wherever it came */
            dispatched++;
        } else if (pred == 0 && ch != CB_CH_STDIN) {
            want[ch] += (replies >> ch) & 1u;
            dispatched++;
        }
        FZ_CHECK(zmsg_send(&z, g_client[ch]) == 0, "send");
    }
    /* the kernel's loop: control first, shell (queued and aborted ones too), stdin */
    do {
        k->exiting = false; /* as below: a shutdown_request on control stops it too */
        cb_dispatch_serve(k, CB_CH_CONTROL);
    } while (k->exiting);
    do {
        k->exiting = false; /* a shutdown_request stops the pump: take the rest too */
        cb_dispatch_serve(k, CB_CH_SHELL);
    } while (k->exiting);
    cb_dispatch_serve(k, CB_CH_STDIN);
    k->exiting = false;
    cb_dispatch_sync_shell(k);
    FZ_CHECK(k->cur_kind == CB_REQ_NONE && k->q_len == 0, "every request served");

    static const char *const names[CB_CH_COUNT] = {"shell", "iopub", "stdin", "control", "hb"};
    for (int ch = 0; ch < CB_CH_COUNT; ch++) {
        if (g_client[ch] == NULL) continue;
        size_t got = s_drain(g_client[ch], names[ch]);
        FZ_CHECK(got == want[ch], "%s: %zu replies, the protocol gives %zu", names[ch], got,
                 want[ch]);
    }
    size_t busy = 0, idle = 0;
    s_drain_iopub(&busy, &idle);
    FZ_CHECK(busy == idle && busy >= dispatched, "status: %zu busy, %zu idle for %zu requests",
             busy, idle, dispatched);
    return 0;
}
