/*
 * Tests for policy/plan.c: one push's commands classified and decided,
 * table-driven over the command shapes that matter (create, delete,
 * zero/zero, update whose class a rule does or does not care about, a
 * symbolic ref moving a protected branch) and --atomic.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "policy/plan.h"

#define REPO "local/acme/app"

/* main: no update, force or delete; any branch created; features and
 * `master` fast-forwarded; tags created only. */
static const char RULES[] =
    "{'state_dir': '/tmp/rg-test-plan-state',"
    " 'upstreams': [{'host': 'local', 'url': 'https://git.example.com/'}],"
    " 'rules': ["
    "  {'name': 'protect-main', 'refs': ['refs/heads/main'],"
    "   'actions': ['update', 'force', 'delete'], 'effect': 'deny', 'reason': 'main is protected'},"
    "  {'name': 'create-any', 'refs': ['refs/heads/**'], 'actions': ['create'], 'effect': 'allow'},"
    "  {'name': 'ff', 'refs': ['refs/heads/feature/**', 'refs/heads/master'],"
    "   'actions': ['update'], 'effect': 'allow'},"
    "  {'name': 'any-update', 'refs': ['refs/heads/free/**'], 'actions': ['update', 'force'],"
    "   'effect': 'allow'},"
    "  {'name': 'deletes', 'refs': ['refs/heads/scratch/**'], 'actions': ['delete'],"
    "   'effect': 'allow'}]}";

static config_model *load(void)
{
    char json[sizeof(RULES)];
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    memcpy(json, RULES, sizeof(RULES));
    for (char *p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/rg-test-plan.json", &err), 0, "%s",
                 err.msg);
    return cfg;
}

/* Strings inline: parameters are copied into the test process. */
struct plan_case {
    char what[96];
    char ref[48];
    char moves[48]; /* "" : not symbolic */
    int old_zero, new_zero;
    int ancestry_known, is_ancestor; /* given when the plan asks for ancestry */
    /* expected */
    int needs_ancestry;
    char action[16]; /* policy_plan_action_name after deciding */
    int allowed;
    char rule[16];
};

static struct plan_case cases[] = {
    {"a create of a new branch is allowed", "refs/heads/x", "", 1, 0, 0, 0, 0, "create", 1,
     "create-any"},
    {"a delete of main is denied", "refs/heads/main", "", 0, 1, 0, 0, 0, "delete", 0,
     "protect-main"},
    {"zero/zero on main is a delete, refused", "refs/heads/main", "", 1, 1, 0, 0, 0, "delete", 0,
     "protocol"},
    {"zero/zero where deletes are allowed is still refused", "refs/heads/scratch/a", "", 1, 1, 0, 0,
     0, "delete", 0, "protocol"},
    {"zero/zero is never classified as a create", "refs/heads/new", "", 1, 1, 0, 0, 0, "delete", 0,
     "protocol"},
    {"a delete where allowed is allowed", "refs/heads/scratch/a", "", 0, 1, 0, 0, 0, "delete", 1,
     "deletes"},
    {"a fast-forward of a feature is allowed once ancestry says so", "refs/heads/feature/a", "", 0,
     0, 1, 1, 1, "update", 1, "ff"},
    {"a force of a feature is denied by default", "refs/heads/feature/a", "", 0, 0, 1, 0, 1,
     "force", 0, "default"},
    {"undecidable ancestry counts as a force", "refs/heads/feature/a", "", 0, 0, 0, 0, 1, "force",
     0, "default"},
    {"an update no rule tells from a force needs no pack", "refs/heads/free/a", "", 0, 0, 0, 0, 0,
     "update|force", 1, "any-update"},
    {"an update of main needs no ancestry: denied either way", "refs/heads/main", "", 0, 0, 0, 0, 0,
     "update|force", 0, "protect-main"},
    {"an update of master that moves main is denied without reading the pack", "refs/heads/master",
     "refs/heads/main", 0, 0, 1, 1, 0, "update|force", 0, "protect-main"},
    {"a delete through a symref to main is denied", "refs/heads/master", "refs/heads/main", 0, 1, 0,
     0, 0, "delete", 0, "protect-main"},
    {"a symref to an allowed branch is allowed", "refs/heads/master", "refs/heads/feature/b", 0, 0,
     1, 1, 1, "update", 1, "ff"},
};

ParameterizedTestParameters(plan, table)
{
    return cr_make_param_array(struct plan_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct plan_case *c, plan, table)
{
    config_model *cfg = load();
    policy_plan_ref r = {0};

    r.ref = c->ref;
    r.moves = c->moves[0] ? c->moves : NULL;
    r.old_zero = c->old_zero;
    r.new_zero = c->new_zero;
    cr_expect_eq(policy_plan_classify(&r, cfg, REPO), c->needs_ancestry, "%s: needs ancestry",
                 c->what);
    if (r.needs_ancestry && c->ancestry_known)
        policy_plan_set_ancestry(&r, 1, c->is_ancestor);
    policy_plan_decide(&r, cfg, REPO);
    cr_expect_str_eq(policy_plan_action_name(&r), c->action, "%s: action", c->what);
    cr_expect_eq(r.allowed, c->allowed, "%s: allowed (%s)", c->what, r.decision.reason);
    cr_expect_str_eq(r.decision.rule_name, c->rule, "%s: rule", c->what);
    if (r.moves && !r.allowed)
        cr_expect(strstr(r.decision.reason, "is a symbolic ref to") != NULL, "%s: %s", c->what,
                  r.decision.reason);
    config_free(cfg);
}

Test(plan, atomic_denial_names_the_denied_ref_on_every_allowed_one)
{
    config_model *cfg = load();
    policy_plan_ref a = {.ref = "refs/heads/x", .old_zero = 1};
    policy_plan_ref b = {.ref = "refs/heads/main", .new_zero = 1};

    policy_plan_classify(&a, cfg, REPO);
    policy_plan_classify(&b, cfg, REPO);
    policy_plan_decide(&a, cfg, REPO);
    policy_plan_decide(&b, cfg, REPO);
    cr_assert(a.allowed && !b.allowed);
    policy_plan_deny_atomic(&a, b.ref);
    policy_plan_deny_atomic(&b, b.ref);
    cr_expect(!a.allowed);
    cr_expect_str_eq(a.atomic_ref, "refs/heads/main");
    cr_expect_null(b.atomic_ref, "a ref denied on its own is not an atomic victim");
    config_free(cfg);
}

Test(plan, may_allow_counts_an_update_that_could_turn_out_either_way)
{
    config_model *cfg = load();
    policy_plan_ref f = {.ref = "refs/heads/feature/a"};
    policy_plan_ref m = {.ref = "refs/heads/main"};
    policy_plan_ref z = {.ref = "refs/heads/x", .old_zero = 1, .new_zero = 1};

    policy_plan_classify(&f, cfg, REPO);
    policy_plan_classify(&m, cfg, REPO);
    policy_plan_classify(&z, cfg, REPO);
    cr_expect(policy_plan_may_allow(&f, cfg, REPO));
    cr_expect(!policy_plan_may_allow(&m, cfg, REPO));
    cr_expect(!policy_plan_may_allow(&z, cfg, REPO));
    config_free(cfg);
}
