/*
 * Tests for git/advert.c: capabilities the gateway cannot honour are
 * removed from the ref advertisement, everything else passes unchanged, and
 * the smart-HTTP service preamble is written exactly once when asked for;
 * and a remote upstream's upload-pack advertisement becomes a receive-pack
 * one with the capabilities the gateway can forward.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <string.h>

#include "git/advert.h"
#include "git/pktline.h"

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

#define Z40 "0000000000000000000000000000000000000000"
#define A40 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B40 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* What git 2.39's receive-pack advertises, plus a push-cert nonce. */
#define UPSTREAM_CAPS                                                                              \
    "report-status report-status-v2 delete-refs side-band-64k quiet atomic ofs-delta "             \
    "push-options push-cert=1700000000-abcdef object-format=sha1 agent=git/2.39.5"
#define FILTERED_CAPS                                                                              \
    "report-status delete-refs side-band-64k quiet atomic ofs-delta push-options "                 \
    "object-format=sha1 agent=git/2.39.5"

static const char *const drop[] = {"push-cert", "report-status-v2", NULL};

/* Append a data packet whose payload is `first`, NUL, `second`. */
static void write_nul_line(rg_buf *out, const char *first, const char *second)
{
    cr_assert_eq(rgit_pktline_printf(out, "%s%c%s", first, 0, second), 0);
}

static void assert_buf_eq(const rg_buf *got, const rg_buf *want)
{
    cr_assert_eq(got->len, want->len, "length %zu, want %zu", got->len, want->len);
    cr_assert_eq(memcmp(got->data, want->data, want->len), 0);
}

Test(advert, drops_push_cert_and_report_status_v2)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    write_nul_line(&in, A40 " refs/heads/main", UPSTREAM_CAPS "\n");
    cr_assert_eq(rgit_pktline_printf(&in, "%s refs/heads/dev\n", B40), 0);
    cr_assert_eq(rgit_pktline_printf(&in, "%s .have\n", B40), 0);
    cr_assert_eq(rgit_pktline_flush(&in), 0);

    write_nul_line(&want, A40 " refs/heads/main", FILTERED_CAPS "\n");
    cr_assert_eq(rgit_pktline_printf(&want, "%s refs/heads/dev\n", B40), 0);
    cr_assert_eq(rgit_pktline_printf(&want, "%s .have\n", B40), 0);
    cr_assert_eq(rgit_pktline_flush(&want), 0);

    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
    assert_buf_eq(&out, &want);
    rg_buf_free(&in);
    rg_buf_free(&out);
    rg_buf_free(&want);
}

Test(advert, empty_repository_advertisement)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    write_nul_line(&in, Z40 " capabilities^{}", UPSTREAM_CAPS "\n");
    cr_assert_eq(rgit_pktline_flush(&in), 0);
    write_nul_line(&want, Z40 " capabilities^{}", FILTERED_CAPS "\n");
    cr_assert_eq(rgit_pktline_flush(&want), 0);

    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
    assert_buf_eq(&out, &want);
    rg_buf_free(&in);
    rg_buf_free(&out);
    rg_buf_free(&want);
}

Test(advert, service_preamble_is_written_once)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1 << 20);
    rg_buf bare = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    write_nul_line(&bare, A40 " refs/heads/main", "report-status push-cert=x\n");
    cr_assert_eq(rgit_pktline_flush(&bare), 0);
    cr_assert_str_eq(bare.data + bare.len - 4, "0000");

    cr_assert_eq(rg_buf_puts(&want, "001f# service=git-receive-pack\n0000"), 0);
    write_nul_line(&want, A40 " refs/heads/main", "report-status\n");
    cr_assert_eq(rgit_pktline_flush(&want), 0);

    /* Local `git receive-pack --advertise-refs` output: preamble added. */
    cr_assert_eq(rgit_advert_filter(&out, bare.data, bare.len, drop, "git-receive-pack", &err), 0,
                 "%s", err.msg);
    assert_buf_eq(&out, &want);

    /* An upstream HTTP answer already has one: it is replaced, not doubled. */
    cr_assert_eq(rg_buf_puts(&in, "001f# service=git-receive-pack\n0000"), 0);
    cr_assert_eq(rg_buf_append(&in, bare.data, bare.len), 0);
    rg_buf_reset(&out);
    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, drop, "git-receive-pack", &err), 0, "%s",
                 err.msg);
    assert_buf_eq(&out, &want);

    /* And dropped when no service is asked for. */
    rg_buf_reset(&out);
    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(out.len, want.len - 35);
    cr_assert_eq(memcmp(out.data, want.data + 35, out.len), 0);
    rg_buf_free(&in);
    rg_buf_free(&out);
    rg_buf_free(&want);
    rg_buf_free(&bare);
}

Test(advert, version_1_line_and_no_drop_list_pass_through)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rgit_pktline_printf(&in, "version 1\n"), 0);
    write_nul_line(&in, A40 " refs/heads/main", UPSTREAM_CAPS "\n");
    cr_assert_eq(rgit_pktline_flush(&in), 0);
    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, NULL, NULL, &err), 0, "%s", err.msg);
    assert_buf_eq(&out, &in);
    rg_buf_free(&in);
    rg_buf_free(&out);
}

Test(advert, capabilities_on_a_later_line_are_cut)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    write_nul_line(&in, A40 " refs/heads/main", "report-status\n");
    write_nul_line(&in, B40 " refs/heads/dev", "push-cert=sneaky\n");
    cr_assert_eq(rgit_pktline_flush(&in), 0);
    write_nul_line(&want, A40 " refs/heads/main", "report-status\n");
    cr_assert_eq(rgit_pktline_printf(&want, "%s refs/heads/dev\n", B40), 0);
    cr_assert_eq(rgit_pktline_flush(&want), 0);
    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
    assert_buf_eq(&out, &want);
    rg_buf_free(&in);
    rg_buf_free(&out);
    rg_buf_free(&want);
}

Test(advert, every_capability_dropped_leaves_an_empty_list)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    write_nul_line(&in, A40 " refs/heads/main", "push-cert=1 report-status-v2");
    cr_assert_eq(rgit_pktline_flush(&in), 0);
    write_nul_line(&want, A40 " refs/heads/main", "");
    cr_assert_eq(rgit_pktline_flush(&want), 0);
    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
    assert_buf_eq(&out, &want);
    rg_buf_free(&in);
    rg_buf_free(&out);
    rg_buf_free(&want);
}

struct bad_advert {
    const char *name;
    const char *in;
    size_t len;
    const char *msg;
};

#define S(s) s, sizeof(s) - 1

static const struct bad_advert rejects_malformed_cases[] = {
    {"no flush", S("000bab ref\n"), "without a flush"},
    {"cut packet", S("0010ab"), "inside a packet"},
    {"empty input", S(""), "without a flush"},
    {"protocol v2", S("000eversion 2\n0000"), "version 2"},
    {"bad version line", S("0010version 1 x\n0000"), "bad version"},
    {"bytes after the flush", S("0000extra"), "after the advertisement"},
    {"delim", S("00010000"), "delim"},
    {"empty packet", S("00040000"), "empty"},
    {"service line without flush", S("001f# service=git-receive-pack\n0009x ref"),
     "no flush after"},
    {"bad hex", S("zzzz"), "pkt-line length"},
    /* Found by fuzz_pktline: cutting the capabilities left a 0004. */
    {"capabilities but no ref", S("0009\0abcd0000"), "no ref"},
    {"later line with capabilities but no ref", S("000bab ref\n0009\0abcd0000"), "no ref"},
};

ParameterizedTestParameters(advert, rejects_malformed)
{
    return case_indexes(NCASES(rejects_malformed_cases));
}

ParameterizedTest(size_t *i_case, advert, rejects_malformed)
{
    const struct bad_advert *c = &rejects_malformed_cases[*i_case];
    rg_buf out = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rg_buf_puts(&out, "kept"), 0);
    cr_assert_eq(rgit_advert_filter(&out, c->in, c->len, drop, "git-receive-pack", &err),
                 RG_E_PROTOCOL, "%s: %s", c->name, err.msg);
    cr_assert(strstr(err.msg, c->msg) != NULL, "%s: \"%s\" lacks \"%s\"", c->name, err.msg, c->msg);
    cr_assert_str_eq(out.data, "kept", "%s: out is left as it was", c->name);
    rg_buf_free(&out);
}

Test(advert, output_over_its_cap_fails_too_big)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(16);
    rg_error err = RG_ERROR_INIT;

    write_nul_line(&in, A40 " refs/heads/main", "report-status\n");
    cr_assert_eq(rgit_pktline_flush(&in), 0);
    cr_assert_eq(rgit_advert_filter(&out, in.data, in.len, drop, NULL, &err), RG_E_TOO_BIG);
    cr_assert(strstr(err.msg, "cap") != NULL, "%s", err.msg);
    rg_buf_free(&in);
    rg_buf_free(&out);
}

/* ------------------------------------------- receive-pack from upload-pack */

#define C40 "cccccccccccccccccccccccccccccccccccccccc"
#define A64 A40 "aaaaaaaaaaaaaaaaaaaaaaaa"
#define B64 B40 "bbbbbbbbbbbbbbbbbbbbbbbb"
#define Z64 Z40 "000000000000000000000000"

/* What git 2.39's upload-pack advertises over smart HTTP, before the format. */
#define UPLOAD_CAPS                                                                                \
    "multi_ack thin-pack side-band side-band-64k ofs-delta shallow deepen-since deepen-not "       \
    "deepen-relative no-progress include-tag multi_ack_detailed allow-tip-sha1-in-want "           \
    "allow-reachable-sha1-in-want no-done symref=HEAD:refs/heads/main filter"
#define PUSH_CAPS                                                                                  \
    "report-status delete-refs side-band-64k quiet atomic ofs-delta push-options object-format="

/*
 * One conversion: `in` lines are framed as pkt-lines (after the smart-HTTP
 * preamble and its flush when `preamble` is set, then a flush unless
 * `no_flush`), or `raw` bytes are taken as they are. A `|` in a line
 * stands for the NUL before the capabilities. `msg` NULL: the conversion
 * succeeds with the `want` lines and a flush; else it fails with
 * RG_E_PROTOCOL and a message containing `msg`.
 */
struct push_case {
    const char *name;
    int preamble;
    const char *in[8];
    int no_flush;
    const char *raw;
    size_t raw_len;
    const char *want[8];
    const char *msg;
};

static const struct push_case for_push_cases[] = {
    {"a repository with a HEAD symref and peeled tags",
     1,
     {A40 " HEAD|" UPLOAD_CAPS " object-format=sha1 agent=git/2.39.5\n", A40 " refs/heads/main\n",
      B40 " refs/heads/dev\n", C40 " refs/tags/v1\n", A40 " refs/tags/v1^{}\n",
      B40 " refs/tags/v2\n", C40 " refs/tags/v2^{}\n"},
     0,
     NULL,
     0,
     {A40 " refs/heads/main|" PUSH_CAPS "sha1 agent=refgate/test\n", B40 " refs/heads/dev\n",
      C40 " refs/tags/v1\n", B40 " refs/tags/v2\n"},
     NULL},
    {"names git would refuse are not shown (found by fuzz_advert)",
     1,
     {A40 " HEAD|" UPLOAD_CAPS " object-format=sha1\n", A40 " refs/heads/main\n",
      B40 " refs/tags/v1^{}R\n", B40 " refs/heads/a..b\n", B40 " refs/heads/x.lock\n",
      B40 " refs/heads/sp ace\n", B40 " main\n", C40 " refs/heads/dev\n"},
     0,
     NULL,
     0,
     {A40 " refs/heads/main|" PUSH_CAPS "sha1 agent=refgate/test\n", C40 " refs/heads/dev\n"},
     NULL},
    {"no preamble and no object-format: sha1",
     0,
     {A40 " HEAD|" UPLOAD_CAPS "\n", A40 " refs/heads/main\n"},
     0,
     NULL,
     0,
     {A40 " refs/heads/main|" PUSH_CAPS "sha1 agent=refgate/test\n"},
     NULL},
    {"a sha256 repository",
     1,
     {A64 " HEAD|" UPLOAD_CAPS " object-format=sha256 agent=git/2.45.0\n", A64 " refs/heads/main\n",
      B64 " refs/tags/v1\n", A64 " refs/tags/v1^{}\n"},
     0,
     NULL,
     0,
     {A64 " refs/heads/main|" PUSH_CAPS "sha256 agent=refgate/test\n", B64 " refs/tags/v1\n"},
     NULL},
    {"an unborn HEAD: the capabilities come on the first ref",
     1,
     {A40 " refs/heads/main|" UPLOAD_CAPS " object-format=sha1\n", B40 " refs/heads/dev\n"},
     0,
     NULL,
     0,
     {A40 " refs/heads/main|" PUSH_CAPS "sha1 agent=refgate/test\n", B40 " refs/heads/dev\n"},
     NULL},
    {"an empty repository from git 2.39: preamble and flush",
     1,
     {NULL},
     0,
     NULL,
     0,
     {Z40 " capabilities^{}|" PUSH_CAPS "sha1 agent=refgate/test\n"},
     NULL},
    {"an empty repository: a flush only",
     0,
     {NULL},
     0,
     NULL,
     0,
     {Z40 " capabilities^{}|" PUSH_CAPS "sha1 agent=refgate/test\n"},
     NULL},
    {"an empty sha256 repository from newer git: capabilities^{}",
     1,
     {Z64 " capabilities^{}|" UPLOAD_CAPS " object-format=sha256 agent=git/2.45.0\n"},
     0,
     NULL,
     0,
     {Z64 " capabilities^{}|" PUSH_CAPS "sha256 agent=refgate/test\n"},
     NULL},
    {"a HEAD-only repository (detached HEAD, no refs)",
     1,
     {A40 " HEAD|" UPLOAD_CAPS "\n"},
     0,
     NULL,
     0,
     {Z40 " capabilities^{}|" PUSH_CAPS "sha1 agent=refgate/test\n"},
     NULL},
    {"a version 1 line is dropped",
     1,
     {"version 1\n", A40 " HEAD|" UPLOAD_CAPS "\n", A40 " refs/heads/main\n"},
     0,
     NULL,
     0,
     {A40 " refs/heads/main|" PUSH_CAPS "sha1 agent=refgate/test\n"},
     NULL},
    {"capabilities on a later line are cut",
     0,
     {A40 " HEAD|" UPLOAD_CAPS "\n", A40 " refs/heads/main|push-cert=sneaky\n"},
     0,
     NULL,
     0,
     {A40 " refs/heads/main|" PUSH_CAPS "sha1 agent=refgate/test\n"},
     NULL},
    {"shallow lines follow the refs",
     0,
     {A40 " HEAD|" UPLOAD_CAPS "\n", A40 " refs/heads/main\n", "shallow " B40 "\n"},
     0,
     NULL,
     0,
     {A40 " refs/heads/main|" PUSH_CAPS "sha1 agent=refgate/test\n", "shallow " B40 "\n"},
     NULL},
    {"garbage", 0, {NULL}, 0, S("hello, world"), {NULL}, "pkt-line length"},
    {"an empty answer", 0, {NULL}, 0, S(""), {NULL}, "without a flush"},
    {"a receive-pack advertisement",
     0,
     {NULL},
     0,
     S("001f# service=git-receive-pack\n0000"),
     {NULL},
     "not a git-upload-pack advertisement"},
    {"an ERR line", 0, {NULL}, 0, S("0016ERR access denied\n"), {NULL}, "ERR access denied"},
    {"protocol v2", 0, {NULL}, 0, S("000eversion 2\n0000"), {NULL}, "version 2"},
    {"not a ref line", 0, {"hello world\n"}, 0, NULL, 0, {NULL}, "not a sha1 ref line"},
    {"a ref line without a name", 0, {A40 " |" UPLOAD_CAPS}, 0, NULL, 0, {NULL}, "ref line"},
    {"a sha1 id in a sha256 repository",
     0,
     {A64 " HEAD|object-format=sha256\n", A40 " refs/heads/main\n"},
     0,
     NULL,
     0,
     {NULL},
     "not a sha256 ref line"},
    {"an unknown object format",
     0,
     {A40 " HEAD|object-format=md5\n"},
     0,
     NULL,
     0,
     {NULL},
     "unknown object-format=md5"},
    {"no flush", 1, {A40 " refs/heads/main\n"}, 1, NULL, 0, {NULL}, "without a flush"},
    {"bytes after the flush", 0, {NULL}, 0, S("00000000"), {NULL}, "after the advertisement"},
    {"a delimiter", 0, {NULL}, 0, S("00010000"), {NULL}, "delim"},
};

/* Frame `lines` (NULL-terminated, `|` for NUL) as pkt-lines into `out`. */
static void frame_lines(rg_buf *out, const char *const *lines)
{
    char line[1024];
    size_t i, j, n;

    for (i = 0; lines[i] != NULL; i++) {
        n = strlen(lines[i]);
        cr_assert_lt(n, sizeof(line));
        for (j = 0; j < n; j++)
            line[j] = lines[i][j] == '|' ? '\0' : lines[i][j];
        cr_assert_eq(rgit_pktline_write(out, line, n), 0);
    }
}

ParameterizedTestParameters(advert, for_push)
{
    return case_indexes(NCASES(for_push_cases));
}

ParameterizedTest(size_t *i_case, advert, for_push)
{
    const struct push_case *c = &for_push_cases[*i_case];
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    int rc;

    if (c->raw != NULL) {
        cr_assert_eq(rg_buf_append(&in, c->raw, c->raw_len), 0);
    } else {
        if (c->preamble)
            cr_assert_eq(rg_buf_puts(&in, "001e# service=git-upload-pack\n0000"), 0);
        frame_lines(&in, c->in);
        if (!c->no_flush)
            cr_assert_eq(rgit_pktline_flush(&in), 0);
    }
    cr_assert_eq(rg_buf_puts(&out, "kept"), 0);
    rc = rgit_advert_for_push(&out, in.data ? in.data : "", in.len, "refgate/test", &err);
    if (c->msg != NULL) {
        cr_assert_eq(rc, RG_E_PROTOCOL, "%s: %d %s", c->name, rc, err.msg);
        cr_assert(strstr(err.msg, c->msg) != NULL, "%s: \"%s\" lacks \"%s\"", c->name, err.msg,
                  c->msg);
        cr_assert_str_eq(out.data, "kept", "%s: out is left as it was", c->name);
    } else {
        cr_assert_eq(rc, 0, "%s: %s", c->name, err.msg);
        cr_assert_eq(rg_buf_puts(&want, "kept"), 0);
        frame_lines(&want, c->want);
        cr_assert_eq(rgit_pktline_flush(&want), 0);
        cr_assert_eq(out.len, want.len, "%s: length %zu, want %zu:\n%s", c->name, out.len, want.len,
                     out.data);
        cr_assert_eq(memcmp(out.data, want.data, want.len), 0, "%s: got\n%s\nwant\n%s", c->name,
                     out.data, want.data);
    }
    rg_buf_free(&in);
    rg_buf_free(&out);
    rg_buf_free(&want);
}

Test(advert, built_advertisement_passes_the_filter_unchanged)
{
    rg_buf in = RG_BUF_INIT(1 << 20), built = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rg_buf_puts(&in, "001e# service=git-upload-pack\n0000"), 0);
    write_nul_line(&in, A40 " HEAD", UPLOAD_CAPS " object-format=sha1\n");
    cr_assert_eq(rgit_pktline_printf(&in, "%s refs/heads/main\n", A40), 0);
    cr_assert_eq(rgit_pktline_flush(&in), 0);
    cr_assert_eq(rgit_advert_for_push(&built, in.data, in.len, "refgate/test", &err), 0, "%s",
                 err.msg);
    cr_assert_eq(rgit_advert_filter(&out, built.data, built.len, drop, NULL, &err), 0, "%s",
                 err.msg);
    assert_buf_eq(&out, &built);
    rg_buf_free(&in);
    rg_buf_free(&built);
    rg_buf_free(&out);
}

Test(advert, built_advertisement_over_its_cap_fails_too_big)
{
    rg_buf in = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(16);
    rg_error err = RG_ERROR_INIT;

    write_nul_line(&in, A40 " refs/heads/main", UPLOAD_CAPS "\n");
    cr_assert_eq(rgit_pktline_flush(&in), 0);
    cr_assert_eq(rgit_advert_for_push(&out, in.data, in.len, "refgate/test", &err), RG_E_TOO_BIG);
    cr_assert(strstr(err.msg, "cap") != NULL, "%s", err.msg);
    rg_buf_free(&in);
    rg_buf_free(&out);
}
