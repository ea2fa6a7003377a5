/*
 * A real PostgreSQL for a Criterion test binary, through
 * tests/support/pg.sh: started once in the runner process before the tests
 * (ReportHook(PRE_ALL)) and stopped after them (ReportHook(POST_ALL)); each
 * test makes its own database. When $PG_URL is set (a script test started
 * one), that one is used and nothing is started or stopped.
 */
#ifndef RG_TESTS_SUPPORT_PG_H
#define RG_TESTS_SUPPORT_PG_H

#include <criterion/hooks.h>

/*
 * Start one unless $PG_URL is set: sets PG_URL, PG_DIR and PG_BIN. When it
 * cannot, sets RG_PG_SKIP to why (pg_start printed more on stderr), for
 * tests to cr_skip with.
 */
void test_pg_start(void);

/* Stop what test_pg_start started; nothing otherwise. */
void test_pg_stop(void);

/* Run `cmd` in bash with pg.sh loaded (PG_* from the environment); its exit status. */
int test_pg_sh(const char *cmd);

/*
 * A new empty database of the test's own on the server $PG_URL names,
 * "<prefix>_<pid>_<n>": its name in name (64 bytes) and its URL in url
 * (2048 bytes). Skips the test, saying why, when there is no PostgreSQL.
 */
void test_pg_new_database(char name[64], char url[2048], const char *prefix);

/* Run one statement on `url` (NULL: $PG_URL); the test fails if it fails. */
void test_pg_exec(const char *url, const char *stmt);

/*
 * The report hooks a binary that uses test_pg_start needs, once per binary,
 * each on a line of its own (Criterion names a hook by its line).
 */
#define TEST_PG_START_HOOK()                                                                       \
    ReportHook(PRE_ALL)(struct criterion_test_set * set)                                           \
    {                                                                                              \
        (void)set;                                                                                 \
        test_pg_start();                                                                           \
    }
#define TEST_PG_STOP_HOOK()                                                                        \
    ReportHook(POST_ALL)(struct criterion_global_stats * stats)                                    \
    {                                                                                              \
        (void)stats;                                                                               \
        test_pg_stop();                                                                            \
    }

#endif
