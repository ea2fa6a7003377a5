/*
 * A growable byte buffer with a hard cap, after curl's dynbuf: every buffer
 * fed by the network is created with the most it may ever hold, and an
 * append that would pass the cap frees the buffer and fails with
 * RG_E_TOO_BIG, so an oversized input can never be half-kept by mistake.
 * The data is always NUL-terminated (the NUL is not counted in len).
 */
#ifndef RG_UTIL_BUF_H
#define RG_UTIL_BUF_H

#include <stddef.h>

typedef struct rg_buf {
    char *data; /* NULL until the first append */
    size_t len;
    size_t cap; /* allocated bytes, including the NUL */
    size_t max; /* the most len may ever be */
} rg_buf;

#define RG_BUF_INIT(maxlen)                                                                        \
    {                                                                                              \
        NULL, 0, 0, (maxlen)                                                                       \
    }

void rg_buf_init(rg_buf *b, size_t max);

/* Append `len` bytes; RG_E_TOO_BIG (buffer freed) or -ENOMEM on failure. */
int rg_buf_append(rg_buf *b, const void *data, size_t len);
int rg_buf_puts(rg_buf *b, const char *s);
int rg_buf_printf(rg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget the contents, keep the allocation and the cap. */
void rg_buf_reset(rg_buf *b);

/*
 * Cut the contents back to their first len bytes (a mark taken earlier, to
 * undo a partial append); nothing happens when the buffer holds no more.
 */
void rg_buf_truncate(rg_buf *b, size_t len);

/* Drop the first n bytes, moving the rest to the front. */
void rg_buf_consume(rg_buf *b, size_t n);

/* Hand the data to the caller (free() it); the buffer is left empty. */
char *rg_buf_detach(rg_buf *b);

void rg_buf_free(rg_buf *b);

/* Free after overwriting the contents, for buffers that held a secret. */
void rg_buf_wipe_free(rg_buf *b);

#endif
