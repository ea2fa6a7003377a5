/* The gateway's metric families and the events that move them; see metrics.h. */
#include "gateway/metrics.h"

#include <stdlib.h>
#include <time.h>

#include "util/metrics.h"

struct gateway_metrics {
    rg_metrics *reg;
    rg_metric *pushes;
    rg_metric *refs;
    rg_metric *upstream;
    rg_metric *forwarded;
    rg_metric *token_failures;
    rg_metric *in_flight;
    rg_metric *conns_open;
    rg_metric *conns_waiting;
    rg_metric *refused;
    rg_metric *spool;
    rg_metric *spool_cap;
    rg_metric *audit;
    rg_metric *audit_failures;
};

/* Upstream exchanges: a local receive-pack takes milliseconds, a remote
 * push over the internet seconds, a large pack minutes. */
static const double upstream_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                          1,     2.5,  5,     10,   30,  60,   300};
/* An fsync: tens of microseconds on a good SSD, tens of milliseconds on a
 * busy disk. */
static const double audit_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                       0.01,   0.025,   0.05,   0.1,   0.25,   1};

static const char *const decision_outcome[] = {"decision", "outcome", NULL};
static const char *const op_label[] = {"op", NULL};
static const char *const reason_label[] = {"reason", NULL};

/* The series a scrape should show at zero before anything happened, so a
 * rate() has a start and a dashboard no holes. */
static const char *const push_series[][2] = {
    {"allow", "ok"},     {"allow", "upstream_error"},
    {"partial", "ok"},   {"partial", "upstream_error"},
    {"deny", "refused"}, {"none", "invalid"},
};
static const char *const ref_series[][2] = {
    {"allow", "ok"},
    {"allow", "upstream_rejected"},
    {"allow", "upstream_error"},
    {"allow", "refused"},
    {"deny", "refused"},
};
static const char *const refusal_reasons[] = {"header_deadline", "unauthenticated_limit",
                                              "per_token"};
static const char *const token_ops[] = {"mint", "revoke", "key-rotate"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int add(rg_metric **out, gateway_metrics *m, rg_metric_type type, const char *name,
               const char *help, const char *const *labels, const double *buckets, size_t nbuckets,
               rg_error *err)
{
    rg_metric_spec spec = {type, name, help, labels, buckets, nbuckets};

    return rg_metrics_register(out, m->reg, &spec, err);
}

int gateway_metrics_new(gateway_metrics **out, rg_error *err)
{
    gateway_metrics *m;
    int rc;

    *out = NULL;
    m = calloc(1, sizeof(*m));
    if (m == NULL || rg_metrics_new(&m->reg) < 0) {
        free(m);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    rc = add(&m->pushes, m, RG_METRIC_COUNTER, "refgate_pushes_total",
             "Pushes (receive-pack requests) by decision and outcome.", decision_outcome, NULL, 0,
             err);
    if (rc == 0)
        rc = add(&m->refs, m, RG_METRIC_COUNTER, "refgate_refs_total",
                 "Ref updates of decided pushes by decision and outcome.", decision_outcome, NULL,
                 0, err);
    if (rc == 0)
        rc = add(&m->upstream, m, RG_METRIC_HISTOGRAM, "refgate_upstream_push_seconds",
                 "Time from the first byte sent upstream to upstream's report.", NULL,
                 upstream_buckets, N(upstream_buckets), err);
    if (rc == 0)
        rc = add(&m->forwarded, m, RG_METRIC_COUNTER, "refgate_forwarded_bytes_total",
                 "Bytes of pushes sent upstream (commands and packs).", NULL, NULL, 0, err);
    if (rc == 0)
        rc = add(&m->token_failures, m, RG_METRIC_COUNTER, "refgate_token_failures_total",
                 "Run tokens the control socket could not mint or revoke, and key rotations that "
                 "failed.",
                 op_label, NULL, 0, err);
    if (rc == 0)
        rc = add(&m->in_flight, m, RG_METRIC_GAUGE, "refgate_pushes_in_flight",
                 "Push requests being received, decided or forwarded.", NULL, NULL, 0, err);
    if (rc == 0)
        rc = add(&m->conns_open, m, RG_METRIC_GAUGE, "refgate_connections_open",
                 "Open connections on the push listener.", NULL, NULL, 0, err);
    if (rc == 0)
        rc = add(&m->conns_waiting, m, RG_METRIC_GAUGE, "refgate_connections_unauthenticated",
                 "Open connections whose request is not yet authorised.", NULL, NULL, 0, err);
    if (rc == 0)
        rc = add(&m->refused, m, RG_METRIC_COUNTER, "refgate_connections_refused_total",
                 "Connections cut or requests refused by the connection limits, by reason.",
                 reason_label, NULL, 0, err);
    if (rc == 0)
        rc = add(&m->spool, m, RG_METRIC_GAUGE, "refgate_spool_bytes",
                 "Disk bytes spooled requests and kept packs hold (limits.spool_bytes).", NULL,
                 NULL, 0, err);
    if (rc == 0)
        rc = add(&m->spool_cap, m, RG_METRIC_GAUGE, "refgate_spool_limit_bytes",
                 "The spool budget, limits.spool_bytes.", NULL, NULL, 0, err);
    if (rc == 0)
        rc = add(&m->audit, m, RG_METRIC_HISTOGRAM, "refgate_audit_append_seconds",
                 "Time to append and fsync a batch of audit records.", NULL, audit_buckets,
                 N(audit_buckets), err);
    if (rc == 0)
        rc = add(&m->audit_failures, m, RG_METRIC_COUNTER, "refgate_audit_append_failures_total",
                 "Audit appends that failed.", NULL, NULL, 0, err);
    if (rc < 0) {
        gateway_metrics_free(m);
        return rc;
    }
    for (size_t i = 0; i < N(push_series); i++)
        rg_metric_add(m->pushes, push_series[i], 0);
    for (size_t i = 0; i < N(ref_series); i++)
        rg_metric_add(m->refs, ref_series[i], 0);
    for (size_t i = 0; i < N(refusal_reasons); i++)
        rg_metric_add(m->refused, &refusal_reasons[i], 0);
    for (size_t i = 0; i < N(token_ops); i++)
        rg_metric_add(m->token_failures, &token_ops[i], 0);
    rg_metric_add(m->forwarded, NULL, 0);
    rg_metric_add(m->in_flight, NULL, 0);
    rg_metric_add(m->audit_failures, NULL, 0);
    *out = m;
    return 0;
}

void gateway_metrics_free(gateway_metrics *m)
{
    if (m == NULL)
        return;
    rg_metrics_free(m->reg);
    free(m);
}

void gateway_metrics_push(gateway_metrics *m, const char *decision, const char *outcome)
{
    if (m)
        rg_metric_add(m->pushes, (const char *[]){decision, outcome}, 1);
}

void gateway_metrics_ref(gateway_metrics *m, const char *decision, const char *outcome)
{
    if (m)
        rg_metric_add(m->refs, (const char *[]){decision, outcome}, 1);
}

void gateway_metrics_upstream(gateway_metrics *m, double seconds)
{
    if (m)
        rg_metric_observe(m->upstream, NULL, seconds);
}

void gateway_metrics_forwarded(gateway_metrics *m, uint64_t bytes)
{
    if (m)
        rg_metric_add(m->forwarded, NULL, (double)bytes);
}

void gateway_metrics_token_failure(gateway_metrics *m, const char *op)
{
    if (m)
        rg_metric_add(m->token_failures, &op, 1);
}

void gateway_metrics_in_flight(gateway_metrics *m, int delta)
{
    if (m)
        rg_metric_add(m->in_flight, NULL, delta);
}

void gateway_metrics_audit_append(gateway_metrics *m, double seconds, int ok)
{
    if (m == NULL)
        return;
    rg_metric_observe(m->audit, NULL, seconds);
    if (!ok)
        rg_metric_add(m->audit_failures, NULL, 1);
}

int gateway_metrics_write(rg_buf *out, gateway_metrics *m, const gateway_metrics_state *st)
{
    rg_metric_set(m->conns_open, NULL, st->connections_open);
    rg_metric_set(m->conns_waiting, NULL, st->connections_waiting);
    rg_metric_set(m->refused, &refusal_reasons[0], (double)st->cut_header_deadline);
    rg_metric_set(m->refused, &refusal_reasons[1], (double)st->cut_unauthenticated);
    rg_metric_set(m->refused, &refusal_reasons[2], (double)st->refused_per_token);
    rg_metric_set(m->spool, NULL, (double)st->spool_bytes);
    rg_metric_set(m->spool_cap, NULL, (double)st->spool_cap);
    return rg_metrics_write(out, m->reg);
}

double gateway_metrics_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
