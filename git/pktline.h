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

#define RGIT_PKTLINE_MAX      65520
#define RGIT_PKTLINE_DATA_MAX (RGIT_PKTLINE_MAX - 4)

typedef enum rgit_pktline_type {
    RGIT_PKTLINE_DATA,
    RGIT_PKTLINE_FLUSH,        /* 0000 */
    RGIT_PKTLINE_DELIM,        /* 0001 */
    RGIT_PKTLINE_RESPONSE_END, /* 0002 */
} rgit_pktline_type;

typedef struct rgit_pktline {
    rgit_pktline_type type;
    const char *data; /* points into the parsed bytes; NULL unless DATA */
    size_t len;       /* payload bytes, without the 4-byte header */
} rgit_pktline;

/*
 * Parse the packet at the start of buf[0..len). Returns the number of bytes
 * it takes (> 0), 0 when buf holds only part of a packet (read more), or
 * RG_E_PROTOCOL for bad hex, the reserved length 0003 or one over 65520.
 * A length 0004 is an empty DATA packet (len 0): senders should not send
 * one, but it is not a flush, and git itself sends it for an empty push
 * option, so each caller decides whether empty data is valid where it is.
 */
int rgit_pktline_parse(rgit_pktline *out, const char *buf, size_t len, rg_error *err);

/* Append one data packet; -EINVAL when len > RGIT_PKTLINE_DATA_MAX. */
int rgit_pktline_write(rg_buf *out, const void *data, size_t len);

/* Append a printf-formatted data packet. */
int rgit_pktline_printf(rg_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append 0000. */
int rgit_pktline_flush(rg_buf *out);

/*
 * Incremental framing for a stream that arrives in chunks of any size. A
 * packet is copied into the reader only when it straddles two chunks, and
 * the reader never takes a byte past the end of the packet it completes, so
 * a caller can stop exactly where the pkt-lines end (in a push, the pack
 * follows). The fields are private; initialise with rgit_pktline_reader_init.
 */
typedef struct rgit_pktline_reader {
    size_t len; /* bytes of an unfinished packet held in buf */
    char buf[RGIT_PKTLINE_MAX];
} rgit_pktline_reader;

void rgit_pktline_reader_init(rgit_pktline_reader *r);

/*
 * Take the next packet from data[0..len). Returns 1 with *out set (its data
 * valid until the next call, and only while `data` is), 0 when every byte
 * was taken without completing a packet, or RG_E_PROTOCOL as
 * rgit_pktline_parse does. *consumed says how many bytes of data were taken.
 */
int rgit_pktline_reader_next(rgit_pktline *out, rgit_pktline_reader *r, const char *data,
                             size_t len, size_t *consumed, rg_error *err);

/* 1 when the reader holds part of a packet, so the stream must not end. */
int rgit_pktline_reader_pending(const rgit_pktline_reader *r);

/*
 * Render data[0..len) for an error message: printable ASCII as is, other
 * bytes as \xNN, cut with "..." to fit out_size. Returns out.
 */
const char *rgit_pktline_quote(char *out, size_t out_size, const void *data, size_t len);

#endif
