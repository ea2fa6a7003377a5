/*
 * Tests for git/report.c: report-status written plain and inside side-band
 * (64k and 1000-byte packets, split across packets when large), side-band
 * messages, the report parser and the incremental side-band demultiplexer.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "git/pktline.h"
#include "git/report.h"

/*
 * Criterion runs each parameter in a fresh image of this program, where a
 * pointer inside a parameter (to a string literal) would point nowhere; so
 * table-driven tests take an index into a file-scope table instead.
 */
#define NCASES(t) (sizeof(t) / sizeof((t)[0]))

static size_t case_idx[128];

static struct criterion_test_params case_indexes(size_t n)
{
    size_t i;

    for (i = 0; i < n && i < NCASES(case_idx); i++)
        case_idx[i] = i;
    return cr_make_param_array(size_t, case_idx, i);
}

/* ---------------------------------------------------------------------------
 * Helpers
 */

/* The plain report the writer should produce, built independently. */
static void plain_report(rg_buf *out, const char *unpack, const rgit_ref_status *refs, size_t n)
{
    size_t i;

    cr_assert_eq(rgit_pktline_printf(out, "unpack %s\n", unpack), 0);
    for (i = 0; i < n; i++) {
        if (refs[i].error)
            cr_assert_eq(rgit_pktline_printf(out, "ng %s %s\n", refs[i].refname, refs[i].error), 0);
        else
            cr_assert_eq(rgit_pktline_printf(out, "ok %s\n", refs[i].refname), 0);
    }
    cr_assert_eq(rgit_pktline_flush(out), 0);
}

/*
 * Check that `framed` is band-1 packets of at most `max` bytes each, then
 * one flush, and that the band-1 payload is exactly `inner`. Returns the
 * number of band-1 packets.
 */
static size_t assert_sideband_frames(const rg_buf *framed, size_t max, const rg_buf *inner)
{
    rg_buf joined = RG_BUF_INIT(1 << 24);
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    size_t off = 0, npackets = 0;
    int rc;

    for (;;) {
        rc = rgit_pktline_parse(&pkt, framed->data + off, framed->len - off, &err);
        cr_assert_gt(rc, 0, "framing: %s", err.msg);
        off += (size_t)rc;
        if (pkt.type == RGIT_PKTLINE_FLUSH)
            break;
        cr_assert_eq(pkt.type, RGIT_PKTLINE_DATA);
        cr_assert_leq(pkt.len + 4, max, "a packet of %zu bytes", pkt.len + 4);
        cr_assert_eq(pkt.data[0], 1, "band 1");
        cr_assert_eq(rg_buf_append(&joined, pkt.data + 1, pkt.len - 1), 0);
        npackets++;
    }
    cr_assert_eq(off, framed->len, "the outer flush ends it");
    cr_assert_eq(joined.len, inner->len);
    cr_assert_eq(memcmp(joined.data, inner->data, inner->len), 0);
    rg_buf_free(&joined);
    return npackets;
}

/* Many refs with long reasons, so the report passes `size` bytes. */
static rgit_ref_status *big_refs(size_t *n, size_t size)
{
    static const char reason[] = "policy: refs/heads/release-* is protected; ask an owner";
    size_t count = size / 60 + 1, i;
    rgit_ref_status *refs = calloc(count, sizeof(*refs));

    for (i = 0; i < count; i++) {
        char name[64];

        snprintf(name, sizeof(name), "refs/heads/release-%zu", i);
        refs[i].refname = strdup(name);
        refs[i].error = i % 3 ? strdup(reason) : NULL;
    }
    *n = count;
    return refs;
}

static void free_refs(rgit_ref_status *refs, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        free(refs[i].refname);
        free(refs[i].error);
    }
    free(refs);
}

/* rgit_ref_status holds owned, mutable strings; these literals are only read. */
#define MUT(s) ((char *)(s))

static const rgit_ref_status two_refs[] = {
    {MUT("refs/heads/main"), NULL},
    {MUT("refs/heads/dev"), MUT("policy: dev is protected")},
};

/* ---------------------------------------------------------------------------
 * Writing
 */

Test(report, plain_report_is_git_format)
{
    rg_buf out = RG_BUF_INIT(1 << 20);

    cr_assert_eq(rgit_report_write(&out, "ok", two_refs, 2, RGIT_SIDEBAND_NONE), 0);
    cr_assert_str_eq(out.data, "000eunpack ok\n"
                               "0017ok refs/heads/main\n"
                               "002fng refs/heads/dev policy: dev is protected\n"
                               "0000");
    rg_buf_free(&out);
}

Test(report, unpack_error_and_null_unpack)
{
    rg_buf out = RG_BUF_INIT(1 << 20);

    cr_assert_eq(rgit_report_write(&out, "index-pack abnormal exit", NULL, 0, RGIT_SIDEBAND_NONE),
                 0);
    cr_assert_str_eq(out.data, "0024unpack index-pack abnormal exit\n0000");
    rg_buf_reset(&out);
    cr_assert_eq(rgit_report_write(&out, NULL, NULL, 0, RGIT_SIDEBAND_NONE), 0);
    cr_assert_str_eq(out.data, "000eunpack ok\n0000", "NULL means ok");
    rg_buf_free(&out);
}

Test(report, sideband_64k_wraps_the_whole_report_in_band_1)
{
    rg_buf out = RG_BUF_INIT(1 << 20), inner = RG_BUF_INIT(1 << 20);

    plain_report(&inner, "ok", two_refs, 2);
    cr_assert_eq(rgit_report_write(&out, "ok", two_refs, 2, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(assert_sideband_frames(&out, RGIT_PKTLINE_MAX, &inner), 1);
    /* The first bytes are exactly what git's receive-pack sends. */
    cr_assert_eq(memcmp(out.data, "005d\001000eunpack ok\n", 19), 0);
    cr_assert_eq(memcmp(out.data + out.len - 8, "00000000", 8), 0, "inner then outer flush");
    rg_buf_free(&out);
    rg_buf_free(&inner);
}

Test(report, sideband_1000_uses_packets_of_at_most_1000_bytes)
{
    rg_buf out = RG_BUF_INIT(1 << 22), inner = RG_BUF_INIT(1 << 22);
    rgit_ref_status *refs;
    size_t n;

    refs = big_refs(&n, 5000);
    plain_report(&inner, "ok", refs, n);
    cr_assert_eq(rgit_report_write(&out, "ok", refs, n, RGIT_SIDEBAND_1000), 0);
    cr_assert_geq(assert_sideband_frames(&out, 1000, &inner), 5);
    free_refs(refs, n);
    rg_buf_free(&out);
    rg_buf_free(&inner);
}

Test(report, large_report_is_split_across_several_band_1_packets)
{
    rg_buf out = RG_BUF_INIT(1 << 22), inner = RG_BUF_INIT(1 << 22);
    rgit_sideband_demux *d;
    rgit_report parsed;
    rg_error err = RG_ERROR_INIT;
    rgit_ref_status *refs;
    size_t n, i;

    refs = big_refs(&n, 200000);
    plain_report(&inner, "ok", refs, n);
    cr_assert_gt(inner.len, 3 * 65515);
    cr_assert_eq(rgit_report_write(&out, "ok", refs, n, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(assert_sideband_frames(&out, RGIT_PKTLINE_MAX, &inner),
                 (inner.len + 65514) / 65515, "full packets, then the rest");

    /* The demultiplexer reassembles it, and the parser reads it back. */
    cr_assert_eq(rgit_sideband_demux_new(&d, RGIT_SIDEBAND_64K, 1 << 22, 1024), 0);
    cr_assert_eq(rgit_sideband_demux_feed(d, out.data, out.len, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_sideband_demux_finish(d, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_report_parse(&parsed, rgit_sideband_demux_report(d)->data,
                                   rgit_sideband_demux_report(d)->len, &err),
                 0, "%s", err.msg);
    cr_assert_eq(parsed.nrefs, n);
    for (i = 0; i < n; i++) {
        cr_assert_str_eq(parsed.refs[i].refname, refs[i].refname);
        if (refs[i].error)
            cr_assert_str_eq(parsed.refs[i].error, refs[i].error);
        else
            cr_assert_null(parsed.refs[i].error);
    }
    rgit_report_free(&parsed);
    rgit_sideband_demux_free(d);
    free_refs(refs, n);
    rg_buf_free(&out);
    rg_buf_free(&inner);
}

Test(report, reasons_are_made_one_printable_line)
{
    rgit_ref_status refs[] = {{MUT("refs/heads/x"), MUT("first\nsecond\r\x1b[31m")}};
    rg_buf out = RG_BUF_INIT(1 << 20);

    cr_assert_eq(rgit_report_write(&out, "ok\n", refs, 1, RGIT_SIDEBAND_NONE), 0);
    cr_assert_str_eq(out.data, "000funpack ok \n0027ng refs/heads/x first second  [31m\n0000");
    rg_buf_free(&out);
}

Test(report, an_overlong_reason_is_cut_to_fit_a_packet)
{
    char *reason = malloc(100000);
    rgit_ref_status refs[1] = {{MUT("refs/heads/x"), reason}};
    rg_buf out = RG_BUF_INIT(1 << 20);
    rgit_report parsed;
    rg_error err = RG_ERROR_INIT;
    size_t len;

    memset(reason, 'r', 99999);
    reason[99999] = '\0';
    cr_assert_eq(rgit_report_write(&out, "ok", refs, 1, RGIT_SIDEBAND_NONE), 0);
    cr_assert_eq(rgit_report_parse(&parsed, out.data, out.len, &err), 0, "%s", err.msg);
    len = strlen(parsed.refs[0].error);
    cr_assert_eq(len + strlen("ng refs/heads/x \n"), RGIT_PKTLINE_DATA_MAX);
    cr_assert_str_eq(parsed.refs[0].error + len - 3, "...");
    rgit_report_free(&parsed);
    free(reason);
    rg_buf_free(&out);
}

Test(report, unwritable_ref_names_are_refused)
{
    rgit_ref_status space[] = {{MUT("refs/heads/a b"), NULL}};
    rgit_ref_status empty[] = {{MUT(""), NULL}};
    rgit_ref_status lf[] = {{MUT("refs/heads/a\n"), MUT("x")}};
    rg_buf out = RG_BUF_INIT(1 << 20);

    cr_assert_eq(rgit_report_write(&out, "ok", space, 1, RGIT_SIDEBAND_NONE), -EINVAL);
    cr_assert_eq(rgit_report_write(&out, "ok", empty, 1, RGIT_SIDEBAND_64K), -EINVAL);
    cr_assert_eq(rgit_report_write(&out, "ok", lf, 1, RGIT_SIDEBAND_1000), -EINVAL);
    cr_assert_eq(rgit_report_write(&out, "ok", NULL, 0, (rgit_sideband_mode)12), -EINVAL);
    cr_assert_eq(out.len, 0);
    rg_buf_free(&out);
}

Test(report, sideband_write_splits_and_keeps_alive)
{
    rg_buf out = RG_BUF_INIT(1 << 20);
    char msg[2000];

    memset(msg, 'm', sizeof(msg));
    cr_assert_eq(rgit_sideband_write(&out, 2, msg, sizeof(msg), RGIT_SIDEBAND_1000), 0);
    /* 995 + 995 + 10 payload bytes. */
    cr_assert_eq(out.len, 1000 + 1000 + 15);
    cr_assert_eq(memcmp(out.data, "03e8\002", 5), 0);
    cr_assert_eq(memcmp(out.data + 1000, "03e8\002", 5), 0);
    cr_assert_eq(memcmp(out.data + 2000, "000f\002mmmmmmmmmm", 15), 0);

    rg_buf_reset(&out);
    cr_assert_eq(rgit_sideband_write(&out, 1, NULL, 0, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(out.len, 5);
    cr_assert_eq(memcmp(out.data, "0005\001", 5), 0, "an empty band-1 packet is a keepalive");

    rg_buf_reset(&out);
    cr_assert_eq(rgit_sideband_write(&out, 3, "fatal\n", 6, RGIT_SIDEBAND_NONE), 0);
    cr_assert_eq(out.len, 0, "nothing without side-band");
    cr_assert_eq(rgit_sideband_write(&out, 4, "x", 1, RGIT_SIDEBAND_64K), -EINVAL);
    cr_assert_eq(rgit_sideband_write(&out, 0, "x", 1, RGIT_SIDEBAND_64K), -EINVAL);
    rg_buf_free(&out);
}

/* ---------------------------------------------------------------------------
 * Parsing
 */

struct parse_case {
    const char *name;
    const char *lines[5]; /* payloads; "FLUSH" for 0000 */
    int rc;
    const char *unpack;
    size_t nrefs;
    const char *ref0, *error0; /* error0 NULL: ok */
    const char *msg;           /* when rc < 0: part of the message */
};

static const struct parse_case parse_table_cases[] = {
    {"all ok",
     {"unpack ok\n", "ok refs/heads/main\n", "FLUSH"},
     0,
     "ok",
     1,
     "refs/heads/main",
     NULL,
     NULL},
    {"ng with reason",
     {"unpack ok\n", "ng refs/heads/main pre-receive hook declined\n", "FLUSH"},
     0,
     "ok",
     1,
     "refs/heads/main",
     "pre-receive hook declined",
     NULL},
    {"unpack error",
     {"unpack index-pack abnormal exit\n", "ng refs/heads/main unpacker error\n", "FLUSH"},
     0,
     "index-pack abnormal exit",
     1,
     "refs/heads/main",
     "unpacker error",
     NULL},
    {"ng without reason, no LFs",
     {"unpack ok", "ng refs/heads/x", "FLUSH"},
     0,
     "ok",
     1,
     "refs/heads/x",
     "",
     NULL},
    {"no refs", {"unpack ok\n", "FLUSH"}, 0, "ok", 0, NULL, NULL, NULL},
    {"no unpack line",
     {"ok refs/heads/main\n", "FLUSH"},
     RG_E_PROTOCOL,
     NULL,
     0,
     NULL,
     NULL,
     "unpack"},
    {"garbage line",
     {"unpack ok\n", "maybe refs/heads/x\n", "FLUSH"},
     RG_E_PROTOCOL,
     NULL,
     0,
     NULL,
     NULL,
     "unexpected report line"},
    {"v2 option line",
     {"unpack ok\n", "ok refs/heads/x\n", "option refname refs/heads/y\n", "FLUSH"},
     RG_E_PROTOCOL,
     NULL,
     0,
     NULL,
     NULL,
     "report-status-v2"},
    {"ok with a space",
     {"unpack ok\n", "ok refs/heads/x y\n", "FLUSH"},
     RG_E_PROTOCOL,
     NULL,
     0,
     NULL,
     NULL,
     "bad ref name"},
    {"no flush",
     {"unpack ok\n", "ok refs/heads/x\n"},
     RG_E_PROTOCOL,
     NULL,
     0,
     NULL,
     NULL,
     "without a flush"},
    {"trailing bytes",
     {"unpack ok\n", "FLUSH", "ok refs/heads/x\n"},
     RG_E_PROTOCOL,
     NULL,
     0,
     NULL,
     NULL,
     "after the report"},
    {"empty", {NULL}, RG_E_PROTOCOL, NULL, 0, NULL, NULL, "without a flush"},
    {"empty unpack", {"unpack \n", "FLUSH"}, RG_E_PROTOCOL, NULL, 0, NULL, NULL, "unpack"},
};

ParameterizedTestParameters(report, parse_table)
{
    return case_indexes(NCASES(parse_table_cases));
}

ParameterizedTest(size_t *i_case, report, parse_table)
{
    const struct parse_case *c = &parse_table_cases[*i_case];
    rg_buf in = RG_BUF_INIT(1 << 20);
    rgit_report r;
    rg_error err = RG_ERROR_INIT;
    size_t i;
    int rc;

    for (i = 0; i < 5 && c->lines[i]; i++) {
        if (strcmp(c->lines[i], "FLUSH") == 0)
            cr_assert_eq(rgit_pktline_flush(&in), 0);
        else
            cr_assert_eq(rgit_pktline_write(&in, c->lines[i], strlen(c->lines[i])), 0);
    }
    rc = rgit_report_parse(&r, in.data, in.len, &err);
    cr_assert_eq(rc, c->rc, "%s: %d %s", c->name, rc, err.msg);
    if (rc < 0) {
        cr_assert(strstr(err.msg, c->msg) != NULL, "%s: \"%s\" lacks \"%s\"", c->name, err.msg,
                  c->msg);
        cr_assert_null(r.refs, "%s: nothing is left allocated", c->name);
        cr_assert_null(r.unpack);
    } else {
        cr_assert_str_eq(r.unpack, c->unpack, "%s", c->name);
        cr_assert_eq(r.nrefs, c->nrefs, "%s", c->name);
        if (c->nrefs) {
            cr_assert_str_eq(r.refs[0].refname, c->ref0, "%s", c->name);
            if (c->error0)
                cr_assert_str_eq(r.refs[0].error, c->error0, "%s", c->name);
            else
                cr_assert_null(r.refs[0].error, "%s", c->name);
        }
    }
    rgit_report_free(&r);
    rgit_report_free(NULL);
    rg_buf_free(&in);
}

Test(report, write_then_parse_round_trips)
{
    rg_buf out = RG_BUF_INIT(1 << 20);
    rgit_report r;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rgit_report_write(&out, "ok", two_refs, 2, RGIT_SIDEBAND_NONE), 0);
    cr_assert_eq(rgit_report_parse(&r, out.data, out.len, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.unpack, "ok");
    cr_assert_eq(r.nrefs, 2);
    cr_assert_str_eq(r.refs[0].refname, "refs/heads/main");
    cr_assert_null(r.refs[0].error);
    cr_assert_str_eq(r.refs[1].refname, "refs/heads/dev");
    cr_assert_str_eq(r.refs[1].error, "policy: dev is protected");
    rgit_report_free(&r);
    rg_buf_free(&out);
}

/* ---------------------------------------------------------------------------
 * Demultiplexing
 */

/* A receive-pack answer with progress, keepalives, a split report and a fatal error. */
static void mixed_stream(rg_buf *out, rg_buf *inner)
{
    rg_buf_reset(inner);
    plain_report(inner, "ok", two_refs, 2);
    cr_assert_eq(rgit_sideband_write(out, 2, "Resolving deltas: 50%\r", 22, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_sideband_write(out, 1, inner->data, 20, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_sideband_write(out, 1, NULL, 0, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_sideband_write(out, 2, "done.\n", 6, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_sideband_write(out, 1, inner->data + 20, inner->len - 20, RGIT_SIDEBAND_64K),
                 0);
    cr_assert_eq(rgit_sideband_write(out, 3, "disk full\n", 10, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_sideband_write(out, 3, "second\n", 7, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_pktline_flush(out), 0);
}

ParameterizedTestParameters(report, demux_mixed_bands)
{
    static size_t steps[] = {1, 2, 3, 7, 100, 1 << 20};
    return cr_make_param_array(size_t, steps, sizeof(steps) / sizeof(steps[0]));
}

ParameterizedTest(size_t *step, report, demux_mixed_bands)
{
    rg_buf stream = RG_BUF_INIT(1 << 20), inner = RG_BUF_INIT(1 << 20);
    rgit_sideband_demux *d;
    rg_error err = RG_ERROR_INIT;
    const rg_buf *report;
    size_t off, n;

    mixed_stream(&stream, &inner);
    cr_assert_eq(rgit_sideband_demux_new(&d, RGIT_SIDEBAND_64K, 1 << 20, 1 << 20), 0);
    for (off = 0; off < stream.len; off += n) {
        n = stream.len - off < *step ? stream.len - off : *step;
        cr_assert_eq(rgit_sideband_demux_feed(d, stream.data + off, n, &err), 0,
                     "step %zu at %zu: %s", *step, off, err.msg);
    }
    cr_assert_eq(rgit_sideband_demux_finish(d, &err), 0, "%s", err.msg);
    report = rgit_sideband_demux_report(d);
    cr_assert_eq(report->len, inner.len);
    cr_assert_eq(memcmp(report->data, inner.data, inner.len), 0);
    cr_assert_str_eq(rgit_sideband_demux_progress(d)->data, "Resolving deltas: 50%\rdone.\n");
    cr_assert_str_eq(rgit_sideband_demux_fatal(d), "disk full", "the first band-3 message");
    rgit_sideband_demux_free(d);
    rg_buf_free(&stream);
    rg_buf_free(&inner);
}

Test(report, demux_without_sideband_is_all_report)
{
    rgit_sideband_demux *d;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rgit_sideband_demux_new(&d, RGIT_SIDEBAND_NONE, 64, 64), 0);
    cr_assert_eq(rgit_sideband_demux_feed(d, "000eunpack ok\n", 14, &err), 0);
    cr_assert_eq(rgit_sideband_demux_feed(d, "0000", 4, &err), 0);
    cr_assert_eq(rgit_sideband_demux_finish(d, &err), 0);
    cr_assert_str_eq(rgit_sideband_demux_report(d)->data, "000eunpack ok\n0000");
    cr_assert_eq(rgit_sideband_demux_progress(d)->len, 0);
    cr_assert_null(rgit_sideband_demux_fatal(d));
    cr_assert_eq(rgit_sideband_demux_feed(d, "0123456789012345678901234567890123456789012345678901",
                                          52, &err),
                 RG_E_TOO_BIG, "the report is capped");
    rgit_sideband_demux_free(d);
    rgit_sideband_demux_free(NULL);
}

Test(report, demux_progress_over_its_cap_is_cut_not_fatal)
{
    rg_buf stream = RG_BUF_INIT(1 << 20);
    rgit_sideband_demux *d;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rgit_sideband_write(&stream, 2, "0123456789", 10, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_sideband_write(&stream, 2, "abcdefghij", 10, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_sideband_write(&stream, 1, "0000", 4, RGIT_SIDEBAND_64K), 0);
    cr_assert_eq(rgit_pktline_flush(&stream), 0);
    cr_assert_eq(rgit_sideband_demux_new(&d, RGIT_SIDEBAND_64K, 64, 15), 0);
    cr_assert_eq(rgit_sideband_demux_feed(d, stream.data, stream.len, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_sideband_demux_finish(d, &err), 0, "%s", err.msg);
    cr_assert_str_eq(rgit_sideband_demux_progress(d)->data, "0123456789abcde");
    cr_assert_str_eq(rgit_sideband_demux_report(d)->data, "0000");
    rgit_sideband_demux_free(d);
    rg_buf_free(&stream);
}

#define S4(s) s, sizeof(s) - 1

struct demux_bad {
    const char *name;
    const char *in;
    size_t len;
    rgit_sideband_mode mode;
    int feed_rc, finish_rc;
    const char *msg;
};

static const struct demux_bad demux_rejects_cases[] = {
    {"unknown band", S4("0006\004x"), RGIT_SIDEBAND_64K, RG_E_PROTOCOL, 0, "unknown side-band 4"},
    {"no band designator", S4("0004"), RGIT_SIDEBAND_64K, RG_E_PROTOCOL, 0, "designator"},
    {"delim", S4("0001"), RGIT_SIDEBAND_64K, RG_E_PROTOCOL, 0, "delim"},
    {"data after the flush", S4("00000006\001x"), RGIT_SIDEBAND_64K, RG_E_PROTOCOL, 0,
     "after the final flush"},
    {"ends inside a packet", S4("0010\001abc"), RGIT_SIDEBAND_64K, 0, RG_E_PROTOCOL,
     "inside a packet"},
    {"ends before the flush", S4("0006\001x"), RGIT_SIDEBAND_64K, 0, RG_E_PROTOCOL,
     "before its flush"},
    {"bad length", S4("zzzz"), RGIT_SIDEBAND_1000, RG_E_PROTOCOL, 0, "pkt-line length"},
};

ParameterizedTestParameters(report, demux_rejects)
{
    return case_indexes(NCASES(demux_rejects_cases));
}

ParameterizedTest(size_t *i_case, report, demux_rejects)
{
    const struct demux_bad *c = &demux_rejects_cases[*i_case];
    rgit_sideband_demux *d;
    rg_error err = RG_ERROR_INIT;
    size_t i;
    int rc = 0;

    cr_assert_eq(rgit_sideband_demux_new(&d, c->mode, 1024, 1024), 0);
    /* Byte by byte, so that errors are found wherever a packet is cut. */
    for (i = 0; i < c->len && rc == 0; i++)
        rc = rgit_sideband_demux_feed(d, c->in + i, 1, &err);
    cr_assert_eq(rc, c->feed_rc, "%s: feed %d %s", c->name, rc, err.msg);
    if (rc == 0) {
        rc = rgit_sideband_demux_finish(d, &err);
        cr_assert_eq(rc, c->finish_rc, "%s: finish %d %s", c->name, rc, err.msg);
    }
    cr_assert(strstr(err.msg, c->msg) != NULL, "%s: \"%s\" lacks \"%s\"", c->name, err.msg, c->msg);
    rgit_sideband_demux_free(d);
}

Test(report, demux_fatal_alone_ends_the_stream)
{
    rgit_sideband_demux *d;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rgit_sideband_demux_new(&d, RGIT_SIDEBAND_64K, 1024, 1024), 0);
    cr_assert_eq(rgit_sideband_demux_feed(d, "000a\003oops", 10, &err), 0);
    cr_assert_eq(rgit_sideband_demux_finish(d, &err), 0, "a fatal message explains the end");
    cr_assert_str_eq(rgit_sideband_demux_fatal(d), "oops");
    rgit_sideband_demux_free(d);
}

Test(report, demux_refuses_a_1001_byte_packet_on_side_band)
{
    rgit_sideband_demux *d;
    rg_error err = RG_ERROR_INIT;
    char pkt[1001];

    memset(pkt, 'x', sizeof(pkt));
    memcpy(pkt, "03e8\002", 5);
    cr_assert_eq(rgit_sideband_demux_new(&d, RGIT_SIDEBAND_1000, 1024, 4096), 0);
    cr_assert_eq(rgit_sideband_demux_feed(d, pkt, 1000, &err), 0, "1000 bytes is the most");
    memcpy(pkt, "03e9\002", 5);
    cr_assert_eq(rgit_sideband_demux_feed(d, pkt, 1001, &err), RG_E_PROTOCOL);
    cr_assert(strstr(err.msg, "at most 1000") != NULL, "%s", err.msg);
    rgit_sideband_demux_free(d);
}
