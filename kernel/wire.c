/*
 * wire.c - parse and build Jupyter wire messages (see wire.h).
 *
 * Parsing order matters: count and bound frames, find the delimiter, verify
 * the HMAC over the raw bytes, and only then hand bytes to jansson.  Nothing
 * from the network reaches an assert.
 */
#include "kernel/wire.h"

#include "isolate/log.h"
#include "kernel/bounds.h"
#include "kernel/frame.h"

#include <sodium.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

const char *cb_wire_strerror(int reason) {
    switch (reason) {
    case CB_WIRE_ENODELIM: return "no <IDS|MSG> delimiter within the identity limit";
    case CB_WIRE_ESHORT: return "fewer than 5 frames after the delimiter";
    case CB_WIRE_ESIZE: return "frame or message over the size limit";
    case CB_WIRE_ESIG: return "missing or invalid signature";
    case CB_WIRE_EREPLAY: return "duplicate signature (replay)";
    case CB_WIRE_EJSON: return "a part is not a JSON object";
    case CB_WIRE_EHEADER: return "header lacks msg_id/msg_type";
    case CB_WIRE_EDEPTH: return "content nested too deeply";
    default: return "unknown";
    }
}

void cb_msg_clear(cb_msg_t *m) {
    for (size_t i = 0; i < m->n_idents; i++)
        zframe_destroy(&m->idents[i]);
    free(m->idents);
    for (size_t i = 0; i < m->n_buffers; i++)
        zframe_destroy(&m->buffers[i]);
    free(m->buffers);
    json_decref(m->header);
    json_decref(m->parent);
    json_decref(m->metadata);
    json_decref(m->content);
    memset(m, 0, sizeof *m);
}

static bool s_too_deep(zframe_t *f) {
    size_t nodes, depth;
    cb_json_measure((const char *) zframe_data(f), zframe_size(f), &nodes, &depth);
    return depth > CB_JSON_DEPTH_MAX;
}

static json_t *s_load_object(zframe_t *f) {
    if (s_too_deep(f)) return NULL;
    json_t *v = json_loadb((const char *) zframe_data(f), zframe_size(f), 0, NULL);
    if (v != NULL && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

int cb_wire_parse(cb_auth_t *auth, zmsg_t *msg, cb_msg_t *out) {
    memset(out, 0, sizeof *out);
    size_t n = zmsg_size(msg);
    if (n > CB_WIRE_MAX_IDENTS + 6 + CB_WIRE_MAX_BUFFERS) return -CB_WIRE_ESIZE;
    if (zmsg_content_size(msg) > CB_WIRE_MAX_MSG_BYTES) return -CB_WIRE_ESIZE;

    zframe_t *frames[CB_WIRE_MAX_IDENTS + 6 + CB_WIRE_MAX_BUFFERS];
    size_t i = 0;
    for (zframe_t *f = zmsg_first(msg); f != NULL; f = zmsg_next(msg)) {
        if (zframe_size(f) > CB_WIRE_MAX_FRAME_BYTES) return -CB_WIRE_ESIZE;
        frames[i++] = f;
    }
    size_t delim = n;
    const size_t dlen = sizeof CB_WIRE_DELIM - 1;
    for (i = 0; i < n && i <= CB_WIRE_MAX_IDENTS; i++) {
        if (zframe_size(frames[i]) == dlen &&
            memcmp(zframe_data(frames[i]), CB_WIRE_DELIM, dlen) == 0) {
            delim = i;
            break;
        }
        if (zframe_size(frames[i]) > CB_WIRE_MAX_IDENT_BYTES) return -CB_WIRE_ESIZE;
    }
    if (delim == n) return -CB_WIRE_ENODELIM;
    if (n - delim - 1 < 5) return -CB_WIRE_ESHORT;
    if (n - delim - 6 > CB_WIRE_MAX_BUFFERS) return -CB_WIRE_ESIZE;

    zframe_t *sig = frames[delim + 1];
    cb_auth_part_t parts[4];
    for (int k = 0; k < 4; k++) {
        parts[k].data = zframe_data(frames[delim + 2 + k]);
        parts[k].len = zframe_size(frames[delim + 2 + k]);
    }
    int v = cb_auth_verify(auth, (const char *) zframe_data(sig), zframe_size(sig), parts);
    if (v == -1) return -CB_WIRE_ESIG;
    if (v == -2) return -CB_WIRE_EREPLAY;

    out->header = s_load_object(frames[delim + 2]);
    out->parent = s_load_object(frames[delim + 3]);
    out->metadata = s_load_object(frames[delim + 4]);
    bool deep = s_too_deep(frames[delim + 5]);
    out->content = deep ? json_object() : s_load_object(frames[delim + 5]);
    if (!out->header || !out->parent || !out->metadata || !out->content) {
        cb_msg_clear(out);
        return -CB_WIRE_EJSON;
    }
    json_t *t = json_object_get(out->header, "msg_type");
    json_t *id = json_object_get(out->header, "msg_id");
    if (!json_is_string(t) || !json_is_string(id) || json_string_length(t) == 0) {
        cb_msg_clear(out);
        return -CB_WIRE_EHEADER;
    }
    out->msg_type = json_string_value(t);
    out->msg_id = json_string_value(id);
    int rc = deep ? -CB_WIRE_EDEPTH : 0;
    size_t nb = n - delim - 6;
    if (nb > 0) {
        out->buffers = calloc(nb, sizeof *out->buffers);
        if (out->buffers == NULL) {
            cb_msg_clear(out);
            return -CB_WIRE_ESIZE;
        }
        for (i = 0; i < nb; i++)
            out->buffers[i] = zframe_dup(frames[delim + 6 + i]);
        out->n_buffers = nb;
    }
    if (delim > 0) {
        out->idents = calloc(delim, sizeof *out->idents);
        if (out->idents == NULL) {
            cb_msg_clear(out);
            return -CB_WIRE_ESIZE;
        }
        for (i = 0; i < delim; i++)
            out->idents[i] = zframe_dup(frames[i]);
        out->n_idents = delim;
    }
    return rc;
}

void cb_uuid(char buf[37]) {
    uint8_t b[16];
    randombytes_buf(b, sizeof b);
    b[6] = (uint8_t) ((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);
    char hex[33];
    sodium_bin2hex(hex, sizeof hex, b, sizeof b);
    snprintf(buf, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

void cb_iso_now(char buf[32]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char day[24];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, 32, "%.19s.%06uZ", day,
             (unsigned) ((unsigned long) ts.tv_nsec / 1000u % 1000000u));
}

void cb_wire_ctx_init(cb_wire_ctx_t *ctx, cb_auth_t *auth) {
    ctx->auth = auth;
    cb_uuid(ctx->session);
    ctx->username = "cellblock";
    ctx->version = "5.3";
    atomic_init(&ctx->queued_bytes, 0);
    atomic_init(&ctx->queued_msgs, 0);
    ctx->pub_sent_msgs = ctx->pub_sent_bytes = 0;
    atomic_init(&ctx->pub_released_msgs, 0);
    atomic_init(&ctx->pub_released_bytes, 0);
}

/* A serialised part lent to ZMQ: freed, and uncounted, when ZMQ is done. */
typedef struct {
    cb_wire_ctx_t *ctx; /* whose counters */
    size_t len;         /* bytes counted */
    bool last;          /* the content part: counts the message */
    uint64_t pub_seq;   /* last part of a PUB message: its number in the ledger, else 0 */
    uint64_t pub_bytes; /* ... and pub_sent_bytes after it */
} s_lent_t;

static void s_atomic_max(_Atomic uint64_t *v, uint64_t x) {
    uint64_t cur = atomic_load(v);
    while (cur < x && !atomic_compare_exchange_weak(v, &cur, x)) {
    }
}

/* Runs in whichever thread drops ZMQ's last reference: its I/O thread, or ours. */
static void s_lent_free(void *data, void *hint) {
    s_lent_t *l = hint;
    atomic_fetch_sub(&l->ctx->queued_bytes, l->len);
    if (l->last) atomic_fetch_sub(&l->ctx->queued_msgs, 1);
    if (l->pub_seq) {
        s_atomic_max(&l->ctx->pub_released_msgs, l->pub_seq);
        s_atomic_max(&l->ctx->pub_released_bytes, l->pub_bytes);
    }
    free(data);
    free(l);
}

/* Sends bytes (len of them, malloc'd, stolen) as one part without copying;
 * pub_seq != 0 marks the last part of a PUB message (the ledger). */
static int s_send_lent(void *raw, cb_wire_ctx_t *ctx, char *bytes, size_t len, bool last,
                       bool more, uint64_t pub_seq) {
    s_lent_t *l = malloc(sizeof *l);
    zmq_msg_t m;
    if (l == NULL || zmq_msg_init_data(&m, bytes, len, s_lent_free, l) < 0) {
        free(l);
        free(bytes);
        return -1;
    }
    *l = (s_lent_t){ctx, len, last, pub_seq, ctx->pub_sent_bytes};
    atomic_fetch_add(&ctx->queued_bytes, len);
    if (last) atomic_fetch_add(&ctx->queued_msgs, 1);
    int rc = zmq_msg_send(&m, raw, more ? ZMQ_DONTWAIT | ZMQ_SNDMORE : ZMQ_DONTWAIT);
    if (rc < 0) zmq_msg_close(&m); /* frees through s_lent_free */
    return rc < 0 ? -1 : 0;
}

static int s_send_copy(void *raw, const void *data, size_t len) {
    return zmq_send(raw, data, len, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0 ? -1 : 0;
}

int cb_wire_send(cb_wire_ctx_t *ctx, zsock_t *sock, zframe_t *const *idents, size_t n_idents,
                 const char *topic, const char *msg_type, const json_t *parent, json_t *metadata,
                 json_t *content) {
    return cb_wire_send_ex(ctx, sock, idents, n_idents, topic, msg_type, parent, metadata, content,
                           NULL, 0);
}

/* Signs and sends one message whose content is already serialised (content:
 * content_len bytes, malloc'd, stolen); metadata is stolen too. */
static int s_send(cb_wire_ctx_t *ctx, zsock_t *sock, zframe_t *const *idents, size_t n_idents,
                  const char *topic, const char *msg_type, const json_t *parent, json_t *metadata,
                  char *content, size_t content_len, const cb_wire_buf_t *buffers,
                  size_t n_buffers) {
    json_auto_t *meta = metadata ? metadata : json_object();
    char msg_id[37], date[32];
    cb_uuid(msg_id);
    cb_iso_now(date);
    json_auto_t *header = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "msg_id", msg_id, "session",
                                    ctx->session, "username", ctx->username, "date", date,
                                    "msg_type", msg_type, "version", ctx->version);
    char *bytes[4] = {NULL, NULL, NULL, content};
    int rc = -1;
    if (header == NULL || meta == NULL) goto out;
    bytes[0] = json_dumps(header, JSON_COMPACT);
    bytes[1] = parent ? json_dumps(parent, JSON_COMPACT) : strdup("{}");
    bytes[2] = json_dumps(meta, JSON_COMPACT);
    for (int k = 0; k < 3; k++)
        if (bytes[k] == NULL) {
            LOG_E("json_dumps failed for %s", msg_type);
            goto out;
        }
    cb_auth_part_t parts[4];
    for (int k = 0; k < 4; k++)
        parts[k] = (cb_auth_part_t){bytes[k], k == 3 ? content_len : strlen(bytes[k])};
    char sig[CB_WIRE_SIG_HEX_LEN + 1];
    cb_auth_sign(ctx->auth, parts, sig);

    void *raw = zsock_resolve(sock);
    bool pub = zsock_type(sock) == ZMQ_PUB;
    uint64_t pub_seq = 0;
    if (pub) {
        pub_seq = ++ctx->pub_sent_msgs;
        for (int k = 0; k < 4; k++)
            ctx->pub_sent_bytes += parts[k].len;
    }
    int bad = 0;
    if (topic != NULL) {
        bad |= s_send_copy(raw, topic, strlen(topic));
    } else if (idents == NULL && pub) {
        char t[128];
        snprintf(t, sizeof t, "kernel.%s.%s", ctx->session, msg_type);
        bad |= s_send_copy(raw, t, strlen(t));
    } else {
        for (size_t i = 0; i < n_idents && !bad; i++)
            bad |= s_send_copy(raw, zframe_data(idents[i]), zframe_size(idents[i]));
    }
    bad |= s_send_copy(raw, CB_WIRE_DELIM, sizeof CB_WIRE_DELIM - 1);
    bad |= s_send_copy(raw, sig, strlen(sig));
    for (int k = 0; k < 4; k++) {
        /* each part is lent even after a failure, so none leaks */
        bad |= s_send_lent(raw, ctx, bytes[k], parts[k].len, k == 3, k < 3 || n_buffers > 0,
                           k == 3 ? pub_seq : 0);
        bytes[k] = NULL;
    }
    for (size_t i = 0; i < n_buffers; i++)
        bad |= zmq_send(raw, buffers[i].data, buffers[i].len,
                        ZMQ_DONTWAIT | (i + 1 < n_buffers ? ZMQ_SNDMORE : 0)) < 0;
    if (bad) {
        LOG_W("sending %s failed: %s", msg_type, zmq_strerror(zmq_errno()));
        goto out;
    }
    LOG_D("sent %s %s", msg_type, msg_id);
    rc = 0;
out:
    for (int k = 0; k < 4; k++)
        free(bytes[k]);
    return rc;
}

int cb_wire_send_ex(cb_wire_ctx_t *ctx, zsock_t *sock, zframe_t *const *idents, size_t n_idents,
                    const char *topic, const char *msg_type, const json_t *parent, json_t *metadata,
                    json_t *content, const cb_wire_buf_t *buffers, size_t n_buffers) {
    json_auto_t *cont = content;
    if (cont == NULL) {
        json_decref(metadata);
        LOG_E("%s: no content (a failed json_pack?): not sent", msg_type);
        return -1;
    }
    char *bytes = json_dumps(cont, JSON_COMPACT);
    if (bytes == NULL) {
        json_decref(metadata);
        LOG_E("json_dumps failed for %s", msg_type);
        return -1;
    }
    return s_send(ctx, sock, idents, n_idents, topic, msg_type, parent, metadata, bytes,
                  strlen(bytes), buffers, n_buffers);
}

int cb_wire_send_json(cb_wire_ctx_t *ctx, zsock_t *sock, const char *topic, const char *msg_type,
                      const json_t *parent, char *content, size_t content_len) {
    if (content == NULL) {
        LOG_E("%s: no content: not sent", msg_type);
        return -1;
    }
    return s_send(ctx, sock, NULL, 0, topic, msg_type, parent, NULL, content, content_len, NULL, 0);
}
