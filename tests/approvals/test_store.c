/*
 * The approvals stores (approvals/store_file.c, approvals/store_pg.c), one suite for
 * both: one live approval per update, the state machine (pending ->
 * approved | denied, approved -> denied, approved -> consumed once),
 * claims (one holder at a time, given back or lapsed), expiry on the
 * caller's clock, kept packs, durability across reopening.
 *
 * The file store runs by default. With APPROVALS_TEST_STORE=pg and PG_URL
 * (tests/approvals/test_store_pg.sh starts a real PostgreSQL) every test
 * runs against the database instead, through two stores on two pools (two
 * "gateways"): the races ask, claim and consume from many threads on both
 * at once. Tests of one store's own mechanics (the file store's lock and
 * files; the database's rows kept as history) skip on the other.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "approvals/approvals.h"
#include "db/pool.h"

#define OID_A  "1111111111111111111111111111111111111111"
#define OID_B  "2222222222222222222222222222222222222222"
#define OID_C  "3333333333333333333333333333333333333333"
#define EXPIRE 3600
#define T0     1000000

/* The holder of a claim, as the gateway names it. */
#define HOLDER "0123456789abcdef:fedcba9876543210"

static char dir[PATH_MAX], store_dir[PATH_MAX];
static approvals_store *store;  /* gateway A */
static approvals_store *store2; /* gateway B: the same store for files */
static db_pool *pool, *pool2;
static int use_pg;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void pg_pool(db_pool **out)
{
    config_state st = {.postgres = getenv("PG_URL"), .connections = 16};
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(db_pool_open(out, &st, &err), 0, "%s", err.msg);
}

/* One statement on gateway A's pool, for what the API does not show. */
static void pg_sql(char *out, size_t size, const char *sql, const char *param)
{
    rg_error err = RG_ERROR_INIT;
    PGresult *r = NULL;
    PGconn *c;

    cr_assert_eq(db_acquire(pool, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(db_exec(c, &r, "test", sql, param ? 1 : 0, &param, &err), 0, "%s", err.msg);
    if (out != NULL)
        snprintf(out, size, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    db_release(pool, c);
}

static void open_stores(void)
{
    rg_error err = RG_ERROR_INIT;

    if (use_pg) {
        cr_assert_eq(approvals_pg_open(&store, pool, EXPIRE, &err), 0, "%s", err.msg);
        cr_assert_eq(approvals_pg_open(&store2, pool2, EXPIRE, &err), 0, "%s", err.msg);
        return;
    }
    cr_assert_eq(approvals_file_open(&store, store_dir, EXPIRE, &err), 0, "%s", err.msg);
    store2 = store;
}

static void close_stores(void)
{
    if (store2 != store)
        approvals_close(store2);
    approvals_close(store);
    store = store2 = NULL;
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR"), *mode = getenv("APPROVALS_TEST_STORE");
    rg_error err = RG_ERROR_INIT;
    int reachable = 0;

    use_pg = mode != NULL && !strcmp(mode, "pg");
    snprintf(dir, sizeof(dir), "%s/rg-approvals-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(store_dir, sizeof(store_dir), "%s/state/approvals", dir);
    if (use_pg) {
        cr_assert_not_null(getenv("PG_URL"), "APPROVALS_TEST_STORE=pg needs PG_URL");
        pg_pool(&pool);
        pg_pool(&pool2);
        /* Migrated by the first test (each runs in a process of its own). */
        if (db_startup_check(pool, &reachable, &err) < 0 || !reachable)
            cr_assert_eq(db_migrate(pool, NULL, NULL, &err), 0, "%s", err.msg);
        pg_sql(NULL, 0, "TRUNCATE approval_packs, approvals", NULL);
    }
    open_stores();
}

static void teardown(void)
{
    close_stores();
    db_pool_close(pool);
    db_pool_close(pool2);
    pool = pool2 = NULL;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(approvals, .init = setup, .fini = teardown);

static const approvals_key key_ab = {"local/acme/app", "refs/tags/v1", OID_A, OID_B};
static const approvals_key key_ac = {"local/acme/app", "refs/tags/v1", OID_A, OID_C};
static const approvals_ask_info info = {"run-1", "release-tags", "release tags need a maintainer"};

static approvals_entry ask(const approvals_key *k, int64_t now, int want_created)
{
    approvals_entry e;
    rg_error err = RG_ERROR_INIT;
    int created = -1;

    cr_assert_eq(approvals_ask(store, &e, &created, k, &info, now, &err), 0, "%s", err.msg);
    cr_assert_eq(created, want_created);
    return e;
}

/* What a push that landed does: claim, then consume; the consume's result. */
static int consume(const char *id, const approvals_key *k, int64_t now, rg_error *err)
{
    int rc = approvals_claim(store, NULL, id, k, HOLDER, now, err);

    return rc < 0 ? rc : approvals_consume(store, id, k, HOLDER, now, err);
}

static void reopen(void)
{
    close_stores();
    open_stores();
}

static void file_only(void)
{
    if (use_pg)
        cr_skip_test("the file store's own mechanics");
}

static void pg_only(void)
{
    if (!use_pg)
        cr_skip_test("runs against PostgreSQL (tests/approvals/test_store_pg.sh)");
}

Test(approvals, ask_creates_one_pending_approval_per_update_and_a_repeat_finds_it)
{
    approvals_entry a = ask(&key_ab, T0, 1), b = ask(&key_ab, T0 + 5, 0), c;

    cr_assert(approvals_id_ok(a.id), "id %s", a.id);
    cr_assert_eq(a.state, APPROVALS_PENDING);
    cr_assert_str_eq(b.id, a.id);
    cr_assert_str_eq(a.repo, "local/acme/app");
    cr_assert_str_eq(a.ref, "refs/tags/v1");
    cr_assert_str_eq(a.old_id, OID_A);
    cr_assert_str_eq(a.new_id, OID_B);
    cr_assert_str_eq(a.run, "run-1");
    cr_assert_str_eq(a.rule, "release-tags");
    cr_assert_str_eq(a.reason, "release tags need a maintainer");
    cr_assert_eq(a.created, T0);
    cr_assert_eq(a.expires, T0 + EXPIRE);
    /* Another new commit is another update. */
    c = ask(&key_ac, T0, 1);
    cr_assert_str_neq(c.id, a.id);
}

Test(approvals, ids_are_short_base32_and_differ)
{
    char seen[64][APPROVALS_ID_LEN + 1];
    char oid[41];

    for (int i = 0; i < 64; i++) {
        approvals_key k = key_ab;
        approvals_entry e;

        snprintf(oid, sizeof(oid), "%040x", i + 1);
        k.new_id = oid;
        e = ask(&k, T0, 1);
        cr_assert_eq(strlen(e.id), APPROVALS_ID_LEN);
        cr_assert(approvals_id_ok(e.id));
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(seen[j], e.id);
        memcpy(seen[i], e.id, sizeof(seen[i]));
    }
}

Test(approvals, approve_makes_the_same_update_approved_and_restarts_its_expiry)
{
    approvals_entry a = ask(&key_ab, T0, 1), got;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(
        approvals_approve(store, &got, a.id, "uid 1000 (alice) via control socket", T0 + 100, &err),
        0, "%s", err.msg);
    cr_assert_eq(got.state, APPROVALS_APPROVED);
    cr_assert_str_eq(got.by, "uid 1000 (alice) via control socket");
    cr_assert_eq(got.decided, T0 + 100);
    cr_assert_eq(got.expires, T0 + 100 + EXPIRE);
    got = ask(&key_ab, T0 + 200, 0);
    cr_assert_eq(got.state, APPROVALS_APPROVED);
    cr_assert_str_eq(got.id, a.id);
    /* The approval is for that update only. */
    got = ask(&key_ac, T0 + 200, 1);
    cr_assert_eq(got.state, APPROVALS_PENDING);
}

Test(approvals, consume_removes_the_approval_so_it_passes_once)
{
    approvals_entry a = ask(&key_ab, T0, 1), got;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    /* Not for another update, and not twice. */
    cr_assert_eq(consume(a.id, &key_ac, T0 + 2, &err), -ENOENT);
    cr_assert_eq(consume(a.id, &key_ab, T0 + 2, &err), 0, "%s", err.msg);
    cr_assert_eq(consume(a.id, &key_ab, T0 + 3, &err), -ENOENT);
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 3, &err), -ENOENT);
    got = ask(&key_ab, T0 + 4, 1);
    cr_assert_eq(got.state, APPROVALS_PENDING);
    cr_assert_str_neq(got.id, a.id);
}

Test(approvals, a_pending_approval_cannot_be_consumed)
{
    approvals_entry a = ask(&key_ab, T0, 1);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(consume(a.id, &key_ab, T0 + 1, &err), -ENOENT);
    cr_assert_eq(ask(&key_ab, T0 + 2, 0).state, APPROVALS_PENDING);
}

Test(approvals, deny_is_kept_until_expiry_so_the_same_push_is_refused_not_asked_again)
{
    approvals_entry a = ask(&key_ab, T0, 1), got;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_deny(store, &got, a.id, "bob", "not this one", T0 + 10, &err), 0);
    cr_assert_eq(got.state, APPROVALS_DENIED);
    cr_assert_str_eq(got.note, "not this one");
    got = ask(&key_ab, T0 + 20, 0);
    cr_assert_eq(got.state, APPROVALS_DENIED);
    cr_assert_str_eq(got.by, "bob");
    /* After it expired the update may ask again. */
    got = ask(&key_ab, T0 + 10 + EXPIRE, 1);
    cr_assert_eq(got.state, APPROVALS_PENDING);
}

Test(approvals, deciding_twice_says_how_it_was_decided)
{
    approvals_entry a = ask(&key_ab, T0, 1);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    cr_assert_eq(approvals_approve(store, NULL, a.id, "bob", T0 + 2, &err), -EALREADY);
    cr_assert(strstr(err.msg, "already approved by alice"), "%s", err.msg);
    /* Denying an approved one revokes it. */
    cr_assert_eq(approvals_deny(store, NULL, a.id, "bob", NULL, T0 + 3, &err), 0, "%s", err.msg);
    cr_assert_eq(ask(&key_ab, T0 + 4, 0).state, APPROVALS_DENIED);
    cr_assert_eq(approvals_deny(store, NULL, a.id, "carol", NULL, T0 + 5, &err), -EALREADY);
    cr_assert(strstr(err.msg, "already denied by bob"), "%s", err.msg);
    cr_assert_eq(approvals_approve(store, NULL, a.id, "carol", T0 + 6, &err), -EALREADY);
}

Test(approvals, expired_approvals_are_refused_like_none_and_removed)
{
    approvals_entry a = ask(&key_ab, T0, 1), b, got;
    approvals_entry *list = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t n = 9, removed = 9;
    int rc;

    /* A pending one cannot be approved once expired: -ETIME the first time it is seen. */
    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + EXPIRE, &err), -ETIME);
    cr_assert(strstr(err.msg, "expired"), "%s", err.msg);
    /* Then gone (files), or kept as history and still expired (database). */
    rc = approvals_get(store, &got, a.id, T0 + EXPIRE, &err);
    cr_assert(rc == -ENOENT || rc == -ETIME, "%d", rc);
    /* An approved one expires EXPIRE after it was approved. */
    b = ask(&key_ab, T0 + EXPIRE, 1);
    cr_assert_eq(approvals_approve(store, NULL, b.id, "alice", T0 + EXPIRE + 10, &err), 0);
    cr_assert_eq(ask(&key_ab, T0 + 2 * EXPIRE + 9, 0).state, APPROVALS_APPROVED);
    got = ask(&key_ab, T0 + 2 * EXPIRE + 10, 1);
    cr_assert_eq(got.state, APPROVALS_PENDING);
    cr_assert_str_neq(got.id, b.id);
    rc = consume(b.id, &key_ab, T0 + 2 * EXPIRE + 10, &err);
    cr_assert(rc == -ENOENT || rc == -ETIME, "%d", rc);
    cr_assert_eq(approvals_expire(store, &removed, T0 + 3 * EXPIRE + 10, &err), 0);
    cr_assert_eq(removed, 1);
    cr_assert_eq(approvals_list(store, &list, &n, T0 + 3 * EXPIRE + 10, &err), 0);
    cr_assert_eq(n, 0);
    cr_assert_null(list);
}

Test(approvals, list_returns_the_live_ones_oldest_first)
{
    approvals_entry a = ask(&key_ab, T0 + 5, 1), b = ask(&key_ac, T0, 1);
    approvals_entry *list = NULL;
    rg_error err = RG_ERROR_INIT;
    size_t n = 0;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 6, &err), 0);
    reopen();
    cr_assert_eq(approvals_list(store, &list, &n, T0 + 7, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(list[0].id, b.id);
    cr_assert_str_eq(list[1].id, a.id);
    cr_assert_eq(list[1].state, APPROVALS_APPROVED);
    free(list);
}

Test(approvals, every_change_survives_reopening)
{
    approvals_entry a = ask(&key_ab, T0, 1), b = ask(&key_ac, T0, 1), got;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    cr_assert_eq(approvals_deny(store, NULL, b.id, "bob", "no", T0 + 1, &err), 0);
    reopen();
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 2, &err), 0, "%s", err.msg);
    cr_assert_eq(got.state, APPROVALS_APPROVED);
    cr_assert_str_eq(got.by, "alice");
    cr_assert_str_eq(got.reason, info.reason);
    cr_assert_eq(approvals_get(store, &got, b.id, T0 + 2, &err), 0);
    cr_assert_eq(got.state, APPROVALS_DENIED);
    cr_assert_str_eq(got.note, "no");
    cr_assert_eq(consume(a.id, &key_ab, T0 + 3, &err), 0);
    reopen();
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 4, &err), -ENOENT);
}

Test(approvals, a_second_store_on_the_same_directory_is_refused)
{
    approvals_store *other = NULL;
    rg_error err = RG_ERROR_INIT;

    file_only();
    cr_assert_eq(approvals_file_open(&other, store_dir, EXPIRE, &err), -EBUSY);
    cr_assert_null(other);
    cr_assert(strstr(err.msg, "in use"), "%s", err.msg);
}

Test(approvals, a_file_that_does_not_parse_grants_nothing_and_temporaries_are_removed)
{
    approvals_entry a = ask(&key_ab, T0, 1), got;
    rg_error err = RG_ERROR_INIT;
    char path[PATH_MAX * 2], tmp[PATH_MAX * 2];
    FILE *fp;

    file_only();
    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    snprintf(path, sizeof(path), "%s/%s.json", store_dir, a.id);
    fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fputs("{\"id\": \"", fp); /* a torn write */
    fclose(fp);
    snprintf(tmp, sizeof(tmp), "%s/%s.json.tmp.99", store_dir, a.id);
    fp = fopen(tmp, "w");
    cr_assert_not_null(fp);
    fclose(fp);
    reopen();
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 2, &err), -ENOENT);
    cr_assert_eq(access(tmp, F_OK), -1);
    cr_assert_eq(ask(&key_ab, T0 + 2, 1).state, APPROVALS_PENDING);
}

/* Keys are checked before a store sees them (the table is read in the
 * test's own process: parameters carry only its index). */
static const approvals_key bad_keys[] = {
    {"", "refs/tags/v1", OID_A, OID_B},
    {"local/acme/app", "", OID_A, OID_B},
    {"local/acme/app", "refs/tags/v1", "XYZ", OID_B},
    {"local/acme/app", "refs/tags/v1", OID_A, "../../etc/passwd"},
    {"local/acme/app", "refs/tags/v1", OID_A,
     "11111111111111111111111111111111111111111111111111111111111111111"},
    {"local/acme/app", "refs/tags/\xff\xfe", OID_A, OID_B},
};

ParameterizedTestParameters(approvals, bad_keys_are_refused)
{
    static int cases[sizeof(bad_keys) / sizeof(bad_keys[0])];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cases[i] = (int)i;
    return cr_make_param_array(int, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(int *i, approvals, bad_keys_are_refused)
{
    approvals_entry e;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_ask(store, &e, NULL, &bad_keys[*i], &info, T0, &err), -EINVAL, "%s",
                 err.msg);
}

Test(approvals, malformed_ids_are_refused_before_any_lookup)
{
    static const char *const bad[] = {"",           "abc",        "../../etc/x",
                                      "ABCDEFGHIJ", "abcdefghi1", "abcdefghijk"};
    approvals_entry e;
    rg_error err = RG_ERROR_INIT;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert(!approvals_id_ok(bad[i]), "%s", bad[i]);
        cr_assert_eq(approvals_get(store, &e, bad[i], T0, &err), -ENOENT);
        cr_assert_eq(approvals_approve(store, NULL, bad[i], "x", T0, &err), -ENOENT);
    }
}

/* ------------------------------------------------------------------------
 * Kept packs
 * ------------------------------------------------------------------------ */

static uint64_t released;

static void count_release(void *arg, uint64_t bytes)
{
    (void)arg;
    released += bytes;
}

/* Kept packs on the disk come back to the spool; in the database they never took it. */
static void expect_released(uint64_t bytes)
{
    cr_assert_eq(released, approvals_packs_local(store) ? bytes : 0);
}

/* A file of `len` bytes of `c`, open for reading from its start. */
static int pack_fd(size_t len, char c)
{
    char path[PATH_MAX + 16], *buf = malloc(len);
    FILE *fp;
    int fd;

    cr_assert_not_null(buf);
    memset(buf, c, len);
    snprintf(path, sizeof(path), "%s/in-%c", dir, c);
    fp = fopen(path, "w");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(buf, 1, len, fp), len);
    fclose(fp);
    free(buf);
    fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    return fd;
}

Test(approvals, a_pending_approval_keeps_its_pack_until_it_is_used)
{
    approvals_entry a = ask(&key_ab, T0, 1), got;
    rg_error err = RG_ERROR_INIT;
    int fd = pack_fd(3000, 'p'), rfd = -1;
    char buf[4000];

    released = 0;
    approvals_on_release(store, count_release, NULL);
    cr_assert_eq(approvals_keep_pack(store, a.id, fd, 3000, T0, &err), 0, "%s", err.msg);
    cr_assert_eq(approvals_keep_pack(store, a.id, fd, 3000, T0, &err), -EEXIST);
    close(fd);
    cr_assert_eq(approvals_pack_total(store), 3000);
    cr_assert_eq(approvals_get(store, &got, a.id, T0, &err), 0);
    cr_assert_eq(got.pack_bytes, 3000);
    cr_assert_eq(approvals_open_pack(&rfd, store, a.id, T0, &err), 0, "%s", err.msg);
    cr_assert_eq(read(rfd, buf, sizeof(buf)), 3000);
    cr_assert_eq(buf[2999], 'p');
    close(rfd);
    /* Across a restart, the pack is found again. */
    reopen();
    released = 0;
    approvals_on_release(store, count_release, NULL);
    cr_assert_eq(approvals_pack_total(store), 3000);
    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    /* Approved, it is still there to look at, restart or not, until used. */
    reopen();
    released = 0;
    approvals_on_release(store, count_release, NULL);
    cr_assert_eq(approvals_pack_total(store), 3000);
    cr_assert_eq(consume(a.id, &key_ab, T0 + 2, &err), 0);
    expect_released(3000);
    cr_assert_eq(approvals_pack_total(store), 0);
    cr_assert_eq(approvals_open_pack(&rfd, store, a.id, T0 + 2, &err), -ENOENT);
}

Test(approvals, a_denial_or_expiry_removes_the_kept_pack)
{
    approvals_entry a = ask(&key_ab, T0, 1), b = ask(&key_ac, T0, 1);
    rg_error err = RG_ERROR_INIT;
    int fd = pack_fd(100, 'q'), rfd = -1;
    char path[PATH_MAX * 2];

    released = 0;
    approvals_on_release(store, count_release, NULL);
    cr_assert_eq(approvals_keep_pack(store, a.id, fd, 100, T0, &err), 0, "%s", err.msg);
    cr_assert_eq(approvals_keep_pack(store, b.id, fd, 60, T0, &err), 0, "%s", err.msg);
    close(fd);
    cr_assert_eq(approvals_deny(store, NULL, a.id, "bob", NULL, T0 + 1, &err), 0);
    expect_released(100);
    snprintf(path, sizeof(path), "%s/%s.pack", store_dir, a.id);
    cr_assert(use_pg || access(path, F_OK) == -1);
    cr_assert_eq(approvals_open_pack(&rfd, store, a.id, T0 + 1, &err), -ENOENT);
    cr_assert_eq(approvals_expire(store, NULL, T0 + EXPIRE, &err), 0);
    expect_released(160);
    cr_assert_eq(approvals_pack_total(store), 0);
}

Test(approvals, only_a_pending_approval_takes_a_pack_and_stray_files_are_removed_at_open)
{
    approvals_entry a = ask(&key_ab, T0, 1);
    rg_error err = RG_ERROR_INIT;
    int fd = pack_fd(10, 'r');
    char stray[PATH_MAX * 2];
    FILE *fp;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    cr_assert_eq(approvals_keep_pack(store, a.id, fd, 10, T0 + 1, &err), -ENOENT);
    cr_assert_eq(approvals_keep_pack(store, "abcdefghij", fd, 10, T0 + 1, &err), -ENOENT);
    close(fd);
    if (use_pg)
        return;
    snprintf(stray, sizeof(stray), "%s/abcdefghij.pack", store_dir);
    fp = fopen(stray, "w");
    cr_assert_not_null(fp);
    fputs("PACK", fp);
    fclose(fp);
    reopen();
    cr_assert_eq(access(stray, F_OK), -1);
    cr_assert_eq(approvals_pack_total(store), 0);
}

/* ------------------------------------------------------------------------
 * Claims
 * ------------------------------------------------------------------------ */

Test(approvals, a_claim_has_one_holder_until_given_back_and_only_its_holder_consumes)
{
    approvals_entry a = ask(&key_ab, T0, 1), got;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    cr_assert_eq(approvals_claim(store, &got, a.id, &key_ab, "gw1:p1", T0 + 2, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(got.claim, "gw1:p1");
    cr_assert_eq(got.claim_until, T0 + 2 + APPROVALS_CLAIM_SECONDS);
    /* Another push of the same update, through another gateway: busy. */
    cr_assert_eq(approvals_claim(store2, NULL, a.id, &key_ab, "gw2:p2", T0 + 3, &err), -EBUSY);
    cr_assert(strstr(err.msg, "another push"), "%s", err.msg);
    cr_assert_eq(approvals_consume(store2, a.id, &key_ab, "gw2:p2", T0 + 3, &err), -ENOENT);
    cr_assert_eq(approvals_unclaim(store2, a.id, "gw2:p2", &err), -ENOENT);
    /* The holder may claim again (a held push decided twice). */
    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ab, "gw1:p1", T0 + 4, &err), 0);
    /* Given back (upstream refused), the next push gets it. */
    cr_assert_eq(approvals_unclaim(store, a.id, "gw1:p1", &err), 0, "%s", err.msg);
    cr_assert_eq(approvals_get(store2, &got, a.id, T0 + 5, &err), 0);
    cr_assert_eq(got.state, APPROVALS_APPROVED);
    cr_assert_str_eq(got.claim, "");
    cr_assert_eq(approvals_claim(store2, NULL, a.id, &key_ab, "gw2:p2", T0 + 5, &err), 0);
    cr_assert_eq(approvals_consume(store, a.id, &key_ab, "gw1:p1", T0 + 6, &err), -ENOENT);
    cr_assert_eq(approvals_consume(store2, a.id, &key_ab, "gw2:p2", T0 + 6, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(approvals_consume(store2, a.id, &key_ab, "gw2:p2", T0 + 7, &err), -ENOENT);
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 7, &err), -ENOENT);
}

Test(approvals, a_claim_its_holder_never_settles_lapses)
{
    approvals_entry a = ask(&key_ab, T0, 1);
    rg_error err = RG_ERROR_INIT;
    int64_t t = T0 + 2;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ab, "dead:p1", t, &err), 0);
    cr_assert_eq(approvals_claim(store2, NULL, a.id, &key_ab, "gw2:p2",
                                 t + APPROVALS_CLAIM_SECONDS - 1, &err),
                 -EBUSY);
    cr_assert_eq(
        approvals_claim(store2, NULL, a.id, &key_ab, "gw2:p2", t + APPROVALS_CLAIM_SECONDS, &err),
        0, "%s", err.msg);
    /* The dead holder's late consume does not count: the claim moved on. */
    cr_assert_eq(
        approvals_consume(store, a.id, &key_ab, "dead:p1", t + APPROVALS_CLAIM_SECONDS, &err),
        -ENOENT);
    cr_assert_eq(
        approvals_consume(store2, a.id, &key_ab, "gw2:p2", t + APPROVALS_CLAIM_SECONDS, &err), 0,
        "%s", err.msg);
}

Test(approvals, only_an_approved_approval_of_exactly_the_update_is_claimed)
{
    approvals_entry a = ask(&key_ab, T0, 1), b = ask(&key_ac, T0, 1);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ab, HOLDER, T0 + 1, &err), -ENOENT);
    cr_assert_eq(approvals_deny(store, NULL, b.id, "bob", NULL, T0 + 1, &err), 0);
    cr_assert_eq(approvals_claim(store, NULL, b.id, &key_ac, HOLDER, T0 + 2, &err), -ENOENT);
    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 2, &err), 0);
    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ac, HOLDER, T0 + 3, &err), -ENOENT);
    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ab, "", T0 + 3, &err), -EINVAL);
    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ab, "a b", T0 + 3, &err), -EINVAL);
    /* Expired: no claim, whoever asks. */
    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ab, HOLDER, T0 + 2 + EXPIRE, &err),
                 -ETIME);
}

Test(approvals, a_claimed_approval_that_expires_meanwhile_is_still_consumed_by_its_holder)
{
    approvals_entry a = ask(&key_ab, T0, 1);
    rg_error err = RG_ERROR_INIT;
    size_t removed = 9;

    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    cr_assert_eq(approvals_claim(store, NULL, a.id, &key_ab, HOLDER, T0 + EXPIRE, &err), 0);
    cr_assert_eq(approvals_expire(store2, &removed, T0 + EXPIRE + 5, &err), 0);
    cr_assert_eq(removed, 0);
    cr_assert_eq(approvals_consume(store, a.id, &key_ab, HOLDER, T0 + EXPIRE + 6, &err), 0, "%s",
                 err.msg);
}

/* ------------------------------------------------------------------------
 * Races: many threads on both stores (two gateways) at once
 * ------------------------------------------------------------------------ */

#define RACERS 16

typedef struct racer {
    int n;
    const char *id;
    pthread_barrier_t *go;
    approvals_entry e;
    int rc, created, consumed;
    rg_error err;
} racer;

static void *ask_race(void *arg)
{
    racer *r = arg;

    pthread_barrier_wait(r->go);
    r->rc =
        approvals_ask(r->n % 2 ? store2 : store, &r->e, &r->created, &key_ab, &info, T0, &r->err);
    return NULL;
}

Test(approvals, two_gateways_asking_for_the_same_update_at_once_get_one_approval)
{
    pthread_t t[RACERS];
    racer r[RACERS];
    pthread_barrier_t go;
    int created = 0;

    pthread_barrier_init(&go, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.n = i, .go = &go, .err = RG_ERROR_INIT};
        cr_assert_eq(pthread_create(&t[i], NULL, ask_race, &r[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < RACERS; i++) {
        cr_assert_eq(r[i].rc, 0, "%s", r[i].err.msg);
        cr_assert_str_eq(r[i].e.id, r[0].e.id);
        created += r[i].created;
    }
    cr_assert_eq(created, 1);
}

static void *consume_race(void *arg)
{
    racer *r = arg;
    approvals_store *s = r->n % 2 ? store2 : store;
    char holder[32];

    snprintf(holder, sizeof(holder), "gw%d:push%d", r->n % 2, r->n);
    pthread_barrier_wait(r->go);
    r->rc = approvals_claim(s, NULL, r->id, &key_ab, holder, T0 + 2, &r->err);
    if (r->rc == 0)
        r->consumed = approvals_consume(s, r->id, &key_ab, holder, T0 + 3, &r->err) == 0;
    return NULL;
}

Test(approvals, many_pushes_of_one_approved_update_through_two_gateways_consume_it_once)
{
    approvals_entry a = ask(&key_ab, T0, 1);
    rg_error err = RG_ERROR_INIT;
    pthread_t t[RACERS];
    racer r[RACERS];
    pthread_barrier_t go;
    int claimed = 0, consumed = 0;

    cr_assert_eq(approvals_approve(store2, NULL, a.id, "alice", T0 + 1, &err), 0);
    pthread_barrier_init(&go, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.n = i, .id = a.id, .go = &go, .err = RG_ERROR_INIT};
        cr_assert_eq(pthread_create(&t[i], NULL, consume_race, &r[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < RACERS; i++) {
        cr_assert(r[i].rc == 0 || r[i].rc == -EBUSY || r[i].rc == -ENOENT, "%d %s", r[i].rc,
                  r[i].err.msg);
        claimed += r[i].rc == 0;
        consumed += r[i].consumed;
    }
    cr_assert_eq(claimed, 1);
    cr_assert_eq(consumed, 1);
}

/* ------------------------------------------------------------------------
 * The database: what one gateway does, the other sees; rows are history
 * ------------------------------------------------------------------------ */

Test(approvals, a_decision_through_one_gateway_is_seen_by_the_other)
{
    approvals_entry a = ask(&key_ab, T0, 1), got;
    rg_error err = RG_ERROR_INIT;
    int fd = pack_fd(5000, 's'), rfd = -1;
    char buf[6000];

    pg_only();
    cr_assert_eq(approvals_keep_pack(store, a.id, fd, 5000, T0, &err), 0, "%s", err.msg);
    close(fd);
    cr_assert_eq(approvals_pack_total(store2), 5000);
    cr_assert_eq(approvals_open_pack(&rfd, store2, a.id, T0 + 1, &err), 0, "%s", err.msg);
    cr_assert_eq(read(rfd, buf, sizeof(buf)), 5000);
    close(rfd);
    cr_assert_eq(
        approvals_approve(store2, NULL, a.id, "uid 1 (bob) via control socket of B", T0 + 2, &err),
        0, "%s", err.msg);
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 3, &err), 0, "%s", err.msg);
    cr_assert_eq(got.state, APPROVALS_APPROVED);
    cr_assert_str_eq(got.by, "uid 1 (bob) via control socket of B");
    cr_assert_eq(ask(&key_ab, T0 + 3, 0).state, APPROVALS_APPROVED);
}

Test(approvals, rows_stay_as_history_expired_and_consumed)
{
    approvals_entry a = ask(&key_ab, T0, 1), b = ask(&key_ac, T0, 1);
    rg_error err = RG_ERROR_INIT;
    int fd = pack_fd(10, 't');
    char state[128], packs[32];

    pg_only();
    cr_assert_eq(approvals_keep_pack(store, b.id, fd, 10, T0, &err), 0, "%s", err.msg);
    close(fd);
    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + 1, &err), 0);
    cr_assert_eq(consume(a.id, &key_ab, T0 + 2, &err), 0, "%s", err.msg);
    pg_sql(state, sizeof(state), "SELECT state || ' ' || claim FROM approvals WHERE id = $1", a.id);
    cr_assert_str_eq(state, "consumed " HOLDER);
    cr_assert_eq(approvals_expire(store2, NULL, T0 + EXPIRE, &err), 0);
    pg_sql(state, sizeof(state), "SELECT state FROM approvals WHERE id = $1", b.id);
    cr_assert_str_eq(state, "expired");
    pg_sql(packs, sizeof(packs), "SELECT count(*) FROM approval_packs", NULL);
    cr_assert_str_eq(packs, "0");
    cr_assert_eq(approvals_get(store, &a, b.id, T0 + EXPIRE, &err), -ETIME);
    /* The update may ask again: a new row, the old ones kept. */
    cr_assert_eq(ask(&key_ab, T0 + EXPIRE, 1).state, APPROVALS_PENDING);
    pg_sql(packs, sizeof(packs), "SELECT count(*) FROM approvals", NULL);
    cr_assert_str_eq(packs, "3");
}

Test(approvals, import_adds_an_entry_as_it_is_and_refuses_duplicates)
{
    approvals_entry e = {0}, got;
    rg_error err = RG_ERROR_INIT;

    pg_only();
    snprintf(e.id, sizeof(e.id), "abcdefghij");
    e.state = APPROVALS_APPROVED;
    snprintf(e.repo, sizeof(e.repo), "%s", key_ab.repo);
    snprintf(e.ref, sizeof(e.ref), "%s", key_ab.ref);
    snprintf(e.old_id, sizeof(e.old_id), "%s", key_ab.old_id);
    snprintf(e.new_id, sizeof(e.new_id), "%s", key_ab.new_id);
    snprintf(e.by, sizeof(e.by), "alice");
    e.created = T0;
    e.decided = T0 + 1;
    e.expires = T0 + 1 + EXPIRE;
    cr_assert_eq(approvals_pg_import(store, &e, &err), 0, "%s", err.msg);
    cr_assert_eq(approvals_get(store2, &got, "abcdefghij", T0 + 2, &err), 0, "%s", err.msg);
    cr_assert_eq(got.state, APPROVALS_APPROVED);
    cr_assert_str_eq(got.by, "alice");
    cr_assert_eq(got.expires, T0 + 1 + EXPIRE);
    cr_assert_eq(approvals_pg_import(store, &e, &err), -EEXIST);
    /* Another id for an update that has a live approval: refused too. */
    snprintf(e.id, sizeof(e.id), "bcdefghijk");
    cr_assert_eq(approvals_pg_import(store, &e, &err), -EEXIST);
}
