/* Login throttling (console/throttle.c): five failures in the window lock a
 * name until the window ends; other names and a cleared name are free. */
#include <criterion/criterion.h>

#include <stdio.h>

#include "console/throttle.h"

Test(throttle, five_failures_lock_a_name_for_the_window)
{
    console_throttle *t = NULL;
    long long now = 1000000;

    cr_assert_eq(console_throttle_new(&t), 0);
    for (int i = 0; i < CONSOLE_THROTTLE_FAILURES; i++) {
        cr_expect(console_throttle_allows(t, "alice", now + i));
        console_throttle_failed(t, "alice", now + i);
    }
    cr_expect(!console_throttle_allows(t, "alice", now + 10));
    cr_expect(!console_throttle_allows(t, "alice", now + CONSOLE_THROTTLE_WINDOW - 1));
    cr_expect(console_throttle_allows(t, "bob", now + 10));
    cr_expect(console_throttle_allows(t, "alice", now + CONSOLE_THROTTLE_WINDOW));
    console_throttle_free(t);
}

Test(throttle, a_success_clears_the_count)
{
    console_throttle *t = NULL;

    cr_assert_eq(console_throttle_new(&t), 0);
    for (int i = 0; i < CONSOLE_THROTTLE_FAILURES - 1; i++)
        console_throttle_failed(t, "alice", 10);
    console_throttle_clear(t, "alice");
    console_throttle_failed(t, "alice", 11);
    cr_expect(console_throttle_allows(t, "alice", 12));
    console_throttle_free(t);
}

Test(throttle, a_full_table_keeps_working)
{
    console_throttle *t = NULL;
    char name[32];

    cr_assert_eq(console_throttle_new(&t), 0);
    for (int i = 0; i < 2 * CONSOLE_THROTTLE_NAMES; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        console_throttle_failed(t, name, 100 + i);
    }
    for (int i = 0; i < CONSOLE_THROTTLE_FAILURES; i++)
        console_throttle_failed(t, "x", 1000);
    cr_expect(!console_throttle_allows(t, "x", 1001));
    console_throttle_free(t);
}
