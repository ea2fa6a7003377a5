/*
 * The database schema and its migrations (db/pool.h). migrations[i] takes
 * the schema from version i to i+1; a released migration is never edited,
 * a change is a new one. All of PostgreSQL's DDL is transactional, so a
 * migration lands whole or not at all.
 */
#include "db/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whatever number: all refgate migrations take this advisory lock. */
#define MIGRATE_LOCK "8470001"

static const char *const migrations[DB_SCHEMA_VERSION] = {
    /* 0 -> 1 */
    /* The gateways serving on this database; a lease renewed while one serves. */
    "CREATE TABLE gateways ("
    "  id text PRIMARY KEY,"
    "  host text NOT NULL,"
    "  pid integer NOT NULL,"
    "  started timestamptz NOT NULL DEFAULT now(),"
    "  seen timestamptz NOT NULL DEFAULT now(),"
    "  stopped timestamptz);"

    /* Audit: one chain for the team; the head row is where appends serialise. */
    "CREATE TABLE audit_head ("
    "  one boolean PRIMARY KEY DEFAULT true CHECK (one),"
    "  seq bigint NOT NULL,"
    "  hash text NOT NULL);"
    "INSERT INTO audit_head VALUES (true, 0, repeat('0', 64));"
    "CREATE TABLE audit_records ("
    "  seq bigint PRIMARY KEY,"
    "  line bytea NOT NULL," /* the exact bytes the chain hashes, without the newline */
    "  kind text NOT NULL,"
    "  gateway text,"
    "  decision_seq bigint,"
    "  pending boolean NOT NULL DEFAULT false);"
    "CREATE INDEX audit_records_pending ON audit_records (gateway) WHERE pending;"

    /* Run tokens: every gateway's public keys, and revocations by token id. */
    "CREATE TABLE token_keys ("
    "  kid text PRIMARY KEY,"
    "  public_key bytea NOT NULL,"
    "  gateway text NOT NULL,"
    "  created timestamptz NOT NULL DEFAULT now(),"
    "  retired timestamptz);"
    "CREATE TABLE token_revocations ("
    "  token_id text PRIMARY KEY,"
    "  expires bigint NOT NULL,"
    "  revoked timestamptz NOT NULL DEFAULT now());"

    /* Approvals (approvals/store_pg.c), and the packs reviewers look at. Rows stay
     * as history: state pending, approved, denied, expired or consumed; at
     * most one live (pending or approved) per update. An approved row a
     * push is forwarding carries its claim (holder, until when); a
     * consumed one keeps the claim that consumed it. */
    "CREATE TABLE approvals ("
    "  id text PRIMARY KEY,"
    "  state text NOT NULL"
    "    CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'consumed')),"
    "  repo text NOT NULL, ref text NOT NULL, old_id text NOT NULL, new_id text NOT NULL,"
    "  run text NOT NULL DEFAULT '', rule text NOT NULL DEFAULT '',"
    "  reason text NOT NULL DEFAULT '', decided_by text NOT NULL DEFAULT '',"
    "  note text NOT NULL DEFAULT '',"
    "  created bigint NOT NULL, decided bigint NOT NULL DEFAULT 0, expires bigint NOT NULL,"
    "  pack_bytes bigint NOT NULL DEFAULT 0,"
    "  claim text NOT NULL DEFAULT '', claim_until bigint NOT NULL DEFAULT 0,"
    "  settled bigint NOT NULL DEFAULT 0);"
    "CREATE UNIQUE INDEX approvals_live ON approvals (repo, ref, old_id, new_id)"
    "  WHERE state IN ('pending', 'approved');"
    "CREATE INDEX approvals_open ON approvals (expires)"
    "  WHERE state IN ('pending', 'approved', 'denied');"
    "CREATE TABLE approval_packs ("
    "  id text PRIMARY KEY REFERENCES approvals ON DELETE CASCADE,"
    "  pack bytea NOT NULL);"

    /* Published policies; the highest version is the current one. */
    "CREATE TABLE policies ("
    "  version bigint PRIMARY KEY,"
    "  digest text NOT NULL,"
    "  body bytea NOT NULL,"
    "  published timestamptz NOT NULL DEFAULT now(),"
    "  published_by text NOT NULL DEFAULT '');",
};

/* Several statements at once: the simple query protocol, no parameters. */
static int exec_script(PGconn *c, const char *what, const char *sql, rg_error *err)
{
    PGresult *r = PQexec(c, sql);
    char msg[300];
    int ok = r != NULL && PQresultStatus(r) == PGRES_COMMAND_OK;

    if (!ok) {
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(c));
        msg[strcspn(msg, "\n")] = '\0';
    }
    PQclear(r);
    return ok ? 0 : rg_error_set(err, RG_E_STATE, "%s: %s", what, msg);
}

/* The version the database is at: 0 when refgate never migrated it. */
static int current_version(PGconn *c, int *version, rg_error *err)
{
    PGresult *r;
    int rc;

    *version = 0;
    rc = db_exec(c, &r, "reading the schema version", "SELECT version FROM refgate_schema", 0, NULL,
                 err);
    if (rc < 0) {
        /* 42P01: undefined_table, a database refgate never touched. */
        rc = !strcmp(db_sqlstate(r), "42P01") ? 0 : rc;
        PQclear(r);
        return rc;
    }
    if (PQntuples(r) == 1)
        *version = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

int db_schema_check(PGconn *c, rg_error *err)
{
    int version, rc;

    if ((rc = current_version(c, &version, err)) < 0)
        return rc;
    if (version != DB_SCHEMA_VERSION)
        return rg_error_set(err, RG_E_STATE,
                            "the database schema is at version %d and this refgate needs "
                            "version %d: run `refgate db migrate --config FILE`",
                            version, DB_SCHEMA_VERSION);
    return 0;
}

int db_startup_check(db_pool *p, int *reachable, rg_error *err)
{
    PGconn *c;
    int rc;

    *reachable = 0;
    if (db_acquire(p, &c, err) < 0)
        return 0;
    *reachable = 1;
    rc = db_schema_check(c, err);
    db_release(p, c);
    return rc;
}

int db_migrate(db_pool *p, int *from, int *to, rg_error *err)
{
    PGconn *c;
    int version = 0, rc;
    char v[16];
    const char *params[1] = {v};

    if ((rc = db_acquire(p, &c, err)) < 0)
        return rc;
    if ((rc = db_begin(c, err)) < 0 ||
        (rc = db_exec(c, NULL, "locking the schema",
                      "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK ")", 0, NULL, err)) < 0 ||
        (rc = db_exec(c, NULL, "creating the schema version table",
                      "CREATE TABLE IF NOT EXISTS refgate_schema (version integer NOT NULL)", 0,
                      NULL, err)) < 0 ||
        (rc = current_version(c, &version, err)) < 0)
        goto out;
    if (from != NULL)
        *from = version;
    if (version > DB_SCHEMA_VERSION) {
        rc = rg_error_set(err, RG_E_STATE,
                          "the database schema is at version %d, newer than this refgate's %d",
                          version, DB_SCHEMA_VERSION);
        goto out;
    }
    for (int i = version; i < DB_SCHEMA_VERSION; i++) {
        char what[64];

        snprintf(what, sizeof(what), "migrating the schema to version %d", i + 1);
        if ((rc = exec_script(c, what, migrations[i], err)) < 0)
            goto out;
    }
    snprintf(v, sizeof(v), "%d", DB_SCHEMA_VERSION);
    if ((rc = db_exec(c, NULL, "recording the schema version", "DELETE FROM refgate_schema", 0,
                      NULL, err)) < 0 ||
        (rc = db_exec(c, NULL, "recording the schema version",
                      "INSERT INTO refgate_schema (version) VALUES ($1::integer)", 1, params,
                      err)) < 0 ||
        (rc = db_commit(c, err)) < 0)
        goto out;
    if (to != NULL)
        *to = DB_SCHEMA_VERSION;
out:
    db_rollback(c);
    db_release(p, c);
    return rc;
}
