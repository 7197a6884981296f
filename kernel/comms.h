/*
 * comms.h - the comms a session has open, as the kernel saw them open and
 * close in both directions (frontend -> sandbox on shell, sandbox ->
 * frontends on iopub), for comm_info_request and for closing them all when
 * the sandbox that held them ends.  Bounded: CB_COMMS_MAX entries.
 */
#ifndef CB_COMMS_H
#define CB_COMMS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct cb_comms cb_comms_t;

cb_comms_t *cb_comms_new(void);
void cb_comms_destroy(cb_comms_t **self_p);
/* Records an open comm. false when the table is full (nothing recorded). */
bool cb_comms_open(cb_comms_t *c, const char *comm_id, const char *target_name);
void cb_comms_close(cb_comms_t *c, const char *comm_id);
bool cb_comms_known(const cb_comms_t *c, const char *comm_id);
/* {comm_id: {"target_name": ...}} of the open comms, only those of
 * target_name unless it is NULL: a new reference. */
json_t *cb_comms_info(const cb_comms_t *c, const char *target_name);
/* The open comm ids (a new reference), and forgets them all. */
json_t *cb_comms_take_all(cb_comms_t *c);

#endif
