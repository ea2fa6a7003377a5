/*
 * Shared by the fuzz targets: chunk sizes drawn from a generator seeded by
 * the input itself, so that every byte of the input stays protocol data and
 * a crash still reproduces from the input file alone.
 */
#ifndef RG_FUZZ_COMMON_H
#define RG_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* FNV-1a, then never zero (xorshift would stay at zero). */
static inline uint64_t fuzz_seed(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ULL;
    size_t i;

    for (i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ULL;
    return h ? h : 1;
}

/* Mostly tiny chunks, which split packets everywhere, sometimes large ones. */
static inline size_t fuzz_chunk(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    if ((*s >> 40) % 8 == 0)
        return 1 + (size_t)((*s >> 8) % 4096);
    return 1 + (size_t)(*s % 9);
}

/* A broken invariant: say which, then abort so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
