/*
 * The pkt-line framing of git's wire protocol (gitprotocol-common): a
 * 4-hex-digit length that counts itself, then data; 0000 is a flush, 0001 a
 * delimiter, 0002 a response end. A packet is at most 65520 bytes in all.
 * The parser never allocates: it points into the caller's bytes.
 */
#ifndef RG_GIT_PKTLINE_H
#define RG_GIT_PKTLINE_H

#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

#define GIT_PKTLINE_MAX      65520
#define GIT_PKTLINE_DATA_MAX (GIT_PKTLINE_MAX - 4)

typedef enum git_pktline_type {
    GIT_PKTLINE_DATA,
    GIT_PKTLINE_FLUSH,        /* 0000 */
    GIT_PKTLINE_DELIM,        /* 0001 */
    GIT_PKTLINE_RESPONSE_END, /* 0002 */
} git_pktline_type;

typedef struct git_pktline {
    git_pktline_type type;
    const char *data; /* points into the parsed bytes; NULL unless DATA */
    size_t len;       /* payload bytes, without the 4-byte header */
} git_pktline;

/*
 * Parse the packet at the start of buf[0..len). Returns the number of bytes
 * it takes (> 0), 0 when buf holds only part of a packet (read more), or
 * RG_E_PROTOCOL for bad hex, the reserved length 0003, a length 0004 or one
 * over 65520.
 */
int git_pktline_parse(git_pktline *out, const char *buf, size_t len, rg_error *err);

/* Append one data packet; -EINVAL when len > GIT_PKTLINE_DATA_MAX. */
int git_pktline_write(rg_buf *out, const void *data, size_t len);

/* Append a printf-formatted data packet. */
int git_pktline_printf(rg_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append 0000. */
int git_pktline_flush(rg_buf *out);

#endif
