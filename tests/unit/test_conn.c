/*
 * test_conn.c - connection files: good ones (tcp, ipc, IPv6, extra keys,
 * empty key) and every kind of bad one, with the error class main() maps to
 * its exit status.
 */
#include "kernel/conn.h"
#include "tap.h"

#include <unistd.h>

#define GOOD_PORTS                                                                                 \
    "\"shell_port\":1,\"iopub_port\":2,\"stdin_port\":3,\"control_port\":4,\"hb_port\":5"

static int s_parse(const char *json, cb_conn_t *c) { return cb_conn_parse(json, strlen(json), c); }

int main(void) {
    cb_conn_t c;
    char ep[256];
    TAP_EQ_INT(
        s_parse("{\"transport\":\"tcp\",\"ip\":\"127.0.0.1\",\"key\":\"abc\",\"signature_scheme\":"
                "\"hmac-sha256\",\"kernel_name\":\"x\",\"extra\":[1,2]," GOOD_PORTS "}",
                &c),
        CB_CONN_OK, "tcp with unknown extra keys parses");
    TAP_EQ_INT(c.key_len, 3, "key length");
    TAP_EQ_INT(c.ports[CB_CH_HB], 5, "hb port");
    cb_conn_endpoint(&c, CB_CH_CONTROL, ep, sizeof ep);
    TAP_EQ_STR(ep, "tcp://127.0.0.1:4", "tcp endpoint");
    TAP_EQ_INT(s_parse("{\"transport\":\"ipc\",\"ip\":\"/tmp/k\",\"key\":\"\"," GOOD_PORTS "}", &c),
               CB_CONN_OK, "ipc");
    cb_conn_endpoint(&c, CB_CH_SHELL, ep, sizeof ep);
    TAP_EQ_STR(ep, "ipc:///tmp/k-1", "ipc endpoint is ip-port");
    TAP_EQ_INT(c.key_len, 0, "empty key = signing off");
    TAP_EQ_INT(s_parse("{\"ip\":\"::1\",\"key\":\"k\"," GOOD_PORTS "}", &c), CB_CONN_OK,
               "IPv6 defaults to tcp");
    cb_conn_endpoint(&c, CB_CH_IOPUB, ep, sizeof ep);
    TAP_EQ_STR(ep, "tcp://[::1]:2", "IPv6 endpoint is bracketed");
    TAP_EQ_INT(
        s_parse("{\"ip\":\"127.0.0.1\",\"key\":\"k\",\"signature_scheme\":\"hmac-md5\"," GOOD_PORTS
                "}",
                &c),
        CB_CONN_EUNSUPPORTED, "hmac-md5 is unsupported");
    TAP_OK(strstr(c.error, "hmac-md5") != NULL, "the message names the scheme: %s", c.error);
    TAP_EQ_INT(
        s_parse("{\"ip\":\"127.0.0.1\",\"transport\":\"udp\",\"key\":\"k\"," GOOD_PORTS "}", &c),
        CB_CONN_EUNSUPPORTED, "unknown transport");
    TAP_EQ_INT(s_parse("{\"ip\":\"127.0.0.1\",\"key\":\"k\"}", &c), CB_CONN_EINVALID,
               "missing ports");
    TAP_EQ_INT(s_parse("{\"ip\":\"127.0.0.1\",\"key\":\"k\",\"shell_port\":\"1\",\"iopub_port\":2,"
                       "\"stdin_port\":3,\"control_port\":4,\"hb_port\":5}",
                       &c),
               CB_CONN_EINVALID, "string port");
    TAP_EQ_INT(s_parse("{\"ip\":\"127.0.0.1\",\"key\":\"k\",\"shell_port\":70000,\"iopub_port\":2,"
                       "\"stdin_port\":3,\"control_port\":4,\"hb_port\":5}",
                       &c),
               CB_CONN_EINVALID, "port out of range");
    TAP_EQ_INT(s_parse("{\"key\":\"k\"," GOOD_PORTS "}", &c), CB_CONN_EINVALID, "missing ip");
    TAP_EQ_INT(s_parse("{\"ip\":\"127.0.0.1\",", &c), CB_CONN_EINVALID, "truncated JSON");
    TAP_EQ_INT(s_parse("[]", &c), CB_CONN_EINVALID, "not an object");
    TAP_EQ_INT(s_parse("", &c), CB_CONN_EINVALID, "empty");
    TAP_EQ_INT(s_parse("{\"ip\":\"a\",\"ip\":\"b\",\"key\":\"k\"," GOOD_PORTS "}", &c),
               CB_CONN_EINVALID, "duplicate keys");
    TAP_EQ_INT(cb_conn_load("/nonexistent/conn.json", &c), CB_CONN_EIO, "missing file");
    TAP_OK(strstr(c.error, "/nonexistent/conn.json") != NULL, "message names the file: %s",
           c.error);
    TAP_EQ_INT(cb_conn_load("/tmp", &c), CB_CONN_EIO, "a directory is refused");
    char path[] = "/tmp/cb-conn-XXXXXX";
    int fd = mkstemp(path);
    const char *good = "{\"ip\":\"127.0.0.1\",\"key\":\"secret\"," GOOD_PORTS "}";
    if (write(fd, good, strlen(good)) < 0) TAP_OK(0, "write");
    close(fd);
    TAP_EQ_INT(cb_conn_load(path, &c), CB_CONN_OK, "load from a file");
    TAP_OK(c.key_len == 6 && memcmp(c.key, "secret", 6) == 0, "key read from the file");
    unlink(path);
    TAP_DONE();
}
