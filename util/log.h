/*
 * The one logger. Library code that has something to say beyond its return
 * value (a push refused because the audit log is full, an upstream that
 * failed part-way) calls rg_log; where the line goes is the program's
 * choice, made once with rg_log_set_sink (the gateway's `serve` writes to
 * stderr, with syslog priority prefixes when journald reads it). With no
 * sink set nothing is written, so libraries stay silent in tests and tools.
 *
 * A line is `event key=value ...`: one event name, then fields. Values
 * that may hold spaces are quoted by rg_log_quote. Never a secret: tokens
 * appear only as their hash prefix.
 */
#ifndef RG_UTIL_LOG_H
#define RG_UTIL_LOG_H

#include <stddef.h>

/* syslog(3) priorities, so journald can read them from a "<N>" prefix. */
typedef enum rg_log_level {
    RG_LOG_ERR = 3,
    RG_LOG_WARNING = 4,
    RG_LOG_NOTICE = 5,
    RG_LOG_INFO = 6,
    RG_LOG_DEBUG = 7,
} rg_log_level;

/* Where lines go: called with the whole line (no newline), thread-safely. */
typedef void (*rg_log_sink)(void *arg, rg_log_level level, const char *line);

/* Set (or with NULL, clear) the sink. Not thread-safe: call at start-up. */
void rg_log_set_sink(rg_log_sink sink, void *arg);

/* Format `event` and printf-style fields into one line and hand it over. */
void rg_log(rg_log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Room for one quoted field value (an error message, a ref name). */
#define RG_LOG_VALUE_MAX 600

/*
 * Quote `s` for a field value into out (always NUL-terminated): as it is
 * when it holds only printable non-space ASCII other than `"` and `\`,
 * else in double quotes with `"` and `\` escaped and control bytes as
 * \xHH. Cut (ending in "...") to fit. Returns out, for use in arguments.
 */
char *rg_log_quote(char *out, size_t outsz, const char *s);

/* A ready-made sink: stderr, with "<N>" prefixes when `journald` is set. */
void rg_log_stderr_sink(void *arg, rg_log_level level, const char *line);

#endif
