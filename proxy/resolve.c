/*
 * resolve.c - name resolution for the proxy, with c-ares inside its poll
 * loop (ARES_OPT_SOCK_STATE_CB: c-ares' sockets are polled with ours), so
 * there is no thread and a slow resolver stalls nothing but the request
 * waiting for it.  First the host's /etc/hosts (channel "f", operator
 * configuration: its addresses are trusted), then DNS (channel "b": special
 * addresses refused by route.c).  A callback finds its connection by (slot,
 * generation), so an answer for a connection closed meanwhile is dropped.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_priv.h"

static void *s_cb_arg(const cb_pconn_t *c, const cb_proxy_t *p) {
    return (void *) (uintptr_t) (((uint64_t) p->gens[c->slot] << 16) | c->slot);
}

static cb_pconn_t *s_cb_conn(cb_proxy_t *p, void *arg) {
    uint64_t v = (uint64_t) (uintptr_t) arg;
    size_t slot = (size_t) (v & 0xffff);
    uint32_t gen = (uint32_t) (v >> 16);
    if (slot >= (size_t) p->cfg.max_conns || p->slots[slot] == NULL || p->gens[slot] != gen)
        return NULL;
    cb_pconn_t *c = p->slots[slot];
    return c->state == CB_PX_RESOLVE ? c : NULL;
}

static size_t s_ai_addrs(const struct ares_addrinfo *res, cb_ipaddr_t *out, size_t max) {
    size_t n = 0;
    for (const struct ares_addrinfo_node *nd = res ? res->nodes : NULL; nd && n < max;
         nd = nd->ai_next) {
        if (nd->ai_family != AF_INET && nd->ai_family != AF_INET6) continue;
        cb_ipaddr_from_sa(&out[n++], nd->ai_addr);
    }
    return n;
}

/* A lookup's callback context: the proxy, the (slot, generation) key, and
 * which channel was asked. */
typedef struct {
    cb_proxy_t *p; /* the proxy */
    void *key;     /* s_cb_arg of the connection */
    bool files;    /* the hosts file ("f"), else DNS ("b") */
} s_ctx_t;

static void s_lookup(cb_proxy_t *p, cb_pconn_t *c, bool files);

/* An answer: the hosts file's addresses are trusted (operator
 * configuration), and without one DNS is asked; DNS's are checked
 * (route.c).  Dropped when the connection is gone or the query cancelled. */
static void s_on_answer(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
    (void) timeouts;
    s_ctx_t ctx = *(s_ctx_t *) arg;
    free(arg);
    cb_proxy_t *p = ctx.p;
    cb_pconn_t *c = s_cb_conn(p, ctx.key);
    bool dead = c == NULL || status == ARES_EDESTRUCTION || status == ARES_ECANCELLED;
    cb_ipaddr_t ips[CB_PROXY_ADDRS_MAX];
    size_t n = !dead && status == ARES_SUCCESS ? s_ai_addrs(res, ips, CB_PROXY_ADDRS_MAX) : 0;
    if (res) ares_freeaddrinfo(res);
    if (dead) return;
    if (ctx.files) {
        if (n > 0)
            cb_px_set_addrs(p, c, ips, n, true); /* the host's own /etc/hosts: operator config */
        else
            s_lookup(p, c, false);
        return;
    }
    if (status == ARES_ETIMEOUT) {
        cb_px_deny(p, c, 504, "resolving %s timed out", c->host);
        return;
    }
    if (status != ARES_SUCCESS || n == 0) {
        cb_px_deny(p, c, 502, "cannot resolve %s: %s", c->host,
                   status == ARES_SUCCESS ? "no address" : ares_strerror(status));
        return;
    }
    cb_px_set_addrs(p, c, ips, n, false);
}

/* Asks the hosts file (files) or DNS for c->host; the answer may come
 * before this returns. */
static void s_lookup(cb_proxy_t *p, cb_pconn_t *c, bool files) {
    s_ctx_t *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) {
        cb_px_deny(p, c, 502, "out of memory");
        return;
    }
    *ctx = (s_ctx_t){.p = p, .key = s_cb_arg(c, p), .files = files};
    struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT};
    ares_getaddrinfo(files ? p->files : p->dns, c->host, NULL, &hints, s_on_answer, ctx);
}

void cb_px_resolve(cb_proxy_t *p, cb_pconn_t *c) {
    c->state = CB_PX_RESOLVE;
    c->deadline = cb_now_ms() + p->cfg.resolve_timeout_ms;
    s_lookup(p, c, true);
}

static void s_sock_state(void *data, ares_socket_t fd, int readable, int writable) {
    cb_proxy_t *p = data;
    size_t i = 0;
    while (i < p->n_asocks && p->asocks[i].fd != fd)
        i++;
    if (!readable && !writable) {
        if (i < p->n_asocks) p->asocks[i] = p->asocks[--p->n_asocks];
        return;
    }
    if (i == p->n_asocks) {
        if (p->n_asocks >= CB_PX_ARES_SOCKS_MAX) {
            LOG_E("proxy: c-ares opened more than %d sockets", CB_PX_ARES_SOCKS_MAX);
            return;
        }
        p->n_asocks++;
    }
    p->asocks[i] = (cb_pares_sock_t){.fd = fd, .r = readable != 0, .w = writable != 0};
}

int cb_px_channel(cb_proxy_t *p, ares_channel *ch, char *lookups, bool watch) {
    struct ares_options o;
    memset(&o, 0, sizeof o);
    int mask = ARES_OPT_LOOKUPS | ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
    o.lookups = lookups;
    o.flags = ARES_FLAG_NOSEARCH; /* the name asked is the name resolved */
    o.timeout = CB_PROXY_DNS_TIMEOUT_MS;
    o.tries = CB_PROXY_DNS_TRIES;
    if (watch) {
        mask |= ARES_OPT_SOCK_STATE_CB;
        o.sock_state_cb = s_sock_state;
        o.sock_state_cb_data = p;
    }
    return ares_init_options(ch, &o, mask);
}
