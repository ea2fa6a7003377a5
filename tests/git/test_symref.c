/*
 * Tests for git/symref.c: symbolic refs read from a local repository
 * (libgit2) and from a remote's ls-refs answer, and the ls-refs request.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "git/pktline.h"
#include "git/symref.h"
#include "support/shell.h"

#define A40 "1111111111111111111111111111111111111111"

static void lsrefs(rg_buf *out, const char *const *lines)
{
    for (; *lines; lines++)
        cr_assert_eq(rgit_pktline_printf(out, "%s", *lines), 0);
    cr_assert_eq(rgit_pktline_flush(out), 0);
}

Test(symref, lsrefs_answer_lists_symbolic_refs_with_their_final_target)
{
    static const char *const lines[] = {
        A40 " refs/heads/main\n",
        A40 " refs/heads/master symref-target:refs/heads/main\n",
        A40 " refs/tags/v1 peeled:" A40 "\n",
        A40 " refs/heads/alias symref-target:refs/heads/x peeled:" A40 "\n",
        NULL,
    };
    rg_buf b = RG_BUF_INIT(1 << 20);
    rgit_symrefs *s = NULL;
    rg_error err = RG_ERROR_INIT;
    char *t = NULL;

    lsrefs(&b, lines);
    cr_assert_eq(rgit_symrefs_from_lsrefs(&s, b.data, b.len, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_symrefs_resolve(&t, s, "refs/heads/master", &err), 0);
    cr_expect_str_eq(t, "refs/heads/main");
    free(t);
    cr_assert_eq(rgit_symrefs_resolve(&t, s, "refs/heads/alias", &err), 0);
    cr_expect_str_eq(t, "refs/heads/x", "the target ends at the next attribute");
    free(t);
    cr_assert_eq(rgit_symrefs_resolve(&t, s, "refs/heads/main", &err), 0);
    cr_expect_null(t, "a plain ref is not symbolic");
    cr_assert_eq(rgit_symrefs_resolve(&t, s, "refs/heads/none", &err), 0);
    cr_expect_null(t);
    rgit_symrefs_free(s);
    rg_buf_free(&b);
}

Test(symref, lsrefs_answer_that_is_not_one_is_refused)
{
    static const char *const cases[] = {
        "",                  /* nothing at all */
        "0010" A40,          /* cut short, no flush */
        "000anospace\n0000", /* a line without a ref name */
        "0001"
        "0000", /* a delimiter where refs go */
        "zzzz", /* not a packet */
    };
    rgit_symrefs *s = NULL;
    rg_error err = RG_ERROR_INIT;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_expect_lt(rgit_symrefs_from_lsrefs(&s, cases[i], strlen(cases[i]), &err), 0,
                     "case %zu accepted", i);
        cr_expect_null(s);
    }
}

Test(symref, lsrefs_request_asks_for_symrefs_of_each_ref_in_the_object_format)
{
    static const char *const refs[] = {"refs/heads/main", "refs/heads/feature/x"};
    rg_buf b = RG_BUF_INIT(1 << 20);

    cr_assert_eq(rgit_symrefs_lsrefs_request(&b, refs, 2, 64), 0);
    cr_expect_str_eq(b.data, "0014command=ls-refs\n"
                             "0019object-format=sha256\n"
                             "0001"
                             "000csymrefs\n"
                             "001fref-prefix refs/heads/main\n"
                             "0024ref-prefix refs/heads/feature/x\n"
                             "0000");
    rg_buf_free(&b);
}

Test(symref, local_chains_are_followed_to_their_end_and_bounded)
{
    char dir[] = "/tmp/rg-test-symref-XXXXXX", path[300];
    rgit_symrefs *s = NULL;
    rg_error err = RG_ERROR_INIT;
    char *t = NULL;

    cr_assert_not_null(mkdtemp(dir));
    test_run(
        "cd %s && git init -q --bare r.git && cd r.git && "
        "git symbolic-ref refs/heads/a refs/heads/b && "
        "git symbolic-ref refs/heads/b refs/heads/main && "
        "for i in 1 2 3 4 5 6 7; do git symbolic-ref refs/heads/l$i refs/heads/l$((i+1)); done",
        dir);
    snprintf(path, sizeof(path), "%s/r.git", dir);
    cr_assert_eq(rgit_symrefs_open(&s, path, &err), 0, "%s", err.msg);
    cr_assert_eq(rgit_symrefs_resolve(&t, s, "refs/heads/a", &err), 0, "%s", err.msg);
    cr_expect_str_eq(t, "refs/heads/main", "a -> b -> main (main need not exist)");
    free(t);
    cr_assert_eq(rgit_symrefs_resolve(&t, s, "refs/heads/main", &err), 0);
    cr_expect_null(t);
    cr_expect_lt(rgit_symrefs_resolve(&t, s, "refs/heads/l1", &err), 0, "past git's depth");
    cr_expect_null(t);
    rgit_symrefs_free(s);
    test_run("rm -rf %s", dir);
}
