/*
 * history.h - the cells this kernel ran, for history_request (tail, range,
 * search), as ipykernel's HistoryManager answers them for one session.
 *
 * Bounded by entries and by bytes (code plus remembered output): the oldest
 * go first.  A result's text/plain comes from the sandbox, so only its first
 * CB_HISTORY_OUTPUT_MAX bytes are kept.
 */
#ifndef CB_HISTORY_H
#define CB_HISTORY_H

#include <jansson.h>
#include <stddef.h>

typedef struct cb_history cb_history_t;

cb_history_t *cb_history_new(void);
void cb_history_destroy(cb_history_t **self_p);
/* Remembers cell `line` (code borrowed, copied). */
void cb_history_add(cb_history_t *h, int line, const char *code);
/* Remembers the text/plain result of cell `line`, if it is still known. */
void cb_history_set_output(cb_history_t *h, int line, const char *text, size_t len);
/* The "history" list of a history_reply for request content (borrowed):
 * a new reference. */
json_t *cb_history_query(const cb_history_t *h, const json_t *content);

#endif
