/*
 * The push-inspection tests' fixture; see gitfix.h.
 */
#include "support/gitfix.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "support/shell.h"

void test_gitfix_setup(char *base, char *upstream, char *work, char *tmp_parent, size_t cap,
                       const char *seed)
{
    char home[600];

    /* A write to an indexer that gave up must fail with EPIPE, as in the gateway. */
    signal(SIGPIPE, SIG_IGN);
    cr_assert_not_null(mkdtemp(base));
    snprintf(upstream, cap, "%s/upstream.git", base);
    snprintf(work, cap, "%s/work", base);
    snprintf(tmp_parent, cap, "%s/tmp", base);
    snprintf(home, sizeof(home), "%s/home", base);
    cr_assert_eq(mkdir(tmp_parent, 0755), 0);
    cr_assert_eq(mkdir(home, 0755), 0);
    test_git_env(home);
    test_run("git init -q --bare -b main '%s' && git init -q -b main '%s' && cd '%s' && "
             "%s && git add -A && git commit -q -m base && git push -q '%s' main && "
             "git tag base",
             upstream, work, work, seed, upstream);
}
