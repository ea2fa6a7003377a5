/*
 * libFuzzer target for the pack scanner, which reads a pusher's pack
 * before the decision to find where it ends. Besides "no crash, no leak, no
 * UB, bounded work" it checks that random-sized chunks give the same answer
 * and end as the whole input, and that what the scanner calls safe to
 * forward never reaches past the end it found, minus the trailer.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_common.h"
#include "git/packscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small, so the fuzzer reaches the cap on inflated bytes. */
#define FUZZ_MAX_INFLATED (1 << 20)

static int scan(const uint8_t *data, size_t size, int chunked, uint64_t *end, uint64_t *safe)
{
    rgit_packscan *s;
    rg_error err = RG_ERROR_INIT;
    uint64_t seed = fuzz_seed(data, size);
    size_t off = 0, n;
    int rc = 0;

    FUZZ_CHECK(rgit_packscan_new(&s, size % 2 ? 64 : 40, FUZZ_MAX_INFLATED) == 0);
    while (off < size && rc == 0) {
        n = chunked ? fuzz_chunk(&seed) : size - off;
        if (n > size - off)
            n = size - off;
        rc = rgit_packscan_feed(s, (const char *)data + off, n, &err);
        FUZZ_CHECK(rgit_packscan_safe(s) <= off + n);
        off += n;
    }
    *end = rgit_packscan_end(s);
    *safe = rgit_packscan_safe(s);
    rgit_packscan_free(s);
    return rc < 0 ? -1 : rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t end1, end2, safe1, safe2;
    int rc1 = scan(data, size, 0, &end1, &safe1);
    int rc2 = scan(data, size, 1, &end2, &safe2);

    FUZZ_CHECK(rc1 == rc2);
    if (rc1 == 1) {
        FUZZ_CHECK(end1 == end2 && safe1 == safe2);
        FUZZ_CHECK(end1 <= size && safe1 < end1);
    }
    return 0;
}
