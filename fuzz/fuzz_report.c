/*
 * libFuzzer target for the report-status parser (git/report.h), which
 * reads what upstream answers a push, and the side-band framing around it.
 * Besides "no crash, no leak, no UB" it checks that a report that parses,
 * written back framed for each side-band mode (none, side-band,
 * side-band-64k) with a progress message around it and fed to the
 * demultiplexer in chunks sized by the input, comes out as the same
 * report, the progress as written and no fatal message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "git/pktline.h"
#include "git/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* Equal reports; messages with control characters are written cleaned, so
 * only their presence is compared. */
static int reports_eq(const rgit_report *a, const rgit_report *b)
{
    size_t i;

    if (a->nrefs != b->nrefs || (!has_control(a->unpack) && strcmp(a->unpack, b->unpack) != 0))
        return 0;
    for (i = 0; i < a->nrefs; i++) {
        if (strcmp(a->refs[i].refname, b->refs[i].refname) != 0)
            return 0;
        if ((a->refs[i].error == NULL) != (b->refs[i].error == NULL))
            return 0;
        if (a->refs[i].error && !has_control(a->refs[i].error) &&
            strcmp(a->refs[i].error, b->refs[i].error) != 0)
            return 0;
    }
    return 1;
}

/* Lines a report is made of hold no line break or NUL of their own. */
static int writable(const rgit_report *r)
{
    size_t i;

    if (strpbrk(r->unpack, "\n\r") != NULL)
        return 0;
    for (i = 0; i < r->nrefs; i++) {
        if (strpbrk(r->refs[i].refname, "\n\r ") != NULL ||
            strlen(r->refs[i].refname) + 4 > RGIT_PKTLINE_DATA_MAX)
            return 0;
        if (r->refs[i].error &&
            (strpbrk(r->refs[i].error, "\n\r") != NULL ||
             strlen(r->refs[i].refname) + strlen(r->refs[i].error) + 5 > RGIT_PKTLINE_DATA_MAX))
            return 0;
    }
    return 1;
}

static void check_framed(const rgit_report *r, rgit_sideband_mode mode, uint64_t seed)
{
    static const char progress[] = "Resolving deltas: 100% (3/3), done.\n";
    rg_buf out = RG_BUF_INIT(1 << 22);
    rgit_sideband_demux *d = NULL;
    rgit_report again;
    rg_error err = RG_ERROR_INIT;
    size_t pos = 0, n;
    int rc = 0;

    FUZZ_CHECK(rgit_sideband_write(&out, 2, progress, sizeof(progress) - 1, mode) == 0);
    FUZZ_CHECK(rgit_report_write(&out, r->unpack, r->refs, r->nrefs, mode) == 0);
    FUZZ_CHECK(rgit_sideband_demux_new(&d, mode, 1 << 22, 1024) == 0);
    /* Bounded: every turn moves pos forward by at least one byte. */
    while (pos < out.len && rc == 0) {
        n = fuzz_chunk(&seed);
        if (n > out.len - pos)
            n = out.len - pos;
        rc = rgit_sideband_demux_feed(d, out.data + pos, n, &err);
        pos += n;
    }
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(rgit_sideband_demux_finish(d, &err) == 0);
    FUZZ_CHECK(rgit_sideband_demux_fatal(d) == NULL);
    if (mode != RGIT_SIDEBAND_NONE) {
        const rg_buf *p = rgit_sideband_demux_progress(d);

        FUZZ_CHECK(p->len == sizeof(progress) - 1 && memcmp(p->data, progress, p->len) == 0);
    }
    FUZZ_CHECK(rgit_report_parse(&again, rgit_sideband_demux_report(d)->data,
                                 rgit_sideband_demux_report(d)->len, &err) == 0);
    FUZZ_CHECK(reports_eq(r, &again));
    rgit_report_free(&again);
    rgit_sideband_demux_free(d);
    rg_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = fuzz_seed(data, size);
    rgit_report r;
    rg_error err = RG_ERROR_INIT;
    int rc;

    rc = rgit_report_parse(&r, (const char *)data, size, &err);
    if (rc < 0) {
        FUZZ_CHECK(rc == RG_E_PROTOCOL || rc == RG_E_TOO_BIG || rc == -ENOMEM);
        return 0;
    }
    FUZZ_CHECK(r.unpack != NULL);
    if (writable(&r)) {
        check_framed(&r, RGIT_SIDEBAND_NONE, seed);
        check_framed(&r, RGIT_SIDEBAND_1000, seed);
        check_framed(&r, RGIT_SIDEBAND_64K, seed);
    }
    rgit_report_free(&r);
    return 0;
}
