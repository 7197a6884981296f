/*
 * net.c - bring up loopback in the fresh network namespace.
 *
 * A new net namespace has only "lo", down.  With it up, code in the sandbox
 * can use sockets among its own processes (multiprocessing managers, local
 * servers in tests) while nothing leaves and nothing of the host, the
 * kernel's ZMQ ports included, is reachable.  An ioctl is all it takes; no
 * netlink.
 */
#include "isolate/net.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int cb_net_lo_up(void) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", sizeof "lo");
    int rc = -1;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) goto out;
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) goto out;
    rc = 0;
out:;
    int e = errno;
    close(s);
    errno = e;
    return rc;
}
