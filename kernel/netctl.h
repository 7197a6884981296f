/*
 * netctl.h - the kernel's network requests to its launcher (and through
 * it to the egress proxy): change the allowlist, read what each host cost
 * (docs/RUNNER_PROTOCOL.md section 2, "net" messages).
 *
 * A request is one datagram on the report socket; the launcher answers
 * with report lines that launch.c keeps for the request waiting.  The wait
 * is synchronous and bounded (CB_NETCTL_MS): the launcher and the proxy are
 * trusted, local and idle between their own events, so an answer takes a
 * fraction of a millisecond; a wedged one costs one bounded wait, and the
 * caller reports the error.
 */
#ifndef CB_NETCTL_H
#define CB_NETCTL_H

#include "kernel/launch.h"

#include <jansson.h>
#include <stddef.h>

#define CB_NETCTL_MS 3000 /* an answer must arrive within (the launcher waits 2000 for the proxy) */

/* "policy SPEC": the allowlist becomes SPEC ("" closes everything).
 * 0 ok with the connections it closed in *closed, -1 with why. */
int cb_netctl_policy(cb_launch_t *l, const char *spec, long *closed, char *why, size_t why_len);
/* "stats": every host's counters since the proxy started, as
 * {"host:port": {"connections", "bytes_up", "bytes_down", "refused"}}
 * (a new reference), or NULL with why. */
json_t *cb_netctl_stats(cb_launch_t *l, char *why, size_t why_len);

#endif
