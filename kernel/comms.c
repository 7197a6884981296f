/*
 * comms.c - the table of open comms (see comms.h).  A comm id is looked up
 * in a jansson object (hash table) keyed by the id.
 */
#include "kernel/comms.h"

#include "kernel/bounds.h"

#include <stdlib.h>
#include <string.h>

struct cb_comms {
    json_t *open; /* comm_id -> target_name (string) */
};

cb_comms_t *cb_comms_new(void) {
    cb_comms_t *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->open = json_object();
    if (c->open == NULL) {
        free(c);
        return NULL;
    }
    return c;
}

void cb_comms_destroy(cb_comms_t **self_p) {
    if (*self_p == NULL) return;
    json_decref((*self_p)->open);
    free(*self_p);
    *self_p = NULL;
}

bool cb_comms_open(cb_comms_t *c, const char *comm_id, const char *target_name) {
    if (strlen(comm_id) > CB_COMM_ID_MAX || strlen(target_name) > CB_COMM_TARGET_MAX) return false;
    if (json_object_get(c->open, comm_id) == NULL && json_object_size(c->open) >= CB_COMMS_MAX)
        return false;
    return json_object_set_new(c->open, comm_id, json_string(target_name)) == 0;
}

void cb_comms_close(cb_comms_t *c, const char *comm_id) { json_object_del(c->open, comm_id); }

bool cb_comms_known(const cb_comms_t *c, const char *comm_id) {
    return json_object_get(c->open, comm_id) != NULL;
}

json_t *cb_comms_info(const cb_comms_t *c, const char *target_name) {
    json_t *out = json_object();
    const char *id;
    json_t *t;
    json_object_foreach(c->open, id, t) {
        if (target_name && strcmp(target_name, json_string_value(t)) != 0) continue;
        json_object_set_new(out, id, json_pack("{s:O}", "target_name", t));
    }
    return out;
}

json_t *cb_comms_take_all(cb_comms_t *c) {
    json_t *ids = json_array();
    const char *id;
    json_t *t;
    json_object_foreach(c->open, id, t) json_array_append_new(ids, json_string(id));
    json_object_clear(c->open);
    return ids;
}
