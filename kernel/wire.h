/*
 * wire.h - the Jupyter wire format (messaging spec "The Wire Protocol").
 *
 * cb_wire_parse splits a received multipart message at the first
 * <IDS|MSG> frame, bounds every frame and the whole message, verifies the
 * signature (constant time, replay history) BEFORE parsing any JSON, then
 * parses the four dicts and checks their shape.  cb_wire_send builds a
 * message with a fresh msg_id and date and the kernel's session id, signs
 * the exact bytes it sends, and copies the request's identities.
 */
#ifndef CB_WIRE_H
#define CB_WIRE_H

#include "kernel/auth.h"

#include <czmq.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

/* A parsed, verified message. */
typedef struct {
    zframe_t **idents;    /* routing identity frames (owned) */
    size_t n_idents;      /* count of idents */
    json_t *header;       /* object (owned) */
    json_t *parent;       /* object (owned) */
    json_t *metadata;     /* object (owned) */
    json_t *content;      /* object (owned) */
    zframe_t **buffers;   /* binary buffers after the content (owned) */
    size_t n_buffers;     /* count of buffers */
    const char *msg_type; /* borrowed from header */
    const char *msg_id;   /* borrowed from header */
} cb_msg_t;

/* Reasons a message is dropped (cb_wire_parse returns -reason). */
enum {
    CB_WIRE_ENODELIM = 1, /* no <IDS|MSG> or too many identities */
    CB_WIRE_ESHORT,       /* fewer than 5 frames after the delimiter */
    CB_WIRE_ESIZE,        /* a frame or the message is over its limit */
    CB_WIRE_ESIG,         /* missing or wrong signature */
    CB_WIRE_EREPLAY,      /* signature seen before */
    CB_WIRE_EJSON,        /* a part is not a JSON object */
    CB_WIRE_EHEADER,      /* header lacks msg_id/msg_type strings */
    CB_WIRE_EDEPTH,       /* content nested deeper than CB_JSON_DEPTH_MAX: header and
                             parent are filled, content is an empty object, so the
                             request can be answered with an error */
};
const char *cb_wire_strerror(int reason);

/* Parses and verifies msg (borrowed; frames are copied as needed) into *out.
 * 0 ok, or -reason.  On error *out is zeroed. */
int cb_wire_parse(cb_auth_t *auth, zmsg_t *msg, cb_msg_t *out);
void cb_msg_clear(cb_msg_t *m);

/* Kernel-wide identity of every message sent, and what ZMQ still holds.
 * The pub_ ledger numbers the messages sent on a PUB socket (iopub): ZMQ
 * lets go of a message once every subscriber that took it has it in its
 * TCP buffer (or has gone), so the highest number released says how far
 * the slowest subscriber still reading has got. */
typedef struct {
    cb_auth_t *auth;                     /* borrowed */
    char session[37];                    /* one uuid per kernel process */
    const char *username;                /* "cellblock" */
    const char *version;                 /* protocol version, "5.3" */
    _Atomic uint64_t queued_bytes;       /* handed to ZMQ, not yet sent (or dropped) by it */
    _Atomic uint64_t queued_msgs;        /* messages ditto */
    uint64_t pub_sent_msgs;              /* messages sent on PUB sockets (the sending thread's) */
    uint64_t pub_sent_bytes;             /* ... their bytes, in all */
    _Atomic uint64_t pub_released_msgs;  /* the highest of those numbers ZMQ has let go of */
    _Atomic uint64_t pub_released_bytes; /* ... pub_sent_bytes as it was after that message */
} cb_wire_ctx_t;

void cb_wire_ctx_init(cb_wire_ctx_t *ctx, cb_auth_t *auth);
/* Fills buf (37 bytes) with a random UUID v4 string. */
void cb_uuid(char buf[37]);
/* ISO-8601 UTC timestamp with microseconds into buf (32 bytes). */
void cb_iso_now(char buf[32]);

/* Sends one message on sock.  idents (borrowed, may be NULL/0) are copied in
 * front; for iopub pass topic instead (NULL = "kernel.<session>.<type>").
 * parent: borrowed (NULL = {}).  metadata: steals (NULL = {}).  content:
 * STEALS the reference; NULL (a failed json_pack) is refused: nothing is
 * sent and -1 returned, never an empty reply.  The serialised parts go to
 * ZMQ without a copy and are counted in queued_bytes/queued_msgs until ZMQ
 * frees them.  0 ok, -1 failure (logged). */
int cb_wire_send(cb_wire_ctx_t *ctx, zsock_t *sock, zframe_t *const *idents, size_t n_idents,
                 const char *topic, const char *msg_type, const json_t *parent, json_t *metadata,
                 json_t *content);

/* A binary buffer to send after the content (comm messages of widgets). */
typedef struct {
    const void *data; /* borrowed */
    size_t len;       /* bytes */
} cb_wire_buf_t;

/* cb_wire_send with n_buffers buffers (borrowed, copied) after the content. */
int cb_wire_send_ex(cb_wire_ctx_t *ctx, zsock_t *sock, zframe_t *const *idents, size_t n_idents,
                    const char *topic, const char *msg_type, const json_t *parent, json_t *metadata,
                    json_t *content, const cb_wire_buf_t *buffers, size_t n_buffers);

/* cb_wire_send on a PUB socket with the content already serialised as a
 * JSON object (content_len bytes, malloc'd, stolen; lent to ZMQ as it is). */
int cb_wire_send_json(cb_wire_ctx_t *ctx, zsock_t *sock, const char *topic, const char *msg_type,
                      const json_t *parent, char *content, size_t content_len);

#endif
