/* Streaming gzip decoding of request bodies (gateway/inflate.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gateway/inflate.h"
#include "util/buf.h"

static int sink(void *arg, const char *data, size_t len)
{
    return rg_buf_append(arg, data, len);
}

/* gzip-compress `in` the way git does (deflate with a gzip wrapper). */
static size_t gzip(unsigned char *out, size_t outsz, const void *in, size_t len)
{
    z_stream zs = {0};

    cr_assert_eq(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)outsz;
    cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    deflateEnd(&zs);
    return zs.total_out;
}

Test(inflate, decodes_a_body_fed_in_small_pieces)
{
    static unsigned char plain[300000], packed[400000];
    rg_buf out = RG_BUF_INIT(1 << 20);
    gateway_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n;

    for (size_t i = 0; i < sizeof(plain); i++)
        plain[i] = (unsigned char)(i * 7 + i / 1000);
    n = gzip(packed, sizeof(packed), plain, sizeof(plain));
    cr_assert_eq(gateway_inflate_new(&z, 1 << 20, sink, &out), 0);
    for (size_t off = 0; off < n; off += 777)
        cr_assert_eq(
            gateway_inflate_feed(z, (char *)packed + off, n - off < 777 ? n - off : 777, &err), 0,
            "%s", err.msg);
    cr_assert_eq(gateway_inflate_finish(z, &err), 0);
    cr_assert_eq(out.len, sizeof(plain));
    cr_assert_eq(memcmp(out.data, plain, sizeof(plain)), 0);
    gateway_inflate_free(z);
    rg_buf_free(&out);
}

Test(inflate, refuses_a_body_that_expands_past_the_cap)
{
    static unsigned char zeros[1 << 20], packed[1 << 16];
    rg_buf out = RG_BUF_INIT(1 << 21);
    gateway_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n = gzip(packed, sizeof(packed), zeros, sizeof(zeros));

    cr_assert_lt(n, 8192, "a megabyte of zeros compresses small");
    cr_assert_eq(gateway_inflate_new(&z, 4096, sink, &out), 0);
    cr_assert_eq(gateway_inflate_feed(z, (char *)packed, n, &err), RG_E_TOO_BIG);
    cr_assert_leq(out.len, 4096 + 65536);
    gateway_inflate_free(z);
    rg_buf_free(&out);
}

Test(inflate, rejects_garbage_and_truncated_streams)
{
    static unsigned char packed[1024];
    rg_buf out = RG_BUF_INIT(1 << 16);
    gateway_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n = gzip(packed, sizeof(packed), "hello, world", 12);

    cr_assert_eq(gateway_inflate_new(&z, 1 << 16, sink, &out), 0);
    cr_assert_eq(gateway_inflate_feed(z, "this is not gzip at all", 23, &err), RG_E_PROTOCOL);
    gateway_inflate_free(z);

    cr_assert_eq(gateway_inflate_new(&z, 1 << 16, sink, &out), 0);
    cr_assert_eq(gateway_inflate_feed(z, (char *)packed, n - 5, &err), 0);
    cr_assert_eq(gateway_inflate_finish(z, &err), RG_E_PROTOCOL);
    gateway_inflate_free(z);

    cr_assert_eq(gateway_inflate_new(&z, 1 << 16, sink, &out), 0);
    memcpy(packed + n, "junk", 4);
    cr_assert_eq(gateway_inflate_feed(z, (char *)packed, n + 4, &err), RG_E_PROTOCOL);
    gateway_inflate_free(z);
    rg_buf_free(&out);
}
