/*
 * fork/gitconf.c: the config filter keeps only allow-listed keys, reads
 * git's syntax the way git does (so no key git would see slips past as
 * something else), refuses what it cannot parse, and keeps URLs only as
 * the base had them.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fork/gitconf.h"
#include "util/buf.h"

static char told[4096];

static void tell(void *ctx, const char *where, const char *what)
{
    (void)ctx;
    (void)where;
    strncat(told, what, sizeof(told) - strlen(told) - 2);
    strcat(told, ";");
}

static int filter(char **out, const char *config, const char *base)
{
    told[0] = '\0';
    return fork_gitconf_filter(out, config, strlen(config), base, base ? strlen(base) : 0, tell,
                               NULL);
}

Test(gitconf, a_plain_repository_config_is_kept_as_it_is)
{
    const char *c = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
                    "\tlogallrefupdates = true\n";
    char *out = NULL;

    cr_assert_eq(filter(&out, c, NULL), 0);
    cr_assert_str_empty(told);
    free(out);
}

Test(gitconf, every_key_that_runs_a_program_is_removed)
{
    const char *c = "[core]\n\tfsmonitor = /x\n\thooksPath = /h\n\tsshCommand = x\n\teditor = x\n"
                    "\tpager = x\n\trepositoryformatversion = 0\n"
                    "[alias]\n\tst = !x\n[filter \"lfs\"]\n\tclean = x\n[diff]\n\texternal = x\n"
                    "[diff \"bin\"]\n\ttextconv = x\n[credential]\n\thelper = x\n"
                    "[include]\n\tpath = /evil\n[includeIf \"gitdir:/\"]\n\tpath = /evil\n"
                    "[submodule \"s\"]\n\tupdate = !x\n[extensions]\n\tworktreeConfig = true\n";
    char *out = NULL;

    cr_assert_eq(filter(&out, c, NULL), 1);
    cr_assert(strstr(told, "config core.fsmonitor;"));
    cr_assert(strstr(told, "config core.hookspath;"));
    cr_assert(strstr(told, "config alias.st;"));
    cr_assert(strstr(told, "config filter.lfs.clean;"));
    cr_assert(strstr(told, "config include.path;"));
    cr_assert(strstr(told, "config includeif.gitdir:/.path;"));
    cr_assert(strstr(told, "config submodule.s.update;"));
    cr_assert(strstr(told, "config extensions.worktreeconfig;"));
    cr_assert(strstr(out, "repositoryformatversion = \"0\""));
    cr_assert_null(strstr(out, "fsmonitor"));
    cr_assert_null(strstr(out, "evil"));
    free(out);
}

Test(gitconf, keys_are_found_in_every_spelling_git_accepts)
{
    /* Case, the old [section.sub] form, spaces, a bare boolean, a comment
     * after the header, a continuation line and an escaped quote. */
    const char *c = "[CORE] ; comment\n  FsMonitor\n[Core]\n\tfsMONITOR = \"a \\\" b\" ; c\n"
                    "[core]\n\tfsmonitor = one\\\ntwo\n[alias.x]\n\ty = z\n";
    char *out = NULL;

    cr_assert_eq(filter(&out, c, NULL), 1);
    cr_assert_str_eq(told,
                     "config core.fsmonitor;config core.fsmonitor;config core.fsmonitor;config "
                     "alias.x.y;");
    cr_assert_null(strstr(out, "fsmonitor"));
    free(out);
}

Test(gitconf, what_does_not_parse_removes_everything)
{
    const char *bad[] = {
        "[core\n\tfsmonitor = x\n",    /* an unclosed header */
        "fsmonitor = x\n",             /* a key before any section */
        "[core]\n\tfsmonitor = \"x\n", /* an unclosed quote */
        "[core]\n\tfsmonitor = \\q\n", /* an unknown escape */
        "[a \"b\nc\"]\n\tx = y\n",     /* a newline in a subsection */
        "[core]\n\t9x = y\n",          /* a key not starting with a letter */
    };
    size_t i;
    char *out = NULL;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(filter(&out, bad[i], NULL), RG_E_CONFIG, "%s", bad[i]);
        cr_assert_str_empty(out);
        free(out);
        out = NULL;
    }
}

Test(gitconf, urls_are_kept_only_as_the_base_had_them)
{
    const char *base = "[remote \"origin\"]\n\turl = https://example.com/a.git\n"
                       "\tfetch = +refs/heads/*:refs/remotes/origin/*\n";
    const char *same = "[remote \"origin\"]\n\turl = https://example.com/a.git\n"
                       "\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n"
                       "\tremote = origin\n\tmerge = refs/heads/main\n";
    const char *moved = "[remote \"origin\"]\n\turl = https://attacker.example/a.git\n";
    char *out = NULL;

    cr_assert_eq(filter(&out, same, base), 0);
    free(out);
    cr_assert_eq(filter(&out, moved, base), 1);
    cr_assert_str_eq(told, "config remote.origin.url;");
    cr_assert_null(strstr(out, "attacker"));
    free(out);
    cr_assert_eq(filter(&out, "[remote \"o\"]\n\turl = ext::sh -c x\n", NULL), 1);
    free(out);
}

Test(gitconf, values_are_written_back_so_git_reads_the_same)
{
    const char *c = "[user]\n\tname = \"A \\\"B\\\" \\\\ C\"\n[branch \"we\\\"ird\"]\n\tmerge = x\n"
                    "[core]\n\tfsmonitor = x\n";
    char *out = NULL, *again = NULL;

    cr_assert_eq(filter(&out, c, NULL), 1);
    cr_assert(strstr(out, "name = \"A \\\"B\\\" \\\\ C\""), "%s", out);
    cr_assert(strstr(out, "[branch \"we\\\"ird\"]"), "%s", out);
    /* The output is a fixed point. */
    cr_assert_eq(filter(&again, out, NULL), 0);
    cr_assert_str_eq(again, out);
    free(out);
    free(again);
}
