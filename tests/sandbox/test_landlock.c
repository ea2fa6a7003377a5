/*
 * sandbox/landlock.c: what each ABI loses and whether a run is refused,
 * for every ABI and every combination of accepted losses (the fail-closed
 * table), and a ruleset that actually confines a child.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/landlock.h"

#define NS  SANDBOX_LANDLOCK_ACCEPT_NO_SCOPE
#define NT  SANDBOX_LANDLOCK_ACCEPT_NO_TRUNCATE
#define ANY SANDBOX_LANDLOCK_ACCEPT_ANY

typedef struct plan_case {
    int abi;
    unsigned accept;
    int refused; /* RG_E_DENIED expected */
    int enforce, loud;
    size_t ndegraded;
} plan_case;

ParameterizedTestParameters(landlock, plans_fail_closed_unless_the_loss_is_accepted)
{
    static plan_case cases[] = {
        /* No Landlock: only --allow-unconfined runs, loudly. */
        {0, 0, 1, 0, 0, 0},
        {0, NS | NT, 1, 0, 0, 0},
        {0, ANY, 0, 0, 1, 1},
        /* ABI 1 and 2 lack truncate, ioctl and scoping (and 1 lacks REFER). */
        {1, 0, 1, 0, 0, 0},
        {1, NS, 1, 0, 0, 0},
        {1, NT, 1, 0, 0, 0},
        {1, NS | NT, 0, 1, 0, 4},
        {1, ANY, 0, 1, 1, 4},
        {2, NS | NT, 0, 1, 0, 3},
        {2, NS | ANY, 0, 1, 1, 3},
        /* ABI 3 to 5: only scoping is missing. */
        {3, 0, 1, 0, 0, 0},
        {3, NS, 0, 1, 0, 2},
        {4, NS, 0, 1, 0, 2},
        {5, 0, 1, 0, 0, 0},
        {5, NT, 1, 0, 0, 0},
        {5, NS, 0, 1, 0, 1},
        {5, ANY, 0, 1, 1, 1},
        /* ABI 6 and later: everything, nothing lost. */
        {6, 0, 0, 1, 0, 0},
        {7, 0, 0, 1, 0, 0},
        {7, ANY, 0, 1, 0, 0},
        {9, 0, 0, 1, 0, 0},
    };

    return cr_make_param_array(plan_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(plan_case *c, landlock, plans_fail_closed_unless_the_loss_is_accepted)
{
    sandbox_landlock_plan p;
    rg_error err = RG_ERROR_INIT;
    int rc = sandbox_landlock_plan_make(&p, c->abi, c->accept, &err);

    if (c->refused) {
        cr_assert_eq(rc, RG_E_DENIED, "abi %d accept %u", c->abi, c->accept);
        cr_assert(strstr(err.msg, "refusing") != NULL, "%s", err.msg);
        return;
    }
    cr_assert_eq(rc, 0, "abi %d accept %u: %s", c->abi, c->accept, err.msg);
    cr_assert_eq(p.enforce, c->enforce, "abi %d", c->abi);
    cr_assert_eq(p.loud, c->loud, "abi %d accept %u", c->abi, c->accept);
    cr_assert_eq(p.ndegraded, c->ndegraded, "abi %d: %zu degraded", c->abi, p.ndegraded);
    if (c->abi >= 6)
        cr_assert_eq(p.scoped, 3, "signal and abstract socket scoping");
    else
        cr_assert_eq(p.scoped, 0);
    cr_assert(p.abi <= SANDBOX_LANDLOCK_ABI_LAST);
}

Test(landlock, masks_rights_the_abi_lacks)
{
    sandbox_landlock_plan p;

    cr_assert_eq(sandbox_landlock_plan_make(&p, 1, NS | NT, NULL), 0);
    cr_assert_eq(p.handled_fs & (1ULL << 13), 0, "ABI 1: no REFER");
    cr_assert_eq(p.handled_fs & (1ULL << 14), 0, "ABI 1: no TRUNCATE");
    cr_assert_eq(sandbox_landlock_plan_make(&p, 3, NS, NULL), 0);
    cr_assert_neq(p.handled_fs & (1ULL << 14), 0, "ABI 3: TRUNCATE");
    cr_assert_eq(p.handled_fs & (1ULL << 15), 0, "ABI 3: no IOCTL_DEV");
    cr_assert_eq(sandbox_landlock_plan_make(&p, 7, 0, NULL), 0);
    cr_assert_eq(p.handled_fs, (1ULL << 16) - 1, "ABI 7: every filesystem right");
}

Test(landlock, refusals_name_every_reason_and_the_option_that_overrides_it)
{
    sandbox_landlock_plan p;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(sandbox_landlock_plan_make(&p, 2, 0, &err), RG_E_DENIED);
    cr_assert(strstr(err.msg, "--no-truncate-control") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "--no-scope") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "--allow-unconfined") != NULL, "%s", err.msg);
}

Test(landlock, a_probe_can_be_lowered_but_not_raised)
{
    rg_error err = RG_ERROR_INIT;
    int real, abi;

    sandbox_landlock_probe(&real, -1, NULL);
    sandbox_landlock_probe(&abi, 0, &err);
    cr_assert_eq(abi, 0);
    cr_assert(strstr(err.msg, "not available") != NULL, "%s", err.msg);
    sandbox_landlock_probe(&abi, 1000, NULL);
    cr_assert_eq(abi, real);
}

Test(landlock, a_ruleset_confines_a_child_to_what_it_grants)
{
    sandbox_landlock_plan p;
    sandbox_landlock *ll = NULL;
    char dir[] = "/tmp/rg-landlock-test.XXXXXX", ok[96], no[96];
    const char *hidden[] = {"/tmp"};
    int abi, status;
    pid_t pid;

    sandbox_landlock_probe(&abi, -1, NULL);
    if (abi < 1)
        cr_skip_test("no Landlock on this kernel");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(ok, sizeof(ok), "%s/ok", dir);
    snprintf(no, sizeof(no), "/tmp/rg-landlock-test-denied.%d", (int)getpid());
    cr_assert_eq(sandbox_landlock_plan_make(&p, abi, NS | NT, NULL), 0);
    cr_assert_eq(sandbox_landlock_new(&ll, &p, NULL), 0);
    cr_assert_eq(sandbox_landlock_allow_all_except(ll, hidden, 1, NULL, 0, NULL), 0);
    cr_assert_eq(sandbox_landlock_allow(ll, dir, SANDBOX_LANDLOCK_WRITE, NULL), 0);
    cr_assert_gt(sandbox_landlock_count(ll), 1);
    pid = fork();
    if (pid == 0) {
        int a, b;

        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (sandbox_landlock_enforce(ll, NULL) < 0)
            _exit(10);
        a = open(ok, O_CREAT | O_WRONLY, 0600);
        b = open(no, O_CREAT | O_WRONLY, 0600);
        _exit(a >= 0 && b < 0 && errno == EACCES ? 0 : 11);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "granted dir writable, hidden /tmp not");
    cr_assert_eq(access(no, F_OK), -1);
    unlink(ok);
    rmdir(dir);
    sandbox_landlock_free(ll);
}

Test(landlock, an_unenforced_plan_makes_rules_do_nothing)
{
    sandbox_landlock_plan p;
    sandbox_landlock *ll = NULL;

    cr_assert_eq(sandbox_landlock_plan_make(&p, 0, ANY, NULL), 0);
    cr_assert_eq(sandbox_landlock_new(&ll, &p, NULL), 0);
    cr_assert_eq(sandbox_landlock_allow(ll, "/nonexistent", SANDBOX_LANDLOCK_READ, NULL), 0);
    cr_assert_eq(sandbox_landlock_count(ll), 0);
    cr_assert_eq(sandbox_landlock_enforce(ll, NULL), 0);
    sandbox_landlock_free(ll);
    sandbox_landlock_free(NULL);
}

Test(landlock, a_missing_granted_path_is_an_error_unless_optional)
{
    sandbox_landlock_plan p;
    sandbox_landlock *ll = NULL;
    rg_error err = RG_ERROR_INIT;
    int abi;

    sandbox_landlock_probe(&abi, -1, NULL);
    if (abi < 1)
        cr_skip_test("no Landlock on this kernel");
    cr_assert_eq(sandbox_landlock_plan_make(&p, abi, NS | NT, NULL), 0);
    cr_assert_eq(sandbox_landlock_new(&ll, &p, NULL), 0);
    cr_assert_eq(sandbox_landlock_allow(ll, "/nonexistent/x", SANDBOX_LANDLOCK_READ, &err),
                 -ENOENT);
    cr_assert(strstr(err.msg, "/nonexistent/x") != NULL, "%s", err.msg);
    cr_assert_eq(sandbox_landlock_allow(ll, "/nonexistent/x",
                                        SANDBOX_LANDLOCK_READ | SANDBOX_LANDLOCK_OPTIONAL, NULL),
                 0);
    sandbox_landlock_free(ll);
}
