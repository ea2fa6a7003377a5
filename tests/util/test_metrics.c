/* The metrics registry and its Prometheus text exposition (util/metrics.c). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/metrics.h"

static rg_metrics *reg;

static void setup(void)
{
    cr_assert_eq(rg_metrics_new(&reg), 0);
}

static void teardown(void)
{
    rg_metrics_free(reg);
}

TestSuite(metrics, .init = setup, .fini = teardown);

static rg_metric *add(rg_metric_type type, const char *name, const char *help,
                      const char *const *labels)
{
    rg_metric_spec spec = {.type = type, .name = name, .help = help, .labels = labels};
    rg_error err = RG_ERROR_INIT;
    rg_metric *f;

    cr_assert_eq(rg_metrics_register(&f, reg, &spec, &err), 0, "%s", err.msg);
    return f;
}

static char *expose(void)
{
    rg_buf b = RG_BUF_INIT(1 << 20);

    cr_assert_eq(rg_metrics_write(&b, reg), 0);
    return b.data ? rg_buf_detach(&b) : strdup("");
}

Test(metrics, a_counter_has_help_and_type_lines_then_its_series_in_order)
{
    rg_metric *f = add(RG_METRIC_COUNTER, "refgate_pushes_total", "Pushes.",
                       (const char *[]){"decision", "outcome", NULL});
    char *text;

    rg_metric_add(f, (const char *[]){"allow", "ok"}, 1);
    rg_metric_add(f, (const char *[]){"deny", "refused"}, 1);
    rg_metric_add(f, (const char *[]){"allow", "ok"}, 2);
    text = expose();
    cr_assert_str_eq(text, "# HELP refgate_pushes_total Pushes.\n"
                           "# TYPE refgate_pushes_total counter\n"
                           "refgate_pushes_total{decision=\"allow\",outcome=\"ok\"} 3\n"
                           "refgate_pushes_total{decision=\"deny\",outcome=\"refused\"} 1\n");
    free(text);
}

Test(metrics, a_counter_never_goes_down_and_a_gauge_does)
{
    rg_metric *c = add(RG_METRIC_COUNTER, "c_total", "c", NULL);
    rg_metric *g = add(RG_METRIC_GAUGE, "g", "g", NULL);

    rg_metric_add(c, NULL, 5);
    rg_metric_add(c, NULL, -3);
    rg_metric_add(c, NULL, NAN);
    rg_metric_add(g, NULL, 5);
    rg_metric_add(g, NULL, -3);
    cr_assert_eq(rg_metric_value(c, NULL), 5);
    cr_assert_eq(rg_metric_value(g, NULL), 2);
    rg_metric_set(g, NULL, 42);
    cr_assert_eq(rg_metric_value(g, NULL), 42);
}

Test(metrics, label_values_escape_backslash_quote_and_newline)
{
    rg_metric *f = add(RG_METRIC_GAUGE, "g", "g", (const char *[]){"v", NULL});
    char *text;

    rg_metric_set(f, (const char *[]){"a\\b\"c\nd"}, 1);
    text = expose();
    cr_assert(strstr(text, "g{v=\"a\\\\b\\\"c\\nd\"} 1\n") != NULL, "%s", text);
    free(text);
}

Test(metrics, help_escapes_backslash_and_newline_but_not_quotes)
{
    add(RG_METRIC_GAUGE, "g", "say \"hi\"\\\nnext", NULL);
    char *text = expose();

    cr_assert_str_eq(text, "# HELP g say \"hi\"\\\\\\nnext\n# TYPE g gauge\n");
    free(text);
}

Test(metrics, a_histogram_has_cumulative_buckets_inf_sum_and_count)
{
    static const double b[] = {0.25, 0.5, 1};
    rg_metric_spec spec = {.type = RG_METRIC_HISTOGRAM,
                           .name = "lat_seconds",
                           .help = "Latency.",
                           .labels = (const char *[]){"op", NULL},
                           .buckets = b,
                           .nbuckets = 3};
    rg_error err = RG_ERROR_INIT;
    rg_metric *f;
    char *text;

    cr_assert_eq(rg_metrics_register(&f, reg, &spec, &err), 0);
    rg_metric_observe(f, (const char *[]){"push"}, 0.125);
    rg_metric_observe(f, (const char *[]){"push"}, 0.5); /* le is inclusive */
    rg_metric_observe(f, (const char *[]){"push"}, 0.75);
    rg_metric_observe(f, (const char *[]){"push"}, 7);
    text = expose();
    cr_assert_str_eq(text, "# HELP lat_seconds Latency.\n"
                           "# TYPE lat_seconds histogram\n"
                           "lat_seconds_bucket{op=\"push\",le=\"0.25\"} 1\n"
                           "lat_seconds_bucket{op=\"push\",le=\"0.5\"} 2\n"
                           "lat_seconds_bucket{op=\"push\",le=\"1\"} 3\n"
                           "lat_seconds_bucket{op=\"push\",le=\"+Inf\"} 4\n"
                           "lat_seconds_sum{op=\"push\"} 8.375\n"
                           "lat_seconds_count{op=\"push\"} 4\n");
    cr_assert_eq(rg_metric_value(f, (const char *[]){"push"}), 4);
    free(text);
}

Test(metrics, a_histogram_without_labels_puts_le_alone)
{
    static const double b[] = {1};
    rg_metric_spec spec = {
        .type = RG_METRIC_HISTOGRAM, .name = "h", .help = "h", .buckets = b, .nbuckets = 1};
    rg_error err = RG_ERROR_INIT;
    rg_metric *f;
    char *text;

    cr_assert_eq(rg_metrics_register(&f, reg, &spec, &err), 0);
    rg_metric_observe(f, NULL, 2);
    text = expose();
    cr_assert(strstr(text, "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n"),
              "%s", text);
    free(text);
}

typedef struct bad_spec {
    rg_metric_spec spec;
    const char *why;
} bad_spec;

static const double ascending[] = {1, 2};
static const double descending[] = {2, 1};
static const char *const colon[] = {"a:b", NULL};
static const char *const reserved[] = {"__x", NULL};
static const char *const le[] = {"le", NULL};
static const char *const four[] = {"a", "b", "c", "d", NULL};

static const bad_spec bad_specs[] = {
    {{RG_METRIC_COUNTER, "", "h", NULL, NULL, 0}, "empty name"},
    {{RG_METRIC_COUNTER, "9lives", "h", NULL, NULL, 0}, "leading digit"},
    {{RG_METRIC_COUNTER, "a-b", "h", NULL, NULL, 0}, "dash"},
    {{RG_METRIC_COUNTER, "ok", "h", colon, NULL, 0}, "colon label"},
    {{RG_METRIC_COUNTER, "ok", "h", reserved, NULL, 0}, "reserved"},
    {{RG_METRIC_HISTOGRAM, "ok", "h", le, ascending, 2}, "le"},
    {{RG_METRIC_HISTOGRAM, "ok", "h", NULL, descending, 2}, "descending buckets"},
    {{RG_METRIC_HISTOGRAM, "ok", "h", NULL, NULL, 0}, "no buckets"},
    {{RG_METRIC_COUNTER, "ok", "h", four, NULL, 0}, "too many labels"},
};

/* Indexes, not the specs: Criterion runs each case in a new process, where
 * the specs' pointers would not hold. */
ParameterizedTestParameters(metrics, bad_specs_are_refused)
{
    static size_t idx[sizeof(bad_specs) / sizeof(bad_specs[0])];

    for (size_t i = 0; i < sizeof(idx) / sizeof(idx[0]); i++)
        idx[i] = i;
    return cr_make_param_array(size_t, idx, sizeof(idx) / sizeof(idx[0]));
}

ParameterizedTest(size_t *i, metrics, bad_specs_are_refused)
{
    const bad_spec *c = &bad_specs[*i];
    rg_error err = RG_ERROR_INIT;
    rg_metric *f = (rg_metric *)1;

    cr_assert_eq(rg_metrics_register(&f, reg, &c->spec, &err), -EINVAL, "%s", c->why);
    cr_assert_null(f);
    cr_assert(err.msg[0] != '\0');
}

Test(metrics, a_name_registers_once)
{
    rg_metric_spec spec = {.type = RG_METRIC_GAUGE, .name = "g", .help = "g"};
    rg_error err = RG_ERROR_INIT;
    rg_metric *f;

    cr_assert_eq(rg_metrics_register(&f, reg, &spec, &err), 0);
    cr_assert_eq(rg_metrics_register(&f, reg, &spec, &err), -EINVAL);
}

Test(metrics, series_stop_at_the_cap)
{
    rg_metric *f = add(RG_METRIC_COUNTER, "c_total", "c", (const char *[]){"n", NULL});
    char v[16];

    for (int i = 0; i < RG_METRIC_SERIES_MAX + 10; i++) {
        snprintf(v, sizeof(v), "%d", i);
        rg_metric_add(f, (const char *[]){v}, 1);
    }
    cr_assert_eq(rg_metric_value(f, (const char *[]){"0"}), 1);
    snprintf(v, sizeof(v), "%d", RG_METRIC_SERIES_MAX);
    cr_assert_eq(rg_metric_value(f, (const char *[]){v}), 0);
}

Test(metrics, a_null_family_is_a_no_op)
{
    rg_metric_add(NULL, NULL, 1);
    rg_metric_set(NULL, NULL, 1);
    rg_metric_observe(NULL, NULL, 1);
    cr_assert_eq(rg_metric_value(NULL, NULL), 0);
}

Test(metrics, values_print_as_the_shortest_exact_text)
{
    rg_metric *f = add(RG_METRIC_GAUGE, "g", "g", (const char *[]){"k", NULL});
    char *text;

    rg_metric_set(f, (const char *[]){"a"}, 1e15);
    rg_metric_set(f, (const char *[]){"b"}, 0.25);
    rg_metric_set(f, (const char *[]){"c"}, INFINITY);
    rg_metric_set(f, (const char *[]){"d"}, -2);
    text = expose();
    cr_assert(strstr(text, "g{k=\"a\"} 1e+15\n"), "%s", text);
    cr_assert(strstr(text, "g{k=\"b\"} 0.25\n"), "%s", text);
    cr_assert(strstr(text, "g{k=\"c\"} +Inf\n"), "%s", text);
    cr_assert(strstr(text, "g{k=\"d\"} -2\n"), "%s", text);
    free(text);
}
