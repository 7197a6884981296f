/*
 * test_session.c - the session driver, fed through socketpairs as if a
 * launcher and runner were on the other end: hello and the protocol
 * version, requests with their sequence numbers, every frame type, the ack
 * discipline, malformed and forged frames, budgets, and death; a reply the
 * kernel refuses ends its request at once, naming the reason.
 *
 * The "launcher" is a forked child that only waits: the test plays the
 * runner on the other ends of the sockets, and ends the child to play a
 * death.  Everything runs on a real zloop.
 */
#include "kernel/bounds.h"
#include "kernel/launch.h"
#include "kernel/session.h"
#include "tap.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int ready, ends, gone, notices, frames, streams; /* callback counts */
    cb_rframe_type_t last_type;                      /* of the last on_frame */
    bool last_late;                                  /* ... and whether late */
    char end_ename[64];                              /* of the last on_end */
    char end_msg[512];                               /* ... */
    bool end_had_frame;                              /* ... */
    char stream[4096];                               /* stdout text received */
    size_t stream_len;                               /* ... bytes */
} rec_t;

static rec_t g;
static int g_ev = -1, g_out = -1, g_rep = -1; /* the test's ends */
static pid_t g_child = -1;

static void on_ready(void *ud) { (void) ud, g.ready++; }
static void on_stream(void *ud, int which, const char *t, size_t len, bool late) {
    (void) ud, (void) late;
    if (which == 0 && g.stream_len + len < sizeof g.stream) {
        memcpy(g.stream + g.stream_len, t, len);
        g.stream_len += len;
    }
    g.streams++;
}
static void on_frame(void *ud, const cb_rframe_t *f, bool late) {
    (void) ud;
    g.frames++;
    g.last_type = f->type;
    g.last_late = late;
}
static void on_end(void *ud, const cb_req_end_t *e) {
    (void) ud;
    g.ends++;
    g.end_had_frame = e->frame != NULL;
    snprintf(g.end_ename, sizeof g.end_ename, "%s", e->ename ? e->ename : "");
    snprintf(g.end_msg, sizeof g.end_msg, "%s", e->message ? e->message : "");
}
static void on_gone(void *ud, const char *m) { (void) ud, (void) m, g.gone++; }
static void on_notice(void *ud, const char *t, bool late) {
    (void) ud, (void) t, (void) late, g.notices++;
}

/* the debugger's channel (session_dbg.c) */
static struct {
    int msgs, closed;       /* messages handed over, channel closures */
    cb_dap_kind_t kind;     /* the last one's */
    json_int_t request_seq; /* ... */
} d;
static void on_debug(void *ud, const cb_dap_msg_t *m) {
    (void) ud;
    if (m == NULL) {
        d.closed++;
        return;
    }
    d.msgs++;
    d.kind = m->kind;
    d.request_seq = m->request_seq;
}

static const cb_session_cbs_t cbs = {.on_ready = on_ready,
                                     .on_stream = on_stream,
                                     .on_frame = on_frame,
                                     .on_end = on_end,
                                     .on_gone = on_gone,
                                     .on_notice = on_notice,
                                     .on_debug = on_debug};

/* ---- the runner's side ------------------------------------------------------------- */

static void s_write_to(int fd, const char *json) {
    size_t n = strlen(json);
    uint8_t hdr[4] = {(uint8_t) (n >> 24), (uint8_t) (n >> 16), (uint8_t) (n >> 8), (uint8_t) n};
    if (write(fd, hdr, 4) != 4 || write(fd, json, n) != (ssize_t) n) perror("write");
}
static void s_write_frame(const char *json) { s_write_to(g_ev, json); }

/* Reads one frame the session sent, within ms; returns its JSON or NULL. */
static json_t *s_read_frame(int ms) {
    struct pollfd p = {g_ev, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return NULL;
    uint8_t hdr[4];
    if (read(g_ev, hdr, 4) != 4) return NULL;
    size_t n = ((size_t) hdr[0] << 24) | ((size_t) hdr[1] << 16) | ((size_t) hdr[2] << 8) | hdr[3];
    char *b = malloc(n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(g_ev, b + got, n - got);
        if (r <= 0) break;
        got += (size_t) r;
    }
    json_t *v = json_loadb(b, got, 0, NULL);
    free(b);
    return v;
}

/* Runs the loop until cond() or ms pass. */
typedef bool (*cond_fn)(void);
static cond_fn g_cond;
static int64_t g_until;
static int s_tick(zloop_t *loop, int id, void *arg) {
    (void) loop, (void) id, (void) arg;
    return (g_cond && g_cond()) || cb_now_ms() >= g_until ? -1 : 0;
}
static void s_run(zloop_t *loop, cond_fn cond, int ms) {
    g_cond = cond;
    g_until = cb_now_ms() + ms;
    int t = zloop_timer(loop, 2, 0, s_tick, NULL);
    zloop_start(loop);
    zloop_timer_end(loop, t);
}
static bool c_ready(void) { return g.ready > 0; }
static bool c_end(void) { return g.ends > 0; }
static bool c_frame(void) { return g.frames > 0; }
static bool c_never(void) { return false; }
static bool c_debug(void) { return d.msgs > 0; }
static bool c_closed(void) { return d.closed > 0; }

static cb_session_t *s_new(zloop_t *loop, cb_session_cfg_t *cfg) {
    memset(&g, 0, sizeof g);
    int ev[2], out[2], rep[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ev) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rep) < 0)
        abort();
    g_child = fork();
    if (g_child == 0) {
        pause();
        _exit(0);
    }
    cb_session_t *s = cb_session_new(cfg, &cbs, NULL, loop);
    cb_session_adopt(s, g_child, out[0], -1, ev[0], rep[0]);
    g_ev = ev[1], g_out = out[1], g_rep = rep[1];
    return s;
}

static void s_end(cb_session_t **s) {
    cb_session_quit(*s);
    if (g_child > 0) kill(g_child, SIGKILL);
    cb_session_destroy(s);
    close(g_ev), close(g_out), close(g_rep);
    g_child = -1;
}

static void s_hello(zloop_t *loop) {
    s_write_frame("{\"type\":\"hello\",\"version\":2,\"python_version\":\"3.11.2\","
                  "\"shell\":\"minimal\"}");
    s_run(loop, c_ready, 2000);
}

static json_int_t s_take_request(const char *type) {
    json_t *f = s_read_frame(2000);
    const char *t = json_string_value(json_object_get(f, "type"));
    json_int_t seq = json_integer_value(json_object_get(f, "seq"));
    TAP_OK(t && strcmp(t, type) == 0 && seq > 0, "the runner receives %s with seq %lld", type,
           (long long) seq);
    json_decref(f);
    return seq;
}

/* Writes head, n copies of unit, then tail as one frame, running the loop
 * while the socket is full: a frame larger than its buffer. */
static void s_write_padded(zloop_t *loop, const char *head, const char *unit, size_t n,
                           const char *tail) {
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail), len = hl + n * ul + tl;
    uint8_t *b = malloc(len + 4);
    b[0] = (uint8_t) (len >> 24), b[1] = (uint8_t) (len >> 16), b[2] = (uint8_t) (len >> 8);
    b[3] = (uint8_t) len;
    memcpy(b + 4, head, hl);
    for (size_t i = 0; i < n; i++)
        memcpy(b + 4 + hl + i * ul, unit, ul);
    memcpy(b + 4 + hl + n * ul, tail, tl);
    int fl = fcntl(g_ev, F_GETFL);
    fcntl(g_ev, F_SETFL, fl | O_NONBLOCK);
    for (size_t off = 0; off < len + 4;) {
        ssize_t w = write(g_ev, b + off, len + 4 - off);
        if (w > 0)
            off += (size_t) w;
        else
            s_run(loop, c_never, 2);
    }
    fcntl(g_ev, F_SETFL, fl);
    free(b);
}

/* the checkpoint callbacks: what on_done said */
static struct {
    int done;      /* calls */
    bool ok;       /* the last one's */
    char why[256]; /* ... */
} k;
static void on_snap_done(void *ud, const cb_snap_result_t *r) {
    (void) ud;
    k.done++;
    k.ok = r->ok;
    snprintf(k.why, sizeof k.why, "%s", r->why ? r->why : "");
}
static const cb_snap_cbs_t snap_cbs = {.on_done = on_snap_done};

/* 9. a reply the kernel refuses (over its bound, too many values, failing
 * its checks) ends the request it answers at once, naming the reason, and
 * the sandbox goes on; an operation the cell asked for is not left pending;
 * a refused reply for another request, or during a rollback, ends nothing */
static void s_refused_replies(zloop_t *loop, cb_session_cfg_t *cfg) {
    char buf[512], tail[64];
    cfg->timeout_s = 60;
    cb_session_t *s = s_new(loop, cfg);
    cb_session_snap_attach(s, &snap_cbs, NULL);
    s_hello(loop);
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "an execute whose done is too large");
    json_int_t seq = s_take_request("execute");
    cb_session_snap_after_cell(s, CB_SNAP_CHECKPOINT, 7); /* the cell asked for a checkpoint */
    snprintf(tail, sizeof tail, "\",\"seq\":%lld}", (long long) (seq - 1));
    s_write_padded(loop, "{\"type\":\"done\",\"status\":\"ok\",\"pad\":\"", "x", CB_FRAME_REPLY_MAX,
                   tail);
    s_run(loop, c_end, 300);
    TAP_EQ_INT(g.ends, 0, "a refused done for an earlier request ends nothing");
    int64_t t0 = cb_now_ms();
    snprintf(tail, sizeof tail, "\",\"seq\":%lld}", (long long) seq);
    s_write_padded(loop, "{\"type\":\"done\",\"status\":\"ok\",\"pad\":\"", "x", CB_FRAME_REPLY_MAX,
                   tail);
    s_run(loop, c_end, 5000);
    TAP_OK(g.ends == 1 && !g.end_had_frame && strcmp(g.end_ename, "SandboxError") == 0,
           "a refused done of the cell in flight ends it at once (%lld ms, %s)",
           (long long) (cb_now_ms() - t0), g.end_ename);
    TAP_OK(strstr(g.end_msg, "reply was refused: done of ") != NULL &&
               strstr(g.end_msg, "over its limit of") != NULL,
           "... naming the cause (%s)", g.end_msg);
    TAP_OK(k.done == 1 && !k.ok && strstr(k.why, "refused") != NULL,
           "the checkpoint it asked for is reported failed, with the reason (%s)", k.why);

    /* the session goes on: the next cell runs, and no operation is left over for it */
    g.ends = 0;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "the next execute");
    seq = s_take_request("execute");
    snprintf(buf, sizeof buf, "{\"type\":\"done\",\"seq\":%lld,\"status\":\"maybe\"}",
             (long long) seq);
    s_write_frame(buf);
    s_run(loop, c_end, 2000);
    TAP_OK(g.ends == 1 && strcmp(g.end_ename, "SandboxError") == 0 &&
               strstr(g.end_msg, "refused: done: status is neither") != NULL,
           "a done failing its check ends its cell too (%s)", g.end_msg);
    TAP_EQ_INT(k.done, 1, "... and no checkpoint was left pending for it");

    g.ends = 0;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "a third execute");
    seq = s_take_request("execute");
    snprintf(tail, sizeof tail, "],\"seq\":%lld}", (long long) seq);
    s_write_padded(loop, "{\"type\":\"done\",\"status\":\"ok\",\"payload\":[0", ",0",
                   CB_RUNNER_FRAME_NODES_MAX, tail);
    s_run(loop, c_end, 5000);
    TAP_OK(g.ends == 1 && strstr(g.end_msg, "refused: done: JSON too complex") != NULL,
           "a done of too many values ends its cell (%s)", g.end_msg);

    g.ends = 0;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_COMPLETE, json_pack("{s:s}", "type", "complete")), 0,
               "a complete");
    seq = s_take_request("complete");
    snprintf(buf, sizeof buf, "{\"type\":\"complete_reply\",\"seq\":%lld,\"matches\":[1]}",
             (long long) seq);
    s_write_frame(buf);
    s_run(loop, c_end, 2000);
    TAP_OK(g.ends == 1 && strcmp(g.end_ename, "SandboxError") == 0 &&
               strstr(g.end_msg, "matches is not a list of strings") != NULL,
           "a refused complete_reply ends the complete at once (%s)", g.end_msg);

    g.ends = 0;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "an execute after them");
    seq = s_take_request("execute");
    snprintf(buf, sizeof buf, "{\"type\":\"done\",\"seq\":%lld,\"status\":\"ok\"}",
             (long long) seq);
    s_write_frame(buf);
    s_run(loop, c_end, 2000);
    TAP_OK(g.ends == 1 && g.end_had_frame && g.end_ename[0] == '\0',
           "... ends with its own done, in the same sandbox");

    /* a rollback ends the request in flight itself: a refused done meanwhile ends nothing */
    const char *ready = "snap ready";
    if (send(g_rep, ready, strlen(ready), 0) < 0) perror("send");
    s_run(loop, c_never, 100);
    g.ends = 0;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "an execute during which a rollback starts");
    seq = s_take_request("execute");
    char why[256];
    TAP_EQ_INT(cb_session_snap(s, CB_SNAP_ROLLBACK, 3, why, sizeof why), 0, "the rollback starts");
    snprintf(buf, sizeof buf, "{\"type\":\"done\",\"seq\":%lld,\"status\":\"maybe\"}",
             (long long) seq);
    s_write_frame(buf);
    s_run(loop, c_end, 300);
    TAP_EQ_INT(g.ends, 0, "a refused done during the rollback leaves the request to it");
    s_end(&s);
    cfg->timeout_s = 0;
}

int main(void) {
    zsys_set_logstream(NULL);
    signal(SIGPIPE, SIG_IGN);
    zloop_t *loop = zloop_new();
    cb_session_cfg_t cfg = {
        "/nonexistent", "/usr/bin/python3", "/nonexistent", NULL, 0, 64, 1 << 20, NULL, NULL};
    char buf[512];

    /* 1. hello, an execute with its frames, done */
    cb_session_t *s = s_new(loop, &cfg);
    s_hello(loop);
    TAP_EQ_INT(g.ready, 1, "hello accepted");
    TAP_EQ_STR(cb_session_python_version(s), "3.11.2", "python_version from hello");
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE,
                                  json_pack("{s:s, s:s}", "type", "execute", "code", "1")),
               0, "execute accepted");
    json_int_t seq = s_take_request("execute");
    if (write(g_out, "printed\n", 8) != 8) perror("write");
    snprintf(buf, sizeof buf, "{\"type\":\"display\",\"seq\":%lld,\"data\":{\"text/plain\":\"d\"}}",
             (long long) seq);
    s_write_frame(buf);
    s_run(loop, c_frame, 2000);
    TAP_OK(g.frames == 1 && g.last_type == CB_RF_DISPLAY && !g.last_late,
           "display handed over for the request in flight");
    TAP_OK(g.stream_len == 8 && memcmp(g.stream, "printed\n", 8) == 0,
           "stdout written before the display was published before it");
    json_t *ack = s_read_frame(2000);
    TAP_EQ_STR(json_string_value(json_object_get(ack, "type")), "ack", "the display is acked");
    json_decref(ack);
    snprintf(buf, sizeof buf, "{\"type\":\"done\",\"seq\":%lld,\"status\":\"ok\"}",
             (long long) (seq + 7));
    s_write_frame(buf);
    s_run(loop, c_end, 200);
    TAP_EQ_INT(g.ends, 0, "a done for another sequence number is refused");
    s_write_frame("{\"type\":\"done\",\"status\":\"ok\"}");
    s_write_frame("garbage that is not json");
    s_write_frame("{\"type\":\"teleport\",\"seq\":1}");
    s_run(loop, c_end, 200);
    TAP_EQ_INT(g.ends, 0, "a done without seq, garbage and unknown types are dropped");
    snprintf(buf, sizeof buf, "{\"type\":\"done\",\"seq\":%lld,\"status\":\"ok\"}",
             (long long) seq);
    s_write_frame(buf);
    s_run(loop, c_end, 2000);
    TAP_OK(g.ends == 1 && g.end_had_frame && g.end_ename[0] == '\0',
           "the right done ends the request");
    snprintf(buf, sizeof buf,
             "{\"type\":\"display\",\"seq\":%lld,\"data\":{\"text/plain\":\"late\"}}",
             (long long) seq);
    g.frames = 0;
    s_write_frame(buf);
    s_run(loop, c_frame, 2000);
    TAP_OK(g.frames == 1 && g.last_late, "output after the reply is late output");
    json_decref(s_read_frame(500)); /* its ack */

    /* 2. the ack discipline: a second ordered frame waits until the ack is read */
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "second execute");
    seq = s_take_request("execute");
    g.frames = 0;
    snprintf(buf, sizeof buf, "{\"type\":\"clear_output\",\"seq\":%lld}", (long long) seq);
    s_write_frame(buf);
    s_write_frame(buf);
    s_run(loop, c_never, 300);
    TAP_EQ_INT(g.frames, 1, "with its ack unread, the next frame is not handled");
    json_decref(s_read_frame(500)); /* the runner reads the ack */
    s_run(loop, c_never, 400);
    TAP_EQ_INT(g.frames, 2, "... and is once the ack was read");
    json_decref(s_read_frame(500));

    /* 3. the cell's output budget covers frames too */
    snprintf(buf, sizeof buf, "{\"type\":\"done\",\"seq\":%lld,\"status\":\"ok\"}",
             (long long) seq);
    s_write_frame(buf);
    s_run(loop, c_end, 2000);
    cfg.cell_output_max = 300;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "third execute");
    seq = s_take_request("execute");
    g.frames = g.notices = g.ends = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(buf, sizeof buf,
                 "{\"type\":\"display\",\"seq\":%lld,\"data\":{\"text/plain\":\"%060d\"}}",
                 (long long) seq, i);
        s_write_frame(buf);
        s_run(loop, c_never, 30);
        json_t *a = s_read_frame(300);
        json_decref(a);
    }
    s_run(loop, c_never, 50);
    TAP_OK(g.frames < 10 && g.frames >= 1, "displays past the output budget are dropped (%d of 10)",
           g.frames);
    TAP_EQ_INT(g.notices, 1, "one notice says so");

    /* 4. death: the launcher reports the runner's exit and goes */
    const char *rep = "exit code=3 oom=0";
    if (send(g_rep, rep, strlen(rep), 0) < 0) perror("send");
    kill(g_child, SIGKILL); /* not ours to reap: the session does */
    cb_session_quit(s);
    for (int i = 0; i < 100 && g.ends < 1; i++) {
        cb_session_reap(s);
        s_run(loop, c_never, 10);
    }
    TAP_OK(g.ends == 1 && strcmp(g.end_ename, "SandboxError") == 0,
           "the request in flight ends when the sandbox dies (%s)", g.end_ename);
    TAP_OK(strstr(g.end_msg, "exited with code 3") != NULL, "... naming the cause (%s)", g.end_msg);
    g_child = -1;
    s_end(&s);

    /* 5. a hello of another protocol version ends the sandbox */
    cfg.cell_output_max = 1 << 20;
    s = s_new(loop, &cfg);
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "an execute waits for hello");
    s_write_frame("{\"type\":\"hello\",\"version\":1}");
    cb_session_quit(s);
    for (int i = 0; i < 200 && g.ends == 0; i++) {
        s_run(loop, c_never, 10);
        cb_session_reap(s);
    }
    TAP_EQ_INT(g.ready, 0, "a wrong version is not accepted");
    TAP_OK(g.ends == 1 && strstr(g.end_msg, "could not be started") != NULL &&
               strstr(g.end_msg, "protocol") != NULL,
           "the waiting request gets the cause (%s)", g.end_msg);
    g_child = -1;
    s_end(&s);

    /* 6. a broken length prefix is fatal for the stream */
    s = s_new(loop, &cfg);
    s_hello(loop);
    TAP_EQ_INT(cb_session_request(s, CB_REQ_COMPLETE, json_pack("{s:s}", "type", "complete")), 0,
               "complete");
    (void) s_take_request("complete");
    uint8_t zero[4] = {0, 0, 0, 0};
    if (write(g_ev, zero, 4) != 4) perror("write");
    cb_session_quit(s);
    for (int i = 0; i < 200 && g.ends == 0; i++) {
        s_run(loop, c_never, 10);
        cb_session_reap(s);
    }
    TAP_OK(g.ends == 1 && strstr(g.end_msg, "frame protocol") != NULL,
           "a zero-length frame ends the sandbox, and the request says why (%s)", g.end_msg);
    g_child = -1;
    s_end(&s);

    /* 7. the debugger's channel: checked messages handed over, events
     * charged, requests from the runner refused, a broken length closes it */
    s = s_new(loop, &cfg);
    int dbg[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dbg) < 0) abort();
    cb_session_adopt_debug(s, dbg[0]);
    s_hello(loop);
    memset(&d, 0, sizeof d);
    json_auto_t *req = json_pack("{s:s, s:i, s:s}", "type", "request", "seq", 5, "command", "x");
    TAP_EQ_INT(cb_session_debug_send(s, req), 0, "a request is queued for the runner");
    s_run(loop, c_never, 50);
    uint8_t got[256];
    ssize_t gn = read(dbg[1], got, sizeof got);
    TAP_OK(gn > 4 && memmem(got + 4, (size_t) gn - 4, "\"command\":\"x\"", 13) != NULL,
           "... and written, framed");
    s_write_to(dbg[1], "{\"type\":\"request\",\"seq\":1,\"command\":\"runInTerminal\"}");
    s_write_to(dbg[1], "{\"type\":\"response\",\"request_seq\":5,\"command\":\"x\","
                       "\"success\":true}");
    s_run(loop, c_debug, 2000);
    TAP_OK(d.msgs == 1 && d.kind == CB_DAP_RESPONSE && d.request_seq == 5,
           "the runner's request is refused, its response handed over");
    /* a rollback replaced the runner: what the old one left (a whole message
     * and half of one, still in the socket or on their way through a relay)
     * is dropped up to the copy's marker; the copy's messages after it are
     * read whole */
    const char *nonce = "0123456789abcdef0123456789abcdef";
    cb_session_debug_resync(s, nonce);
    d.msgs = 0;
    s_write_to(dbg[1], "{\"type\":\"response\",\"request_seq\":7,\"command\":\"old\","
                       "\"success\":true}");
    uint8_t half[] = {0, 0, 1, 0, '{', '"', 't', 'y', 'p', 'e', '"', ':'};
    if (write(dbg[1], half, sizeof half) != (ssize_t) sizeof half) perror("write");
    s_run(loop, c_never, 100);
    TAP_EQ_INT(d.msgs, 0, "after a rollback nothing the old runner wrote is handed over");
    s_write_to(dbg[1], "{\"type\":\"cellblock_resumed\",\"nonce\":\"0123456789abcdef"
                       "0123456789abcdef\"}");
    s_write_to(dbg[1], "{\"type\":\"response\",\"request_seq\":6,\"command\":\"y\","
                       "\"success\":true}");
    s_run(loop, c_debug, 2000);
    TAP_OK(d.msgs == 1 && d.request_seq == 6 && cb_session_debug_open(s),
           "... and the copy's first message after its marker is read whole (%d, seq %lld)", d.msgs,
           (long long) d.request_seq);
    cfg.cell_output_max = 200;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "an execute");
    (void) s_take_request("execute");
    d.msgs = 0;
    g.notices = 0;
    for (int i = 0; i < 20; i++)
        s_write_to(dbg[1], "{\"type\":\"event\",\"event\":\"output\",\"body\":{\"o\":"
                           "\"0123456789\"}}");
    s_run(loop, c_never, 300);
    TAP_OK(d.msgs >= 1 && d.msgs < 20, "events past the cell's budget are dropped (%d of 20)",
           d.msgs);
    TAP_EQ_INT(g.notices, 1, "one notice says so");
    uint8_t huge[4] = {0xff, 0xff, 0xff, 0xf0};
    if (write(dbg[1], huge, 4) != 4) perror("write");
    s_run(loop, c_closed, 2000);
    TAP_OK(d.closed == 1 && !cb_session_debug_open(s), "a broken length closes the channel");
    TAP_OK(cb_session_current(s) == CB_REQ_EXECUTE, "... and only the channel");
    close(dbg[1]);
    /* a copy that never says it: the channel closes past the bound */
    int dbg2[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dbg2) < 0) abort();
    cb_session_adopt_debug(s, dbg2[0]);
    (void) fcntl(dbg2[1], F_SETFL, O_NONBLOCK); /* the kernel reads as its buckets allow */
    cb_session_debug_resync(s, nonce);
    d.closed = 0;
    {
        static uint8_t junk[1 << 16];
        memset(junk, 'x', sizeof junk);
        for (size_t sent = 0; sent <= CB_DAP_DRAIN_MAX && d.closed == 0;) {
            ssize_t w = write(dbg2[1], junk, sizeof junk);
            if (w > 0) sent += (size_t) w;
            s_run(loop, c_never, 5);
        }
        s_run(loop, c_closed, 2000);
    }
    TAP_OK(d.closed == 1 && !cb_session_debug_open(s),
           "without the copy's marker the channel closes after %u bytes", CB_DAP_DRAIN_MAX);
    close(dbg2[1]);
    s_end(&s);

    /* 7b. the runner shuts its end of the event socket for reading: the
     * kernel's writes fail; nothing stays queued for it (a socket that stays
     * writable would wake the loop for ever), and a request that cannot be
     * handed over ends with the reason instead of waiting for its timeout */
    s = s_new(loop, &cfg);
    s_hello(loop);
    g.frames = 0;
    if (shutdown(g_ev, SHUT_RD) < 0) perror("shutdown");
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "an execute for a runner that reads nothing");
    s_run(loop, c_end, 1000);
    TAP_OK(g.ends == 1 && strcmp(g.end_ename, "KernelError") == 0,
           "... ends at once: it could not be handed over (%s)", g.end_msg);
    s_write_frame("{\"type\":\"display\",\"seq\":1,\"data\":{\"text/plain\":\"d\"}}");
    s_write_frame("{\"type\":\"display\",\"seq\":1,\"data\":{\"text/plain\":\"e\"}}");
    s_run(loop, c_never, 200);
    TAP_EQ_INT(g.frames, 2, "its frames are still read, though their acks cannot be written");
    s_end(&s);

    /* 8. the timeout waits while the cell is held at a breakpoint */
    cfg.cell_output_max = 1 << 20;
    cfg.timeout_s = 1;
    s = s_new(loop, &cfg);
    s_hello(loop);
    g.ends = 0;
    TAP_EQ_INT(cb_session_request(s, CB_REQ_EXECUTE, json_pack("{s:s}", "type", "execute")), 0,
               "an execute with --timeout 1");
    (void) s_take_request("execute");
    cb_session_hold_deadline(s, true);
    s_run(loop, c_never, 1500);
    cb_session_reap(s);
    TAP_EQ_INT(g.ends, 0, "held: no timeout after 1.5 s");
    cb_session_hold_deadline(s, false);
    cb_session_quit(s);
    for (int i = 0; i < 300 && g.ends == 0; i++) {
        s_run(loop, c_never, 10);
        cb_session_reap(s);
    }
    TAP_OK(g.ends == 1, "released: the timeout applies again");
    g_child = -1;
    s_end(&s);
    s_refused_replies(loop, &cfg);
    zloop_destroy(&loop);
    TAP_DONE();
}
