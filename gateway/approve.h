/*
 * Approvals in the running gateway (approvals/approvals.h is the store):
 * what a push does with a ref a rule asks about, and the control socket's
 * approval ops. The store is the gateway's (ctx->approvals); every change
 * made here is an audit event in the same hash chain as the decisions.
 *
 * An ask rule with "hold" keeps the push open instead, when the client
 * speaks side-band: the gateway waits (sending keepalives) until the
 * approval is decided or the hold is up, then decides the push again.
 *
 * A push that asks for a new approval keeps its pack with it (on this
 * disk, charged to the spool budget until the approval goes; or in the
 * shared database), so a reviewer sees what would land.
 *
 * A push: a ref decided `ask` (the deciding rule, or the default, says
 * ask; policy_eval resolved it to deny) is looked up by its exact update
 * (repo, ref, old, new). Approved: the push claims it (approvals_claim:
 * of pushes of the same update through any gateways at once, one gets it,
 * the others are refused "in use"), the ref is allowed, and its reason
 * names the approval and who approved it; the approval is consumed only
 * once upstream reports the ref ok (gateway_approval_consume), and the
 * claim is given back otherwise (gateway_approval_release). Pending (made
 * now, audited as approval-request, or made by an earlier push): refused,
 * telling the pusher `refgate approve <id>`. Denied: refused with the
 * denial. No store, or the store fails: refused, saying why (fail closed).
 *
 * Control ops (one JSON object per line, control.h):
 *   {"op": "approvals"[, "all": true][, "offset": N]}
 *       -> {"ok": true, "approvals": [APPROVAL...], "total": N, "offset": N}
 *          pending ones (all live ones with "all"), oldest first, at most
 *          GATEWAY_APPROVALS_PAGE per answer from "offset"
 *   {"op": "approval", "id": ID[, "commits": true]}
 *       -> {"ok": true, "approval": APPROVAL[, "commits": [COMMIT...],
 *           "more_commits": BOOL | "commits_error": TEXT]}
 *          with "commits", what the kept pack would land: its commits not
 *          yet reachable from the old id (a create: from any upstream
 *          ref), newest first, at most GATEWAY_APPROVALS_COMMITS, each
 *          {"id", "date", "author", "subject"}; indexed into a quarantine
 *          on the control thread (other control requests wait meanwhile)
 *   {"op": "approve", "id": ID}              -> {"ok": true, "approval": APPROVAL}
 *   {"op": "deny", "id": ID, "reason": TEXT} -> {"ok": true, "approval": APPROVAL}
 * APPROVAL: {"id", "state", "repo", "ref", "old", "new", "run", "rule",
 * "reason", "by", "note", "created", "decided", "expires"}, times in RFC
 * 3339 UTC ("decided" null while pending). A grant or denial is audited
 * (approval-grant, approval-deny: the approval, the update, and the peer's
 * uid, user name and pid, "via control socket", or the console reviewer's
 * name, "via console") before it is made: a
 * decision the log cannot take is not made.
 */
#ifndef RG_GATEWAY_APPROVE_H
#define RG_GATEWAY_APPROVE_H

#include <jansson.h>

#include "approvals/approvals.h"
#include "gateway/context.h"
#include "gateway/spool.h"
#include "policy/plan.h"

#define GATEWAY_APPROVALS_PAGE    20
#define GATEWAY_APPROVALS_COMMITS 50

/* One ref of a push, as approvals see it. Strings borrowed. */
typedef struct gateway_approval_push {
    const char *push_id;
    const char *run;
    const char *repo;
    const char *ref; /* as pushed */
    const char *old_id;
    const char *new_id;
} gateway_approval_push;

/* Whether `plan` was refused only because approval is needed. */
int gateway_approval_needed(const policy_plan_ref *plan);

/* What approvals made of one ref. */
typedef struct gateway_approval_ref {
    char id[APPROVALS_ID_LEN + 1]; /* the approval it passes on or waits for; "" for none */
    int approved;                  /* allowed by it: consumed once the ref lands */
    int created; /* asked for by this push, which keeps its pack (stays set when resolved again) */
    int claimed; /* this push holds the approval's claim: consumed or released when it ends */
    char holder[APPROVALS_HOLDER_MAX]; /* the claim's holder: "<gateway id>:<push id>" */
} gateway_approval_ref;

/*
 * Settle a ref gateway_approval_needed said needs approval: on an approved
 * update, plan->allowed becomes 1 (out->approved); otherwise the ref stays
 * refused. Either way the decision's reason says what happened and what to
 * do.
 */
void gateway_approval_resolve(gateway_approval_ref *out, policy_plan_ref *plan,
                              const gateway_ctx *ctx, const gateway_approval_push *push);

/*
 * Hold: how many seconds the ask rule that decides `plan` keeps the push
 * open for its approval (config rule "hold"), whatever its ancestry turns
 * out to be (the longer); 0 when no rule with a hold would ask. For a plan
 * classified but not yet decided.
 */
unsigned gateway_approval_hold(const policy_plan_ref *plan, const config_model *cfg,
                               const char *repo);

/* Whether approval `id` is still pending (a held push keeps waiting). */
int gateway_approval_pending(const gateway_ctx *ctx, const char *id);

/*
 * Keep the push's pack (`len` bytes of `fd` from its start) with the
 * approval `id` it asked for, so a reviewer sees what would land. The
 * bytes are charged to `lease`; kept on this disk (the file store) they
 * stay charged after it is released, until the pack goes. Kept packs
 * together (in the database: every gateway's) take at most half of
 * limits.spool_bytes. When the budget cannot take them (or anything fails)
 * the approval simply has no pack, and the log says why.
 */
void gateway_approval_keep_pack(const gateway_ctx *ctx, gateway_spool_lease *lease, const char *id,
                                int fd, uint64_t len);

/* The approved update `push` landed: consume the approval `ref` claimed, and audit it. */
void gateway_approval_consume(const gateway_ctx *ctx, gateway_approval_ref *ref,
                              const gateway_approval_push *push);

/* The push ends and `ref` still holds a claim (it did not land): give it back. */
void gateway_approval_release(const gateway_ctx *ctx, gateway_approval_ref *ref);

/* Who asks, for the records: a control socket peer, or a console reviewer. */
typedef struct gateway_approval_peer {
    unsigned long uid;
    const char *user; /* name, or the uid in decimal */
    long pid;
    /* Set: a reviewer logged in to the console (console/), recorded by this
     * name "via console"; uid and pid are then not looked at. */
    const char *console_user;
} gateway_approval_peer;

/*
 * Answer control op `op` when it is one of the approval ops: returns 1
 * with *answer set (or err set when refused), 0 when `op` is not one.
 */
int gateway_approval_control(json_t **answer, const gateway_ctx *ctx,
                             const gateway_approval_peer *peer, const char *op, const json_t *req,
                             rg_error *err);

#endif
