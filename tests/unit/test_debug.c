/*
 * test_debug.c - debug.c over a real session: what a frontend's debug
 * request gets when the sandbox's side of the debugger's channel is gone
 * while the request is being handed over (the runner's code closed fd 4):
 * exactly one reply, to that request, and an idle whose parent is it.
 *
 * The "launcher" is a forked child that only waits; the test plays the
 * runner on the other ends of the sockets, as test_session.c does.
 */
#include "kernel/debug.h"
#include "kernel/session.h"
#include "tap.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

static cb_debug_t *g_debug;
static struct {
    int replies, idles;     /* io calls */
    bool reply_to_request;  /* the last reply's parent is the request sent */
    bool idle_to_request;   /* the last idle's parent is the request sent */
    json_int_t request_seq; /* the last reply's */
    int success;            /* ... */
} io;

static bool s_is_req(const json_t *header) {
    const char *id = json_string_value(json_object_get(header, "msg_id"));
    return id && strcmp(id, "req-1") == 0;
}

static void s_reply(void *ud, const cb_msg_t *req, json_t *content) {
    (void) ud;
    io.replies++;
    io.reply_to_request = s_is_req(req->header);
    io.request_seq = json_integer_value(json_object_get(content, "request_seq"));
    io.success = json_is_true(json_object_get(content, "success"));
    json_decref(content);
}
static void s_status(void *ud, const json_t *parent, const char *state) {
    (void) ud;
    if (strcmp(state, "idle") == 0) {
        io.idles++;
        io.idle_to_request = s_is_req(parent);
    }
}
static void s_event(void *ud, const json_t *parent, json_t *content) {
    (void) ud, (void) parent;
    json_decref(content);
}
static const cb_debug_io_t s_io = {s_reply, s_status, s_event};

static void on_debug(void *ud, const cb_dap_msg_t *m) {
    (void) ud;
    if (g_debug) cb_debug_on_message(g_debug, m);
}
static const cb_session_cbs_t cbs = {.on_debug = on_debug};

static cb_msg_t s_request(const char *command, int seq) {
    cb_msg_t m;
    memset(&m, 0, sizeof m);
    m.header = json_pack("{s:s, s:s}", "msg_id", "req-1", "msg_type", "debug_request");
    m.content = json_pack("{s:s, s:i, s:s, s:{}}", "type", "request", "seq", seq, "command",
                          command, "arguments");
    m.msg_id = json_string_value(json_object_get(m.header, "msg_id"));
    m.msg_type = json_string_value(json_object_get(m.header, "msg_type"));
    return m;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    zsys_handler_set(NULL);
    zloop_t *loop = zloop_new();
    cb_session_cfg_t cfg = {0};
    cfg.cell_output_max = 1 << 20;
    int ev[2], rep[2], dbg[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ev) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rep) < 0)
        abort();
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    /* after the fork: the child holds no copy of the runner's end */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dbg) < 0) abort();
    cb_session_t *s = cb_session_new(&cfg, &cbs, NULL, loop);
    cb_session_adopt(s, child, -1, -1, ev[0], rep[0]);
    cb_session_adopt_debug(s, dbg[0]);
    g_debug = cb_debug_new(s, &s_io, NULL, loop);

    /* 1. the runner closed its end: the request's send finds the channel
     * broken, which closes it while the request is being handed over */
    close(dbg[1]);
    cb_msg_t m = s_request("threads", 7);
    cb_debug_request(g_debug, &m);
    cb_msg_clear(&m);
    TAP_EQ_INT(io.replies, 1, "a request sent into a broken channel gets one reply");
    TAP_OK(io.reply_to_request && io.request_seq == 7 && !io.success,
           "... to that request: a failure for its seq");
    TAP_OK(io.idles == 1 && io.idle_to_request, "... and one idle, whose parent is the request");
    TAP_OK(!cb_session_debug_open(s), "the channel is closed");
    TAP_OK(cb_debug_snapshot_why(g_debug, false) == NULL ||
               strstr(cb_debug_snapshot_why(g_debug, false), "outstanding") == NULL,
           "no row is left outstanding");

    /* 2. a closed channel: answered at once, as before */
    memset(&io, 0, sizeof io);
    m = s_request("threads", 8);
    cb_debug_request(g_debug, &m);
    cb_msg_clear(&m);
    TAP_OK(io.replies == 1 && io.reply_to_request && io.request_seq == 8 && !io.success,
           "a request after that fails at once");

    cb_debug_destroy(&g_debug);
    cb_session_quit(s);
    kill(child, SIGKILL);
    cb_session_destroy(&s);
    close(ev[1]), close(rep[1]);
    zloop_destroy(&loop);
    TAP_DONE();
}
