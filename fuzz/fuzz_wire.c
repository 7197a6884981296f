/*
 * fuzz_wire.c - the Jupyter wire codec (kernel/wire.c cb_wire_parse) and
 * the replay history behind it (kernel/auth.c).
 *
 * Input: one mode byte, then parts separated by 0xff (common.h).  The low
 * two bits of the mode byte choose how the parts become a multipart message,
 * always checked against a fixed key:
 *
 *   0 raw      the parts are the frames, as a hostile client would send
 *              them.  Property: nothing gets past the signature check (no
 *              one forges HMAC-SHA256), so every result is one of the
 *              pre-signature reasons, and no JSON was ever parsed.
 *   1 signed   bits 2-4 give a count of identity frames; the harness puts
 *              <IDS|MSG> and a valid signature after them, then header,
 *              parent, metadata, content and any further parts as buffers.
 *              So the JSON and shape checks are reached.  Properties: the
 *              signature is never the reason a message is dropped; a
 *              parsed message has four objects and a non-empty msg_type;
 *              identities and buffers are counted and copied exactly; a message that
 *              passed the signature is a replay the second time.
 *   2 keyless  the parts are the frames and the key is empty (signing off,
 *              as the spec allows): everything reaches JSON.
 *   3 replay   bits 2-4 give a history of 1..8 signatures; every later byte
 *              sends one of 32 distinct signed messages.  Property: the
 *              result is exactly what a first-in-first-out model of the
 *              last N accepted signatures predicts (eviction through the
 *              open-addressing index included).
 */
#include "fuzz/common.h"
#include "kernel/auth.h"
#include "kernel/bounds.h"
#include "kernel/wire.h"

#include <czmq.h>

#define FZ_KEY          "fuzz-key-0123456789abcdef"
#define FZ_PARTS_MAX    (CB_WIRE_MAX_IDENTS + 6 + CB_WIRE_MAX_BUFFERS + 2) /* a little past */
#define FZ_HISTORY      64 /* signatures remembered in the non-replay modes */
#define FZ_REPLAY_KINDS 32 /* distinct messages of replay mode */

static cb_auth_t *g_signer; /* signs only: cb_auth_sign remembers nothing */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    zsys_set_logstream(NULL);
    fz_quiet_log();
    g_signer = cb_auth_new((const uint8_t *) FZ_KEY, strlen(FZ_KEY), 1);
    return g_signer ? 0 : -1;
}

static void s_sign(const fz_part_t four[4], char sig[CB_WIRE_SIG_HEX_LEN + 1]) {
    cb_auth_part_t ap[4];
    for (int i = 0; i < 4; i++)
        ap[i] = (cb_auth_part_t){four[i].p, four[i].n};
    cb_auth_sign(g_signer, ap, sig);
}

static bool s_is_delim(const fz_part_t *p) {
    size_t dl = sizeof CB_WIRE_DELIM - 1;
    return p->n == dl && memcmp(p->p, CB_WIRE_DELIM, dl) == 0;
}

/* The properties of a message that cb_wire_parse accepted (rc 0) or
 * refused for its depth (header read, content not). */
static void s_check_parsed(int rc, const cb_msg_t *m) {
    FZ_CHECK(m->header && json_is_object(m->header), "header");
    FZ_CHECK(m->msg_type && m->msg_type[0], "msg_type set and not empty");
    FZ_CHECK(m->msg_id != NULL, "msg_id set");
    FZ_CHECK(strcmp(m->msg_type, json_string_value(json_object_get(m->header, "msg_type"))) == 0,
             "msg_type borrowed from the header");
    if (rc == 0) {
        FZ_CHECK(json_is_object(m->parent) && json_is_object(m->metadata) &&
                     json_is_object(m->content),
                 "parent, metadata and content are objects");
    }
}

static bool s_pre_signature(int rc) {
    return rc == -CB_WIRE_ENODELIM || rc == -CB_WIRE_ESHORT || rc == -CB_WIRE_ESIZE ||
           rc == -CB_WIRE_ESIG;
}

static int s_parse(cb_auth_t *auth, zmsg_t *z, cb_msg_t *m) {
    size_t frames = zmsg_size(z), bytes = zmsg_content_size(z);
    int rc = cb_wire_parse(auth, z, m);
    FZ_CHECK(zmsg_size(z) == frames && zmsg_content_size(z) == bytes, "message left as it was");
    FZ_CHECK(rc <= 0 && rc >= -CB_WIRE_EDEPTH, "known result %d", rc);
    FZ_CHECK(cb_wire_strerror(-rc) != NULL, "a reason for every result");
    if (rc == 0 || rc == -CB_WIRE_EDEPTH) s_check_parsed(rc, m);
    if (rc != 0 && rc != -CB_WIRE_EDEPTH)
        FZ_CHECK(m->header == NULL && m->content == NULL && m->idents == NULL && m->buffers == NULL,
                 "a refused message is zeroed");
    return rc;
}

static void s_raw(const fz_part_t *parts, size_t n, bool keyless) {
    zmsg_t *z = zmsg_new();
    for (size_t i = 0; i < n; i++)
        zmsg_addmem(z, parts[i].p, parts[i].n);
    cb_auth_t *auth = keyless ? cb_auth_new(NULL, 0, FZ_HISTORY)
                              : cb_auth_new((const uint8_t *) FZ_KEY, strlen(FZ_KEY), FZ_HISTORY);
    cb_msg_t m;
    int rc = s_parse(auth, z, &m);
    if (!keyless)
        FZ_CHECK(s_pre_signature(rc), "an unsigned message got past the signature (%d)", rc);
    if (rc == 0) {
        size_t delim = 0;
        while (!s_is_delim(&parts[delim]))
            delim++;
        FZ_CHECK(m.n_idents == delim, "identities before the delimiter: %zu, not %zu", m.n_idents,
                 delim);
        FZ_CHECK(m.n_buffers == n - delim - 6, "buffers counted");
    }
    cb_msg_clear(&m);
    cb_auth_destroy(&auth);
    zmsg_destroy(&z);
}

static void s_signed(const fz_part_t *parts, size_t n, unsigned n_id) {
    static const fz_part_t empty = {(const uint8_t *) "{}", 2};
    if (n_id > n) n_id = (unsigned) n;
    fz_part_t four[4];
    for (size_t i = 0; i < 4; i++)
        four[i] = n_id + i < n ? parts[n_id + i] : empty;
    size_t first_buf = n_id + 4 < n ? n_id + 4 : n;
    size_t n_buf = n - first_buf;
    char sig[CB_WIRE_SIG_HEX_LEN + 1];
    s_sign(four, sig);

    zmsg_t *z = zmsg_new();
    bool delim_in_ids = false;
    for (size_t i = 0; i < n_id; i++) {
        zmsg_addmem(z, parts[i].p, parts[i].n);
        delim_in_ids |= s_is_delim(&parts[i]);
    }
    zmsg_addstr(z, CB_WIRE_DELIM);
    zmsg_addstr(z, sig);
    for (size_t i = 0; i < 4; i++)
        zmsg_addmem(z, four[i].p, four[i].n);
    for (size_t i = first_buf; i < n; i++)
        zmsg_addmem(z, parts[i].p, parts[i].n);

    cb_auth_t *auth = cb_auth_new((const uint8_t *) FZ_KEY, strlen(FZ_KEY), FZ_HISTORY);
    cb_msg_t m;
    int rc = s_parse(auth, z, &m);
    bool oversize = false;
    for (size_t i = 0; i < n; i++)
        oversize |= parts[i].n > CB_WIRE_MAX_FRAME_BYTES;
    if (!delim_in_ids && !oversize && n_buf <= CB_WIRE_MAX_BUFFERS)
        FZ_CHECK(!s_pre_signature(rc), "a well-signed message dropped before its JSON (%s)",
                 cb_wire_strerror(-rc));
    if (rc == 0 && !delim_in_ids) {
        FZ_CHECK(m.n_idents == n_id, "identities: %zu, not %u", m.n_idents, n_id);
        FZ_CHECK(m.n_buffers == n_buf, "buffers: %zu, not %zu", m.n_buffers, n_buf);
        for (size_t i = 0; i < n_id; i++)
            FZ_CHECK(zframe_size(m.idents[i]) == parts[i].n &&
                         memcmp(zframe_data(m.idents[i]), parts[i].p, parts[i].n) == 0,
                     "identity %zu copied exactly", i);
        for (size_t i = 0; i < n_buf; i++)
            FZ_CHECK(m.buffers && zframe_size(m.buffers[i]) == parts[first_buf + i].n &&
                         memcmp(zframe_data(m.buffers[i]), parts[first_buf + i].p,
                                parts[first_buf + i].n) == 0,
                     "buffer %zu copied exactly", i);
    }
    cb_msg_clear(&m);
    if (!s_pre_signature(rc)) {
        int again = s_parse(auth, z, &m);
        FZ_CHECK(again == -CB_WIRE_EREPLAY, "the same signed bytes twice: %d, not a replay", again);
        cb_msg_clear(&m);
    }
    cb_auth_destroy(&auth);
    zmsg_destroy(&z);
}

static void s_replay(const uint8_t *d, size_t n, unsigned history) {
    cb_auth_t *auth = cb_auth_new((const uint8_t *) FZ_KEY, strlen(FZ_KEY), history);
    int model[8]; /* accepted kinds, oldest first */
    size_t m_len = 0;
    for (size_t i = 0; i < n; i++) {
        int kind = d[i] % FZ_REPLAY_KINDS;
        char hdr[96], content[32];
        snprintf(hdr, sizeof hdr, "{\"msg_id\":\"r%d\",\"msg_type\":\"kernel_info_request\"}",
                 kind);
        snprintf(content, sizeof content, "{\"k\":%d}", kind);
        fz_part_t four[4] = {{(const uint8_t *) hdr, strlen(hdr)},
                             {(const uint8_t *) "{}", 2},
                             {(const uint8_t *) "{}", 2},
                             {(const uint8_t *) content, strlen(content)}};
        char sig[CB_WIRE_SIG_HEX_LEN + 1];
        s_sign(four, sig);
        zmsg_t *z = zmsg_new();
        zmsg_addstr(z, CB_WIRE_DELIM);
        zmsg_addstr(z, sig);
        for (int k = 0; k < 4; k++)
            zmsg_addmem(z, four[k].p, four[k].n);
        cb_msg_t m;
        int rc = s_parse(auth, z, &m);
        cb_msg_clear(&m);
        zmsg_destroy(&z);
        bool seen = false;
        for (size_t j = 0; j < m_len; j++)
            seen |= model[j] == kind;
        FZ_CHECK(rc == (seen ? -CB_WIRE_EREPLAY : 0), "message %zu (kind %d, history %u): %d", i,
                 kind, history, rc);
        if (!seen) {
            if (m_len == history) {
                memmove(model, model + 1, (history - 1) * sizeof model[0]);
                m_len--;
            }
            model[m_len++] = kind;
        }
    }
    cb_auth_destroy(&auth);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    unsigned mode = data[0] & 3u, arg = (data[0] >> 2) & 7u;
    static fz_part_t parts[FZ_PARTS_MAX];
    size_t n = fz_split(data + 1, size - 1, parts, FZ_PARTS_MAX);
    switch (mode) {
    case 0: s_raw(parts, n, false); break;
    case 1: s_signed(parts, n, arg); break;
    case 2: s_raw(parts, n, true); break;
    default: s_replay(data + 1, size - 1, arg + 1); break;
    }
    return 0;
}
