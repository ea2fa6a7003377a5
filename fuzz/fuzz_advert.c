/*
 * libFuzzer target for the ref advertisement (git/advert.h): the filter
 * the gateway passes receive-pack's advertisement through, and the
 * receive-pack advertisement it builds from a remote upstream's
 * upload-pack one. Besides "no crash, no leak, no UB" it checks: a refused
 * input leaves the output buffer as it was; a built advertisement is
 * pkt-lines ending in one flush, with no HEAD and no peeled `^{}` line
 * (but `capabilities^{}`), whose first line carries `agent=` and
 * `object-format=`; filtering what it built (dropping nothing) changes
 * nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "git/advert.h"
#include "git/pktline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX "kept"

/* Whether a ref line "<id> <name>[\0caps][\n]" names HEAD. */
static int names_head(const char *line, size_t len)
{
    const char *sp = memchr(line, ' ', len), *end;

    if (sp == NULL)
        return 0;
    sp++;
    end = sp;
    while (end < line + len && *end != '\0' && *end != '\n')
        end++;
    return end - sp == 4 && memcmp(sp, "HEAD", 4) == 0;
}

/* Walk a built advertisement: pkt-lines, the last one the only flush. */
static void check_built(const char *in, size_t len)
{
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    size_t pos = 0, lines = 0;
    int n;

    /* Bounded: every turn moves pos forward by at least four bytes. */
    while (pos < len) {
        n = rgit_pktline_parse(&pkt, in + pos, len - pos, &err);
        FUZZ_CHECK(n > 0);
        pos += (size_t)n;
        if (pkt.type == RGIT_PKTLINE_FLUSH) {
            FUZZ_CHECK(pos == len);
            break;
        }
        FUZZ_CHECK(pkt.type == RGIT_PKTLINE_DATA);
        if (lines++ == 0) {
            FUZZ_CHECK(memmem(pkt.data, pkt.len, "agent=rgfuzz", 12) != NULL);
            FUZZ_CHECK(memmem(pkt.data, pkt.len, "object-format=", 14) != NULL);
        } else {
            FUZZ_CHECK(memmem(pkt.data, pkt.len, "^{}", 3) == NULL);
        }
        FUZZ_CHECK(!names_head(pkt.data, pkt.len));
    }
    FUZZ_CHECK(lines > 0 && pos == len);
}

/* Filtering dropping nothing must give back the same bytes. */
static void check_filter_keeps(const char *in, size_t len)
{
    static const char *const none[] = {NULL};
    rg_buf again = RG_BUF_INIT(1 << 21);
    rg_error err = RG_ERROR_INIT;

    FUZZ_CHECK(rgit_advert_filter(&again, in, len, none, NULL, &err) == 0);
    FUZZ_CHECK(again.len == len && memcmp(again.data, in, len) == 0);
    rg_buf_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const drop[] = {"push-cert", "report-status-v2", "atomic", NULL};
    const char *in = (const char *)data;
    rg_buf out = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    int rc;

    /* Something already in the buffer, to see it left alone. */
    FUZZ_CHECK(rg_buf_append(&out, PREFIX, 4) == 0);
    rc = rgit_advert_for_push(&out, in, size, "rgfuzz", &err);
    if (rc == 0) {
        check_built(out.data + 4, out.len - 4);
        check_filter_keeps(out.data + 4, out.len - 4);
    } else {
        FUZZ_CHECK(rc == RG_E_PROTOCOL || rc == RG_E_TOO_BIG);
        FUZZ_CHECK(out.len == 4 && memcmp(out.data, PREFIX, 4) == 0);
    }
    rg_buf_free(&out);

    /*
     * The filter's input is the local receive-pack's own advertisement:
     * here only "no crash, no leak, no UB". Filtering its output again is
     * not asked to give the same bytes: on a malformed input whose
     * preamble line holds NULs it does not (found by this target; open).
     */
    out = (rg_buf)RG_BUF_INIT(1 << 20);
    (void)rgit_advert_filter(&out, in, size, drop, NULL, &err);
    rg_buf_free(&out);
    return 0;
}
