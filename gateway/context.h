/*
 * What a request of a running gateway sees: the configuration and the
 * credential providers of the snapshot it began under (gateway/snapshot.h),
 * and what every request shares: the token key and store, the audit log, the
 * approvals, the metrics. The server keeps one for its own threads (the
 * config at start) and copies it per request with that request's
 * snapshot; read-only to requests (the audit log, the approvals store and
 * the metrics do their own locking).
 */
#ifndef RG_GATEWAY_CONTEXT_H
#define RG_GATEWAY_CONTEXT_H

#include <stdatomic.h>

#include "approvals/approvals.h"
#include "audit/audit.h"
#include "config/config.h"
#include "db/pool.h"
#include "gateway/metrics.h"
#include "gateway/outbox.h"
#include "tokens/credentials.h"
#include "tokens/token.h"

typedef struct gateway_ctx {
    const config_model *cfg;
    tokens_key *key;      /* this gateway's signing key */
    tokens_store *tokens; /* public keys and revocations: files, or ctx->db */
    audit_log *audit;
    gateway_outbox *outbox;     /* outcomes the log could not take, retried; NULL: none kept */
    approvals_store *approvals; /* NULL: `ask` stays a deny */
    db_pool *db;                /* the shared database (config "state"); NULL: files only */
    char gateway_id[DB_GATEWAY_ID_HEX + 1]; /* this process, as the database knows it */
    gateway_metrics *metrics;               /* NULL: nothing is counted */
    /* Per upstream, indexed like cfg->upstreams; NULL entries for local ones. */
    tokens_provider **read_creds;
    tokens_provider **write_creds;
    char tmp_dir[4096];   /* <state_dir>/tmp: spools and quarantines */
    atomic_int *stopping; /* set when the server stops: held pushes end */
} gateway_ctx;

#endif
