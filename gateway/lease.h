/*
 * A gateway's lease in the shared database (db/lease.h), kept by a thread
 * of its own: registered at start, renewed every DB_LEASE_RENEW_SECONDS,
 * marked stopped at a clean stop. The same thread retries, after every
 * renewal that worked, the outcome records waiting in the outbox
 * (gateway/outbox.h), and sweeps: every GATEWAY_LEASE_SWEEP_SECONDS it
 * completes the audit records that dead gateways left pending
 * (audit_complete_pending of the database store).
 */
#ifndef RG_GATEWAY_LEASE_H
#define RG_GATEWAY_LEASE_H

#include "audit/audit.h"
#include "db/pool.h"
#include "gateway/outbox.h"

#define GATEWAY_LEASE_SWEEP_SECONDS 4

typedef struct gateway_lease gateway_lease;

/*
 * Register `gateway_id` and complete what dead gateways left pending, then
 * start the thread. `db`, `audit` and `outbox` (may be NULL) are borrowed
 * until gateway_lease_stop.
 * A database that cannot be reached now is logged, not an error: the
 * thread registers the lease as soon as it answers. *recovered gets how
 * many records the start completed. Fails only when the thread cannot start.
 */
int gateway_lease_start(gateway_lease **out, db_pool *db, const char *gateway_id, audit_log *audit,
                        gateway_outbox *outbox, size_t *recovered, rg_error *err);

/* Stop the thread and mark the lease stopped; NULL is fine. */
void gateway_lease_stop(gateway_lease *l);

#endif
