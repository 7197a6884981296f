/*
 * test_wire.c - the wire codec: round trip through a real ZMQ socket pair,
 * identities, buffers, and every way a message is dropped.
 */
#include "kernel/bounds.h"
#include "kernel/wire.h"
#include "kernel/jsonstr.h"
#include "tap.h"

static cb_auth_t *g_auth;

static zmsg_t *s_build(const char *const *idents, size_t n_id, const char *sig_override,
                       const char *parts[4], size_t n_buffers) {
    zmsg_t *m = zmsg_new();
    for (size_t i = 0; i < n_id; i++)
        zmsg_addstr(m, idents[i]);
    zmsg_addstr(m, "<IDS|MSG>");
    char sig[65];
    cb_auth_part_t ap[4];
    for (int i = 0; i < 4; i++)
        ap[i] = (cb_auth_part_t){parts[i], strlen(parts[i])};
    cb_auth_sign(g_auth, ap, sig);
    zmsg_addstr(m, sig_override ? sig_override : sig);
    for (int i = 0; i < 4; i++)
        zmsg_addstr(m, parts[i]);
    for (size_t i = 0; i < n_buffers; i++)
        zmsg_addmem(m, "\x00\x01\x02", 3);
    return m;
}

static int s_parse(zmsg_t *m, cb_msg_t *out) {
    int rc = cb_wire_parse(g_auth, m, out);
    zmsg_destroy(&m);
    return rc;
}

int main(void) {
    zsys_set_logstream(NULL);
    g_auth = cb_auth_new((const uint8_t *) "key", 3, 1024);
    const char *ids[] = {"client-a", "client-b"};
    cb_msg_t m;
    char hdr[128];
    int counter = 0;
#define HDR(type)                                                                                  \
    (snprintf(hdr, sizeof hdr, "{\"msg_id\":\"m%d\",\"msg_type\":\"%s\"}", counter++, type), hdr)
    const char *p[4] = {HDR("kernel_info_request"), "{}", "{}", "{}"};
    TAP_EQ_INT(s_parse(s_build(ids, 2, NULL, p, 2), &m), 0,
               "valid message with 2 idents and 2 buffers");
    TAP_EQ_INT(m.n_idents, 2, "identities kept");
    TAP_EQ_INT(m.n_buffers, 2, "buffers counted");
    TAP_EQ_STR(m.msg_type, "kernel_info_request", "msg_type");
    cb_msg_clear(&m);
    TAP_EQ_INT(s_parse(s_build(ids, 2, NULL, p, 0), &m), -CB_WIRE_EREPLAY,
               "same bytes again = replay");
    p[0] = HDR("x");
    TAP_EQ_INT(s_parse(s_build(ids, 0, "", p, 0), &m), -CB_WIRE_ESIG, "empty signature with a key");
    p[0] = HDR("x");
    TAP_EQ_INT(
        s_parse(s_build(ids, 0, "0000000000000000000000000000000000000000000000000000000000000000",
                        p, 0),
                &m),
        -CB_WIRE_ESIG, "zeroed signature");
    p[0] = HDR("x");
    p[3] = "not json";
    TAP_EQ_INT(s_parse(s_build(ids, 1, NULL, p, 0), &m), -CB_WIRE_EJSON,
               "content not JSON (signed)");
    p[0] = HDR("x");
    p[3] = "[1]";
    TAP_EQ_INT(s_parse(s_build(ids, 1, NULL, p, 0), &m), -CB_WIRE_EJSON, "content an array");
    p[3] = "{}";
    const char *nohdr[4] = {"{\"msg_type\":\"x\"}", "{}", "{}", "{}"};
    TAP_EQ_INT(s_parse(s_build(ids, 1, NULL, nohdr, 0), &m), -CB_WIRE_EHEADER,
               "header without msg_id");

    zmsg_t *z = zmsg_new();
    zmsg_addstr(z, "a");
    zmsg_addstr(z, "b");
    TAP_EQ_INT(s_parse(z, &m), -CB_WIRE_ENODELIM, "no delimiter");
    z = zmsg_new();
    zmsg_addstr(z, "<IDS|MSG>");
    zmsg_addstr(z, "sig");
    zmsg_addstr(z, "{}");
    TAP_EQ_INT(s_parse(z, &m), -CB_WIRE_ESHORT, "fewer than 5 frames after the delimiter");
    z = zmsg_new();
    for (int i = 0; i < 50; i++)
        zmsg_addstr(z, "proxy-hop");
    p[0] = HDR("kernel_info_request");
    {
        const char *hops[50];
        for (int i = 0; i < 50; i++)
            hops[i] = "proxy-hop";
        zmsg_destroy(&z);
        TAP_EQ_INT(s_parse(s_build(hops, 50, NULL, p, 0), &m), 0,
                   "50 identities (a chain of ROUTER proxies) accepted");
        TAP_EQ_INT(m.n_idents, 50, "all 50 kept for the reply");
        cb_msg_clear(&m);
    }
    z = zmsg_new();
    for (int i = 0; i < CB_WIRE_MAX_IDENTS + 10; i++)
        zmsg_addstr(z, "id");
    zmsg_addstr(z, "<IDS|MSG>");
    for (int i = 0; i < 5; i++)
        zmsg_addstr(z, "{}");
    TAP_EQ_INT(s_parse(z, &m), -CB_WIRE_ENODELIM, "too many identities");
    z = zmsg_new();
    char *big = calloc(1, 2000);
    memset(big, 'i', 1999);
    zmsg_addstr(z, big);
    free(big);
    zmsg_addstr(z, "<IDS|MSG>");
    for (int i = 0; i < 5; i++)
        zmsg_addstr(z, "{}");
    TAP_EQ_INT(s_parse(z, &m), -CB_WIRE_ESIZE, "an identity over the limit");
    z = zmsg_new();
    zmsg_addstr(z, "<IDS|MSG>");
    for (int i = 0; i < 5 + 200; i++)
        zmsg_addstr(z, "{}");
    TAP_EQ_INT(s_parse(z, &m), -CB_WIRE_ESIZE, "too many buffers");

    /* Round trip through real sockets: what we send, a peer can verify. */
    zsock_t *a = zsock_new_pair("@inproc://wire-test");
    zsock_t *b = zsock_new_pair(">inproc://wire-test");
    cb_wire_ctx_t ctx;
    cb_wire_ctx_init(&ctx, g_auth);
    json_t *parent = json_pack("{s:s, s:s}", "msg_id", "parent-1", "msg_type", "execute_request");
    cb_wire_send(&ctx, a, NULL, 0, NULL, "execute_reply", parent, NULL,
                 json_pack("{s:s, s:s}", "status", "ok", "text", "caf\xc3\xa9"));
    zmsg_t *got = zmsg_recv(b);
    TAP_EQ_INT(s_parse(got, &m), 0, "a sent message verifies");
    TAP_EQ_STR(m.msg_type, "execute_reply", "msg_type sent");
    TAP_EQ_STR(json_string_value(json_object_get(m.header, "session")), ctx.session,
               "session stamped");
    TAP_EQ_STR(json_string_value(json_object_get(m.header, "version")), "5.3", "version");
    TAP_OK(json_is_string(json_object_get(m.header, "date")), "date present");
    TAP_EQ_STR(json_string_value(json_object_get(m.parent, "msg_id")), "parent-1", "parent copied");
    TAP_EQ_STR(json_string_value(json_object_get(m.content, "text")), "caf\xc3\xa9",
               "UTF-8 content");
    char first_id[64];
    snprintf(first_id, sizeof first_id, "%s", m.msg_id);
    cb_msg_clear(&m);
    cb_wire_send(&ctx, a, NULL, 0, NULL, "execute_reply", parent, NULL,
                 json_pack("{s:s, s:s}", "status", "ok", "text", "caf\xc3\xa9"));
    got = zmsg_recv(b);
    TAP_EQ_INT(s_parse(got, &m), 0,
               "an identical second send still verifies (fresh msg_id and date)");
    TAP_OK(strcmp(first_id, m.msg_id) != 0, "msg_ids differ");
    cb_msg_clear(&m);
    zsock_destroy(&a);
    zsock_destroy(&b);

    /* The PUB ledger: messages numbered as sent, released as ZMQ lets go. */
    zsock_t *pub = zsock_new_pub("@inproc://wire-ledger");
    cb_wire_ctx_t lc;
    cb_wire_ctx_init(&lc, g_auth);
    for (int i = 0; i < 3; i++)
        cb_wire_send(&lc, pub, NULL, 0, NULL, "stream", parent, NULL, json_pack("{s:i}", "n", i));
    TAP_EQ_INT(lc.pub_sent_msgs, 3, "three PUB messages numbered");
    TAP_EQ_INT(atomic_load(&lc.pub_released_msgs), 3, "no subscriber: released at once");
    TAP_EQ_INT(atomic_load(&lc.pub_released_bytes), lc.pub_sent_bytes, "... all their bytes");
    TAP_EQ_INT(atomic_load(&lc.queued_bytes), 0, "nothing held");
    zsock_t *sub = zsock_new_sub(">inproc://wire-ledger", "");
    zsock_set_rcvtimeo(sub, 10);
    zmsg_t *probe = NULL;
    for (int i = 0; i < 100 && probe == NULL; i++) {
        cb_wire_send(&lc, pub, NULL, 0, NULL, "probe", parent, NULL, json_object());
        probe = zmsg_recv(sub);
    }
    TAP_OK(probe != NULL, "the subscription arrived");
    zmsg_destroy(&probe);
    zsock_set_rcvtimeo(sub, 0);
    while ((probe = zmsg_recv(sub)) != NULL)
        zmsg_destroy(&probe);
    uint64_t before = atomic_load(&lc.pub_released_msgs);
    TAP_EQ_INT(before, lc.pub_sent_msgs, "what the subscriber read is released");
    cb_wire_send(&lc, pub, NULL, 0, NULL, "stream", parent, NULL, json_pack("{s:s}", "a", "b"));
    cb_wire_send(&lc, pub, NULL, 0, NULL, "stream", parent, NULL, json_pack("{s:s}", "c", "d"));
    TAP_EQ_INT(atomic_load(&lc.pub_released_msgs), before, "unread messages are held");
    TAP_OK(atomic_load(&lc.pub_released_bytes) < lc.pub_sent_bytes, "... and their bytes");
    zsock_set_rcvtimeo(sub, 1000);
    for (int i = 0; i < 2; i++) {
        zmsg_t *r = zmsg_recv(sub);
        zmsg_destroy(&r);
    }
    TAP_EQ_INT(atomic_load(&lc.pub_released_msgs), lc.pub_sent_msgs, "read, they are released");
    TAP_EQ_INT(atomic_load(&lc.pub_released_bytes), lc.pub_sent_bytes, "... to the last byte");

    /* A content serialised already (a stream's, jsonstr.c) is signed and sent as it is. */
    const char *text = "line \"1\"\n\tcaf\xc3\xa9\x01";
    size_t clen = 0;
    char *content = cb_json_stream_content("stdout", text, strlen(text), &clen);
    TAP_EQ_INT(cb_wire_send_json(&lc, pub, NULL, "stream", parent, content, clen), 0,
               "a serialised content is sent");
    zmsg_t *pubbed = zmsg_recv(sub);
    TAP_OK(pubbed != NULL, "... and arrives");
    TAP_EQ_INT(pubbed ? s_parse(pubbed, &m) : -1, 0, "... signed: it verifies and parses");
    TAP_EQ_STR(m.msg_type, "stream", "... as a stream");
    TAP_EQ_STR(json_string_value(json_object_get(m.content, "text")), text, "... its text intact");
    TAP_EQ_INT(atomic_load(&lc.pub_released_msgs), lc.pub_sent_msgs, "... and released once read");
    cb_msg_clear(&m);
    TAP_EQ_INT(cb_wire_send_json(&lc, pub, NULL, "stream", parent, NULL, 0), -1,
               "no content (out of memory): nothing sent");
    zsock_destroy(&sub);
    zsock_destroy(&pub);
    json_decref(parent);
    cb_auth_destroy(&g_auth);
    TAP_DONE();
}
