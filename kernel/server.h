/*
 * server.h - the bottom of the kernel: five sockets, the heartbeat thread,
 * signals (signalfd), the parent check and the one zloop; verified messages
 * in, signed messages out; the pacing of iopub.
 *
 * The server knows no message type and no session: what arrives is handed
 * up through the callbacks registered at cb_server_new (dispatch.c reads
 * it), and what the layers above want sent goes out through cb_server_send
 * and cb_server_publish*.  Nothing here includes the layers above it
 * (scripts/check-layers.sh checks that).
 */
#ifndef CB_SERVER_H
#define CB_SERVER_H

#include "kernel/conn.h"
#include "kernel/wire.h"

#include <czmq.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct cb_server cb_server_t;

/* What the server reports to the layer above it.  ud is cb_server_new's. */
typedef struct {
    /* Messages may be waiting on ch (shell only while wanted, control, stdin). */
    void (*on_readable)(void *ud, cb_channel_t ch);
    /* SIGINT reached the kernel. */
    void (*on_interrupt)(void *ud);
    /* SIGCHLD: a child may have exited. */
    void (*on_child)(void *ud);
    /* iopub: stop (true) or resume reading the sandbox's output. */
    void (*on_pace)(void *ud, bool paused);
} cb_server_cbs_t;

typedef struct {
    const char *endpoints[CB_CH_COUNT]; /* where each channel binds (borrowed) */
    const uint8_t *key;                 /* HMAC key (copied; the caller wipes its own) */
    size_t key_len;                     /* 0 = signing disabled */
    bool signals;                       /* INT, TERM, HUP, CHLD through a signalfd */
    pid_t parent_pid;                   /* exit when it is gone; <= 1 = no check */
} cb_server_cfg_t;

/* Binds the sockets, starts the heartbeat thread and registers everything
 * on a new zloop.  NULL on failure (logged). */
cb_server_t *cb_server_new(const cb_server_cfg_t *cfg, const cb_server_cbs_t *cbs, void *ud);
/* Stops the heartbeat, closes the sockets and the loop; nulls *self_p. */
void cb_server_destroy(cb_server_t **self_p);
/* The loop, for whoever else registers fds and timers on it (the session). */
zloop_t *cb_server_loop(cb_server_t *self);
/* The kernel's session id (every message's header.session). */
const char *cb_server_session(const cb_server_t *self);
/* Runs the loop until cb_server_stop, SIGTERM, SIGHUP or the parent's end. */
void cb_server_run(cb_server_t *self);
/* Ends the loop at its next turn (callable from any handler). */
void cb_server_stop(cb_server_t *self);
/* Whether shell should be read: the server reads it only while wanted,
 * iopub is not congested and the loop is not stopping. */
void cb_server_want_shell(cb_server_t *self, bool want);
/* iopub holds too much for its readers: take no new work. */
bool cb_server_congested(const cb_server_t *self);

/* cb_server_recv's results. */
enum {
    CB_RECV_DROPPED = -1, /* a message was dropped (logged) */
    CB_RECV_NONE = 0,     /* nothing waiting */
    CB_RECV_OK = 1,       /* *out holds a verified message */
    CB_RECV_TOO_DEEP = 2, /* verified, but its content is nested too deeply: *out has its
                             header and parent (content {}), to be answered with an error */
};
/* Receives one message from ch into *out (cleared by the caller with
 * cb_msg_clear after OK and TOO_DEEP). */
int cb_server_recv(cb_server_t *self, cb_channel_t ch, cb_msg_t *out);
/* Drops whatever is waiting on ch. */
void cb_server_discard(cb_server_t *self, cb_channel_t ch);

/* Sends type on ch to the peer of req (its identities), as a reply to it.
 * metadata (NULL = {}) and content are stolen. */
void cb_server_reply(cb_server_t *self, cb_channel_t ch, const cb_msg_t *req, const char *type,
                     json_t *metadata, json_t *content);
/* Publishes one of the kernel's own messages on iopub (content stolen). */
void cb_server_publish(cb_server_t *self, const char *type, const json_t *parent, json_t *content);
/* Publishes a message that comes from the sandbox: metadata (NULL = {})
 * and content stolen, buffers borrowed.  Paced: see server.c. */
void cb_server_publish_output(cb_server_t *self, const char *type, const json_t *parent,
                              json_t *metadata, json_t *content, const cb_wire_buf_t *buffers,
                              size_t n_buffers);
/* The same with content already serialised (len bytes, malloc'd, stolen;
 * NULL = out of memory, nothing sent): a stream's, built in bulk. */
void cb_server_publish_output_json(cb_server_t *self, const char *type, const json_t *parent,
                                   char *content, size_t len);

#endif
