/*
 * The token store in the shared PostgreSQL database (store.h): the tables
 * token_keys (kid, public_key, gateway, created, retired) and
 * token_revocations (token_id, expires, revoked) of db/schema.c. Every
 * call is one statement on a connection of the pool (no transaction, no
 * session state); the revocation check is one primary-key lookup. When
 * the database cannot answer the call fails with RG_E_STATE and callers
 * fail closed.
 */
#include "tokens/store_ops.h"
#include "util/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Revocations of tokens expired this long ago are pruned (clock skew between gateways). */
#define PRUNE_AFTER_SECONDS (24 * 3600)

typedef struct pg_store {
    db_pool *pool;
} pg_store;

/* One statement on a pooled connection; *out as db_exec (caller PQclears). */
static int pg_run(pg_store *ps, PGresult **out, const char *what, const char *sql, int n,
                  const char *const *params, const int *lengths, const int *formats, rg_error *err)
{
    PGconn *c;
    int rc;

    *out = NULL;
    rc = db_acquire(ps->pool, &c, err);
    if (rc < 0) {
        rg_error_wrap(err, "%s", what);
        return rc;
    }
    rc = db_exec_bin(c, out, what, sql, n, params, lengths, formats, err);
    /* A pooled connection the database dropped (it restarted) fails its
     * next statement: once, on a fresh connection. Every statement here is
     * safe to run twice. */
    if (rc < 0 && PQstatus(c) != CONNECTION_OK) {
        db_release(ps->pool, c);
        PQclear(*out);
        *out = NULL;
        rc = db_acquire(ps->pool, &c, err);
        if (rc < 0) {
            rg_error_wrap(err, "%s", what);
            return rc;
        }
        rc = db_exec_bin(c, out, what, sql, n, params, lengths, formats, err);
    }
    db_release(ps->pool, c);
    return rc;
}

/* A bytea in text output (`\x` and hex) into exactly `len` bytes. */
static int bytea_hex(unsigned char *out, size_t len, const char *text)
{
    size_t i;
    int hi, lo;

    if (strncmp(text, "\\x", 2) != 0 || strlen(text) != 2 + 2 * len)
        return -EINVAL;
    for (i = 0; i < len; i++) {
        hi = rg_hex_digit(text[2 + 2 * i]);
        lo = rg_hex_digit(text[3 + 2 * i]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

static int pg_key_put(void *impl, const char *kid, const unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                      const char *gateway, rg_error *err)
{
    const char *params[3] = {kid, (const char *)pub, gateway};
    const int lengths[3] = {0, TOKENS_PUBLIC_KEY_LEN, 0}, formats[3] = {0, 1, 0};
    PGresult *r;
    int rc;

    /* The row keeps the gateway that published first; the update only
     * returns the row when the key is the same, so a kid taken by another
     * key returns none. */
    rc = pg_run(impl, &r, "publishing a token key",
                "INSERT INTO token_keys (kid, public_key, gateway) VALUES ($1, $2, $3) "
                "ON CONFLICT (kid) DO UPDATE SET gateway = token_keys.gateway "
                "WHERE token_keys.public_key = EXCLUDED.public_key RETURNING kid",
                3, params, lengths, formats, err);
    if (rc == 0 && PQntuples(r) != 1)
        rc = rg_error_set(err, RG_E_STATE,
                          "publishing a token key: key id %s is taken by another "
                          "key",
                          kid);
    PQclear(r);
    return rc;
}

static int pg_key_retire(void *impl, const char *kid, rg_error *err)
{
    const char *params[1] = {kid};
    PGresult *r;
    int rc;

    rc = pg_run(impl, &r, "retiring a token key",
                "UPDATE token_keys SET retired = now() WHERE kid = $1 AND retired IS NULL", 1,
                params, NULL, NULL, err);
    PQclear(r);
    return rc;
}

static int pg_key_find(void *impl, int *found, unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                       const char *kid, rg_error *err)
{
    const char *params[1] = {kid};
    PGresult *r;
    int rc;

    *found = 0;
    rc = pg_run(impl, &r, "looking up a token key",
                "SELECT public_key FROM token_keys WHERE kid = $1", 1, params, NULL, NULL, err);
    if (rc == 0 && PQntuples(r) == 1) {
        if (bytea_hex(pub, TOKENS_PUBLIC_KEY_LEN, PQgetvalue(r, 0, 0)) < 0)
            rc = rg_error_set(err, RG_E_STATE, "token key %s in the database is not a 32-byte key",
                              kid);
        else
            *found = 1;
    }
    PQclear(r);
    return rc;
}

static int pg_revoke(void *impl, const char *id, int64_t exp, rg_error *err)
{
    char expbuf[24], cutoff[24];
    const char *params[2] = {id, expbuf}, *prune[1] = {cutoff};
    PGresult *r;
    int rc;

    snprintf(expbuf, sizeof(expbuf), "%lld", (long long)exp);
    rc = pg_run(impl, &r, "recording a token revocation",
                "INSERT INTO token_revocations (token_id, expires) VALUES ($1, $2::bigint) "
                "ON CONFLICT (token_id) DO NOTHING",
                2, params, NULL, NULL, err);
    PQclear(r);
    if (rc < 0)
        return rc;
    /* Revocations are rare and expired tokens are refused anyway: prune here. */
    snprintf(cutoff, sizeof(cutoff), "%lld", (long long)time(NULL) - PRUNE_AFTER_SECONDS);
    rc = pg_run(impl, &r, "pruning expired token revocations",
                "DELETE FROM token_revocations WHERE expires < $1::bigint", 1, prune, NULL, NULL,
                err);
    PQclear(r);
    return rc;
}

static int pg_is_revoked(void *impl, int *revoked, const char *id, rg_error *err)
{
    const char *params[1] = {id};
    PGresult *r;
    int rc;

    *revoked = 0;
    rc = pg_run(impl, &r, "checking token revocations",
                "SELECT 1 FROM token_revocations WHERE token_id = $1", 1, params, NULL, NULL, err);
    if (rc == 0)
        *revoked = PQntuples(r) > 0;
    PQclear(r);
    return rc;
}

static void pg_free(void *impl)
{
    free(impl);
}

static const tokens_store_ops pg_ops = {
    .kind = "database",
    .key_put = pg_key_put,
    .key_retire = pg_key_retire,
    .key_find = pg_key_find,
    .revoke = pg_revoke,
    .is_revoked = pg_is_revoked,
    .free = pg_free,
};

int tokens_store_pg_open(tokens_store **out, db_pool *pool, rg_error *err)
{
    pg_store *ps;

    *out = NULL;
    if (pool == NULL)
        return rg_error_set(err, -EINVAL, "no database pool");
    ps = calloc(1, sizeof(*ps));
    if (ps == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    ps->pool = pool;
    return tokens_store_new(out, &pg_ops, ps, err);
}
