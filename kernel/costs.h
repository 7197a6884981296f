/*
 * costs.h - what each cell cost, for its execute_reply's metadata
 * ("cellblock": {"costs": ...}, docs/ARCHITECTURE.md "What a cell cost")
 * and `cellblock run --json`; and the sandbox's figures for usage_request.
 *
 * Counted by the kernel itself, never taken from the sandbox: wall time;
 * CPU, memory now and peak from the sandbox's cgroup (isolate/cgstat.h);
 * stdout, stderr and display bytes as the kernel relays them; the files the
 * artifact collector returned; and, with an allowlist, each host's
 * connections, bytes each way and refusals from the egress proxy.
 */
#ifndef CB_COSTS_H
#define CB_COSTS_H

#include "kernel/session.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct cb_costs cb_costs_t;

/* network: the sandbox has an egress proxy (per-host costs).  NULL: ENOMEM. */
cb_costs_t *cb_costs_new(bool network);
void cb_costs_destroy(cb_costs_t **self_p);
/* A cell starts: the clocks and counters start from here. */
void cb_costs_begin(cb_costs_t *c, cb_session_t *s);
/* Bytes of stdout (which 0) or stderr (1) relayed for the cell. */
void cb_costs_stream(cb_costs_t *c, int which, size_t n);
/* Bytes of a display, update or result relayed for the cell. */
void cb_costs_display(cb_costs_t *c, size_t n);
/* The cell ended: its costs (a new reference).  artifacts: the collector's
 * summary of the files it returned (borrowed, may be NULL). */
json_t *cb_costs_end(cb_costs_t *c, cb_session_t *s, const json_t *artifacts);
/* usage_reply's content, ipykernel's keys with the sandbox's figures (a new
 * reference). */
json_t *cb_costs_usage(cb_costs_t *c, cb_session_t *s);
/* The sandbox's memory now (its cgroup's), in *bytes: 0, or -1 when it has
 * no cgroup to ask. */
int cb_costs_memory(cb_costs_t *c, cb_session_t *s, uint64_t *bytes);

#endif
