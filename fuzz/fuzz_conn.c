/*
 * fuzz_conn.c - the connection file (kernel/conn.c).
 *
 * The input is the file's bytes.  cb_conn_parse reads it from memory; every
 * 8th input (by its first byte) is also written to a memfd and read back
 * with cb_conn_load, the path the kernel really takes, through
 * /proc/self/fd.  Properties: both agree; an accepted file has a known
 * transport, a non-empty ip that fits, five ports in 1..65535, a key that
 * fits and is exactly the "key" member's bytes; a refused one has a reason;
 * endpoints are written within the buffer they are given, whatever its size.
 */
#include "fuzz/common.h"
#include "kernel/conn.h"

#include <jansson.h>
#include <sys/mman.h>

#define FZ_ENDPOINT_MAX 600 /* room for the longest ip and a port */

static int g_memfd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void) argc, (void) argv;
    fz_quiet_log();
    g_memfd = memfd_create("cb-fuzz-conn", MFD_CLOEXEC);
    return 0;
}

static void s_check_ok(const cb_conn_t *c, const uint8_t *data, size_t size) {
    FZ_CHECK(strcmp(c->transport, "tcp") == 0 || strcmp(c->transport, "ipc") == 0, "transport");
    size_t iplen = strnlen(c->ip, sizeof c->ip);
    FZ_CHECK(iplen > 0 && iplen < sizeof c->ip, "ip fits and is not empty");
    for (int ch = 0; ch < CB_CH_COUNT; ch++)
        FZ_CHECK(c->ports[ch] > 0 && c->ports[ch] <= 65535, "%s port %d", cb_channel_name(ch),
                 c->ports[ch]);
    FZ_CHECK(c->key_len < sizeof c->key, "key fits");
    /* the key is the "key" member's bytes exactly (embedded NULs included) */
    json_t *root = json_loadb((const char *) data, size, JSON_ALLOW_NUL, NULL);
    json_t *key = json_object_get(root, "key");
    size_t want = key ? json_string_length(key) : 0;
    FZ_CHECK(c->key_len == want && (want == 0 || memcmp(c->key, json_string_value(key), want) == 0),
             "key copied exactly (%zu bytes, file has %zu)", c->key_len, want);
    json_decref(root);
    /* endpoints, into buffers of every small size and a large one */
    for (int ch = 0; ch < CB_CH_COUNT; ch++) {
        char ep[FZ_ENDPOINT_MAX];
        FZ_CHECK(cb_conn_endpoint(c, ch, ep, sizeof ep) == 0, "endpoint fits %d bytes",
                 FZ_ENDPOINT_MAX);
        FZ_CHECK(strstr(ep, "://") != NULL, "endpoint has a scheme");
        size_t full = strlen(ep);
        for (size_t len = 1; len <= full + 1; len += 1 + len / 4) {
            char *small = malloc(len); /* exact size: ASan catches a write past it */
            int rc = cb_conn_endpoint(c, ch, small, len);
            FZ_CHECK((rc == 0) == (len > full), "truncation reported (len %zu, need %zu)", len,
                     full + 1);
            FZ_CHECK(memchr(small, '\0', len) != NULL, "NUL-terminated within its buffer");
            free(small);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cb_conn_t c;
    int rc = cb_conn_parse((const char *) data, size, &c);
    FZ_CHECK(rc == CB_CONN_OK || rc == CB_CONN_EINVALID || rc == CB_CONN_EUNSUPPORTED,
             "known result %d", rc);
    if (rc == CB_CONN_OK)
        s_check_ok(&c, data, size);
    else
        FZ_CHECK(c.error[0] != '\0' && memchr(c.error, '\0', sizeof c.error), "a reason (%d)", rc);

    if (g_memfd >= 0 && size > 0 && size < CB_CONN_FILE_MAX && size % 4 == 0) {
        if (ftruncate(g_memfd, 0) == 0 && pwrite(g_memfd, data, size, 0) == (ssize_t) size) {
            char path[64];
            snprintf(path, sizeof path, "/proc/self/fd/%d", g_memfd);
            cb_conn_t l;
            int lrc = cb_conn_load(path, &l);
            FZ_CHECK(lrc == rc, "cb_conn_load %d, cb_conn_parse %d", lrc, rc);
            if (rc == CB_CONN_OK)
                FZ_CHECK(memcmp(&l, &c, sizeof c) == 0, "the same result from the file");
        }
    }
    return 0;
}
