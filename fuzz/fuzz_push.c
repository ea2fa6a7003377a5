/*
 * libFuzzer target for the receive-pack request parser, the first code to
 * see a client's bytes. Besides "no crash, no leak, no UB" it checks that
 * feeding the body in random-sized chunks gives the same answer, the same
 * header end and the same request as feeding it whole, and that a parsed
 * request written back (all commands, then reversed) parses to the same
 * request. Limits are small so the fuzzer reaches them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "git/push.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const rgit_push_limits small_limits = {64, 8, 1 << 16};

static int strv_eq(char **a, size_t na, char **b, size_t nb)
{
    size_t i;

    if (na != nb)
        return 0;
    for (i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return 1;
}

/* Equal requests; with `reversed`, b's commands are a's in reverse. */
static int requests_eq(const rgit_push_request *a, const rgit_push_request *b, int reversed)
{
    size_t i, j;

    if (a->nupdates != b->nupdates || a->oid_hexlen != b->oid_hexlen)
        return 0;
    for (i = 0; i < a->nupdates; i++) {
        j = reversed ? a->nupdates - 1 - i : i;
        if (strcmp(a->updates[i].old_id, b->updates[j].old_id) != 0 ||
            strcmp(a->updates[i].new_id, b->updates[j].new_id) != 0 ||
            strcmp(a->updates[i].refname, b->updates[j].refname) != 0)
            return 0;
    }
    return strv_eq(a->caps, a->ncaps, b->caps, b->ncaps) &&
           strv_eq(a->push_options, a->npush_options, b->push_options, b->npush_options) &&
           strv_eq(a->shallow, a->nshallow, b->shallow, b->nshallow);
}

/* Write `req` keeping every command (reversed or not), parse it back, compare. */
static void check_round_trip(const rgit_push_request *req, int reversed)
{
    /* A rewritten header can be a little longer (shallow lines gain a LF). */
    static const rgit_push_limits roomy = {64, 8, 1 << 20};
    size_t keep[64], i, used;
    rg_buf out = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p = NULL;
    rg_error err = RG_ERROR_INIT;

    for (i = 0; i < req->nupdates; i++)
        keep[i] = reversed ? req->nupdates - 1 - i : i;
    FUZZ_CHECK(rgit_push_request_write(&out, req, keep, req->nupdates, NULL) == 0);
    FUZZ_CHECK(rgit_push_parser_new(&p, &roomy) == 0);
    FUZZ_CHECK(rgit_push_parser_feed(p, out.data, out.len, &used, &err) == 1);
    FUZZ_CHECK(used == out.len);
    FUZZ_CHECK(requests_eq(req, rgit_push_parser_request(p), reversed));
    rgit_push_parser_free(p);
    rg_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    uint64_t seed = fuzz_seed(data, size);
    rgit_push_parser *whole = NULL, *chunked = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t used_whole = 0, used, pos = 0, end_chunked = 0, n;
    int rc_whole, rc = 0;

    FUZZ_CHECK(rgit_push_parser_new(&whole, &small_limits) == 0);
    FUZZ_CHECK(rgit_push_parser_new(&chunked, &small_limits) == 0);

    rc_whole = rgit_push_parser_feed(whole, in, size, &used_whole, &err);
    FUZZ_CHECK(rc_whole <= 1);
    FUZZ_CHECK(rc_whole < 0 || used_whole <= size);
    FUZZ_CHECK(rc_whole != 0 || used_whole == size);

    /* Bounded: every turn moves pos forward by at least one byte. */
    while (pos < size && rc == 0) {
        n = fuzz_chunk(&seed);
        if (n > size - pos)
            n = size - pos;
        rc = rgit_push_parser_feed(chunked, in + pos, n, &used, &err);
        if (rc == 1)
            end_chunked = pos + used;
        else if (rc == 0)
            FUZZ_CHECK(used == n);
        pos += n;
    }
    FUZZ_CHECK(rc == rc_whole);
    if (rc == 1) {
        const rgit_push_request *req = rgit_push_parser_request(whole);

        FUZZ_CHECK(end_chunked == used_whole);
        FUZZ_CHECK(requests_eq(req, rgit_push_parser_request(chunked), 0));
        /* Once complete, the pack is not the parser's business. */
        FUZZ_CHECK(rgit_push_parser_feed(whole, "PACK", 4, &used, &err) == -EINVAL);
        check_round_trip(req, 0);
        check_round_trip(req, 1);
    } else {
        FUZZ_CHECK(rgit_push_parser_request(whole) == NULL);
    }
    rgit_push_parser_free(whole);
    rgit_push_parser_free(chunked);
    return 0;
}
