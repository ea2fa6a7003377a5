/*
 * Deciding one ref update against the configured rules. This is the whole
 * of the policy decision, kept pure (no I/O, no allocation, no clock) so it
 * can be tested exhaustively and explained: the result names the deciding
 * rule and carries the reason the pusher will read after "policy: ", and on
 * request a trace says, rule by rule, which selectors did not match
 * (`refgate policy check`). The gateway's path takes no trace and stops at
 * a rule's first failing selector, cheapest first.
 */
#include "policy/eval.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/glob.h"

#define NO_APPROVER "and no approver is configured: ask a maintainer to push it or change the rule"

static int is_single_action(config_action a)
{
    return a == CONFIG_ACTION_CREATE || a == CONFIG_ACTION_UPDATE || a == CONFIG_ACTION_FORCE ||
           a == CONFIG_ACTION_DELETE;
}

/* A selector that is absent (NULL) matches everything. */
static int any_glob_matches(char *const *globs, size_t n, const char *name)
{
    size_t i;

    if (globs == NULL)
        return 1;
    for (i = 0; i < n; i++)
        if (rg_glob_match(globs[i], name))
            return 1;
    return 0;
}

/* An unknown run (NULL or "") matches only rules without `runs`. */
static int run_matches(const config_rule *r, const char *run)
{
    if (r->runs == NULL)
        return 1;
    return run != NULL && run[0] != '\0' && any_glob_matches(r->runs, r->nruns, run);
}

static int rule_matches(const config_rule *r, const char *repo, const char *ref, const char *run,
                        config_action action)
{
    return (r->actions & (unsigned)action) != 0 && run_matches(r, run) &&
           any_glob_matches(r->repos, r->nrepos, repo) && any_glob_matches(r->refs, r->nrefs, ref);
}

/* The index of the first glob matching `name`, or -1 (none, or no selector). */
static int glob_index(char *const *globs, size_t n, const char *name)
{
    size_t i;

    for (i = 0; globs != NULL && name != NULL && i < n; i++)
        if (rg_glob_match(globs[i], name))
            return (int)i;
    return -1;
}

/* Every selector of one rule, for an explanation. */
static void trace_rule(policy_trace_rule *t, const config_rule *r, const char *repo,
                       const char *ref, const char *run, config_action action)
{
    t->failed = 0;
    t->repo_glob = glob_index(r->repos, r->nrepos, repo);
    t->ref_glob = glob_index(r->refs, r->nrefs, ref);
    t->run_glob = run != NULL && run[0] != '\0' ? glob_index(r->runs, r->nruns, run) : -1;
    if (r->repos != NULL && t->repo_glob < 0)
        t->failed |= POLICY_SEL_REPO;
    if (r->refs != NULL && t->ref_glob < 0)
        t->failed |= POLICY_SEL_REF;
    if ((r->actions & (unsigned)action) == 0)
        t->failed |= POLICY_SEL_ACTION;
    if (r->runs != NULL && t->run_glob < 0)
        t->failed |= POLICY_SEL_RUN;
}

/* The trace of one evaluation: what decide() reads instead of matching again. */
typedef struct trace_view {
    const policy_trace_rule *rules; /* NULL: no trace */
    size_t n;
} trace_view;

/*
 * The first rule (in config order) with the strongest effect among those
 * that match and are in the given mode; -1 when none match. *count gets
 * how many matched.
 */
static int decide(int *count, const config_model *cfg, int evaluate_only, const trace_view *tv,
                  const char *repo, const char *ref, const char *run, config_action action)
{
    const config_rule *r;
    int best = -1, match;
    size_t i;

    *count = 0;
    for (i = 0; i < cfg->nrules; i++) {
        r = &cfg->rules[i];
        if (!r->evaluate_only != !evaluate_only)
            continue;
        if (i < tv->n)
            match = tv->rules[i].failed == 0;
        else
            match = rule_matches(r, repo, ref, run, action);
        if (!match)
            continue;
        (*count)++;
        /* Strictly greater, so among equals the first rule decides. */
        if (best < 0 || r->effect > cfg->rules[best].effect)
            best = (int)i;
    }
    return best;
}

/* ------------------------------------------------------------------------ */
/* Reasons                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Refs are shown at most this long, so that with a name and reason at
 * their config limits the approval notice at the end still fits the reason.
 */
#define REF_SHOWN_MAX 128

/* Append to the reason; the caps above keep this from truncating. */
static void reason_add(policy_decision *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void reason_add(policy_decision *out, const char *fmt, ...)
{
    size_t len = strlen(out->reason);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out->reason + len, sizeof(out->reason) - len, fmt, ap);
    va_end(ap);
}

/*
 * `ref` as shown in a reason: long names (the wire allows them) are cut at
 * a character boundary and end in "...", so git prints valid UTF-8.
 */
static const char *ref_shown(char buf[REF_SHOWN_MAX + 4], const char *ref)
{
    size_t cut = REF_SHOWN_MAX;

    if (strlen(ref) <= REF_SHOWN_MAX)
        return ref;
    while (cut > 0 && ((unsigned char)ref[cut] & 0xc0) == 0x80)
        cut--;
    memcpy(buf, ref, cut);
    memcpy(buf + cut, "...", 4);
    return buf;
}

static void reason_for_rule(policy_decision *out, const config_rule *r, const char *ref,
                            config_action action)
{
    char shown[REF_SHOWN_MAX + 4];
    const char *verb = r->effect == CONFIG_DENY  ? "denies"
                       : r->effect == CONFIG_ASK ? "requires approval for"
                                                 : "allows";

    if (r->reason != NULL) {
        reason_add(out, "%s", r->reason);
        if (r->effect == CONFIG_ASK)
            reason_add(out, "; approval required (rule \"%s\"), " NO_APPROVER, r->name);
        return;
    }
    reason_add(out, "rule \"%s\" %s %s on %s", r->name, verb, config_action_name(action),
               ref_shown(shown, ref));
    /* The generated text already names the rule and says approval is needed. */
    if (r->effect == CONFIG_ASK)
        reason_add(out, ", " NO_APPROVER);
}

static void reason_for_default(policy_decision *out, config_effect effect, const char *ref,
                               config_action action)
{
    char shown[REF_SHOWN_MAX + 4];

    reason_add(out, "no rule %s %s on %s (default: %s)",
               effect == CONFIG_ALLOW ? "matches" : "allows", config_action_name(action),
               ref_shown(shown, ref), config_effect_name(effect));
    if (effect == CONFIG_ASK)
        reason_add(out, "; approval required, " NO_APPROVER);
}

/* ------------------------------------------------------------------------ */
/* Evaluation                                                               */
/* ------------------------------------------------------------------------ */

const char *policy_selector_name(policy_selector s)
{
    switch (s) {
    case POLICY_SEL_REPO:
        return "repo";
    case POLICY_SEL_REF:
        return "ref";
    case POLICY_SEL_ACTION:
        return "action";
    case POLICY_SEL_RUN:
        return "run";
    }
    return "unknown";
}

static void eval(policy_decision *out, const trace_view *tv, const config_model *cfg,
                 const char *repo, const char *ref, const char *run, config_action action)
{
    int best, ebest;

    memset(out, 0, sizeof(*out));
    out->rule_index = -1;
    out->rule_name = "default";
    out->evaluate_effect = CONFIG_ALLOW;
    /* A caller's mistake must not turn into an allow: fail closed. */
    if (cfg == NULL || repo == NULL || ref == NULL || !is_single_action(action)) {
        out->effect = CONFIG_DENY;
        out->rule_effect = CONFIG_DENY;
        reason_add(out, "cannot evaluate the update (%s)",
                   cfg == NULL                 ? "no configuration"
                   : !is_single_action(action) ? "unknown action"
                                               : "no repository or ref");
        return;
    }

    best = decide(&out->matched, cfg, 0, tv, repo, ref, run, action);
    if (best >= 0) {
        out->rule_index = best;
        out->rule_name = cfg->rules[best].name;
        out->rule_effect = cfg->rules[best].effect;
        reason_for_rule(out, &cfg->rules[best], ref, action);
    } else {
        out->rule_effect = cfg->default_effect;
        reason_for_default(out, cfg->default_effect, ref, action);
    }
    /* Without an approver, asking can only end in a refusal. */
    out->effect = out->rule_effect == CONFIG_ALLOW ? CONFIG_ALLOW : CONFIG_DENY;

    ebest = decide(&out->evaluate_matched, cfg, 1, tv, repo, ref, run, action);
    if (ebest >= 0) {
        out->evaluate_effect = cfg->rules[ebest].effect;
        out->evaluate_rule_name = cfg->rules[ebest].name;
    }
}

void policy_eval(policy_decision *out, const config_model *cfg, const char *repo, const char *ref,
                 const char *run, config_action action)
{
    static const trace_view none = {NULL, 0};

    eval(out, &none, cfg, repo, ref, run, action);
}

void policy_eval_trace(policy_decision *out, policy_trace_rule *trace, size_t ntrace,
                       const config_model *cfg, const char *repo, const char *ref, const char *run,
                       config_action action)
{
    trace_view tv = {trace, 0};
    size_t i;

    /* Refused arguments are decided (denied) by eval() without a trace. */
    if (cfg != NULL && repo != NULL && ref != NULL && is_single_action(action) && trace != NULL) {
        tv.n = ntrace < cfg->nrules ? ntrace : cfg->nrules;
        for (i = 0; i < tv.n; i++)
            trace_rule(&trace[i], &cfg->rules[i], repo, ref, run, action);
    }
    eval(out, &tv, cfg, repo, ref, run, action);
}
