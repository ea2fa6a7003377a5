/*
 * Rule evaluation: a pure function of the rules and one ref update. Among
 * the enforced rules that match, deny wins over ask over allow; no match
 * falls to the configured default. `ask` with no approver is a deny whose
 * reason says approval is needed. Rules in evaluate mode are evaluated the
 * same way on their own, reported, and never change the decision.
 */
#ifndef RG_POLICY_EVAL_H
#define RG_POLICY_EVAL_H

#include "policy/config.h"

typedef struct policy_decision {
    policy_effect effect;      /* ALLOW or DENY: ask is resolved to deny here */
    policy_effect rule_effect; /* what the deciding rule said (may be ASK) */
    int rule_index;            /* deciding rule, or -1 for the default */
    const char *rule_name;     /* the rule's name, or "default" */
    char reason[512];          /* shown to the pusher after "policy: " */
    int matched;               /* number of enforced rules that matched */
    /* What the evaluate-mode rules alone would have decided, if any matched. */
    int evaluate_matched;
    policy_effect evaluate_effect;
    const char *evaluate_rule_name;
} policy_decision;

void policy_eval(policy_decision *out, const policy_config *cfg, const char *repo,
                 const char *ref, policy_action action);

/*
 * Glob match as rules use it: `*` matches within one `/` segment, `**`
 * across segments (including none), `?` one character other than `/`.
 */
int policy_glob_match(const char *pattern, const char *name);

#endif
