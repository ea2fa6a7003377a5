/* Capped growable buffers; see buf.h. */
#include "util/buf.h"
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rg_buf_init(rg_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

static int grow(rg_buf *b, size_t extra)
{
    size_t need, ncap;
    char *p;

    if (extra > b->max || b->len > b->max - extra) {
        rg_buf_free(b);
        return RG_E_TOO_BIG;
    }
    need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    ncap = b->cap ? b->cap : 64;
    while (ncap < need)
        ncap = ncap > (size_t)-1 / 2 ? need : ncap * 2;
    if (ncap > b->max + 1)
        ncap = b->max + 1;
    p = realloc(b->data, ncap);
    if (p == NULL)
        return -ENOMEM;
    b->data = p;
    b->cap = ncap;
    return 0;
}

int rg_buf_append(rg_buf *b, const void *data, size_t len)
{
    int rc = grow(b, len);

    if (rc < 0)
        return rc;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int rg_buf_puts(rg_buf *b, const char *s)
{
    return rg_buf_append(b, s, strlen(s));
}

int rg_buf_printf(rg_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n, rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    rc = grow(b, (size_t)n);
    if (rc < 0)
        return rc;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void rg_buf_reset(rg_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void rg_buf_truncate(rg_buf *b, size_t len)
{
    if (b->data == NULL || len >= b->len)
        return;
    b->len = len;
    b->data[len] = '\0';
}

void rg_buf_consume(rg_buf *b, size_t n)
{
    if (n >= b->len) {
        rg_buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *rg_buf_detach(rg_buf *b)
{
    char *p = b->data;

    if (p == NULL)
        p = calloc(1, 1);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

void rg_buf_free(rg_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void rg_buf_wipe_free(rg_buf *b)
{
    if (b == NULL)
        return;
    if (b->data)
        explicit_bzero(b->data, b->cap);
    rg_buf_free(b);
}
