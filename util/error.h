/*
 * Error reporting shared by every library: a function returns 0 or a
 * negative code and, when the caller passed an rg_error, a human message
 * that says what went wrong. Library code never prints or exits; only the
 * programs' entry points and the HTTP edge decide what a user sees.
 */
#ifndef RG_UTIL_ERROR_H
#define RG_UTIL_ERROR_H

#include <errno.h>

/* Project codes live below the errno range so both can share one int. */
enum {
    RG_E_PROTOCOL = -1000, /* malformed wire data */
    RG_E_CONFIG = -1001,   /* bad configuration */
    RG_E_AUTH = -1002,     /* missing, bad, expired or revoked credential */
    RG_E_DENIED = -1003,   /* refused by policy or scope */
    RG_E_UPSTREAM = -1004, /* the upstream failed */
    RG_E_TOO_BIG = -1005,  /* a capped buffer or body would pass its cap */
    RG_E_TAMPER = -1006,   /* an integrity check failed */
    RG_E_CHILD = -1007,    /* a child process exited with a failure */
    RG_E_STATE = -1008,    /* the shared state database cannot be used now */
};

typedef struct rg_error {
    int code;
    char msg[512];
} rg_error;

#define RG_ERROR_INIT                                                                              \
    {                                                                                              \
        0,                                                                                         \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

/*
 * Record `code` and a printf-style message in `err` (which may be NULL) and
 * return `code`, so callers can write `return rg_error_set(err, ...)`.
 */
int rg_error_set(rg_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the message already in `err` with more context; returns err->code. */
int rg_error_wrap(rg_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
