/*
 * libFuzzer target for the pkt-line layer and the readers of upstream's
 * bytes built on it. Besides "no crash, no leak, no UB" it checks
 * properties: the incremental reader finds exactly the packets a one-shot
 * parse finds, in any chunking, and never takes a byte past a packet; a
 * parsed report survives being written and parsed again; filtering an
 * advertisement twice changes nothing the second time.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "git/advert.h"
#include "git/pktline.h"
#include "git/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The reader, fed in chunks, must agree packet for packet with parse. */
static void check_reader(const char *in, size_t size, uint64_t seed)
{
    static rgit_pktline_reader r; /* 64 KiB: not on the stack */
    rgit_pktline a, b;
    rg_error err = RG_ERROR_INIT;
    size_t pos = 0, one = 0, used;
    int rc, rc1;

    rgit_pktline_reader_init(&r);
    while (pos < size) {
        size_t chunk = fuzz_chunk(&seed), cpos = 0;

        if (chunk > size - pos)
            chunk = size - pos;
        /* Bounded: each turn takes bytes or completes a packet. */
        while (cpos < chunk) {
            rc = rgit_pktline_reader_next(&a, &r, in + pos + cpos, chunk - cpos, &used, &err);
            FUZZ_CHECK(used <= chunk - cpos);
            cpos += used;
            if (rc < 0) {
                rc1 = rgit_pktline_parse(&b, in + one, size - one, &err);
                FUZZ_CHECK(rc1 == rc);
                return;
            }
            if (rc == 0) {
                FUZZ_CHECK(cpos == chunk);
                break;
            }
            rc1 = rgit_pktline_parse(&b, in + one, size - one, &err);
            FUZZ_CHECK(rc1 > 0);
            one += (size_t)rc1;
            /* Never a byte past the packet: the stream position is its end. */
            FUZZ_CHECK(pos + cpos == one);
            FUZZ_CHECK(a.type == b.type && a.len == b.len);
            FUZZ_CHECK(a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
        }
        pos += chunk;
    }
    if (rgit_pktline_reader_pending(&r)) {
        FUZZ_CHECK(one < size);
        FUZZ_CHECK(rgit_pktline_parse(&b, in + one, size - one, &err) == 0);
    } else {
        FUZZ_CHECK(one == size);
    }
}

static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* Parse a report; when it parses, write it back and parse that again. */
static void check_report(const char *in, size_t size)
{
    rgit_report r, again;
    rg_buf out = RG_BUF_INIT(1 << 22);
    rg_error err = RG_ERROR_INIT;
    size_t i;

    if (rgit_report_parse(&r, in, size, &err) < 0)
        return;
    /* "ok <name>\n" must fit a packet; a longer name cannot be written. */
    for (i = 0; i < r.nrefs; i++) {
        if (strlen(r.refs[i].refname) + 4 > RGIT_PKTLINE_DATA_MAX) {
            FUZZ_CHECK(rgit_report_write(&out, r.unpack, r.refs, r.nrefs, RGIT_SIDEBAND_NONE) ==
                       -EINVAL);
            goto done;
        }
    }
    FUZZ_CHECK(rgit_report_write(&out, r.unpack, r.refs, r.nrefs, RGIT_SIDEBAND_NONE) == 0);
    FUZZ_CHECK(rgit_report_parse(&again, out.data, out.len, &err) == 0);
    FUZZ_CHECK(again.nrefs == r.nrefs);
    if (!has_control(r.unpack))
        FUZZ_CHECK(strcmp(again.unpack, r.unpack) == 0);
    for (i = 0; i < r.nrefs; i++) {
        FUZZ_CHECK(strcmp(again.refs[i].refname, r.refs[i].refname) == 0);
        FUZZ_CHECK((again.refs[i].error == NULL) == (r.refs[i].error == NULL));
        if (r.refs[i].error && !has_control(r.refs[i].error))
            FUZZ_CHECK(strcmp(again.refs[i].error, r.refs[i].error) == 0);
    }
    rgit_report_free(&again);
done:
    rgit_report_free(&r);
    rg_buf_free(&out);
}

/* Demultiplex in chunks for one mode, then read whatever report came out. */
static void check_demux(const char *in, size_t size, rgit_sideband_mode mode, uint64_t seed)
{
    rgit_sideband_demux *d = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t pos = 0, n;
    int rc = 0;

    FUZZ_CHECK(rgit_sideband_demux_new(&d, mode, 1 << 16, 1024) == 0);
    while (pos < size && rc == 0) {
        n = fuzz_chunk(&seed);
        if (n > size - pos)
            n = size - pos;
        rc = rgit_sideband_demux_feed(d, in + pos, n, &err);
        pos += n;
    }
    if (rc == 0)
        rc = rgit_sideband_demux_finish(d, &err);
    FUZZ_CHECK(rgit_sideband_demux_progress(d)->len <= 1024);
    if (rc == 0) {
        const rg_buf *report = rgit_sideband_demux_report(d);

        FUZZ_CHECK(report->len <= 1 << 16);
        check_report(report->data ? report->data : "", report->len);
    }
    rgit_sideband_demux_free(d);
}

static void check_advert(const char *in, size_t size)
{
    static const char *const drop[] = {"push-cert", "report-status-v2", NULL};
    rg_buf once = RG_BUF_INIT(1 << 20), twice = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    if (rgit_advert_filter(&once, in, size, drop, "git-receive-pack", &err) == 0) {
        FUZZ_CHECK(
            rgit_advert_filter(&twice, once.data, once.len, drop, "git-receive-pack", &err) == 0);
        FUZZ_CHECK(twice.len == once.len && memcmp(twice.data, once.data, once.len) == 0);
    }
    rg_buf_free(&once);
    rg_buf_free(&twice);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    uint64_t seed = fuzz_seed(data, size);
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    size_t off = 0;
    int rc;

    /* One-shot parsing in a loop; bounded, each packet is >= 4 bytes. */
    while (off < size) {
        rc = rgit_pktline_parse(&pkt, in + off, size - off, &err);
        if (rc <= 0)
            break;
        FUZZ_CHECK((size_t)rc <= size - off && pkt.len + 4 == (size_t)rc);
        off += (size_t)rc;
    }
    check_reader(in, size, seed);
    check_report(in, size);
    check_demux(in, size, RGIT_SIDEBAND_NONE, seed);
    check_demux(in, size, RGIT_SIDEBAND_1000, seed);
    check_demux(in, size, RGIT_SIDEBAND_64K, seed);
    check_advert(in, size);
    return 0;
}
