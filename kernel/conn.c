/*
 * conn.c - connection file parsing (see conn.h).
 *
 * The file is read with a size cap, parsed with json_loadb and checked with
 * one json_unpack_ex shape.  The key is copied; the parsed tree is freed
 * before returning so the key lives in exactly one place.
 */
#include "kernel/conn.h"

#include "isolate/log.h"
#include "isolate/util.h"

#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *const s_port_keys[CB_CH_COUNT] = {"shell_port", "iopub_port", "stdin_port",
                                                     "control_port", "hb_port"};
static const char *const s_names[CB_CH_COUNT] = {"shell", "iopub", "stdin", "control", "hb"};

const char *cb_channel_name(cb_channel_t ch) {
    return (unsigned) ch < CB_CH_COUNT ? s_names[ch] : "?";
}

#define S_FAIL(out, code, ...)                                                                     \
    do {                                                                                           \
        snprintf((out)->error, sizeof(out)->error, __VA_ARGS__);                                   \
        return (code);                                                                             \
    } while (0)

int cb_conn_parse(const char *data, size_t len, cb_conn_t *out) {
    memset(out, 0, sizeof *out);
    json_error_t err;
    json_auto_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &err);
    if (root == NULL)
        S_FAIL(out, CB_CONN_EINVALID, "not valid JSON (line %d: %s)", err.line, err.text);
    if (!json_is_object(root)) S_FAIL(out, CB_CONN_EINVALID, "not a JSON object");

    const char *transport = "tcp", *ip = NULL, *scheme = "hmac-sha256", *key = "";
    size_t key_len = 0;
    json_t *ports[CB_CH_COUNT] = {0};
    if (json_unpack_ex(root, &err, 0, "{s?s, s:s, s?s, s?s%, s:o, s:o, s:o, s:o, s:o}", "transport",
                       &transport, "ip", &ip, "signature_scheme", &scheme, "key", &key, &key_len,
                       s_port_keys[0], &ports[0], s_port_keys[1], &ports[1], s_port_keys[2],
                       &ports[2], s_port_keys[3], &ports[3], s_port_keys[4], &ports[4]) < 0)
        S_FAIL(out, CB_CONN_EINVALID, "%s", err.text);

    if (strcmp(transport, "tcp") != 0 && strcmp(transport, "ipc") != 0)
        S_FAIL(out, CB_CONN_EUNSUPPORTED, "unsupported transport '%.32s' (tcp or ipc)", transport);
    snprintf(out->transport, sizeof out->transport, "%s", transport);
    if (strlen(ip) == 0 || strlen(ip) >= sizeof out->ip) S_FAIL(out, CB_CONN_EINVALID, "bad ip");
    snprintf(out->ip, sizeof out->ip, "%s", ip);

    for (int i = 0; i < CB_CH_COUNT; i++) {
        if (!json_is_integer(ports[i]))
            S_FAIL(out, CB_CONN_EINVALID, "%s must be an integer", s_port_keys[i]);
        json_int_t p = json_integer_value(ports[i]);
        if (p <= 0 || p > 65535) S_FAIL(out, CB_CONN_EINVALID, "%s out of range", s_port_keys[i]);
        out->ports[i] = (int) p;
    }

    if (key_len > 0 && strcmp(scheme, "hmac-sha256") != 0)
        S_FAIL(out, CB_CONN_EUNSUPPORTED,
               "unsupported signature_scheme '%.32s' (cellblock supports hmac-sha256)", scheme);
    if (key_len >= sizeof out->key) S_FAIL(out, CB_CONN_EINVALID, "key too long");
    memcpy(out->key, key, key_len);
    out->key_len = key_len;
    return CB_CONN_OK;
}

int cb_conn_load(const char *path, cb_conn_t *out) {
    memset(out, 0, sizeof *out);
    cb_autofd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) S_FAIL(out, CB_CONN_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) S_FAIL(out, CB_CONN_EIO, "cannot stat %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) S_FAIL(out, CB_CONN_EIO, "%s is not a regular file", path);
    if (st.st_size > CB_CONN_FILE_MAX) S_FAIL(out, CB_CONN_EINVALID, "%s is too large", path);
    char buf[CB_CONN_FILE_MAX];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof buf - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) S_FAIL(out, CB_CONN_EIO, "cannot read %s: %s", path, strerror(errno));
        if (r == 0) break;
        len += (size_t) r;
        if (len == sizeof buf) S_FAIL(out, CB_CONN_EINVALID, "%s is too large", path);
    }
    int rc = cb_conn_parse(buf, len, out);
    sodium_memzero(buf, sizeof buf);
    return rc;
}

int cb_conn_endpoint(const cb_conn_t *conn, cb_channel_t ch, char *buf, size_t len) {
    int n;
    if (strcmp(conn->transport, "ipc") == 0)
        n = snprintf(buf, len, "ipc://%s-%d", conn->ip, conn->ports[ch]);
    else if (strchr(conn->ip, ':') != NULL)
        n = snprintf(buf, len, "tcp://[%s]:%d", conn->ip, conn->ports[ch]);
    else
        n = snprintf(buf, len, "tcp://%s:%d", conn->ip, conn->ports[ch]);
    return (n < 0 || (size_t) n >= len) ? -1 : 0;
}
