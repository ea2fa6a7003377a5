/*
 * Tests for git/push.c: parsing receive-pack requests as a client sends
 * them (in any chunking, with the pack right behind), refusing malformed or
 * oversized ones, and re-emitting a request with a subset of its commands.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdlib.h>
#include <string.h>

#include "git/pktline.h"
#include "git/push.h"

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
#define C40 "cccccccccccccccccccccccccccccccccccccccc"
#define Z64 Z40 "000000000000000000000000"
#define A64 A40 "aaaaaaaaaaaaaaaaaaaaaaaa"
#define B64 B40 "bbbbbbbbbbbbbbbbbbbbbbbb"

#define GIT_CAPS " report-status side-band-64k quiet atomic ofs-delta agent=git/2.39.5"
#define PACK     "PACK\0\0\0\2\0\0\0\0"
#define PACK_LEN 12

/* ---------------------------------------------------------------------------
 * Helpers
 */

/*
 * Build a request body from pkt-line payloads: "FLUSH", "DELIM" and "EMPTY"
 * (0004) stand for themselves, '|' in a payload stands for NUL. NULL ends.
 */
static void build(rg_buf *out, const char *const *lines)
{
    size_t i, j;

    for (i = 0; lines[i] != NULL; i++) {
        if (strcmp(lines[i], "FLUSH") == 0) {
            cr_assert_eq(rgit_pktline_flush(out), 0);
        } else if (strcmp(lines[i], "DELIM") == 0) {
            cr_assert_eq(rg_buf_puts(out, "0001"), 0);
        } else if (strcmp(lines[i], "EMPTY") == 0) {
            cr_assert_eq(rg_buf_puts(out, "0004"), 0);
        } else {
            char *line = strdup(lines[i]);

            for (j = 0; line[j]; j++)
                if (line[j] == '|')
                    line[j] = '\0';
            cr_assert_eq(rgit_pktline_write(out, line, strlen(lines[i])), 0);
            free(line);
        }
    }
}

/* Feed all of data[0..len) in chunks of `step`; return the final rc. */
static int feed_in_steps(rgit_push_parser *p, const char *data, size_t len, size_t step,
                         size_t *header_len, rg_error *err)
{
    size_t off = 0, used, n;
    int rc = 0;

    *header_len = 0;
    while (off < len) {
        n = len - off < step ? len - off : step;
        rc = rgit_push_parser_feed(p, data + off, n, &used, err);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            cr_assert_leq(used, n);
            *header_len = off + used;
            return 1;
        }
        cr_assert_eq(used, n, "an unfinished header takes every byte");
        off += n;
    }
    return rc;
}

static int parse_all(rgit_push_parser **p, const rg_buf *body, const rgit_push_limits *limits,
                     size_t *header_len, rg_error *err)
{
    cr_assert_eq(rgit_push_parser_new(p, limits), 0);
    return feed_in_steps(*p, body->data, body->len, body->len ? body->len : 1, header_len, err);
}

static void assert_strv_eq(char **a, size_t na, char **b, size_t nb, const char *what)
{
    size_t i;

    cr_assert_eq(na, nb, "%s: %zu vs %zu", what, na, nb);
    for (i = 0; i < na; i++)
        cr_assert_str_eq(a[i], b[i], "%s[%zu]", what, i);
}

static void assert_requests_eq(const rgit_push_request *a, const rgit_push_request *b)
{
    size_t i;

    cr_assert_eq(a->nupdates, b->nupdates);
    for (i = 0; i < a->nupdates; i++) {
        cr_assert_str_eq(a->updates[i].old_id, b->updates[i].old_id);
        cr_assert_str_eq(a->updates[i].new_id, b->updates[i].new_id);
        cr_assert_str_eq(a->updates[i].refname, b->updates[i].refname);
    }
    assert_strv_eq(a->caps, a->ncaps, b->caps, b->ncaps, "caps");
    assert_strv_eq(a->push_options, a->npush_options, b->push_options, b->npush_options,
                   "push options");
    assert_strv_eq(a->shallow, a->nshallow, b->shallow, b->nshallow, "shallow");
    cr_assert_eq(a->oid_hexlen, b->oid_hexlen);
}

/* ---------------------------------------------------------------------------
 * Well-formed requests
 */

Test(push, parses_commands_and_capabilities_as_git_sends_them)
{
    static const char *const lines[] = {
        Z40 " " A40 " refs/heads/new|" GIT_CAPS " object-format=sha1",
        A40 " " B40 " refs/heads/main",
        B40 " " Z40 " refs/tags/old\n",
        "FLUSH",
        NULL,
    };
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    const rgit_push_request *req;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    build(&body, lines);
    cr_assert_eq(rg_buf_append(&body, PACK, PACK_LEN), 0);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_assert_eq(hdr, body.len - PACK_LEN, "consumed stops where the pack starts");
    req = rgit_push_parser_request(p);
    cr_assert_not_null(req);
    cr_assert_eq(req->nupdates, 3);
    cr_assert_str_eq(req->updates[0].old_id, Z40);
    cr_assert_str_eq(req->updates[0].new_id, A40);
    cr_assert_str_eq(req->updates[0].refname, "refs/heads/new");
    cr_assert_str_eq(req->updates[1].refname, "refs/heads/main");
    cr_assert_str_eq(req->updates[2].refname, "refs/tags/old", "one trailing LF is stripped");
    cr_assert(rgit_oid_hex_is_zero(req->updates[2].new_id));
    cr_assert_eq(req->ncaps, 7);
    cr_assert_str_eq(req->caps[0], "report-status");
    cr_assert_str_eq(req->caps[5], "agent=git/2.39.5");
    cr_assert_str_eq(req->caps[6], "object-format=sha1");
    cr_assert(rgit_push_has_cap(req, "side-band-64k"));
    cr_assert(rgit_push_has_cap(req, "agent"));
    cr_assert_not(rgit_push_has_cap(req, "side-band"), "a prefix is not a match");
    cr_assert_not(rgit_push_has_cap(req, "push-options"));
    cr_assert_eq(req->npush_options, 0);
    cr_assert_eq(req->nshallow, 0);
    cr_assert_eq(req->oid_hexlen, 40);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, reads_push_options_after_the_command_list)
{
    static const char *const lines[] = {
        A40 " " B40 " refs/heads/main|report-status push-options",
        "FLUSH",
        "ci.skip\n",
        "reviewer=alice",
        "EMPTY",
        "FLUSH",
        NULL,
    };
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    const rgit_push_request *req;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    build(&body, lines);
    cr_assert_eq(rg_buf_append(&body, PACK, PACK_LEN), 0);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_assert_eq(hdr, body.len - PACK_LEN);
    req = rgit_push_parser_request(p);
    cr_assert_eq(req->npush_options, 3);
    cr_assert_str_eq(req->push_options[0], "ci.skip");
    cr_assert_str_eq(req->push_options[1], "reviewer=alice");
    cr_assert_str_eq(req->push_options[2], "", "git sends 0004 for git push -o ''");
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, without_push_options_cap_what_follows_the_flush_is_pack)
{
    static const char *const lines[] = {
        A40 " " B40 " refs/heads/main|report-status",
        "FLUSH",
        "0009looks-like-option",
        NULL,
    };
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    build(&body, lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_assert_eq(rgit_push_parser_request(p)->npush_options, 0);
    cr_assert_eq(hdr, 4 + strlen(lines[0]) + 4);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, reads_shallow_lines_before_the_commands)
{
    static const char *const lines[] = {
        "shallow " C40 "\n",
        "shallow " B40,
        A40 " " B40 " refs/heads/main| report-status",
        "FLUSH",
        NULL,
    };
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    const rgit_push_request *req;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    build(&body, lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    req = rgit_push_parser_request(p);
    cr_assert_eq(req->nshallow, 2);
    cr_assert_str_eq(req->shallow[0], C40);
    cr_assert_str_eq(req->shallow[1], B40);
    cr_assert_eq(req->nupdates, 1);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, reads_sha256_ids)
{
    static const char *const lines[] = {
        "shallow " B64,
        Z64 " " A64 " refs/heads/topic| report-status object-format=sha256",
        A64 " " Z64 " refs/heads/gone",
        "FLUSH",
        NULL,
    };
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    const rgit_push_request *req;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    build(&body, lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    req = rgit_push_parser_request(p);
    cr_assert_eq(req->oid_hexlen, 64);
    cr_assert_str_eq(req->updates[0].new_id, A64);
    cr_assert(rgit_oid_hex_is_zero(req->updates[0].old_id));
    cr_assert(rgit_oid_hex_is_zero(req->updates[1].new_id));
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, probe_flush_completes_with_zero_updates)
{
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t used = 99;
    const rgit_push_request *req;

    cr_assert_eq(rgit_push_parser_new(&p, NULL), 0);
    cr_assert_null(rgit_push_parser_request(p), "nothing before the header is complete");
    cr_assert_eq(rgit_push_parser_feed(p, "0000", 4, &used, &err), 1, "%s", err.msg);
    cr_assert_eq(used, 4);
    req = rgit_push_parser_request(p);
    cr_assert_not_null(req);
    cr_assert_eq(req->nupdates, 0);
    cr_assert_eq(req->ncaps, 0);
    cr_assert_eq(req->oid_hexlen, 40, "SHA-1 when nothing names an id");
    rgit_push_parser_free(p);
}

Test(push, delete_only_push_needs_no_pack)
{
    static const char *const lines[] = {
        A40 " " Z40 " refs/heads/a| report-status",
        B40 " " Z40 " refs/heads/b",
        "FLUSH",
        NULL,
    };
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    const rgit_push_request *req;
    rg_error err = RG_ERROR_INIT;
    size_t hdr, i;

    build(&body, lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_assert_eq(hdr, body.len, "the whole body is the header");
    req = rgit_push_parser_request(p);
    cr_assert_eq(req->nupdates, 2);
    for (i = 0; i < req->nupdates; i++)
        cr_assert(rgit_oid_hex_is_zero(req->updates[i].new_id));
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, oid_zero_helper)
{
    cr_assert(rgit_oid_hex_is_zero(Z40));
    cr_assert(rgit_oid_hex_is_zero(Z64));
    cr_assert_not(rgit_oid_hex_is_zero(A40));
    cr_assert_not(rgit_oid_hex_is_zero("0000000000000000000000000000000000000001"));
    cr_assert_not(rgit_oid_hex_is_zero(""));
    cr_assert_not(rgit_oid_hex_is_zero(NULL));
}

/* ---------------------------------------------------------------------------
 * Chunking: any split gives the same request and the same header end
 */

static const char *const chunk_lines[] = {
    "shallow " C40,
    Z40 " " A40 " refs/heads/new|" GIT_CAPS " push-options object-format=sha1",
    A40 " " B40 " refs/heads/main\n",
    "FLUSH",
    "ci.skip",
    "FLUSH",
    NULL,
};

ParameterizedTestParameters(push, byte_chunks_give_the_same_result)
{
    static size_t steps[] = {1, 2, 3, 5, 64, 65521};
    return cr_make_param_array(size_t, steps, sizeof(steps) / sizeof(steps[0]));
}

ParameterizedTest(size_t *step, push, byte_chunks_give_the_same_result)
{
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *whole, *chunked;
    rg_error err = RG_ERROR_INIT;
    size_t hdr_whole, hdr_chunked;

    build(&body, chunk_lines);
    cr_assert_eq(rg_buf_append(&body, PACK, PACK_LEN), 0);
    cr_assert_eq(parse_all(&whole, &body, NULL, &hdr_whole, &err), 1, "%s", err.msg);
    cr_assert_eq(rgit_push_parser_new(&chunked, NULL), 0);
    cr_assert_eq(feed_in_steps(chunked, body.data, body.len, *step, &hdr_chunked, &err), 1,
                 "step %zu: %s", *step, err.msg);
    cr_assert_eq(hdr_chunked, hdr_whole, "step %zu", *step);
    cr_assert_eq(hdr_whole, body.len - PACK_LEN);
    assert_requests_eq(rgit_push_parser_request(whole), rgit_push_parser_request(chunked));
    rgit_push_parser_free(whole);
    rgit_push_parser_free(chunked);
    rg_buf_free(&body);
}

Test(push, every_two_way_split_stops_exactly_at_the_pack)
{
    rg_buf body = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    size_t split, used, hdr;
    int rc;

    build(&body, chunk_lines);
    hdr = body.len;
    cr_assert_eq(rg_buf_append(&body, PACK, PACK_LEN), 0);
    for (split = 0; split <= body.len; split++) {
        rgit_push_parser *p;

        cr_assert_eq(rgit_push_parser_new(&p, NULL), 0);
        rc = rgit_push_parser_feed(p, body.data, split, &used, &err);
        if (split < hdr) {
            cr_assert_eq(rc, 0, "split %zu: %s", split, err.msg);
            cr_assert_eq(used, split);
            rc = rgit_push_parser_feed(p, body.data + split, body.len - split, &used, &err);
            cr_assert_eq(rc, 1, "split %zu: %s", split, err.msg);
            cr_assert_eq(split + used, hdr, "split %zu", split);
        } else {
            cr_assert_eq(rc, 1, "split %zu: %s", split, err.msg);
            cr_assert_eq(used, hdr, "split %zu", split);
        }
        cr_assert_eq(rgit_push_parser_feed(p, "PACK", 4, &used, &err), -EINVAL,
                     "no more bytes once complete");
        rgit_push_parser_free(p);
    }
    rg_buf_free(&body);
}

/* ---------------------------------------------------------------------------
 * Malformed requests, table-driven
 */

struct bad_case {
    const char *name;
    const char *lines[6];
    int rc;
    const char *msg; /* a substring of the message */
};

static const struct bad_case rejects_malformed_requests_cases[] = {
    {"not pkt-lines", {"RAW"}, RG_E_PROTOCOL, "pkt-line length"},
    {"delim in command list", {"DELIM"}, RG_E_PROTOCOL, "delim"},
    {"empty packet as command", {"EMPTY"}, RG_E_PROTOCOL, "empty"},
    {"one word", {"hello", "FLUSH"}, RG_E_PROTOCOL, "expected"},
    {"uppercase hex",
     {A40 " "
          "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB refs/heads/x",
      "FLUSH"},
     RG_E_PROTOCOL,
     "expected"},
    {"39-digit id",
     {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa " B40 " refs/heads/x", "FLUSH"},
     RG_E_PROTOCOL,
     "expected"},
    {"no ref name", {A40 " " B40, "FLUSH"}, RG_E_PROTOCOL, "expected"},
    {"ids of mixed lengths", {A40 " " B64 " refs/heads/x", "FLUSH"}, RG_E_PROTOCOL, "expected"},
    {"mixed lengths across commands",
     {A40 " " B40 " refs/heads/x", A64 " " B64 " refs/heads/y", "FLUSH"},
     RG_E_PROTOCOL,
     "mixed"},
    {"shallow sha256, commands sha1",
     {"shallow " A64, A40 " " B40 " refs/heads/x", "FLUSH"},
     RG_E_PROTOCOL,
     "mixed"},
    {"object-format=sha256 with sha1 ids",
     {A40 " " B40 " refs/heads/x|object-format=sha256", "FLUSH"},
     RG_E_PROTOCOL,
     "object-format"},
    {"object-format=sha1 with sha256 ids",
     {A64 " " B64 " refs/heads/x|object-format=sha1", "FLUSH"},
     RG_E_PROTOCOL,
     "object-format"},
    {"unknown object-format",
     {A40 " " B40 " refs/heads/x|object-format=md5", "FLUSH"},
     RG_E_PROTOCOL,
     "unknown"},
    {"caps on a later command",
     {A40 " " B40 " refs/heads/x|quiet", A40 " " B40 " refs/heads/y|atomic", "FLUSH"},
     RG_E_PROTOCOL,
     "after the first"},
    {"shallow after a command",
     {A40 " " B40 " refs/heads/x", "shallow " C40, "FLUSH"},
     RG_E_PROTOCOL,
     "shallow"},
    {"bad shallow id", {"shallow xyz", "FLUSH"}, RG_E_PROTOCOL, "shallow"},
    {"push certificate", {"push-cert|report-status", "FLUSH"}, RG_E_PROTOCOL, "push-cert"},
    {"same ref twice",
     {A40 " " B40 " refs/heads/x", B40 " " C40 " refs/heads/x", "FLUSH"},
     RG_E_PROTOCOL,
     "more than one"},
    {"two NULs", {A40 " " B40 " refs/heads/x|quiet|atomic", "FLUSH"}, RG_E_PROTOCOL, "NUL"},
    {"control byte in a cap",
     {A40 " " B40 " refs/heads/x|quiet\tatomic", "FLUSH"},
     RG_E_PROTOCOL,
     "capability"},
    {"NUL in a push option",
     {A40 " " B40 " refs/heads/x|push-options", "FLUSH", "a|b", "FLUSH"},
     RG_E_PROTOCOL,
     "push option"},
    {"LF in a push option",
     {A40 " " B40 " refs/heads/x|push-options", "FLUSH", "a\nb", "FLUSH"},
     RG_E_PROTOCOL,
     "push option"},
};

ParameterizedTestParameters(push, rejects_malformed_requests)
{
    return case_indexes(NCASES(rejects_malformed_requests_cases));
}

ParameterizedTest(size_t *i_case, push, rejects_malformed_requests)
{
    const struct bad_case *c = &rejects_malformed_requests_cases[*i_case];
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr, used;
    int rc;

    if (strcmp(c->lines[0], "RAW") == 0)
        cr_assert_eq(rg_buf_puts(&body, "GET / HTTP/1.1\r\n"), 0);
    else
        build(&body, c->lines);
    rc = parse_all(&p, &body, NULL, &hdr, &err);
    cr_assert_eq(rc, c->rc, "%s: rc %d (%s)", c->name, rc, err.msg);
    cr_assert(strstr(err.msg, c->msg) != NULL, "%s: message \"%s\" lacks \"%s\"", c->name, err.msg,
              c->msg);
    cr_assert(strncmp(err.msg, "push request: ", 14) == 0, "%s: %s", c->name, err.msg);
    cr_assert_null(rgit_push_parser_request(p));
    cr_assert_eq(rgit_push_parser_feed(p, "0000", 4, &used, &err), c->rc,
                 "%s: a failed parser stays failed", c->name);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

struct ref_case {
    const char *ref;
    int ok;
};

static const struct ref_case checks_ref_names_cases[] = {
    {"refs/heads/main", 1},
    {"refs/heads/feature/x-1.2", 1},
    {"refs/tags/v1.0", 1},
    {"refs/heads/caf\xc3\xa9", 1},
    {"refs/heads/a.b", 1},
    {"refs/for/main%topic=x", 1},
    {"HEAD", 0},
    {"heads/main", 0},
    {"refs/", 0},
    {"refs/heads/", 0},
    {"refs/heads//main", 0},
    {"refs/heads/a..b", 0},
    {"refs/heads/.hidden", 0},
    {"refs/heads/main.lock", 0},
    {"refs/heads/x.lock/y", 0},
    {"refs/heads/main.", 0},
    {"refs/heads/a@{1}", 0},
    {"refs/heads/a b", 0},
    {"refs/heads/a~1", 0},
    {"refs/heads/a^", 0},
    {"refs/heads/a:b", 0},
    {"refs/heads/a?", 0},
    {"refs/heads/*", 0},
    {"refs/heads/[x]", 0},
    {"refs/heads/a\\b", 0},
    {"refs/heads/a\x01", 0},
    {"refs/heads/a\x7f", 0},
};

ParameterizedTestParameters(push, checks_ref_names)
{
    return case_indexes(NCASES(checks_ref_names_cases));
}

ParameterizedTest(size_t *i_case, push, checks_ref_names)
{
    const struct ref_case *c = &checks_ref_names_cases[*i_case];
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    cr_assert_eq(rgit_pktline_printf(&body, "%s %s %s", A40, B40, c->ref), 0);
    cr_assert_eq(rgit_pktline_flush(&body), 0);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), c->ok ? 1 : RG_E_PROTOCOL, "%s: %s",
                 c->ref, err.msg);
    if (!c->ok)
        cr_assert(strstr(err.msg, "bad ref name") != NULL, "%s", err.msg);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

/* ---------------------------------------------------------------------------
 * Limits
 */

Test(push, oversized_header_is_too_big)
{
    rgit_push_limits limits = RGIT_PUSH_LIMITS_INIT;
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr, i;

    limits.max_header_bytes = 1000;
    for (i = 0; i < 20; i++)
        cr_assert_eq(rgit_pktline_printf(&body, "%s %s refs/heads/b%zu", A40, B40, i), 0);
    cr_assert_eq(rgit_pktline_flush(&body), 0);
    cr_assert_eq(parse_all(&p, &body, &limits, &hdr, &err), RG_E_TOO_BIG);
    cr_assert(strstr(err.msg, "over 1000 bytes") != NULL, "%s", err.msg);
    rgit_push_parser_free(p);

    /* Byte by byte, it stops as soon as the cap is passed. */
    cr_assert_eq(rgit_push_parser_new(&p, &limits), 0);
    cr_assert_eq(feed_in_steps(p, body.data, body.len, 1, &hdr, &err), RG_E_TOO_BIG);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, header_of_exactly_the_cap_is_accepted)
{
    rgit_push_limits limits = RGIT_PUSH_LIMITS_INIT;
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    cr_assert_eq(rgit_pktline_printf(&body, "%s %s refs/heads/main", A40, B40), 0);
    cr_assert_eq(rgit_pktline_flush(&body), 0);
    limits.max_header_bytes = body.len;
    cr_assert_eq(rg_buf_append(&body, PACK, PACK_LEN), 0);
    cr_assert_eq(parse_all(&p, &body, &limits, &hdr, &err), 1, "%s", err.msg);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, too_many_updates_is_too_big)
{
    rgit_push_limits limits = RGIT_PUSH_LIMITS_INIT;
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr, i;

    limits.max_updates = 5;
    for (i = 0; i < 5; i++)
        cr_assert_eq(rgit_pktline_printf(&body, "%s %s refs/heads/b%zu", A40, B40, i), 0);
    cr_assert_eq(rgit_pktline_flush(&body), 0);
    cr_assert_eq(parse_all(&p, &body, &limits, &hdr, &err), 1, "five is the limit: %s", err.msg);
    rgit_push_parser_free(p);

    rg_buf_reset(&body);
    for (i = 0; i < 6; i++)
        cr_assert_eq(rgit_pktline_printf(&body, "%s %s refs/heads/b%zu", A40, B40, i), 0);
    cr_assert_eq(rgit_pktline_flush(&body), 0);
    cr_assert_eq(parse_all(&p, &body, &limits, &hdr, &err), RG_E_TOO_BIG);
    cr_assert(strstr(err.msg, "more than 5 commands") != NULL, "%s", err.msg);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

Test(push, too_many_push_options_is_too_big)
{
    rgit_push_limits limits = RGIT_PUSH_LIMITS_INIT;
    rg_buf body = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr, i;

    limits.max_push_options = 2;
    cr_assert_eq(rgit_pktline_printf(&body, "%s %s refs/heads/x%c push-options", A40, B40, 0), 0);
    cr_assert_eq(rgit_pktline_flush(&body), 0);
    for (i = 0; i < 3; i++)
        cr_assert_eq(rgit_pktline_printf(&body, "opt%zu", i), 0);
    cr_assert_eq(rgit_pktline_flush(&body), 0);
    cr_assert_eq(parse_all(&p, &body, &limits, &hdr, &err), RG_E_TOO_BIG);
    cr_assert(strstr(err.msg, "push options") != NULL, "%s", err.msg);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
}

/* ---------------------------------------------------------------------------
 * Writing a subset
 */

Test(push, request_write_keeps_a_subset_and_moves_caps)
{
    static const char *const lines[] = {
        "shallow " C40,
        Z40 " " A40 " refs/heads/denied|" GIT_CAPS " push-options",
        A40 " " B40 " refs/heads/main",
        B40 " " Z40 " refs/heads/old",
        "FLUSH",
        "ci.skip",
        "FLUSH",
        NULL,
    };
    rg_buf body = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p, *q;
    const rgit_push_request *req, *again;
    rg_error err = RG_ERROR_INIT;
    size_t keep[] = {2, 1}, hdr;

    build(&body, lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    req = rgit_push_parser_request(p);
    cr_assert_eq(rgit_push_request_write(&out, req, keep, 2, NULL), 0);

    /* Byte for byte what git's send-pack would have sent for these two. */
    cr_assert_eq(rgit_pktline_printf(&want, "shallow %s\n", C40), 0);
    cr_assert_eq(
        rgit_pktline_printf(&want, "%s %s refs/heads/old%c%s push-options", B40, Z40, 0, GIT_CAPS),
        0);
    cr_assert_eq(rgit_pktline_printf(&want, "%s %s refs/heads/main", A40, B40), 0);
    cr_assert_eq(rgit_pktline_flush(&want), 0);
    cr_assert_eq(rgit_pktline_printf(&want, "ci.skip"), 0);
    cr_assert_eq(rgit_pktline_flush(&want), 0);
    cr_assert_eq(out.len, want.len);
    cr_assert_eq(memcmp(out.data, want.data, out.len), 0, "got %s", out.data);

    /* And it parses back to the same request minus the dropped command. */
    cr_assert_eq(parse_all(&q, &out, NULL, &hdr, &err), 1, "%s", err.msg);
    again = rgit_push_parser_request(q);
    cr_assert_eq(hdr, out.len);
    cr_assert_eq(again->nupdates, 2);
    cr_assert_str_eq(again->updates[0].refname, "refs/heads/old");
    cr_assert_str_eq(again->updates[1].refname, "refs/heads/main");
    assert_strv_eq(again->caps, again->ncaps, req->caps, req->ncaps, "caps");
    assert_strv_eq(again->shallow, again->nshallow, req->shallow, req->nshallow, "shallow");
    assert_strv_eq(again->push_options, again->npush_options, req->push_options, req->npush_options,
                   "push options");
    rgit_push_parser_free(q);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
    rg_buf_free(&out);
    rg_buf_free(&want);
}

Test(push, request_write_all_round_trips)
{
    rg_buf body = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p, *q;
    rg_error err = RG_ERROR_INIT;
    size_t keep[] = {0, 1}, hdr;

    build(&body, chunk_lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_assert_eq(rgit_push_request_write(&out, rgit_push_parser_request(p), keep, 2, NULL), 0);
    cr_assert_eq(parse_all(&q, &out, NULL, &hdr, &err), 1, "%s", err.msg);
    assert_requests_eq(rgit_push_parser_request(p), rgit_push_parser_request(q));
    rgit_push_parser_free(q);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
    rg_buf_free(&out);
}

Test(push, request_write_adds_the_capability_the_gateway_needs_once)
{
    rg_buf body = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p, *q;
    rg_error err = RG_ERROR_INIT;
    size_t keep[] = {0, 1}, hdr;
    const rgit_push_request *req;

    build(&body, chunk_lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    req = rgit_push_parser_request(p);
    cr_assert(!rgit_push_has_cap(req, "delete-refs"), "the fixture must lack it");
    cr_assert_eq(rgit_push_request_write(&out, req, keep, 2, "delete-refs"), 0);
    cr_assert_eq(parse_all(&q, &out, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_expect(rgit_push_has_cap(rgit_push_parser_request(q), "delete-refs"));
    cr_expect_eq(rgit_push_parser_request(q)->ncaps, req->ncaps + 1, "added once, nothing lost");
    rgit_push_parser_free(q);
    /* Already asked for: not added twice. */
    rg_buf_reset(&out);
    cr_assert_eq(rgit_push_request_write(&out, req, keep, 2, "report-status"), 0);
    cr_assert_eq(parse_all(&q, &out, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_expect_eq(rgit_push_parser_request(q)->ncaps, req->ncaps);
    rgit_push_parser_free(q);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
    rg_buf_free(&out);
}

Test(push, request_write_refuses_bad_indexes)
{
    rg_buf body = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t out_of_range[] = {0, 2}, twice[] = {1, 1}, hdr;

    build(&body, chunk_lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_assert_eq(rgit_push_request_write(&out, rgit_push_parser_request(p), out_of_range, 2, NULL),
                 -EINVAL);
    cr_assert_eq(rgit_push_request_write(&out, rgit_push_parser_request(p), twice, 2, NULL),
                 -EINVAL);
    cr_assert_eq(out.len, 0, "nothing is written on failure");
    rgit_push_parser_free(p);
    rg_buf_free(&body);
    rg_buf_free(&out);
}

Test(push, request_write_with_no_command_is_shallow_and_flush)
{
    rg_buf body = RG_BUF_INIT(1 << 20), out = RG_BUF_INIT(1 << 20), want = RG_BUF_INIT(1024);
    rgit_push_parser *p;
    rg_error err = RG_ERROR_INIT;
    size_t hdr;

    build(&body, chunk_lines);
    cr_assert_eq(parse_all(&p, &body, NULL, &hdr, &err), 1, "%s", err.msg);
    cr_assert_eq(rgit_push_request_write(&out, rgit_push_parser_request(p), NULL, 0, NULL), 0);
    cr_assert_eq(rgit_pktline_printf(&want, "shallow %s\n", C40), 0);
    cr_assert_eq(rgit_pktline_flush(&want), 0);
    cr_assert_str_eq(out.data, want.data);
    rgit_push_parser_free(p);
    rg_buf_free(&body);
    rg_buf_free(&out);
    rg_buf_free(&want);
}
