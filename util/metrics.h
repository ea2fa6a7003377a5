/*
 * A small metrics registry and its Prometheus text exposition (format
 * 0.0.4), because Debian packages no C client library for it. A registry
 * holds metric families (counter, gauge, histogram with fixed buckets),
 * each with up to RG_METRIC_LABELS_MAX label names; a family's series are
 * made the first time a set of label values is used, at most
 * RG_METRIC_SERIES_MAX of them (further label sets are dropped, so a
 * caller's mistake cannot grow memory without bound).
 *
 * One mutex per registry guards every value: updates come from request
 * threads at the rate of pushes and connections, so a lock is cheap and
 * a scrape sees one consistent snapshot.
 *
 * Every update function accepts a NULL family and does nothing, so code
 * that is instrumented runs unchanged where nobody collects (unit tests,
 * tools). The registry owns its families; free it last.
 */
#ifndef RG_UTIL_METRICS_H
#define RG_UTIL_METRICS_H

#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

#define RG_METRIC_LABELS_MAX  3
#define RG_METRIC_BUCKETS_MAX 24
#define RG_METRIC_SERIES_MAX  128

typedef enum rg_metric_type {
    RG_METRIC_COUNTER,
    RG_METRIC_GAUGE,
    RG_METRIC_HISTOGRAM,
} rg_metric_type;

typedef struct rg_metrics rg_metrics;
typedef struct rg_metric rg_metric;

typedef struct rg_metric_spec {
    rg_metric_type type;
    const char *name;          /* [a-zA-Z_:][a-zA-Z0-9_:]* */
    const char *help;          /* any text: escaped on output */
    const char *const *labels; /* NULL-terminated label names, or NULL */
    const double *buckets;     /* histograms: finite upper bounds, ascending */
    size_t nbuckets;           /* +Inf is implied */
} rg_metric_spec;

int rg_metrics_new(rg_metrics **out);
void rg_metrics_free(rg_metrics *m);

/*
 * Register a family; *out belongs to the registry. -EINVAL (with a message)
 * for a bad name, label name (histograms may not use `le`), bucket list or
 * a name already registered.
 */
int rg_metrics_register(rg_metric **out, rg_metrics *m, const rg_metric_spec *spec, rg_error *err);

/*
 * Updates. `values` has one label value per label name (NULL when the
 * family has none). A counter only goes up: add ignores a negative or NaN
 * amount. set is for gauges, and for counters whose total is kept
 * elsewhere and copied in when scraped.
 */
void rg_metric_add(rg_metric *f, const char *const *values, double v);
void rg_metric_set(rg_metric *f, const char *const *values, double v);
void rg_metric_observe(rg_metric *f, const char *const *values, double v);

/* The value of one series (0 when it does not exist); for tests. */
double rg_metric_value(rg_metric *f, const char *const *values);

/* Append the whole registry to out in the text exposition format. */
int rg_metrics_write(rg_buf *out, rg_metrics *m);

#endif
