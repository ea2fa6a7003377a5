/*
 * The pkt-line codec every other wire module builds on: parsing one packet
 * out of a byte range without allocating, an incremental reader for bytes
 * that arrive in chunks, and writers that append packets to capped buffers.
 *
 * An empty data packet (0004) is framed as DATA with len 0, not rejected:
 * gitprotocol-common says senders SHOULD NOT emit one but receivers MUST
 * tell it from a flush, and git sends one for `git push -o ""`. Whether
 * empty data is valid is the caller's call: the push parser allows it only
 * as a push option, the side-band demultiplexer never (no band designator).
 */
#include "git/pktline.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rgit_pktline_quote(char *out, size_t out_size, const void *data, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = data;
    size_t i, o = 0;

    if (out_size == 0)
        return out;
    for (i = 0; i < len; i++) {
        unsigned char c = p[i];
        size_t need = (c >= 0x20 && c < 0x7f && c != '\\') ? 1 : (c == '\\' ? 2 : 4);

        /* While more input follows, keep room for "..." so a cut shows. */
        size_t reserve = i + 1 < len ? 4 : 1;

        if (o + need + reserve > out_size) {
            if (o + 4 <= out_size) {
                memcpy(out + o, "...", 3);
                o += 3;
            }
            break;
        }
        if (need == 1) {
            out[o++] = (char)c;
        } else if (need == 2) {
            out[o++] = '\\';
            out[o++] = '\\';
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 0xf];
        }
    }
    out[o] = '\0';
    return out;
}

int rgit_pktline_parse(rgit_pktline *out, const char *buf, size_t len, rg_error *err)
{
    char q[32];
    size_t n = 0;
    int i;

    out->type = RGIT_PKTLINE_DATA;
    out->data = NULL;
    out->len = 0;
    if (len < 4)
        return 0;
    for (i = 0; i < 4; i++) {
        int v = rg_hex_digit(buf[i]);

        if (v < 0)
            return rg_error_set(err, RG_E_PROTOCOL, "bad pkt-line length \"%s\"",
                                rgit_pktline_quote(q, sizeof(q), buf, 4));
        n = n * 16 + (size_t)v;
    }
    switch (n) {
    case 0:
        out->type = RGIT_PKTLINE_FLUSH;
        return 4;
    case 1:
        out->type = RGIT_PKTLINE_DELIM;
        return 4;
    case 2:
        out->type = RGIT_PKTLINE_RESPONSE_END;
        return 4;
    case 3:
        return rg_error_set(err, RG_E_PROTOCOL, "reserved pkt-line length 0003");
    default:
        break;
    }
    if (n > RGIT_PKTLINE_MAX)
        return rg_error_set(err, RG_E_PROTOCOL, "pkt-line length %zu is over the maximum %d", n,
                            RGIT_PKTLINE_MAX);
    if (len < n)
        return 0;
    out->data = buf + 4;
    out->len = n - 4;
    return (int)n;
}

/* ---------------------------------------------------------------------------
 * Incremental reader
 */

void rgit_pktline_reader_init(rgit_pktline_reader *r)
{
    r->len = 0;
}

int rgit_pktline_reader_pending(const rgit_pktline_reader *r)
{
    return r->len > 0;
}

/*
 * The total length a validated header announces. Only called on a header
 * that rgit_pktline_parse has accepted, so the digits are known to be hex.
 */
static size_t header_length(const char *hdr)
{
    size_t n = 0;
    int i;

    for (i = 0; i < 4; i++)
        n = n * 16 + (size_t)rg_hex_digit(hdr[i]);
    return n;
}

int rgit_pktline_reader_next(rgit_pktline *out, rgit_pktline_reader *r, const char *data,
                             size_t len, size_t *consumed, rg_error *err)
{
    size_t take, want;
    int rc;

    *consumed = 0;
    if (len == 0)
        return 0;
    if (r->len == 0) {
        /* The common case: the whole packet is in this chunk, so no copy. */
        rc = rgit_pktline_parse(out, data, len, err);
        if (rc != 0) {
            if (rc > 0)
                *consumed = (size_t)rc;
            return rc < 0 ? rc : 1;
        }
        /*
         * Incomplete. When the header is here, parse has validated it; keep
         * the bytes (fewer than one packet, so they fit in buf).
         */
        memcpy(r->buf, data, len);
        r->len = len;
        *consumed = len;
        return 0;
    }

    /* Finish the header first, taking no more than the 4 bytes it needs. */
    if (r->len < 4) {
        take = 4 - r->len < len ? 4 - r->len : len;
        memcpy(r->buf + r->len, data, take);
        r->len += take;
        *consumed = take;
        if (r->len < 4)
            return 0;
        rc = rgit_pktline_parse(out, r->buf, r->len, err);
        if (rc < 0) {
            r->len = 0;
            return rc;
        }
        if (rc > 0) {
            /* Only a header (flush, delim, response-end or 0004): done. */
            r->len = 0;
            return 1;
        }
    }

    /* Then the payload, taking only what this packet still lacks. */
    want = header_length(r->buf) - r->len;
    take = want < len - *consumed ? want : len - *consumed;
    memcpy(r->buf + r->len, data + *consumed, take);
    r->len += take;
    *consumed += take;
    if (take < want)
        return 0;
    rc = rgit_pktline_parse(out, r->buf, r->len, err);
    /*
     * The packet now lives in buf until the next call; marking the reader
     * empty lets that call start afresh. The header was validated above, so
     * parse cannot fail or come up short here.
     */
    r->len = 0;
    return rc < 0 ? rc : 1;
}

/* ---------------------------------------------------------------------------
 * Writers
 */

int rgit_pktline_write(rg_buf *out, const void *data, size_t len)
{
    char hdr[8];
    size_t start = out->len;
    int rc;

    if (len > RGIT_PKTLINE_DATA_MAX)
        return -EINVAL;
    snprintf(hdr, sizeof(hdr), "%04zx", len + 4);
    rc = rg_buf_append(out, hdr, 4);
    if (rc < 0)
        goto done;
    if (len > 0)
        rc = rg_buf_append(out, data, len);
done:
    /* Never leave half a packet behind (a cap overflow has freed it all). */
    if (rc < 0)
        rg_buf_truncate(out, start);
    return rc;
}

int rgit_pktline_printf(rg_buf *out, const char *fmt, ...)
{
    va_list ap;
    char *line = NULL;
    int n, rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n > RGIT_PKTLINE_DATA_MAX) {
        rc = -EINVAL;
        goto done;
    }
    line = malloc((size_t)n + 1);
    if (line == NULL) {
        rc = -ENOMEM;
        goto done;
    }
    va_start(ap, fmt);
    vsnprintf(line, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rc = rgit_pktline_write(out, line, (size_t)n);
done:
    free(line);
    return rc;
}

int rgit_pktline_flush(rg_buf *out)
{
    return rg_buf_append(out, "0000", 4);
}
