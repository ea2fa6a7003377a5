/*
 * The shared PostgreSQL database (config/state.h) that holds what every
 * gateway of a team must agree on: one audit chain, the approvals, run
 * token revocations and verification keys, the published policy.
 *
 * A pool of at most `connections` libpq connections per process, opened on
 * first use and opened again by the next caller after the database went
 * away (an idle connection the server dropped is noticed before use), so a
 * gateway recovers by itself when the database returns. While
 * it cannot be reached every call fails with RG_E_STATE and a message that
 * says so; callers fail closed on it. No message ever holds a password
 * (it is never in the connection string; see config/state.h).
 *
 * Statements go through PQexecParams only: no named server-side prepared
 * statements, no session settings, no LISTEN. Every transaction is one
 * acquire..release, so a transaction-mode pooler (pgbouncer) may sit
 * between the gateways and the database.
 */
#ifndef RG_DB_POOL_H
#define RG_DB_POOL_H

#include <libpq-fe.h>

#include "config/state.h"
#include "util/error.h"

/* The schema version this build reads and writes (db/schema.c). */
#define DB_SCHEMA_VERSION 1

/* How long db_acquire waits for a free connection before it gives up. */
#define DB_WAIT_SECONDS 10

typedef struct db_pool db_pool;

/*
 * A gateway process's name in the database (rows it owns: its lease, the
 * records it left open, its token keys): 16 random hex digits, new at
 * every start.
 */
#define DB_GATEWAY_ID_HEX 16
int db_gateway_id_new(char out[DB_GATEWAY_ID_HEX + 1], rg_error *err);

/* Make a pool for `st` (st->postgres set); nothing is connected yet. */
int db_pool_open(db_pool **out, const config_state *st, rg_error *err);
void db_pool_close(db_pool *p);

/*
 * A connection of the pool, connected and idle, for the caller alone until
 * db_release. RG_E_STATE when the database cannot be reached (the reason
 * from libpq) or every connection stayed busy for DB_WAIT_SECONDS.
 */
int db_acquire(db_pool *p, PGconn **out, rg_error *err);

/*
 * What the last use of the pool found, without touching the database (for
 * /healthz, which must answer at once): 0 when the last connect worked
 * and no connection was since lost, else RG_E_STATE with why.
 */
int db_health(db_pool *p, rg_error *err);

/* Give it back; one left broken or inside a transaction is closed instead. */
void db_release(db_pool *p, PGconn *c);

/*
 * Run one statement with text parameters (params[i] NULL is SQL NULL).
 * *out (may be NULL: cleared here) gets the result, for the caller to
 * PQclear whatever the outcome (on failure it may be NULL, or the failed
 * result for db_sqlstate). On failure RG_E_STATE with the server's
 * message, prefixed by `what` (what the caller was doing).
 */
int db_exec(PGconn *c, PGresult **out, const char *what, const char *sql, int nparams,
            const char *const *params, rg_error *err);

/* As db_exec, with lengths and formats per parameter (1: binary, e.g. bytea). */
int db_exec_bin(PGconn *c, PGresult **out, const char *what, const char *sql, int nparams,
                const char *const *params, const int *lengths, const int *formats, rg_error *err);

/*
 * As db_exec_bin, with every column of the result in binary (bytea as its
 * raw bytes; cast what should come as text to text).
 */
int db_query_bin(PGconn *c, PGresult **out, const char *what, const char *sql, int nparams,
                 const char *const *params, const int *lengths, const int *formats, rg_error *err);

/* The SQLSTATE of a failed result, or "" (e.g. "23505" for a unique violation). */
const char *db_sqlstate(const PGresult *r);

int db_begin(PGconn *c, rg_error *err);
int db_commit(PGconn *c, rg_error *err);
/* Roll back whatever is open; a broken connection is left for db_release. */
void db_rollback(PGconn *c);

/*
 * Create or bring the schema up to DB_SCHEMA_VERSION, in one transaction
 * under an advisory lock (two migrating at once wait for each other).
 * *from and *to (may be NULL) get the versions before and after.
 */
int db_migrate(db_pool *p, int *from, int *to, rg_error *err);

/*
 * At a gateway's start: RG_E_STATE when the database answers but its
 * schema is not this build's (the gateway must not start); 0 when it is,
 * and 0 with *reachable 0 when the database cannot be reached now (the
 * gateway starts and refuses what needs it until it returns).
 */
int db_startup_check(db_pool *p, int *reachable, rg_error *err);

/*
 * Whether the database's schema is the one this build speaks: RG_E_STATE
 * naming both versions and `refgate db migrate` when it is not.
 */
int db_schema_check(PGconn *c, rg_error *err);

#endif
