/*
 * Deciding one ref update against the configured rules. This is the whole
 * of the policy decision, kept pure (no I/O, no allocation, no clock) so it
 * can be tested exhaustively and explained: the result names the deciding
 * rule and carries the reason the pusher will read after "policy: ".
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

static int rule_matches(const config_rule *r, const char *repo, const char *ref,
                        config_action action)
{
    return (r->actions & (unsigned)action) != 0 && any_glob_matches(r->repos, r->nrepos, repo) &&
           any_glob_matches(r->refs, r->nrefs, ref);
}

/*
 * The first rule (in config order) with the strongest effect among those
 * that match and are in the given mode; -1 when none match. *count gets
 * how many matched.
 */
static int decide(int *count, const config_model *cfg, int evaluate_only, const char *repo,
                  const char *ref, config_action action)
{
    const config_rule *r;
    int best = -1;
    size_t i;

    *count = 0;
    for (i = 0; i < cfg->nrules; i++) {
        r = &cfg->rules[i];
        if (!r->evaluate_only != !evaluate_only || !rule_matches(r, repo, ref, action))
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

void policy_eval(policy_decision *out, const config_model *cfg, const char *repo, const char *ref,
                 config_action action)
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

    best = decide(&out->matched, cfg, 0, repo, ref, action);
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

    ebest = decide(&out->evaluate_matched, cfg, 1, repo, ref, action);
    if (ebest >= 0) {
        out->evaluate_effect = cfg->rules[ebest].effect;
        out->evaluate_rule_name = cfg->rules[ebest].name;
    }
}
