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

#define NO_APPROVER "refused until a reviewer approves this update (refgate approvals)"

static int is_single_action(config_action a)
{
    return a == CONFIG_ACTION_CREATE || a == CONFIG_ACTION_UPDATE || a == CONFIG_ACTION_FORCE ||
           a == CONFIG_ACTION_DELETE;
}

/* A name being matched, measured once per decision rather than per pattern. */
typedef struct subject {
    const char *s; /* NULL: unknown (a run) */
    size_t len;
} subject;

/* What one decision is about. */
typedef struct update {
    subject repo, ref, run;
    config_action action;
    const policy_facts *facts; /* may be NULL */
} update;

/*
 * Whether `pattern` matches `name`. A name it matches starts and ends with
 * the pattern's literal ends (rg_glob_ends): most patterns of a large rule
 * set fail there, in a few byte comparisons, and what passes is matched from after
 * its literal leading segments. This keeps a decision against 1,000 rules
 * within microseconds (bench/policy.sh). `e` may be NULL (a rule not built
 * by the loader): then the matcher alone decides.
 */
/*
 * memcmp(a, b, n) == 0, from the end: the names a rule set tells apart
 * mostly share their start (refs/heads/), so a difference shows sooner
 * there, and these runs are too short for a library call to pay.
 */
static int same_backwards(const char *a, const char *b, size_t n)
{
    while (n > 0) {
        n--;
        if (a[n] != b[n])
            return 0;
    }
    return 1;
}

static int glob_matches(const char *pattern, const rg_glob_ends *e, const subject *name)
{
    if (e == NULL)
        return rg_glob_match(pattern, name->s);
    if (name->len < e->head || name->len < e->tail || !same_backwards(pattern, name->s, e->head) ||
        !same_backwards(pattern + e->tail_at, name->s + name->len - e->tail, e->tail))
        return 0;
    if (e->literal)
        return name->len == e->head;
    if (e->skip > 0 && name->len >= e->skip && name->s[e->skip - 1] == '/')
        return rg_glob_match(pattern + e->skip, name->s + e->skip);
    return rg_glob_match(pattern, name->s);
}

/*
 * The index of the first glob matching `name`, or -1 (none, or no
 * selector).
 */
static int glob_index(char *const *globs, const rg_glob_ends *ends, size_t n, const subject *name)
{
    size_t i;

    for (i = 0; globs != NULL && name->s != NULL && i < n; i++)
        if (glob_matches(globs[i], ends ? &ends[i] : NULL, name))
            return (int)i;
    return -1;
}

/* A selector that is absent (NULL) matches everything. */
static int any_glob_matches(char *const *globs, const rg_glob_ends *ends, size_t n,
                            const subject *name)
{
    return globs == NULL || glob_index(globs, ends, n, name) >= 0;
}

/* An unknown run (NULL or "") matches only rules without `runs`. */
static int run_matches(const config_rule *r, const subject *run)
{
    return r->runs == NULL || any_glob_matches(r->runs, r->runs_ends, r->nruns, run);
}

int policy_cond_assumed(const config_rule *r)
{
    return r->effect != CONFIG_ALLOW;
}

/* The facts' answer for rule `i`, UNKNOWN when there is none. A delete
 * brings no content, so no condition holds for it. */
static policy_cond cond_of(const update *u, size_t i)
{
    if (u->action == CONFIG_ACTION_DELETE)
        return POLICY_COND_FAILS;
    if (u->facts == NULL || u->facts->cond == NULL)
        return POLICY_COND_UNKNOWN;
    return (policy_cond)u->facts->cond[i];
}

/* Whether rule `i`'s conditions hold (a rule without any: yes). */
static int conditions_hold(const config_rule *r, const update *u, size_t i)
{
    policy_cond c;

    if (r->cond.set == 0)
        return 1;
    c = cond_of(u, i);
    return c == POLICY_COND_UNKNOWN ? policy_cond_assumed(r) : c == POLICY_COND_HOLDS;
}

static int selectors_match(const config_rule *r, const update *u, unsigned actions)
{
    /* Refs first: they tell rules apart more often than repos do. */
    return (r->actions & actions) != 0 && run_matches(r, &u->run) &&
           any_glob_matches(r->refs, r->refs_ends, r->nrefs, &u->ref) &&
           any_glob_matches(r->repos, r->repos_ends, r->nrepos, &u->repo);
}

static int rule_matches(const config_rule *r, const update *u, size_t i)
{
    return selectors_match(r, u, (unsigned)u->action) && conditions_hold(r, u, i);
}

/* Every selector of one rule, for an explanation. */
static void trace_rule(policy_trace_rule *t, const config_rule *r, const update *u, size_t i)
{
    t->failed = 0;
    t->repo_glob = glob_index(r->repos, r->repos_ends, r->nrepos, &u->repo);
    t->ref_glob = glob_index(r->refs, r->refs_ends, r->nrefs, &u->ref);
    t->run_glob = glob_index(r->runs, r->runs_ends, r->nruns, &u->run);
    if (r->repos != NULL && t->repo_glob < 0)
        t->failed |= POLICY_SEL_REPO;
    if (r->refs != NULL && t->ref_glob < 0)
        t->failed |= POLICY_SEL_REF;
    if ((r->actions & (unsigned)u->action) == 0)
        t->failed |= POLICY_SEL_ACTION;
    if (r->runs != NULL && t->run_glob < 0)
        t->failed |= POLICY_SEL_RUN;
    t->conditions = r->cond.set ? (int)cond_of(u, i) : -1;
    if (!conditions_hold(r, u, i))
        t->failed |= POLICY_SEL_CONDITIONS;
}

/* The trace of one evaluation: what decide() reads instead of matching again. */
typedef struct trace_view {
    const policy_trace_rule *rules; /* NULL: no trace */
    size_t n;
} trace_view;

/*
 * In one pass over the rules, for each mode (0 enforced, 1 evaluate): the
 * first rule in config order with the strongest effect among those that
 * match (best[mode], -1 when none) and how many matched (count[mode]).
 */
static void decide(int best[2], int count[2], const config_model *cfg, const trace_view *tv,
                   const update *u)
{
    const config_rule *r;
    size_t i;
    int m;

    best[0] = best[1] = -1;
    count[0] = count[1] = 0;
    for (i = 0; i < cfg->nrules; i++) {
        r = &cfg->rules[i];
        if (i < tv->n ? tv->rules[i].failed != 0 : !rule_matches(r, u, i))
            continue;
        m = r->evaluate_only ? 1 : 0;
        count[m]++;
        /* Strictly greater, so among equals the first rule decides. */
        if (best[m] < 0 || r->effect > cfg->rules[best[m]].effect)
            best[m] = (int)i;
    }
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
                            config_action action, const char *why)
{
    char shown[REF_SHOWN_MAX + 4];
    const char *verb = r->effect == CONFIG_DENY  ? "denies"
                       : r->effect == CONFIG_ASK ? "requires approval for"
                                                 : "allows";

    /* A rule decided by the push's content says what in it decided. */
    if (r->cond.set != 0) {
        if (r->reason != NULL)
            reason_add(out, "%s: ", r->reason);
        reason_add(out, "%s (rule \"%s\")",
                   why ? why : "its conditions are unknown here, so assumed to hold", r->name);
        if (r->effect == CONFIG_ASK)
            reason_add(out, "; approval required, " NO_APPROVER);
        return;
    }
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
    case POLICY_SEL_CONDITIONS:
        return "conditions";
    }
    return "unknown";
}

static void eval(policy_decision *out, const trace_view *tv, const config_model *cfg,
                 const update *u)
{
    const char *ref = u->ref.s;
    config_action action = u->action;
    int best[2], count[2];

    memset(out, 0, sizeof(*out));
    out->rule_index = -1;
    out->rule_name = "default";
    out->evaluate_effect = CONFIG_ALLOW;
    out->evaluate_rule_index = -1;
    /* A caller's mistake must not turn into an allow: fail closed. */
    if (cfg == NULL || u->repo.s == NULL || ref == NULL || !is_single_action(action)) {
        out->effect = CONFIG_DENY;
        out->rule_effect = CONFIG_DENY;
        reason_add(out, "cannot evaluate the update (%s)",
                   cfg == NULL                 ? "no configuration"
                   : !is_single_action(action) ? "unknown action"
                                               : "no repository or ref");
        return;
    }

    decide(best, count, cfg, tv, u);
    out->matched = count[0];
    if (best[0] >= 0) {
        out->rule_index = best[0];
        out->rule_name = cfg->rules[best[0]].name;
        out->rule_effect = cfg->rules[best[0]].effect;
        reason_for_rule(out, &cfg->rules[best[0]], ref, action,
                        u->facts && u->facts->why ? u->facts->why[best[0]] : NULL);
    } else {
        out->rule_effect = cfg->default_effect;
        reason_for_default(out, cfg->default_effect, ref, action);
    }
    /* Asking ends in a refusal here: approvals are the gateway's (gateway/approve.h). */
    out->effect = out->rule_effect == CONFIG_ALLOW ? CONFIG_ALLOW : CONFIG_DENY;

    out->evaluate_matched = count[1];
    if (best[1] >= 0) {
        out->evaluate_effect = cfg->rules[best[1]].effect;
        out->evaluate_rule_name = cfg->rules[best[1]].name;
        out->evaluate_rule_index = best[1];
    }
}

static subject subject_of(const char *s)
{
    subject sub = {NULL, 0};

    if (s != NULL && s[0] != '\0') {
        sub.s = s;
        sub.len = strlen(s);
    }
    return sub;
}

void policy_eval_facts(policy_decision *out, const config_model *cfg, const char *repo,
                       const char *ref, const char *run, config_action action,
                       const policy_facts *facts)
{
    static const trace_view none = {NULL, 0};
    update u = {subject_of(repo), subject_of(ref), subject_of(run), action, facts};

    eval(out, &none, cfg, &u);
}

void policy_eval(policy_decision *out, const config_model *cfg, const char *repo, const char *ref,
                 const char *run, config_action action)
{
    policy_eval_facts(out, cfg, repo, ref, run, action, NULL);
}

int policy_conditions_matter(const config_model *cfg, const char *repo, const char *ref,
                             const char *run, unsigned actions)
{
    update u = {subject_of(repo), subject_of(ref), subject_of(run), 0, NULL};

    if (cfg == NULL || u.repo.s == NULL || u.ref.s == NULL)
        return 0;
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].cond.set != 0 && selectors_match(&cfg->rules[i], &u, actions))
            return 1;
    return 0;
}

void policy_eval_trace(policy_decision *out, policy_trace_rule *trace, size_t ntrace,
                       const config_model *cfg, const char *repo, const char *ref, const char *run,
                       config_action action)
{
    trace_view tv = {trace, 0};
    update u = {subject_of(repo), subject_of(ref), subject_of(run), action, NULL};
    size_t i;

    /* Refused arguments are decided (denied) by eval() without a trace. */
    if (cfg != NULL && u.repo.s != NULL && u.ref.s != NULL && is_single_action(action) &&
        trace != NULL) {
        tv.n = ntrace < cfg->nrules ? ntrace : cfg->nrules;
        for (i = 0; i < tv.n; i++)
            trace_rule(&trace[i], &cfg->rules[i], &u, i);
    }
    eval(out, &tv, cfg, &u);
}
