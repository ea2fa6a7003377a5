/* Streaming gzip decoding of request bodies; see inflate.h. */
#include "util/inflate.h"

#include <stdlib.h>
#include <zlib.h>

struct rg_inflate {
    z_stream zs;
    int ended;
    uint64_t out_total;
    uint64_t max_out;
    unsigned ratio;
    rg_inflate_sink sink;
    void *arg;
};

int rg_inflate_new(rg_inflate **out, uint64_t max_out, unsigned ratio, rg_inflate_sink sink,
                   void *arg)
{
    rg_inflate *z = calloc(1, sizeof(*z));

    *out = NULL;
    if (z == NULL)
        return -ENOMEM;
    /* 16 + MAX_WBITS: a gzip header and trailer, as git writes them. */
    if (inflateInit2(&z->zs, 16 + MAX_WBITS) != Z_OK) {
        free(z);
        return -ENOMEM;
    }
    z->max_out = max_out;
    z->ratio = ratio;
    z->sink = sink;
    z->arg = arg;
    *out = z;
    return 0;
}

int rg_inflate_feed(rg_inflate *z, const char *data, size_t len, rg_error *err)
{
    char outbuf[65536];
    size_t have;
    int zr, rc;

    if (len > 0 && z->ended)
        return rg_error_set(err, RG_E_PROTOCOL, "data after the end of the gzip stream");
    z->zs.next_in = (Bytef *)data;
    z->zs.avail_in = (uInt)len;
    while (z->zs.avail_in > 0 && !z->ended) {
        z->zs.next_out = (Bytef *)outbuf;
        z->zs.avail_out = sizeof(outbuf);
        zr = inflate(&z->zs, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
            return rg_error_set(err, RG_E_PROTOCOL, "bad gzip body: %s",
                                z->zs.msg ? z->zs.msg : "corrupt data");
        have = sizeof(outbuf) - z->zs.avail_out;
        z->out_total += have;
        if (z->out_total > z->max_out)
            return rg_error_set(err, RG_E_TOO_BIG, "decoded body larger than %llu bytes",
                                (unsigned long long)z->max_out);
        /* Checked before the sink sees the piece, so a bomb costs at most one
         * output block beyond the ratio, never disk. The first MiB is free:
         * a short command list compresses far better than a pack. */
        if (z->ratio && z->out_total > RG_INFLATE_FREE_BYTES &&
            z->out_total / z->ratio > (uint64_t)z->zs.total_in)
            return rg_error_set(err, RG_E_TOO_BIG,
                                "gzip body expands more than %u:1 (limits.inflate_ratio): "
                                "%llu compressed bytes gave %llu",
                                z->ratio, (unsigned long long)z->zs.total_in,
                                (unsigned long long)z->out_total);
        if (have && (rc = z->sink(z->arg, outbuf, have)) < 0)
            return rc;
        if (zr == Z_STREAM_END)
            z->ended = 1;
        if (zr == Z_BUF_ERROR && have == 0)
            break;
    }
    if (z->ended && z->zs.avail_in > 0)
        return rg_error_set(err, RG_E_PROTOCOL, "data after the end of the gzip stream");
    return 0;
}

int rg_inflate_finish(rg_inflate *z, rg_error *err)
{
    if (!z->ended)
        return rg_error_set(err, RG_E_PROTOCOL, "gzip body ended early");
    return 0;
}

void rg_inflate_free(rg_inflate *z)
{
    if (z == NULL)
        return;
    inflateEnd(&z->zs);
    free(z);
}
