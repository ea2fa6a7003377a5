/*
 * Request bodies sent with `Content-Encoding: gzip`, decoded as they
 * stream in, with the decoded size capped and the expansion ratio capped,
 * so a small compressed body (a "gzip bomb") cannot make the gateway spool
 * or forward gigabytes.
 */
#ifndef RG_UTIL_INFLATE_H
#define RG_UTIL_INFLATE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct rg_inflate rg_inflate;

/* Receives each decoded piece; a negative return stops decoding. */
typedef int (*rg_inflate_sink)(void *arg, const char *data, size_t len);

/* Decoded bytes that may come out before the ratio is enforced. */
#define RG_INFLATE_FREE_BYTES (1024 * 1024)

/*
 * A decoder that hands at most `max_out` decoded bytes to `sink`, and once
 * past RG_INFLATE_FREE_BYTES never more than `ratio` times the
 * compressed bytes read so far (0: no ratio cap).
 */
int rg_inflate_new(rg_inflate **out, uint64_t max_out, unsigned ratio, rg_inflate_sink sink,
                   void *arg);

/* Decode the next compressed bytes. RG_E_PROTOCOL for bad data,
 * RG_E_TOO_BIG past max_out or the ratio, or the sink's own error. */
int rg_inflate_feed(rg_inflate *z, const char *data, size_t len, rg_error *err);

/* RG_E_PROTOCOL when the stream did not end where the body did. */
int rg_inflate_finish(rg_inflate *z, rg_error *err);

void rg_inflate_free(rg_inflate *z);

#endif
