/*
 * One push (POST .../git-receive-pack) from the first body byte to the
 * answer, in order: plan (classify each command on the ref that really
 * moves), inspect the pack when a rule needs ancestry, decide, make the
 * decisions durable in the audit log, forward the allowed commands (always
 * asking upstream for report-status), then merge upstream's report with the
 * gateway's own rejections and record every forwarded ref's outcome —
 * however the request ends, a client that went away included.
 *
 * When no rule needs to tell an update from a force, the pack streams
 * straight to upstream as it arrives. When one does, the pack is spooled to
 * disk and indexed in a quarantine so ancestry is computed, not guessed;
 * what cannot be decided counts as a force (fail closed).
 */
#ifndef RG_GATEWAY_RECEIVE_H
#define RG_GATEWAY_RECEIVE_H

#include <stddef.h>

#include "gateway/context.h"
#include "gateway/route.h"
#include "gateway/spool.h"
#include "upstream/upstream.h"
#include "tokens/token.h"
#include "util/buf.h"
#include "util/error.h"

typedef struct gateway_receive_info {
    const gateway_ctx *ctx;
    const gateway_route *route;
    const upstream_target *target; /* where the allowed part goes */
    const tokens_claims *claims;   /* the authenticated run */
    const char *token_hash;        /* tokens_hash_prefix() of its token */
    const char *remote;            /* client address, for the audit log */
    int gzip;                      /* Content-Encoding: gzip */
    gateway_spool_lease *lease;    /* charged for spooled bytes; the caller's */
} gateway_receive_info;

typedef struct gateway_receive gateway_receive;

/* The info is copied (strings included); nothing needs to outlive the call. */
int gateway_receive_new(gateway_receive **out, const gateway_receive_info *info, rg_error *err);

/*
 * The next raw body bytes. A negative return means the request cannot go
 * on (malformed, too large): answer with gateway_receive_end anyway, which
 * turns the failure into an HTTP error.
 */
int gateway_receive_body(gateway_receive *r, const char *data, size_t len);

/*
 * The body is complete: decide what was not yet decided, forward, collect
 * upstream's answer, write the audit records and build the response.
 * *status is the HTTP status; *content_type its type.
 */
void gateway_receive_end(gateway_receive *r, rg_buf *response, unsigned *status,
                         const char **content_type);

/*
 * Whether gateway_receive_end held the push for an approval (an ask rule's
 * "hold", gateway/approve.h): then its response is empty and the answer is
 * streamed with gateway_receive_read instead (HTTP 200, the same content
 * type).
 */
int gateway_receive_held(const gateway_receive *r);

/*
 * The held push's answer, as it comes: a band-2 line saying what it waits
 * for, keepalives (empty band-1 packets) every few seconds, then, once the
 * approval is decided or the hold is up, the report of the push decided
 * again. Up to `max` bytes into buf; blocks until there are some (a
 * keepalive's time at most); 0 at the end.
 */
size_t gateway_receive_read(gateway_receive *r, char *buf, size_t max);

/*
 * Free. When the push was forwarded and not yet finished (the client went
 * away), upstream's answer is collected first and the outcome recorded.
 */
void gateway_receive_free(gateway_receive *r);

#endif
