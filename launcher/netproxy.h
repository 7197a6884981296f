/*
 * netproxy.h - `--network allow:...`: the sandbox's one way out, an HTTP(S)
 * proxy (cellblock-proxy) that runs outside the sandbox, reached from inside
 * on 127.0.0.1:3128, [::1]:3128 and /run/cellblock/proxy.sock.
 *
 * The sandbox's init creates those listening sockets in its own network
 * namespace (so connections come from the sandbox's loopback) and passes
 * them out; the launcher starts the proxy on the host side with them,
 * supervises it for the sandbox's life and kills it with the sandbox.
 *
 * Hooks, in order:
 *   launcher: cb_netproxy_new            (main.c, before the sandbox starts)
 *   sandbox.c: cb_netproxy_plan          (the proxy starts; mounts + env of the runner)
 *   init:      cb_netproxy_child_listen  (after the mounts; async-signal-safe)
 *   sandbox.c: cb_netproxy_start         (fds in, proxy started, "ready")
 *   sandbox.c: cb_netproxy_describe      (the banner)
 *   main.c:    cb_netproxy_kernel_line   (the kernel's policy and cost requests)
 *   main.c:    cb_netproxy_reaped / cb_netproxy_kill / cb_netproxy_destroy
 */
#ifndef CB_LAUNCHER_NETPROXY_H
#define CB_LAUNCHER_NETPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "launcher/child.h"
#include "isolate/mount.h"
#include "launcher/options.h"

typedef struct cb_netproxy cb_netproxy_t;

/* NULL when opts asks for no allowlist (not an error: *err stays "").
 * Otherwise the object, or NULL with a one-line reason in err. */
cb_netproxy_t *cb_netproxy_new(const cb_options_t *opts, char *err, size_t err_len);
/* Kills the proxy, closes everything.  Idempotent, NULL ok. */
void cb_netproxy_destroy(cb_netproxy_t **self_p);
/* Starts the proxy (it has no listeners yet), then adds the socket
 * directory (and with --secret the CA bundle) to the mount plan and the
 * proxy variables (HTTP_PROXY, https_proxy, NO_PROXY, ...
 * CELLBLOCK_NETWORK_ALLOW; SSL_CERT_FILE, ...; each secret's placeholder)
 * to the runner's environment.  0 ok, -1 errno (the reason logged). */
int cb_netproxy_plan(cb_netproxy_t *self, cb_mount_plan_t *mounts, cb_exec_plan_t *exec);
/* In the sandbox's init, after the mounts: creates the listeners, sends them
 * to the launcher, closes them.  Async-signal-safe.  0 ok, -1 errno. */
int cb_netproxy_child_listen(const cb_netproxy_t *self);
/* In the launcher, once init passed the listeners: hands them to the
 * proxy.  0 ok, -1 with err. */
int cb_netproxy_start(cb_netproxy_t *self, char *err, size_t err_len);
/* "net (lo only; egress only through the proxy to: a.org:443, ...)". */
void cb_netproxy_describe(const cb_netproxy_t *self, char *buf, size_t len);
/* A child was reaped: true if it was the proxy (then restarted, a bounded
 * number of times, or given up with the listeners closed). */
bool cb_netproxy_reaped(cb_netproxy_t *self, pid_t pid, int status);
/* SIGKILL to the proxy (teardown); it is reaped by the caller's loop or by
 * destroy. */
void cb_netproxy_kill(cb_netproxy_t *self);
/* One request of the kernel's, `net SEQ policy|stats ...` as main.c read it
 * from the report socket (len bytes, NUL-terminated), answered with reports
 * (netctl.c).  np may be NULL (no allowlist: the answer says so). */
void cb_netproxy_kernel_line(cb_netproxy_t *np, const char *buf, size_t len);

#endif
