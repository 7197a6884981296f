/* test_proxy_rules.c - the allowlist grammar, matching, pins, and the
 * special address classes the proxy refuses unless named. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "launcher/netrules.h"
#include "tap.h"

static cb_netrules_t R;

static int match(const char *host, unsigned port) {
    char norm[CB_PROXY_NAME_MAX + 1];
    bool is_ip = false;
    cb_ipaddr_t ip;
    if (cb_netrules_norm_host(host, strlen(host), norm, sizeof norm, &is_ip, &ip) < 0) return -2;
    return cb_netrules_match(&R, norm, is_ip, &ip, (uint16_t) port);
}

static const char *special(const char *addr) {
    cb_ipaddr_t ip = {0};
    ip.family = strchr(addr, ':') ? AF_INET6 : AF_INET;
    if (inet_pton(ip.family, addr, ip.a) != 1) return "BAD";
    bool always;
    const char *w = cb_addr_special(&ip, &always);
    return w ? w : "public";
}

static int bad(const char *spec) {
    cb_netrules_t r;
    char why[256];
    cb_netrules_init(&r);
    return cb_netrules_parse(&r, spec, why, sizeof why);
}

int main(void) {
    char why[256];
    cb_netrules_init(&R);
    TAP_EQ_INT(cb_netrules_parse(&R,
                                 "pypi.org,Files.PythonHosted.org:443,*.corp.example:8443,"
                                 "127.0.0.1:9000,[::1]:9001,api.test.:80",
                                 why, sizeof why),
               0, "a mixed allowlist parses");
    TAP_EQ_INT(R.n_rules, 6, "six rules");
    TAP_EQ_INT(match("pypi.org", 443), 0, "exact name, default port 443");
    TAP_EQ_INT(match("PyPI.org.", 80), 0, "case and a trailing dot do not matter; default port 80");
    TAP_EQ_INT(match("pypi.org", 8080), -1, "a rule without a port allows only 80 and 443");
    TAP_EQ_INT(match("evil-pypi.org", 443), -1, "no suffix match without a wildcard");
    TAP_EQ_INT(match("pypi.org.evil.com", 443), -1, "no prefix match");
    TAP_EQ_INT(match("files.pythonhosted.org", 443), 1, "rule names are lower-cased");
    TAP_EQ_INT(match("files.pythonhosted.org", 80), -1, "an explicit port is the only port");
    TAP_EQ_INT(match("a.corp.example", 8443), 2, "wildcard: a name below the domain");
    TAP_EQ_INT(match("a.b.corp.example", 8443), 2, "wildcard: deeper names too");
    TAP_EQ_INT(match("corp.example", 8443), -1, "wildcard: not the domain itself");
    TAP_EQ_INT(match("xcorp.example", 8443), -1, "wildcard: label boundary");
    TAP_EQ_INT(match("127.0.0.1", 9000), 3, "an IP literal that is listed");
    TAP_EQ_INT(match("127.0.0.2", 9000), -1, "another address is not");
    TAP_EQ_INT(match("127.1", 9000), -2, "short IPv4 forms are refused, not resolved");
    TAP_EQ_INT(match("0x7f.0.0.1", 9000), -1, "hex forms are names that match nothing");
    TAP_EQ_INT(match("[::1]", 9001), 4, "a bracketed IPv6 literal that is listed");
    TAP_EQ_INT(match("[0:0:0:0:0:0:0:1]", 9001), 4, "IPv6 compared by value");
    TAP_EQ_INT(match("[::ffff:127.0.0.1]", 9000), -1, "a mapped address is not the IPv4 rule");
    TAP_EQ_INT(match("::1", 9001), -2, "bare IPv6 in a host is refused");
    TAP_EQ_INT(match("api.test", 80), 5, "a rule written with a trailing dot");
    TAP_EQ_INT(match("bad_host!", 80), -2, "invalid characters");
    TAP_EQ_INT(match("", 80), -2, "empty host");

    char d[64];
    cb_netrules_describe(&R, d, sizeof d);
    TAP_OK(strstr(d, "pypi.org") == d && strstr(d, "more)") != NULL,
           "describe names the first rules and counts the rest: '%s'", d);
    cb_netrules_format(&R, 4, d, sizeof d);
    TAP_EQ_STR(d, "[::1]:9001", "format of an IPv6 rule");
    cb_netrules_format(&R, 2, d, sizeof d);
    TAP_EQ_STR(d, "*.corp.example:8443", "format of a wildcard rule");

    TAP_OK(bad("") < 0, "empty allowlist");
    TAP_OK(bad("a.org,,b.org") < 0, "empty entry");
    TAP_OK(bad("a.org:0") < 0, "port 0");
    TAP_OK(bad("a.org:65536") < 0, "port too large");
    TAP_OK(bad("a.org:44x") < 0, "port not a number");
    TAP_OK(bad("::1") < 0, "unbracketed IPv6");
    TAP_OK(bad("*.10.0.0.1") < 0, "wildcard over an address");
    TAP_OK(bad("*") < 0, "bare wildcard");
    TAP_OK(bad("a..b") < 0, "empty label");
    TAP_OK(bad("-a.org") < 0, "label starting with '-'");
    TAP_OK(bad("a b.org") < 0, "space in a name");
    char big[CB_PROXY_SPEC_MAX + 16];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    TAP_OK(bad(big) < 0, "over-long allowlist");

    TAP_EQ_INT(cb_netrules_add_pin(&R, "pypi.org=10.1.2.3", why, sizeof why), 0, "pin parses");
    TAP_EQ_INT(cb_netrules_add_pin(&R, "pypi.org=[2001:db8::5]", why, sizeof why), 0,
               "IPv6 pin parses");
    cb_ipaddr_t pins[4];
    TAP_EQ_INT(cb_netrules_pins(&R, "pypi.org", pins, 4), 2, "both pins found");
    TAP_EQ_INT(cb_netrules_pins(&R, "other.org", pins, 4), 0, "no pin for another name");
    TAP_OK(cb_netrules_add_pin(&R, "10.0.0.1=10.0.0.2", why, sizeof why) < 0, "pin of an address");
    TAP_OK(cb_netrules_add_pin(&R, "a.org=example.com", why, sizeof why) < 0, "pin to a name");
    TAP_OK(cb_netrules_add_pin(&R, "a.org", why, sizeof why) < 0, "pin without '='");

    TAP_EQ_STR(special("93.184.216.34"), "public", "a public IPv4 address");
    TAP_EQ_STR(special("2606:2800:220:1:248:1893:25c8:1946"), "public", "a public IPv6 address");
    TAP_EQ_STR(special("127.0.0.1"), "loopback", "127.0.0.1");
    TAP_EQ_STR(special("127.255.0.9"), "loopback", "all of 127/8");
    TAP_EQ_STR(special("10.9.8.7"), "private", "10/8");
    TAP_EQ_STR(special("172.31.255.255"), "private", "172.16/12");
    TAP_EQ_STR(special("172.32.0.1"), "public", "just outside 172.16/12");
    TAP_EQ_STR(special("192.168.1.1"), "private", "192.168/16");
    TAP_EQ_STR(special("169.254.169.254"), "cloud metadata", "AWS/GCP/Azure metadata");
    TAP_EQ_STR(special("169.254.3.4"), "link-local", "169.254/16");
    TAP_EQ_STR(special("100.100.100.200"), "cloud metadata", "Alibaba metadata");
    TAP_EQ_STR(special("100.64.1.1"), "shared (carrier-grade NAT)", "100.64/10");
    TAP_EQ_STR(special("0.0.0.0"), "unspecified (this host)", "0.0.0.0");
    TAP_EQ_STR(special("224.0.0.1"), "multicast", "multicast");
    TAP_EQ_STR(special("255.255.255.255"), "broadcast", "broadcast");
    TAP_EQ_STR(special("::1"), "loopback", "::1");
    TAP_EQ_STR(special("::"), "unspecified (this host)", "::");
    TAP_EQ_STR(special("fe80::1"), "link-local", "fe80::/10");
    TAP_EQ_STR(special("fd00:ec2::254"), "cloud metadata", "AWS IPv6 metadata");
    TAP_EQ_STR(special("fd12::1"), "unique local (private)", "fc00::/7");
    TAP_EQ_STR(special("::ffff:127.0.0.1"), "loopback", "IPv4-mapped loopback");
    TAP_EQ_STR(special("::ffff:169.254.169.254"), "cloud metadata", "IPv4-mapped metadata");
    TAP_EQ_STR(special("64:ff9b::a00:1"), "private", "NAT64 of 10.0.0.1");
    TAP_EQ_STR(special("2002:a9fe:a9fe::1"), "cloud metadata", "6to4 of 169.254.169.254");
    TAP_EQ_STR(special("ff02::1"), "multicast", "IPv6 multicast");
    TAP_EQ_STR(special("4000::1"), "reserved", "outside 2000::/3");
    /* loopback pairs: listened on inside, forwarded to the host's */
    cb_netrules_init(&R);
    TAP_EQ_INT(cb_netrules_parse(&R,
                                 "127.0.0.1:8000,localhost:11434,[::1],127.0.0.1:8000,"
                                 "a.org,*.localhost:1,[::ffff:127.0.0.1]:9",
                                 why, sizeof why),
               0, "loopback rules parse");
    cb_lofwd_t fw[CB_PROXY_FORWARDS_MAX];
    size_t nf = cb_netrules_loopback(&R, fw, CB_PROXY_FORWARDS_MAX);
    TAP_EQ_INT(nf, 5, "127.0.0.1:8000 once, localhost both ways, [::1] on 80 and 443");
    char a0[64];
    cb_ipaddr_str(&fw[0].ip, a0, sizeof a0);
    TAP_OK(strcmp(a0, "127.0.0.1") == 0 && fw[0].port == 8000, "first 127.0.0.1:8000");
    cb_ipaddr_str(&fw[2].ip, a0, sizeof a0);
    TAP_OK(strcmp(a0, "::1") == 0 && fw[2].port == 11434, "localhost also on ::1");
    cb_ipaddr_t lo6 = {.family = AF_INET6, .a = {[15] = 1}};
    TAP_EQ_INT(cb_netrules_match_loopback(&R, &lo6, 443), 2, "[::1]:443 by the port-less rule");
    TAP_EQ_INT(cb_netrules_match_loopback(&R, &lo6, 11434), 1, "[::1]:11434 by localhost");
    TAP_EQ_INT(cb_netrules_match_loopback(&R, &lo6, 9), -1, "no mapped forms, no wildcards");
    cb_netrules_init(&R);
    TAP_OK(cb_netrules_parse(&R, "localhost:3128", why, sizeof why) < 0 &&
               strstr(why, "--network-resolve NAME=127.0.0.1 with allow:NAME:3128") != NULL,
           "the proxy's own port is refused, naming the pinned form");
    cb_netrules_init(&R);
    TAP_OK(cb_netrules_parse(&R, "pypi.test:3128,10.0.0.1:3128", why, sizeof why) == 0,
           "3128 elsewhere is fine");
    char many[512];
    size_t mu = 0;
    for (int i = 1; i <= CB_PROXY_FORWARDS_MAX + 1; i++)
        mu +=
            (size_t) snprintf(many + mu, sizeof many - mu, "%s127.0.0.%d:80", i > 1 ? "," : "", i);
    cb_netrules_init(&R);
    TAP_OK(cb_netrules_parse(&R, many, why, sizeof why) < 0 && strstr(why, "more than 16") != NULL,
           "more than CB_PROXY_FORWARDS_MAX loopback pairs");

    cb_ipaddr_t z = {.family = AF_INET};
    bool always = false;
    (void) cb_addr_special(&z, &always);
    TAP_OK(always, "0.0.0.0 is refused even when named");
    TAP_DONE();
}
