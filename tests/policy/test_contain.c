/*
 * Tests for policy/contain.c: a table of containments that must be
 * certain, and of ones that are false or not provable (0), then a brute
 * check of soundness: whenever the function says 1, every name of a fixed
 * list that the narrow pattern matches is matched by the broad one.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <string.h>

#include "policy/contain.h"
#include "util/glob.h"

struct contain_case {
    char broad[48];
    char narrow[48];
    int contains;
};

static struct contain_case contain_cases[] = {
    /* Equal, and everything within **. */
    {"refs/heads/main", "refs/heads/main", 1},
    {"**", "refs/heads/main", 1},
    {"**", "refs/**", 1},
    {"**", "**", 1},
    {"refs/**", "refs/heads/**", 1},
    {"refs/**", "refs", 1},
    /* One segment's *. */
    {"refs/heads/*", "refs/heads/main", 1},
    {"refs/heads/*", "refs/heads/feat-*", 1},
    {"refs/heads/*", "refs/heads/?", 1},
    {"refs/heads/*", "refs/heads/**", 0},
    {"refs/heads/*", "refs/heads/a/b", 0},
    {"refs/heads/*", "refs/heads", 0},
    {"refs/heads/f*", "refs/heads/*", 0},
    {"refs/heads/*-x", "refs/heads/a*-x", 1},
    {"refs/heads/*-x", "refs/heads/a*x", 0},
    {"refs/heads/a*", "refs/heads/ab*c", 1},
    {"refs/heads/*b*", "refs/heads/a?b*", 1},
    {"refs/heads/*b", "refs/heads/*", 0},
    /* ?. */
    {"refs/heads/?", "refs/heads/a", 1},
    {"refs/heads/?", "refs/heads/?", 1},
    {"refs/heads/?", "refs/heads/*", 0},
    {"refs/heads/?", "refs/heads/ab", 0},
    {"refs/heads/*c", "refs/heads/a?c", 1},
    {"refs/heads/a", "refs/heads/?", 0},
    /* **. */
    {"refs/heads/**", "refs/heads/*", 1},
    {"refs/heads/**", "refs/heads", 1},
    {"refs/heads/**", "refs/heads/a/**/b", 1},
    {"refs/**/v*", "refs/tags/v1*", 1},
    {"refs/**/v*", "refs/tags/x", 0},
    {"**/main", "refs/**/main", 1},
    {"refs/*/main", "refs/**/main", 0},
    {"refs/tags/*", "refs/tags/**", 0},
    {"refs/heads/**/x", "refs/heads/**", 0},
    {"local/**", "other/**", 0},
    {"*/acme/**", "local/acme/app", 1},
    /* Beyond ASCII: literal names are matched, wildcards are not guessed at. */
    {"refs/heads/?", "refs/heads/\xc3\xa9", 1},
    {"refs/heads/*\xc3\xa9", "refs/heads/?\xc3\xa9", 0},
};

ParameterizedTestParameters(contain, decides_as_the_table_says)
{
    return cr_make_param_array(struct contain_case, contain_cases,
                               sizeof(contain_cases) / sizeof(contain_cases[0]));
}

ParameterizedTest(struct contain_case *c, contain, decides_as_the_table_says)
{
    cr_expect_eq(policy_glob_contains(c->broad, c->narrow), c->contains, "\"%s\" contains \"%s\"",
                 c->broad, c->narrow);
}

Test(contain, null_and_too_many_segments_are_not_certain)
{
    char deep[400] = "refs";
    int i;

    cr_expect_eq(policy_glob_contains(NULL, "refs/x"), 0);
    cr_expect_eq(policy_glob_contains("**", NULL), 0);
    for (i = 0; i < POLICY_CONTAIN_MAX_SEGMENTS + 1; i++)
        strcat(deep, "/a");
    cr_expect_eq(policy_glob_contains("**", deep), 0);
    cr_expect_eq(policy_glob_contains(deep, deep), 1, "equal patterns need no splitting");
}

/* Every pattern against every other: a 1 must hold on every name listed. */
Test(contain, a_certain_answer_holds_on_every_name)
{
    static const char *const patterns[] = {
        "**",
        "refs/**",
        "refs/heads/**",
        "refs/heads/*",
        "refs/heads/main",
        "refs/heads/m*",
        "refs/heads/*n",
        "refs/heads/?ain",
        "refs/heads/*/*",
        "refs/*/main",
        "refs/**/main",
        "**/main",
        "refs/tags/v*",
        "refs/**/v*",
        "refs/tags/v?.*",
        "refs/heads/a*b*c",
        "refs/heads/*b*",
        "refs/heads/??",
        "refs/heads/**/x",
        "refs",
    };
    static const char *const names[] = {
        "refs",           "refs/heads",        "refs/heads/main",
        "refs/heads/man", "refs/heads/main/x", "refs/heads/x",
        "refs/heads/a/x", "refs/tags/v1",      "refs/tags/v1.0",
        "refs/tags/main", "refs/heads/abc",    "refs/heads/aXbYc",
        "refs/heads/bb",  "refs/heads/n",      "refs/x/y/main",
        "main",           "refs/heads/",       "refs/heads/ab",
        "refs/tags/v",    "x/refs/heads/main",
    };
    size_t a, b, n, certain = 0;

    for (a = 0; a < sizeof(patterns) / sizeof(patterns[0]); a++) {
        for (b = 0; b < sizeof(patterns) / sizeof(patterns[0]); b++) {
            if (!policy_glob_contains(patterns[a], patterns[b]))
                continue;
            certain++;
            for (n = 0; n < sizeof(names) / sizeof(names[0]); n++)
                cr_expect(!rg_glob_match(patterns[b], names[n]) ||
                              rg_glob_match(patterns[a], names[n]),
                          "\"%s\" said to contain \"%s\", but \"%s\" matches only the latter",
                          patterns[a], patterns[b], names[n]);
        }
    }
    /* Not vacuous: well beyond the diagonal. */
    cr_expect_gt(certain, 2 * sizeof(patterns) / sizeof(patterns[0]), "%zu", certain);
}
