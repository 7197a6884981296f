/*
 * netrules.h - the egress allowlist: `--network allow:HOST[:PORT][,...]`,
 * `--network-resolve NAME=ADDR` pins, and the classes of addresses the proxy
 * never connects to unless the operator named them.
 *
 * Pure code (no I/O, no allocation): the kernel and the launcher use it to
 * validate their flags, the proxy to decide.  Matching rules:
 *   - a name matches a rule of the same name (case-insensitive, a trailing
 *     dot ignored); "*.example.com" matches every name below example.com,
 *     not example.com itself;
 *   - an IP literal matches only a rule with the same address (IPv6 in
 *     brackets: "[2001:db8::1]:443");
 *   - a rule without a port allows 80 and 443;
 *   - a loopback address (127.0.0.0/8, [::1], "localhost") is reached
 *     from inside at that same address: the proxy listens there in the
 *     sandbox and forwards to the host's (cb_netrules_loopback), so
 *     clients that bypass the proxy for loopback (NO_PROXY) still work.
 */
#ifndef CB_LAUNCHER_NETRULES_H
#define CB_LAUNCHER_NETRULES_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/netproxy_limits.h"

typedef struct {
    int family;          /* AF_INET or AF_INET6 */
    unsigned char a[16]; /* the address, network order (4 or 16 bytes used) */
} cb_ipaddr_t;

typedef struct {
    char host[CB_PROXY_NAME_MAX + 1]; /* lower-case name, wildcard suffix, or IP text */
    bool wildcard;                    /* "*.host": names below host */
    bool is_ip;                       /* an IP literal rule */
    cb_ipaddr_t ip;                   /* is_ip: the address */
    uint16_t port;                    /* 0: 80 and 443 */
} cb_netrule_t;

typedef struct {
    char name[CB_PROXY_NAME_MAX + 1]; /* lower-case name */
    cb_ipaddr_t ip;                   /* what it resolves to */
} cb_pin_t;

/* A loopback address and port the sandbox reaches through the proxy: the
 * sandbox's init listens on it inside (its own loopback), the proxy
 * connects to the same address and port on the host's. */
typedef struct {
    cb_ipaddr_t ip; /* 127.x.y.z or ::1 */
    uint16_t port;  /* the port */
} cb_lofwd_t;

typedef struct {
    cb_netrule_t rules[CB_PROXY_RULES_MAX]; /* in the order given */
    size_t n_rules;                         /* used entries */
    cb_pin_t pins[CB_PROXY_PINS_MAX];       /* --network-resolve */
    size_t n_pins;                          /* used entries */
} cb_netrules_t;

/* Empties r. */
void cb_netrules_init(cb_netrules_t *r);
/* Adds the rules of spec ("HOST[:PORT],..." without "allow:").  0 ok, -1
 * with a one-line reason in why. */
int cb_netrules_parse(cb_netrules_t *r, const char *spec, char *why, size_t why_len);
/* Adds a pin "NAME=ADDR".  0 ok, -1 with why. */
int cb_netrules_add_pin(cb_netrules_t *r, const char *arg, char *why, size_t why_len);
/* Normalises a host as it arrives in a request (lower case, no trailing
 * dot; IPv6 without brackets) into out.  Sets *ip when it is an IP
 * literal.  0 ok, -1 not a valid host name or address. */
int cb_netrules_norm_host(const char *host, size_t len, char *out, size_t out_len, bool *is_ip,
                          cb_ipaddr_t *ip);
/* The first rule allowing (normalised host, port), or -1. */
int cb_netrules_match(const cb_netrules_t *r, const char *host, bool is_ip, const cb_ipaddr_t *ip,
                      uint16_t port);
/* The loopback pairs the rules name (IP rules in 127.0.0.0/8 or [::1], and
 * "localhost" for both 127.0.0.1 and ::1; a rule without a port gives 80
 * and 443), without duplicates, into out (at most max): how many. */
size_t cb_netrules_loopback(const cb_netrules_t *r, cb_lofwd_t *out, size_t max);
/* The first rule naming the loopback pair (ip, port), or -1. */
int cb_netrules_match_loopback(const cb_netrules_t *r, const cb_ipaddr_t *ip, uint16_t port);
/* Pinned addresses of host into out (at most max); returns how many. */
size_t cb_netrules_pins(const cb_netrules_t *r, const char *host, cb_ipaddr_t *out, size_t max);
/* Writes rule i as the operator would write it ("*.a.org:8443", "[::1]:80"). */
void cb_netrules_format(const cb_netrules_t *r, size_t i, char *buf, size_t len);
/* "a.org:443, *.b.org" (all rules; "..." and how many more when it does
 * not fit in len). */
void cb_netrules_describe(const cb_netrules_t *r, char *buf, size_t len);

/* Why an address is special, or NULL when it is an ordinary public unicast
 * address.  *always is set for classes refused even when named
 * (unspecified, multicast, broadcast). */
const char *cb_addr_special(const cb_ipaddr_t *ip, bool *always);
/* From/to socket addresses. */
void cb_ipaddr_from_sa(cb_ipaddr_t *ip, const struct sockaddr *sa);
bool cb_ipaddr_equal(const cb_ipaddr_t *x, const cb_ipaddr_t *y);
/* "1.2.3.4" / "2001:db8::1" into buf. */
void cb_ipaddr_str(const cb_ipaddr_t *ip, char *buf, size_t len);

#endif
