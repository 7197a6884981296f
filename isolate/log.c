/*
 * log.c - the one place log lines are formatted.
 *
 * Each line is built in a bounded stack buffer and written with a single
 * write(2), so lines from several threads (the heartbeat thread) do not
 * interleave.  Over-long lines are truncated and marked.  Much of what is
 * logged comes from the sandbox (names, frame types, host names asked of the
 * proxy), so the message goes through names.c's escaping before it is
 * written: no control, C1 or bidi character and no invalid UTF-8 reaches the
 * terminal or the log file raw, whatever a call site forgot.
 */
#include "isolate/log.h"
#include "isolate/cb_limits.h"
#include "isolate/names.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

cb_log_level_t cb_log_threshold = CB_LOG_INFO;
static const char *s_ident = "cellblock";
static int s_fd = 2;

static const char *const s_names[] = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};

int cb_log_parse_level(const char *name, cb_log_level_t *out) {
    static const struct {
        const char *name;
        cb_log_level_t level;
    } table[] = {
        {"debug", CB_LOG_DEBUG},  {"info", CB_LOG_INFO},   {"warning", CB_LOG_WARNING},
        {"warn", CB_LOG_WARNING}, {"error", CB_LOG_ERROR}, {"critical", CB_LOG_CRITICAL},
        {"0", CB_LOG_DEBUG},      {"1", CB_LOG_INFO},      {"2", CB_LOG_WARNING},
        {"3", CB_LOG_ERROR},      {"4", CB_LOG_CRITICAL},
    };
    if (name == NULL) return -1;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcasecmp(name, table[i].name) == 0) {
            *out = table[i].level;
            return 0;
        }
    }
    return -1;
}

void cb_log_set_ident(const char *ident) { s_ident = ident; }
void cb_log_set_fd(int fd) { s_fd = fd; }
int cb_log_get_fd(void) { return s_fd; }

void cb_log_write(cb_log_level_t level, const char *fn, int line, bool with_errno, int err,
                  const char *fmt, ...) {
    char buf[CB_LOG_LINE_MAX];
    size_t len = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    unsigned lv = (unsigned) level < 5 ? (unsigned) level : 4;
    int n = snprintf(buf, sizeof buf, "[%s %02d:%02d:%02d.%03ld %s %s:%d] ", s_ident, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, s_names[lv], fn, line);
    if (n < 0) return;
    /* room kept for the cut mark, the newline and snprintf's NUL */
    enum { S_TAIL = sizeof "..." + 1 };
    len = (size_t) n < sizeof buf - S_TAIL ? (size_t) n : sizeof buf - S_TAIL;
    char msg[CB_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bool cut = false;
    if (n > 0) {
        size_t mlen = (size_t) n < sizeof msg ? (size_t) n : sizeof msg - 1;
        size_t room = sizeof buf - S_TAIL - len;
        size_t need = cb_names_escape(msg, mlen, buf + len, room, true);
        cut = (size_t) n >= sizeof msg || need >= room;
        len += cut ? (room ? strlen(buf + len) : 0) : need;
    }
    if (with_errno && !cut) {
        char ebuf[128];
        const char *es = strerror_r(err, ebuf, sizeof ebuf);
        size_t room = sizeof buf - S_TAIL - len;
        n = snprintf(buf + len, room, ": %s", es);
        if (n > 0) {
            cut = (size_t) n >= room;
            len += cut ? (room ? strlen(buf + len) : 0) : (size_t) n;
        }
    }
    if (cut) {
        memcpy(buf + len, "...", 3);
        len += 3;
    }
    buf[len++] = '\n';
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(s_fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;
        }
        p += w;
        len -= (size_t) w;
    }
}
