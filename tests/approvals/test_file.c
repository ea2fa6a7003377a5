/*
 * The file store of approvals (approvals/file.c): one live approval per
 * update, the state machine (pending -> approved | denied, approved ->
 * denied, approved -> consumed once), expiry on the caller's clock,
 * durability across reopening, one writer, and files that do not parse
 * granting nothing.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "approvals/approvals.h"

#define OID_A  "1111111111111111111111111111111111111111"
#define OID_B  "2222222222222222222222222222222222222222"
#define OID_C  "3333333333333333333333333333333333333333"
#define EXPIRE 3600
#define T0     1000000

static char dir[PATH_MAX], store_dir[PATH_MAX];
static approvals_store *store;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    rg_error err = RG_ERROR_INIT;

    snprintf(dir, sizeof(dir), "%s/rg-approvals-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(store_dir, sizeof(store_dir), "%s/state/approvals", dir);
    cr_assert_eq(approvals_file_open(&store, store_dir, EXPIRE, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    approvals_close(store);
    store = NULL;
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

static void reopen(void)
{
    rg_error err = RG_ERROR_INIT;

    approvals_close(store);
    store = NULL;
    cr_assert_eq(approvals_file_open(&store, store_dir, EXPIRE, &err), 0, "%s", err.msg);
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
    cr_assert_eq(approvals_consume(store, a.id, &key_ac, T0 + 2, &err), -ENOENT);
    cr_assert_eq(approvals_consume(store, a.id, &key_ab, T0 + 2, &err), 0, "%s", err.msg);
    cr_assert_eq(approvals_consume(store, a.id, &key_ab, T0 + 3, &err), -ENOENT);
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 3, &err), -ENOENT);
    got = ask(&key_ab, T0 + 4, 1);
    cr_assert_eq(got.state, APPROVALS_PENDING);
    cr_assert_str_neq(got.id, a.id);
}

Test(approvals, a_pending_approval_cannot_be_consumed)
{
    approvals_entry a = ask(&key_ab, T0, 1);
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(approvals_consume(store, a.id, &key_ab, T0 + 1, &err), -ENOENT);
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

    /* A pending one cannot be approved once expired: -ETIME the first time it is seen. */
    cr_assert_eq(approvals_approve(store, NULL, a.id, "alice", T0 + EXPIRE, &err), -ETIME);
    cr_assert(strstr(err.msg, "expired"), "%s", err.msg);
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + EXPIRE, &err), -ENOENT);
    /* An approved one expires EXPIRE after it was approved. */
    b = ask(&key_ab, T0 + EXPIRE, 1);
    cr_assert_eq(approvals_approve(store, NULL, b.id, "alice", T0 + EXPIRE + 10, &err), 0);
    cr_assert_eq(ask(&key_ab, T0 + 2 * EXPIRE + 9, 0).state, APPROVALS_APPROVED);
    got = ask(&key_ab, T0 + 2 * EXPIRE + 10, 1);
    cr_assert_eq(got.state, APPROVALS_PENDING);
    cr_assert_str_neq(got.id, b.id);
    cr_assert_eq(approvals_consume(store, b.id, &key_ab, T0 + 2 * EXPIRE + 10, &err), -ENOENT);
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
    cr_assert_eq(approvals_consume(store, a.id, &key_ab, T0 + 3, &err), 0);
    reopen();
    cr_assert_eq(approvals_get(store, &got, a.id, T0 + 4, &err), -ENOENT);
}

Test(approvals, a_second_store_on_the_same_directory_is_refused)
{
    approvals_store *other = NULL;
    rg_error err = RG_ERROR_INIT;

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
    cr_assert_eq(approvals_consume(store, a.id, &key_ab, T0 + 2, &err), 0);
    cr_assert_eq(released, 3000);
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
    cr_assert_eq(released, 100);
    snprintf(path, sizeof(path), "%s/%s.pack", store_dir, a.id);
    cr_assert_eq(access(path, F_OK), -1);
    cr_assert_eq(approvals_open_pack(&rfd, store, a.id, T0 + 1, &err), -ENOENT);
    cr_assert_eq(approvals_expire(store, NULL, T0 + EXPIRE, &err), 0);
    cr_assert_eq(released, 160);
    cr_assert_eq(approvals_pack_total(store), 0);
}

Test(approvals, only_a_pending_approval_takes_a_pack_and_strays_are_removed_at_open)
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
    snprintf(stray, sizeof(stray), "%s/abcdefghij.pack", store_dir);
    fp = fopen(stray, "w");
    cr_assert_not_null(fp);
    fputs("PACK", fp);
    fclose(fp);
    reopen();
    cr_assert_eq(access(stray, F_OK), -1);
    cr_assert_eq(approvals_pack_total(store), 0);
}
