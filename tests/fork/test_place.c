/*
 * fork/place.c: what a run forks (the work tree's top, not the
 * subdirectory it was started in), which fork it continues (named, or the
 * one around the working directory), where the command starts, and the
 * --bind specs (split, normalised, refused for a secret).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork/place.h"

typedef struct norm_case {
    char in[32];
    int rc;
    char out[32];
} norm_case;

ParameterizedTestParameters(place, normalise_folds_slashes_and_refuses_dots)
{
    static norm_case cases[] = {
        {"/a/b", 0, "/a/b"},      {"//a///b/", 0, "/a/b"}, {"/", 0, "/"},
        {"///", 0, "/"},          {"/a/.b", 0, "/a/.b"},   {"/a/..b", 0, "/a/..b"},
        {"a/b", -EINVAL, ""},     {"", -EINVAL, ""},       {"/a/./b", -EINVAL, ""},
        {"/a/../b", -EINVAL, ""}, {"/a/..", -EINVAL, ""},
    };

    return cr_make_param_array(norm_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(norm_case *c, place, normalise_folds_slashes_and_refuses_dots)
{
    char *out = NULL;

    cr_assert_eq(fork_place_normalise(&out, c->in), c->rc, "%s", c->in);
    if (c->rc == 0)
        cr_assert_str_eq(out, c->out);
    free(out);
}

Test(place, below_is_the_path_under_the_top)
{
    cr_assert_str_eq(fork_place_below("/a/b", "/a/b"), "");
    cr_assert_str_eq(fork_place_below("/a/b/c/d", "/a/b"), "c/d");
    cr_assert_str_eq(fork_place_below("/a/b", "/"), "a/b");
    cr_assert_null(fork_place_below("/a/bc", "/a/b"));
    cr_assert_null(fork_place_below("/a", "/a/b"));
}

Test(place, a_bind_spec_is_split_at_its_first_colon)
{
    rg_error err = RG_ERROR_INIT;
    char *src = NULL, *dst = NULL;

    cr_assert_eq(fork_place_bind_parse(&src, &dst, "/s:/d//x/", "--bind", &err), 0);
    cr_assert_str_eq(src, "/s");
    cr_assert_str_eq(dst, "/d/x");
    free(src);
    free(dst);
    cr_assert_eq(fork_place_bind_parse(&src, &dst, "rel:/d:e", "--bind", &err), 0);
    cr_assert_str_eq(src, "rel", "SRC may be relative");
    cr_assert_str_eq(dst, "/d:e");
    free(src);
    free(dst);
    cr_assert_eq(fork_place_bind_parse(&src, &dst, "/s", "--bind", &err), -EINVAL);
    cr_assert(strstr(err.msg, "SRC:DST") != NULL, "%s", err.msg);
    cr_assert_eq(fork_place_bind_parse(&src, &dst, ":/d", "--bind", &err), -EINVAL);
    cr_assert_eq(fork_place_bind_parse(&src, &dst, "/s:", "--ro-bind", &err), -EINVAL);
    cr_assert_eq(fork_place_bind_parse(&src, &dst, "/s:d", "--ro-bind", &err), -EINVAL);
    cr_assert(strstr(err.msg, "--ro-bind /s:d: DST must be an absolute path") != NULL, "%s",
              err.msg);
    cr_assert_eq(fork_place_bind_parse(&src, &dst, "/s:/a/../etc", "--bind", &err), -EINVAL);
    cr_assert_null(src);
    cr_assert_null(dst);
}

static char top[PATH_MAX];

static void place_setup(void)
{
    char tmpl[] = "/tmp/rg-place-test.XXXXXX";

    cr_assert_not_null(mkdtemp(tmpl));
    cr_assert_not_null(realpath(tmpl, top));
}

static void place_teardown(void)
{
    char cmd[PATH_MAX + 16];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    cr_assert_eq(system(cmd), 0);
}

static void mk(const char *rel)
{
    char p[PATH_MAX];

    snprintf(p, sizeof(p), "%s/%s", top, rel);
    cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
}

static const char *at(const char *rel)
{
    static char p[4][PATH_MAX];
    static int i;

    i = (i + 1) % 4;
    snprintf(p[i], sizeof(p[i]), "%s%s%s", top, rel[0] ? "/" : "", rel);
    return p[i];
}

Test(place, a_subdirectory_forks_the_work_trees_top, .init = place_setup, .fini = place_teardown)
{
    fork_place p = FORK_PLACE_INIT;

    mk("proj");
    mk("proj/.git");
    mk("proj/src");
    mk("proj/src/deep");
    mk("plain");
    mk("plain/sub");
    cr_assert_eq(fork_place_find(&p, at("proj/src/deep"), NULL, 0, NULL, NULL), 0);
    cr_assert_str_eq(p.top, at("proj"));
    cr_assert_str_eq(p.sub, "src/deep");
    cr_assert(!p.is_fork);
    fork_place_free(&p);
    /* A gitfile (a linked worktree) marks a top too. */
    mk("wt");
    mk("wt/a");
    fclose(fopen(at("wt/.git"), "w"));
    cr_assert_eq(fork_place_find(&p, at("wt/a"), NULL, 0, NULL, NULL), 0);
    cr_assert_str_eq(p.top, at("wt"));
    cr_assert_str_eq(p.sub, "a");
    fork_place_free(&p);
    /* Outside a work tree: the directory itself (nothing above has .git). */
    if (access("/tmp/.git", F_OK) != 0 && access("/.git", F_OK) != 0) {
        cr_assert_eq(fork_place_find(&p, at("plain/sub"), NULL, 0, NULL, NULL), 0);
        cr_assert_str_eq(p.top, at("plain/sub"));
        cr_assert_str_eq(p.sub, "");
        fork_place_free(&p);
    }
}

Test(place, a_top_that_holds_secrets_gives_way_to_the_cwd, .init = place_setup,
     .fini = place_teardown)
{
    sandbox_home h = SANDBOX_HOME_INIT;
    fork_place p = FORK_PLACE_INIT;

    /* A dotfiles repository: the home directory is a work tree. */
    mk("home");
    mk("home/.git");
    mk("home/.ssh");
    mk("home/proj");
    cr_assert_eq(sandbox_home_init(&h, at("home"), NULL, 0, NULL), 0);
    cr_assert_eq(fork_place_find(&p, at("home/proj"), NULL, 0, &h, NULL), 0);
    cr_assert_str_eq(p.top, at("home/proj"));
    cr_assert_str_eq(p.sub, "");
    cr_assert(p.narrowed);
    fork_place_free(&p);
    cr_assert_eq(fork_place_find(&p, at("home/proj"), NULL, 0, NULL, NULL), 0);
    cr_assert_str_eq(p.top, at("home"), "without a home to check, the top");
    fork_place_free(&p);
    sandbox_home_free(&h);
}

Test(place, a_fork_around_the_cwd_is_continued_never_nested, .init = place_setup,
     .fini = place_teardown)
{
    fork_place p = FORK_PLACE_INIT;
    rg_error err = RG_ERROR_INIT;

    mk("proj.2");
    mk("proj.2/.git");
    mk("proj.2/src");
    mk(".proj.2.base");
    mk("other.1");
    cr_assert_eq(fork_place_find(&p, at("proj.2/src"), NULL, 0, NULL, NULL), 0);
    cr_assert_str_eq(p.top, at("proj.2"));
    cr_assert_str_eq(p.sub, "src");
    cr_assert(p.is_fork && p.implicit);
    fork_place_free(&p);
    cr_assert_eq(fork_place_find(&p, at("proj.2/src"), NULL, 1, NULL, NULL), 0);
    cr_assert(p.is_fork && !p.implicit, "--continue without FORK: the fork around");
    fork_place_free(&p);
    /* Named from elsewhere: the command starts at the fork's top. */
    cr_assert_eq(fork_place_find(&p, at("other.1"), at("proj.2"), 1, NULL, NULL), 0);
    cr_assert_str_eq(p.top, at("proj.2"));
    cr_assert_str_eq(p.sub, "");
    fork_place_free(&p);
    /* other.1 has no base: not a fork. */
    cr_assert_eq(fork_place_find(&p, at(""), at("other.1"), 1, NULL, &err), -EINVAL);
    cr_assert(strstr(err.msg, "not a fork") != NULL, "%s", err.msg);
    cr_assert_eq(fork_place_find(&p, at("other.1"), NULL, 1, NULL, &err), -EINVAL);
    cr_assert(strstr(err.msg, "--continue DIR.N") != NULL, "%s", err.msg);
    cr_assert_eq(fork_place_find(&p, at(""), at("missing.1"), 1, NULL, &err), -ENOENT);
}

Test(place, a_bind_is_refused_for_a_secret_and_kept_under_the_home, .init = place_setup,
     .fini = place_teardown)
{
    sandbox_home h = SANDBOX_HOME_INIT;
    sandbox_bind b;
    rg_error err = RG_ERROR_INIT;
    const char *exposed;
    char dst[PATH_MAX + 32];

    mk("home");
    mk("home/.ssh");
    mk("home/cfg");
    mk("out");
    cr_assert_eq(sandbox_home_init(&h, at("home"), NULL, 0, &err), 0, "%s", err.msg);
    snprintf(dst, sizeof(dst), "%s:%s", at("home/.ssh"), at("out"));
    cr_assert_eq(fork_place_bind_resolve(&b, dst, 0, &h, 0, &exposed, &err), RG_E_DENIED);
    cr_assert(strstr(err.msg, "refusing --bind") != NULL, "%s", err.msg);
    cr_assert_eq(fork_place_bind_resolve(&b, dst, 1, &h, 1, &exposed, &err), 0, "%s", err.msg);
    cr_assert_str_eq(exposed, at("home/.ssh"), "--force says what it exposes");
    fork_place_bind_free(&b);
    snprintf(dst, sizeof(dst), "%s:%s", at("home"), at("out"));
    cr_assert_eq(fork_place_bind_resolve(&b, dst, 1, &h, 0, &exposed, &err), RG_E_DENIED,
                 "a bind of the home directory exposes it");
    /* Under the home: kept as written (made in the tmpfs home inside). */
    snprintf(dst, sizeof(dst), "%s:%s", at("home/cfg"), at("home/.agent/x"));
    cr_assert_eq(fork_place_bind_resolve(&b, dst, 0, &h, 0, &exposed, &err), 0, "%s", err.msg);
    cr_assert_str_eq(b.src, at("home/cfg"));
    cr_assert_str_eq(b.dst, at("home/.agent/x"));
    cr_assert(!b.ro && exposed == NULL);
    fork_place_bind_free(&b);
    /* Elsewhere it must exist. */
    snprintf(dst, sizeof(dst), "%s:%s", at("home/cfg"), at("out/missing"));
    cr_assert_eq(fork_place_bind_resolve(&b, dst, 0, &h, 0, &exposed, &err), -ENOENT);
    snprintf(dst, sizeof(dst), "%s:/", at("home/cfg"));
    cr_assert_eq(fork_place_bind_resolve(&b, dst, 0, &h, 0, &exposed, &err), -EINVAL);
    sandbox_home_free(&h);
}
