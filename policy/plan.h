/*
 * The plan of one push: every ref update of the command list classified
 * and decided, as policy questions answered here rather than in the
 * gateway. Pure, like eval.c: no I/O, no allocation, no clock.
 *
 * A push is planned in two steps. policy_plan_classify says what each
 * command is (create, update, force, delete) as far as the command list
 * alone tells, and whether the rules care about the one thing it cannot
 * tell: whether an update is a fast-forward (the protocol has no force bit,
 * so that needs the pack's ancestry). Once the caller knows the ancestry of
 * those refs (policy_plan_set_ancestry), policy_plan_decide gives each ref
 * its verdict.
 *
 * Decided on what upstream will do, not on what the client says:
 * - a zero new id is a delete; a zero old id too is a delete that
 *   receive-pack performs without comparing the current value, and git's
 *   own client never sends it, so it is refused whatever the rules say;
 * - a command on a symbolic ref moves the ref it points to: both names are
 *   decided and the stronger effect wins (deny over ask over allow), so a
 *   rule on either name holds.
 */
#ifndef RG_POLICY_PLAN_H
#define RG_POLICY_PLAN_H

#include <stddef.h>

#include "policy/eval.h"

/* The deciding "rule" of a command refused for its shape, not by a rule. */
#define POLICY_PLAN_PROTOCOL_RULE "protocol"

typedef struct policy_plan_ref {
    /* In: the command. */
    const char *ref;   /* as pushed: refs/heads/master */
    const char *moves; /* the ref it actually moves when `ref` is symbolic upstream, else NULL */
    int old_zero;      /* the old id is all zeros */
    int new_zero;      /* the new id is all zeros */
    const char *run;   /* the pushing run's name (rules' `runs`); NULL when unknown */
    const policy_facts *facts; /* what is known of its content (conditions); NULL: nothing */

    /* Out of policy_plan_classify (and policy_plan_set_ancestry). */
    config_action action; /* what upstream will do; UPDATE while !classified */
    int classified;       /* action is exact (else: update or force, and no rule cares) */
    int needs_ancestry;   /* the rules tell an update from a force here */
    int invalid;          /* zero/zero: refused whatever the rules say */
    int needs_inspection; /* a rule with conditions may match: the content decides */

    /* Out of policy_plan_decide. */
    policy_decision decision;
    int allowed;
    const char *atomic_ref; /* --atomic: denied only because this other ref was */
} policy_plan_ref;

/*
 * Classify one command; returns 1 when the pack must be read first (it
 * needs ancestry, or inspection for rules with conditions), else 0. An
 * update that needs inspection needs its ancestry too: with the content
 * known, rules may tell an update from a force that could not before.
 */
int policy_plan_classify(policy_plan_ref *r, const config_model *cfg, const char *repo);

/*
 * Settle a ref that needed ancestry: `known` 0 means it could not be
 * computed, which counts as a force (fail closed).
 */
void policy_plan_set_ancestry(policy_plan_ref *r, int known, int is_ancestor);

/* Decide one ref. A ref whose ancestry is still unknown is decided as a force. */
void policy_plan_decide(policy_plan_ref *r, const config_model *cfg, const char *repo);

/*
 * --atomic: once any ref of the push is denied, every ref is; call this on
 * each allowed ref with the first denied one's name.
 */
void policy_plan_deny_atomic(policy_plan_ref *r, const char *denied_ref);

/*
 * Whether `r` can be allowed whatever its ancestry turns out to be: for
 * work that must start before the decision (asking the credential for the
 * right permissions) and is only needed for refs that may be forwarded.
 */
int policy_plan_may_allow(const policy_plan_ref *r, const config_model *cfg, const char *repo);

/* The action's name for the audit log: "update|force" while not classified. */
const char *policy_plan_action_name(const policy_plan_ref *r);

#endif
