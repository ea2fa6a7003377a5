/*
 * Tests for policy/lint.c: one table of rule lists and the findings each
 * must give (kind, rule, the other rule named), so every kind of finding is
 * shown to fire and the near misses are shown not to; then the example
 * configs of the repository, which must lint clean.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "policy/lint.h"
#include "tokens/token.h"

/* As in test_eval.c: two https upstreams, single quotes for JSON's double ones. */
static config_model *config_with(const char *rules)
{
    char json[8192];
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    char *p;

    snprintf(json, sizeof(json),
             "{'state_dir': '/tmp/rg-test-lint-state',"
             " 'upstreams': [{'host': 'local', 'url': 'https://git.example.com/'},"
             "               {'host': 'other', 'url': 'https://other.example.com/'}],"
             " 'rules': [%s]}",
             rules);
    for (p = json; *p; p++)
        if (*p == '\'')
            *p = '"';
    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/rg-test-lint.json", &err), 0,
                 "config did not parse: %s\n%s", err.msg, json);
    return cfg;
}

/* Findings as "kind@rule" or "kind@rule/other", space-separated, in order. */
struct collected {
    char text[1024];
    char messages[4096];
    int errors;
};

static void collect(const policy_lint_finding *f, void *arg)
{
    struct collected *c = arg;
    size_t len = strlen(c->text), mlen = strlen(c->messages);

    if (f->other >= 0)
        snprintf(c->text + len, sizeof(c->text) - len, "%s%s@%zu/%d", len ? " " : "",
                 policy_lint_kind_name(f->kind), f->rule, f->other);
    else
        snprintf(c->text + len, sizeof(c->text) - len, "%s%s@%zu", len ? " " : "",
                 policy_lint_kind_name(f->kind), f->rule);
    snprintf(c->messages + mlen, sizeof(c->messages) - mlen, "%s: %s\n",
             policy_lint_level_name(f->level), f->message);
    c->errors += f->level == POLICY_LINT_ERROR;
}

#define R(x) "'reason': 'r'," x /* a rule with a reason, so no-reason stays out of the way */

struct lint_case {
    char what[96];
    char rules[600];
    char findings[128];
    int errors;
    char message_has[96];
};

static struct lint_case lint_cases[] = {
    /* Never matches. */
    {"a wildcard host that no upstream has", "{" R("'repos': ['gh*/acme/app'], 'effect': 'deny'}"),
     "never-matches@0", 1, "no configured upstream host matches \"gh*\""},
    {"one dead repo pattern among live ones",
     "{" R("'repos': ['gh*/acme/app', 'local/acme/app'], 'effect': 'deny'}"), "dead-pattern@0", 0,
     "repos[0] \"gh*/acme/app\" never matches"},
    {"a character repo names never hold", "{" R("'repos': ['local/acme/app@2'], 'effect': 'deny'}"),
     "never-matches@0", 1, "letters, digits"},
    {"a repo segment starting with -", "{" R("'repos': ['local/-x'], 'effect': 'deny'}"),
     "never-matches@0", 1, "'.' or '-'"},
    {"more repo segments than routing takes",
     "{" R("'repos': ['local/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q'], 'effect': 'deny'}"),
     "never-matches@0", 1, "at most 16"},
    {"a one-component ref", "{" R("'refs': ['refs'], 'effect': 'deny'}"), "never-matches@0", 1,
     "at least two components"},
    {"a ref with a space", "{" R("'refs': ['refs/heads/a b'], 'effect': 'deny'}"),
     "never-matches@0", 1, "space"},
    {"a ref with ..", "{" R("'refs': ['refs/heads/a..b'], 'effect': 'deny'}"), "never-matches@0", 1,
     "never hold .."},
    {"a ref with @{", "{" R("'refs': ['refs/heads/@{1}'], 'effect': 'deny'}"), "never-matches@0", 1,
     "@{"},
    {"a ref component ending .lock", "{" R("'refs': ['refs/heads/*.lock'], 'effect': 'deny'}"),
     "never-matches@0", 1, ".lock"},
    {"a ref component starting with .", "{" R("'refs': ['refs/heads/.x*'], 'effect': 'deny'}"),
     "never-matches@0", 1, "starts with '.'"},
    {"a ref ending with .", "{" R("'refs': ['refs/heads/v1.'], 'effect': 'deny'}"),
     "never-matches@0", 1, "end with '.'"},
    {"a run pattern longer than any run name",
     "{" R("'runs': ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa*'], "
           "'effect': 'deny'}"),
     "never-matches@0", 1, "at least 65 characters"},
    {"a run pattern of exactly the longest name is alive",
     "{" R("'runs': ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'], "
           "'effect': 'deny'}"),
     "", 0, ""},
    {"wildcards are not judged as characters",
     "{" R("'repos': ['*/**'], 'refs': ['refs/heads/?*', 'refs/**'], 'effect': 'deny'}"), "", 0,
     ""},
    /* Content conditions: a rule with them may not match, so it shadows nothing. */
    {"a broad deny with conditions shadows no allow",
     "{'secrets': true, 'effect': 'deny'},{'refs': ['refs/heads/feature/*'], 'effect': 'allow'}",
     "", 0, ""},
    {"an allow with conditions inside a broad deny is shadowed",
     "{" R("'effect': 'deny'},") "{'refs': ['refs/heads/x'], 'paths': ['a'], 'effect': 'allow'}",
     "shadowed@1/0", 1, ""},
    /* Shadowed. */
    {"an allow inside a broader deny",
     "{" R("'refs': ['refs/heads/**'], 'effect': 'deny'},") "{'refs': ['refs/heads/feature/*'], "
                                                            "'effect': 'allow'}",
     "shadowed@1/0", 1, "rule \"rules[0]\" (rules[0]) denies every update this rule allows"},
    {"a deny wins wherever it stands",
     "{'refs': ['refs/heads/main'], 'actions': ['update'], 'effect': 'allow'},"
     "{" R("'effect': 'deny'}"),
     "shadowed@0/1", 1, ""},
    {"an ask inside a broader deny",
     "{" R("'refs': ['refs/tags/**'], 'effect': 'deny'},{") R("'refs': ['refs/tags/v*'], 'effect': "
                                                              "'ask'}"),
     "shadowed@1/0", 1, ""},
    {"an allow inside a broader ask",
     "{" R("'effect': 'ask'},") "{'refs': ['refs/tags/v*'], 'effect': 'allow'}", "shadowed@1/0", 1,
     ""},
    {"repos ** covers an absent repos",
     "{" R("'repos': ['**'], 'effect': 'deny'},") "{'effect': "
                                                  "'allow'}",
     "shadowed@1/0", 1, ""},
    {"a deny without runs covers an allow with runs",
     "{" R("'refs': ['refs/tags/*'], 'effect': 'deny'},") "{'refs': ['refs/tags/v1'], 'runs': "
                                                          "['release-*'], 'effect': 'allow'}",
     "shadowed@1/0", 1, ""},
    {"no shadow: the deny is narrower",
     "{" R("'refs': ['refs/heads/main'], 'effect': 'deny'},") "{'refs': ['refs/heads/**'], "
                                                              "'effect': 'allow'}",
     "", 0, ""},
    {"no shadow: the deny's runs leave other runs out",
     "{" R("'runs': ['bot*'], 'effect': 'deny'},") "{'refs': ['refs/heads/x'], 'effect': 'allow'}",
     "", 0, ""},
    {"no shadow: the deny takes fewer actions",
     "{" R("'actions': ['delete'], 'effect': 'deny'},") "{'refs': ['refs/heads/x'], 'effect': "
                                                        "'allow'}",
     "", 0, ""},
    {"no shadow: the deny is another host's",
     "{" R("'repos': ['local/**'], 'effect': 'deny'},") "{'refs': ['refs/heads/x'], 'effect': "
                                                        "'allow'}",
     "", 0, ""},
    {"no shadow across modes",
     "{" R("'effect': 'deny', 'mode': 'evaluate'},") "{'refs': ['refs/heads/x'], 'effect': "
                                                     "'allow'}",
     "", 0, ""},
    {"no shadow from a deny covered by two patterns together",
     "{" R("'refs': ['refs/heads/a*', 'refs/heads/b*'], 'effect': 'deny'},") "{'refs': "
                                                                             "['refs/heads/?'], "
                                                                             "'effect': 'allow'}",
     "", 0, ""},
    {"evaluate-mode rules shadow each other",
     "{" R("'effect': 'deny', 'mode': 'evaluate'},") "{'refs': ['refs/heads/x'], 'effect': "
                                                     "'allow', 'mode': 'evaluate'}",
     "shadowed@1/0", 1, ""},
    /* Duplicates and redundant rules. */
    {"the same deny twice",
     "{" R("'refs': ['refs/heads/main', 'refs/heads/dev'], 'effect': 'deny'},{")
         R("'refs': ['refs/heads/dev', 'refs/heads/main'], 'effect': 'deny'}"),
     "duplicate@1/0", 0, "duplicate of rule \"rules[0]\""},
    {"a deny inside an earlier deny",
     "{" R("'refs': ['refs/heads/**'], 'effect': 'deny'},{") R("'refs': ['refs/heads/main'], "
                                                               "'effect': 'deny'}"),
     "redundant@1/0", 0, "comes first"},
    {"a broader deny after a narrower one is not redundant",
     "{" R("'refs': ['refs/heads/main'], 'effect': 'deny'},{") R("'refs': ['refs/heads/**'], "
                                                                 "'effect': 'deny'}"),
     "", 0, ""},
    /* Reasons. */
    {"a deny without a reason", "{'refs': ['refs/heads/main'], 'effect': 'deny'}", "no-reason@0", 0,
     "denies without a reason"},
    {"an ask without a reason", "{'refs': ['refs/tags/*'], 'effect': 'ask'}", "no-reason@0", 0,
     "asks for approval without a reason"},
    {"an allow needs no reason", "{'refs': ['refs/heads/x'], 'effect': 'allow'}", "", 0, ""},
    {"an evaluate-mode deny needs no reason", "{'effect': 'deny', 'mode': 'evaluate'}", "", 0, ""},
    {"a rule that never matches is not also told to give a reason",
     "{'refs': ['refs'], 'effect': 'deny'}", "never-matches@0", 1, ""},
};

ParameterizedTestParameters(lint, finds_what_the_table_says)
{
    return cr_make_param_array(struct lint_case, lint_cases,
                               sizeof(lint_cases) / sizeof(lint_cases[0]));
}

ParameterizedTest(struct lint_case *c, lint, finds_what_the_table_says)
{
    config_model *cfg = config_with(c->rules);
    struct collected got = {"", "", 0};
    size_t n = policy_lint(cfg, collect, &got);

    cr_expect_str_eq(got.text, c->findings, "%s: got \"%s\"\n%s", c->what, got.text, got.messages);
    cr_expect_eq(got.errors, c->errors, "%s: %d errors\n%s", c->what, got.errors, got.messages);
    cr_expect_eq(n, (size_t)(got.text[0] ? 1 + (strchr(got.text, ' ') != NULL) : 0),
                 "%s: the count matches the calls", c->what);
    if (c->message_has[0] != '\0')
        cr_expect(strstr(got.messages, c->message_has) != NULL, "%s: \"%s\" not in\n%s", c->what,
                  c->message_has, got.messages);
    config_free(cfg);
}

Test(lint, the_run_limit_is_the_tokens_one)
{
    cr_expect_eq(POLICY_LINT_RUN_MAX, TOKENS_RUN_MAX);
}

Test(lint, names_and_null)
{
    cr_expect_eq(policy_lint(NULL, collect, NULL), 0u);
    cr_expect_str_eq(policy_lint_kind_name(POLICY_LINT_NO_REASON), "no-reason");
    cr_expect_str_eq(policy_lint_level_name(POLICY_LINT_ERROR), "error");
    cr_expect_str_eq(policy_lint_level_name(POLICY_LINT_WARNING), "warning");
}

/* The example configs must lint clean: a linter that cries wolf is switched off. */
Test(lint, the_example_config_lints_clean)
{
    const char *src = getenv("REFGATE_SRC");
    char path[4096], *json = NULL, *at;
    size_t len = 0;
    FILE *f;
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    struct collected got = {"", "", 0};
    /* Of equal length, so the file's text is replaced in place. */
    static const char from[] = "file:///srv/git", to[] = "https://gitx.io";

    cr_assert_not_null(src, "REFGATE_SRC is set by ctest");
    snprintf(path, sizeof(path), "%s/deploy/refgate.example.json", src);
    f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(getdelim(&json, &len, '\0', f) > 0, 1);
    fclose(f);
    /* Its local upstream directory need not exist here. */
    at = strstr(json, from);
    cr_assert_not_null(at);
    _Static_assert(sizeof(from) == sizeof(to), "replaced in place");
    memcpy(at, to, sizeof(to) - 1);
    cr_assert_eq(config_parse(&cfg, json, strlen(json), path, &err), 0, "%s", err.msg);
    cr_expect_eq(policy_lint(cfg, collect, &got), 0u, "%s", got.messages);
    config_free(cfg);
    free(json);
}
