/*
 * Gateway leases: the `gateways` table, where every gateway serving on the
 * database says it is alive. A gateway registers at start (its id, host
 * name and pid), renews `seen` every DB_LEASE_RENEW_SECONDS while it
 * serves, and marks `stopped` at a clean stop. A gateway whose lease was
 * not renewed for DB_LEASE_DEAD_SECONDS, or that stopped, is dead: what it
 * left open (audit decisions forwarded without an outcome) is completed by
 * a live gateway (audit/store_pg.c). The clock is the database's (now()), so the
 * gateways' own clocks never decide who is dead.
 */
#ifndef RG_DB_LEASE_H
#define RG_DB_LEASE_H

#include "db/pool.h"

#define DB_LEASE_RENEW_SECONDS 2
#define DB_LEASE_DEAD_SECONDS  10

/*
 * An SQL condition true for a gateway id `col` (a column or expression of
 * the statement) that holds no live lease: no row, a stopped one, or one
 * not renewed for DB_LEASE_DEAD_SECONDS. NULL (a record imported from a
 * file log) is dead too.
 */
#define DB_LEASE_DEAD_SQL(col)                                                                     \
    "(" col " IS NULL OR NOT EXISTS (SELECT 1 FROM gateways g WHERE g.id = " col                   \
    " AND g.stopped IS NULL AND g.seen > now() - interval '" DB_LEASE_STR(                         \
        DB_LEASE_DEAD_SECONDS) " seconds'))"
#define DB_LEASE_STR_(x) #x
#define DB_LEASE_STR(x)  DB_LEASE_STR_(x)

/* Register gateway `id` of this host and process as live (again, if it was). */
int db_lease_register(db_pool *p, const char *id, rg_error *err);

/* Renew the lease of `id`; a lease that is gone (or was stopped) is made again. */
int db_lease_renew(db_pool *p, const char *id, rg_error *err);

/* Mark `id` stopped: everything it forwarded has its outcome. */
int db_lease_stop(db_pool *p, const char *id, rg_error *err);

#endif
