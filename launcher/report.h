/*
 * report.h - the launcher's report socket (fd 4, SOCK_SEQPACKET; see
 * docs/RUNNER_PROTOCOL.md section 2) and the relay that turns the
 * launcher's own log lines into `log LEVEL TEXT` reports.
 *
 * The launcher's stderr is the runner's stderr pipe, so its log must never
 * go there: log.c writes each line into an internal SEQPACKET pair and
 * cb_report_pump() forwards them.
 */
#ifndef CB_LAUNCHER_REPORT_H
#define CB_LAUNCHER_REPORT_H

#include <stddef.h>

/* Points log.c at an internal socket pair.  0 ok, -1 errno.  Returns the
 * read end in *pump_fd (poll it, then call cb_report_pump). */
int cb_report_init(int report_fd, int *pump_fd);
/* Sends one formatted report datagram (truncated to CB_REPORT_LINE_MAX).
 * 0 ok, -1 errno (kernel gone: callers carry on and exit). */
int cb_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sends `workdir` with fd attached (SCM_RIGHTS).  0 ok, -1 errno. */
int cb_report_fd(const char *msg, int fd);
/* Relays pending log lines as `log LEVEL TEXT`. */
void cb_report_pump(void);
/* Turns one log.c line into a report line.  0 ok, -1 not a log line. */
int cb_report_log_line(const char *line, size_t len, char *out, size_t out_len);

#endif
