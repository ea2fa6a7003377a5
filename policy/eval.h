/*
 * Rule evaluation: a pure function of the rules and one ref update. Among
 * the enforced rules that match, deny wins over ask over allow; no match
 * falls to the configured default. `ask` with no approver is a deny whose
 * reason says approval is needed. Rules in evaluate mode are evaluated the
 * same way on their own, reported, and never change the decision.
 */
#ifndef RG_POLICY_EVAL_H
#define RG_POLICY_EVAL_H

#include "config/config.h"

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
} policy_decision;

/*
 * Decide `action` (exactly one config_action bit) on `ref` (a full name,
 * refs/heads/main) in `repo` ("<host>/<path>" without .git, as routing and
 * tokens name it). The deciding rule is the first, in config order, with
 * the strongest effect among the enforced rules that match. A NULL config,
 * repo or ref, or an action that is not one bit, is a deny: a caller's
 * mistake never becomes an allow.
 */
void policy_eval(policy_decision *out, const config_model *cfg, const char *repo, const char *ref,
                 config_action action);

#endif
