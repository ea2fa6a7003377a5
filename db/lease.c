/*
 * Gateway leases (db/lease.h): one row per gateway process in `gateways`,
 * written with the database's clock.
 */
#include "db/lease.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Insert or revive the row of `id`, with `seen` now. */
static int upsert(db_pool *p, const char *id, const char *what, rg_error *err)
{
    char host[256], pid[24];
    const char *params[3] = {id, host, pid};
    PGconn *c;
    int rc;

    if (gethostname(host, sizeof(host)) < 0)
        snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    if ((rc = db_acquire(p, &c, err)) < 0)
        return rc;
    rc = db_exec(c, NULL, what,
                 "INSERT INTO gateways (id, host, pid) VALUES ($1, $2, $3::integer) "
                 "ON CONFLICT (id) DO UPDATE SET seen = now(), stopped = NULL",
                 3, params, err);
    db_release(p, c);
    return rc;
}

int db_lease_register(db_pool *p, const char *id, rg_error *err)
{
    return upsert(p, id, "registering the gateway's lease", err);
}

int db_lease_renew(db_pool *p, const char *id, rg_error *err)
{
    const char *params[1] = {id};
    PGresult *r = NULL;
    PGconn *c;
    int rc, renewed;

    if ((rc = db_acquire(p, &c, err)) < 0)
        return rc;
    rc = db_exec(c, &r, "renewing the gateway's lease",
                 "UPDATE gateways SET seen = now() WHERE id = $1 AND stopped IS NULL", 1, params,
                 err);
    renewed = rc == 0 && strcmp(PQcmdTuples(r), "0") != 0;
    PQclear(r);
    db_release(p, c);
    if (rc < 0 || renewed)
        return rc;
    /* Someone removed the row: this gateway is alive, so say so again. */
    return upsert(p, id, "renewing the gateway's lease", err);
}

int db_lease_stop(db_pool *p, const char *id, rg_error *err)
{
    const char *params[1] = {id};
    PGconn *c;
    int rc;

    if ((rc = db_acquire(p, &c, err)) < 0)
        return rc;
    rc = db_exec(c, NULL, "marking the gateway stopped",
                 "UPDATE gateways SET seen = now(), stopped = now() WHERE id = $1", 1, params, err);
    db_release(p, c);
    return rc;
}
