/* The console's pushes listing (console/pushes.c) on a synthetic log:
 * newest first, paged with an "older" flag, a push of several refs is one
 * row, filters match a push by any of its refs, and one push's page joins
 * its decisions to their outcome records. Every test runs twice: on the
 * file (suite pushes) and on the same lines in a real PostgreSQL's
 * audit_records (suite pushes_db: $PG_URL, else one started for the run
 * by tests/support/pg.sh; skipped, saying why, where none can run). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/pushes.h"
#include "db/pool.h"
#include "support/pg.h"

static char path[64];
static audit_source src = {path, NULL};

/* 120 one-ref pushes p1..p120 (every third denied, run r0..r6), then push
 * p121 with two refs (the first naming its policy's digest), then an event,
 * then p121's outcome for its first ref. */
static void setup(void)
{
    FILE *f;
    int seq = 0;

    snprintf(path, sizeof(path), "/tmp/rg-pushes-XXXXXX");
    close(mkstemp(path));
    f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 1; i <= 120; i++)
        fprintf(f,
                "{\"v\":2,\"seq\":%d,\"prev\":\"x\",\"time\":\"t%d\",\"type\":\"decision\","
                "\"push_id\":\"p%d\",\"run\":\"r%d\",\"repo\":\"h/a\",\"ref\":\"refs/heads/b%d\","
                "\"decision\":\"%s\",\"rule\":\"x\",\"reason\":\"why\",\"outcome\":\"ok\"}\n",
                ++seq, i, i, i % 7, i, i % 3 ? "allow" : "deny");
    for (int r = 0; r < 2; r++)
        fprintf(f,
                "{\"v\":2,\"seq\":%d,\"prev\":\"x\",\"time\":\"t121\",\"type\":\"decision\","
                "\"push_id\":\"p121\",\"run\":\"r9\",\"repo\":\"h/a\",\"ref\":\"refs/heads/m%d\","
                "\"decision\":\"%s\",\"rule\":\"x\",\"reason\":\"why\"%s,\"outcome\":null}\n",
                ++seq, r, r ? "deny" : "allow", r ? "" : ",\"policy\":\"sha256:aa\"");
    fprintf(f,
            "{\"v\":2,\"seq\":%d,\"prev\":\"x\",\"time\":\"t\",\"type\":\"event\","
            "\"event\":\"stop\"}\n",
            ++seq);
    fprintf(f,
            "{\"v\":2,\"seq\":%d,\"prev\":\"x\",\"time\":\"t\",\"type\":\"outcome\","
            "\"push_id\":\"p121\",\"repo\":\"h/a\",\"ref\":\"refs/heads/m0\","
            "\"decision_seq\":121,\"outcome\":\"ok\"}\n",
            ++seq);
    fclose(f);
}

static void teardown(void)
{
    unlink(path);
}

/* ------------------------------------------------------------------------
 * The database
 * ------------------------------------------------------------------------ */

static db_pool *pool;
static PGconn *lock; /* holds the lock that keeps tests in parallel off each other's rows */

TEST_PG_START_HOOK()
TEST_PG_STOP_HOOK()

/* The file's lines as the rows of audit_records, and src reading them there. */
static void setup_db(void)
{
    config_state st = {.postgres = getenv("PG_URL"), .connections = 1};
    rg_error err = RG_ERROR_INIT;
    char line[1024], seq[32];
    const char *params[2] = {seq, line};
    int lengths[2] = {0, 0}, formats[2] = {0, 1};
    PGconn *c;
    FILE *f;

    setup();
    if (st.postgres == NULL)
        cr_skip_test("no PostgreSQL: PG_URL is unset and tests/support/pg.sh could not start one");
    lock = PQconnectdb(st.postgres);
    cr_assert_eq(PQstatus(lock), CONNECTION_OK, "%s", PQerrorMessage(lock));
    PQclear(PQexec(lock, "SELECT pg_advisory_lock(8470002)"));
    cr_assert_eq(db_pool_open(&pool, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(db_migrate(pool, NULL, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(db_acquire(pool, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(db_exec(c, NULL, "emptying", "TRUNCATE audit_records", 0, NULL, &err), 0);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    for (int n = 1; fgets(line, sizeof(line), f) != NULL; n++) {
        lengths[1] = (int)strcspn(line, "\n");
        snprintf(seq, sizeof(seq), "%d", n);
        cr_assert_eq(db_exec_bin(c, NULL, "filling",
                                 "INSERT INTO audit_records (seq, line, kind) "
                                 "VALUES ($1::bigint, $2::bytea, 'decision')",
                                 2, params, lengths, formats, &err),
                     0, "%s", err.msg);
    }
    fclose(f);
    db_release(pool, c);
    src.path = NULL;
    src.db = pool;
}

static void teardown_db(void)
{
    db_pool_close(pool);
    pool = NULL;
    if (lock != NULL)
        PQfinish(lock);
    lock = NULL;
    src.path = path;
    src.db = NULL;
    teardown();
}

TestSuite(pushes, .init = setup, .fini = teardown);
TestSuite(pushes_db, .init = setup_db, .fini = teardown_db);

/* A test of both suites: the same assertions on the file and on the database. */
#define BOTH(name)                                                                                 \
    static void name(void);                                                                        \
    Test(pushes, name)                                                                             \
    {                                                                                              \
        name();                                                                                    \
    }                                                                                              \
    Test(pushes_db, name)                                                                          \
    {                                                                                              \
        name();                                                                                    \
    }                                                                                              \
    static void name(void)

BOTH(the_newest_come_first_and_pages_say_whether_older_ones_exist)
{
    console_push_filter f = {0};
    console_push_row *rows = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t n = 0;
    int more = 0;

    cr_assert_eq(console_pushes_list(&rows, &n, &more, &src, &f, 0, 50, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 50);
    cr_expect(more);
    cr_expect_str_eq(rows[0].push_id, "p121");
    cr_expect_eq(rows[0].refs, 2);
    cr_expect_eq(rows[0].allowed, 1);
    cr_expect_eq(rows[0].denied, 1);
    cr_expect_str_eq(rows[0].first_ref, "refs/heads/m0");
    cr_expect_str_eq(rows[1].push_id, "p120");
    cr_expect_str_eq(rows[49].push_id, "p72");
    free(rows);
    cr_assert_eq(console_pushes_list(&rows, &n, &more, &src, &f, 2, 50, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 21);
    cr_expect(!more);
    cr_expect_str_eq(rows[20].push_id, "p1");
    free(rows);
    cr_assert_eq(console_pushes_list(&rows, &n, &more, &src, &f, 3, 50, &err), 0);
    cr_expect_eq(n, 0);
    free(rows);
    cr_expect_lt(
        console_pushes_list(&rows, &n, &more, &src, &f, CONSOLE_PUSHES_PAGES_MAX, 50, &err), 0);
}

BOTH(filters_match_a_push_by_any_of_its_refs)
{
    console_push_filter f = {.ref = "refs/heads/m1"};
    console_push_row *rows = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t n = 0;
    int more = 0;

    cr_assert_eq(console_pushes_list(&rows, &n, &more, &src, &f, 0, 50, &err), 0);
    cr_assert_eq(n, 1);
    cr_expect_str_eq(rows[0].push_id, "p121");
    free(rows);
    f = (console_push_filter){.run = "r0", .decision = "deny"};
    cr_assert_eq(console_pushes_list(&rows, &n, &more, &src, &f, 0, 50, &err), 0);
    /* i % 7 == 0 and i % 3 == 0: 21, 42, ..., 105. */
    cr_assert_eq(n, 5);
    cr_expect_str_eq(rows[0].push_id, "p105");
    cr_expect_str_eq(rows[4].push_id, "p21");
    free(rows);
}

BOTH(runs_come_most_recent_first_each_once)
{
    console_run_row *rows = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t n = 0;
    int more = 0;

    cr_assert_eq(console_runs_list(&rows, &n, &more, &src, 0, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    cr_expect(more);
    cr_expect_str_eq(rows[0].run, "r9");
    cr_expect_str_eq(rows[0].time, "t121");
    cr_expect_str_eq(rows[1].run, "r1"); /* p120 */
    cr_expect_str_eq(rows[2].run, "r0"); /* p119 */
    free(rows);
    /* r0..r6 and r9: eight runs, the last page holds two. */
    cr_assert_eq(console_runs_list(&rows, &n, &more, &src, 2, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 2);
    cr_expect(!more);
    free(rows);
}

BOTH(one_push_joins_its_outcomes)
{
    console_push p;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(console_push_get(&p, &src, "p121", &err), 0, "%s", err.msg);
    cr_assert_eq(p.nrefs, 2);
    cr_expect_str_eq(p.refs[0].ref, "refs/heads/m0");
    cr_expect_str_eq(p.refs[0].outcome, "ok");
    cr_expect_str_eq(p.refs[1].outcome, "pending");
    cr_expect_str_eq(p.refs[0].policy, "sha256:aa", "the digest of the policy that decided");
    cr_expect_str_eq(p.refs[1].policy, "", "a record that names none");
    cr_expect_str_eq(p.run, "r9");
    console_push_clear(&p);
    cr_expect_eq(console_push_get(&p, &src, "p999", &err), -ENOENT);
    /* p12 is a prefix of p121: its page holds only its own ref. */
    cr_assert_eq(console_push_get(&p, &src, "p12", &err), 0, "%s", err.msg);
    cr_expect_eq(p.nrefs, 1);
    cr_expect_str_eq(p.refs[0].ref, "refs/heads/b12");
    console_push_clear(&p);
}
