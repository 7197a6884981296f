/*
 * gvisor_dbg.c - the gvisor supervisor's end of the debugger's channel
 * (gvisor.c says why it is a copy): a listening socket in a directory
 * bound into the container, root's alone (cellblock-init, root in gVisor,
 * connects; the runner's uid cannot), one connection accepted at a time,
 * bytes moved between it and the kernel's debug socket without being read.
 *
 * A pause must not find a host socket open in gVisor (runsc checkpoint
 * cannot save one): before it, this end stops listening (a dial that is
 * due, as in a just restored sandbox, finds no one) and init is told to
 * hang up ("debug off", see init_gvisor.c), the connection's end here does
 * not end the channel, and init dials again once a listener is back: the
 * restored sandbox's supervisor listens from its start, and this one again
 * if the checkpoint failed.  In the runner's slot: no malloc.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "isolate/sandbox_limits.h"
#include "isolate/util.h"
#include "tiers/gvisor_priv.h"
#include "tiers/splice.h"

static cb_splice_t s_splice; /* conn <-> kfd */

static const char s_path[] = CB_GVISOR_DBG_HOST "/" CB_GVISOR_DBG_NAME;

int cb_gvisor_dbg_listen(cb_gvisor_dbg_t *d) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    _Static_assert(sizeof s_path <= sizeof a.sun_path, "debugger socket path too long");
    memcpy(a.sun_path, s_path, sizeof s_path);
    if (mkdir(CB_GVISOR_DBG_HOST, 0700) < 0 && errno != EEXIST) return -1;
    (void) unlink(s_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) < 0 || chmod(s_path, 0600) < 0 ||
        listen(fd, 1) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    d->lfd = fd;
    return 0;
}

void cb_gvisor_dbg_unlisten(cb_gvisor_dbg_t *d) {
    if (d->lfd < 0) return;
    close(d->lfd);
    d->lfd = -1;
    (void) unlink(s_path);
}

int cb_gvisor_dbg_open(cb_gvisor_dbg_t *d, bool on) {
    d->lfd = d->conn = d->kfd = -1;
    d->detaching = false;
    if (!on) return 0;
    if (cb_set_nonblock(CB_FD_DEBUG, 1) < 0 || cb_gvisor_dbg_listen(d) < 0) return -1;
    d->kfd = CB_FD_DEBUG;
    return 0;
}

void cb_gvisor_dbg_events(const cb_gvisor_dbg_t *d, struct pollfd pf[CB_GVISOR_DBG_NPOLL]) {
    pf[0] = (struct pollfd){.fd = d->conn < 0 ? d->lfd : -1, .events = POLLIN};
    cb_splice_events(&s_splice, d->conn, d->kfd, pf + 1);
}

void cb_gvisor_dbg_step(cb_gvisor_dbg_t *d, const struct pollfd pf[CB_GVISOR_DBG_NPOLL]) {
    if (d->lfd >= 0 && d->conn < 0 && (pf[0].revents & POLLIN)) {
        d->conn = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (d->conn >= 0) cb_gvisor_dbg_unlisten(d); /* one connection at a time */
    }
    if (d->conn < 0 || cb_splice_step(&s_splice, d->conn, d->kfd, pf + 1)) return;
    close(d->conn); /* init hung up, or the kernel's end is gone */
    d->conn = -1;
    cb_splice_clear(&s_splice);
    if (!d->detaching) d->kfd = -1; /* the channel is over */
}
