/*
 * netproxy_priv.h - the egress proxy's launcher-side state, shared by
 *   netproxy.c       its life: spawned (before the sandbox, so the session
 *                    CA is known when the sandbox is planned), given the
 *                    listeners, restarted, killed
 *   netproxy_init.c  the listeners, made by the sandbox's init inside
 *   netctl.c         its control socket, and the kernel's requests relayed
 * Nothing else includes it.
 */
#ifndef CB_LAUNCHER_NETPROXY_PRIV_H
#define CB_LAUNCHER_NETPROXY_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "launcher/netproxy.h"
#include "launcher/netproxy_limits.h"
#include "launcher/netrules.h"
#include "launcher/netsecrets.h"

#define CB_NP_ARG_BYTES 32 /* a rendered number */

struct cb_netproxy {
    const cb_options_t *opts;                      /* borrowed */
    cb_netrules_t rules;                           /* the allowlist at start, for the banner */
    char allow_now[CB_PROXY_SPEC_MAX + 1];         /* the allowlist in force (policy requests) */
    char bin[CB_PATH_MAX];                         /* cellblock-proxy next to us */
    int sv[2];                                     /* [0] ours, [1] init's: the listeners */
    int listen[CB_PROXY_LISTENERS];                /* received listeners, -1 */
    size_t n_listen;                               /* used entries */
    cb_lofwd_t fwd[CB_PROXY_FORWARDS_MAX];         /* loopback pairs the rules name */
    size_t n_fwd;                                  /* used entries */
    int fwd_fd[CB_PROXY_FORWARDS_MAX];             /* their listeners inside, received, -1 */
    size_t n_fwd_fd;                               /* received (those init could bind) */
    int ctl;                                       /* our end of the proxy's control socket */
    pid_t pid;                                     /* the running proxy, -1 */
    int restarts;                                  /* restarts after crashes */
    bool stopping;                                 /* we killed it */
    bool listening;                                /* the proxy has the listeners */
    char *argv[CB_PROXY_ARGS_MAX];                 /* its command line */
    char nums[CB_PROXY_ARGS_MAX][CB_NP_ARG_BYTES]; /* numbers in it */
    cb_netsecrets_t secrets;                       /* --secret: placeholders, the table */
    char ca_pem[CB_PROXY_CA_PEM_MAX];              /* the session CA's certificate */
    size_t ca_len;                                 /* its bytes, 0: no secrets */
};

/* What init sends with the listeners: how many of each, and which
 * loopback pairs could be bound (IPv6 may be disabled on the host). */
typedef struct {
    int n_proxy;       /* the proxy's own: 127.0.0.1:3128, [::1]:3128, the unix socket */
    int n_fwd;         /* forward listeners that follow them */
    uint32_t fwd_mask; /* bit i: np->fwd[i] is among them */
} cb_np_listen_msg_t;

/* netctl.c */
/* One request to the proxy (fds passed with it), its answer into reply
 * (NUL-terminated).  Answer length, or -1 with why (no answer in
 * CB_PROXY_CTL_MS, the socket gone). */
long cb_np_call(cb_netproxy_t *np, const char *req, const int *fds, size_t n_fds, char *reply,
                size_t cap, char *why, size_t why_len);
/* Hands the listeners to the running proxy.  0 ok, -1 with why. */
int cb_np_send_listeners(cb_netproxy_t *np, char *why, size_t why_len);

#endif
