/*
 * Tests for git/pktline.c: the special packets, the length limits, bad
 * headers, partial input, the incremental reader and the writers.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdlib.h>
#include <string.h>

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

/* ---------------------------------------------------------------------------
 * Parsing, table-driven
 */

struct parse_case {
    const char *name;
    const char *in;
    size_t len;
    int rc; /* expected return */
    rgit_pktline_type type;
    size_t data_len;
};

#define S(s) s, sizeof(s) - 1

static const struct parse_case parse_table_cases[] = {
    {"flush", S("0000"), 4, RGIT_PKTLINE_FLUSH, 0},
    {"delim", S("0001"), 4, RGIT_PKTLINE_DELIM, 0},
    {"response end", S("0002"), 4, RGIT_PKTLINE_RESPONSE_END, 0},
    {"reserved 0003", S("0003"), RG_E_PROTOCOL, RGIT_PKTLINE_DATA, 0},
    {"empty data 0004", S("0004"), 4, RGIT_PKTLINE_DATA, 0},
    {"data with LF", S("000ahello\n"), 10, RGIT_PKTLINE_DATA, 6},
    {"data without LF", S("0008abcd"), 8, RGIT_PKTLINE_DATA, 4},
    {"uppercase hex", S("000Aabcdef"), 10, RGIT_PKTLINE_DATA, 6},
    {"trailing bytes untouched", S("0005x0000"), 5, RGIT_PKTLINE_DATA, 1},
    {"bad hex", S("00g5x"), RG_E_PROTOCOL, RGIT_PKTLINE_DATA, 0},
    {"space in length", S(" 005x"), RG_E_PROTOCOL, RGIT_PKTLINE_DATA, 0},
    {"65521 over max", S("fff1"), RG_E_PROTOCOL, RGIT_PKTLINE_DATA, 0},
    {"ffff over max", S("ffff"), RG_E_PROTOCOL, RGIT_PKTLINE_DATA, 0},
    {"short: empty", S(""), 0, RGIT_PKTLINE_DATA, 0},
    {"short: 3 of header", S("000"), 0, RGIT_PKTLINE_DATA, 0},
    {"short: half the data", S("000aabc"), 0, RGIT_PKTLINE_DATA, 0},
    {"short: max length header only", S("fff0"), 0, RGIT_PKTLINE_DATA, 0},
};

ParameterizedTestParameters(pktline, parse_table)
{
    return case_indexes(NCASES(parse_table_cases));
}

ParameterizedTest(size_t *i_case, pktline, parse_table)
{
    const struct parse_case *c = &parse_table_cases[*i_case];
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    int rc = rgit_pktline_parse(&pkt, c->in, c->len, &err);

    cr_assert_eq(rc, c->rc, "%s: rc %d, want %d (%s)", c->name, rc, c->rc, err.msg);
    if (rc < 0) {
        cr_assert_eq(err.code, RG_E_PROTOCOL, "%s", c->name);
        cr_assert_neq(err.msg[0], '\0', "%s: an error has a message", c->name);
        return;
    }
    if (rc == 0)
        return;
    cr_assert_eq(pkt.type, c->type, "%s", c->name);
    cr_assert_eq(pkt.len, c->data_len, "%s", c->name);
    if (pkt.type == RGIT_PKTLINE_DATA)
        cr_assert_eq(pkt.data, c->in + 4, "%s: data points into the input", c->name);
    else
        cr_assert_null(pkt.data, "%s", c->name);
}

Test(pktline, max_length_packet_is_accepted)
{
    size_t n = RGIT_PKTLINE_MAX;
    char *buf = malloc(n);
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;

    memcpy(buf, "fff0", 4);
    memset(buf + 4, 'x', n - 4);
    cr_assert_eq(rgit_pktline_parse(&pkt, buf, n, &err), (int)n, "%s", err.msg);
    cr_assert_eq(pkt.type, RGIT_PKTLINE_DATA);
    cr_assert_eq(pkt.len, RGIT_PKTLINE_DATA_MAX);
    /* One byte short is a partial packet, not an error. */
    cr_assert_eq(rgit_pktline_parse(&pkt, buf, n - 1, &err), 0);
    free(buf);
}

Test(pktline, error_message_quotes_bad_bytes)
{
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rgit_pktline_parse(&pkt, "\x01zz\n", 4, &err), RG_E_PROTOCOL);
    cr_assert(strstr(err.msg, "\\x01zz\\x0a") != NULL, "message: %s", err.msg);
}

/* ---------------------------------------------------------------------------
 * Writers
 */

Test(pktline, write_then_parse_round_trips)
{
    rg_buf out = RG_BUF_INIT(1 << 20);
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    size_t off = 0;
    int rc;

    cr_assert_eq(rgit_pktline_write(&out, "hello\n", 6), 0);
    cr_assert_eq(rgit_pktline_printf(&out, "%s %d\n", "n", 42), 0);
    cr_assert_eq(rgit_pktline_flush(&out), 0);
    cr_assert_eq(out.len, 10 + 9 + 4);
    cr_assert_eq(memcmp(out.data, "000ahello\n0009n 42\n0000", out.len), 0, "got %s", out.data);

    rc = rgit_pktline_parse(&pkt, out.data + off, out.len - off, &err);
    cr_assert_eq(rc, 10);
    cr_assert_eq(pkt.len, 6);
    cr_assert_eq(memcmp(pkt.data, "hello\n", 6), 0);
    off += (size_t)rc;
    rc = rgit_pktline_parse(&pkt, out.data + off, out.len - off, &err);
    cr_assert_eq(rc, 9);
    cr_assert_eq(memcmp(pkt.data, "n 42\n", 5), 0);
    off += (size_t)rc;
    rc = rgit_pktline_parse(&pkt, out.data + off, out.len - off, &err);
    cr_assert_eq(rc, 4);
    cr_assert_eq(pkt.type, RGIT_PKTLINE_FLUSH);
    rg_buf_free(&out);
}

Test(pktline, write_max_data_and_refuse_one_more)
{
    rg_buf out = RG_BUF_INIT(1 << 20);
    char *data = calloc(1, RGIT_PKTLINE_DATA_MAX + 1);
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;

    memset(data, 'a', RGIT_PKTLINE_DATA_MAX + 1);
    cr_assert_eq(rgit_pktline_write(&out, data, RGIT_PKTLINE_DATA_MAX), 0);
    cr_assert_eq(out.len, RGIT_PKTLINE_MAX);
    cr_assert_eq(memcmp(out.data, "fff0", 4), 0);
    cr_assert_eq(rgit_pktline_parse(&pkt, out.data, out.len, &err), RGIT_PKTLINE_MAX);
    cr_assert_eq(rgit_pktline_write(&out, data, RGIT_PKTLINE_DATA_MAX + 1), -EINVAL);
    cr_assert_eq(out.len, RGIT_PKTLINE_MAX, "a refused packet writes nothing");
    free(data);
    rg_buf_free(&out);
}

Test(pktline, write_over_buffer_cap_fails_too_big)
{
    rg_buf out = RG_BUF_INIT(8);

    cr_assert_eq(rgit_pktline_write(&out, "0123456789", 10), RG_E_TOO_BIG);
    rg_buf_free(&out);
}

Test(pktline, empty_write_is_0004)
{
    rg_buf out = RG_BUF_INIT(64);

    cr_assert_eq(rgit_pktline_write(&out, "", 0), 0);
    cr_assert_str_eq(out.data, "0004");
    rg_buf_free(&out);
}

/* ---------------------------------------------------------------------------
 * Incremental reader
 */

/* Feed `in` to a reader in chunks of `step`, collecting payloads and types. */
static void read_in_steps(const char *in, size_t len, size_t step, rg_buf *payloads, char *types,
                          size_t *ntypes)
{
    rgit_pktline_reader r;
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    size_t off = 0, used, chunk;
    int rc;

    rgit_pktline_reader_init(&r);
    *ntypes = 0;
    while (off < len) {
        size_t coff = 0;

        chunk = len - off < step ? len - off : step;
        while (coff < chunk) {
            rc = rgit_pktline_reader_next(&pkt, &r, in + off + coff, chunk - coff, &used, &err);
            cr_assert_geq(rc, 0, "%s", err.msg);
            coff += used;
            if (rc == 0) {
                cr_assert_eq(coff, chunk, "0 means every byte was taken");
                break;
            }
            types[(*ntypes)++] = "DFEa"[pkt.type == RGIT_PKTLINE_DATA    ? 0
                                        : pkt.type == RGIT_PKTLINE_FLUSH ? 1
                                        : pkt.type == RGIT_PKTLINE_DELIM ? 2
                                                                         : 3];
            if (pkt.type == RGIT_PKTLINE_DATA) {
                cr_assert_eq(rg_buf_append(payloads, pkt.data, pkt.len), 0);
                cr_assert_eq(rg_buf_append(payloads, "|", 1), 0);
            }
        }
        off += chunk;
    }
    cr_assert_not(rgit_pktline_reader_pending(&r), "a whole stream leaves nothing pending");
}

ParameterizedTestParameters(pktline, reader_chunking)
{
    static size_t steps[] = {1, 2, 3, 4, 5, 7, 13, 1000};
    return cr_make_param_array(size_t, steps, sizeof(steps) / sizeof(steps[0]));
}

ParameterizedTest(size_t *step, pktline, reader_chunking)
{
    static const char in[] = "0009hello0000000cone two\n000100040009world0002";
    rg_buf payloads = RG_BUF_INIT(1024);
    char types[16];
    size_t ntypes;

    read_in_steps(in, sizeof(in) - 1, *step, &payloads, types, &ntypes);
    cr_assert_eq(ntypes, 7, "step %zu: %zu packets", *step, ntypes);
    cr_assert_eq(memcmp(types, "DFDEDDa", 7), 0, "step %zu", *step);
    cr_assert_str_eq(payloads.data, "hello|one two\n||world|", "step %zu", *step);
    rg_buf_free(&payloads);
}

Test(pktline, reader_never_takes_bytes_past_a_packet)
{
    /* A packet split across two chunks, the second carrying foreign bytes. */
    rgit_pktline_reader r;
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    size_t used;

    rgit_pktline_reader_init(&r);
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "00", 2, &used, &err), 0);
    cr_assert_eq(used, 2);
    cr_assert(rgit_pktline_reader_pending(&r));
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "0aabcd", 6, &used, &err), 0);
    cr_assert_eq(used, 6);
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "efPACK", 6, &used, &err), 1);
    cr_assert_eq(used, 2, "only the 2 bytes the packet lacked, not the pack: %zu", used);
    cr_assert_eq(pkt.len, 6);
    cr_assert_eq(memcmp(pkt.data, "abcdef", 6), 0);
    cr_assert_not(rgit_pktline_reader_pending(&r));

    /* A flush whose header straddles chunks takes only its own bytes. */
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "000", 3, &used, &err), 0);
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "0PACK", 5, &used, &err), 1);
    cr_assert_eq(used, 1);
    cr_assert_eq(pkt.type, RGIT_PKTLINE_FLUSH);
}

Test(pktline, reader_rejects_bad_header_split_across_chunks)
{
    rgit_pktline_reader r;
    rgit_pktline pkt;
    rg_error err = RG_ERROR_INIT;
    size_t used;

    rgit_pktline_reader_init(&r);
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "00", 2, &used, &err), 0);
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "03", 2, &used, &err), RG_E_PROTOCOL);
    rgit_pktline_reader_init(&r);
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "ff", 2, &used, &err), 0);
    cr_assert_eq(rgit_pktline_reader_next(&pkt, &r, "f1", 2, &used, &err), RG_E_PROTOCOL);
}

Test(pktline, quote_cuts_long_input_visibly)
{
    char q[16];

    rgit_pktline_quote(q, sizeof(q), "abcdefghijklmnopqrstuvwxyz", 26);
    cr_assert_str_eq(q, "abcdefghijkl...");
    rgit_pktline_quote(q, sizeof(q), "a\nb", 3);
    cr_assert_str_eq(q, "a\\x0ab");
}
