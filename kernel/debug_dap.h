/*
 * debug_dap.h - Debug Adapter Protocol messages from the runner, checked
 * (docs/RUNNER_PROTOCOL.md section 4).
 *
 * The runner is untrusted: what comes out of fd 4 is measured (size, JSON
 * values and nesting) before jansson builds anything, then must be a DAP
 * `response` (integer request_seq, string command, boolean success, object
 * body if any, string message if any) or `event` (string event, object body
 * if any).  Requests, reverse requests and anything else are refused: the
 * kernel is never a debug adapter's client the sandbox can drive.
 */
#ifndef CB_DEBUG_DAP_H
#define CB_DEBUG_DAP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { CB_DAP_RESPONSE, CB_DAP_EVENT } cb_dap_kind_t;

/* A checked message.  Pointers are borrowed from root. */
typedef struct {
    cb_dap_kind_t kind;     /* response or event */
    json_t *root;           /* the whole message (owned; cb_dap_clear) */
    size_t bytes;           /* its encoded size */
    json_int_t request_seq; /* response: the request it answers */
    const char *command;    /* response: the request's command */
    bool success;           /* response: whether it succeeded */
    const char *event;      /* event: its name */
    json_t *body;           /* body, or NULL */
} cb_dap_msg_t;

/* Parses and checks one message (a frame body).  0: *out filled; -1: refused,
 * with the reason in why and nothing held. */
int cb_dap_parse(const uint8_t *body, size_t len, cb_dap_msg_t *out, char *why, size_t why_len);
void cb_dap_clear(cb_dap_msg_t *m);

/* The threadId of an event's body, or -1 (stopped, continued). */
json_int_t cb_dap_thread(const cb_dap_msg_t *m);

#endif
