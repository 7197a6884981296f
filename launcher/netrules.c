/*
 * netrules.c - parse and match the egress allowlist (see netrules.h).
 *
 * Names are compared after normalisation only (lower case, no trailing
 * dot), IP literals by their binary value, so "LOCALHOST.", "127.1" or
 * "[::ffff:127.0.0.1]" cannot pass for something they are not: inet_pton
 * accepts only the canonical dotted quad, and a host that is neither a
 * valid name nor an address is refused before any rule is consulted.
 */
#include "launcher/netrules.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int s_fail(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(char *why, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (len > 0) (void) vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

void cb_netrules_init(cb_netrules_t *r) { memset(r, 0, sizeof *r); }

/* A DNS name: labels of letters, digits, '-' and '_' (seen in real names),
 * not starting or ending with '-', 1..63 bytes, at most 253 in all. */
static bool s_name_ok(const char *s, size_t len) {
    if (len == 0 || len > CB_PROXY_NAME_MAX) return false;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c == '.') {
            if (label == 0 || s[i - 1] == '-') return false;
            label = 0;
            continue;
        }
        if (!(isalnum(c) || c == '-' || c == '_')) return false;
        if (c == '-' && label == 0) return false;
        if (++label > CB_PROXY_LABEL_MAX) return false;
    }
    return label > 0 && s[len - 1] != '-';
}

static bool s_parse_ip(const char *s, size_t len, cb_ipaddr_t *ip) {
    char buf[INET6_ADDRSTRLEN + 1];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    memset(ip, 0, sizeof *ip);
    if (inet_pton(AF_INET, buf, ip->a) == 1) {
        ip->family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, buf, ip->a) == 1) {
        ip->family = AF_INET6;
        return true;
    }
    return false;
}

int cb_netrules_norm_host(const char *host, size_t len, char *out, size_t out_len, bool *is_ip,
                          cb_ipaddr_t *ip) {
    *is_ip = false;
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
        /* only IPv6 goes in brackets */
        if (!s_parse_ip(host + 1, len - 2, ip) || ip->family != AF_INET6) return -1;
        *is_ip = true;
        cb_ipaddr_str(ip, out, out_len);
        return 0;
    }
    if (s_parse_ip(host, len, ip)) {
        if (ip->family != AF_INET) return -1; /* bare IPv6 must be bracketed */
        *is_ip = true;
        cb_ipaddr_str(ip, out, out_len);
        return 0;
    }
    if (len > 0 && host[len - 1] == '.') len--; /* "pypi.org." is pypi.org */
    if (!s_name_ok(host, len) || len + 1 > out_len) return -1;
    /* a name made of digits and dots only is a malformed address ("127.1") */
    size_t digits = 0;
    while (digits < len && (isdigit((unsigned char) host[digits]) || host[digits] == '.'))
        digits++;
    if (digits == len) return -1;
    for (size_t i = 0; i < len; i++)
        out[i] = (char) tolower((unsigned char) host[i]);
    out[len] = '\0';
    return 0;
}

static int s_port(const char *s, size_t len, uint16_t *port) {
    if (len == 0 || len > 5) return -1;
    unsigned long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (unsigned long) (s[i] - '0');
    }
    if (v < 1 || v > 65535) return -1;
    *port = (uint16_t) v;
    return 0;
}

/* Splits "host[:port]" / "[v6][:port]" into host and port spans. */
static int s_split(const char *e, size_t len, const char **h, size_t *hl, const char **p,
                   size_t *pl) {
    *p = NULL;
    *pl = 0;
    if (len > 0 && e[0] == '[') {
        const char *close = memchr(e, ']', len);
        if (close == NULL) return -1;
        *h = e;
        *hl = (size_t) (close - e) + 1;
        size_t rest = len - *hl;
        if (rest == 0) return 0;
        if (close[1] != ':') return -1;
        *p = close + 2;
        *pl = rest - 1;
        return 0;
    }
    const char *colon = memchr(e, ':', len);
    *h = e;
    *hl = colon ? (size_t) (colon - e) : len;
    if (colon) {
        if (memchr(colon + 1, ':', len - *hl - 1) != NULL) return -1; /* bare IPv6 */
        *p = colon + 1;
        *pl = len - *hl - 1;
    }
    return 0;
}

static int s_add_rule(cb_netrules_t *r, const char *e, size_t len, char *why, size_t why_len) {
    if (r->n_rules >= CB_PROXY_RULES_MAX)
        return s_fail(why, why_len, "more than %d hosts", CB_PROXY_RULES_MAX);
    const char *h, *p;
    size_t hl, pl;
    if (s_split(e, len, &h, &hl, &p, &pl) < 0)
        return s_fail(why, why_len, "'%.*s' is not HOST[:PORT] (IPv6 goes in brackets)", (int) len,
                      e);
    cb_netrule_t *ru = &r->rules[r->n_rules];
    memset(ru, 0, sizeof *ru);
    if (p != NULL && s_port(p, pl, &ru->port) < 0)
        return s_fail(why, why_len, "'%.*s': the port must be 1..65535", (int) len, e);
    if (hl >= 2 && h[0] == '*' && h[1] == '.') {
        ru->wildcard = true;
        h += 2;
        hl -= 2;
    }
    bool is_ip = false;
    if (cb_netrules_norm_host(h, hl, ru->host, sizeof ru->host, &is_ip, &ru->ip) < 0)
        return s_fail(why, why_len,
                      "'%.*s' is not a host name, an IPv4 address or a bracketed IPv6 address",
                      (int) len, e);
    if (is_ip && ru->wildcard)
        return s_fail(why, why_len, "'%.*s': a wildcard needs a domain name", (int) len, e);
    ru->is_ip = is_ip;
    r->n_rules++;
    return 0;
}

/* The loopback pairs of one rule into out[0..3]: how many. */
static size_t s_rule_loopback(const cb_netrule_t *ru, cb_lofwd_t out[4]) {
    cb_ipaddr_t ips[2];
    size_t n_ip = 0;
    if (ru->is_ip) {
        static const unsigned char v6_lo[16] = {[15] = 1};
        if ((ru->ip.family == AF_INET && ru->ip.a[0] == 127) ||
            (ru->ip.family == AF_INET6 && memcmp(ru->ip.a, v6_lo, 16) == 0))
            ips[n_ip++] = ru->ip; /* not ::ffff:127.x: the sandbox cannot listen there */
    } else if (!ru->wildcard && strcmp(ru->host, "localhost") == 0) {
        memset(ips, 0, sizeof ips);
        ips[0].family = AF_INET;
        ips[0].a[0] = 127;
        ips[0].a[3] = 1;
        ips[1].family = AF_INET6;
        ips[1].a[15] = 1;
        n_ip = 2;
    }
    size_t n = 0;
    for (size_t i = 0; i < n_ip; i++) {
        if (ru->port != 0) {
            out[n++] = (cb_lofwd_t){.ip = ips[i], .port = ru->port};
        } else {
            out[n++] = (cb_lofwd_t){.ip = ips[i], .port = 80};
            out[n++] = (cb_lofwd_t){.ip = ips[i], .port = 443};
        }
    }
    return n;
}

size_t cb_netrules_loopback(const cb_netrules_t *r, cb_lofwd_t *out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < r->n_rules; i++) {
        cb_lofwd_t one[4];
        size_t k = s_rule_loopback(&r->rules[i], one);
        for (size_t j = 0; j < k; j++) {
            bool dup = false;
            for (size_t m = 0; m < n && !dup; m++)
                dup = out[m].port == one[j].port && cb_ipaddr_equal(&out[m].ip, &one[j].ip);
            if (dup) continue;
            if (n == max) return n + 1; /* more than fit: the caller refuses */
            out[n++] = one[j];
        }
    }
    return n;
}

int cb_netrules_match_loopback(const cb_netrules_t *r, const cb_ipaddr_t *ip, uint16_t port) {
    for (size_t i = 0; i < r->n_rules; i++) {
        cb_lofwd_t one[4];
        size_t k = s_rule_loopback(&r->rules[i], one);
        for (size_t j = 0; j < k; j++)
            if (one[j].port == port && cb_ipaddr_equal(&one[j].ip, ip)) return (int) i;
    }
    return -1;
}

/* What the loopback pairs of all the rules must satisfy. */
static int s_check_loopback(const cb_netrules_t *r, char *why, size_t why_len) {
    cb_lofwd_t fwd[CB_PROXY_FORWARDS_MAX];
    size_t n = cb_netrules_loopback(r, fwd, CB_PROXY_FORWARDS_MAX);
    if (n > CB_PROXY_FORWARDS_MAX)
        return s_fail(why, why_len,
                      "more than %d loopback address:port pairs (each is a listener in the "
                      "sandbox); name the host's loopback instead: --network-resolve "
                      "NAME=127.0.0.1 with allow:NAME:PORT",
                      CB_PROXY_FORWARDS_MAX);
    for (size_t i = 0; i < n; i++)
        if (fwd[i].port == CB_PROXY_PORT)
            return s_fail(why, why_len,
                          "port %d of the sandbox's loopback is the egress proxy's own; name the "
                          "host's loopback instead: --network-resolve NAME=127.0.0.1 with "
                          "allow:NAME:%d",
                          CB_PROXY_PORT, CB_PROXY_PORT);
    return 0;
}

int cb_netrules_parse(cb_netrules_t *r, const char *spec, char *why, size_t why_len) {
    size_t total = strlen(spec);
    if (total == 0) return s_fail(why, why_len, "the allowlist is empty (allow:HOST[:PORT],...)");
    if (total > CB_PROXY_SPEC_MAX)
        return s_fail(why, why_len, "the allowlist is longer than %d bytes", CB_PROXY_SPEC_MAX);
    const char *s = spec;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t) (comma - s) : strlen(s);
        if (len == 0) return s_fail(why, why_len, "empty entry in the allowlist");
        if (s_add_rule(r, s, len, why, why_len) < 0) return -1;
        if (comma == NULL) break;
        s = comma + 1;
    }
    return s_check_loopback(r, why, why_len);
}

int cb_netrules_add_pin(cb_netrules_t *r, const char *arg, char *why, size_t why_len) {
    if (r->n_pins >= CB_PROXY_PINS_MAX)
        return s_fail(why, why_len, "more than %d names pinned", CB_PROXY_PINS_MAX);
    const char *eq = strchr(arg, '=');
    if (eq == NULL) return s_fail(why, why_len, "'%s' is not NAME=ADDRESS", arg);
    cb_pin_t *p = &r->pins[r->n_pins];
    bool is_ip = false;
    cb_ipaddr_t dummy;
    if (cb_netrules_norm_host(arg, (size_t) (eq - arg), p->name, sizeof p->name, &is_ip, &dummy) <
            0 ||
        is_ip)
        return s_fail(why, why_len, "'%s': NAME must be a host name", arg);
    const char *a = eq + 1;
    size_t al = strlen(a);
    if (al >= 2 && a[0] == '[' && a[al - 1] == ']') {
        a++;
        al -= 2;
    }
    if (!s_parse_ip(a, al, &p->ip))
        return s_fail(why, why_len, "'%s': ADDRESS must be an IPv4 or IPv6 address", arg);
    r->n_pins++;
    return 0;
}

static bool s_port_ok(const cb_netrule_t *ru, uint16_t port) {
    return ru->port == 0 ? (port == 80 || port == 443) : ru->port == port;
}

int cb_netrules_match(const cb_netrules_t *r, const char *host, bool is_ip, const cb_ipaddr_t *ip,
                      uint16_t port) {
    size_t hl = strlen(host);
    for (size_t i = 0; i < r->n_rules; i++) {
        const cb_netrule_t *ru = &r->rules[i];
        if (!s_port_ok(ru, port) || ru->is_ip != is_ip) continue;
        if (is_ip) {
            if (cb_ipaddr_equal(&ru->ip, ip)) return (int) i;
            continue;
        }
        if (!ru->wildcard) {
            if (strcmp(ru->host, host) == 0) return (int) i;
            continue;
        }
        size_t sl = strlen(ru->host);
        if (hl > sl + 1 && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, ru->host) == 0)
            return (int) i;
    }
    return -1;
}

size_t cb_netrules_pins(const cb_netrules_t *r, const char *host, cb_ipaddr_t *out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < r->n_pins && n < max; i++)
        if (strcmp(r->pins[i].name, host) == 0) out[n++] = r->pins[i].ip;
    return n;
}

void cb_netrules_format(const cb_netrules_t *r, size_t i, char *buf, size_t len) {
    if (i >= r->n_rules) {
        (void) snprintf(buf, len, "?");
        return;
    }
    const cb_netrule_t *ru = &r->rules[i];
    bool v6 = ru->is_ip && ru->ip.family == AF_INET6;
    char port[8] = "";
    if (ru->port != 0) (void) snprintf(port, sizeof port, ":%u", (unsigned) ru->port);
    (void) snprintf(buf, len, "%s%s%s%s%s", ru->wildcard ? "*." : "", v6 ? "[" : "", ru->host,
                    v6 ? "]" : "", port);
}

void cb_netrules_describe(const cb_netrules_t *r, char *buf, size_t len) {
    if (len == 0) return;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < r->n_rules; i++) {
        char one[CB_PROXY_NAME_MAX + 16];
        cb_netrules_format(r, i, one, sizeof one);
        char more[32];
        int ml = snprintf(more, sizeof more, ", ... (+%zu more)", r->n_rules - i);
        size_t need = strlen(one) + (i ? 2 : 0);
        /* keep room for the "+N more" tail unless this is the last rule */
        size_t reserve = i + 1 < r->n_rules ? (size_t) ml : 0;
        if (used + need + reserve + 1 > len) {
            (void) snprintf(buf + used, len - used, "%s", i ? more : more + 2);
            return;
        }
        used += (size_t) snprintf(buf + used, len - used, "%s%s", i ? ", " : "", one);
    }
}

/* ---- addresses ---------------------------------------------------------- */

void cb_ipaddr_from_sa(cb_ipaddr_t *ip, const struct sockaddr *sa) {
    memset(ip, 0, sizeof *ip);
    ip->family = sa->sa_family;
    if (sa->sa_family == AF_INET)
        memcpy(ip->a, &((const struct sockaddr_in *) (const void *) sa)->sin_addr, 4);
    else if (sa->sa_family == AF_INET6)
        memcpy(ip->a, &((const struct sockaddr_in6 *) (const void *) sa)->sin6_addr, 16);
}

bool cb_ipaddr_equal(const cb_ipaddr_t *x, const cb_ipaddr_t *y) {
    return x->family == y->family && memcmp(x->a, y->a, x->family == AF_INET ? 4 : 16) == 0;
}

void cb_ipaddr_str(const cb_ipaddr_t *ip, char *buf, size_t len) {
    char tmp[INET6_ADDRSTRLEN];
    if (inet_ntop(ip->family, ip->a, tmp, sizeof tmp) == NULL)
        (void) snprintf(tmp, sizeof tmp, "?");
    (void) snprintf(buf, len, "%s", tmp);
}

typedef struct {
    unsigned char net[16]; /* prefix, network order */
    unsigned bits;         /* prefix length */
    const char *what;      /* the class, for messages */
    bool always;           /* refused even when named */
} s_range_t;

static bool s_in(const unsigned char *a, const unsigned char *net, unsigned bits) {
    unsigned full = bits / 8, rest = bits % 8;
    if (memcmp(a, net, full) != 0) return false;
    if (rest == 0) return true;
    unsigned char mask = (unsigned char) (0xffu << (8 - rest));
    return (a[full] & mask) == (net[full] & mask);
}

/* IANA special-purpose registries (RFC 6890 and successors), the cloud
 * metadata addresses, and everything that is not global unicast. */
static const s_range_t s_v4[] = {
    {{0, 0, 0, 0}, 8, "unspecified (this host)", true},
    {{10, 0, 0, 0}, 8, "private", false},
    {{100, 100, 100, 200}, 32, "cloud metadata", false},
    {{100, 64, 0, 0}, 10, "shared (carrier-grade NAT)", false},
    {{127, 0, 0, 0}, 8, "loopback", false},
    {{169, 254, 169, 254}, 32, "cloud metadata", false},
    {{169, 254, 0, 0}, 16, "link-local", false},
    {{172, 16, 0, 0}, 12, "private", false},
    {{192, 0, 0, 0}, 24, "IETF protocol assignment", false},
    {{192, 0, 2, 0}, 24, "documentation", false},
    {{192, 88, 99, 0}, 24, "6to4 relay", false},
    {{192, 168, 0, 0}, 16, "private", false},
    {{198, 18, 0, 0}, 15, "benchmarking", false},
    {{198, 51, 100, 0}, 24, "documentation", false},
    {{203, 0, 113, 0}, 24, "documentation", false},
    {{224, 0, 0, 0}, 4, "multicast", true},
    {{255, 255, 255, 255}, 32, "broadcast", true},
    {{240, 0, 0, 0}, 4, "reserved", false},
};
static const s_range_t s_v6[] = {
    {{0}, 128, "unspecified (this host)", true},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, "loopback", false},
    {{0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54},
     128,
     "cloud metadata",
     false},
    {{0x01, 0x00}, 64, "discard-only", false},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation", false},
    {{0x20, 0x01, 0x00, 0x00}, 32, "Teredo tunnel", false},
    {{0x20, 0x01, 0x00, 0x00}, 23, "IETF protocol assignment", false},
    {{0xfc}, 7, "unique local (private)", false},
    {{0xfe, 0x80}, 10, "link-local", false},
    {{0xfe, 0xc0}, 10, "site-local", false},
    {{0xff}, 8, "multicast", true},
    {{0}, 96, "IPv4-compatible (deprecated)", false},
};

const char *cb_addr_special(const cb_ipaddr_t *ip, bool *always) {
    *always = false;
    if (ip->family == AF_INET) {
        for (size_t i = 0; i < sizeof s_v4 / sizeof s_v4[0]; i++)
            if (s_in(ip->a, s_v4[i].net, s_v4[i].bits)) {
                *always = s_v4[i].always;
                return s_v4[i].what;
            }
        return NULL;
    }
    if (ip->family != AF_INET6) {
        *always = true;
        return "not an IP address";
    }
    /* IPv6 forms that carry an IPv4 address: judge the IPv4 address */
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    cb_ipaddr_t v4 = {.family = AF_INET};
    if (memcmp(ip->a, mapped, 12) == 0 || memcmp(ip->a, nat64, 12) == 0) {
        memcpy(v4.a, ip->a + 12, 4);
        const char *w = cb_addr_special(&v4, always);
        return w;
    }
    if (ip->a[0] == 0x20 && ip->a[1] == 0x02) { /* 6to4: 2002:AABB:CCDD::/48 */
        memcpy(v4.a, ip->a + 2, 4);
        const char *w = cb_addr_special(&v4, always);
        if (w != NULL) return w;
    }
    for (size_t i = 0; i < sizeof s_v6 / sizeof s_v6[0]; i++)
        if (s_in(ip->a, s_v6[i].net, s_v6[i].bits)) {
            *always = s_v6[i].always;
            return s_v6[i].what;
        }
    /* only 2000::/3 is global unicast */
    if ((ip->a[0] & 0xe0) != 0x20) return "reserved";
    return NULL;
}
