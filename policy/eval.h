/*
 * Rule evaluation: a pure function of the rules and one ref update. Among
 * the enforced rules that match, deny wins over ask over allow; no match
 * falls to the configured default. `ask` is a deny here whose reason says
 * approval is needed (the gateway then looks for an approval of the
 * update: gateway/approve.h). Rules in evaluate mode are evaluated the
 * same way on their own, reported, and never change the decision.
 */
#ifndef RG_POLICY_EVAL_H
#define RG_POLICY_EVAL_H

#include "config/config.h"

/*
 * Whether a rule's content conditions hold for one update, as the gateway
 * found from the pushed pack. UNKNOWN (the zero value) when nobody looked
 * or looking failed: fail closed, it counts as holding for deny and ask
 * rules and as not holding for allow rules.
 */
typedef enum policy_cond {
    POLICY_COND_UNKNOWN = 0,
    POLICY_COND_HOLDS = 1,
    POLICY_COND_FAILS = 2,
} policy_cond;

/*
 * What is known of one update's content: for each rule (cfg->nrules
 * entries), whether its conditions hold and, when they hold or are
 * unknown, a short why ("push contains a secret") for the reason. The
 * gateway owns the arrays; NULL facts, arrays or entries: all unknown.
 */
typedef struct policy_facts {
    const unsigned char *cond; /* policy_cond per rule */
    const char *const *why;    /* per rule, may be NULL */
} policy_facts;

/* Names point into the config (or are static): valid while it is. */
typedef struct policy_decision {
    config_effect effect;      /* ALLOW or DENY: ask is resolved to deny here */
    config_effect rule_effect; /* what the deciding rule said (may be ASK) */
    int rule_index;            /* deciding rule, or -1 for the default */
    const char *rule_name;     /* the rule's name, or "default" */
    char reason[512];          /* shown to the pusher after "policy: " */
    int matched;               /* number of enforced rules that matched */
    /*
     * What the evaluate-mode rules alone would have decided, if any matched
     * (evaluate_matched > 0): the effect as the rule says it (ask is not
     * resolved) and its name; otherwise ALLOW and NULL.
     */
    int evaluate_matched;
    config_effect evaluate_effect;
    const char *evaluate_rule_name;
    int evaluate_rule_index; /* -1 when none matched */
} policy_decision;

/*
 * Decide `action` (exactly one config_action bit) on `ref` (a full name,
 * refs/heads/main) in `repo` ("<host>/<path>" without .git, as routing and
 * tokens name it), pushed by the run named `run` (as its token names it;
 * NULL or "" when unknown, which only rules without `runs` match). The
 * deciding rule is the first, in config order, with the strongest effect
 * among the enforced rules that match. A NULL config, a NULL or empty
 * repo or ref, or an action that is not one bit, is a deny: a caller's
 * mistake never becomes an allow.
 */
void policy_eval(policy_decision *out, const config_model *cfg, const char *repo, const char *ref,
                 const char *run, config_action action);

/*
 * policy_eval with what is known of the update's content: a rule with
 * conditions matches when its selectors match and facts say its
 * conditions hold (unknown: see policy_cond; never for a delete, which
 * brings no content). policy_eval is this with
 * NULL facts. When a rule with conditions decides, the reason says why
 * they hold (or why they could not be checked).
 */
void policy_eval_facts(policy_decision *out, const config_model *cfg, const char *repo,
                       const char *ref, const char *run, config_action action,
                       const policy_facts *facts);

/*
 * Whether some rule with conditions (enforced or evaluate) selects `ref`
 * for one of `actions` (config_action bits): then the push's content must
 * be inspected before the decision.
 */
int policy_conditions_matter(const config_model *cfg, const char *repo, const char *ref,
                             const char *run, unsigned actions);

/* What policy_eval assumes of a rule's conditions when they are unknown. */
int policy_cond_assumed(const config_rule *r);

/* The selectors of a rule, as bits of policy_trace_rule.failed. */
typedef enum policy_selector {
    POLICY_SEL_REPO = 1 << 0,
    POLICY_SEL_REF = 1 << 1,
    POLICY_SEL_ACTION = 1 << 2,
    POLICY_SEL_RUN = 1 << 3,
    POLICY_SEL_CONDITIONS = 1 << 4, /* its conditions do not hold (or are assumed not to) */
} policy_selector;

/*
 * Why one rule did or did not match an update. Every selector is
 * evaluated (not only up to the first that fails), so an explanation can
 * name all that failed. A *_glob is the index of the first pattern of that
 * selector that matched, or -1 (the selector is absent, or none matched).
 */
typedef struct policy_trace_rule {
    unsigned failed; /* policy_selector bits that did not match; 0: the rule matched */
    int repo_glob;
    int ref_glob;
    int run_glob;
    /* A rule with conditions: what was used (a trace has no facts, so
     * POLICY_COND_UNKNOWN, resolved as policy_cond_assumed says); else -1. */
    int conditions;
} policy_trace_rule;

/*
 * policy_eval, also writing what each rule did to trace[i] for the first
 * `ntrace` rules (give cfg->nrules entries for all). The decision is the
 * one policy_eval makes; the gateway's per-ref path calls policy_eval,
 * which skips the extra work. When the arguments are refused (see
 * policy_eval), the trace is left untouched.
 */
void policy_eval_trace(policy_decision *out, policy_trace_rule *trace, size_t ntrace,
                       const config_model *cfg, const char *repo, const char *ref, const char *run,
                       config_action action);

/* "repo", "ref", "action", "run" or "conditions" for one selector bit; "unknown" otherwise. */
const char *policy_selector_name(policy_selector s);

#endif
