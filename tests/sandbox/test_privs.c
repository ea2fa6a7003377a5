/*
 * sandbox/privs.c: the capabilities that go around Landlock are not on the
 * keep list, and dropping leaves no_new_privs set and them gone.
 */
#include <criterion/criterion.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "sandbox/privs.h"

Test(privs, capabilities_that_bypass_file_rules_are_not_kept)
{
    const int dropped[] = {
        CAP_SYS_ADMIN, CAP_SYS_MODULE,      CAP_SYS_RAWIO, CAP_SYS_PTRACE,      CAP_MKNOD,
        CAP_SYS_BOOT,  CAP_NET_ADMIN,       CAP_NET_RAW,   CAP_DAC_READ_SEARCH, CAP_KILL,
        CAP_SETPCAP,   CAP_SETFCAP,         CAP_BPF,       CAP_PERFMON,         CAP_SYSLOG,
        CAP_SYS_TIME,  CAP_LINUX_IMMUTABLE, CAP_MAC_ADMIN, CAP_MAC_OVERRIDE};
    size_t i;

    for (i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
        cr_assert_not(sandbox_privs_kept(dropped[i]), "capability %d is kept", dropped[i]);
    cr_assert(sandbox_privs_kept(CAP_DAC_OVERRIDE));
    cr_assert(sandbox_privs_kept(CAP_CHOWN));
    cr_assert_not(sandbox_privs_kept(63), "unknown capabilities are dropped");
}

Test(privs, drop_sets_no_new_privs_and_empties_the_bounding_set_of_the_rest)
{
    rg_error err = RG_ERROR_INIT;
    int cap;

    cr_assert_eq(sandbox_privs_drop(&err), 0, "%s", err.msg);
    cr_assert_eq(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 1);
    for (cap = 0; cap < 64; cap++) {
        int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

        if (in < 0)
            break;
        if (!sandbox_privs_kept(cap))
            cr_assert_eq(in, 0, "capability %d is still in the bounding set", cap);
    }
}
