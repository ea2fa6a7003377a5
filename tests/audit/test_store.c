/*
 * The audit stores (audit/store_file.c, audit/store_pg.c) against one suite: every
 * store test runs on the file and on a real PostgreSQL, and checks the
 * stored bytes themselves (the chain recomputed here, from the lines as
 * the store keeps them). Then what only the database store has: several
 * gateways appending to one chain at once, the database going away in the
 * middle of appends and coming back, the records a dead gateway left
 * pending completed exactly once by another, and `refgate db import`'s
 * copy of a file log.
 *
 * The binary starts one PostgreSQL for all its tests (tests/support/pg.sh,
 * or the one PG_URL names) and gives each test a database of its own; the
 * database tests skip, saying why, where PostgreSQL cannot run.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <criterion/parameterized.h>
#include <endian.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "db/pool.h"
#include "db/lease.h"
#include "support/pg.h"

#define ZEROS "0000000000000000000000000000000000000000000000000000000000000000"
#define OID0  "0000000000000000000000000000000000000000"
#define OID1  "1111111111111111111111111111111111111111"

/* ------------------------------------------------------------------------
 * One PostgreSQL for the whole binary (started in the runner process)
 * ------------------------------------------------------------------------ */

TEST_PG_START_HOOK()
TEST_PG_STOP_HOOK()

/* ------------------------------------------------------------------------
 * The store under test, and a database of its own per test
 * ------------------------------------------------------------------------ */

typedef enum store_kind { STORE_FILE, STORE_PG } store_kind;

static store_kind kind;
static char dir[PATH_MAX], logpath[PATH_MAX];
static char dbname[64], dburl[2048];
static db_pool *pools[16];
static int npools;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* One value of a query on the test's database, as text (static buffer). */
static const char *sql_value(const char *stmt)
{
    static char out[4096];
    PGconn *c = PQconnectdb(dburl);
    PGresult *r;

    cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    r = PQexec(c, stmt);
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", stmt, PQerrorMessage(c));
    cr_assert_eq(PQntuples(r), 1, "%s", stmt);
    snprintf(out, sizeof(out), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return out;
}

static db_pool *new_pool(void)
{
    config_state st = {.postgres = dburl, .connections = 8};
    rg_error err = RG_ERROR_INIT;
    db_pool *p = NULL;

    cr_assert_lt(npools, (int)(sizeof(pools) / sizeof(pools[0])));
    cr_assert_eq(db_pool_open(&p, &st, &err), 0, "%s", err.msg);
    pools[npools++] = p;
    return p;
}

static void teardown(void)
{
    char stmt[160];

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

TestSuite(store, .fini = teardown);

/* Make the test's place: a state directory, and for the database a fresh migrated one. */
static void use_store(store_kind k)
{
    const char *tmp = getenv("TMPDIR");
    rg_error err = RG_ERROR_INIT;

    kind = k;
    snprintf(dir, sizeof(dir), "%s/rg-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(logpath, sizeof(logpath), "%s/audit.jsonl", dir);
    if (k == STORE_FILE)
        return;
    test_pg_new_database(dbname, dburl, "rgtest");
    cr_assert_eq(db_migrate(new_pool(), NULL, NULL, &err), 0, "migrate: %s", err.msg);
}

/* The store as gateway `gw` sees it (the file has no gateways); its lease is live. */
static audit_log *open_as(const char *gw)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = NULL;
    db_pool *p;

    if (kind == STORE_FILE) {
        cr_assert_eq(audit_open(&log, logpath, &err), 0, "open: %s", err.msg);
        return log;
    }
    p = new_pool();
    cr_assert_eq(db_lease_register(p, gw, &err), 0, "%s", err.msg);
    cr_assert_eq(audit_pg_open(&log, p, gw, &err), 0, "open: %s", err.msg);
    return log;
}

static audit_log *open_log(void)
{
    return open_as("gw-a");
}

/* Gateway `gw` died: its lease is old (the file's writer simply closed). */
static void lease_expires(const char *gw)
{
    char stmt[200];

    if (kind == STORE_FILE)
        return;
    snprintf(stmt, sizeof(stmt),
             "UPDATE gateways SET seen = now() - interval '1 minute' WHERE id = '%s'", gw);
    test_pg_exec(dburl, stmt);
}

/* ------------------------------------------------------------------------
 * The stored lines, and the chain recomputed from them
 * ------------------------------------------------------------------------ */

typedef struct lines {
    char **data; /* each NUL-terminated, without its newline */
    size_t *len;
    size_t n;
} lines;

static void lines_add(lines *ls, const char *data, size_t len)
{
    ls->data = realloc(ls->data, (ls->n + 1) * sizeof(*ls->data));
    ls->len = realloc(ls->len, (ls->n + 1) * sizeof(*ls->len));
    cr_assert(ls->data && ls->len);
    ls->data[ls->n] = malloc(len + 1);
    memcpy(ls->data[ls->n], data, len);
    ls->data[ls->n][len] = '\0';
    ls->len[ls->n++] = len;
}

static void lines_free(lines *ls)
{
    for (size_t i = 0; i < ls->n; i++)
        free(ls->data[i]);
    free(ls->data);
    free(ls->len);
    memset(ls, 0, sizeof(*ls));
}

static lines file_lines(const char *path)
{
    lines ls = {0};
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;

    if (f == NULL)
        return ls;
    while ((got = getline(&line, &cap, f)) > 0) {
        cr_assert_eq(line[got - 1], '\n', "a torn line in %s", path);
        lines_add(&ls, line, (size_t)got - 1);
    }
    free(line);
    fclose(f);
    return ls;
}

/* The database's rows in seq order, as their exact bytes; each row's seq is its place. */
static lines db_lines(void)
{
    PGconn *c = PQconnectdb(dburl);
    lines ls = {0};
    PGresult *r;

    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    r = PQexecParams(c, "SELECT seq, line FROM audit_records ORDER BY seq", 0, NULL, NULL, NULL,
                     NULL, 1);
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
    for (int i = 0; i < PQntuples(r); i++) {
        uint64_t seq;

        memcpy(&seq, PQgetvalue(r, i, 0), sizeof(seq));
        cr_assert_eq(be64toh(seq), (uint64_t)i + 1, "row %d has seq %llu", i + 1,
                     (unsigned long long)be64toh(seq));
        lines_add(&ls, PQgetvalue(r, i, 1), (size_t)PQgetlength(r, i, 1));
    }
    PQclear(r);
    PQfinish(c);
    return ls;
}

static lines stored(void)
{
    return kind == STORE_FILE ? file_lines(logpath) : db_lines();
}

static void sha256_hex(char out[65], const void *data, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned int mdlen = 0;

    cr_assert_eq(EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL), 1);
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[64] = '\0';
}

static json_t *line_json(const lines *ls, size_t i)
{
    json_t *j = json_loadb(ls->data[i], ls->len[i], 0, NULL);

    cr_assert(json_is_object(j), "line %zu is not JSON: %s", i + 1, ls->data[i]);
    return j;
}

static const char *jstr(json_t *j, const char *key)
{
    const char *v = json_string_value(json_object_get(j, key));

    return v ? v : "";
}

/*
 * The chain of the stored lines, recomputed: seq 1..n without a gap, each
 * prev the hash of the line before, and the store's head at the last one.
 */
static void assert_chain(size_t want, audit_log *log)
{
    rg_error err = RG_ERROR_INIT;
    lines ls = stored();
    char prev[65] = ZEROS, hash[65];
    uint64_t seq = 99;
    json_t *j;

    cr_assert_eq(ls.n, want, "%zu records stored, expected %zu", ls.n, want);
    for (size_t i = 0; i < ls.n; i++) {
        j = line_json(&ls, i);
        cr_assert_eq(json_integer_value(json_object_get(j, "seq")), (json_int_t)i + 1, "line %zu",
                     i + 1);
        cr_assert_str_eq(jstr(j, "prev"), prev, "line %zu does not chain", i + 1);
        json_decref(j);
        sha256_hex(prev, ls.data[i], ls.len[i]);
    }
    if (log != NULL) {
        cr_assert_eq(audit_head(log, &seq, hash, &err), 0, "%s", err.msg);
        cr_assert_eq(seq, (uint64_t)ls.n);
        cr_assert_str_eq(hash, prev);
    }
    if (kind == STORE_FILE && ls.n > 0) {
        const audit_source src = {.path = logpath, .db = NULL};
        audit_verify_result res;

        cr_assert_eq(audit_verify(&res, &src, &err), 0, "%s", err.msg);
        cr_assert_eq(res.bad_line, 0, "%s", res.why);
    } else if (kind == STORE_PG) {
        cr_assert_eq(strtoull(sql_value("SELECT seq FROM audit_head"), NULL, 10), ls.n);
        cr_assert_str_eq(sql_value("SELECT hash FROM audit_head"), prev);
    }
    lines_free(&ls);
}

/* ------------------------------------------------------------------------
 * Records
 * ------------------------------------------------------------------------ */

typedef struct rec_bufs {
    char push[32], reason[64];
} rec_bufs;

/* Record i: odd ones are denied pushes to main, even ones allowed feature pushes. */
static audit_record make_rec(rec_bufs *b, int i)
{
    audit_record r;

    snprintf(b->push, sizeof(b->push), "push-%d", i);
    snprintf(b->reason, sizeof(b->reason), "reason number %d", i);
    memset(&r, 0, sizeof(r));
    r.kind = AUDIT_DECISION;
    r.push_id = b->push;
    r.run = i % 2 ? "run-odd" : "run-even";
    r.token_hash = "0123456789ab";
    r.remote = "127.0.0.1";
    r.repo = "local/acme/app";
    r.ref = i % 2 ? "refs/heads/main" : "refs/heads/feature/x";
    r.old_id = OID0;
    r.new_id = OID1;
    r.action = i % 2 ? "force" : "create";
    r.decision = i % 2 ? "deny" : "allow";
    r.rule = i % 2 ? "protect-main" : "features";
    r.reason = b->reason;
    r.outcome = i % 2 ? "rejected" : "forwarded: ok";
    return r;
}

/* Append records first..first+n-1, one call each, with the store opened and closed. */
static void append_records(int first, int n)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_log();
    audit_record r;
    rec_bufs b;

    for (int i = first; i < first + n; i++) {
        r = make_rec(&b, i);
        cr_assert_eq(audit_append(log, &r, &err), 0, "append: %s", err.msg);
    }
    audit_close(log);
}

/* A push of three refs: two forwarded (pending), one denied (complete). */
static uint64_t append_push(audit_log *log, const char *push)
{
    rg_error err = RG_ERROR_INIT;
    audit_record recs[3] = {
        {.kind = AUDIT_DECISION,
         .push_id = push,
         .repo = "local/acme/app",
         .ref = "refs/heads/feature/a",
         .decision = "allow",
         .action = "create"},
        {.kind = AUDIT_DECISION,
         .push_id = push,
         .repo = "local/acme/app",
         .ref = "refs/heads/feature/b",
         .decision = "allow",
         .action = "create"},
        {.kind = AUDIT_DECISION,
         .push_id = push,
         .repo = "local/acme/app",
         .ref = "refs/heads/main",
         .decision = "deny",
         .action = "force",
         .outcome = "rejected"},
    };
    uint64_t first = 0;

    cr_assert_eq(audit_append_many(log, recs, 3, &first, &err), 0, "%s", err.msg);
    return first;
}

static void append_outcome(audit_log *log, uint64_t decision_seq, const char *ref,
                           const char *outcome)
{
    rg_error err = RG_ERROR_INIT;
    audit_record r = {.kind = AUDIT_OUTCOME,
                      .push_id = "p",
                      .repo = "local/acme/app",
                      .ref = ref,
                      .decision_seq = decision_seq,
                      .outcome = outcome};

    cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
}

static size_t complete_as(const char *gw)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log = open_as(gw);
    size_t n = 99;

    cr_assert_eq(audit_complete_pending(log, &n, &err), 0, "%s", err.msg);
    audit_close(log);
    return n;
}

/* ------------------------------------------------------------------------
 * The suite every store passes
 * ------------------------------------------------------------------------ */

/* A test of the suite: run once per store, *k saying which. */
#define STORE_TEST(name)                                                                           \
    ParameterizedTestParameters(store, name)                                                       \
    {                                                                                              \
        static store_kind kinds[] = {STORE_FILE, STORE_PG};                                        \
        return cr_make_param_array(store_kind, kinds, 2);                                          \
    }                                                                                              \
    ParameterizedTest(store_kind *k, store, name)

STORE_TEST(records_chain_by_the_hash_of_the_previous_line)
{
    use_store(*k);
    append_records(1, 5);
    assert_chain(5, NULL);
}

STORE_TEST(append_many_writes_consecutive_records_and_says_the_first_seq)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log;
    audit_record recs[3];
    rec_bufs b[3];
    uint64_t first = 99;
    lines ls;
    json_t *j;

    use_store(*k);
    log = open_log();
    for (int i = 0; i < 3; i++)
        recs[i] = make_rec(&b[i], i);
    cr_assert_eq(audit_append_many(log, recs, 3, &first, &err), 0, "%s", err.msg);
    cr_assert_eq(first, 1);
    cr_assert_eq(audit_append_many(log, recs, 0, NULL, &err), 0, "nothing to do is fine");
    cr_assert_eq(audit_append_many(log, recs, 2, &first, &err), 0, "%s", err.msg);
    cr_assert_eq(first, 4);
    assert_chain(5, log);
    audit_close(log);
    ls = stored();
    j = line_json(&ls, 2);
    cr_assert_str_eq(jstr(j, "push_id"), "push-2");
    json_decref(j);
    lines_free(&ls);
}

STORE_TEST(reopening_continues_the_chain)
{
    use_store(*k);
    append_records(1, 3);
    append_records(4, 2);
    append_records(6, 1);
    assert_chain(6, NULL);
}

STORE_TEST(malformed_records_are_refused_and_nothing_is_written)
{
    static const audit_record bad[] = {
        {.kind = 0, .ref = "refs/heads/x", .decision = "allow"},
        {.kind = AUDIT_DECISION, .decision = "allow"},
        {.kind = AUDIT_OUTCOME, .decision_seq = 1},
        {.kind = AUDIT_OUTCOME, .decision_seq = 0, .outcome = "forwarded: ok"},
        {.kind = AUDIT_OUTCOME, .decision_seq = 3, .outcome = "forwarded: ok"}, /* itself */
        {.kind = AUDIT_OUTCOME, .decision_seq = 9, .outcome = "forwarded: ok"}, /* later */
        {.kind = AUDIT_EVENT, .event = "reboot"},
        {.kind = AUDIT_EVENT},
    };
    rg_error err = RG_ERROR_INIT;
    audit_record ok = {.kind = AUDIT_EVENT, .event = "start"};
    audit_log *log;

    use_store(*k);
    log = open_log();
    cr_assert_eq(audit_append(log, &ok, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        audit_record batch[2] = {ok, bad[i]};
        cr_assert_eq(audit_append_many(log, batch, 2, NULL, &err), -EINVAL, "case %zu", i);
    }
    assert_chain(1, log);
    audit_close(log);
}

#define THREADS    8
#define PER_THREAD 40

typedef struct writer {
    audit_log *log;
    int id;
    int failures;
} writer;

static void *write_thread(void *arg)
{
    writer *w = arg;
    audit_record recs[3];
    rec_bufs b[3];

    for (int i = 0; i < PER_THREAD;) {
        /* Every fifth call writes a push of three refs at once. */
        int n = (i % 5 == 4 && i + 3 <= PER_THREAD) ? 3 : 1;
        for (int m = 0; m < n; m++)
            recs[m] = make_rec(&b[m], w->id * 1000 + i + m);
        if (audit_append_many(w->log, recs, (size_t)n, NULL, NULL) < 0)
            w->failures++;
        i += n;
    }
    return NULL;
}

/* Each record once: push-<id> names it. */
static void assert_each_push_once(size_t nwriters)
{
    static char seen[16 * 1000];
    lines ls = stored();
    json_t *j;
    int id;

    memset(seen, 0, sizeof(seen));
    cr_assert_eq(ls.n, nwriters * PER_THREAD);
    for (size_t i = 0; i < ls.n; i++) {
        j = line_json(&ls, i);
        id = atoi(jstr(j, "push_id") + 5);
        cr_assert_lt(id, (int)sizeof(seen));
        cr_assert_eq(seen[id], 0, "%s written twice", jstr(j, "push_id"));
        seen[id] = 1;
        json_decref(j);
    }
    lines_free(&ls);
}

STORE_TEST(concurrent_appends_make_one_unbroken_chain)
{
    pthread_t th[THREADS];
    writer w[THREADS];
    audit_log *log;

    use_store(*k);
    log = open_log();
    for (int i = 0; i < THREADS; i++) {
        w[i] = (writer){log, i, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, write_thread, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].failures, 0);
    }
    assert_chain(THREADS * PER_THREAD, log);
    audit_close(log);
    assert_each_push_once(THREADS);
}

STORE_TEST(head_is_the_last_seq_and_its_line_hash)
{
    rg_error err = RG_ERROR_INIT;
    char hash[65], want[65];
    uint64_t seq = 99;
    audit_log *log;
    audit_record r;
    rec_bufs b;
    lines ls;

    use_store(*k);
    log = open_log();
    cr_assert_eq(audit_head(log, &seq, hash, &err), 0, "%s", err.msg);
    cr_assert_eq(seq, 0);
    cr_assert_str_eq(hash, ZEROS);
    r = make_rec(&b, 1);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(audit_append(log, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(audit_head(log, &seq, hash, &err), 0, "%s", err.msg);
    cr_assert_eq(seq, 3);
    ls = stored();
    sha256_hex(want, ls.data[2], ls.len[2]);
    lines_free(&ls);
    cr_assert_str_eq(hash, want);
    audit_close(log);
}

STORE_TEST(ready_says_the_store_can_take_a_push)
{
    rg_error err = RG_ERROR_INIT;
    audit_log *log;

    use_store(*k);
    log = open_log();
    cr_assert_eq(audit_ready(log, 64 * 1024, &err), 0, "%s", err.msg);
    audit_close(log);
}

STORE_TEST(complete_pending_completes_each_pending_ref_of_a_dead_writer_once)
{
    static const uint64_t want[] = {2, 5, 6};
    audit_log *log;
    uint64_t first;
    lines ls;
    json_t *j;

    use_store(*k);
    log = open_as("gw-dead");
    first = append_push(log, "p1"); /* seqs 1, 2, 3 */
    cr_assert_eq(first, 1);
    append_outcome(log, 1, "refs/heads/feature/a", "forwarded: ok"); /* 4 */
    first = append_push(log, "p2");                                  /* 5, 6, 7 */
    cr_assert_eq(first, 5);
    audit_close(log); /* the gateway dies: 2, 5 and 6 have no outcome */
    lease_expires("gw-dead");

    cr_assert_eq(complete_as("gw-live"), 3);
    assert_chain(7 + 3 + 1, NULL);
    ls = stored();
    for (size_t i = 7; i < 10; i++) {
        j = line_json(&ls, i);
        cr_assert_str_eq(jstr(j, "type"), "outcome");
        cr_assert_eq(json_integer_value(json_object_get(j, "decision_seq")),
                     (json_int_t)want[i - 7]);
        cr_assert(!strncmp(jstr(j, "outcome"), "unknown: ", 9), "%s", jstr(j, "outcome"));
        if (kind == STORE_PG)
            cr_assert_not_null(strstr(jstr(j, "outcome"), "gateway gw-dead stopped before "
                                                          "upstream answered (completed by "
                                                          "gateway gw-live)"),
                               "%s", jstr(j, "outcome"));
        cr_assert_str_eq(jstr(j, "ref"), i == 8 ? "refs/heads/feature/a" : "refs/heads/feature/b");
        cr_assert_str_eq(jstr(j, "push_id"), i == 7 ? "p1" : "p2");
        json_decref(j);
    }
    j = line_json(&ls, 10);
    cr_assert_str_eq(jstr(j, "type"), "event");
    cr_assert_str_eq(jstr(j, "event"), "recovered");
    cr_assert_not_null(strstr(jstr(j, "detail"), "3 forwarded"), "%s", jstr(j, "detail"));
    if (kind == STORE_PG)
        cr_assert_not_null(strstr(jstr(j, "detail"), "gateway gw-dead died"), "%s",
                           jstr(j, "detail"));
    json_decref(j);
    lines_free(&ls);

    cr_assert_eq(complete_as("gw-live"), 0, "running it again completes nothing");
    assert_chain(11, NULL);
}

STORE_TEST(complete_pending_with_nothing_pending_appends_nothing)
{
    audit_log *log;

    use_store(*k);
    cr_assert_eq(complete_as("gw-live"), 0, "an empty log has nothing pending");
    log = open_as("gw-dead");
    append_push(log, "p1");
    append_outcome(log, 1, "refs/heads/feature/a", "forwarded: ok");
    append_outcome(log, 2, "refs/heads/feature/b", "forwarded: ng stale info");
    audit_close(log);
    lease_expires("gw-dead");
    cr_assert_eq(complete_as("gw-live"), 0);
    assert_chain(5, NULL);
}

/* A line with its prev and time values blanked: what does not depend on when or after what. */
static void blank_prev_and_time(char *line)
{
    char *p = strstr(line, "\"prev\":\"");

    cr_assert_not_null(p);
    memset(p + 8, 'x', 64);
    p = strstr(line, "\"time\":\"");
    cr_assert_not_null(p);
    for (p += 8; *p && *p != '"'; p++)
        *p = 'x';
}

Test(store, both_stores_write_the_same_bytes_for_the_same_records)
{
    audit_record recs[4];
    rec_bufs b[4];
    lines fl, dl;

    use_store(STORE_PG);
    for (int i = 0; i < 3; i++)
        recs[i] = make_rec(&b[i], i);
    recs[3] = (audit_record){.kind = AUDIT_OUTCOME,
                             .push_id = "push-0",
                             .repo = "local/acme/app",
                             .ref = "refs/heads/feature/x",
                             .decision_seq = 1,
                             .outcome = "forwarded: ok"};
    recs[0].outcome = NULL;
    recs[1].ref = "refs/heads/\xff\x01\"quoted\"";
    for (store_kind s = STORE_FILE; s <= STORE_PG; s++) {
        rg_error err = RG_ERROR_INIT;
        audit_log *log;

        kind = s;
        log = open_log();
        cr_assert_eq(audit_append_many(log, recs, 4, NULL, &err), 0, "%s", err.msg);
        audit_close(log);
    }
    fl = file_lines(logpath);
    dl = db_lines();
    cr_assert_eq(fl.n, 4);
    cr_assert_eq(dl.n, 4);
    for (size_t i = 0; i < 4; i++) {
        blank_prev_and_time(fl.data[i]);
        blank_prev_and_time(dl.data[i]);
        cr_assert_str_eq(fl.data[i], dl.data[i], "record %zu", i + 1);
    }
    lines_free(&fl);
    lines_free(&dl);
}

/* ------------------------------------------------------------------------
 * Only the database: many gateways, an outage, dead gateways, import
 * ------------------------------------------------------------------------ */

Test(store, two_gateways_appending_from_several_threads_each_make_one_chain)
{
    pthread_t th[2 * THREADS];
    writer w[2 * THREADS];
    audit_log *a, *b;

    use_store(STORE_PG);
    a = open_as("gw-a");
    b = open_as("gw-b");
    for (int i = 0; i < 2 * THREADS; i++) {
        w[i] = (writer){i % 2 ? b : a, i, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, write_thread, &w[i]), 0);
    }
    for (int i = 0; i < 2 * THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].failures, 0);
    }
    assert_chain(2 * THREADS * PER_THREAD, a);
    assert_chain(2 * THREADS * PER_THREAD, b);
    assert_each_push_once(2 * THREADS);
    cr_assert_eq(atoi(sql_value("SELECT count(*) FROM audit_records WHERE gateway = 'gw-b'")),
                 THREADS * PER_THREAD, "each row names the gateway that wrote it");
    audit_close(a);
    audit_close(b);
}

/* A writer of three-record pushes until told to stop, counting what it could and could not append.
 */
#define OUTAGE_PUSHES 3000

typedef struct outage_writer {
    audit_log *log;
    int id;
    volatile int stop;
    volatile int ok, failed, other_errors;
    char last_error[512];
    volatile int ok_after; /* successes once the database was back */
    volatile int back;
} outage_writer;

static void *outage_thread(void *arg)
{
    outage_writer *w = arg;
    audit_record recs[3];
    rec_bufs b[3];
    int rc;

    /* Bounded: at most OUTAGE_PUSHES pushes, 20 ms apart. */
    for (int i = 0; !w->stop && i < OUTAGE_PUSHES; i++) {
        rg_error err = RG_ERROR_INIT;

        for (int m = 0; m < 3; m++)
            recs[m] = make_rec(&b[m], w->id * OUTAGE_PUSHES + i);
        rc = audit_append_many(w->log, recs, 3, NULL, &err);
        if (rc == 0) {
            w->ok++;
            w->ok_after += w->back;
        } else {
            w->failed++;
            w->other_errors += rc != RG_E_STATE;
            snprintf(w->last_error, sizeof(w->last_error), "%s", err.msg);
        }
        usleep(20 * 1000);
    }
    return NULL;
}

/* The sum of one counter of the writers. */
static int total(outage_writer *w, size_t n, size_t off)
{
    int t = 0;

    for (size_t i = 0; i < n; i++)
        t += *(volatile int *)((char *)&w[i] + off);
    return t;
}

/* Wait (at most 30 s) until every writer's counter at `off` is positive. */
static int each_positive(outage_writer *w, size_t n, size_t off)
{
    for (int tries = 0; tries < 3000; tries++) {
        size_t i;

        for (i = 0; i<n &&*(volatile int *)((char *)&w[i] + off)> 0; i++)
            ;
        if (i == n)
            return 1;
        usleep(10 * 1000);
    }
    return 0;
}

Test(store, appends_fail_while_the_database_is_down_none_half_written_and_work_after)
{
    outage_writer w[3];
    pthread_t th[3];
    rg_error err = RG_ERROR_INIT;
    audit_log *log;
    lines ls;
    static int count[3 * OUTAGE_PUSHES];

    use_store(STORE_PG);
    cr_assert_not_null(getenv("PG_DIR"), "the test needs the cluster's directory (PG_DIR)");
    log = open_log();
    for (int i = 0; i < 3; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].log = log;
        w[i].id = i;
        cr_assert_eq(pthread_create(&th[i], NULL, outage_thread, &w[i]), 0);
    }
    cr_assert(each_positive(w, 3, offsetof(outage_writer, ok)), "appends work at first");
    /* Killed, not shut down: transactions in flight die with it. */
    cr_assert_eq(
        test_pg_sh("pg_as_owner \"$PG_BIN/pg_ctl\" -D \"$PG_DIR/data\" -m immediate -w stop "
                   ">/dev/null"),
        0);
    cr_assert(each_positive(w, 3, offsetof(outage_writer, failed)),
              "appends fail while it is down");
    cr_assert_eq(audit_ready(log, 1024, &err), RG_E_STATE);
    cr_assert_not_null(strstr(err.msg, "the audit log's database cannot be reached"), "%s",
                       err.msg);
    cr_assert_eq(test_pg_sh("pg_restart 2>/dev/null; pg_psql \"SELECT 1\" >/dev/null"), 0);
    for (int i = 0; i < 3; i++)
        w[i].back = 1;
    cr_assert(each_positive(w, 3, offsetof(outage_writer, ok_after)),
              "appends work again once it is back (%s)", w[0].last_error);
    for (int i = 0; i < 3; i++) {
        w[i].stop = 1;
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].other_errors, 0, "every failure is RG_E_STATE: %s", w[i].last_error);
    }
    cr_assert_eq(audit_ready(log, 1024, &err), 0, "%s", err.msg);
    /* Each push is there whole or not at all; every acknowledged one is there. */
    ls = stored();
    for (size_t i = 0; i < ls.n; i++) {
        json_t *j = line_json(&ls, i);
        count[atoi(jstr(j, "push_id") + 5)]++;
        json_decref(j);
    }
    for (size_t i = 0; i < 3 * OUTAGE_PUSHES; i++)
        cr_assert(count[i] == 0 || count[i] == 3, "push-%zu has %d of its 3 records", i, count[i]);
    cr_assert_geq(ls.n, (size_t)total(w, 3, offsetof(outage_writer, ok)) * 3);
    assert_chain(ls.n, log);
    lines_free(&ls);
    audit_close(log);
}

typedef struct completer {
    audit_log *log;
    size_t n;
    int rc;
    char error[512];
} completer;

static void *complete_thread(void *arg)
{
    completer *c = arg;
    rg_error err = RG_ERROR_INIT;

    c->rc = audit_complete_pending(c->log, &c->n, &err);
    snprintf(c->error, sizeof(c->error), "%s", err.msg);
    return NULL;
}

Test(store, a_dead_gateways_pending_records_are_completed_exactly_once_and_a_live_ones_never)
{
    static const char *const gws[] = {"gw-c", "gw-d", "gw-e", "gw-f"};
    completer c[4];
    pthread_t th[4];
    audit_log *dead, *live;
    lines ls;
    int outcomes[16] = {0}, recovered = 0;

    use_store(STORE_PG);
    dead = open_as("gw-dead");
    live = open_as("gw-live");
    append_push(dead, "p1"); /* 1, 2 pending */
    append_push(live, "p2"); /* 4, 5 pending: gw-live serves on */
    append_push(dead, "p3"); /* 7, 8 pending */
    audit_close(dead);
    lease_expires("gw-dead");
    cr_assert_eq(strcmp(sql_value("SELECT count(*) FROM audit_records WHERE pending"), "6"), 0);
    /* Four gateways notice at once. */
    for (int i = 0; i < 4; i++)
        c[i] = (completer){.log = open_as(gws[i])};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, complete_thread, &c[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(c[i].rc, 0, "%s", c[i].error);
        audit_close(c[i].log);
    }
    cr_assert_eq(c[0].n + c[1].n + c[2].n + c[3].n, 4, "completed %zu+%zu+%zu+%zu", c[0].n, c[1].n,
                 c[2].n, c[3].n);
    ls = stored();
    cr_assert_eq(ls.n, 9 + 4 + 1);
    for (size_t i = 0; i < ls.n; i++) {
        json_t *j = line_json(&ls, i);

        if (!strcmp(jstr(j, "type"), "outcome"))
            outcomes[json_integer_value(json_object_get(j, "decision_seq"))]++;
        if (!strcmp(jstr(j, "event"), "recovered")) {
            recovered++;
            cr_assert_not_null(strstr(jstr(j, "detail"), "gateway gw-dead died with 4 "), "%s",
                               jstr(j, "detail"));
        }
        json_decref(j);
    }
    lines_free(&ls);
    cr_assert_eq(recovered, 1);
    for (int s = 1; s <= 9; s++)
        cr_assert_eq(outcomes[s], s == 1 || s == 2 || s == 7 || s == 8, "decision %d", s);
    cr_assert_str_eq(sql_value("SELECT string_agg(seq::text, ',' ORDER BY seq) FROM audit_records "
                               "WHERE pending"),
                     "4,5", "the live gateway's decisions stay pending");
    /* Its own outcome clears pending, as the gateway writes it. */
    append_outcome(live, 4, "refs/heads/feature/a", "forwarded: ok");
    cr_assert_str_eq(sql_value("SELECT string_agg(seq::text, ',') FROM audit_records "
                               "WHERE pending"),
                     "5");
    /* A clean stop marks it stopped: what it left is then another's to complete. */
    cr_assert_eq(complete_as("gw-c"), 0);
    test_pg_exec(dburl, "UPDATE gateways SET stopped = now() WHERE id = 'gw-live'");
    cr_assert_eq(complete_as("gw-c"), 1);
    assert_chain(9 + 4 + 1 + 1 + 2, live);
    audit_close(live);
}

Test(store, import_copies_a_file_log_byte_for_byte_into_an_empty_chain_only)
{
    audit_import_result res;
    rg_error err = RG_ERROR_INIT;
    audit_log *log;
    lines fl, dl;
    char *buf;
    FILE *f;

    use_store(STORE_PG);
    /* A file log with a pending decision (seq 2) and a completed one. */
    kind = STORE_FILE;
    log = open_log();
    append_push(log, "p1");
    append_outcome(log, 1, "refs/heads/feature/a", "forwarded: ok");
    audit_close(log);
    kind = STORE_PG;

    cr_assert_eq(audit_pg_import(&res, pools[0], logpath, &err), 0, "%s", err.msg);
    cr_assert_eq(res.records, 4);
    cr_assert_eq(res.pending, 1);
    fl = file_lines(logpath);
    dl = db_lines();
    cr_assert_eq(dl.n, fl.n);
    for (size_t i = 0; i < fl.n; i++) {
        cr_assert_eq(dl.len[i], fl.len[i]);
        cr_assert(!memcmp(dl.data[i], fl.data[i], fl.len[i]), "line %zu differs", i + 1);
    }
    lines_free(&fl);
    lines_free(&dl);
    assert_chain(4, NULL);
    cr_assert_str_eq(sql_value("SELECT string_agg(seq::text, ',') FROM audit_records WHERE "
                               "pending"),
                     "2");
    cr_assert_str_eq(sql_value("SELECT count(*) FROM audit_records WHERE gateway IS NULL"), "4");

    /* Again: the chain is no longer empty. */
    cr_assert_eq(audit_pg_import(&res, pools[0], logpath, &err), RG_E_STATE);
    cr_assert_not_null(strstr(err.msg, "not empty"), "%s", err.msg);

    /* A log that does not verify is refused, naming the line. */
    test_pg_exec(
        dburl, "DELETE FROM audit_records; UPDATE audit_head SET seq = 0, hash = repeat('0', 64)");
    f = fopen(logpath, "r+");
    cr_assert_not_null(f);
    buf = calloc(1, 1 << 16);
    cr_assert_gt(fread(buf, 1, (1 << 16) - 1, f), 0);
    *strstr(buf, "feature/b") = 'F';
    rewind(f);
    fputs(buf, f);
    fclose(f);
    free(buf);
    cr_assert_eq(audit_pg_import(&res, pools[0], logpath, &err), RG_E_TAMPER);
    cr_assert_not_null(strstr(err.msg, "does not verify (line "), "%s", err.msg);
    cr_assert_str_eq(sql_value("SELECT count(*) FROM audit_records"), "0", "nothing imported");

    /* A log a gateway holds is refused. */
    kind = STORE_FILE;
    log = open_log();
    cr_assert_eq(audit_pg_import(&res, pools[0], logpath, &err), -EBUSY);
    cr_assert_not_null(strstr(err.msg, "stop it first"), "%s", err.msg);
    audit_close(log);
}
