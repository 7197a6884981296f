/*
 * snapshot_priv.h - what snapshot.c (checkpoints in place: requests, records,
 * the magics) and snappause.c (pausing into an image and resuming from one)
 * share.  Only these two files include it.
 */
#ifndef CB_KERNEL_SNAPSHOT_PRIV_H
#define CB_KERNEL_SNAPSHOT_PRIV_H

#include "isolate/snap_limits.h"
#include "kernel/core.h"

#define CB_SNAP_TEXT_MAX 2048 /* bytes of what a magic prints */

typedef struct {
    long id;                         /* the session's id, 0 = free */
    char name[CB_SNAP_NAME_MAX + 1]; /* the user's name for it */
    int count;                       /* the execution count then */
    char created[32];                /* ISO time */
    uint64_t bytes;                  /* its files */
    uint32_t files;                  /* ... their number */
    long threads;                    /* threads of the code it lacks (the runner's word) */
    json_t *comms;                   /* {comm_id: {target_name}} open then (owned) */
} cb_snap_rec_t;

struct cb_snapshots {
    cb_kernel_t *k;                 /* borrowed */
    cb_snap_rec_t rec[CB_SNAP_MAX]; /* the checkpoints kept */
    long next_id;                   /* ids given to the session */
    /* the operation in progress */
    cb_snap_op_t op;                 /* CB_SNAP_NONE = none */
    bool from_cell;                  /* a cell asked (its output gets the outcome) */
    bool have_req;                   /* a control request waits for the reply */
    cb_msg_t req;                    /* ... it (owned) */
    char name[CB_SNAP_NAME_MAX + 1]; /* the name it is about */
    long id;                         /* the session's id of it */
    long replaces;                   /* checkpoint: the id of the same name, dropped after */
    cb_snap_result_t done;           /* a checkpoint's result, while the old one is dropped */
    json_int_t cell_seq;             /* the cell that asked last (the session's seq) */
    bool cell_asked, cell_listed;    /* ... for an operation, for the list */
    bool cell_told;                  /* ... and was told the rest is ignored */
    /* a pause (snappause.c) */
    int pause_fd;                       /* the image directory being written, -1 */
    char pause_id[CB_IMAGE_ID_HEX + 1]; /* its id */
    char store[CB_PATH_MAX];            /* the store it is in */
};

/* snapshot.c */
json_t *cb_snapshots_error(const char *evalue);                    /* an error reply's content */
void cb_snapshots_finish_req(cb_snapshots_t *sn, json_t *content); /* answers the request waiting */

/* snappause.c */
void cb_snappause_done(cb_snapshots_t *sn, const cb_snap_result_t *r);

#endif
