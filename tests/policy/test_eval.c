/*
 * Tests for policy/eval.c and util/glob.c. Decisions are table-driven:
 * one table of named precedence and reporting cases, and the full cross
 * product of action x selector x effect x default x mode, each against a
 * config parsed from JSON the way the gateway loads it (rules are written
 * with single quotes, which the helper turns into JSON's double quotes). A
 * third table pins the glob dialect down segment by segment.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "policy/eval.h"
#include "util/glob.h"

#define REPO "local/acme/app"
#define MAIN "refs/heads/main"

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

/*
 * A config with two https upstreams (so no directory must exist), the given
 * default ("allow", "deny", "ask", or NULL for none) and rules.
 */
static config_model *config_with(const char *deflt, const char *rules)
{
    char json[8192], def[64] = "";
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    char *p;
    int rc;

    if (deflt != NULL)
        snprintf(def, sizeof(def), "'default': '%s',", deflt);
    snprintf(json, sizeof(json),
             "{'state_dir': '/tmp/rg-test-eval-state', %s"
             " 'upstreams': [{'host': 'local', 'url': 'https://git.example.com/'},"
             "               {'host': 'other', 'url': 'https://other.example.com/'}],"
             " 'rules': [%s]}",
             def, rules);
    for (p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    rc = config_parse(&cfg, json, strlen(json), "/tmp/rg-test-eval.json", &err);
    cr_assert_eq(rc, 0, "config did not parse: %s\n%s", err.msg, json);
    return cfg;
}

/* ---------------------------------------------------------------------------
 * Named cases: precedence, naming, reasons, evaluate mode
 * ------------------------------------------------------------------------- */

/*
 * Parameters are copied into the test process, where pointers into this
 * one would be meaningless (the binary is position-independent), so the
 * strings are held inline. "" stands for "absent" / "not checked".
 */
struct eval_case {
    char what[96]; /* the behaviour the row proves */
    char deflt[8]; /* "" : no "default" key */
    char rules[480];
    char repo[32];
    char ref[32];
    config_action action;
    config_effect effect;
    config_effect rule_effect;
    int rule_index;
    char rule_name[16];
    int matched;
    char reason[256];    /* the exact reason, or "" */
    char reason_has[96]; /* a substring of the reason, or "" */
    int evaluate_matched;
    config_effect evaluate_effect;
    char evaluate_rule_name[16]; /* "": none matched, so NULL */
};

#define ALLOW CONFIG_ALLOW
#define ASK   CONFIG_ASK
#define DENY  CONFIG_DENY

static struct eval_case eval_cases[] = {
    {"deny wins over an earlier allow", "allow",
     "{'name': 'a', 'effect': 'allow'}, {'name': 'd', 'effect': 'deny'}", REPO, MAIN,
     CONFIG_ACTION_UPDATE, DENY, DENY, 1, "d", 2, "", "", 0, ALLOW, ""},
    {"deny wins over a later allow", "allow",
     "{'name': 'd', 'effect': 'deny'}, {'name': 'a', 'effect': 'allow'}", REPO, MAIN,
     CONFIG_ACTION_UPDATE, DENY, DENY, 0, "d", 2, "", "", 0, ALLOW, ""},
    {"ask wins over allow and resolves to deny", "allow",
     "{'name': 'a', 'effect': 'allow'}, {'name': 'q', 'effect': 'ask'}", REPO, MAIN,
     CONFIG_ACTION_FORCE, DENY, ASK, 1, "q", 2, "",
     "rule \"q\" requires approval for force on refs/heads/main, refused until a reviewer", 0,
     ALLOW, ""},
    {"deny wins over ask", "allow",
     "{'name': 'q', 'effect': 'ask'}, {'name': 'd', 'effect': 'deny'}", REPO, MAIN,
     CONFIG_ACTION_FORCE, DENY, DENY, 1, "d", 2, "", "", 0, ALLOW, ""},
    {"the first of several denies names the decision", "allow",
     "{'name': 'first', 'effect': 'deny'}, {'name': 'second', 'effect': 'deny'},"
     "{'name': 'third', 'effect': 'allow'}",
     REPO, MAIN, CONFIG_ACTION_DELETE, DENY, DENY, 0, "first", 3, "", "", 0, ALLOW, ""},
    {"the first of several allows names the decision", "deny",
     "{'name': 'first', 'effect': 'allow'}, {'name': 'second', 'effect': 'allow'}", REPO, MAIN,
     CONFIG_ACTION_CREATE, ALLOW, ALLOW, 0, "first", 2, "", "", 0, ALLOW, ""},
    {"the first of several asks names the decision", "allow",
     "{'name': 'q1', 'effect': 'ask'}, {'name': 'q2', 'effect': 'ask'}", REPO, MAIN,
     CONFIG_ACTION_CREATE, DENY, ASK, 0, "q1", 2, "", "rule \"q1\" requires approval", 0, ALLOW,
     ""},
    {"a deny that does not match leaves the allow", "deny",
     "{'name': 'protect-main', 'refs': ['refs/heads/main'], 'effect': 'deny'},"
     "{'name': 'open', 'effect': 'allow'}",
     REPO, "refs/heads/dev", CONFIG_ACTION_FORCE, ALLOW, ALLOW, 1, "open", 1, "", "", 0, ALLOW, ""},
    {"an unnamed rule is named by its index", "allow",
     "{'name': 'x', 'refs': ['refs/tags/**'], 'effect': 'allow'}, {'effect': 'deny'}", REPO, MAIN,
     CONFIG_ACTION_UPDATE, DENY, DENY, 1, "rules[1]", 1, "", "", 0, ALLOW, ""},
    {"the rule's reason is the reason", "allow",
     "{'name': 'protect-main', 'refs': ['refs/heads/main'], 'effect': 'deny',"
     " 'reason': 'main is protected'}",
     REPO, MAIN, CONFIG_ACTION_FORCE, DENY, DENY, 0, "protect-main", 1, "main is protected", "", 0,
     ALLOW, ""},
    {"a deny without a reason gets one naming rule, action and ref", "allow",
     "{'name': 'protect-main', 'refs': ['refs/heads/main'], 'effect': 'deny'}", REPO, MAIN,
     CONFIG_ACTION_FORCE, DENY, DENY, 0, "protect-main", 1,
     "rule \"protect-main\" denies force on refs/heads/main", "", 0, ALLOW, ""},
    {"an allow without a reason gets one naming rule, action and ref", "deny",
     "{'name': 'open', 'effect': 'allow'}", REPO, "refs/heads/x", CONFIG_ACTION_CREATE, ALLOW,
     ALLOW, 0, "open", 1, "rule \"open\" allows create on refs/heads/x", "", 0, ALLOW, ""},
    {"an ask with a reason says approval is needed and how", "allow",
     "{'name': 'review', 'effect': 'ask', 'reason': 'force pushes need review'}", REPO, MAIN,
     CONFIG_ACTION_FORCE, DENY, ASK, 0, "review", 1,
     "force pushes need review; approval required (rule \"review\"), refused until a reviewer "
     "approves this update (refgate approvals)",
     "", 0, ALLOW, ""},
    {"an ask without a reason says approval is needed and how", "allow",
     "{'name': 'review', 'effect': 'ask'}", REPO, MAIN, CONFIG_ACTION_DELETE, DENY, ASK, 0,
     "review", 1,
     "rule \"review\" requires approval for delete on refs/heads/main, refused until a "
     "reviewer approves this update (refgate approvals)",
     "", 0, ALLOW, ""},
    {"the default deny explains itself", "deny", "", REPO, MAIN, CONFIG_ACTION_DELETE, DENY, DENY,
     -1, "default", 0, "no rule allows delete on refs/heads/main (default: deny)", "", 0, ALLOW,
     ""},
    {"an absent default denies", "", "", REPO, MAIN, CONFIG_ACTION_CREATE, DENY, DENY, -1,
     "default", 0, "no rule allows create on refs/heads/main (default: deny)", "", 0, ALLOW, ""},
    {"the default allow explains itself", "allow", "", REPO, MAIN, CONFIG_ACTION_UPDATE, ALLOW,
     ALLOW, -1, "default", 0, "no rule matches update on refs/heads/main (default: allow)", "", 0,
     ALLOW, ""},
    {"the default ask resolves to deny and says how to get approval", "ask", "", REPO, MAIN,
     CONFIG_ACTION_UPDATE, DENY, ASK, -1, "default", 0,
     "no rule allows update on refs/heads/main (default: ask); approval required, refused "
     "until a reviewer approves this update (refgate approvals)",
     "", 0, ALLOW, ""},
    {"an evaluate-mode deny does not block an allow but is reported", "deny",
     "{'name': 'trial', 'effect': 'deny', 'mode': 'evaluate'}, {'name': 'ok', 'effect': 'allow'}",
     REPO, MAIN, CONFIG_ACTION_FORCE, ALLOW, ALLOW, 1, "ok", 1, "", "", 1, DENY, "trial"},
    {"evaluate-mode rules alone leave the decision to the default", "allow",
     "{'name': 'trial', 'effect': 'deny', 'mode': 'evaluate'}", REPO, MAIN, CONFIG_ACTION_FORCE,
     ALLOW, ALLOW, -1, "default", 0, "", "(default: allow)", 1, DENY, "trial"},
    {"an evaluate-mode allow does not lift an enforced deny", "allow",
     "{'name': 'trial', 'effect': 'allow', 'mode': 'evaluate'}, {'name': 'no', 'effect': 'deny'}",
     REPO, MAIN, CONFIG_ACTION_UPDATE, DENY, DENY, 1, "no", 1, "", "", 1, ALLOW, "trial"},
    {"evaluate-mode rules use the same precedence among themselves", "allow",
     "{'name': 'e1', 'effect': 'allow', 'mode': 'evaluate'},"
     "{'name': 'e2', 'effect': 'ask', 'mode': 'evaluate'},"
     "{'name': 'e3', 'effect': 'deny', 'mode': 'evaluate'},"
     "{'name': 'e4', 'effect': 'deny', 'mode': 'evaluate'}",
     REPO, MAIN, CONFIG_ACTION_UPDATE, ALLOW, ALLOW, -1, "default", 0, "", "", 4, DENY, "e3"},
    {"an evaluate-mode ask is reported as ask", "allow",
     "{'name': 'e', 'effect': 'ask', 'mode': 'evaluate'}", REPO, MAIN, CONFIG_ACTION_UPDATE, ALLOW,
     ALLOW, -1, "default", 0, "", "", 1, ASK, "e"},
    {"an evaluate-mode rule that does not match is not reported", "allow",
     "{'name': 'e', 'refs': ['refs/tags/**'], 'effect': 'deny', 'mode': 'evaluate'}", REPO, MAIN,
     CONFIG_ACTION_UPDATE, ALLOW, ALLOW, -1, "default", 0, "", "", 0, ALLOW, ""},
    {"an enforce-mode rule is enforced", "allow",
     "{'name': 'e', 'effect': 'deny', 'mode': 'enforce'}", REPO, MAIN, CONFIG_ACTION_UPDATE, DENY,
     DENY, 0, "e", 1, "", "", 0, ALLOW, ""},
    {"a repo glob with ** matches nested paths", "allow",
     "{'name': 'r', 'repos': ['local/**'], 'effect': 'deny'}", "local/acme/team/app", MAIN,
     CONFIG_ACTION_UPDATE, DENY, DENY, 0, "r", 1, "", "", 0, ALLOW, ""},
    {"a repo glob with * stays within one segment", "allow",
     "{'name': 'r', 'repos': ['local/*'], 'effect': 'deny'}", REPO, MAIN, CONFIG_ACTION_UPDATE,
     ALLOW, ALLOW, -1, "default", 0, "", "", 0, ALLOW, ""},
    {"a repo glob for another host does not match", "allow",
     "{'name': 'r', 'repos': ['other/**'], 'effect': 'deny'}", REPO, MAIN, CONFIG_ACTION_UPDATE,
     ALLOW, ALLOW, -1, "default", 0, "", "", 0, ALLOW, ""},
    {"any one of several repo globs matches", "allow",
     "{'name': 'r', 'repos': ['other/**', 'local/acme/app'], 'effect': 'deny'}", REPO, MAIN,
     CONFIG_ACTION_UPDATE, DENY, DENY, 0, "r", 1, "", "", 0, ALLOW, ""},
    {"any one of several ref globs matches", "allow",
     "{'name': 'r', 'refs': ['refs/tags/*', 'refs/heads/ma?n'], 'effect': 'deny'}", REPO, MAIN,
     CONFIG_ACTION_UPDATE, DENY, DENY, 0, "r", 1, "", "", 0, ALLOW, ""},
    {"repo and ref globs must both match", "allow",
     "{'name': 'r', 'repos': ['other/**'], 'refs': ['refs/heads/main'], 'effect': 'deny'}", REPO,
     MAIN, CONFIG_ACTION_UPDATE, ALLOW, ALLOW, -1, "default", 0, "", "", 0, ALLOW, ""},
    {"a rule for other actions does not match", "allow",
     "{'name': 'r', 'actions': ['force', 'delete'], 'effect': 'deny'}", REPO, MAIN,
     CONFIG_ACTION_UPDATE, ALLOW, ALLOW, -1, "default", 0, "", "", 0, ALLOW, ""},
    {"a tag rule with ** below refs matches", "allow",
     "{'name': 'tags', 'refs': ['refs/**/v*'], 'actions': ['delete'], 'effect': 'deny'}", REPO,
     "refs/tags/v1.0", CONFIG_ACTION_DELETE, DENY, DENY, 0, "tags", 1, "", "", 0, ALLOW, ""},
    {"no action bit is refused", "allow", "", REPO, MAIN, (config_action)0, DENY, DENY, -1,
     "default", 0, "", "cannot evaluate", 0, ALLOW, ""},
    {"two action bits at once are refused", "allow", "", REPO, MAIN,
     (config_action)(CONFIG_ACTION_CREATE | CONFIG_ACTION_UPDATE), DENY, DENY, -1, "default", 0, "",
     "cannot evaluate", 0, ALLOW, ""},
};

ParameterizedTestParameters(eval, decides_as_the_table_says)
{
    return cr_make_param_array(struct eval_case, eval_cases,
                               sizeof(eval_cases) / sizeof(eval_cases[0]));
}

ParameterizedTest(struct eval_case *c, eval, decides_as_the_table_says)
{
    config_model *cfg = config_with(c->deflt[0] ? c->deflt : NULL, c->rules);
    policy_decision d;

    policy_eval(&d, cfg, c->repo, c->ref, NULL, c->action);
    cr_expect_eq(d.effect, c->effect, "%s: effect %s", c->what, config_effect_name(d.effect));
    cr_expect_eq(d.rule_effect, c->rule_effect, "%s: rule_effect %s", c->what,
                 config_effect_name(d.rule_effect));
    cr_expect_eq(d.rule_index, c->rule_index, "%s: rule_index %d", c->what, d.rule_index);
    cr_expect_str_eq(d.rule_name, c->rule_name, "%s: rule_name %s", c->what, d.rule_name);
    cr_expect_eq(d.matched, c->matched, "%s: matched %d", c->what, d.matched);
    if (c->reason[0] != '\0')
        cr_expect_str_eq(d.reason, c->reason, "%s: reason \"%s\"", c->what, d.reason);
    if (c->reason_has[0] != '\0')
        cr_expect(strstr(d.reason, c->reason_has) != NULL, "%s: reason \"%s\" lacks \"%s\"",
                  c->what, d.reason, c->reason_has);
    cr_expect_eq(d.evaluate_matched, c->evaluate_matched, "%s: evaluate_matched %d", c->what,
                 d.evaluate_matched);
    cr_expect_eq(d.evaluate_effect, c->evaluate_effect, "%s: evaluate_effect %s", c->what,
                 config_effect_name(d.evaluate_effect));
    if (c->evaluate_rule_name[0] == '\0')
        cr_expect_null(d.evaluate_rule_name, "%s: evaluate_rule_name %s", c->what,
                       d.evaluate_rule_name);
    else
        cr_expect_str_eq(d.evaluate_rule_name ? d.evaluate_rule_name : "(null)",
                         c->evaluate_rule_name, "%s: evaluate_rule_name", c->what);
    config_free(cfg);
}

/* ---------------------------------------------------------------------------
 * The cross product: every action x selector x effect x default x mode
 * ------------------------------------------------------------------------- */

static const config_action matrix_actions[] = {
    CONFIG_ACTION_CREATE,
    CONFIG_ACTION_UPDATE,
    CONFIG_ACTION_FORCE,
    CONFIG_ACTION_DELETE,
};

/* How the one rule's selectors relate to the update local/acme/app main. */
enum selector {
    SEL_NONE,        /* no selectors: matches everything */
    SEL_ALL_MATCH,   /* repo glob, ref glob and actions all match */
    SEL_REPO_MISS,   /* the repo glob does not match */
    SEL_REF_MISS,    /* the ref glob does not match */
    SEL_ACTION_MISS, /* the rule lists every action but this one */
    SEL_COUNT,
};

static const char *const selector_names[] = {
    "no selectors", "all selectors match", "repo glob misses", "ref glob misses", "action misses"};

static const config_effect matrix_effects[] = {CONFIG_ALLOW, CONFIG_ASK, CONFIG_DENY};

/* NULL: no "default" key, which must behave as deny. */
static const char *const matrix_defaults[] = {"allow", "deny", "ask", NULL};

static const char *const matrix_modes[] = {"enforce", "evaluate"};

#define N_ACTIONS  (sizeof(matrix_actions) / sizeof(matrix_actions[0]))
#define N_EFFECTS  (sizeof(matrix_effects) / sizeof(matrix_effects[0]))
#define N_DEFAULTS (sizeof(matrix_defaults) / sizeof(matrix_defaults[0]))
#define N_MODES    (sizeof(matrix_modes) / sizeof(matrix_modes[0]))

struct matrix_case {
    size_t action, selector, effect, deflt, mode; /* indexes into the tables above */
};

/*
 * One test per action and selector; each runs every effect x default x
 * mode. (A test process per combination would make the suite slow under
 * the sanitizers for no gain: each check names its combination.)
 */
struct matrix_row {
    size_t action, selector;
};

#define MATRIX_ROWS(a)                                                                             \
    {(a), SEL_NONE}, {(a), SEL_ALL_MATCH}, {(a), SEL_REPO_MISS}, {(a), SEL_REF_MISS},              \
    {                                                                                              \
        (a), SEL_ACTION_MISS                                                                       \
    }

static struct matrix_row matrix_rows[] = {MATRIX_ROWS(0), MATRIX_ROWS(1), MATRIX_ROWS(2),
                                          MATRIX_ROWS(3)};

static void rule_json(char *out, size_t size, const struct matrix_case *c)
{
    config_action action = matrix_actions[c->action];
    char actions[128] = "";
    size_t i;

    if (c->selector == SEL_ACTION_MISS) {
        for (i = 0; i < N_ACTIONS; i++) {
            if (matrix_actions[i] == action)
                continue;
            snprintf(actions + strlen(actions), sizeof(actions) - strlen(actions), "%s'%s'",
                     actions[0] ? ", " : "", config_action_name(matrix_actions[i]));
        }
    } else {
        snprintf(actions, sizeof(actions), "'%s'", config_action_name(action));
    }
    if (c->selector == SEL_NONE)
        snprintf(out, size, "{'name': 'r', 'effect': '%s', 'mode': '%s'}",
                 config_effect_name(matrix_effects[c->effect]), matrix_modes[c->mode]);
    else
        snprintf(out, size,
                 "{'name': 'r', 'repos': ['%s'], 'refs': ['%s'], 'actions': [%s],"
                 " 'effect': '%s', 'mode': '%s'}",
                 c->selector == SEL_REPO_MISS ? "local/other/*" : "local/acme/*",
                 c->selector == SEL_REF_MISS ? "refs/heads/dev" : "refs/heads/ma*", actions,
                 config_effect_name(matrix_effects[c->effect]), matrix_modes[c->mode]);
}

static void check_matrix_case(const struct matrix_case *c)
{
    config_action action = matrix_actions[c->action];
    config_effect rule_effect = matrix_effects[c->effect];
    config_effect deflt = CONFIG_DENY;
    int matches = c->selector == SEL_NONE || c->selector == SEL_ALL_MATCH;
    int evaluate = c->mode == 1;
    char rules[512], what[256];
    config_model *cfg;
    policy_decision d;

    if (matrix_defaults[c->deflt] != NULL)
        deflt = !strcmp(matrix_defaults[c->deflt], "allow") ? CONFIG_ALLOW
                : !strcmp(matrix_defaults[c->deflt], "ask") ? CONFIG_ASK
                                                            : CONFIG_DENY;
    rule_json(rules, sizeof(rules), c);
    snprintf(what, sizeof(what), "%s, %s, rule %s (%s), default %s", config_action_name(action),
             selector_names[c->selector], config_effect_name(rule_effect), matrix_modes[c->mode],
             matrix_defaults[c->deflt] ? matrix_defaults[c->deflt] : "absent");
    cfg = config_with(matrix_defaults[c->deflt], rules);
    policy_eval(&d, cfg, REPO, MAIN, NULL, action);

    if (matches && !evaluate) {
        cr_expect_eq(d.rule_effect, rule_effect, "%s: rule_effect", what);
        cr_expect_eq(d.rule_index, 0, "%s: rule_index %d", what, d.rule_index);
        cr_expect_str_eq(d.rule_name, "r", "%s: rule_name", what);
        cr_expect_eq(d.matched, 1, "%s: matched", what);
    } else {
        cr_expect_eq(d.rule_effect, deflt, "%s: rule_effect", what);
        cr_expect_eq(d.rule_index, -1, "%s: rule_index %d", what, d.rule_index);
        cr_expect_str_eq(d.rule_name, "default", "%s: rule_name", what);
        cr_expect_eq(d.matched, 0, "%s: matched", what);
        cr_expect(strstr(d.reason, "(default: ") != NULL, "%s: reason \"%s\"", what, d.reason);
    }
    /* Ask is refused here (approvals are the gateway's), so only an allow lets the update through.
     */
    cr_expect_eq(d.effect, d.rule_effect == CONFIG_ALLOW ? CONFIG_ALLOW : CONFIG_DENY, "%s: effect",
                 what);
    cr_expect(strstr(d.reason, config_action_name(action)) != NULL, "%s: reason \"%s\"", what,
              d.reason);
    if (d.rule_effect == CONFIG_ASK)
        cr_expect(strstr(d.reason, "refused until a reviewer approves this update") != NULL,
                  "%s: reason \"%s\"", what, d.reason);

    if (matches && evaluate) {
        cr_expect_eq(d.evaluate_matched, 1, "%s: evaluate_matched", what);
        cr_expect_eq(d.evaluate_effect, rule_effect, "%s: evaluate_effect", what);
        cr_expect_str_eq(d.evaluate_rule_name ? d.evaluate_rule_name : "(null)", "r",
                         "%s: evaluate_rule_name", what);
    } else {
        cr_expect_eq(d.evaluate_matched, 0, "%s: evaluate_matched", what);
        cr_expect_null(d.evaluate_rule_name, "%s: evaluate_rule_name", what);
    }
    config_free(cfg);
}

ParameterizedTestParameters(eval, every_action_selector_effect_default_and_mode)
{
    return cr_make_param_array(struct matrix_row, matrix_rows,
                               sizeof(matrix_rows) / sizeof(matrix_rows[0]));
}

ParameterizedTest(struct matrix_row *row, eval, every_action_selector_effect_default_and_mode)
{
    struct matrix_case c = {row->action, row->selector, 0, 0, 0};

    for (c.effect = 0; c.effect < N_EFFECTS; c.effect++)
        for (c.deflt = 0; c.deflt < N_DEFAULTS; c.deflt++)
            for (c.mode = 0; c.mode < N_MODES; c.mode++)
                check_matrix_case(&c);
}

/* ---------------------------------------------------------------------------
 * The run: `runs` selects on the run name a push's token carries
 * ------------------------------------------------------------------------- */

/* A release agent may create tags; other runs, and unknown ones, fall to the default. */
#define RUN_RULES                                                                                  \
    "{'name': 'release-tags', 'refs': ['refs/tags/**'], 'actions': ['create'],"                    \
    " 'runs': ['release-*', 'ci/release/**'], 'effect': 'allow'},"                                 \
    "{'name': 'no-bot-main', 'refs': ['refs/heads/main'], 'runs': ['bot?'], 'effect': 'deny'},"    \
    "{'name': 'main', 'refs': ['refs/heads/main'], 'effect': 'allow'}"

struct run_case {
    char what[96];
    char run[32]; /* "(null)": NULL */
    char ref[32];
    config_action action;
    config_effect effect;
    char rule_name[16];
};

static struct run_case run_cases[] = {
    {"a matching run's allow decides", "release-7", "refs/tags/v1", CONFIG_ACTION_CREATE, ALLOW,
     "release-tags"},
    {"a second pattern of runs matches too", "ci/release/nightly", "refs/tags/v1",
     CONFIG_ACTION_CREATE, ALLOW, "release-tags"},
    {"another run falls to the default", "agent-42", "refs/tags/v1", CONFIG_ACTION_CREATE, DENY,
     "default"},
    {"* in runs stays within a segment", "release-7/x", "refs/tags/v1", CONFIG_ACTION_CREATE, DENY,
     "default"},
    {"an unknown run matches no rule with runs", "(null)", "refs/tags/v1", CONFIG_ACTION_CREATE,
     DENY, "default"},
    {"an empty run is an unknown run", "", "refs/tags/v1", CONFIG_ACTION_CREATE, DENY, "default"},
    {"runs narrows a deny to the runs it names", "bot1", MAIN, CONFIG_ACTION_UPDATE, DENY,
     "no-bot-main"},
    {"a rule without runs matches every run", "bot12", MAIN, CONFIG_ACTION_UPDATE, ALLOW, "main"},
    {"a rule without runs matches an unknown run", "(null)", MAIN, CONFIG_ACTION_UPDATE, ALLOW,
     "main"},
    {"the other selectors still apply with runs", "release-7", "refs/tags/v1", CONFIG_ACTION_DELETE,
     DENY, "default"},
};

ParameterizedTestParameters(eval, runs_select_on_the_run_name)
{
    return cr_make_param_array(struct run_case, run_cases,
                               sizeof(run_cases) / sizeof(run_cases[0]));
}

ParameterizedTest(struct run_case *c, eval, runs_select_on_the_run_name)
{
    config_model *cfg = config_with("deny", RUN_RULES);
    const char *run = strcmp(c->run, "(null)") ? c->run : NULL;
    policy_trace_rule trace[3];
    policy_decision d, t;

    policy_eval(&d, cfg, REPO, c->ref, run, c->action);
    cr_expect_eq(d.effect, c->effect, "%s: effect %s", c->what, config_effect_name(d.effect));
    cr_expect_str_eq(d.rule_name, c->rule_name, "%s: rule %s", c->what, d.rule_name);
    /* The traced evaluation decides the same. */
    policy_eval_trace(&t, trace, 3, cfg, REPO, c->ref, run, c->action);
    cr_expect_eq(t.effect, d.effect, "%s: traced effect", c->what);
    cr_expect_eq(t.rule_index, d.rule_index, "%s: traced rule", c->what);
    cr_expect_str_eq(t.reason, d.reason, "%s: traced reason", c->what);
    config_free(cfg);
}

/* ---------------------------------------------------------------------------
 * Traces: per rule, every selector that failed and the pattern that matched
 * ------------------------------------------------------------------------- */

Test(eval, a_trace_names_every_failed_selector_and_the_matching_patterns)
{
    config_model *cfg = config_with(
        "deny", "{'name': 'a', 'repos': ['other/**', 'local/acme/*'], 'refs': ['refs/tags/*'],"
                " 'actions': ['delete'], 'runs': ['x'], 'effect': 'deny'},"
                "{'name': 'b', 'repos': ['local/**'], 'refs': ['refs/heads/*', 'refs/heads/main'],"
                " 'runs': ['agent-*'], 'effect': 'allow'},"
                "{'name': 'c', 'effect': 'ask', 'mode': 'evaluate'},"
                "{'name': 'd', 'runs': ['agent-1'], 'effect': 'deny'}");
    policy_trace_rule trace[4];
    policy_decision d;

    memset(trace, 0x55, sizeof(trace));
    policy_eval_trace(&d, trace, 4, cfg, REPO, MAIN, "agent-2", CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_ALLOW);
    cr_expect_str_eq(d.rule_name, "b");
    cr_expect_eq(d.matched, 1);
    cr_expect_eq(d.evaluate_matched, 1, "an evaluate-mode rule is traced and reported too");

    cr_expect_eq(trace[0].failed, POLICY_SEL_REF | POLICY_SEL_ACTION | POLICY_SEL_RUN,
                 "every failed selector, not only the first: %#x", trace[0].failed);
    cr_expect_eq(trace[0].repo_glob, 1, "the second repo pattern matched");
    cr_expect_eq(trace[0].ref_glob, -1);
    cr_expect_eq(trace[0].run_glob, -1);

    cr_expect_eq(trace[1].failed, 0u);
    cr_expect_eq(trace[1].repo_glob, 0);
    cr_expect_eq(trace[1].ref_glob, 0, "the first of two matching patterns is named");
    cr_expect_eq(trace[1].run_glob, 0);

    cr_expect_eq(trace[2].failed, 0u);
    cr_expect_eq(trace[2].repo_glob, -1, "an absent selector names no pattern");
    cr_expect_eq(trace[2].ref_glob, -1);
    cr_expect_eq(trace[2].run_glob, -1);

    cr_expect_eq(trace[3].failed, (unsigned)POLICY_SEL_RUN);

    /* Without a run name, every rule with runs fails on it. */
    policy_eval_trace(&d, trace, 4, cfg, REPO, MAIN, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY);
    cr_expect_str_eq(d.rule_name, "default");
    cr_expect(trace[1].failed & POLICY_SEL_RUN);
    cr_expect_eq(trace[2].failed, 0u);
    config_free(cfg);
}

Test(eval, a_short_trace_covers_its_rules_and_the_decision_still_sees_all)
{
    config_model *cfg =
        config_with("allow", "{'name': 'a', 'refs': ['refs/tags/*'], 'effect': 'deny'},"
                             "{'name': 'b', 'effect': 'deny'}");
    policy_trace_rule trace[2];
    policy_decision d;

    memset(trace, 0x55, sizeof(trace));
    policy_eval_trace(&d, trace, 1, cfg, REPO, MAIN, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY);
    cr_expect_str_eq(d.rule_name, "b", "rules past the trace are still evaluated");
    cr_expect_eq(trace[0].failed, (unsigned)POLICY_SEL_REF);
    cr_expect_eq(trace[1].failed, 0x55555555u, "past ntrace nothing is written");
    policy_eval_trace(&d, NULL, 0, cfg, REPO, MAIN, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_str_eq(d.rule_name, "b");
    /* Refused arguments deny without touching the trace. */
    policy_eval_trace(&d, trace, 2, cfg, REPO, NULL, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY);
    cr_expect_eq(trace[1].failed, 0x55555555u);
    config_free(cfg);
}

Test(eval, selector_names)
{
    cr_expect_str_eq(policy_selector_name(POLICY_SEL_REPO), "repo");
    cr_expect_str_eq(policy_selector_name(POLICY_SEL_REF), "ref");
    cr_expect_str_eq(policy_selector_name(POLICY_SEL_ACTION), "action");
    cr_expect_str_eq(policy_selector_name(POLICY_SEL_RUN), "run");
    cr_expect_str_eq(policy_selector_name((policy_selector)0), "unknown");
}

/* ---------------------------------------------------------------------------
 * Edges of the evaluator itself
 * ------------------------------------------------------------------------- */

Test(eval, a_missing_config_repo_or_ref_is_a_deny)
{
    config_model *cfg = config_with("allow", "");
    policy_decision d;

    policy_eval(&d, NULL, REPO, MAIN, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY);
    cr_expect(strstr(d.reason, "no configuration") != NULL, "%s", d.reason);
    policy_eval(&d, cfg, NULL, MAIN, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY);
    policy_eval(&d, cfg, REPO, NULL, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY);
    policy_eval(&d, cfg, "", MAIN, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY, "an empty repo is no repo");
    policy_eval(&d, cfg, REPO, "", NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_DENY, "an empty ref is no ref");
    policy_eval(&d, cfg, REPO, MAIN, NULL, CONFIG_ACTION_UPDATE);
    cr_expect_eq(d.effect, CONFIG_ALLOW);
    config_free(cfg);
}

Test(eval, a_long_ref_is_shortened_at_a_character_boundary_and_the_notice_survives)
{
    config_model *cfg = config_with("ask", "");
    char ref[4096] = "refs/heads/";
    policy_decision d;
    size_t len;

    /* Two-byte characters, so a cut in the wrong place would split one. */
    while (strlen(ref) + 2 < sizeof(ref) - 1)
        strcat(ref, "\xc3\xa9");
    policy_eval(&d, cfg, REPO, ref, NULL, CONFIG_ACTION_CREATE);
    len = strlen(d.reason);
    cr_expect_lt(len, sizeof(d.reason));
    cr_expect(strstr(d.reason, "... (default: ask)") != NULL, "%s", d.reason);
    cr_expect(strstr(d.reason,
                     "refused until a reviewer approves this update (refgate approvals)") != NULL,
              "%s", d.reason);
    /* The byte before "..." ends a whole character. */
    cr_expect_eq((unsigned char)strstr(d.reason, "...")[-1], 0xa9, "%s", d.reason);
    config_free(cfg);
}

Test(eval, the_rule_name_points_into_the_config)
{
    config_model *cfg = config_with("deny", "{'name': 'n', 'effect': 'allow'}");
    policy_decision d;

    policy_eval(&d, cfg, REPO, MAIN, NULL, CONFIG_ACTION_CREATE);
    cr_expect_eq(d.rule_name, cfg->rules[0].name);
    config_free(cfg);
}

/* ---------------------------------------------------------------------------
 * The glob dialect
 * ------------------------------------------------------------------------- */

/* Inline strings, as for eval_case. */
struct glob_case {
    char pattern[64];
    char name[80];
    int match;
};

static struct glob_case glob_cases[] = {
    /* Literals. */
    {"refs/heads/main", "refs/heads/main", 1},
    {"refs/heads/main", "refs/heads/mainx", 0},
    {"refs/heads/main", "refs/heads/Main", 0},
    {"refs/heads/main", "refs/heads", 0},
    {"", "", 1},
    {"", "a", 0},
    /* `*` stays inside one segment. */
    {"refs/heads/*", "refs/heads/main", 1},
    {"refs/heads/*", "refs/heads/a/b", 0},
    {"refs/heads/*", "refs/heads", 0},
    {"refs/heads/*", "refs/heads/", 1},
    {"refs/*/main", "refs/heads/main", 1},
    {"refs/*/main", "refs/a/b/main", 0},
    {"refs/heads/f*", "refs/heads/feature", 1},
    {"refs/heads/f*", "refs/heads/f", 1},
    {"refs/heads/f*", "refs/heads/x/f", 0},
    {"refs/heads/*-wip", "refs/heads/x-wip", 1},
    {"refs/heads/*-wip", "refs/heads/x-wip/y", 0},
    {"refs/heads/*x*y", "refs/heads/axbxcy", 1},
    {"refs/heads/*x*y", "refs/heads/axbxcyz", 0},
    {"*", "refs", 1},
    {"*", "refs/heads", 0},
    {"local/acme/*", "local/acme/app", 1},
    {"local/acme/*", "local/acme/app/sub", 0},
    {"local/*/app", "local/acme/app", 1},
    /* A run of stars inside a segment is one `*`. */
    {"refs/heads/a**", "refs/heads/abc", 1},
    {"refs/heads/a**", "refs/heads/a/b", 0},
    /* `**` as a whole segment: any number of segments, including none. */
    {"refs/heads/**", "refs/heads/a", 1},
    {"refs/heads/**", "refs/heads/a/b/c", 1},
    {"refs/heads/**", "refs/heads", 1},
    {"refs/heads/**", "refs/heads/", 1},
    {"refs/heads/**", "refs/tags/a", 0},
    {"refs/heads/**", "refs/headsx/a", 0},
    {"refs/heads/**", "refs", 0},
    {"refs/**/x", "refs/x", 1},
    {"refs/**/x", "refs/a/x", 1},
    {"refs/**/x", "refs/a/b/x", 1},
    {"refs/**/x", "refs/a/b/xy", 0},
    {"refs/**/x", "refs/a/x/b", 0},
    {"refs/**/x", "refsx/x", 0},
    {"**/main", "refs/heads/main", 1},
    {"**/main", "main", 1},
    {"**/main", "refs/heads/notmain", 0},
    {"**/main", "refs/heads/main/x", 0},
    {"**", "anything/at/all", 1},
    {"**", "", 1},
    {"**/**", "a", 1},
    {"refs/**/**/x", "refs/x", 1},
    {"refs/**/heads/**/x", "refs/heads/x", 1},
    {"refs/**/heads/**/x", "refs/a/heads/b/c/x", 1},
    {"refs/**/heads/**/x", "refs/a/b/c/x", 0},
    {"a/**/b/**/c", "a/b/b/c", 1},
    {"a/**/b/**/c", "a/c/b", 0},
    {"refs/**/v*", "refs/tags/v1.0", 1},
    {"refs/**/v*", "refs/tags/x1.0", 0},
    /* `?` is one character, never a `/`, and a whole UTF-8 sequence. */
    {"refs/heads/?", "refs/heads/a", 1},
    {"refs/heads/?", "refs/heads/ab", 0},
    {"refs/heads/?", "refs/heads/", 0},
    {"refs/heads/a?c", "refs/heads/abc", 1},
    {"refs/heads/a?c", "refs/heads/a/c", 0},
    {"refs/heads/?", "refs/heads/\xc3\xa9", 1},
    {"refs/heads/??", "refs/heads/\xc3\xa9", 0},
    {"refs/heads/caf?", "refs/heads/caf\xc3\xa9", 1},
    {"refs/heads/*?x", "refs/heads/\xc3\xa9x", 1},
    {"refs/heads/*??x", "refs/heads/\xc3\xa9x", 0},
    /* Empty segments are segments like any other. */
    {"refs//x", "refs//x", 1},
    {"refs//x", "refs/x", 0},
    {"refs/x", "refs//x", 0},
    {"refs/*/x", "refs//x", 1},
    {"refs/**/x", "refs//x", 1},
    {"refs/heads/", "refs/heads/", 1},
    {"refs/heads/", "refs/heads", 0},
    {"/refs", "/refs", 1},
    {"/refs", "refs", 0},
    /* Backtracking stays polynomial on hostile input. */
    {"a*a*a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0},
    {"**/a/**/a/**/a/**/a/**/b", "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a", 0},
};

ParameterizedTestParameters(glob, matches_as_the_table_says)
{
    return cr_make_param_array(struct glob_case, glob_cases,
                               sizeof(glob_cases) / sizeof(glob_cases[0]));
}

ParameterizedTest(struct glob_case *c, glob, matches_as_the_table_says)
{
    cr_expect_eq(rg_glob_match(c->pattern, c->name), c->match, "\"%s\" vs \"%s\": expected %s",
                 c->pattern, c->name, c->match ? "a match" : "no match");
}

/*
 * The contract of rg_glob_literal_ends, as policy_eval uses it: checking a
 * name's ends first and matching from `skip` gives the matcher's answer.
 */
static int match_via_ends(const char *pattern, const char *name)
{
    size_t len = strlen(name);
    rg_glob_ends e;

    rg_glob_literal_ends(&e, pattern);
    if (len < e.head || len < e.tail || memcmp(pattern, name, e.head) != 0 ||
        memcmp(pattern + e.tail_at, name + len - e.tail, e.tail) != 0)
        return 0;
    if (e.literal)
        return len == e.head;
    if (e.skip > 0 && len >= e.skip && name[e.skip - 1] == '/')
        return rg_glob_match(pattern + e.skip, name + e.skip);
    return rg_glob_match(pattern, name);
}

ParameterizedTestParameters(glob, literal_ends_never_change_an_answer)
{
    return cr_make_param_array(struct glob_case, glob_cases,
                               sizeof(glob_cases) / sizeof(glob_cases[0]));
}

ParameterizedTest(struct glob_case *c, glob, literal_ends_never_change_an_answer)
{
    cr_expect_eq(match_via_ends(c->pattern, c->name), c->match, "\"%s\" vs \"%s\"", c->pattern,
                 c->name);
}

Test(glob, literal_ends_of_typical_patterns)
{
    rg_glob_ends e;

    rg_glob_literal_ends(&e, "refs/heads/feature-*/**");
    cr_expect_eq(e.head, strlen("refs/heads/feature-"));
    cr_expect_eq(e.skip, strlen("refs/heads/"));
    cr_expect_eq(e.tail, 0u);
    cr_expect_eq(e.literal, 0);
    rg_glob_literal_ends(&e, "refs/**");
    cr_expect_eq(e.head, 4u, "the / before ** may go: refs/** matches refs");
    rg_glob_literal_ends(&e, "**/main");
    cr_expect_eq(e.tail, 4u, "the / after ** may go: **/main matches main");
    cr_expect_str_eq("**/main" + e.tail_at, "main");
    rg_glob_literal_ends(&e, "refs/tags/v?.*.x");
    cr_expect_eq(e.tail, 2u);
    rg_glob_literal_ends(&e, "refs/heads/main");
    cr_expect_eq(e.literal, 1);
}

Test(glob, null_matches_nothing)
{
    cr_expect_eq(rg_glob_match(NULL, "a"), 0);
    cr_expect_eq(rg_glob_match("a", NULL), 0);
    cr_expect_eq(rg_glob_match("**", NULL), 0);
}
