/*
 * Tests for gateway/merge.c: what the client is told and what the audit
 * records for each ref, as a table over every way a ref can end.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <string.h>

#include "gateway/merge.h"

struct merge_case {
    char what[80];
    int forwarded;
    char refusal[64];
    int have_report;   /* upstream answered with a report */
    int listed;        /* the report has a line for the ref */
    char up_error[48]; /* "" : ok */
    char failure[48];  /* why there is no report */
    char error[80];    /* expected ng text, "" for ok */
    char outcome[80];
};

static struct merge_case cases[] = {
    {"denied by policy", 0, "policy: main is protected", 1, 0, "", "", "policy: main is protected",
     "rejected"},
    {"forwarded and ok", 1, "", 1, 1, "", "", "", "forwarded: ok"},
    {"forwarded and refused by a hook", 1, "", 1, 1, "pre-receive hook declined", "",
     "pre-receive hook declined", "forwarded: ng pre-receive hook declined"},
    {"forwarded, upstream silent about it", 1, "", 1, 0, "", "", "upstream: no status for this ref",
     "upstream error: no status for this ref"},
    {"forwarded, upstream failed", 1, "", 0, 0, "", "connection refused",
     "upstream: connection refused", "upstream error: connection refused"},
    {"forwarded, upstream failed with no reason", 1, "", 0, 0, "", "",
     "upstream: upstream gave no report", "upstream error: upstream gave no report"},
    {"control bytes never reach a line", 1, "", 1, 1, "bad\nline\r", "", "bad line ",
     "forwarded: ng bad line "},
};

ParameterizedTestParameters(merge, table)
{
    return cr_make_param_array(struct merge_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct merge_case *c, merge, table)
{
    char ref[] = "refs/heads/x", other[] = "refs/heads/other";
    rgit_ref_status st[2] = {{other, NULL}, {ref, c->up_error[0] ? c->up_error : NULL}};
    rgit_report rep = {.unpack = NULL, .refs = st, .nrefs = c->listed ? 2 : 1};
    gateway_ref_result r = {.refname = ref, .forwarded = c->forwarded, .refusal = c->refusal};

    gateway_merge_ref(&r, c->have_report ? &rep : NULL, c->failure[0] ? c->failure : NULL);
    cr_expect_str_eq(r.error, c->error, "%s", c->what);
    cr_expect_str_eq(r.outcome, c->outcome, "%s", c->what);
}

Test(merge, unpack_is_upstreams_or_the_failure_or_ok)
{
    char unpack[GATEWAY_RESULT_MAX], bad[] = "index-pack abnormal exit";
    rgit_report rep = {.unpack = bad};

    gateway_merge_unpack(unpack, &rep, NULL);
    cr_expect_str_eq(unpack, "index-pack abnormal exit");
    gateway_merge_unpack(unpack, NULL, "connection refused");
    cr_expect_str_eq(unpack, "upstream: connection refused");
    gateway_merge_unpack(unpack, NULL, NULL);
    cr_expect_str_eq(unpack, "ok", "nothing forwarded, nothing failed");
}
