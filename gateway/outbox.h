/*
 * The outbox: outcome records the audit log could not take when their push
 * ended (the database went away after the push was forwarded, or COMMIT's
 * answer was lost; a full disk for the file), kept in memory and retried
 * in order, so a decision whose ref landed does not stay pending while its
 * gateway lives. The lease thread retries every tick once the database
 * answers (gateway/lease.h); with the file store a request retries after
 * its own outcomes were written; a clean stop retries before its stop
 * event. A retry goes through audit_append_outcomes, which writes an
 * outcome only while its decision is still pending: an earlier try that
 * did land, or a gateway that took this one for dead, is not repeated.
 *
 * Invariants: records are deep copies owned by the outbox; at most `max`
 * of them and `max_bytes` are kept, and past either the oldest is dropped
 * and logged (its decision
 * stays pending and is completed as "unknown" once this gateway is gone);
 * retries keep the order records were added in, and one retry runs at a
 * time. Thread-safe.
 */
#ifndef RG_GATEWAY_OUTBOX_H
#define RG_GATEWAY_OUTBOX_H

#include <stddef.h>

#include "audit/audit.h"
#include "util/error.h"

/* What a gateway's outbox keeps at most: records, and their bytes (a ref name may be long). */
#define GATEWAY_OUTBOX_MAX       4096
#define GATEWAY_OUTBOX_MAX_BYTES (16 * 1024 * 1024)

typedef struct gateway_outbox gateway_outbox;

/*
 * An empty outbox for `log` (borrowed: it must outlive the outbox),
 * keeping at most max > 0 records of at most max_bytes in all.
 */
int gateway_outbox_new(gateway_outbox **out, audit_log *log, size_t max, size_t max_bytes,
                       rg_error *err);

/*
 * Keep copies of n outcome records for a retry; past the bound the oldest
 * are dropped (logged). -EINVAL (nothing kept) when one is not an outcome
 * naming its decision, -ENOMEM when they cannot be copied.
 */
int gateway_outbox_add(gateway_outbox *ob, const audit_record *recs, size_t n);

/* How many records wait. */
size_t gateway_outbox_count(gateway_outbox *ob);

/*
 * Retry what waits, oldest first, in batches, until it is empty or an
 * append fails (the records stay, first in line). *appended and *skipped
 * (either may be NULL) get how many were written and how many were passed
 * over because their decision was no longer pending. 0 when the outbox is
 * empty afterwards, else the append's error.
 */
int gateway_outbox_flush(gateway_outbox *ob, size_t *appended, size_t *skipped, rg_error *err);

/* Free; records still waiting are logged as lost. NULL is fine. */
void gateway_outbox_free(gateway_outbox *ob);

#endif
