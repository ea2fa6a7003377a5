/*
 * Planning one push (see plan.h): classification, then decision, each ref
 * decided on the ref that actually moves.
 */
#include "policy/plan.h"

#include <stdio.h>
#include <string.h>

/* Whether two decisions are the same verdict for the same reason. */
static int same_decision(const policy_decision *a, const policy_decision *b)
{
    return a->effect == b->effect && a->rule_index == b->rule_index &&
           a->evaluate_matched == b->evaluate_matched && a->evaluate_effect == b->evaluate_effect &&
           a->evaluate_rule_name == b->evaluate_rule_name;
}

/*
 * Decide `action` on the ref, and on the ref it moves when it is
 * symbolic; the stronger effect wins, and on a tie the moved ref's
 * decision, which names what really changes.
 */
static void eval_ref(policy_decision *out, const policy_plan_ref *r, const config_model *cfg,
                     const char *repo, config_action action)
{
    policy_decision other;

    policy_eval_facts(out, cfg, repo, r->ref, r->run, action, r->facts);
    if (r->moves == NULL || !strcmp(r->moves, r->ref))
        return;
    policy_eval_facts(&other, cfg, repo, r->moves, r->run, action, r->facts);
    if (other.effect >= out->effect) {
        if (other.evaluate_effect < out->evaluate_effect) {
            other.evaluate_matched = out->evaluate_matched;
            other.evaluate_effect = out->evaluate_effect;
            other.evaluate_rule_name = out->evaluate_rule_name;
            other.evaluate_rule_index = out->evaluate_rule_index;
        }
        *out = other;
    }
    if (out->effect != CONFIG_ALLOW) {
        size_t len = strlen(out->reason);
        snprintf(out->reason + len, sizeof(out->reason) - len, "%s(%s is a symbolic ref to %s)",
                 len ? " " : "", r->ref, r->moves);
    }
}

/* Whether a rule with conditions may match the command, as whichever action. */
static int conditions_matter(const policy_plan_ref *r, const config_model *cfg, const char *repo,
                             unsigned actions)
{
    return policy_conditions_matter(cfg, repo, r->ref, r->run, actions) ||
           (r->moves != NULL && policy_conditions_matter(cfg, repo, r->moves, r->run, actions));
}

int policy_plan_classify(policy_plan_ref *r, const config_model *cfg, const char *repo)
{
    policy_decision as_update, as_force;

    r->classified = 1;
    r->needs_ancestry = 0;
    r->invalid = 0;
    r->needs_inspection = 0;
    if (r->new_zero) {
        /* A zero new id is a delete whatever the old id says. */
        r->action = CONFIG_ACTION_DELETE;
        r->invalid = r->old_zero;
    } else if (r->old_zero) {
        r->action = CONFIG_ACTION_CREATE;
    } else {
        eval_ref(&as_update, r, cfg, repo, CONFIG_ACTION_UPDATE);
        eval_ref(&as_force, r, cfg, repo, CONFIG_ACTION_FORCE);
        r->action = CONFIG_ACTION_UPDATE;
        r->needs_inspection =
            conditions_matter(r, cfg, repo, CONFIG_ACTION_UPDATE | CONFIG_ACTION_FORCE);
        if (!same_decision(&as_update, &as_force) || r->needs_inspection)
            r->needs_ancestry = 1;
        else
            r->classified = 0; /* no rule tells them apart: the pack need not be read */
    }
    if (r->action == CONFIG_ACTION_CREATE)
        r->needs_inspection = conditions_matter(r, cfg, repo, (unsigned)r->action);
    return r->needs_ancestry || r->needs_inspection;
}

void policy_plan_set_ancestry(policy_plan_ref *r, int known, int is_ancestor)
{
    if (!r->needs_ancestry)
        return;
    r->action = known && is_ancestor ? CONFIG_ACTION_UPDATE : CONFIG_ACTION_FORCE;
    r->needs_ancestry = 0;
    r->classified = 1;
}

static void refuse_invalid(policy_plan_ref *r)
{
    memset(&r->decision, 0, sizeof(r->decision));
    r->decision.effect = CONFIG_DENY;
    r->decision.rule_effect = CONFIG_DENY;
    r->decision.rule_index = -1;
    r->decision.rule_name = POLICY_PLAN_PROTOCOL_RULE;
    snprintf(r->decision.reason, sizeof(r->decision.reason),
             "a command with zero old and new ids is refused: git never sends it, and "
             "upstream would delete %s without checking its value",
             r->ref);
}

void policy_plan_decide(policy_plan_ref *r, const config_model *cfg, const char *repo)
{
    policy_plan_set_ancestry(r, 0, 0);
    r->atomic_ref = NULL;
    if (r->invalid)
        refuse_invalid(r);
    else
        eval_ref(&r->decision, r, cfg, repo, r->action);
    r->allowed = r->decision.effect == CONFIG_ALLOW;
}

void policy_plan_deny_atomic(policy_plan_ref *r, const char *denied_ref)
{
    if (!r->allowed)
        return;
    r->allowed = 0;
    r->atomic_ref = denied_ref;
}

int policy_plan_may_allow(const policy_plan_ref *r, const config_model *cfg, const char *repo)
{
    policy_decision d;

    if (r->invalid)
        return 0;
    eval_ref(&d, r, cfg, repo, r->action);
    if (d.effect == CONFIG_ALLOW)
        return 1;
    if (!r->needs_ancestry)
        return 0;
    eval_ref(&d, r, cfg, repo, CONFIG_ACTION_FORCE);
    return d.effect == CONFIG_ALLOW;
}

const char *policy_plan_action_name(const policy_plan_ref *r)
{
    return r->classified ? config_action_name(r->action) : "update|force";
}
