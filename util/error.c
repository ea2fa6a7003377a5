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
    char prefix[256];
    size_t plen, olen;
    va_list ap;
    int n;

    if (err == NULL)
        return 0;
    va_start(ap, fmt);
    n = vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    plen = n < 0 ? 0 : (size_t)n >= sizeof(prefix) ? sizeof(prefix) - 1 : (size_t)n;
    /* Shift the old message right and put "prefix: " in front of it,
     * truncating the old message's tail when the two do not fit. */
    if (plen + 2 >= sizeof(err->msg))
        plen = sizeof(err->msg) - 3;
    olen = strnlen(err->msg, sizeof(err->msg) - 1);
    if (plen + 2 + olen >= sizeof(err->msg))
        olen = sizeof(err->msg) - 1 - plen - 2;
    memmove(err->msg + plen + 2, err->msg, olen);
    memcpy(err->msg, prefix, plen);
    memcpy(err->msg + plen, ": ", 2);
    err->msg[plen + 2 + olen] = '\0';
    return err->code;
}
