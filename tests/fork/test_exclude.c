/*
 * fork/exclude.c and the copy's exclusion hook in fork/tree.c: which
 * paths a pattern matches (a table), which patterns are refused, what the
 * copy leaves in place of an excluded entry, that a secret linked inside an
 * excluded directory still refuses the fork, which directories
 * --exclude-ignored takes from a real git repository, and the record.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork/exclude.h"
#include "fork/tree.h"
#include "support/shell.h"

/* Arrays, not pointers: Criterion hands each case to a fresh process. */
typedef struct match_case {
    char pattern[32];
    char path[32];
    int is_dir;
    int want;
} match_case;

static const match_case match_cases[] = {
    /* A name without a slash matches at any depth. */
    {"node_modules", "node_modules", 1, 1},
    {"node_modules", "web/app/node_modules", 1, 1},
    {"node_modules", "node_modules_old", 1, 0},
    {"node_modules", "web/node_modules/x", 1, 0}, /* the walk stops at the parent */
    {"node_modules", "node_modules", 0, 1},       /* files too, without a slash */
    /* A trailing slash: directories only. */
    {"build/", "build", 1, 1},
    {"build/", "build", 0, 0},
    {"build/", "sub/build", 1, 1},
    /* A slash inside or in front anchors at the top. */
    {"/target", "target", 1, 1},
    {"/target", "crates/a/target", 1, 0},
    {"web/dist", "web/dist", 1, 1},
    {"web/dist", "x/web/dist", 1, 0},
    /* Wildcards stay within a segment; they match a leading dot. */
    {"*.log", "a/b/debug.log", 0, 1},
    {"*.log", ".hidden.log", 0, 1},
    {"web/*", "web/a", 1, 1},
    {"web/*", "web/a/b", 1, 0},
    {"ca?he", "cache", 1, 1},
    {"[bt]arget", "target", 1, 1},
    /* ** takes any number of segments, none included. */
    {"**/__pycache__", "__pycache__", 1, 1},
    {"**/__pycache__", "a/b/c/__pycache__", 1, 1},
    {"src/**/gen", "src/gen", 1, 1},
    {"src/**/gen", "src/a/b/gen", 1, 1},
    {"src/**/gen", "lib/a/gen", 1, 0},
    {"vendor/**", "vendor", 1, 1},
    {"vendor/**", "vendor/a/b", 0, 1},
    {"a/**/b/**/c", "a/x/b/y/z/c", 1, 1},
    {"a/**/b/**/c", "a/x/y/z/c", 1, 0},
};

ParameterizedTestParameters(exclude, patterns_match_like_gitignore)
{
    return cr_make_param_array(match_case, (void *)match_cases,
                               sizeof(match_cases) / sizeof(match_cases[0]));
}

ParameterizedTest(const match_case *c, exclude, patterns_match_like_gitignore)
{
    cr_assert_eq(fork_exclude_pattern_match(c->pattern, c->path, c->is_dir), c->want,
                 "pattern '%s' against %s '%s': want %d", c->pattern, c->is_dir ? "dir" : "file",
                 c->path, c->want);
}

Test(exclude, bad_patterns_are_refused_and_dot_git_is_never_excluded)
{
    static const char *const bad[] = {"", "/", "a//b", ".", "..", "../x", "a/../b", "a/./b"};
    fork_exclude x = FORK_EXCLUDE_INIT;
    rg_error err = RG_ERROR_INIT;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(fork_exclude_add_pattern(&x, bad[i], &err), -EINVAL, "'%s' accepted", bad[i]);
    cr_assert_eq(x.npatterns, 0);
    cr_assert_eq(fork_exclude_add_pattern(&x, "*", &err), 0, "%s", err.msg);
    cr_assert(fork_exclude_matches(&x, "anything", 1));
    cr_assert_not(fork_exclude_matches(&x, ".git", 1), ".git is never excluded");
    cr_assert_not(fork_exclude_matches(&x, "sub/.git", 0));
    fork_exclude_free(&x);
}

/* ------------------------------------------------------------------------ */
/* The copy                                                                  */
/* ------------------------------------------------------------------------ */

static char top[64], src[96], dst[96];

static void copy_setup(void)
{
    strcpy(top, "/tmp/rg-exclude-test.XXXXXX");
    cr_assert_not_null(mkdtemp(top));
    snprintf(src, sizeof(src), "%s/src", top);
    snprintf(dst, sizeof(dst), "%s/dst", top);
    cr_assert_eq(mkdir(src, 0755), 0);
    cr_assert_eq(mkdir(dst, 0700), 0);
}

static void copy_teardown(void)
{
    char cmd[160];

    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s'; rm -rf '%s'", top, top);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(exclude_copy, .init = copy_setup, .fini = copy_teardown);

static int copy_with(fork_tree_stats *st, fork_exclude *x, fork_tree_opts *o, rg_error *err)
{
    int s = open(src, O_RDONLY | O_DIRECTORY), d = open(dst, O_RDONLY | O_DIRECTORY), rc;

    o->exclude = fork_exclude_tree_cb;
    o->exclude_ctx = x;
    rc = fork_tree_copy(st, s, d, o, err);
    close(s);
    close(d);
    return rc;
}

Test(exclude_copy, an_excluded_entry_becomes_an_empty_placeholder_and_is_recorded)
{
    fork_tree_opts o = FORK_TREE_OPTS_INIT;
    fork_exclude x = FORK_EXCLUDE_INIT;
    rg_error err = RG_ERROR_INIT;
    fork_tree_stats st;
    struct stat a;
    char p[256], rec[256], buf[512];
    ssize_t n;
    int fd;

    test_run("cd %s && mkdir -p src web/node_modules/lib node_modules/.bin && echo c >src/a.c"
             " && echo lib >web/node_modules/lib/index.js && echo x >node_modules/.bin/x"
             " && echo log >debug.log && chmod 750 web/node_modules",
             src);
    cr_assert_eq(fork_exclude_add_pattern(&x, "node_modules/", &err), 0);
    cr_assert_eq(fork_exclude_add_pattern(&x, "*.log", &err), 0);
    cr_assert_eq(copy_with(&st, &x, &o, &err), 0, "%s", err.msg);

    cr_assert_eq(st.excluded, 3);
    cr_assert_eq(st.excluded_files, 3, "the files in and at excluded entries are counted");
    cr_assert_eq(st.files, 1, "only src/a.c is copied");
    cr_assert_eq(x.nexcluded, 3);
    snprintf(p, sizeof(p), "%s/web/node_modules", dst);
    cr_assert_eq(stat(p, &a), 0, "a placeholder stands where the directory was");
    cr_assert(S_ISDIR(a.st_mode));
    cr_assert_eq(a.st_mode & 07777, 0750, "with its mode");
    snprintf(p, sizeof(p), "%s/web/node_modules/lib", dst);
    cr_assert_neq(access(p, F_OK), 0, "empty");
    snprintf(p, sizeof(p), "%s/debug.log", dst);
    cr_assert_eq(stat(p, &a), 0);
    cr_assert(S_ISREG(a.st_mode) && a.st_size == 0, "an excluded file is an empty file");

    /* The record: beside the fork, the header, then NUL-terminated paths. */
    snprintf(p, sizeof(p), "%s/proj.1", top);
    cr_assert_eq(fork_exclude_record(&x, p, &err), 0, "%s", err.msg);
    snprintf(rec, sizeof(rec), "%s/.proj.1.excluded", top);
    fd = open(rec, O_RDONLY);
    cr_assert_geq(fd, 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_assert_eq(strncmp(buf, "# refgate-run: ", 15), 0);
    cr_assert_not_null(memmem(buf, (size_t)n, "web/node_modules\0", 17));
    cr_assert_not_null(memmem(buf, (size_t)n, "debug.log\0", 10));
    cr_assert_eq(stat(rec, &a), 0);
    cr_assert_eq(a.st_mode & 0777, 0600);

    /* Nothing excluded: a stale record of the name is removed. */
    fork_exclude_free(&x);
    cr_assert_eq(fork_exclude_record(&x, p, &err), 0, "%s", err.msg);
    cr_assert_neq(access(rec, F_OK), 0);
}

static ino_t secret_ino;

static int refuse_secret(void *ctx, const struct stat *st)
{
    (void)ctx;
    return st->st_ino == secret_ino;
}

Test(exclude_copy, a_secret_linked_inside_an_excluded_directory_refuses_the_copy)
{
    fork_tree_opts o = FORK_TREE_OPTS_INIT;
    fork_exclude x = FORK_EXCLUDE_INIT;
    rg_error err = RG_ERROR_INIT;
    fork_tree_stats st;
    struct stat a;
    char p[256];

    test_run("cd %s && mkdir -p node_modules/deep && echo SECRET >../secret"
             " && ln ../secret node_modules/deep/key",
             src);
    snprintf(p, sizeof(p), "%s/secret", top);
    cr_assert_eq(stat(p, &a), 0);
    secret_ino = a.st_ino;
    o.refuse = refuse_secret;
    cr_assert_eq(fork_exclude_add_pattern(&x, "node_modules", &err), 0);
    cr_assert_eq(copy_with(&st, &x, &o, &err), RG_E_DENIED);
    cr_assert_not_null(strstr(err.msg, "node_modules/deep/key"), "%s", err.msg);
    fork_exclude_free(&x);
}

Test(exclude_copy, more_than_the_limit_of_excluded_entries_fails)
{
    fork_tree_opts o = FORK_TREE_OPTS_INIT;
    fork_exclude x = FORK_EXCLUDE_INIT;
    rg_error err = RG_ERROR_INIT;
    fork_tree_stats st;

    test_run("cd %s && for i in $(seq 1030); do : >f$i.tmp; done", src);
    cr_assert_eq(fork_exclude_add_pattern(&x, "*.tmp", &err), 0);
    cr_assert_eq(copy_with(&st, &x, &o, &err), -E2BIG);
    fork_exclude_free(&x);
}

Test(exclude_copy, exclude_ignored_takes_wholly_ignored_dependency_directories_only)
{
    fork_exclude x = FORK_EXCLUDE_INIT;
    rg_error err = RG_ERROR_INIT;
    size_t n, i;
    int seen_root = 0, seen_web = 0;

    if (system("git --version >/dev/null 2>&1") != 0)
        cr_skip_test("git is not installed");
    test_run("cd %s && git init -q && mkdir -p node_modules/a web/node_modules/b target vendor/v"
             " other/node_modules && printf 'node_modules/\\ntarget/\\nvendor/\\n' >.gitignore"
             " && touch node_modules/a/f web/node_modules/b/g target/t vendor/v/tracked"
             " other/node_modules/kept && git add .gitignore && git add -f vendor/v/tracked"
             " other/node_modules/kept",
             src);
    cr_assert_eq(fork_exclude_add_ignored(&n, &x, src, &err), 0, "%s", err.msg);
    for (i = 0; i < x.npaths; i++) {
        seen_root |= strcmp(x.paths[i], "node_modules") == 0;
        seen_web |= strcmp(x.paths[i], "web/node_modules") == 0;
        cr_assert_neq(strcmp(x.paths[i], "target"), 0, "a build output is not taken");
        cr_assert_neq(strcmp(x.paths[i], "vendor"), 0, "a directory with tracked files is not");
        cr_assert_neq(strcmp(x.paths[i], "other/node_modules"), 0);
    }
    cr_assert(seen_root && seen_web, "%zu paths", x.npaths);
    cr_assert_eq(n, 2);
    fork_exclude_free(&x);

    cr_assert_eq(fork_exclude_add_ignored(&n, &x, top, &err), -ENOENT, "outside a git work tree");
    fork_exclude_free(&x);
}
