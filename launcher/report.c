/*
 * report.c - report datagrams to the kernel and the log relay.
 *
 * log.c formats "[ident HH:MM:SS.mmm LEVEL func:line] text\n".  We point it
 * at one end of a non-blocking SOCK_SEQPACKET pair (one line = one datagram,
 * dropped rather than blocking if the relay falls behind) and rewrite each
 * line into "log LEVEL func:line text" on the report socket.
 */
#include "launcher/report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "isolate/log.h"
#include "isolate/sandbox_limits.h"
#include "isolate/util.h"

static int s_report_fd = -1;
static int s_pump_fd = -1;

int cb_report_init(int report_fd, int *pump_fd) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) return -1;
    s_report_fd = report_fd;
    s_pump_fd = sv[0];
    cb_log_set_fd(sv[1]);
    *pump_fd = sv[0];
    return 0;
}

static int s_send(const char *buf, size_t len, int fd) {
    if (s_report_fd < 0) {
        errno = EBADF;
        return -1;
    }
    return cb_send_with_fd(s_report_fd, buf, len, fd);
}

int cb_report(const char *fmt, ...) {
    char buf[CB_REPORT_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    size_t len = (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1;
    return s_send(buf, len, -1);
}

int cb_report_fd(const char *msg, int fd) { return s_send(msg, strlen(msg), fd); }

int cb_report_log_line(const char *line, size_t len, char *out, size_t out_len) {
    /* "[ident time LEVEL fn:line] text\n" */
    if (len == 0 || line[0] != '[') return -1;
    const char *close = memchr(line, ']', len);
    if (close == NULL) return -1;
    /* the level is the third space-separated word inside the brackets */
    const char *p = line + 1;
    const char *words[4] = {0};
    size_t wl[4] = {0};
    size_t nw = 0;
    while (p < close && nw < 4) {
        while (p < close && *p == ' ')
            p++;
        const char *s = p;
        while (p < close && *p != ' ')
            p++;
        if (p > s) {
            words[nw] = s;
            wl[nw] = (size_t) (p - s);
            nw++;
        }
    }
    if (nw < 4) return -1;
    const char *text = close + 1;
    if (text < line + len && *text == ' ') text++;
    size_t tl = (size_t) (line + len - text);
    while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == '\r'))
        tl--;
    int n = snprintf(out, out_len, "log %.*s %.*s %.*s", (int) wl[2], words[2], (int) wl[3],
                     words[3], (int) tl, text);
    return n < 0 ? -1 : 0;
}

void cb_report_pump(void) {
    if (s_pump_fd < 0) return;
    for (int i = 0; i < CB_REPORT_PUMP_MAX; i++) {
        char line[CB_LOG_LINE_MAX + 1];
        ssize_t r = recv(s_pump_fd, line, sizeof line - 1, MSG_DONTWAIT);
        if (r <= 0) return;
        char out[CB_REPORT_LINE_MAX];
        if (cb_report_log_line(line, (size_t) r, out, sizeof out) == 0)
            (void) s_send(out, strlen(out), -1);
    }
}
