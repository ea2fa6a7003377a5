/*
 * Approvals in the running gateway (gateway/approve.c), the push side: when
 * a ref needs an approval, what resolving it does for a pending, approved
 * (claimed by one push at a time, consumed once it lands, given back
 * otherwise) and denied approval, how long an ask rule holds a push, and
 * the fail-closed answer of a gateway that keeps no approvals; plus the
 * control ops that list, approve and deny. Against a file store and audit
 * log in a temporary state directory.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "gateway/approve.h"
#include "support/gwctx.h"
#include "util/buf.h"
#include "util/fs.h"

#define REPO "local/acme/app"
#define OLD  "1111111111111111111111111111111111111111"
#define NEW  "2222222222222222222222222222222222222222"

static char dir[PATH_MAX];
static config_model *cfg;
static gateway_ctx ctx;

/* Creating main asks, held 30 s; creating a release branch asks without a hold;
 * feature branches are allowed. */
static const char *rules_json =
    "[{\"name\": \"ask-main\", \"refs\": [\"refs/heads/main\"], \"actions\": [\"create\"], "
    "\"effect\": \"ask\", \"hold\": 30},"
    " {\"name\": \"ask-release\", \"refs\": [\"refs/heads/release/*\"], \"actions\": "
    "[\"create\"], \"effect\": \"ask\", \"reason\": \"releases are reviewed\"},"
    " {\"name\": \"features\", \"refs\": [\"refs/heads/feature/*\"], \"actions\": [\"create\"], "
    "\"effect\": \"allow\"}]";

static void setup(void)
{
    char path[PATH_MAX + 32];
    rg_error err = RG_ERROR_INIT;

    snprintf(dir, sizeof(dir), "/tmp/rg-approve-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cfg = test_gw_config(&ctx, dir, rules_json);
    test_gw_audit(&ctx);
    snprintf(path, sizeof(path), "%s/approvals", cfg->state_dir);
    cr_assert_eq(approvals_file_open(&ctx.approvals, path, 3600, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    test_gw_free(&ctx, cfg, dir);
}

TestSuite(approve, .init = setup, .fini = teardown);

/* A ref's plan, classified and decided as a push would. */
static void plan_of(policy_plan_ref *p, const char *ref, const char *old_id)
{
    memset(p, 0, sizeof(*p));
    p->ref = ref;
    p->old_zero = !strcmp(old_id, "0000000000000000000000000000000000000000");
    p->new_zero = 0;
    p->run = "unit";
    policy_plan_classify(p, cfg, REPO);
    policy_plan_decide(p, cfg, REPO);
}

static gateway_approval_push push_of(const char *push_id, const char *ref)
{
    return (gateway_approval_push){
        push_id, "unit", REPO, ref, "0000000000000000000000000000000000000000", NEW};
}

/* Resolve `ref` for push `push_id` into *a (kept across calls as a push keeps it). */
static void resolve(gateway_approval_ref *a, policy_plan_ref *p, const char *push_id,
                    const char *ref)
{
    gateway_approval_push push = push_of(push_id, ref);

    plan_of(p, ref, "0000000000000000000000000000000000000000");
    cr_assert(gateway_approval_needed(p), "%s: needs approval", ref);
    gateway_approval_resolve(a, p, &ctx, &push);
}

static char *audit_text(void)
{
    rg_buf log = RG_BUF_INIT(1 << 20);
    rg_error err = RG_ERROR_INIT;
    char path[PATH_MAX + 32], *s;

    snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
    cr_assert_eq(rg_fs_read_file(&log, path, &err), 0, "%s", err.msg);
    s = strndup(log.data, log.len);
    rg_buf_free(&log);
    return s;
}

Test(approve, only_a_ref_refused_by_an_ask_rule_needs_approval)
{
    policy_plan_ref p;

    plan_of(&p, "refs/heads/main", "0000000000000000000000000000000000000000");
    cr_expect(gateway_approval_needed(&p));
    plan_of(&p, "refs/heads/feature/x", "0000000000000000000000000000000000000000");
    cr_expect(p.allowed);
    cr_expect_not(gateway_approval_needed(&p), "an allowed ref needs nothing");
    plan_of(&p, "refs/heads/other", "0000000000000000000000000000000000000000");
    cr_expect_not(p.allowed);
    cr_expect_not(gateway_approval_needed(&p), "a ref the default denies cannot be approved");
    plan_of(&p, "refs/heads/main", "0000000000000000000000000000000000000000");
    /* As decide_all leaves a ref an atomic push's other denial refused. */
    p.atomic_ref = "refs/heads/other";
    cr_expect_not(gateway_approval_needed(&p), "an atomic push's collateral denial is final");
}

Test(approve, a_first_push_asks_and_is_refused_naming_the_approval)
{
    gateway_approval_ref a = {0}, again = {0};
    policy_plan_ref p;
    char want[64], *log;

    resolve(&a, &p, "push1", "refs/heads/release/1");
    cr_expect_not(p.allowed);
    cr_expect(a.created);
    cr_expect_not(a.approved);
    cr_expect_eq(strlen(a.id), APPROVALS_ID_LEN);
    snprintf(want, sizeof(want), "(approval needed: refgate approve %s)", a.id);
    cr_expect(strstr(p.decision.reason, want) != NULL, "%s", p.decision.reason);
    cr_expect(strstr(p.decision.reason, "releases are reviewed") != NULL, "%s", p.decision.reason);
    cr_expect(gateway_approval_pending(&ctx, a.id));
    /* A second push of the same update waits for the same approval. */
    resolve(&again, &p, "push2", "refs/heads/release/1");
    cr_expect_str_eq(again.id, a.id);
    cr_expect_not(again.created, "asked for by an earlier push, not this one");
    log = audit_text();
    cr_expect(strstr(log, "\"approval-request\"") != NULL, "%s", log);
    free(log);
}

Test(approve, an_approved_update_is_claimed_by_one_push_and_consumed_when_it_lands)
{
    gateway_approval_ref a = {0}, b = {0}, c = {0};
    gateway_approval_push push = push_of("push2", "refs/heads/release/1");
    approvals_entry e;
    rg_error err = RG_ERROR_INIT;
    policy_plan_ref p;
    char *log;

    resolve(&a, &p, "push1", "refs/heads/release/1");
    cr_assert_eq(approvals_approve(ctx.approvals, &e, a.id, "alice", time(NULL), &err), 0, "%s",
                 err.msg);
    cr_expect_not(gateway_approval_pending(&ctx, a.id));

    resolve(&b, &p, "push2", "refs/heads/release/1");
    cr_expect(p.allowed);
    cr_expect(b.approved);
    cr_expect(b.claimed);
    cr_expect(strstr(p.decision.reason, "approved by alice") != NULL, "%s", p.decision.reason);

    /* While push2 holds the claim, push3 of the same update is refused. */
    resolve(&c, &p, "push3", "refs/heads/release/1");
    cr_expect_not(p.allowed);
    cr_expect(strstr(p.decision.reason, "cannot be used now") != NULL, "%s", p.decision.reason);

    gateway_approval_consume(&ctx, &b, &push);
    cr_expect_not(b.claimed);
    log = audit_text();
    cr_expect(strstr(log, "\"approval-consume\"") != NULL, "%s", log);
    free(log);
    /* Used up: the same update asks afresh. */
    memset(&c, 0, sizeof(c));
    resolve(&c, &p, "push4", "refs/heads/release/1");
    cr_expect_not(p.allowed);
    cr_expect_str_neq(c.id, a.id);
}

Test(approve, a_claim_that_did_not_land_is_given_back_for_the_next_push)
{
    gateway_approval_ref a = {0}, b = {0}, c = {0};
    approvals_entry e;
    rg_error err = RG_ERROR_INIT;
    policy_plan_ref p;

    resolve(&a, &p, "push1", "refs/heads/release/2");
    cr_assert_eq(approvals_approve(ctx.approvals, &e, a.id, "alice", time(NULL), &err), 0, "%s",
                 err.msg);
    resolve(&b, &p, "push2", "refs/heads/release/2");
    cr_assert(b.claimed);
    gateway_approval_release(&ctx, &b);
    cr_expect_not(b.claimed);
    resolve(&c, &p, "push3", "refs/heads/release/2");
    cr_expect(p.allowed, "%s", p.decision.reason);
    cr_expect_str_eq(c.id, a.id);
    gateway_approval_release(&ctx, &c);
}

Test(approve, a_denied_approval_refuses_with_who_and_why)
{
    gateway_approval_ref a = {0}, b = {0};
    approvals_entry e;
    rg_error err = RG_ERROR_INIT;
    policy_plan_ref p;

    resolve(&a, &p, "push1", "refs/heads/release/3");
    cr_assert_eq(approvals_deny(ctx.approvals, &e, a.id, "bob", "not this one", time(NULL), &err),
                 0, "%s", err.msg);
    resolve(&b, &p, "push2", "refs/heads/release/3");
    cr_expect_not(p.allowed);
    cr_expect_not(b.approved);
    cr_expect(strstr(p.decision.reason, "was denied by bob: not this one") != NULL, "%s",
              p.decision.reason);
}

Test(approve, without_a_store_an_ask_is_refused_saying_so)
{
    gateway_approval_ref a = {0};
    policy_plan_ref p;
    approvals_store *store = ctx.approvals;

    ctx.approvals = NULL;
    resolve(&a, &p, "push1", "refs/heads/main");
    ctx.approvals = store;
    cr_expect_not(p.allowed);
    cr_expect_eq(a.id[0], '\0');
    cr_expect(strstr(p.decision.reason, "keeps no approvals") != NULL, "%s", p.decision.reason);
}

Test(approve, only_an_ask_rule_with_a_hold_holds_a_push)
{
    policy_plan_ref p;

    memset(&p, 0, sizeof(p));
    p.ref = "refs/heads/main";
    p.old_zero = 1;
    policy_plan_classify(&p, cfg, REPO);
    cr_expect_eq(gateway_approval_hold(&p, cfg, REPO), 30);
    memset(&p, 0, sizeof(p));
    p.ref = "refs/heads/release/1";
    p.old_zero = 1;
    policy_plan_classify(&p, cfg, REPO);
    cr_expect_eq(gateway_approval_hold(&p, cfg, REPO), 0);
    memset(&p, 0, sizeof(p));
    p.ref = "refs/heads/feature/a";
    p.old_zero = 1;
    policy_plan_classify(&p, cfg, REPO);
    cr_expect_eq(gateway_approval_hold(&p, cfg, REPO), 0);
}

Test(approve, control_ops_list_approve_and_deny_and_leave_other_ops_alone)
{
    gateway_approval_ref a = {0}, b = {0};
    gateway_approval_peer peer = {.uid = 1000, .user = "carol", .pid = 42};
    rg_error err = RG_ERROR_INIT;
    policy_plan_ref p;
    json_t *req, *ans = NULL, *list;
    char *log;

    resolve(&a, &p, "push1", "refs/heads/release/4");
    resolve(&b, &p, "push1", "refs/heads/release/5");

    req = json_pack("{s:s}", "op", "approvals");
    cr_assert_eq(gateway_approval_control(&ans, &ctx, &peer, "approvals", req, &err), 1, "%s",
                 err.msg);
    list = json_object_get(ans, "approvals");
    cr_expect_eq(json_array_size(list), 2);
    cr_expect_eq(json_integer_value(json_object_get(ans, "total")), 2);
    json_decref(ans);
    json_decref(req);

    req = json_pack("{s:s, s:s}", "op", "approve", "id", a.id);
    cr_assert_eq(gateway_approval_control(&ans, &ctx, &peer, "approve", req, &err), 1, "%s",
                 err.msg);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(ans, "approval"), "state")),
                     "approved");
    json_decref(ans);
    json_decref(req);

    req = json_pack("{s:s, s:s, s:s}", "op", "deny", "id", b.id, "reason", "no");
    cr_assert_eq(gateway_approval_control(&ans, &ctx, &peer, "deny", req, &err), 1, "%s", err.msg);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(ans, "approval"), "state")),
                     "denied");
    json_decref(ans);
    json_decref(req);

    ans = NULL;
    req = json_pack("{s:s}", "op", "mint");
    cr_expect_eq(gateway_approval_control(&ans, &ctx, &peer, "mint", req, &err), 0);
    cr_expect_null(ans);
    json_decref(req);

    log = audit_text();
    cr_expect(strstr(log, "\"approval-grant\"") != NULL, "%s", log);
    cr_expect(strstr(log, "\"approval-deny\"") != NULL, "%s", log);
    cr_expect(strstr(log, "carol") != NULL, "the peer is named: %s", log);
    free(log);
}
