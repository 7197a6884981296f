/*
 * conn.h - the Jupyter connection file.
 *
 * Reads and validates the JSON file jupyter_client writes (kernels.rst
 * "Connection files"): transport tcp or ipc, ip, five ports, signature
 * scheme and key.  Unknown keys are ignored.  Only hmac-sha256 (or an empty
 * key, meaning no signing) is accepted; anything else is CB_CONN_EUNSUPPORTED
 * so main() can exit with status 2.
 */
#ifndef CB_CONN_H
#define CB_CONN_H

#include <stddef.h>

typedef enum {
    CB_CH_SHELL,
    CB_CH_IOPUB,
    CB_CH_STDIN,
    CB_CH_CONTROL,
    CB_CH_HB,
    CB_CH_COUNT
} cb_channel_t;

enum { CB_CONN_OK = 0, CB_CONN_EIO = -1, CB_CONN_EINVALID = -2, CB_CONN_EUNSUPPORTED = -3 };

#define CB_CONN_KEY_MAX  1024  /* bytes of the HMAC key */
#define CB_CONN_FILE_MAX 65536 /* bytes of the connection file */
#define CB_CONN_IP_MAX   256   /* bytes of "ip" */

typedef struct {
    char transport[8];                  /* "tcp" or "ipc" */
    char ip[CB_CONN_IP_MAX];            /* address, or ipc path prefix */
    int ports[CB_CH_COUNT];             /* indexed by cb_channel_t */
    unsigned char key[CB_CONN_KEY_MAX]; /* HMAC key bytes (UTF-8 of "key") */
    size_t key_len;                     /* 0 = signing disabled */
    char error[256];                    /* human-readable reason on failure */
} cb_conn_t;

/* Parses the file at path into *out.  Returns CB_CONN_OK or a negative code;
 * out->error says why. */
int cb_conn_load(const char *path, cb_conn_t *out);
/* Parses a buffer (not NUL-terminated). Same results as cb_conn_load. */
int cb_conn_parse(const char *data, size_t len, cb_conn_t *out);
/* Writes the ZMQ endpoint of channel ch into buf (tcp://ip:port or
 * ipc://ip-port). 0 ok, -1 truncated. */
int cb_conn_endpoint(const cb_conn_t *conn, cb_channel_t ch, char *buf, size_t len);
/* Name of a channel ("shell", ...). */
const char *cb_channel_name(cb_channel_t ch);

#endif
