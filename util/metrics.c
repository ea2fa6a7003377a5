/* The metrics registry and its text exposition; see metrics.h. */
#include "util/metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct series {
    char *values[RG_METRIC_LABELS_MAX];
    double value;    /* counter, gauge; a histogram's sum */
    double count;    /* histogram */
    double *buckets; /* histogram: per bound, not cumulative */
    struct series *next;
} series;

struct rg_metric {
    rg_metrics *reg;
    rg_metric_type type;
    char *name;
    char *help;
    char *labels[RG_METRIC_LABELS_MAX];
    size_t nlabels;
    double bounds[RG_METRIC_BUCKETS_MAX];
    size_t nbounds;
    series *head, *tail;
    size_t nseries;
    struct rg_metric *next;
};

struct rg_metrics {
    pthread_mutex_t lock;
    rg_metric *head, *tail;
};

/* ------------------------------------------------------------ registry */

int rg_metrics_new(rg_metrics **out)
{
    rg_metrics *m = calloc(1, sizeof(*m));

    *out = NULL;
    if (m == NULL)
        return -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    *out = m;
    return 0;
}

static void series_free(series *s, size_t nlabels)
{
    for (size_t i = 0; i < nlabels; i++)
        free(s->values[i]);
    free(s->buckets);
    free(s);
}

static void family_free(rg_metric *f)
{
    series *s, *next;

    if (f == NULL)
        return;
    for (s = f->head; s; s = next) {
        next = s->next;
        series_free(s, f->nlabels);
    }
    for (size_t i = 0; i < f->nlabels; i++)
        free(f->labels[i]);
    free(f->name);
    free(f->help);
    free(f);
}

void rg_metrics_free(rg_metrics *m)
{
    rg_metric *f, *next;

    if (m == NULL)
        return;
    for (f = m->head; f; f = next) {
        next = f->next;
        family_free(f);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static int name_ok(const char *s, int colon)
{
    if (s == NULL || s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || (colon && c == ':')))
            return 0;
    }
    return 1;
}

static int check_spec(const rg_metric_spec *spec, size_t *nlabels, rg_error *err)
{
    size_t n = 0;

    if (!name_ok(spec->name, 1))
        return rg_error_set(err, -EINVAL, "bad metric name '%s'", spec->name ? spec->name : "");
    for (; spec->labels && spec->labels[n]; n++) {
        const char *l = spec->labels[n];

        if (n == RG_METRIC_LABELS_MAX)
            return rg_error_set(err, -EINVAL, "%s: more than %d labels", spec->name,
                                RG_METRIC_LABELS_MAX);
        if (!name_ok(l, 0) || !strncmp(l, "__", 2) ||
            (spec->type == RG_METRIC_HISTOGRAM && !strcmp(l, "le")))
            return rg_error_set(err, -EINVAL, "%s: bad label name '%s'", spec->name, l);
    }
    if (spec->type == RG_METRIC_HISTOGRAM) {
        if (spec->nbuckets == 0 || spec->nbuckets > RG_METRIC_BUCKETS_MAX)
            return rg_error_set(err, -EINVAL, "%s: 1 to %d buckets", spec->name,
                                RG_METRIC_BUCKETS_MAX);
        for (size_t i = 0; i < spec->nbuckets; i++)
            if (!isfinite(spec->buckets[i]) || (i > 0 && spec->buckets[i] <= spec->buckets[i - 1]))
                return rg_error_set(err, -EINVAL, "%s: buckets must be finite and ascending",
                                    spec->name);
    }
    *nlabels = n;
    return 0;
}

int rg_metrics_register(rg_metric **out, rg_metrics *m, const rg_metric_spec *spec, rg_error *err)
{
    rg_metric *f = NULL;
    size_t nlabels = 0;
    int rc;

    *out = NULL;
    rc = check_spec(spec, &nlabels, err);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&m->lock);
    for (rg_metric *g = m->head; g; g = g->next)
        if (!strcmp(g->name, spec->name)) {
            rc = rg_error_set(err, -EINVAL, "metric %s registered twice", spec->name);
            goto done;
        }
    f = calloc(1, sizeof(*f));
    if (f == NULL || (f->name = strdup(spec->name)) == NULL ||
        (f->help = strdup(spec->help ? spec->help : "")) == NULL)
        goto oom;
    f->reg = m;
    f->type = spec->type;
    for (; f->nlabels < nlabels; f->nlabels++)
        if ((f->labels[f->nlabels] = strdup(spec->labels[f->nlabels])) == NULL)
            goto oom;
    if (spec->type == RG_METRIC_HISTOGRAM) {
        memcpy(f->bounds, spec->buckets, spec->nbuckets * sizeof(double));
        f->nbounds = spec->nbuckets;
    }
    if (m->tail)
        m->tail->next = f;
    else
        m->head = f;
    m->tail = f;
    *out = f;
    f = NULL;
    rc = 0;
    goto done;
oom:
    rc = rg_error_set(err, -ENOMEM, "out of memory");
done:
    pthread_mutex_unlock(&m->lock);
    family_free(f);
    return rc;
}

/* -------------------------------------------------------------- series */

/* The series for `values`, made if it is new; NULL past the cap or on
 * allocation failure. Called with the registry locked. */
static series *series_get(rg_metric *f, const char *const *values, int create)
{
    series *s;
    size_t i;

    for (s = f->head; s; s = s->next) {
        for (i = 0; i < f->nlabels && !strcmp(s->values[i], values[i] ? values[i] : ""); i++)
            ;
        if (i == f->nlabels)
            return s;
    }
    if (!create || f->nseries == RG_METRIC_SERIES_MAX)
        return NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    if (f->type == RG_METRIC_HISTOGRAM &&
        (s->buckets = calloc(f->nbounds, sizeof(*s->buckets))) == NULL)
        goto fail;
    for (i = 0; i < f->nlabels; i++)
        if ((s->values[i] = strdup(values[i] ? values[i] : "")) == NULL)
            goto fail;
    if (f->tail)
        f->tail->next = s;
    else
        f->head = s;
    f->tail = s;
    f->nseries++;
    return s;
fail:
    series_free(s, f->nlabels);
    return NULL;
}

void rg_metric_add(rg_metric *f, const char *const *values, double v)
{
    series *s;

    if (f == NULL || isnan(v) || (f->type == RG_METRIC_COUNTER && v < 0) ||
        f->type == RG_METRIC_HISTOGRAM)
        return;
    pthread_mutex_lock(&f->reg->lock);
    if ((s = series_get(f, values, 1)) != NULL)
        s->value += v;
    pthread_mutex_unlock(&f->reg->lock);
}

void rg_metric_set(rg_metric *f, const char *const *values, double v)
{
    series *s;

    if (f == NULL || f->type == RG_METRIC_HISTOGRAM)
        return;
    pthread_mutex_lock(&f->reg->lock);
    if ((s = series_get(f, values, 1)) != NULL)
        s->value = v;
    pthread_mutex_unlock(&f->reg->lock);
}

void rg_metric_observe(rg_metric *f, const char *const *values, double v)
{
    series *s;

    if (f == NULL || f->type != RG_METRIC_HISTOGRAM || isnan(v))
        return;
    pthread_mutex_lock(&f->reg->lock);
    if ((s = series_get(f, values, 1)) != NULL) {
        for (size_t i = 0; i < f->nbounds; i++)
            if (v <= f->bounds[i]) {
                s->buckets[i]++;
                break;
            }
        s->value += v;
        s->count++;
    }
    pthread_mutex_unlock(&f->reg->lock);
}

double rg_metric_value(rg_metric *f, const char *const *values)
{
    series *s;
    double v = 0;

    if (f == NULL)
        return 0;
    pthread_mutex_lock(&f->reg->lock);
    if ((s = series_get(f, values, 0)) != NULL)
        v = f->type == RG_METRIC_HISTOGRAM ? s->count : s->value;
    pthread_mutex_unlock(&f->reg->lock);
    return v;
}

/* ---------------------------------------------------------- exposition */

/* The shortest text that reads back as v (Go's strconv 'g' -1 style). */
static void format_number(char *out, size_t outsz, double v)
{
    if (isnan(v)) {
        snprintf(out, outsz, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, outsz, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(out, outsz, "%.*g", p, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

/* HELP text escapes `\` and newline; label values also `"`. */
static int put_escaped(rg_buf *out, const char *s, int quote)
{
    int rc = 0;

    for (; *s && rc == 0; s++) {
        if (*s == '\\')
            rc = rg_buf_puts(out, "\\\\");
        else if (*s == '\n')
            rc = rg_buf_puts(out, "\\n");
        else if (quote && *s == '"')
            rc = rg_buf_puts(out, "\\\"");
        else
            rc = rg_buf_append(out, s, 1);
    }
    return rc;
}

/* `{a="x",b="y"}`, with `le` last for a bucket; nothing when empty. */
static int put_labels(rg_buf *out, const rg_metric *f, const series *s, const char *le)
{
    int rc = 0;

    if (f->nlabels == 0 && le == NULL)
        return 0;
    rc = rg_buf_puts(out, "{");
    for (size_t i = 0; i < f->nlabels && rc == 0; i++) {
        rc = rg_buf_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
        if (rc == 0)
            rc = put_escaped(out, s->values[i], 1);
        if (rc == 0)
            rc = rg_buf_puts(out, "\"");
    }
    if (rc == 0 && le)
        rc = rg_buf_printf(out, "%sle=\"%s\"", f->nlabels ? "," : "", le);
    if (rc == 0)
        rc = rg_buf_puts(out, "}");
    return rc;
}

static int put_sample(rg_buf *out, const rg_metric *f, const char *suffix, const series *s,
                      const char *le, double v)
{
    char num[40];
    int rc;

    format_number(num, sizeof(num), v);
    rc = rg_buf_printf(out, "%s%s", f->name, suffix);
    if (rc == 0)
        rc = put_labels(out, f, s, le);
    if (rc == 0)
        rc = rg_buf_printf(out, " %s\n", num);
    return rc;
}

static int put_histogram(rg_buf *out, const rg_metric *f, const series *s)
{
    char le[40];
    double cum = 0;
    int rc = 0;

    for (size_t i = 0; i < f->nbounds && rc == 0; i++) {
        cum += s->buckets[i];
        format_number(le, sizeof(le), f->bounds[i]);
        rc = put_sample(out, f, "_bucket", s, le, cum);
    }
    if (rc == 0)
        rc = put_sample(out, f, "_bucket", s, "+Inf", s->count);
    if (rc == 0)
        rc = put_sample(out, f, "_sum", s, NULL, s->value);
    if (rc == 0)
        rc = put_sample(out, f, "_count", s, NULL, s->count);
    return rc;
}

static const char *type_name(rg_metric_type t)
{
    return t == RG_METRIC_COUNTER ? "counter" : t == RG_METRIC_GAUGE ? "gauge" : "histogram";
}

int rg_metrics_write(rg_buf *out, rg_metrics *m)
{
    int rc = 0;

    pthread_mutex_lock(&m->lock);
    for (const rg_metric *f = m->head; f && rc == 0; f = f->next) {
        rc = rg_buf_printf(out, "# HELP %s ", f->name);
        if (rc == 0)
            rc = put_escaped(out, f->help, 0);
        if (rc == 0)
            rc = rg_buf_printf(out, "\n# TYPE %s %s\n", f->name, type_name(f->type));
        for (const series *s = f->head; s && rc == 0; s = s->next)
            rc = f->type == RG_METRIC_HISTOGRAM ? put_histogram(out, f, s)
                                                : put_sample(out, f, "", s, NULL, s->value);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}
