/* Error messages for library functions; see error.h. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int rg_error_set(rg_error *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return code;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return code;
}

int rg_error_wrap(rg_error *err, const char *fmt, ...)
{
    char prefix[256], old[sizeof(err->msg)];
    va_list ap;

    if (err == NULL)
        return 0;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
    return err->code;
}
