/*
 * Tests for content conditions in policy/eval.c and policy/plan.c: a rule
 * with conditions matches only when its selectors match and the facts say
 * its conditions hold; unknown facts fail closed (hold for deny and ask,
 * not for allow); a delete brings no content; the reason says what held;
 * a trace without facts says the conditions were assumed; classification
 * asks for inspection exactly when a conditioned rule may match.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <string.h>

#include "policy/eval.h"
#include "policy/plan.h"

static config_model *config_with(const char *deflt, const char *rules)
{
    char json[4096];
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    snprintf(json, sizeof(json),
             "{'state_dir': '/tmp/rg-test-cond-state', 'default': '%s',"
             " 'upstreams': [{'host': 'local', 'url': 'https://git.example.com/'}],"
             " 'rules': [%s]}",
             deflt, rules);
    for (char *p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/rg-test-cond.json", &err), 0,
                 "%s\n%s", err.msg, json);
    return cfg;
}

/* One rule with a condition, over the default of the opposite effect. */
struct cond_case {
    config_effect effect;
    policy_cond answer;
    config_action action;
    int matches; /* the rule decides */
};

#define CASES_FOR(e, m_unknown)                                                                    \
    {e, POLICY_COND_UNKNOWN, CONFIG_ACTION_CREATE, m_unknown},                                     \
        {e, POLICY_COND_HOLDS, CONFIG_ACTION_CREATE, 1},                                           \
        {e, POLICY_COND_FAILS, CONFIG_ACTION_CREATE, 0},                                           \
        {e, POLICY_COND_UNKNOWN, CONFIG_ACTION_UPDATE, m_unknown},                                 \
        {e, POLICY_COND_HOLDS, CONFIG_ACTION_FORCE, 1},                                            \
        {e, POLICY_COND_FAILS, CONFIG_ACTION_UPDATE, 0},                                           \
        {e, POLICY_COND_UNKNOWN, CONFIG_ACTION_DELETE, 0},                                         \
        {e, POLICY_COND_HOLDS, CONFIG_ACTION_DELETE, 0}, /* a delete brings no content */

static struct cond_case cond_cases[] = {CASES_FOR(CONFIG_ALLOW, 0) CASES_FOR(CONFIG_ASK, 1)
                                            CASES_FOR(CONFIG_DENY, 1)};

ParameterizedTestParameters(conditions,
                            a_rule_matches_when_its_conditions_hold_unknown_fails_closed)
{
    return cr_make_param_array(struct cond_case, cond_cases,
                               sizeof(cond_cases) / sizeof(cond_cases[0]));
}

ParameterizedTest(struct cond_case *c, conditions,
                  a_rule_matches_when_its_conditions_hold_unknown_fails_closed)
{
    char rule[256];
    unsigned char answers[1] = {(unsigned char)c->answer};
    const char *why[1] = {"push contains a secret"};
    policy_facts facts = {answers, why};
    policy_decision d;
    config_model *cfg;

    snprintf(rule, sizeof(rule), "{'name': 'r', 'secrets': true, 'effect': '%s'}",
             config_effect_name(c->effect));
    cfg = config_with(c->effect == CONFIG_ALLOW ? "deny" : "allow", rule);
    policy_eval_facts(&d, cfg, "local/acme/app", "refs/heads/x", NULL, c->action, &facts);
    cr_assert_eq(d.rule_index, c->matches ? 0 : -1, "effect %s answer %d action %s",
                 config_effect_name(c->effect), c->answer, config_action_name(c->action));
    if (c->matches && c->answer == POLICY_COND_HOLDS)
        cr_assert(strstr(d.reason, "push contains a secret (rule \"r\")") != NULL, "%s", d.reason);
    /* No facts at all is the same as unknown. */
    if (c->answer == POLICY_COND_UNKNOWN) {
        policy_decision n;

        policy_eval(&n, cfg, "local/acme/app", "refs/heads/x", NULL, c->action);
        cr_assert_eq(n.rule_index, d.rule_index);
    }
    config_free(cfg);
}

Test(conditions, selectors_still_select_and_a_rule_reason_comes_first)
{
    config_model *cfg =
        config_with("allow", "{'name': 'wf', 'refs': ['refs/heads/main'], 'paths': ['.github/**'],"
                             " 'effect': 'deny', 'reason': 'workflows are reviewed'}");
    unsigned char holds[1] = {POLICY_COND_HOLDS};
    const char *why[1] = {"push changes .github/workflows/ci.yml"};
    policy_facts facts = {holds, why};
    policy_decision d;

    policy_eval_facts(&d, cfg, "local/acme/app", "refs/heads/dev", NULL, CONFIG_ACTION_UPDATE,
                      &facts);
    cr_assert_eq(d.rule_index, -1);
    policy_eval_facts(&d, cfg, "local/acme/app", "refs/heads/main", NULL, CONFIG_ACTION_UPDATE,
                      &facts);
    cr_assert_eq(d.effect, CONFIG_DENY);
    cr_assert_str_eq(d.reason, "workflows are reviewed: push changes .github/workflows/ci.yml "
                               "(rule \"wf\")");
    config_free(cfg);
}

Test(conditions, evaluate_mode_rules_use_the_facts_and_name_their_index)
{
    config_model *cfg = config_with(
        "allow", "{'name': 'plain', 'effect': 'allow'},"
                 "{'name': 'trial', 'merge_commits': true, 'effect': 'deny', 'mode': 'evaluate'}");
    unsigned char answers[2] = {0, POLICY_COND_HOLDS};
    policy_facts facts = {answers, NULL};
    policy_decision d;

    policy_eval_facts(&d, cfg, "local/acme/app", "refs/heads/x", NULL, CONFIG_ACTION_UPDATE,
                      &facts);
    cr_assert_eq(d.effect, CONFIG_ALLOW);
    cr_assert_eq(d.evaluate_matched, 1);
    cr_assert_eq(d.evaluate_effect, CONFIG_DENY);
    cr_assert_eq(d.evaluate_rule_index, 1);
    answers[1] = POLICY_COND_FAILS;
    policy_eval_facts(&d, cfg, "local/acme/app", "refs/heads/x", NULL, CONFIG_ACTION_UPDATE,
                      &facts);
    cr_assert_eq(d.evaluate_matched, 0);
    cr_assert_eq(d.evaluate_rule_index, -1);
    config_free(cfg);
}

Test(conditions, a_trace_without_facts_says_the_conditions_were_assumed)
{
    config_model *cfg = config_with("deny", "{'name': 'a', 'secrets': true, 'effect': 'allow'},"
                                            "{'name': 'd', 'secrets': true, 'effect': 'deny'},"
                                            "{'name': 'p', 'effect': 'allow'}");
    policy_trace_rule t[3];
    policy_decision d;

    policy_eval_trace(&d, t, 3, cfg, "local/acme/app", "refs/heads/x", NULL, CONFIG_ACTION_CREATE);
    cr_assert_eq(t[0].conditions, POLICY_COND_UNKNOWN);
    cr_assert_eq(t[0].failed, (unsigned)POLICY_SEL_CONDITIONS);
    cr_assert_eq(t[1].conditions, POLICY_COND_UNKNOWN);
    cr_assert_eq(t[1].failed, 0u);
    cr_assert_eq(t[2].conditions, -1);
    cr_assert_eq(d.rule_index, 1);
    cr_assert_str_eq(policy_selector_name(POLICY_SEL_CONDITIONS), "conditions");
    config_free(cfg);
}

Test(conditions, classify_asks_for_inspection_only_where_a_conditioned_rule_may_match)
{
    config_model *cfg =
        config_with("allow", "{'name': 'wf', 'refs': ['refs/heads/main'], 'actions': ['update'],"
                             " 'paths': ['CODEOWNERS'], 'effect': 'deny'},"
                             "{'name': 'tags', 'refs': ['refs/tags/**'], 'actions': ['create'],"
                             " 'secrets': true, 'effect': 'deny'}");
    policy_plan_ref r;

    /* An update of main: inspected, and its ancestry asked for too. */
    memset(&r, 0, sizeof(r));
    r.ref = "refs/heads/main";
    cr_assert_eq(policy_plan_classify(&r, cfg, "local/acme/app"), 1);
    cr_assert(r.needs_inspection);
    cr_assert(r.needs_ancestry);
    /* Another branch: nothing to read. */
    memset(&r, 0, sizeof(r));
    r.ref = "refs/heads/dev";
    cr_assert_eq(policy_plan_classify(&r, cfg, "local/acme/app"), 0);
    /* Creating a tag: inspected; deleting one: never. */
    memset(&r, 0, sizeof(r));
    r.ref = "refs/tags/v1";
    r.old_zero = 1;
    cr_assert_eq(policy_plan_classify(&r, cfg, "local/acme/app"), 1);
    cr_assert(r.needs_inspection);
    memset(&r, 0, sizeof(r));
    r.ref = "refs/tags/v1";
    r.new_zero = 1;
    cr_assert_eq(policy_plan_classify(&r, cfg, "local/acme/app"), 0);
    /* A symbolic ref is inspected for the ref it moves. */
    memset(&r, 0, sizeof(r));
    r.ref = "refs/heads/HEADLIKE";
    r.moves = "refs/heads/main";
    cr_assert_eq(policy_plan_classify(&r, cfg, "local/acme/app"), 1);
    cr_assert(r.needs_inspection);
    config_free(cfg);
}

Test(conditions, the_plan_decides_with_its_facts)
{
    config_model *cfg =
        config_with("allow", "{'name': 'big', 'max_file_bytes': 5, 'effect': 'deny'}");
    unsigned char answers[1] = {POLICY_COND_FAILS};
    policy_facts facts = {answers, NULL};
    policy_plan_ref r;

    memset(&r, 0, sizeof(r));
    r.ref = "refs/heads/x";
    r.old_zero = 1;
    policy_plan_classify(&r, cfg, "local/acme/app");
    policy_plan_decide(&r, cfg, "local/acme/app");
    cr_assert_not(r.allowed, "unknown content: the deny rule holds");
    r.facts = &facts;
    policy_plan_decide(&r, cfg, "local/acme/app");
    cr_assert(r.allowed);
    config_free(cfg);
}
