/*
 * policy.h - the session's network policy and costs, as Jupyter messages
 * (issue 22; docs/ARCHITECTURE.md "Network policy, costs and usage"):
 *
 *   cellblock_network_request (control)  {"allow": ["host[:port]", ...]}
 *       replaces the allowlist of the running session ({"allow": null}: the
 *       kernelspec's again); connections it no longer allows are closed ->
 *       cellblock_network_reply {"status", "network": {...}, "closed"}
 *   usage_request (control)  -> usage_reply, ipykernel's keys, the sandbox's
 *       figures (JupyterLab's kernel usage panel reads it)
 *
 * and, in every execute_reply's metadata, "cellblock": {"network": the
 * policy in force for that cell, "costs": what it cost (kernel/costs.h)}.
 * A sandbox started after a change (a restart after a crash) starts with
 * the policy in force, never the kernelspec's wider one.
 */
#ifndef CB_POLICY_H
#define CB_POLICY_H

#include "kernel/core.h"
#include "kernel/costs.h"

/* Handlers of dispatch.c's table. */
void cb_policy_network_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort);
void cb_policy_usage_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort);
/* The cellblock requests this kernel answers, for kernel_info_reply
 * ("cellblock_requests"; a new reference). */
json_t *cb_policy_advertise(void);
/* An execute goes to the session: its costs start now. */
void cb_policy_execute_begin(cb_kernel_t *k);
/* The cell's costs (may be NULL before the first execute). */
cb_costs_t *cb_policy_costs(cb_kernel_t *k);
/* Adds "network" and "costs" to the execute_reply's "cellblock" metadata. */
void cb_policy_execute_end(cb_kernel_t *k, json_t *cellblock, const json_t *artifacts);
/* Frees what the policy holds.  Nulls k->policy. */
void cb_policy_destroy(cb_kernel_t *k);

#endif
