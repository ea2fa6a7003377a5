/*
 * libFuzzer target for request-body decoding (util/inflate.h), which sees
 * a client's compressed bytes before anything else does. Input: two bytes
 * choosing the output cap (small, so the fuzzer reaches it) and the ratio,
 * then the compressed body, fed in chunks sized by the input itself.
 * Besides "no crash, no leak, no UB" it checks the caps: the sink never
 * gets more than max_out bytes, and past RG_INFLATE_FREE_BYTES never more
 * than ratio times the compressed bytes fed; a refusal is one of the
 * documented codes; feeding the same body whole gives the same answer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "util/inflate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink_state {
    uint64_t out; /* decoded bytes handed to the sink */
    uint64_t in;  /* compressed bytes fed so far */
    uint64_t max_out;
    unsigned ratio;
    int fail_at; /* the sink refuses once past this many bytes; -1 never */
} sink_state;

static int sink(void *arg, const char *data, size_t len)
{
    sink_state *s = arg;

    (void)data;
    s->out += len;
    FUZZ_CHECK(s->out <= s->max_out);
    if (s->ratio != 0 && s->out > RG_INFLATE_FREE_BYTES)
        FUZZ_CHECK(s->out / s->ratio <= s->in); /* as inflate.c counts */
    if (s->fail_at >= 0 && s->out > (uint64_t)s->fail_at)
        return -ECANCELED;
    return 0;
}

/* Decode in[0..len), in chunks when `seed` is non-zero; returns the result. */
static int decode(const uint8_t *in, size_t len, uint64_t max_out, unsigned ratio, int fail_at,
                  uint64_t seed, uint64_t *decoded)
{
    sink_state s = {0, 0, max_out, ratio, fail_at};
    rg_inflate *z = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t pos = 0, n;
    int rc = 0;

    FUZZ_CHECK(rg_inflate_new(&z, max_out, ratio, sink, &s) == 0);
    /* Bounded: every turn moves pos forward by at least one byte. */
    while (pos < len && rc == 0) {
        n = seed ? fuzz_chunk(&seed) : len;
        if (n > len - pos)
            n = len - pos;
        s.in += n;
        rc = rg_inflate_feed(z, (const char *)in + pos, n, &err);
        pos += n;
    }
    if (rc == 0)
        rc = rg_inflate_finish(z, &err);
    FUZZ_CHECK(rc == 0 || rc == RG_E_PROTOCOL || rc == RG_E_TOO_BIG || rc == -ECANCELED);
    FUZZ_CHECK(rc == 0 || err.msg[0] != '\0' || rc == -ECANCELED);
    rg_inflate_free(z);
    *decoded = s.out;
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t caps[] = {0, 1, 7, 100, 4096, 65536, 1 << 20, 3 << 20};
    uint64_t max_out, whole_out, chunked_out;
    unsigned ratio;
    int fail_at, rc_whole, rc_chunked;

    if (size < 2)
        return 0;
    max_out = caps[data[0] % (sizeof(caps) / sizeof(caps[0]))];
    ratio = data[1] % 4 == 0 ? 0 : 1u << (data[1] % 8);
    fail_at = data[0] & 0x80 ? (int)(data[1] * 16) : -1;
    rc_whole = decode(data + 2, size - 2, max_out, ratio, fail_at, 0, &whole_out);
    rc_chunked =
        decode(data + 2, size - 2, max_out, ratio, fail_at, fuzz_seed(data, size), &chunked_out);
    /* The ratio is checked as bytes arrive, so only the unratioed answer
     * is independent of the chunking; and which refusal comes first may
     * depend on it (corrupt data decoded in the same call that passed the
     * cap), so only accepting is. */
    if (ratio == 0 && fail_at < 0) {
        FUZZ_CHECK((rc_whole == 0) == (rc_chunked == 0));
        if (rc_whole == 0)
            FUZZ_CHECK(whole_out == chunked_out);
    }
    return 0;
}
