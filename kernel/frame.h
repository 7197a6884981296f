/*
 * frame.h - frames between kernel and runner (docs/RUNNER_PROTOCOL.md
 * section 3): the length-prefixed codec, and the frame table that turns a
 * runner frame into a checked, typed struct.
 *
 * The runner is untrusted.  A frame's length is bounded before any byte of
 * it is kept; its JSON is measured (values and nesting) before jansson builds
 * a single object, so a small frame cannot become a large tree; then one
 * json_unpack_ex per type, with that type's own size limit, produces a
 * cb_rframe_t.  A frame that fails any check is dropped with a reason; only a
 * broken length prefix is fatal for the stream (it cannot be re-synchronised).
 */
#ifndef CB_FRAME_H
#define CB_FRAME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    CB_FRAME_OK = 0,     /* one whole frame: body and body_len point into buf */
    CB_FRAME_NEED = 1,   /* not enough bytes yet */
    CB_FRAME_FATAL = -2, /* length prefix out of range: the stream is unusable */
};

/* Finds the first frame in buf[0..len): its body and the bytes it spans. */
int cb_frame_extract(const uint8_t *buf, size_t len, size_t max, const uint8_t **body,
                     size_t *body_len, size_t *consumed);
/* Encodes v (borrowed) as one frame into a new malloc'd buffer *out of
 * *out_len bytes. 0 ok, -1 too large, too deep or out of memory. */
int cb_frame_encode(const json_t *v, size_t max, uint8_t **out, size_t *out_len);
/* One frame holding the text of fmt (under CB_FRAME_TEXT_MAX bytes) byte for
 * byte, in a new malloc'd buffer of *out_len bytes; NULL when out of memory
 * or too long.  For frames matched as bytes (a rollback's resync markers). */
uint8_t *cb_frame_format(size_t *out_len, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends v (borrowed) as one frame to the malloc'd buffer *buf of *len
 * bytes, encoded in place (no copy): 0 ok, *len grown; -1 (*len unchanged)
 * when the frame is over max, the buffer would pass buf_max bytes, or out of
 * memory or too deep. */
int cb_frame_append(const json_t *v, size_t max, size_t buf_max, uint8_t **buf, size_t *len);

/* Counts the JSON text's values and keys (*nodes) and its deepest nesting
 * (*depth) without building anything.  Only as exact as a bound needs to be:
 * every value jansson would allocate is counted at least once. */
void cb_json_measure(const char *text, size_t len, size_t *nodes, size_t *depth);

/* What the runner can send. */
typedef enum {
    CB_RF_HELLO,
    CB_RF_DISPLAY,
    CB_RF_UPDATE_DISPLAY,
    CB_RF_EXECUTE_RESULT,
    CB_RF_CLEAR_OUTPUT,
    CB_RF_ERROR,
    CB_RF_INPUT_REQUEST,
    CB_RF_DONE,
    CB_RF_COMPLETE_REPLY,
    CB_RF_INSPECT_REPLY,
    CB_RF_IS_COMPLETE_REPLY,
    CB_RF_BAD_REQUEST,
    CB_RF_STARTED,
    CB_RF_COMM_OPEN,
    CB_RF_COMM_MSG,
    CB_RF_COMM_CLOSE,
    CB_RF_COMM_DONE,
    CB_RF_CHECKPOINT_REPLY, /* docs/SNAPSHOTS.md: the runner forked for a checkpoint */
    CB_RF_RESUMED,          /* ... a parked copy took over after a rollback */
    CB_RF_SNAPSHOT_REQUEST, /* ... a cell asks (%checkpoint, %rollback, %checkpoints) */
    CB_RF_COUNT,
} cb_rframe_type_t;

/* When a frame type is accepted (cb_rframe_when bits). */
#define CB_WHEN_STARTING 1u  /* before hello */
#define CB_WHEN_IDLE     2u  /* no request in flight (late output of threads) */
#define CB_WHEN_EXECUTE  4u  /* an execute is in flight */
#define CB_WHEN_ASSIST   8u  /* a complete/inspect/is_complete is in flight */
#define CB_WHEN_COMM     16u /* a frontend's comm message is being handled */
#define CB_WHEN_RUNNING  (CB_WHEN_IDLE | CB_WHEN_EXECUTE | CB_WHEN_ASSIST | CB_WHEN_COMM)

/* What a runner says of itself when it comes up (hello, or a restored
 * runner's resumed); each may be NULL / 0.  Pointers are borrowed. */
typedef struct {
    const char *python_version, *shell, *shell_version;
    const char *cell_prefix; /* the cells' file names start with it, or NULL */
    int debugger;            /* the debugger can run (fd 4 open, debugpy found) */
} cb_rframe_facts_t;

/* A checked runner frame.  Pointers are borrowed from root. */
typedef struct {
    cb_rframe_type_t type; /* which */
    json_t *root;          /* the whole frame (owned; cb_rframe_clear) */
    size_t bytes;          /* its encoded size */
    bool has_seq;          /* seq was present */
    json_int_t seq;        /* the request it belongs to */
    union {
        struct {
            json_int_t version;
            cb_rframe_facts_t facts;
        } hello;
        struct {
            json_t *data, *metadata, *transient; /* metadata/transient may be NULL */
        } bundle;                                /* display, update_display, execute_result */
        struct {
            int wait;
        } clear;
        struct {
            const char *ename, *evalue;
            json_t *traceback; /* array of strings */
        } error;
        struct {
            const char *prompt;
            int password;
        } input;
        struct {
            const char *status;                 /* "ok" or "error" */
            json_t *user_expressions, *payload; /* may be NULL */
            const char *ename, *evalue;         /* may be NULL */
            json_t *traceback;                  /* may be NULL */
        } done;
        struct {
            json_t *matches, *metadata;          /* metadata may be NULL */
            json_int_t cursor_start, cursor_end; /* -1 when absent */
        } complete;
        struct {
            int found;
            json_t *data, *metadata; /* may be NULL */
        } inspect;
        struct {
            const char *status, *indent; /* indent may be NULL */
        } is_complete;
        struct {
            const char *error;
        } bad;
        struct {
            const char *comm_id, *target_name, *target_module; /* target_* for opens only */
            json_t *data, *metadata;                           /* metadata may be NULL */
            json_t *buffers;                                   /* base64 strings, may be NULL */
        } comm;
        struct {
            const char *status; /* "ok" or "error" */
            const char *error;  /* may be NULL */
            json_int_t threads; /* threads of the sandbox's code the copy lacks (its word) */
        } ckpt;
        struct {
            const char *nonce;       /* the rollback's or the restore's */
            cb_rframe_facts_t facts; /* a restore's, as in hello (none after a rollback) */
        } resumed;
        struct {
            const char *op, *name; /* name may be NULL */
        } snapreq;
    } u;
} cb_rframe_t;

/* Parses and checks one frame body.  0: *out filled (root is a new
 * reference); -1: dropped, with the reason in why, out->root NULL,
 * out->type the known type the frame named, or CB_RF_COUNT when it named
 * none (or could not be read: not JSON), and out->has_seq/seq its integer
 * "seq" when one was read (a refused reply can still name its request). */
int cb_rframe_parse(const uint8_t *body, size_t len, cb_rframe_t *out, char *why, size_t why_len);
void cb_rframe_clear(cb_rframe_t *f);
/* The type's name, whether the runner waits for an ack after it (it must
 * keep its place among stdout/stderr), and when it is accepted. */
const char *cb_rframe_name(cb_rframe_type_t t);
bool cb_rframe_needs_ack(cb_rframe_type_t t);
unsigned cb_rframe_when(cb_rframe_type_t t);

#endif
