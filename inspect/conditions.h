/*
 * Whether the rules' content conditions hold for the refs of one push,
 * worked out from its quarantined pack (git/inspect.h) before the decision
 * (policy/eval.h takes the answers as policy_facts).
 *
 * Pack conditions (max_file_bytes, secrets) look at every object of the
 * pack that upstream does not hold yet, referenced or not; they hold alike
 * for every ref of the push, since the pack cannot be split. Commit
 * conditions (paths, max_path_length, the email and message patterns,
 * merge_commits, unsigned) look at the commits each ref update introduces. Every
 * answer is three-valued: what could not be inspected (no quarantine, a
 * SHA-256 repository, a budget exceeded, a broken history) is unknown,
 * and the policy fails closed on it.
 *
 * What made a condition hold is kept for the pusher (band 2): the commit,
 * the path, for a secret its kind, line and fingerprint — never the secret.
 */
#ifndef RG_INSPECT_CONDITIONS_H
#define RG_INSPECT_CONDITIONS_H

#include <stddef.h>

#include "config/config.h"
#include "git/quarantine.h"
#include "policy/eval.h"
#include "util/buf.h"
#include "util/error.h"

typedef struct inspect_conditions inspect_conditions;

/* One command of the push, as inspection sees it. */
typedef struct inspect_conditions_ref {
    const char *old_hex; /* NULL for a create */
    const char *new_hex;
    int inspect; /* 0: a delete, or no rule with conditions selects it */
} inspect_conditions_ref;

/*
 * Inspect the push. `q` is the finished quarantine, or NULL when there is
 * none (`why` then says why, and every answer is unknown). Fails only when
 * memory runs out; what cannot be inspected is an unknown answer.
 */
int inspect_conditions_inspect(inspect_conditions **out, const config_model *cfg,
                               rgit_quarantine *q, const char *why,
                               const inspect_conditions_ref *refs, size_t nrefs, rg_error *err);

/* The answers for ref `i`, valid while `g` is. */
const policy_facts *inspect_conditions_facts(const inspect_conditions *g, size_t i);

/*
 * Append to `out` the lines ("refgate: <label>: ...\n") saying what made
 * rule `rule`'s conditions hold on ref `i` (or why they are unknown).
 */
void inspect_conditions_explain(const inspect_conditions *g, size_t i, size_t rule,
                                const char *label, rg_buf *out);

/* The first of those lines' text alone (no prefix), for the audit record; "" when none. */
void inspect_conditions_first(const inspect_conditions *g, size_t i, size_t rule, char *out,
                              size_t outsz);

/* Accepts NULL. */
void inspect_conditions_free(inspect_conditions *g);

#endif
