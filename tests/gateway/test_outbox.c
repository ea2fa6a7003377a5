/*
 * The outbox (gateway/outbox.c) over the real audit stores: what it keeps
 * past its bound (the newest), the order it retries in, that a failed
 * retry keeps its records first in line, and that a retry never gives a
 * decision a second outcome: not when the first try's write landed (both
 * stores), not when another gateway already completed it as unknown (the
 * database). The database tests run on a real PostgreSQL this binary
 * starts (tests/support/pg.sh, or the one PG_URL names), a database of its
 * own per test, and skip, saying why, where PostgreSQL cannot run.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <errno.h>
#include <ftw.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "db/pool.h"
#include "db/lease.h"
#include "gateway/outbox.h"
#include "support/pg.h"

#define OID1 "1111111111111111111111111111111111111111"
#define OID2 "2222222222222222222222222222222222222222"

/* ------------------------------------------------------------------------
 * One PostgreSQL for the binary, a database (or a directory) per test
 * ------------------------------------------------------------------------ */

TEST_PG_START_HOOK()
TEST_PG_STOP_HOOK()

static char dir[PATH_MAX], logpath[PATH_MAX], dbname[64], dburl[2048];
static db_pool *pools[4];
static int npools;
static audit_log *logs[4];
static int nlogs;
static gateway_outbox *box;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static long sql_long(const char *stmt)
{
    PGconn *c = PQconnectdb(dburl);
    PGresult *r;
    long v;

    cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    r = PQexec(c, stmt);
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", stmt, PQerrorMessage(c));
    v = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return v;
}

static void teardown(void)
{
    char stmt[160];

    gateway_outbox_free(box);
    box = NULL;
    for (int i = 0; i < nlogs; i++)
        audit_close(logs[i]);
    nlogs = 0;
    for (int i = 0; i < npools; i++)
        db_pool_close(pools[i]);
    npools = 0;
    if (dbname[0]) {
        snprintf(stmt, sizeof(stmt), "DROP DATABASE IF EXISTS %s WITH (FORCE)", dbname);
        test_pg_exec(NULL, stmt);
        dbname[0] = '\0';
    }
    if (dir[0])
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    dir[0] = '\0';
}

TestSuite(outbox, .fini = teardown);

static db_pool *new_pool(void)
{
    config_state st = {.postgres = dburl, .connections = 4};
    rg_error err = RG_ERROR_INIT;
    db_pool *p = NULL;

    cr_assert_eq(db_pool_open(&p, &st, &err), 0, "%s", err.msg);
    pools[npools++] = p;
    return p;
}

static audit_log *file_log(void)
{
    const char *tmp = getenv("TMPDIR");
    rg_error err = RG_ERROR_INIT;
    audit_log *log = NULL;

    snprintf(dir, sizeof(dir), "%s/rg-outbox-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(logpath, sizeof(logpath), "%s/audit.jsonl", dir);
    cr_assert_eq(audit_open(&log, logpath, &err), 0, "%s", err.msg);
    logs[nlogs++] = log;
    return log;
}

/* A fresh migrated database of the test's own. */
static void use_database(void)
{
    rg_error err = RG_ERROR_INIT;

    test_pg_new_database(dbname, dburl, "rgoutbox");
    cr_assert_eq(db_migrate(new_pool(), NULL, NULL, &err), 0, "migrate: %s", err.msg);
}

/* The database store as gateway `gw`, its lease live. */
static audit_log *pg_log(const char *gw)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = NULL;
    db_pool *p = new_pool();

    cr_assert_eq(db_lease_register(p, gw, &err), 0, "%s", err.msg);
    cr_assert_eq(audit_pg_open(&log, p, gw, &err), 0, "%s", err.msg);
    logs[nlogs++] = log;
    return log;
}

/* ------------------------------------------------------------------------
 * Records
 * ------------------------------------------------------------------------ */

static char refs[16][64];

/* n forwarded decisions (pending); their seqs into seqs[]. */
static void decide(audit_log *log, size_t n, uint64_t *seqs)
{
    audit_record recs[16];
    rg_error err = RG_ERROR_INIT;
    uint64_t first = 0;

    cr_assert_leq(n, 16);
    for (size_t i = 0; i < n; i++) {
        snprintf(refs[i], sizeof(refs[i]), "refs/heads/b%zu", i);
        recs[i] = (audit_record){.kind = AUDIT_DECISION,
                                 .push_id = "p1",
                                 .repo = "acme/app",
                                 .ref = refs[i],
                                 .old_id = OID1,
                                 .new_id = OID2,
                                 .action = "update",
                                 .decision = "allow",
                                 .reason = "allowed"};
    }
    cr_assert_eq(audit_append_many(log, recs, n, &first, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        seqs[i] = first + i;
}

/* The outcome of decision `seq`, its strings on the caller's stack (the outbox copies). */
static audit_record outcome(uint64_t seq, const char *ref, char *text, size_t textsz)
{
    snprintf(text, textsz, "ok (decision %llu)", (unsigned long long)seq);
    return (audit_record){.kind = AUDIT_OUTCOME,
                          .push_id = "p1",
                          .repo = "acme/app",
                          .ref = ref,
                          .old_id = OID1,
                          .new_id = OID2,
                          .decision_seq = seq,
                          .outcome = text};
}

/* Add the outcome of `seq` with strings that are gone once this returns. */
static void add_outcome(uint64_t seq, const char *ref)
{
    char text[64], refcopy[64];
    audit_record r;

    snprintf(refcopy, sizeof(refcopy), "%s", ref);
    r = outcome(seq, refcopy, text, sizeof(text));
    cr_assert_eq(gateway_outbox_add(box, &r, 1), 0);
    memset(text, 'x', sizeof(text) - 1);
    memset(refcopy, 'x', sizeof(refcopy) - 1);
}

/*
 * The decision_seq of every outcome in the log, in log order, into out
 * (at most max); how many. Read with the audit reader, from either store.
 */
static size_t outcomes_in_log(uint64_t *out, size_t max, char texts[][64], int pg)
{
    audit_source src = {.path = pg ? NULL : logpath, .db = pg ? pools[0] : NULL};
    rg_error err = RG_ERROR_INIT;
    audit_reader *r = NULL;
    audit_line line;
    const char *p, *q;
    size_t n = 0;
    int rc;

    cr_assert_eq(audit_reader_open(&r, &src, &err), 0, "%s", err.msg);
    while ((rc = audit_reader_next(r, &line, &err)) == 1) {
        if (strstr(line.data, "\"type\":\"outcome\"") == NULL)
            continue;
        p = strstr(line.data, "\"decision_seq\":");
        cr_assert_not_null(p, "%s", line.data);
        cr_assert_lt(n, max);
        out[n] = strtoull(p + 15, NULL, 10);
        if (texts != NULL && (p = strstr(line.data, "\"outcome\":\"")) != NULL) {
            q = strchr(p + 11, '"');
            snprintf(texts[n], 64, "%.*s", (int)(q - p - 11), p + 11);
        }
        n++;
    }
    cr_assert_eq(rc, 0, "%s", err.msg);
    audit_reader_free(r);
    return n;
}

static void chain_verifies(int pg)
{
    audit_source src = {.path = pg ? NULL : logpath, .db = pg ? pools[0] : NULL};
    audit_verify_result v;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(audit_verify(&v, &src, &err), 0, "%s", err.msg);
    cr_assert_eq(v.bad_line, 0, "line %llu: %s", (unsigned long long)v.bad_line, v.why);
    cr_assert_eq(v.db_head_bad, 0, "%s", v.why);
}

/* ------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------ */

Test(outbox, past_its_bound_keeps_the_newest_and_retries_them_in_order)
{
    audit_log *log = file_log();
    rg_error err = RG_ERROR_INIT;
    uint64_t seqs[6], got[8];
    char texts[8][64];
    size_t app = 0, skip = 0, n;

    cr_assert_eq(gateway_outbox_new(&box, log, 3, 1 << 20, &err), 0, "%s", err.msg);
    decide(log, 6, seqs);
    /* Added out of decision order, one at a time: the outbox's order is the adding order. */
    add_outcome(seqs[0], refs[0]);
    add_outcome(seqs[5], refs[5]);
    add_outcome(seqs[1], refs[1]);
    add_outcome(seqs[4], refs[4]);
    add_outcome(seqs[2], refs[2]);
    cr_assert_eq(gateway_outbox_count(box), 3, "the bound holds");
    cr_assert_eq(gateway_outbox_flush(box, &app, &skip, &err), 0, "%s", err.msg);
    cr_assert_eq(app, 3);
    cr_assert_eq(skip, 0);
    cr_assert_eq(gateway_outbox_count(box), 0);
    n = outcomes_in_log(got, 8, texts, 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(got[0], seqs[1], "the oldest two were dropped");
    cr_assert_eq(got[1], seqs[4]);
    cr_assert_eq(got[2], seqs[2]);
    /* Deep copies: the caller's strings were overwritten after the add. */
    cr_assert_str_eq(texts[0], "ok (decision 2)");
    chain_verifies(0);
}

Test(outbox, past_its_byte_bound_keeps_the_newest_and_refuses_what_it_could_never_write)
{
    audit_log *log = file_log();
    rg_error err = RG_ERROR_INIT;
    uint64_t seqs[4], got[8];
    char big[2001], small[64];
    audit_record r;
    size_t app = 0;

    /* Records of over 2,000 bytes each: two fit in 5,000, not three. */
    cr_assert_eq(gateway_outbox_new(&box, log, 100, 5000, &err), 0, "%s", err.msg);
    decide(log, 4, seqs);
    memset(big, 'o', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 4; i++) {
        r = outcome(seqs[i], refs[i], small, sizeof(small));
        r.outcome = big;
        cr_assert_eq(gateway_outbox_add(box, &r, 1), 0);
    }
    cr_assert_eq(gateway_outbox_count(box), 2);
    /* Not an outcome, or one naming no decision: nothing kept. */
    r.kind = AUDIT_DECISION;
    cr_assert_eq(gateway_outbox_add(box, &r, 1), -EINVAL);
    r.kind = AUDIT_OUTCOME;
    r.decision_seq = 0;
    cr_assert_eq(gateway_outbox_add(box, &r, 1), -EINVAL);
    cr_assert_eq(gateway_outbox_count(box), 2);
    cr_assert_eq(gateway_outbox_flush(box, &app, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(app, 2);
    cr_assert_eq(outcomes_in_log(got, 8, NULL, 0), 2);
    cr_assert_eq(got[0], seqs[2]);
    cr_assert_eq(got[1], seqs[3]);
    chain_verifies(0);
}

Test(outbox, file_retry_skips_an_outcome_whose_write_landed)
{
    audit_log *log = file_log();
    rg_error err = RG_ERROR_INIT;
    uint64_t seqs[3], got[8];
    char text[64];
    audit_record r;
    size_t app = 0, skip = 0;

    cr_assert_eq(gateway_outbox_new(&box, log, 10, 1 << 20, &err), 0, "%s", err.msg);
    decide(log, 3, seqs);
    /* The first try of seqs[1]'s outcome reached the file though the caller saw a failure. */
    r = outcome(seqs[1], refs[1], text, sizeof(text));
    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
    add_outcome(seqs[0], refs[0]);
    add_outcome(seqs[1], refs[1]);
    add_outcome(seqs[2], refs[2]);
    add_outcome(seqs[2], refs[2]);
    cr_assert_eq(gateway_outbox_flush(box, &app, &skip, &err), 0, "%s", err.msg);
    cr_assert_eq(app, 2);
    cr_assert_eq(skip, 2, "the landed one, and the second of a pair");
    cr_assert_eq(outcomes_in_log(got, 8, NULL, 0), 3);
    cr_assert_eq(got[0], seqs[1]);
    cr_assert_eq(got[1], seqs[0]);
    cr_assert_eq(got[2], seqs[2]);
    chain_verifies(0);
}

Test(outbox, database_retry_waits_while_it_is_away_and_keeps_the_order)
{
    audit_log *log;
    rg_error err = RG_ERROR_INIT;
    uint64_t seqs[4], got[8];
    size_t app = 0, skip = 0;
    char stmt[256];

    use_database();
    log = pg_log("gw-a");
    cr_assert_eq(gateway_outbox_new(&box, log, 4, 1 << 20, &err), 0, "%s", err.msg);
    decide(log, 4, seqs);
    add_outcome(seqs[3], refs[3]);
    add_outcome(seqs[0], refs[0]);
    add_outcome(seqs[2], refs[2]);
    /* The database goes away: no new connection, the open ones cut. */
    snprintf(stmt, sizeof(stmt), "ALTER DATABASE %s ALLOW_CONNECTIONS false", dbname);
    test_pg_exec(NULL, stmt);
    snprintf(stmt, sizeof(stmt),
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s'", dbname);
    test_pg_exec(NULL, stmt);
    cr_assert_lt(gateway_outbox_flush(box, &app, &skip, &err), 0, "the database is away");
    cr_assert_eq(app + skip, 0);
    cr_assert_eq(gateway_outbox_count(box), 3, "a failed retry keeps its records");
    /* Two more while it is away: past the bound the oldest goes, the
     * records put back in front included. */
    add_outcome(seqs[1], refs[1]);
    add_outcome(seqs[1], refs[1]);
    cr_assert_eq(gateway_outbox_count(box), 4);
    snprintf(stmt, sizeof(stmt), "ALTER DATABASE %s ALLOW_CONNECTIONS true", dbname);
    test_pg_exec(NULL, stmt);
    cr_assert_eq(gateway_outbox_flush(box, &app, &skip, &err), 0, "%s", err.msg);
    cr_assert_eq(app, 3);
    cr_assert_eq(skip, 1, "the second outcome of one decision");
    cr_assert_eq(outcomes_in_log(got, 8, NULL, 1), 3);
    cr_assert_eq(got[0], seqs[0], "seqs[3]'s, the oldest, was dropped");
    cr_assert_eq(got[1], seqs[2]);
    cr_assert_eq(got[2], seqs[1]);
    cr_assert_eq(sql_long("SELECT count(*) FROM audit_records WHERE pending"), 1,
                 "only the dropped one's decision stays pending");
    chain_verifies(1);
}

Test(outbox, database_retry_skips_an_outcome_whose_commit_landed)
{
    audit_log *log;
    rg_error err = RG_ERROR_INIT;
    uint64_t seqs[2];
    char text[64];
    audit_record r;
    size_t app = 0, skip = 0;

    use_database();
    log = pg_log("gw-a");
    cr_assert_eq(gateway_outbox_new(&box, log, 10, 1 << 20, &err), 0, "%s", err.msg);
    decide(log, 2, seqs);
    /* The first try committed; its answer was lost. */
    r = outcome(seqs[0], refs[0], text, sizeof(text));
    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
    add_outcome(seqs[0], refs[0]);
    add_outcome(seqs[1], refs[1]);
    cr_assert_eq(gateway_outbox_flush(box, &app, &skip, &err), 0, "%s", err.msg);
    cr_assert_eq(app, 1);
    cr_assert_eq(skip, 1);
    cr_assert_eq(sql_long("SELECT count(*) FROM audit_records WHERE kind = 'outcome'"), 2);
    cr_assert_eq(sql_long("SELECT count(DISTINCT decision_seq) FROM audit_records"
                          " WHERE kind = 'outcome'"),
                 2, "one outcome per decision");
    cr_assert_eq(sql_long("SELECT count(*) FROM audit_records WHERE pending"), 0);
    chain_verifies(1);
}

Test(outbox, database_retry_skips_a_decision_another_gateway_completed)
{
    audit_log *a, *b;
    rg_error err = RG_ERROR_INIT;
    uint64_t seqs[2], got[8];
    char texts[8][64];
    size_t app = 0, skip = 0, done = 0;

    use_database();
    a = pg_log("gw-a");
    b = pg_log("gw-b");
    cr_assert_eq(gateway_outbox_new(&box, a, 10, 1 << 20, &err), 0, "%s", err.msg);
    decide(a, 2, seqs);
    add_outcome(seqs[0], refs[0]);
    add_outcome(seqs[1], refs[1]);
    /* gw-a's lease lapsed during the outage: gw-b took it for dead. */
    test_pg_exec(dburl, "UPDATE gateways SET seen = now() - interval '1 minute' WHERE id = 'gw-a'");
    cr_assert_eq(audit_complete_pending(b, &done, &err), 0, "%s", err.msg);
    cr_assert_eq(done, 2);
    cr_assert_eq(gateway_outbox_flush(box, &app, &skip, &err), 0, "%s", err.msg);
    cr_assert_eq(app, 0);
    cr_assert_eq(skip, 2);
    cr_assert_eq(outcomes_in_log(got, 8, texts, 1), 2, "one outcome each, gw-b's");
    cr_assert(strstr(texts[0], "unknown: gateway gw-a") == texts[0], "%s", texts[0]);
    chain_verifies(1);
}

Test(outbox, sweep_with_nothing_dead_takes_no_head_lock)
{
    audit_log *a, *b;
    rg_error err = RG_ERROR_INIT;
    uint64_t seqs[1];
    size_t done = 1;
    char stmt[160];
    PGconn *c;
    PGresult *r;

    use_database();
    /* Every connection from here on gives up on a lock after 2 s. */
    snprintf(stmt, sizeof(stmt), "ALTER DATABASE %s SET lock_timeout = '2s'", dbname);
    test_pg_exec(NULL, stmt);
    a = pg_log("gw-a");
    b = pg_log("gw-b");
    decide(a, 1, seqs);
    /* Another session holds the head row's lock (an append in progress):
     * a sweep that finds no dead gateway's record must not wait for it. */
    c = PQconnectdb(dburl);
    cr_assert_eq(PQstatus(c), CONNECTION_OK);
    PQclear(PQexec(c, "BEGIN"));
    r = PQexec(c, "SELECT seq FROM audit_head FOR UPDATE");
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
    PQclear(r);
    cr_assert_eq(audit_complete_pending(b, &done, &err), 0, "waited for the lock: %s", err.msg);
    cr_assert_eq(done, 0, "gw-a is alive");
    /* With gw-a dead the sweep does take the lock, and gives up while it is held. */
    test_pg_exec(dburl, "UPDATE gateways SET seen = now() - interval '1 minute' WHERE id = 'gw-a'");
    cr_assert_lt(audit_complete_pending(b, &done, &err), 0, "the lock was not taken");
    cr_assert(strstr(err.msg, "lock") != NULL, "%s", err.msg);
    PQclear(PQexec(c, "ROLLBACK"));
    PQfinish(c);
    cr_assert_eq(audit_complete_pending(b, &done, &err), 0, "%s", err.msg);
    cr_assert_eq(done, 1);
}
