/*
 * netsecrets.h - `--secret NAME@HOST[,HOST...]`, the launcher's side (the
 * proxy's is proxy/secrets.h; docs/SECURITY.md "Secrets at the proxy").
 *
 * The value comes from the kernel's own environment variable NAME, read from
 * /proc/KERNEL/environ as --env NAME is (never argv, never a file); it
 * travels to the proxy through a pipe, and nowhere else.  The sandbox gets
 * NAME = a random per-session placeholder, and a CA bundle that is the
 * system's (plus the certificates of --network-upstream-ca, when given, and
 * nothing else of that file: a key kept beside them stays out) with the
 * session CA appended, named by SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT and
 * CURL_CA_BUNDLE (NODE_EXTRA_CA_CERTS: the session CA alone).
 */
#ifndef CB_LAUNCHER_NETSECRETS_H
#define CB_LAUNCHER_NETSECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "isolate/mount.h"
#include "launcher/child.h"
#include "launcher/netproxy_limits.h"

/* One --secret value. */
typedef struct {
    char name[CB_PROXY_SECRET_NAME_MAX + 1];                      /* the variable */
    char hosts[CB_PROXY_SECRET_HOSTS_MAX][CB_PROXY_NAME_MAX + 1]; /* lower-case names */
    size_t n_hosts;                                               /* used entries */
} cb_secret_spec_t;

/* Parses "NAME@HOST[,HOST...]".  0 ok, -1 with why. */
int cb_secret_spec_parse(const char *v, cb_secret_spec_t *out, char *why, size_t why_len);
/* What all the --secret flags must satisfy together: at most
 * CB_PROXY_SECRETS_MAX, distinct names, no --env of the same name, every host
 * named by the allowlist (allow: the SPEC after "allow:", NULL without one),
 * at most CB_PROXY_BOUND_HOSTS_MAX hosts.  0 ok, -1 with why. */
int cb_secret_specs_check(const char *allow, const char *const *specs, size_t n,
                          const char *const *env, size_t n_env, char *why, size_t why_len);

typedef struct {
    char name[CB_PROXY_SECRET_NAME_MAX + 1]; /* the variable... */
    char placeholder[sizeof CB_PROXY_PLACEHOLDER_PREFIX +
                     CB_PROXY_PLACEHOLDER_HEX]; /* its stand-in */
} cb_secret_env_t;

typedef struct {
    cb_secret_env_t env[CB_PROXY_SECRETS_MAX]; /* for the sandbox's environment */
    size_t n;                                  /* used entries */
    char *table;                               /* the proxy's table, values in it (wiped) */
    size_t table_len;                          /* its bytes */
    char hosts[CB_PROXY_SPEC_MAX];             /* "a.org, b.org": the bound hosts, for the banner */
} cb_netsecrets_t;

/* Reads each secret's value from the environment of process `parent` and
 * makes the placeholders and the proxy's table.  0 ok (nothing when n is
 * 0), -1 with why (a variable not set, a value the proxy cannot carry). */
int cb_netsecrets_load(cb_netsecrets_t *s, const char *const *specs, size_t n, pid_t parent,
                       char *why, size_t why_len);
/* Zeroes and frees the table.  Idempotent. */
void cb_netsecrets_wipe(cb_netsecrets_t *s);
/* --network-upstream-ca FILE: a regular file of at most CB_PROXY_BUNDLE_MAX
 * bytes that holds at least one certificate (PEM) and nothing malformed.
 * 0 ok, -1 with why (naming the file). */
int cb_netsecrets_ca_check(const char *path, char *why, size_t why_len);
/* The sandbox's side: the CA bundle (a tmpfs at CB_PROXY_CA_DIR), the
 * variables naming it, and NAME=placeholder for each secret.  ca: the
 * session CA's certificate (PEM); upstream_ca: a PEM file whose
 * certificates (only they, parsed and written anew) are appended too, or
 * NULL.  0 ok, -1 with why. */
int cb_netsecrets_plan(const cb_netsecrets_t *s, const char *ca, size_t ca_len,
                       const char *upstream_ca, cb_mount_plan_t *mounts, cb_exec_plan_t *exec,
                       char *why, size_t why_len);
/* Adds NAME=value to the runner's environment.  0 ok, -1 errno. */
int cb_netenv_add(cb_exec_plan_t *exec, const char *name, const char *value);

#endif
