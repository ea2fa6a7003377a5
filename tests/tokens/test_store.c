/*
 * The token stores (tokens/store.h) through one suite: every test runs on
 * the file store and on the PostgreSQL store. Two store instances on one
 * backend stand for two gateways (one state_dir, or one database): a key
 * published through one verifies through the other, a revocation through
 * one is refused by the other at its next check, rotation keeps old
 * tokens verifying, unknown kids are rate-limited, and a store that cannot
 * be read fails closed. The PostgreSQL half needs PG_URL (a migrated
 * database): tests/tokens/test_store_pg.sh starts one and runs this
 * binary; without it that half is skipped and says so.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tokens/token.h"
#include "util/fs.h"

typedef enum kind { KIND_FILES, KIND_DATABASE } kind;

static char dir[PATH_MAX];
static char shared[PATH_MAX]; /* the file backend both instances share */
static db_pool *pools[2];

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, sizeof(dir), "%s/rg-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(shared, sizeof(shared), "%s/shared", dir);
}

static void teardown(void)
{
    db_pool_close(pools[0]);
    db_pool_close(pools[1]);
    pools[0] = pools[1] = NULL;
    rg_fs_remove_tree(dir, 0, NULL);
}

TestSuite(store, .init = setup, .fini = teardown);

static const kind kinds[] = {KIND_FILES, KIND_DATABASE};

#define PARAMS(test)                                                                               \
    ParameterizedTestParameters(store, test)                                                       \
    {                                                                                              \
        return cr_make_param_array(kind, (void *)kinds, 2);                                        \
    }

/* Instance `i` (0 or 1) of a store of kind k: another "gateway" on the same backend. */
static tokens_store *open_store(kind k, int i)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *s = NULL;
    const char *url = getenv("PG_URL");

    if (k == KIND_FILES) {
        cr_assert_eq(tokens_store_file_open(&s, shared, &err), 0, "%s", err.msg);
        return s;
    }
    if (url == NULL || *url == '\0')
        cr_skip_test("PG_URL is not set: tests/tokens/test_store_pg.sh runs the database half");
    config_state st = {.postgres = (char *)url, .connections = 2};
    cr_assert_eq(db_pool_open(&pools[i], &st, &err), 0, "%s", err.msg);
    cr_assert_eq(tokens_store_pg_open(&s, pools[i], &err), 0, "%s", err.msg);
    return s;
}

/* A gateway's signing key in its own state_dir. */
static tokens_key *key_in(const char *name)
{
    rg_error err = RG_ERROR_INIT;
    char path[PATH_MAX];
    tokens_key *k = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    cr_assert_eq(tokens_key_load(&k, path, &err), 0, "%s", err.msg);
    return k;
}

static char *mint(tokens_key *k, int64_t ttl)
{
    static const char *const repos[] = {"local/acme/app"};
    rg_error err = RG_ERROR_INIT;
    char *tok = NULL;

    cr_assert_eq(tokens_mint(&tok, k, "run-s", repos, 1, ttl, (int64_t)time(NULL), &err), 0, "%s",
                 err.msg);
    return tok;
}

static tokens_status verify(tokens_store *s, const char *tok)
{
    rg_error err = RG_ERROR_INIT;
    tokens_claims *c = NULL;
    tokens_status st;

    cr_assert_eq(tokens_verify(&c, &st, s, tok, (int64_t)time(NULL), &err), 0, "verify: %s",
                 err.msg);
    tokens_claims_free(c);
    return st;
}

static void publish(tokens_key *k, tokens_store *s)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(tokens_key_publish(k, s, "gw-test", &err), 0, "%s", err.msg);
}

/* ------------------------------------------------------------------------ */

PARAMS(a_key_verifies_on_every_instance_once_published_and_not_before)
ParameterizedTest(kind *k, store, a_key_verifies_on_every_instance_once_published_and_not_before)
{
    tokens_store *a = open_store(*k, 0), *b = open_store(*k, 1);
    tokens_key *ka = key_in("gw-a");
    char *tok = mint(ka, 600);

    cr_assert_eq(verify(b, tok), TOKENS_UNKNOWN_KEY, "a key nobody published");
    publish(ka, a);
    cr_assert_eq(verify(b, tok), TOKENS_OK, "published through a, verified through b");
    cr_assert_eq(verify(a, tok), TOKENS_OK);
    publish(ka, b); /* again, through the other: not an error */
    tokens_secret_free(tok);
    tokens_key_free(ka);
    tokens_store_free(a);
    tokens_store_free(b);
}

PARAMS(a_revocation_through_one_instance_is_seen_by_the_other_at_its_next_check)
ParameterizedTest(kind *k, store,
                  a_revocation_through_one_instance_is_seen_by_the_other_at_its_next_check)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *a = open_store(*k, 0), *b = open_store(*k, 1);
    tokens_key *ka = key_in("gw-a");
    char *tok, *other;

    publish(ka, a);
    tok = mint(ka, 600);
    other = mint(ka, 600);
    cr_assert_eq(verify(a, tok), TOKENS_OK); /* a has the key cached now */
    cr_assert_eq(tokens_revoke(b, tok, &err), 0, "%s", err.msg);
    cr_assert_eq(verify(a, tok), TOKENS_REVOKED, "no cache hides a revocation");
    cr_assert_eq(verify(b, tok), TOKENS_REVOKED);
    cr_assert_eq(verify(a, other), TOKENS_OK, "only that token");
    cr_assert_eq(tokens_revoke(a, tok, &err), 0, "twice is not an error: %s", err.msg);
    tokens_secret_free(tok);
    tokens_secret_free(other);
    tokens_key_free(ka);
    tokens_store_free(a);
    tokens_store_free(b);
}

PARAMS(an_expired_token_and_one_of_a_retired_key_can_still_be_revoked)
ParameterizedTest(kind *k, store, an_expired_token_and_one_of_a_retired_key_can_still_be_revoked)
{
    static const char *const repos[] = {"local/acme/app"};
    rg_error err = RG_ERROR_INIT;
    tokens_store *a = open_store(*k, 0);
    tokens_key *ka = key_in("gw-a");
    char path[PATH_MAX], *old = NULL, *cur;

    publish(ka, a);
    cr_assert_eq(tokens_mint(&old, ka, "r", repos, 1, 1, 1000, &err), 0, "%s", err.msg);
    cur = mint(ka, 600);
    snprintf(path, sizeof(path), "%s/gw-a", dir);
    cr_assert_eq(tokens_key_rotate(ka, a, path, "gw-test", NULL, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(tokens_revoke(a, old, &err), 0, "expired long ago: %s", err.msg);
    cr_assert_eq(tokens_revoke(a, cur, &err), 0, "retired key: %s", err.msg);
    cr_assert_eq(verify(a, cur), TOKENS_REVOKED);
    tokens_secret_free(old);
    tokens_secret_free(cur);
    tokens_key_free(ka);
    tokens_store_free(a);
}

PARAMS(rotation_publishes_the_new_key_and_old_tokens_verify_everywhere)
ParameterizedTest(kind *k, store, rotation_publishes_the_new_key_and_old_tokens_verify_everywhere)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *a = open_store(*k, 0), *b = open_store(*k, 1);
    tokens_key *ka = key_in("gw-a");
    char path[PATH_MAX], old_kid[TOKENS_KID_SIZE], new_kid[TOKENS_KID_SIZE], *before, *after;

    publish(ka, a);
    before = mint(ka, 600);
    snprintf(path, sizeof(path), "%s/gw-a", dir);
    cr_assert_eq(tokens_key_rotate(ka, a, path, "gw-test", old_kid, new_kid, &err), 0, "%s",
                 err.msg);
    after = mint(ka, 600);
    cr_assert_eq(verify(b, before), TOKENS_OK, "the retired key verifies until its tokens expire");
    cr_assert_eq(verify(b, after), TOKENS_OK, "the new key was published before it signed");
    cr_assert_str_neq(old_kid, new_kid);
    cr_assert_eq(tokens_store_key_retire(b, old_kid, &err), 0, "twice: %s", err.msg);
    tokens_secret_free(before);
    tokens_secret_free(after);
    tokens_key_free(ka);
    tokens_store_free(a);
    tokens_store_free(b);
}

PARAMS(a_kid_taken_by_another_key_is_refused)
ParameterizedTest(kind *k, store, a_kid_taken_by_another_key_is_refused)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *a = open_store(*k, 0);
    unsigned char one[TOKENS_PUBLIC_KEY_LEN], two[TOKENS_PUBLIC_KEY_LEN];
    char kid[TOKENS_KID_SIZE];
    unsigned r = (unsigned)time(NULL) ^ (unsigned)getpid();

    memset(one, 1, sizeof(one));
    memset(two, 2, sizeof(two));
    snprintf(kid, sizeof(kid), "%08x%08x", r, r * 2654435761u);
    cr_assert_eq(tokens_store_key_put(a, kid, one, "gw", &err), 0, "%s", err.msg);
    cr_assert_eq(tokens_store_key_put(a, kid, one, "gw", &err), 0, "the same key again: %s",
                 err.msg);
    cr_assert_lt(tokens_store_key_put(a, kid, two, "gw", &err), 0);
    cr_assert(strstr(err.msg, "taken") != NULL, "%s", err.msg);
    tokens_store_free(a);
}

PARAMS(unknown_kids_are_rate_limited_and_known_ones_are_not)
ParameterizedTest(kind *k, store, unknown_kids_are_rate_limited_and_known_ones_are_not)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *a = open_store(*k, 0);
    tokens_key *ka = key_in("gw-a");
    tokens_claims *c = NULL;
    tokens_status st;
    char *tok, *fake;
    int i, refused = 0, rc;

    publish(ka, a);
    tok = mint(ka, 600);
    fake = strdup(tok);
    /* Bounded: 3 bursts' worth, far faster than the refill. */
    for (i = 0; i < 3 * TOKENS_UNKNOWN_KID_RATE; i++) {
        snprintf(fake + 4, 17, "%016x", (unsigned)i + 1);
        fake[20] = '.';
        rc = tokens_verify(&c, &st, a, fake, (int64_t)time(NULL), &err);
        cr_assert_neq(st, TOKENS_OK);
        if (rc == -EAGAIN) {
            refused++;
            cr_assert(strstr(err.msg, "try again") != NULL, "%s", err.msg);
        } else {
            cr_assert_eq(rc, 0, "%s", err.msg);
            cr_assert_eq(st, TOKENS_UNKNOWN_KEY);
        }
        cr_assert_eq(verify(a, tok), TOKENS_OK, "a known kid is never rate-limited");
    }
    cr_assert_geq(refused, TOKENS_UNKNOWN_KID_RATE, "only about one burst was looked up");
    free(fake);
    tokens_secret_free(tok);
    tokens_key_free(ka);
    tokens_store_free(a);
}

PARAMS(a_store_that_cannot_be_read_fails_closed_and_says_why)
ParameterizedTest(kind *k, store, a_store_that_cannot_be_read_fails_closed_and_says_why)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *a = open_store(*k, 0), *broken = NULL;
    tokens_key *ka = key_in("gw-a");
    tokens_claims *c = NULL;
    tokens_status st = TOKENS_OK;
    char path[PATH_MAX], *tok;

    publish(ka, a);
    tok = mint(ka, 600);
    cr_assert_eq(verify(a, tok), TOKENS_OK);
    if (*k == KIND_FILES) {
        /* A directory where the revocations should be cannot be read, even by root. */
        snprintf(path, sizeof(path), "%s/revoked", shared);
        cr_assert_eq(mkdir(path, 0700), 0);
        broken = a;
    } else {
        config_state gone = {.postgres = (char *)"postgresql:///refgate?host=/nonexistent/rg",
                             .connections = 1};
        cr_assert_eq(db_pool_open(&pools[1], &gone, &err), 0, "%s", err.msg);
        cr_assert_eq(tokens_store_pg_open(&broken, pools[1], &err), 0, "%s", err.msg);
        /* Its key known (as after a first check), then the database goes. */
        publish(ka, a);
        cr_assert_lt(tokens_key_publish(ka, broken, "gw", &err), 0);
        cr_assert_eq(err.code, RG_E_STATE, "%s", err.msg);
    }
    cr_assert_lt(tokens_verify(&c, &st, broken, tok, (int64_t)time(NULL), &err), 0);
    cr_assert_null(c);
    cr_assert_neq(st, TOKENS_OK);
    if (*k == KIND_DATABASE) {
        cr_assert_eq(err.code, RG_E_STATE, "%s", err.msg);
        cr_assert(strstr(err.msg, "database") != NULL, "%s", err.msg);
    }
    cr_assert_lt(tokens_revoke(broken, tok, &err), 0);
    if (broken != a)
        tokens_store_free(broken);
    tokens_secret_free(tok);
    tokens_key_free(ka);
    tokens_store_free(a);
}

PARAMS(a_key_found_is_cached_and_a_revocation_never_is)
ParameterizedTest(kind *k, store, a_key_found_is_cached_and_a_revocation_never_is)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *a = open_store(*k, 0), *b = open_store(*k, 1);
    tokens_key *ka = key_in("gw-a");
    char path[PATH_MAX], kid[TOKENS_KID_SIZE], *tok;

    publish(ka, a);
    tok = mint(ka, 600);
    cr_assert_eq(verify(b, tok), TOKENS_OK); /* b looks the key up once */
    tokens_key_kid(kid, ka);
    /* The key leaves the store behind b's back: b still has it. */
    if (*k == KIND_FILES) {
        snprintf(path, sizeof(path), "%s/token-keys", shared);
        cr_assert_eq(truncate(path, 0), 0);
    } else {
        PGconn *c;
        const char *params[1] = {kid};

        cr_assert_eq(db_acquire(pools[0], &c, &err), 0, "%s", err.msg);
        cr_assert_eq(
            db_exec(c, NULL, "deleting", "DELETE FROM token_keys WHERE kid = $1", 1, params, &err),
            0, "%s", err.msg);
        db_release(pools[0], c);
    }
    cr_assert_eq(verify(b, tok), TOKENS_OK, "a key found is cached");
    cr_assert_eq(tokens_revoke(b, tok, &err), 0, "%s", err.msg);
    cr_assert_eq(verify(b, tok), TOKENS_REVOKED, "while its revocation is asked every time");
    tokens_secret_free(tok);
    tokens_key_free(ka);
    tokens_store_free(a);
    tokens_store_free(b);
}
