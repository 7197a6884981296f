/*
 * session_dbg.c - the session's debugger channel (docs/RUNNER_PROTOCOL.md
 * section 4): the runner's fd 4, a socket of its own beside the event
 * socket, carrying Debug Adapter Protocol messages framed like every other
 * frame (4-byte big-endian length + UTF-8 JSON).
 *
 * It is read as the event socket is: only while the caller's sink is not
 * congested and the session's frame and byte buckets hold tokens (the same
 * buckets: a sandbox cannot double its rate by using both), with at most one
 * frame's worth buffered; a length outside 1..CB_DAP_FRAME_MAX closes the
 * channel (it cannot be re-synchronised; the sandbox keeps running without
 * a debugger).  Every message is checked (debug_dap.c) and every event is
 * charged to the output budgets before the caller sees it.  Requests are
 * queued up to CB_DAP_OUT_MAX bytes.
 */
#include "kernel/session_priv.h"

#include "isolate/log.h"
#include "isolate/util.h"

#include <string.h>
#include <sys/socket.h>

#define S_MARK_BODY "{\"type\":\"cellblock_resumed\",\"nonce\":\"%s\"}"

/* Buffered messages wait for the buckets, not for more bytes: a part of one
 * (a runner that wrote half a message and stopped) wakes nothing. */
bool cb_sdbg_pending(const cb_session_t *s) { return s->dbg_in_len > 0 && !s->dbg_need; }

void cb_sdbg_reset(cb_session_t *s) {
    free(s->dbg_in);
    free(s->dbg_out);
    free(s->dbg_mark);
    s->dbg_in = s->dbg_out = s->dbg_mark = NULL;
    s->dbg_mark_len = s->dbg_dropped = 0;
    s->dbg_in_len = s->dbg_in_cap = s->dbg_out_len = s->dbg_out_off = 0;
    s->dbg_need = false;
}

/* The channel is gone (EOF, broken, or the sandbox ended). */
static void s_close(cb_session_t *s, const char *why) {
    if (s->proc.dbg_fd < 0) return;
    LOG_I("the debugger's channel closed: %s", why);
    close(s->proc.dbg_fd);
    s->proc.dbg_fd = -1;
    cb_sdbg_reset(s);
    if (s->cbs.on_debug) s->cbs.on_debug(s->ud, NULL);
}

/* After a rollback: false while the copy's marker has not come (what came
 * before it is dropped, and charged); true once it has, the input after it
 * kept.  Closes the channel once more than CB_DAP_DRAIN_MAX bytes came
 * without it. */
static bool s_marked(cb_session_t *s) {
    if (s->dbg_mark == NULL) return true;
    const uint8_t *at = NULL;
    size_t drop = 0; /* the bytes before the marker (all but a tail that may start it), and it */
    if (s->dbg_in_len >= s->dbg_mark_len) {
        at = memmem(s->dbg_in, s->dbg_in_len, s->dbg_mark, s->dbg_mark_len);
        drop = at ? (size_t) (at - s->dbg_in) + s->dbg_mark_len
                  : s->dbg_in_len - (s->dbg_mark_len - 1);
    }
    s->dbg_dropped += at ? drop - s->dbg_mark_len : drop;
    cb_bucket_take(&s->bytes, (double) drop, cb_now_ms());
    memmove(s->dbg_in, s->dbg_in + drop, s->dbg_in_len - drop);
    s->dbg_in_len -= drop;
    if (at == NULL && s->dbg_dropped > CB_DAP_DRAIN_MAX) {
        s_close(s, "no resumed runner's marker after a rollback");
        return false;
    }
    if (at == NULL) {
        s->dbg_need = true; /* the marker is not all here yet */
        return false;
    }
    if (s->dbg_dropped > 0)
        LOG_I("dropped %zu bytes of the replaced runner on the debugger's channel", s->dbg_dropped);
    free(s->dbg_mark);
    s->dbg_mark = NULL;
    s->dbg_mark_len = s->dbg_dropped = 0;
    return true;
}

void cb_sdbg_process(cb_session_t *s) {
    if (!s_marked(s)) return;
    size_t off = 0;
    while (s->dbg_in_len - off > 0 && !s->paused && s->proc.dbg_fd >= 0) {
        int64_t now = cb_now_ms();
        if (!cb_bucket_ready(&s->frames, now) || !cb_bucket_ready(&s->bytes, now)) break;
        const uint8_t *body;
        size_t blen, used;
        int rc = cb_frame_extract(s->dbg_in + off, s->dbg_in_len - off, CB_DAP_FRAME_MAX, &body,
                                  &blen, &used);
        if (rc == CB_FRAME_NEED) {
            s->dbg_need = true;
            break;
        }
        if (rc == CB_FRAME_FATAL) {
            LOG_W("the runner broke the debugger's framing (a length outside 1..%u)",
                  (unsigned) CB_DAP_FRAME_MAX);
            s_close(s, "broken framing");
            return;
        }
        cb_bucket_take(&s->frames, 1, now);
        cb_bucket_take(&s->bytes, (double) used, now);
        off += used;
        cb_dap_msg_t m;
        char why[CB_NOTICE_MAX];
        if (cb_dap_parse(body, blen, &m, why, sizeof why) < 0) {
            LOG_W("dropped a debugger message of %zu bytes: %s", blen, why);
            continue;
        }
        bool late = !cb_sio_in_exec(s);
        if (m.kind == CB_DAP_EVENT && cb_sio_charge(s, m.bytes, late) < m.bytes) {
            cb_dap_clear(&m); /* over budget: dropped (the notice is the budget's) */
            continue;
        }
        if (s->cbs.on_debug) s->cbs.on_debug(s->ud, &m);
        cb_dap_clear(&m);
        if (s->proc.dbg_fd < 0) return; /* the callback ended the sandbox's channel */
    }
    if (off > 0) {
        memmove(s->dbg_in, s->dbg_in + off, s->dbg_in_len - off);
        s->dbg_in_len -= off;
    }
    if (s->dbg_in_len == 0 && s->dbg_in_cap > CB_FRAME_IN_KEEP) {
        free(s->dbg_in); /* a large message came and went: give its memory back */
        s->dbg_in = NULL;
        s->dbg_in_cap = 0;
    }
}

void cb_sdbg_read(cb_session_t *s) {
    ssize_t got = cb_sio_read_chunk(s->proc.dbg_fd, &s->dbg_in, &s->dbg_in_len, &s->dbg_in_cap,
                                    CB_DAP_FRAME_MAX + CB_RUNNER_FRAME_HDR + CB_FRAME_IN_CHUNK);
    if (got == -2) {
        cb_sdbg_process(s); /* a whole message is buffered: handle it first */
        return;
    }
    if (got == -1) return;
    s->dbg_need = false; /* new bytes (or the end): what is buffered may be handled now */
    if (got == 0 || got == -3) {
        cb_sdbg_process(s);
        s_close(s, got == 0 ? "end of file" : "read error");
        return;
    }
    cb_sdbg_process(s);
}

void cb_sdbg_flush(cb_session_t *s) {
    if (s->proc.dbg_fd >= 0 &&
        cb_sio_write_queue(s->proc.dbg_fd, &s->dbg_out, &s->dbg_out_len, &s->dbg_out_off) < 0) {
        PLOG_W("send(debugger channel)");
        s_close(s, "write error");
    }
}

bool cb_session_debug_open(const cb_session_t *s) { return s->proc.dbg_fd >= 0; }

void cb_session_adopt_debug(cb_session_t *s, int dbg_fd) {
    s->proc.dbg_fd = dbg_fd;
    if (dbg_fd >= 0) cb_set_nonblock(dbg_fd, 1);
    cb_session_sync(s);
}

int cb_session_debug_send(cb_session_t *s, const json_t *msg) {
    if (s->proc.dbg_fd < 0) return -1;
    /* (at most CB_DAP_OUT_MAX bytes waiting for the runner) */
    if (cb_frame_append(msg, CB_DAP_FRAME_MAX, s->dbg_out_off + CB_DAP_OUT_MAX, &s->dbg_out,
                        &s->dbg_out_len) < 0)
        return -1;
    cb_sdbg_flush(s);
    cb_session_sync(s);
    return s->proc.dbg_fd >= 0 ? 0 : -1; /* a write error closed the channel */
}

const char *cb_session_cell_prefix(const cb_session_t *s) { return s->cell_prefix; }
bool cb_session_debugger(const cb_session_t *s) { return s->debugger; }
bool cb_session_starting(const cb_session_t *s) { return s->state == S_STARTING; }

/* The rule (README, docs/SECURITY.md): while the debugger says the cell is
 * stopped at a breakpoint, with a frontend attached, its --timeout clock
 * stops, for CB_DEBUG_HOLD_MAX_MS in all per cell (the sandbox says when it
 * is stopped, so the pause is bounded); interrupt, shutdown and restart
 * work meanwhile.  Once the timeout has interrupted the cell (the grace
 * period), nothing holds it. */
void cb_session_hold_deadline(cb_session_t *s, bool hold) {
    if (s->req != CB_REQ_EXECUTE || s->deadline_base == 0 || s->grace_ms != 0 || s->timed_out)
        return;
    int64_t now = cb_now_ms();
    if (hold && s->hold_at == 0) {
        s->hold_at = now;
        s->deadline_ms = s->deadline_base + CB_DEBUG_HOLD_MAX_MS;
    } else if (!hold && s->hold_at != 0) {
        s->held_ms += now - s->hold_at;
        s->hold_at = 0;
        s->deadline_ms = s->deadline_base +
                         (s->held_ms < CB_DEBUG_HOLD_MAX_MS ? s->held_ms : CB_DEBUG_HOLD_MAX_MS);
    }
    cb_session_sync(s);
}

void cb_session_debug_resync(cb_session_t *s, const char *nonce) {
    cb_sdbg_reset(s);
    if (s->proc.dbg_fd < 0) return;
    s->dbg_mark = cb_frame_format(&s->dbg_mark_len, S_MARK_BODY, nonce);
    if (s->dbg_mark == NULL) s_close(s, "out of memory");
}

static bool s_printable(const char *t) {
    for (; *t; t++)
        if ((unsigned char) *t < 0x20 || (unsigned char) *t > 0x7e) return false;
    return true;
}

void cb_sdbg_facts(cb_session_t *s, const char *cp, bool debugger) {
    /* echoed in debugInfo only: bounded and printable, like any fact */
    s->cell_prefix[0] = '\0';
    if (cp && cp[0] == '/' && strlen(cp) < sizeof s->cell_prefix && s_printable(cp))
        snprintf(s->cell_prefix, sizeof s->cell_prefix, "%s", cp);
    s->debugger = debugger;
}
