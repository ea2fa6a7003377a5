/*
 * sandbox/ns.c: namespace lists parse strictly (unknown names are errors
 * that list the valid ones), map to the right clone flags and back to
 * names, and a set without the user namespace is refused for non-root.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <string.h>

#include "sandbox/ns.h"

Test(ns, lists_parse_to_sets)
{
    rg_error err = RG_ERROR_INIT;
    unsigned set = 99;

    cr_assert_eq(sandbox_ns_parse(&set, "all", "--unshare", &err), 0);
    cr_assert_eq(set, SANDBOX_NS_ALL);
    cr_assert_eq(sandbox_ns_parse(&set, "none", "--unshare", &err), 0);
    cr_assert_eq(set, 0);
    cr_assert_eq(sandbox_ns_parse(&set, "net,ipc", "--share", &err), 0);
    cr_assert_eq(set, SANDBOX_NS_NET | SANDBOX_NS_IPC);
    cr_assert_eq(sandbox_ns_parse(&set, "user,mount,pid,ipc,uts,net", "--unshare", &err), 0);
    cr_assert_eq(set, SANDBOX_NS_ALL);
}

Test(ns, unknown_names_are_errors_naming_the_option_and_the_choices)
{
    rg_error err = RG_ERROR_INIT;
    unsigned set = 0;

    cr_assert_lt(sandbox_ns_parse(&set, "net,cgroup", "--share", &err), 0);
    cr_assert(strstr(err.msg, "--share") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "'cgroup'") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "user, mount, pid") != NULL, "%s", err.msg);
    cr_assert_lt(sandbox_ns_parse(&set, "ne", "--share", &err), 0, "prefixes do not match");
}

Test(ns, sets_map_to_clone_flags_and_names)
{
    char names[64];

    cr_assert_eq(sandbox_ns_clone_flags(SANDBOX_NS_ALL),
                 (unsigned long)(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
                                 CLONE_NEWUTS | CLONE_NEWNET));
    cr_assert_eq(sandbox_ns_clone_flags(0), 0);
    sandbox_ns_names(names, sizeof(names), SANDBOX_NS_PID | SANDBOX_NS_NET);
    cr_assert_str_eq(names, "pid,net");
    sandbox_ns_names(names, sizeof(names), 0);
    cr_assert_str_eq(names, "none");
}

Test(ns, without_the_user_namespace_only_root_may_create_others)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(sandbox_ns_check(SANDBOX_NS_ALL, 0, &err), 0);
    cr_assert_eq(sandbox_ns_check(SANDBOX_NS_ALL & ~SANDBOX_NS_USER, 1, &err), 0);
    cr_assert_eq(sandbox_ns_check(0, 0, &err), 0);
    cr_assert_lt(sandbox_ns_check(SANDBOX_NS_MOUNT | SANDBOX_NS_PID, 0, &err), 0);
    cr_assert(strstr(err.msg, "mount,pid namespaces need a user namespace") != NULL, "%s", err.msg);
}

Test(ns, a_simulated_refusal_names_the_namespace_and_the_flag)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_lt(sandbox_ns_explain(SANDBOX_NS_NET, SANDBOX_NS_NET, 1, &err), 0);
    cr_assert(strstr(err.msg, "cannot create the net namespace") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, "--share=net") != NULL, "%s", err.msg);
}
