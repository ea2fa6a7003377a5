/* Streaming gzip decoding of request bodies (util/inflate.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "util/inflate.h"
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
    rg_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n;

    for (size_t i = 0; i < sizeof(plain); i++)
        plain[i] = (unsigned char)(i * 7 + i / 1000);
    n = gzip(packed, sizeof(packed), plain, sizeof(plain));
    cr_assert_eq(rg_inflate_new(&z, 1 << 20, 0, sink, &out), 0);
    for (size_t off = 0; off < n; off += 777)
        cr_assert_eq(rg_inflate_feed(z, (char *)packed + off, n - off < 777 ? n - off : 777, &err),
                     0, "%s", err.msg);
    cr_assert_eq(rg_inflate_finish(z, &err), 0);
    cr_assert_eq(out.len, sizeof(plain));
    cr_assert_eq(memcmp(out.data, plain, sizeof(plain)), 0);
    rg_inflate_free(z);
    rg_buf_free(&out);
}

Test(inflate, refuses_a_body_that_expands_past_the_cap)
{
    static unsigned char zeros[1 << 20], packed[1 << 16];
    rg_buf out = RG_BUF_INIT(1 << 21);
    rg_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n = gzip(packed, sizeof(packed), zeros, sizeof(zeros));

    cr_assert_lt(n, 8192, "a megabyte of zeros compresses small");
    cr_assert_eq(rg_inflate_new(&z, 4096, 0, sink, &out), 0);
    cr_assert_eq(rg_inflate_feed(z, (char *)packed, n, &err), RG_E_TOO_BIG);
    cr_assert_leq(out.len, 4096 + 65536);
    rg_inflate_free(z);
    rg_buf_free(&out);
}

Test(inflate, rejects_garbage_and_truncated_streams)
{
    static unsigned char packed[1024];
    rg_buf out = RG_BUF_INIT(1 << 16);
    rg_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n = gzip(packed, sizeof(packed), "hello, world", 12);

    cr_assert_eq(rg_inflate_new(&z, 1 << 16, 0, sink, &out), 0);
    cr_assert_eq(rg_inflate_feed(z, "this is not gzip at all", 23, &err), RG_E_PROTOCOL);
    rg_inflate_free(z);

    cr_assert_eq(rg_inflate_new(&z, 1 << 16, 0, sink, &out), 0);
    cr_assert_eq(rg_inflate_feed(z, (char *)packed, n - 5, &err), 0);
    cr_assert_eq(rg_inflate_finish(z, &err), RG_E_PROTOCOL);
    rg_inflate_free(z);

    cr_assert_eq(rg_inflate_new(&z, 1 << 16, 0, sink, &out), 0);
    memcpy(packed + n, "junk", 4);
    cr_assert_eq(rg_inflate_feed(z, (char *)packed, n + 4, &err), RG_E_PROTOCOL);
    rg_inflate_free(z);
    rg_buf_free(&out);
}

/* Pieces handed to the sink are only counted: a bomb must not reach it. */
static int count_sink(void *arg, const char *data, size_t len)
{
    (void)data;
    *(size_t *)arg += len;
    return 0;
}

Test(inflate, refuses_a_bomb_past_the_ratio_before_the_sink_sees_it)
{
    static unsigned char zeros[16 << 20], packed[1 << 17];
    rg_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n = gzip(packed, sizeof(packed), zeros, sizeof(zeros)), seen = 0;

    cr_assert_lt(n, 65536, "16 MiB of zeros compresses to %zu bytes", n);
    /* Well under max_out: only the ratio can stop it. */
    cr_assert_eq(rg_inflate_new(&z, (uint64_t)1 << 30, 100, count_sink, &seen), 0);
    cr_assert_eq(rg_inflate_feed(z, (char *)packed, n, &err), RG_E_TOO_BIG);
    cr_expect(strstr(err.msg, "expands more than 100:1") != NULL, "%s", err.msg);
    cr_expect_leq(seen, RG_INFLATE_FREE_BYTES + 65536);
    rg_inflate_free(z);
}

Test(inflate, a_body_within_the_ratio_decodes_whole)
{
    static unsigned char plain[3 << 20], packed[(3 << 20) + 65536];
    rg_inflate *z;
    rg_error err = RG_ERROR_INIT;
    size_t n, seen = 0;
    uint32_t x = 12345;

    /* Half noise, half text-like repetition: compresses under 2:1. */
    for (size_t i = 0; i < sizeof(plain); i++) {
        x = x * 1103515245u + 12345u;
        plain[i] = (i & 1) ? (unsigned char)(x >> 24) : (unsigned char)('a' + i % 7);
    }
    n = gzip(packed, sizeof(packed), plain, sizeof(plain));
    cr_assert_gt(n, sizeof(plain) / 4);
    cr_assert_eq(rg_inflate_new(&z, (uint64_t)1 << 30, 4, count_sink, &seen), 0);
    for (size_t off = 0; off < n; off += 4096)
        cr_assert_eq(
            rg_inflate_feed(z, (char *)packed + off, n - off < 4096 ? n - off : 4096, &err), 0,
            "%s", err.msg);
    cr_assert_eq(rg_inflate_finish(z, &err), 0, "%s", err.msg);
    cr_expect_eq(seen, sizeof(plain));
    rg_inflate_free(z);
}
