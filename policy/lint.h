/*
 * `refgate policy lint`: what a loaded config's rules say that their author
 * probably did not mean. The loader already refuses patterns that are
 * malformed; lint finds rules that load but can never take effect, and
 * rules that leave the pusher without an explanation. Every finding is
 * provable from the config alone: glob containment (policy/contain.h) is
 * sound but not complete, so lint misses some findings rather than report
 * a false one. Pure: no I/O, no allocation.
 */
#ifndef RG_POLICY_LINT_H
#define RG_POLICY_LINT_H

#include <stddef.h>

#include "config/config.h"

/* The longest run name a token carries (TOKENS_RUN_MAX in tokens/token.h). */
#define POLICY_LINT_RUN_MAX 64

typedef enum policy_lint_level {
    POLICY_LINT_WARNING = 1, /* legal, but probably not what was meant */
    POLICY_LINT_ERROR = 2,   /* a rule that can never take effect */
} policy_lint_level;

typedef enum policy_lint_kind {
    /* error: no push can ever match the rule (every pattern of a selector is dead) */
    POLICY_LINT_NEVER_MATCHES,
    /* warning: one pattern of a selector can never match (the others can) */
    POLICY_LINT_DEAD_PATTERN,
    /* error: a stronger rule in the same mode matches everything this one does */
    POLICY_LINT_SHADOWED,
    /* warning: an earlier rule with the same selectors, effect and mode */
    POLICY_LINT_DUPLICATE,
    /* warning: an earlier rule with the same effect and mode matches all this one does */
    POLICY_LINT_REDUNDANT,
    /* warning: an enforced deny or ask without a reason for the pusher */
    POLICY_LINT_NO_REASON,
} policy_lint_kind;

typedef struct policy_lint_finding {
    policy_lint_kind kind;
    policy_lint_level level;
    size_t rule;       /* index into cfg->rules */
    int other;         /* the other rule a finding names, or -1 */
    char message[512]; /* why, in a sentence naming the patterns involved */
} policy_lint_finding;

/* Called once per finding; `f` is valid only during the call. */
typedef void (*policy_lint_fn)(const policy_lint_finding *f, void *arg);

/*
 * Lint `cfg`'s rules, calling `fn` for each finding in rule order. Returns
 * the number of findings.
 */
size_t policy_lint(const config_model *cfg, policy_lint_fn fn, void *arg);

/* "never-matches", "dead-pattern", "shadowed", "duplicate", "redundant", "no-reason". */
const char *policy_lint_kind_name(policy_lint_kind k);

/* "warning" or "error". */
const char *policy_lint_level_name(policy_lint_level l);

/*
 * 1 when every update `narrow` matches is matched by `broad` too (as far as
 * containment can tell; 0 when not certain): their actions, and every
 * pattern of each of narrow's selectors within one of broad's. A broad
 * rule with content conditions covers nothing (they may not hold).
 */
int policy_rule_covers(const config_rule *broad, const config_rule *narrow);

#endif
