/*
 * session_io.c - the session driver's intake and output (see session.c and
 * session_priv.h): the runner's pipes and frames read under the frame and
 * byte buckets, every byte charged to a budget (the cell's, the idle
 * period's, the sandbox's life), the pipes drained before each frame so
 * output keeps its order, the ack discipline (a frame is handled only once
 * the runner has read the ack of the previous ordered one), and frames
 * written to the runner.
 */
#include "kernel/session_priv.h"

#include "isolate/log.h"

#include <linux/sockios.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

void cb_sio_notice(cb_session_t *s, cb_budget_t *b, bool late, const char *text) {
    if (b->told) return;
    b->told = true;
    if (s->cbs.on_notice) s->cbs.on_notice(s->ud, text, late);
}

/* Charges n bytes of output; returns how many may be published. */
uint64_t cb_sio_charge(cb_session_t *s, uint64_t n, bool late) {
    cb_budget_t *b = late ? &s->idle : &s->cell;
    uint64_t fit = cb_budget_charge(b, n);
    fit = cb_budget_charge(&s->life, fit);
    s->dropped += n - fit;
    char note[CB_NOTICE_MAX];
    if (cb_budget_spent(&s->life) && fit < n) {
        snprintf(note, sizeof note,
                 "\n[cellblock] this sandbox has sent %llu MiB of output, its limit; further "
                 "output is discarded until it restarts\n",
                 (unsigned long long) (s->life.limit >> 20));
        cb_sio_notice(s, &s->life, late, note);
    } else if (fit < n && late) {
        snprintf(note, sizeof note,
                 "\n[cellblock] output between cells is limited to %llu KiB; further output is "
                 "discarded until the next cell\n",
                 (unsigned long long) (s->idle.limit >> 10));
        cb_sio_notice(s, &s->idle, late, note);
    } else if (fit < n) {
        snprintf(note, sizeof note,
                 "\n[cellblock] output limit of %llu MiB for this cell reached (--max-output); "
                 "further output discarded\n",
                 (unsigned long long) (s->cell.limit >> 20));
        cb_sio_notice(s, &s->cell, late, note);
    }
    return fit;
}

void cb_sio_publish_stream(cb_session_t *s, int which, bool final) {
    size_t len;
    char *text = cb_stream_take(&s->streams[which], final, &len, cb_now_ms());
    if (text == NULL) return;
    bool late = !cb_sio_pipes_current(s);
    size_t fit = (size_t) cb_sio_charge(s, len, late);
    fit = cb_utf8_prefix(text, len, fit);
    if (fit > 0 && s->cbs.on_stream) s->cbs.on_stream(s->ud, which, text, fit, late);
    free(text);
}

/* Reads what a pipe has now (up to its buffer) and publishes what is due. */
void cb_sio_read_pipe(cb_session_t *s, int which, bool all) {
    int *fd = which ? &s->proc.err_fd : &s->proc.out_fd;
    /* all: what is in the pipe now (at most its capacity: a writer that keeps
     * writing cannot hold the kernel here); else a few chunks while the rate allows */
    int max = all ? CB_PIPE_DRAIN_ROUNDS : CB_PIPE_READ_ROUNDS;
    for (int rounds = 0; *fd >= 0 && rounds < max; rounds++) {
        if (!all && !cb_bucket_ready(&s->bytes, cb_now_ms())) break;
        if (sizeof s->streams[which].buf - s->streams[which].len < CB_STREAM_CHUNK)
            cb_sio_publish_stream(s, which, false);
        ssize_t n = cb_stream_fill(&s->streams[which], *fd, cb_now_ms());
        if (n == 0) break;
        if (n < 0) {
            close(*fd);
            *fd = -1;
            break;
        }
        cb_bucket_take(&s->bytes, (double) n, cb_now_ms());
    }
    if (cb_stream_due(&s->streams[which], cb_now_ms())) cb_sio_publish_stream(s, which, false);
}

void cb_sio_drain(cb_session_t *s, bool final) {
    for (int w = 0; w < 2; w++) {
        cb_sio_read_pipe(s, w, true);
        cb_sio_publish_stream(s, w, final);
    }
}

ssize_t cb_sio_write_some(int fd, const uint8_t *data, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = send(fd, data + done, n - done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w < 0) return -1;
        done += (size_t) w;
    }
    return (ssize_t) done;
}

int cb_sio_write_queue(int fd, uint8_t **buf, size_t *len, size_t *off) {
    ssize_t w = *off < *len ? cb_sio_write_some(fd, *buf + *off, *len - *off) : 0;
    if (w < 0) return -1;
    *off += (size_t) w;
    if (*off == *len) {
        free(*buf);
        *buf = NULL;
        *len = *off = 0;
    }
    return 0;
}

/* A write error: the runner's end takes nothing more (it shut it down, or
 * it is dead).  What is queued can never be delivered: it is dropped, and
 * nothing more is queued, so neither the loop (POLLOUT on a socket that
 * stays writable) nor the ack discipline waits on it. */
static void s_out_broken(cb_session_t *s) {
    PLOG_W("send(event socket): frames for the runner are dropped from now on");
    free(s->out);
    s->out = NULL;
    s->out_len = s->out_off = 0;
    s->out_broken = true;
}

void cb_sio_flush_out(cb_session_t *s) {
    if (s->proc.ev_fd >= 0 && !s->out_broken &&
        cb_sio_write_queue(s->proc.ev_fd, &s->out, &s->out_len, &s->out_off) < 0)
        s_out_broken(s);
}

/* Queues one frame (borrowed) for the runner, encoded in place, and writes
 * what it can. 0 ok, -1 too large or too deep, or the runner takes no more. */
int cb_sio_send(cb_session_t *s, const json_t *frame) {
    if (s->out_broken) return -1;
    if (cb_frame_append(frame, CB_RUNNER_FRAME_MAX, SIZE_MAX, &s->out, &s->out_len) < 0) {
        LOG_W("a frame for the runner is too large or not encodable");
        return -1;
    }
    cb_sio_flush_out(s);
    return s->out_broken ? -1 : 0;
}

/* The ack, encoded once: one follows every ordered frame the kernel takes. */
#define S_ACK_JSON "{\"type\":\"ack\"}"
_Static_assert(sizeof S_ACK_JSON - 1 == 0x0e, "the ack's length prefix");
static const uint8_t s_ack[] = "\0\0\0\x0e" S_ACK_JSON;

void cb_sio_send_ack(cb_session_t *s) {
    const size_t n = sizeof s_ack - 1;
    if (s->out_broken || s->proc.ev_fd < 0) return;
    /* nothing queued (the rule): written from s_ack, no allocation */
    ssize_t w = s->out_len == s->out_off ? cb_sio_write_some(s->proc.ev_fd, s_ack, n) : 0;
    if (w < 0) {
        s_out_broken(s);
        return;
    }
    if ((size_t) w < n) {
        uint8_t *b = realloc(s->out, s->out_len + (n - (size_t) w));
        if (b == NULL) return;
        memcpy(b + s->out_len, s_ack + w, n - (size_t) w);
        s->out = b;
        s->out_len += n - (size_t) w;
    }
    s->ack_pending = true;
    s->ack_backoff = 0;
    s->ack_check_ms = cb_now_ms() + CB_ACK_RECHECK_MS;
}

/* True while the runner has not read everything we wrote (our last ack):
 * SIOCOUTQ of a unix socket counts what the peer has not consumed. */
bool cb_sio_ack_unread(cb_session_t *s) {
    if (!s->ack_pending) return false;
    int queued = 0;
    if (s->proc.ev_fd >= 0 &&
        (s->out_len > s->out_off || ioctl(s->proc.ev_fd, SIOCOUTQ, &queued) < 0 || queued > 0)) {
        if (s->ack_backoff < CB_ACK_BACKOFF_MAX) s->ack_backoff++;
        s->ack_check_ms = cb_now_ms() + ((int64_t) CB_ACK_RECHECK_MS << s->ack_backoff);
        return true;
    }
    s->ack_pending = false;
    return false;
}

void cb_sio_reset(cb_session_t *s, int64_t now) {
    free(s->in);
    free(s->out);
    s->in = s->out = NULL;
    s->in_off = s->in_len = s->in_cap = s->out_len = s->out_off = 0;
    s->out_broken = false;
    s->ack_pending = false;
    s->was_ready = false;
    s->broke[0] = '\0';
    for (int i = 0; i < 2; i++)
        cb_stream_reset(&s->streams[i]);
    cb_bucket_init(&s->frames, CB_SESSION_FRAME_RATE, CB_SESSION_FRAME_BURST, now);
    cb_bucket_init(&s->bytes, CB_SESSION_BYTE_RATE, CB_SESSION_BYTE_BURST, now);
    cb_budget_init(&s->idle, CB_SESSION_IDLE_OUTPUT);
    cb_budget_init(&s->life, CB_SESSION_OUTPUT_MAX);
    s->dropped = 0;
    cb_sdbg_reset(s);
    s->cell_prefix[0] = '\0';
    s->debugger = false;
}

/* Handles buffered frames while allowed. */
void cb_sio_process(cb_session_t *s) {
    while (cb_sio_pending(s) > 0 && !s->broke[0] && s->state != S_DOWN && !s->paused) {
        if (!cb_sio_snap_resync(s)) break; /* a rollback: the old runner's bytes go */
        if (cb_sio_ack_unread(s)) break;
        const uint8_t *body;
        size_t blen, used;
        int rc = cb_frame_extract(s->in + s->in_off, cb_sio_pending(s), CB_RUNNER_FRAME_MAX, &body,
                                  &blen, &used);
        if (rc == CB_FRAME_NEED) break;
        if (rc == CB_FRAME_FATAL) {
            snprintf(s->broke, sizeof s->broke, "a frame length outside 1..%u bytes",
                     (unsigned) CB_RUNNER_FRAME_MAX);
            LOG_W("runner broke the frame protocol: %s", s->broke);
            cb_sio_kill(s, SIGKILL);
            break;
        }
        int64_t now = cb_now_ms();
        cb_bucket_take(&s->frames, 1, now);
        cb_bucket_take(&s->bytes, (double) used, now);
        cb_sio_drain(s, false); /* output written before this frame goes first */
        cb_rframe_t f;
        char why[CB_NOTICE_MAX];
        if (cb_rframe_parse(body, blen, &f, why, sizeof why) == 0) {
            cb_sio_frame(s, &f);
            if (cb_rframe_needs_ack(f.type) && s->proc.ev_fd >= 0) cb_sio_send_ack(s);
            cb_rframe_clear(&f);
        } else {
            LOG_W("dropped a runner frame: %s", why);
            cb_sio_refused(s, &f, why); /* the reply awaited: its request ends now */
            /* the runner waits for the ack of an ordered frame even when the
             * kernel refuses it (metadata over its limit, too many values):
             * without one an honest cell hangs until its timeout and loses
             * its sandbox.  (No ack for what names no ordered type: the
             * runner is not waiting, and would read a stray one as a request.) */
            if (cb_rframe_needs_ack(f.type) && s->proc.ev_fd >= 0) cb_sio_send_ack(s);
        }
        s->in_off += used; /* no memmove per frame: compacted before the next read */
        if (!cb_bucket_ready(&s->frames, cb_now_ms())) break;
    }
    if (cb_sio_pending(s) == 0) {
        s->in_off = s->in_len = 0;
        if (s->in_cap > CB_FRAME_IN_KEEP) {
            free(s->in); /* a large frame came and went: give its memory back */
            s->in = NULL;
            s->in_cap = 0;
        }
    }
}

ssize_t cb_sio_read_chunk(int fd, uint8_t **buf, size_t *len, size_t *cap, size_t max) {
    size_t want = *len + CB_FRAME_IN_CHUNK;
    if (want > max) return -2; /* a whole frame is buffered: handle it first */
    if (*cap < want) {
        uint8_t *n = realloc(*buf, want);
        if (n == NULL) return -1;
        *buf = n;
        *cap = want;
    }
    ssize_t got;
    do
        got = read(fd, *buf + *len, CB_FRAME_IN_CHUNK);
    while (got < 0 && errno == EINTR);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
    if (got < 0) return -3;
    if (got == 0) return 0;
    *len += (size_t) got;
    return got;
}

void cb_sio_read_events(cb_session_t *s) {
    if (s->in_off > 0) {
        memmove(s->in, s->in + s->in_off, s->in_len - s->in_off);
        s->in_len -= s->in_off;
        s->in_off = 0;
    }
    ssize_t got = cb_sio_read_chunk(s->proc.ev_fd, &s->in, &s->in_len, &s->in_cap,
                                    CB_RUNNER_FRAME_MAX + CB_RUNNER_FRAME_HDR + CB_FRAME_IN_CHUNK);
    if (got == -1 || got == -2) return;
    if (got == 0 || got == -3) {
        LOG_I("runner closed its event socket");
        cb_sio_process(s);
        close(s->proc.ev_fd);
        s->proc.ev_fd = -1;
        if (s->snap.op == CB_SNAP_PAUSE) return; /* the pause stopped it: the tier reports */
        cb_sio_kill(s, SIGTERM);
        return;
    }
    cb_sio_process(s);
}
