/*
 * Tests for git/advert.c: capabilities the gateway cannot honour are
 * removed from the ref advertisement, everything else passes unchanged, and
 * the smart-HTTP service preamble is written exactly once when asked for.
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
    cr_assert_eq(git_pktline_printf(out, "%s%c%s", first, 0, second), 0);
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
    cr_assert_eq(git_pktline_printf(&in, "%s refs/heads/dev\n", B40), 0);
    cr_assert_eq(git_pktline_printf(&in, "%s .have\n", B40), 0);
    cr_assert_eq(git_pktline_flush(&in), 0);

    write_nul_line(&want, A40 " refs/heads/main", FILTERED_CAPS "\n");
    cr_assert_eq(git_pktline_printf(&want, "%s refs/heads/dev\n", B40), 0);
    cr_assert_eq(git_pktline_printf(&want, "%s .have\n", B40), 0);
    cr_assert_eq(git_pktline_flush(&want), 0);

    cr_assert_eq(git_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
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
    cr_assert_eq(git_pktline_flush(&in), 0);
    write_nul_line(&want, Z40 " capabilities^{}", FILTERED_CAPS "\n");
    cr_assert_eq(git_pktline_flush(&want), 0);

    cr_assert_eq(git_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
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
    cr_assert_eq(git_pktline_flush(&bare), 0);
    cr_assert_str_eq(bare.data + bare.len - 4, "0000");

    cr_assert_eq(rg_buf_puts(&want, "001f# service=git-receive-pack\n0000"), 0);
    write_nul_line(&want, A40 " refs/heads/main", "report-status\n");
    cr_assert_eq(git_pktline_flush(&want), 0);

    /* Local `git receive-pack --advertise-refs` output: preamble added. */
    cr_assert_eq(git_advert_filter(&out, bare.data, bare.len, drop, "git-receive-pack", &err), 0,
                 "%s", err.msg);
    assert_buf_eq(&out, &want);

    /* An upstream HTTP answer already has one: it is replaced, not doubled. */
    cr_assert_eq(rg_buf_puts(&in, "001f# service=git-receive-pack\n0000"), 0);
    cr_assert_eq(rg_buf_append(&in, bare.data, bare.len), 0);
    rg_buf_reset(&out);
    cr_assert_eq(git_advert_filter(&out, in.data, in.len, drop, "git-receive-pack", &err), 0, "%s",
                 err.msg);
    assert_buf_eq(&out, &want);

    /* And dropped when no service is asked for. */
    rg_buf_reset(&out);
    cr_assert_eq(git_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
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

    cr_assert_eq(git_pktline_printf(&in, "version 1\n"), 0);
    write_nul_line(&in, A40 " refs/heads/main", UPSTREAM_CAPS "\n");
    cr_assert_eq(git_pktline_flush(&in), 0);
    cr_assert_eq(git_advert_filter(&out, in.data, in.len, NULL, NULL, &err), 0, "%s", err.msg);
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
    cr_assert_eq(git_pktline_flush(&in), 0);
    write_nul_line(&want, A40 " refs/heads/main", "report-status\n");
    cr_assert_eq(git_pktline_printf(&want, "%s refs/heads/dev\n", B40), 0);
    cr_assert_eq(git_pktline_flush(&want), 0);
    cr_assert_eq(git_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
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
    cr_assert_eq(git_pktline_flush(&in), 0);
    write_nul_line(&want, A40 " refs/heads/main", "");
    cr_assert_eq(git_pktline_flush(&want), 0);
    cr_assert_eq(git_advert_filter(&out, in.data, in.len, drop, NULL, &err), 0, "%s", err.msg);
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
    cr_assert_eq(git_advert_filter(&out, c->in, c->len, drop, "git-receive-pack", &err),
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
    cr_assert_eq(git_pktline_flush(&in), 0);
    cr_assert_eq(git_advert_filter(&out, in.data, in.len, drop, NULL, &err), RG_E_TOO_BIG);
    cr_assert(strstr(err.msg, "cap") != NULL, "%s", err.msg);
    rg_buf_free(&in);
    rg_buf_free(&out);
}
