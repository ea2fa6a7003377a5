/* The console's sessions (console/session.c): random ids, a CSRF token
 * each, nothing found by a wrong, short or dropped id, a full table
 * evicting the oldest login form first. */
#include <criterion/criterion.h>
#include <string.h>

#include "console/session.h"

Test(session, a_session_is_found_by_its_id_only)
{
    console_sessions *s = NULL;
    char id[CONSOLE_SESSION_ID_LEN + 1], csrf[CONSOLE_SESSION_ID_LEN + 1];
    char user[GATEWAY_REVIEWER_NAME_MAX + 1], got[CONSOLE_SESSION_ID_LEN + 1];
    char other[CONSOLE_SESSION_ID_LEN + 1];

    cr_assert_eq(console_sessions_new(&s), 0);
    cr_assert_eq(console_session_create(s, id, csrf, "alice"), 0);
    cr_expect_eq(strlen(id), CONSOLE_SESSION_ID_LEN);
    cr_expect_neq(strcmp(id, csrf), 0);
    cr_assert_eq(console_session_get(s, id, user, got), 1);
    cr_expect_str_eq(user, "alice");
    cr_expect_str_eq(got, csrf);
    memcpy(other, id, sizeof(other));
    other[0] = other[0] == 'a' ? 'b' : 'a';
    cr_expect_eq(console_session_get(s, other, user, got), 0);
    cr_expect_eq(console_session_get(s, "", user, got), 0);
    cr_expect_eq(console_session_get(s, NULL, user, got), 0);
    id[10] = '\0';
    cr_expect_eq(console_session_get(s, id, user, got), 0, "a prefix");
    console_sessions_free(s);
}

Test(session, a_dropped_session_is_gone)
{
    console_sessions *s = NULL;
    char id[CONSOLE_SESSION_ID_LEN + 1], csrf[CONSOLE_SESSION_ID_LEN + 1];
    char user[GATEWAY_REVIEWER_NAME_MAX + 1];

    cr_assert_eq(console_sessions_new(&s), 0);
    cr_assert_eq(console_session_create(s, id, csrf, "bob"), 0);
    console_session_drop(s, id);
    cr_expect_eq(console_session_get(s, id, user, csrf), 0);
    console_sessions_free(s);
}

Test(session, a_full_table_evicts_login_forms_before_reviewers)
{
    console_sessions *s = NULL;
    char id[CONSOLE_SESSION_ID_LEN + 1], csrf[CONSOLE_SESSION_ID_LEN + 1];
    char keep[CONSOLE_SESSION_ID_LEN + 1], user[GATEWAY_REVIEWER_NAME_MAX + 1];

    cr_assert_eq(console_sessions_new(&s), 0);
    cr_assert_eq(console_session_create(s, keep, csrf, "alice"), 0);
    /* A flood of login forms never pushes the reviewer out. */
    for (int i = 0; i < 3 * CONSOLE_SESSIONS_MAX; i++)
        cr_assert_eq(console_session_create(s, id, csrf, ""), 0);
    cr_expect_eq(console_session_get(s, keep, user, csrf), 1);
    cr_expect_eq(console_session_get(s, id, user, csrf), 1, "the newest form");
    console_sessions_free(s);
}
