/*
 * log.h - levelled logging to stderr for every cellblock binary.
 *
 * The macros are level-gated before any formatting happens, carry printf
 * format attributes, name the function and line, and preserve errno so
 * they can sit between a failing call and the code that reports it.
 * PLOG_* append strerror(errno).  Never log from a signal handler, never
 * log the HMAC key, signatures, or user code/outputs above DEBUG.
 */
#ifndef CB_LOG_H
#define CB_LOG_H

#include <errno.h>
#include <stdbool.h>

typedef enum {
    CB_LOG_DEBUG = 0,
    CB_LOG_INFO = 1,
    CB_LOG_WARNING = 2,
    CB_LOG_ERROR = 3,
    CB_LOG_CRITICAL = 4,
} cb_log_level_t;

/* Current threshold; messages below it are not formatted. */
extern cb_log_level_t cb_log_threshold;

/* Parses "debug", "info", "warning"/"warn", "error", "critical" (any case)
 * or a digit 0-4.  0 ok, -1 unknown name. */
int cb_log_parse_level(const char *name, cb_log_level_t *out);
/* Sets the prefix printed before every line (e.g. "cellblock-kernel"). */
void cb_log_set_ident(const char *ident);
/* Sets the fd the log goes to (default 2). */
void cb_log_set_fd(int fd);
/* The fd the log goes to (the launcher hands it to the egress proxy). */
int cb_log_get_fd(void);

void cb_log_write(cb_log_level_t level, const char *fn, int line, bool with_errno, int err,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#define CB_LOG_(lvl, perr, ...)                                                                    \
    do {                                                                                           \
        if ((lvl) >= cb_log_threshold) {                                                           \
            int cb_log_saved_errno_ = errno;                                                       \
            cb_log_write((lvl), __func__, __LINE__, (perr), cb_log_saved_errno_, __VA_ARGS__);     \
            errno = cb_log_saved_errno_;                                                           \
        }                                                                                          \
    } while (0)

#define LOG_D(...)  CB_LOG_(CB_LOG_DEBUG, false, __VA_ARGS__)
#define LOG_I(...)  CB_LOG_(CB_LOG_INFO, false, __VA_ARGS__)
#define LOG_W(...)  CB_LOG_(CB_LOG_WARNING, false, __VA_ARGS__)
#define LOG_E(...)  CB_LOG_(CB_LOG_ERROR, false, __VA_ARGS__)
#define LOG_C(...)  CB_LOG_(CB_LOG_CRITICAL, false, __VA_ARGS__)
#define PLOG_D(...) CB_LOG_(CB_LOG_DEBUG, true, __VA_ARGS__)
#define PLOG_I(...) CB_LOG_(CB_LOG_INFO, true, __VA_ARGS__)
#define PLOG_W(...) CB_LOG_(CB_LOG_WARNING, true, __VA_ARGS__)
#define PLOG_E(...) CB_LOG_(CB_LOG_ERROR, true, __VA_ARGS__)

#endif
