/*
 * bench_policy: how long policy_eval takes to decide one ref update against
 * a large rule set, the cost the gateway pays per ref of a push. The rules
 * (default 1,000) are loaded through config_parse like a real config, with
 * a mix of globs: literal and wildcard repos, `*`, `?` and `**` in refs,
 * `runs` on some, both effects, some in evaluate mode. The updates are
 * chosen so that the repo selector matches and every rule's ref patterns
 * must be tried: the slow case, not the fast one. Prints microseconds of
 * CPU time per decision (so a busy machine inflates them less), without and
 * with a trace (`refgate policy check`).
 *
 *   bench_policy [RULES] [DECISIONS]
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "policy/eval.h"

/* CPU time of this thread, in microseconds. */
static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Append to a growing string; exits on failure (a benchmark, not a library). */
static void append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (n < 0)
            exit(1);
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return;
        }
        *cap *= 2;
        *buf = realloc(*buf, *cap);
        if (*buf == NULL)
            exit(1);
    }
}

static char *rules_json(size_t nrules)
{
    static const char *const actions[] = {"", "\"actions\": [\"create\"], ",
                                          "\"actions\": [\"update\", \"force\"], ",
                                          "\"actions\": [\"delete\", \"force\"], "};
    size_t cap = 1 << 16, len = 0, i;
    char *buf = malloc(cap);

    if (buf == NULL)
        exit(1);
    append(&buf, &len, &cap,
           "{\"state_dir\": \"/tmp/bench-policy-state\", \"default\": \"deny\","
           " \"upstreams\": [{\"host\": \"local\", \"url\": \"https://git.example.com\"},"
           "               {\"host\": \"gh\", \"url\": \"https://github.example.com\"}],"
           " \"rules\": [");
    for (i = 0; i < nrules; i++) {
        append(&buf, &len, &cap,
               "%s{\"name\": \"r%zu\", \"repos\": [\"local/team%zu/*\", \"%s/acme/**\"],"
               " \"refs\": [\"refs/heads/feature-%zu/**\", \"refs/tags/v%zu.*\","
               " \"refs/heads/*-%zu?\", \"refs/**/release-%zu\"], %s%s"
               "\"effect\": \"%s\", \"reason\": \"rule %zu\"%s}",
               i ? ", " : "", i, i % 50, i % 2 ? "local" : "*", i, i, i, i, actions[i % 4],
               i % 5 == 0 ? "\"runs\": [\"agent-*\", \"release-?\"], " : "",
               i % 3 == 0 ? "deny" : "allow", i, i % 7 == 0 ? ", \"mode\": \"evaluate\"" : "");
    }
    append(&buf, &len, &cap, "]}");
    return buf;
}

int main(int argc, char **argv)
{
    static const char *const refs[] = {
        "refs/heads/main",
        "refs/heads/feature-login/part/two",
        "refs/tags/v2.0.1",
        "refs/heads/agent/fix-1234",
        "refs/heads/very/deep/ref/name/that/walks/every/double/star/pattern",
    };
    static const char *const runs[] = {"agent-42", NULL, "release-1"};
    static const config_action acts[] = {CONFIG_ACTION_CREATE, CONFIG_ACTION_UPDATE,
                                         CONFIG_ACTION_FORCE, CONFIG_ACTION_DELETE};
    size_t nrules = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000, i, allowed = 0;
    char *json = rules_json(nrules);
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    policy_trace_rule *trace;
    policy_decision d;
    double t0, plain, traced;

    if (config_parse(&cfg, json, strlen(json), "/tmp/bench-policy.json", &err) < 0) {
        fprintf(stderr, "bench_policy: %s\n", err.msg);
        return 1;
    }
    trace = calloc(nrules ? nrules : 1, sizeof(*trace));
    if (trace == NULL)
        return 1;
    /* Warm the caches once. */
    for (i = 0; i < 100; i++)
        policy_eval(&d, cfg, "local/acme/app", refs[i % 5], runs[i % 3], acts[i % 4]);

    t0 = now_us();
    for (i = 0; i < n; i++) {
        policy_eval(&d, cfg, "local/acme/app", refs[i % 5], runs[i % 3], acts[i % 4]);
        allowed += d.effect == CONFIG_ALLOW;
    }
    plain = (now_us() - t0) / (double)n;

    t0 = now_us();
    for (i = 0; i < n / 4 + 1; i++)
        policy_eval_trace(&d, trace, nrules, cfg, "local/acme/app", refs[i % 5], runs[i % 3],
                          acts[i % 4]);
    traced = (now_us() - t0) / (double)(n / 4 + 1);

    printf("policy_eval: %zu rules, %zu decisions (%zu allowed): %.2f us per decision\n", nrules, n,
           allowed, plain);
    printf("policy_eval_trace: %.2f us per decision\n", traced);
    free(trace);
    config_free(cfg);
    free(json);
    return 0;
}
