/* test_warm.c - the warm start's request check and init's adoption
 * handshake (isolate/warm_enter.c); the whole path is tested from the host
 * by tests/security/test_warm.py. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/warm_enter.h"
#include "isolate/warm_proto.h"
#include "tap.h"

#define KEY "0123456789abcdef0123456789abcdef"

static size_t s_request(cb_warm_req_t *q) {
    memset(q, 0, sizeof *q);
    q->magic = CB_WARM_MAGIC;
    q->version = CB_WARM_VERSION;
    q->header_size = sizeof *q;
    memcpy(q->key, KEY, sizeof KEY);
    q->n_runner_fds = 4;
    q->n_cgroup_fds = 2;
    q->uid = q->gid = 65534;
    q->last_cap = 40;
    q->n_limits = 16;
    q->init_pid = 1234;
    return sizeof *q;
}

static void s_test_check(void) {
    static char buf[sizeof(cb_warm_req_t) + 8];
    cb_warm_req_t *q = (cb_warm_req_t *) buf;
    char why[CB_WARM_REASON_MAX];
    int nfds = CB_WARM_FD_FIXED + 4 + 2;
    size_t len = s_request(q);
    TAP_EQ_INT(cb_warm_check(buf, len, nfds, KEY, why, sizeof why), 0, "a well-formed request");
    TAP_OK(cb_warm_check(buf, len, nfds, "ffff", why, sizeof why) < 0 && strstr(why, "key"),
           "another template's key refused: %s", why);
    TAP_OK(cb_warm_check(buf, len - 1, nfds, KEY, why, sizeof why) < 0, "short request refused");
    TAP_OK(cb_warm_check(buf, len, nfds - 1, KEY, why, sizeof why) < 0 && strstr(why, "fds"),
           "an fd missing refused: %s", why);
    q->version++;
    TAP_OK(cb_warm_check(buf, len, nfds, KEY, why, sizeof why) < 0 && strstr(why, "build"),
           "another build's request refused: %s", why);
    len = s_request(q);
    TAP_OK(cb_warm_check(buf, len + 8, nfds, KEY, why, sizeof why) < 0, "trailing bytes refused");
    q->init_pid = -1;
    TAP_OK(cb_warm_check(buf, len, nfds, KEY, why, sizeof why) < 0, "negative init pid refused");
    len = s_request(q);
    q->uid = 0;
    TAP_OK(cb_warm_check(buf, len, nfds, KEY, why, sizeof why) < 0, "uid 0 refused");
    len = s_request(q);
    q->n_runner_fds = CB_WARM_RUNNER_FDS + 1;
    TAP_OK(cb_warm_check(buf, len, CB_WARM_FD_FIXED + CB_WARM_RUNNER_FDS + 1 + 2, KEY, why,
                         sizeof why) < 0,
           "too many runner fds refused");
    len = s_request(q);
    q->rlimits.n = CB_RLIMITS_MAX + 1;
    TAP_OK(cb_warm_check(buf, len, nfds, KEY, why, sizeof why) < 0, "bad rlimits refused");
    len = s_request(q);
    memset(q->key, 'a', sizeof q->key); /* no NUL */
    TAP_OK(cb_warm_check(buf, len, nfds, KEY, why, sizeof why) < 0, "unterminated key refused");
}

/* A child sends the handshake byte; init (us) reads its pid from the
 * kernel's credentials and answers. */
static void s_test_adopt(void) {
    int sv[2], one = 1;
    TAP_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair");
    TAP_OK(setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one) == 0, "SO_PASSCRED");
    pid_t c = fork();
    if (c == 0) {
        close(sv[0]);
        char b = 'r';
        if (send(sv[1], &b, 1, 0) != 1 || read(sv[1], &b, 1) != 1 || b != 'r') _exit(1);
        _exit(0);
    }
    close(sv[1]);
    TAP_EQ_INT(cb_warm_adopt(sv[0]), c, "the child's pid, from SCM_CREDENTIALS");
    int st = 0;
    waitpid(c, &st, 0);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child got the answer");
    close(sv[0]);

    /* a sender that is not our child is refused: its message is not taken */
    TAP_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair");
    TAP_OK(setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one) == 0, "SO_PASSCRED");
    char b = 'r';
    TAP_OK(send(sv[1], &b, 1, 0) == 1, "we send it ourselves");
    errno = 0;
    TAP_OK(cb_warm_adopt(sv[0]) < 0 && errno == EPROTO, "not a child of ours: refused");
    close(sv[0]);
    close(sv[1]);

    /* the peer went away: no pid */
    TAP_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair");
    close(sv[1]);
    TAP_OK(cb_warm_adopt(sv[0]) < 0, "EOF: refused");
    close(sv[0]);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    s_test_check();
    s_test_adopt();
    TAP_DONE();
}
