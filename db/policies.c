/* Published policies; see policy.h. */
#include "db/policies.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whatever number, not the migration's: publishers take this advisory lock. */
#define PUBLISH_LOCK "8470002"

#define CURRENT_SQL                                                                                \
    "SELECT version, digest,"                                                                      \
    " to_char(published AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), published_by"       \
    " FROM policies ORDER BY version DESC LIMIT 1"

static void copy_text(char *out, size_t outsz, const char *s)
{
    snprintf(out, outsz, "%s", s ? s : "");
}

int db_policy_current(PGconn *c, db_policy_info *out, rg_error *err)
{
    PGresult *r;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = db_exec(c, &r, "reading the current policy", CURRENT_SQL, 0, NULL, err);
    if (rc == 0 && PQntuples(r) == 1) {
        out->version = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        copy_text(out->digest, sizeof(out->digest), PQgetvalue(r, 0, 1));
        copy_text(out->published, sizeof(out->published), PQgetvalue(r, 0, 2));
        copy_text(out->by, sizeof(out->by), PQgetvalue(r, 0, 3));
    }
    PQclear(r);
    return rc;
}

int db_policy_body(PGconn *c, long long version, char **body, size_t *len, rg_error *err)
{
    char v[24];
    const char *params[1] = {v};
    PGresult *r;
    int rc;

    *body = NULL;
    *len = 0;
    snprintf(v, sizeof(v), "%lld", version);
    /* The body is canonical JSON, UTF-8 text: read back as text. */
    rc = db_exec(c, &r, "reading a published policy",
                 "SELECT convert_from(body, 'UTF8') FROM policies WHERE version = $1::bigint", 1,
                 params, err);
    if (rc == 0 && PQntuples(r) != 1)
        rc = rg_error_set(err, RG_E_STATE, "policy version %lld is not in the database", version);
    if (rc == 0) {
        *len = (size_t)PQgetlength(r, 0, 0);
        *body = malloc(*len + 1);
        if (*body == NULL)
            rc = rg_error_set(err, -ENOMEM, "out of memory");
        else
            memcpy(*body, PQgetvalue(r, 0, 0), *len + 1);
    }
    PQclear(r);
    return rc;
}

int db_policy_load(PGconn *c, const db_policy_info *info, json_t **out, rg_error *err)
{
    char digest[CONFIG_POLICY_DIGEST_SIZE], label[64], *body = NULL;
    size_t len;
    int rc;

    *out = NULL;
    snprintf(label, sizeof(label), "published policy v%lld", info->version);
    rc = db_policy_body(c, info->version, &body, &len, err);
    if (rc == 0)
        rc = config_policy_digest_bytes(digest, body, len, err);
    if (rc == 0 && strcmp(digest, info->digest) != 0)
        rc = rg_error_set(err, RG_E_TAMPER, "%s: its body hashes to %s, not to its digest %s",
                          label, digest, info->digest);
    if (rc == 0)
        rc = config_policy_parse(out, body, len, label, err);
    free(body);
    return rc;
}

int db_policy_publish(db_pool *p, db_policy_info *out, int *unchanged, const char *digest,
                      const char *body, size_t len, const char *by, rg_error *err)
{
    char next[24];
    const char *params[4] = {next, digest, body, by};
    const int lengths[4] = {0, 0, (int)len, 0}, formats[4] = {0, 0, 1, 0};
    PGconn *c;
    int rc;

    *unchanged = 0;
    if (len > CONFIG_POLICY_MAX_BYTES)
        return rg_error_set(err, -EINVAL, "the policy is larger than %u bytes",
                            CONFIG_POLICY_MAX_BYTES);
    if ((rc = db_acquire(p, &c, err)) < 0)
        return rc;
    /* Publishers queue here while gateways' reads go on; the primary key
     * would refuse a second N+1 anyway, but as an error, not a wait. */
    if ((rc = db_begin(c, err)) < 0 || (rc = db_schema_check(c, err)) < 0 ||
        (rc = db_exec(c, NULL, "locking the policies",
                      "SELECT pg_advisory_xact_lock(" PUBLISH_LOCK ")", 0, NULL, err)) < 0 ||
        (rc = db_policy_current(c, out, err)) < 0)
        goto out;
    if (out->version > 0 && !strcmp(out->digest, digest)) {
        *unchanged = 1;
        rc = db_commit(c, err);
        goto out;
    }
    snprintf(next, sizeof(next), "%lld", out->version + 1);
    if ((rc = db_exec_bin(c, NULL, "publishing the policy",
                          "INSERT INTO policies (version, digest, body, published_by)"
                          " VALUES ($1::bigint, $2, $3::bytea, $4)",
                          4, params, lengths, formats, err)) < 0 ||
        (rc = db_policy_current(c, out, err)) < 0)
        goto out;
    rc = db_commit(c, err);
out:
    db_rollback(c);
    db_release(p, c);
    return rc;
}
