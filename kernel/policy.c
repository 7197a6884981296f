/*
 * policy.c - the network policy of a running session and what its cells
 * cost, as Jupyter messages (see policy.h).
 *
 * The policy's one source of truth is here.  A change goes to the running
 * sandbox's proxy through the launcher (kernel/netctl.c) and is adopted
 * only once the proxy applied it; the launcher flags of every later
 * sandbox carry it, so a sandbox restarted after a crash never gets the
 * kernelspec's (possibly wider) allowlist back.  A request is refused, with
 * the reason, when the kernel has no allowlist proxy, when the list does
 * not parse, or while a sandbox is starting (its launcher cannot answer).
 */
#include "kernel/policy.h"

#include "isolate/log.h"
#include "kernel/dispatch.h"
#include "kernel/launch.h"
#include "kernel/netctl.h"
#include "launcher/netproxy_limits.h"
#include "launcher/netrules.h"

#include <stdlib.h>
#include <string.h>

#define S_ENAME "NetworkPolicyError"

struct cb_policy {
    const char *mode;                     /* "none" | "host" | "allow" */
    char spec[CB_PROXY_SPEC_MAX + 1];     /* allow: the SPEC in force */
    char arg[CB_PROXY_SPEC_MAX + 8];      /* "allow:SPEC", for later launchers */
    long long generation;                 /* 0: the kernelspec's; one more per change */
    const char *fwd[CB_OPTS_FWD_MAX + 1]; /* launcher flags, --network's value = arg */
    cb_costs_t *costs;                    /* the cells' costs */
    cb_netrules_t scratch;                /* a list being checked */
};

static struct cb_policy *s_get(cb_kernel_t *k) {
    if (k->policy != NULL) return k->policy;
    struct cb_policy *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    const char *net = k->opts->c.network;
    bool allow = strncmp(net, "allow:", 6) == 0;
    p->mode = allow ? "allow" : strcmp(net, "host") == 0 ? "host" : "none";
    if (allow) snprintf(p->spec, sizeof p->spec, "%s", net + 6);
    if ((p->costs = cb_costs_new(allow)) == NULL) {
        free(p);
        return NULL;
    }
    k->policy = p;
    return p;
}

void cb_policy_destroy(cb_kernel_t *k) {
    if (k->policy == NULL) return;
    cb_costs_destroy(&k->policy->costs);
    free(k->policy);
    k->policy = NULL;
}

cb_costs_t *cb_policy_costs(cb_kernel_t *k) {
    struct cb_policy *p = s_get(k);
    return p ? p->costs : NULL;
}

json_t *cb_policy_advertise(void) {
    return json_pack("[s, s]", "cellblock_network_request", "usage_request");
}

/* {"mode", "allow": [...], "generation"}: the policy in force (new ref). */
static json_t *s_network(const struct cb_policy *p) {
    json_t *list = json_array();
    for (const char *s = p->spec; list && *s;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t) (comma - s) : strlen(s);
        json_array_append_new(list, json_stringn(s, n));
        s += n + (comma != NULL);
    }
    if (strcmp(p->mode, "allow") != 0) {
        json_decref(list);
        list = json_null();
    }
    return json_pack("{s:s, s:o, s:I}", "mode", p->mode, "allow", list, "generation",
                     (json_int_t) p->generation);
}

static void s_refuse(cb_kernel_t *k, cb_channel_t ch, const cb_msg_t *m, const char *why) {
    LOG_W("cellblock_network_request refused: %s", why);
    cb_dispatch_answer(k, ch, m,
                       json_pack("{s:s, s:s, s:s, s:[s]}", "status", "error", "ename", S_ENAME,
                                 "evalue", why, "traceback", why));
}

/* The list of the request as one SPEC.  0 ok, -1 with why. */
static int s_spec(struct cb_policy *p, const json_t *allow, const char *original, char *out,
                  size_t len, char *why, size_t why_len) {
    if (json_is_null(allow)) {
        snprintf(out, len, "%s", original);
        return 0;
    }
    size_t n = json_array_size(allow), used = 0;
    if (!json_is_array(allow) || n == 0 || n > CB_PROXY_RULES_MAX) {
        snprintf(why, why_len,
                 "'allow' must be a list of 1 to %d \"HOST[:PORT]\" strings, or null for the "
                 "kernelspec's allowlist (a kernel without network is one started with "
                 "--network none)",
                 CB_PROXY_RULES_MAX);
        return -1;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *h = json_string_value(json_array_get(allow, i));
        if (h == NULL || strchr(h, ',') != NULL || used + strlen(h) + 2 > len) {
            snprintf(why, why_len, "'allow' entry %zu is not one HOST[:PORT] string", i);
            return -1;
        }
        used += (size_t) snprintf(out + used, len - used, "%s%s", i ? "," : "", h);
    }
    cb_netrules_init(&p->scratch);
    char rwhy[CB_PROXY_ERR_MAX];
    if (cb_netrules_parse(&p->scratch, out, rwhy, sizeof rwhy) < 0) {
        snprintf(why, why_len, "%s", rwhy);
        return -1;
    }
    return 0;
}

/* The policy in force becomes spec: later launchers start with it. */
static void s_adopt(cb_kernel_t *k, struct cb_policy *p, const char *spec) {
    snprintf(p->spec, sizeof p->spec, "%s", spec);
    snprintf(p->arg, sizeof p->arg, "allow:%s", spec);
    p->generation++;
    size_t i = 0;
    for (const char *const *a = k->opts->fwd; *a && i < CB_OPTS_FWD_MAX; a++, i++) {
        p->fwd[i] = *a;
        if (strcmp(*a, "--network") == 0 && a[1] != NULL && i + 1 < CB_OPTS_FWD_MAX) {
            p->fwd[++i] = p->arg;
            a++;
        }
    }
    p->fwd[i] = NULL;
    k->scfg.launcher_args = p->fwd;
}

void cb_policy_network_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    struct cb_policy *p = s_get(k);
    char why[CB_PROXY_ERR_MAX], spec[CB_PROXY_SPEC_MAX + 1];
    json_t *allow = json_object_get(m->content, "allow");
    if (p == NULL) {
        s_refuse(k, ch, m, "out of memory");
        return;
    }
    if (strcmp(p->mode, "allow") != 0) {
        snprintf(why, sizeof why,
                 "this kernel's sandbox has %s network: an allowlist can change only in a kernel "
                 "started with --network allow:... (its egress proxy enforces it)",
                 strcmp(p->mode, "host") == 0 ? "the host's" : "no");
        s_refuse(k, ch, m, why);
        return;
    }
    if (allow == NULL ||
        s_spec(p, allow, k->opts->c.network + 6, spec, sizeof spec, why, sizeof why) < 0) {
        s_refuse(k, ch, m, allow == NULL ? "the request needs 'allow'" : why);
        return;
    }
    cb_launch_t *l = cb_session_launcher(k->session);
    long closed = 0;
    bool applied = false;
    if (l != NULL && !cb_session_ready(k->session)) {
        s_refuse(k, ch, m,
                 "the sandbox is starting: send the request again once it is "
                 "up (after the next reply)");
        return;
    }
    if (l != NULL) {
        if (cb_netctl_policy(l, spec, &closed, why, sizeof why) < 0) {
            s_refuse(k, ch, m, why);
            return;
        }
        applied = true;
    }
    s_adopt(k, p, spec);
    LOG_I("network policy %lld: allow:%s (%ld connection%s closed)", p->generation, spec, closed,
          closed == 1 ? "" : "s");
    cb_dispatch_answer(k, ch, m,
                       json_pack("{s:s, s:o, s:i, s:b}", "status", "ok", "network", s_network(p),
                                 "closed", (int) closed, "applied", applied));
}

void cb_policy_usage_request(cb_kernel_t *k, cb_channel_t ch, cb_msg_t *m, bool abort) {
    (void) abort;
    cb_costs_t *c = cb_policy_costs(k);
    json_t *content = c ? cb_costs_usage(c, k->session) : NULL;
    cb_dispatch_answer(k, ch, m, content ? content : json_pack("{s:s}", "status", "error"));
}

void cb_policy_execute_begin(cb_kernel_t *k) {
    cb_costs_t *c = cb_policy_costs(k);
    if (c != NULL) cb_costs_begin(c, k->session);
}

void cb_policy_execute_end(cb_kernel_t *k, json_t *cellblock, const json_t *artifacts) {
    struct cb_policy *p = s_get(k);
    if (p == NULL || cellblock == NULL) return;
    json_object_set_new(cellblock, "network", s_network(p));
    json_t *costs = cb_costs_end(p->costs, k->session, artifacts);
    if (costs != NULL) json_object_set_new(cellblock, "costs", costs);
}
