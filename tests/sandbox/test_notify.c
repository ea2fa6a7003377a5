/*
 * sandbox/notify.c's tally: denials counted by name in the order first
 * seen, with the first caller, bounded in names, and told in one line.
 * (The supervisor itself is tested with the filter, in test_seccomp.c.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/notify.h"

Test(notify, counts_by_name_and_keeps_the_first_caller)
{
    sandbox_notify_tally t;
    char out[256];

    memset(&t, 0, sizeof(t));
    sandbox_notify_tally_add(&t, "keyctl", 10, "keyutil");
    sandbox_notify_tally_add(&t, "ptrace", 11, "strace");
    sandbox_notify_tally_add(&t, "keyctl", 12, "other");
    sandbox_notify_tally_add(&t, "keyctl", 13, "");
    cr_assert_eq(t.n, 2);
    cr_assert_eq(t.total, 4);
    cr_assert_eq(t.c[0].n, 3);
    cr_assert_eq(t.c[0].pid, 10);
    cr_assert_str_eq(t.c[0].comm, "keyutil");
    sandbox_notify_tally_format(out, sizeof(out), &t);
    cr_assert_str_eq(out, "keyctl x3 (by keyutil, pid 10), ptrace (by strace, pid 11)");
    sandbox_notify_tally_add(&t, "bpf", 11, "strace");
    sandbox_notify_tally_add(&t, "mount", 14, "");
    sandbox_notify_tally_format(out, sizeof(out), &t);
    cr_assert_str_eq(out, "keyctl x3 (by keyutil, pid 10), ptrace, bpf (by strace, pid 11), "
                          "mount (by pid 14)");
}

Test(notify, nothing_counted_is_an_empty_line_and_a_short_buffer_is_cut)
{
    sandbox_notify_tally t;
    char out[16];

    memset(&t, 0, sizeof(t));
    sandbox_notify_tally_format(out, sizeof(out), &t);
    cr_assert_str_eq(out, "");
    sandbox_notify_tally_add(&t, "keyctl", 10, "");
    sandbox_notify_tally_add(&t, "ptrace", 11, "a-long-name");
    sandbox_notify_tally_format(out, sizeof(out), &t);
    cr_assert_eq(strlen(out), sizeof(out) - 1);
    cr_assert(strncmp(out, "keyctl (by pid ", 15) == 0, "%s", out);
}

Test(notify, names_past_the_bound_are_counted_in_the_total_only)
{
    static char names[SANDBOX_NOTIFY_NAMES_MAX + 5][8];
    sandbox_notify_tally t;
    size_t i;

    memset(&t, 0, sizeof(t));
    for (i = 0; i < SANDBOX_NOTIFY_NAMES_MAX + 5; i++) {
        snprintf(names[i], sizeof(names[i]), "c%zu", i);
        sandbox_notify_tally_add(&t, names[i], 1, "x");
    }
    cr_assert_eq(t.n, SANDBOX_NOTIFY_NAMES_MAX);
    cr_assert_eq(t.total, SANDBOX_NOTIFY_NAMES_MAX + 5);
}
