/*
 * The gateway's metrics: one registry (util/metrics.h) with every family
 * the admin listener's GET /metrics exposes, all named refgate_*, and one
 * function per event so the places that count say what happened, not how
 * it is stored. Every function accepts a NULL gateway_metrics (nothing is
 * counted), so code under test without a server runs unchanged.
 *
 * Label values are fixed words chosen here, never request data, so the
 * number of series is bounded by this file.
 */
#ifndef RG_GATEWAY_METRICS_H
#define RG_GATEWAY_METRICS_H

#include <stdint.h>

#include "util/buf.h"
#include "util/error.h"

typedef struct gateway_metrics gateway_metrics;

int gateway_metrics_new(gateway_metrics **out, rg_error *err);
void gateway_metrics_free(gateway_metrics *m);

/*
 * A push ended. decision: "allow" (every ref), "deny" (none), "partial",
 * or "none" (the request failed before a decision); outcome: "ok"
 * (everything forwarded landed), "refused" (nothing was forwarded),
 * "upstream_error" (a forwarded ref did not land), "invalid" (no decision).
 */
void gateway_metrics_push(gateway_metrics *m, const char *decision, const char *outcome);

/*
 * One ref of a decided push. decision: "allow" or "deny"; outcome: "ok",
 * "refused" (not forwarded), "upstream_rejected" (upstream said ng),
 * "upstream_error" (no report from upstream).
 */
void gateway_metrics_ref(gateway_metrics *m, const char *decision, const char *outcome);

/* A forwarded push's exchange with upstream took this long. */
void gateway_metrics_upstream(gateway_metrics *m, double seconds);

/* Bytes sent upstream for a push (commands and pack). */
void gateway_metrics_forwarded(gateway_metrics *m, uint64_t bytes);

/* A run token could not be minted or revoked (op "mint" or "revoke"). */
void gateway_metrics_token_failure(gateway_metrics *m, const char *op);

/* A push request started (+1) or ended (-1). */
void gateway_metrics_in_flight(gateway_metrics *m, int delta);

/* An audit append (fsync included) took this long. */
void gateway_metrics_audit_append(gateway_metrics *m, double seconds, int ok);

/* What is kept elsewhere and copied in when scraped. */
typedef struct gateway_metrics_state {
    unsigned connections_open;
    unsigned connections_waiting; /* open, request headers not yet authorised */
    unsigned long cut_header_deadline;
    unsigned long cut_unauthenticated;
    unsigned long refused_per_token;
    uint64_t spool_bytes;
    uint64_t spool_cap;
} gateway_metrics_state;

/* Copy `st` in and append the exposition to out. */
int gateway_metrics_write(rg_buf *out, gateway_metrics *m, const gateway_metrics_state *st);

/* Monotonic seconds, for timing what is observed above. */
double gateway_metrics_now(void);

#endif
