/*
 * Inspection of a push's pack (see receive.c for the whole walk): spool it
 * to disk and into a quarantine, settle ancestry and workflow changes there,
 * work out the rules' content conditions (inspect/conditions.h), and the
 * overlap that sends the pack upstream, all but its trailer, while the
 * gateway indexes it; once decided, the spooled pack goes upstream from
 * here too.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/receive_int.h"

/* How much a pack may inflate to, per byte of max_body_bytes, before the
 * scanner gives up; the push then takes the spooled path. */
#define PACKSCAN_INFLATE_RATIO 32

/* -------------------------------------------------------------- inspect */

int receive_start_spool(gateway_receive *r)
{
    const char *gitdir = r->repo_dir;

    r->spool_fd = open(r->ctx->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (r->spool_fd < 0)
        return receive_fail(r, 500, -errno, "cannot create a spool file for the pack");
    receive_phase_inspect(r);
    if (gitdir == NULL) {
        /*
         * A remote upstream's history is read from its mirror, which must
         * hold the old ids the client saw (and thin-pack bases). When it
         * already has every old id it is not fetched first; should the
         * pack still need what it lacks, receive_finish_inspection fetches and
         * indexes again. When upstream moved after the client's
         * advertisement and the mirror lacks an old id even then, or the
         * mirror cannot be had at all, the quarantine cannot answer and
         * the ref counts as a force (fail closed), with the reason noted.
         */
        const char **have = calloc(r->req->nupdates, sizeof(*have));
        size_t n = 0;
        int rc;

        for (size_t i = 0; have && i < r->req->nupdates; i++)
            if (!r->cmds[i].plan.old_zero)
                have[n++] = r->cmds[i].u->old_id;
        rc = upstream_mirror_acquire(&r->mirror, r->ctx->cfg->state_dir, &r->target, have, n,
                                     &r->q_err);
        free(have);
        if (rc < 0) {
            r->q_failed = 1;
            return 0;
        }
        gitdir = upstream_mirror_dir(r->mirror);
    }
    if (rgit_quarantine_new(&r->q, gitdir, r->ctx->tmp_dir, r->req->oid_hexlen, &r->q_err) < 0)
        r->q_failed = 1;
    return 0;
}

/* Index the spooled pack into a new quarantine, after the mirror was
 * fetched because the first one lacked something the pack needs. */
static void reinspect(gateway_receive *r)
{
    char *chunk = malloc(SPOOL_CHUNK);
    uint64_t left = r->pack_bytes;
    ssize_t n;

    rgit_quarantine_free(r->q);
    r->q = NULL;
    r->q_failed = 0;
    memset(&r->q_err, 0, sizeof(r->q_err));
    if (chunk == NULL || lseek(r->spool_fd, 0, SEEK_SET) < 0 ||
        rgit_quarantine_new(&r->q, upstream_mirror_dir(r->mirror), r->ctx->tmp_dir,
                            r->req->oid_hexlen, &r->q_err) < 0) {
        r->q_failed = 1;
        free(chunk);
        return;
    }
    /* Bounded: the spool holds what the body brought, at most max_body_bytes. */
    while (left > 0 && (n = read(r->spool_fd, chunk, SPOOL_CHUNK)) > 0) {
        left -= (uint64_t)n < left ? (uint64_t)n : left;
        if (rgit_quarantine_write(r->q, chunk, (size_t)n, &r->q_err) < 0) {
            r->q_failed = 1;
            break;
        }
    }
    free(chunk);
    if (!r->q_failed && rgit_quarantine_finish(r->q, &r->q_err) < 0)
        r->q_failed = 1;
}

/*
 * The body is complete: finish indexing. A remote's mirror that was not
 * fetched (it had the old ids) but turns out to lack what the pack needs
 * is fetched now and the pack indexed again.
 */
void receive_finish_inspection(gateway_receive *r)
{
    rg_error e = RG_ERROR_INIT;

    if (r->q && !r->q_failed && rgit_quarantine_finish(r->q, &r->q_err) < 0)
        r->q_failed = 1;
    if (!r->q_failed || r->mirror == NULL || upstream_mirror_fresh(r->mirror))
        return;
    if (upstream_mirror_refresh(r->mirror, &r->target, &e) < 0) {
        r->q_err = e;
        return;
    }
    reinspect(r);
}

/* Settle the updates that needed ancestry, from the quarantine. */
void receive_resolve_ancestry(gateway_receive *r)
{
    for (size_t i = 0; i < r->req->nupdates; i++) {
        ref_cmd *c = &r->cmds[i];
        rg_error e = RG_ERROR_INIT;
        int anc = 0;

        if (!c->plan.needs_ancestry)
            continue;
        if (r->q == NULL || r->q_failed) {
            receive_add_note(c, "ancestry undecidable (%s): treated as force",
                             r->q_err.msg[0] ? r->q_err.msg : "no pack");
            policy_plan_set_ancestry(&c->plan, 0, 0);
        } else if (rgit_quarantine_is_ancestor(&anc, r->q, c->u->old_id, c->u->new_id, &e) < 0) {
            receive_add_note(c, "ancestry undecidable (%s): treated as force", e.msg);
            policy_plan_set_ancestry(&c->plan, 0, 0);
        } else {
            policy_plan_set_ancestry(&c->plan, 1, anc);
        }
    }
}

/* Does a push to this upstream need to know whether it changes workflows? */
int receive_workflows_matter(gateway_receive *r)
{
    if (r->target.repo_dir != NULL || r->target.up == NULL ||
        r->target.up->credentials.type != CONFIG_CRED_GITHUB_APP)
        return 0;
    /* Only refs that may be forwarded carry content the token would write. */
    for (size_t i = 0; i < r->req->nupdates; i++)
        if (!r->cmds[i].plan.new_zero &&
            policy_plan_may_allow(&r->cmds[i].plan, r->ctx->cfg, r->route.repo))
            return 1;
    return 0;
}

/*
 * Set TOKENS_CRED_WORKFLOWS when an allowed create or update changes
 * .github/workflows/: an update compares the old and new trees, a create
 * (whose base is unknown) the upstream's HEAD tree and the new one. What
 * cannot be decided does not get the permission, so upstream refuses a
 * workflow change itself (fail closed); the note says so.
 */
void receive_resolve_workflows(gateway_receive *r)
{
    for (size_t i = 0; i < r->req->nupdates; i++) {
        ref_cmd *c = &r->cmds[i];
        rg_error e = RG_ERROR_INIT;
        int changed = 0;

        if (!c->plan.allowed || c->plan.new_zero)
            continue;
        if (r->q == NULL || r->q_failed) {
            receive_add_note(c, "workflow changes undecidable (%s): no workflows permission",
                             r->q_err.msg[0] ? r->q_err.msg : "no pack");
        } else if (rgit_quarantine_changes_prefix(
                       &changed, r->q, c->plan.action == CONFIG_ACTION_CREATE ? NULL : c->u->old_id,
                       c->u->new_id, WORKFLOWS_PREFIX, &e) < 0) {
            receive_add_note(c, "workflow changes undecidable (%s): no workflows permission",
                             e.msg);
        } else if (changed) {
            receive_add_note(c, "changes " WORKFLOWS_PREFIX);
            r->cred_flags |= TOKENS_CRED_WORKFLOWS;
        }
    }
}

/*
 * Work out the rules' content conditions for every ref from the
 * quarantine. Without one (or out of memory) every answer is unknown, and
 * the policy fails closed on that.
 */
void receive_run_inspection(gateway_receive *r)
{
    inspect_conditions_ref *refs;
    rg_error e = RG_ERROR_INIT;
    size_t n = r->req->nupdates;

    if (!r->inspect)
        return;
    refs = calloc(n, sizeof(*refs));
    for (size_t i = 0; refs && i < n; i++) {
        refs[i].old_hex = r->cmds[i].plan.old_zero ? NULL : r->cmds[i].u->old_id;
        refs[i].new_hex = r->cmds[i].u->new_id;
        refs[i].inspect = r->cmds[i].plan.needs_inspection;
    }
    if (refs == NULL ||
        inspect_conditions_inspect(&r->conds, r->ctx->cfg, r->q && !r->q_failed ? r->q : NULL,
                                   r->q_err.msg[0] ? r->q_err.msg : "the pack was not quarantined",
                                   refs, n, &e) < 0)
        r->conds = NULL;
    for (size_t i = 0; i < n; i++)
        r->cmds[i].plan.facts = inspect_conditions_facts(r->conds, i);
    free(refs);
}

/*
 * After the decision: a ref denied by a rule with content conditions
 * denies the whole push (its pack cannot be split, and what it carries
 * must not land even unreferenced). Band 2 says what held, once per rule,
 * for enforced rules and evaluate-mode ones that would have refused.
 */
void receive_settle_conditions(gateway_receive *r)
{
    const config_model *cfg = r->ctx->cfg;
    char *said = calloc(cfg->nrules ? cfg->nrules : 1, 1);
    char label[200];

    /* Decided again after a hold: an approval may have settled an ask. */
    r->content_denied = NULL;
    if (!r->inspect)
        goto done;
    for (size_t i = 0; i < r->req->nupdates; i++) {
        const policy_decision *d = &r->cmds[i].plan.decision;
        int idx = d->rule_index, ev = d->evaluate_rule_index;

        if (idx >= 0 && cfg->rules[idx].cond.set && d->effect != CONFIG_ALLOW) {
            if (r->content_denied == NULL)
                r->content_denied = r->cmds[i].u->refname;
            inspect_conditions_first(r->conds, i, (size_t)idx, r->cmds[i].detail,
                                     sizeof(r->cmds[i].detail));
            snprintf(label, sizeof(label), "rule \"%s\"", cfg->rules[idx].name);
            if (said && !said[idx]++ && !r->conditions_told)
                inspect_conditions_explain(r->conds, i, (size_t)idx, label, &r->progress);
        }
        if (ev >= 0 && cfg->rules[ev].cond.set && d->evaluate_effect != CONFIG_ALLOW) {
            snprintf(label, sizeof(label), "rule \"%s\" (evaluate mode, would %s)",
                     cfg->rules[ev].name, config_effect_name(d->evaluate_effect));
            if (said && !said[ev]++ && !r->conditions_told)
                inspect_conditions_explain(r->conds, i, (size_t)ev, label, &r->progress);
        }
    }
    r->conditions_told = 1;
    for (size_t i = 0; r->content_denied && i < r->req->nupdates; i++)
        policy_plan_deny_atomic(&r->cmds[i].plan, r->content_denied);
done:
    free(said);
}

/* Inspection is over: let waiting updates of the mirror in while the push
 * is forwarded. The quarantine reads the mirror's objects, so it goes first. */
void receive_end_inspection(gateway_receive *r)
{
    if (r->mirror == NULL)
        return;
    rgit_quarantine_free(r->q);
    r->q = NULL;
    upstream_mirror_release(r->mirror);
    r->mirror = NULL;
}

/*
 * Overlap: send the commands that may be allowed upstream now, then the
 * pack as it arrives, all but its trailer. Refs whose decision does not
 * wait for ancestry are decided now; those that wait go if either answer
 * could allow them. Not where the write credential is minted per push (a
 * github-app token): a denied push mints nothing, so nothing starts before
 * the decision.
 */
void receive_start_overlap(gateway_receive *r)
{
    const rgit_push_request *req = r->req;
    rg_buf header = RG_BUF_INIT(FORWARD_HEADER_MAX);
    rg_error e = RG_ERROR_INIT;
    size_t *keep = NULL, nkeep = 0;
    int denied = 0;

    /* Nor for a push that may be held: upstream would wait out the hold. */
    if (r->check_workflows || r->inspect || r->q_failed || r->may_hold ||
        (r->repo_dir == NULL && r->target.up->credentials.type == CONFIG_CRED_GITHUB_APP) ||
        rgit_packscan_new(&r->scan, req->oid_hexlen,
                          PACKSCAN_INFLATE_RATIO * r->ctx->cfg->max_body_bytes) < 0)
        return;
    keep = calloc(req->nupdates, sizeof(*keep));
    if (keep == NULL)
        goto fail;
    for (size_t i = 0; i < req->nupdates; i++) {
        ref_cmd *c = &r->cmds[i];

        if (c->plan.needs_ancestry) {
            c->tentative = policy_plan_may_allow(&c->plan, r->ctx->cfg, r->route.repo);
        } else {
            policy_plan_decide(&c->plan, r->ctx->cfg, r->route.repo);
            c->tentative = c->plan.allowed;
        }
        denied |= !c->tentative;
        if (c->tentative)
            keep[nkeep++] = i;
    }
    /* Nothing worth sending early: the spooled path decides it all. */
    if (nkeep == 0 || (denied && rgit_push_has_cap(req, "atomic")))
        goto fail;
    if (rgit_push_request_write(&header, req, keep, nkeep, "report-status") < 0 ||
        receive_start_upstream(r, &e) < 0 ||
        receive_send_upstream(r, header.data, header.len, &e) < 0)
        goto fail;
    free(keep);
    rg_buf_free(&header);
    return;
fail:
    free(keep);
    rg_buf_free(&header);
    for (size_t i = 0; i < req->nupdates; i++)
        r->cmds[i].tentative = 0;
    rgit_packscan_free(r->scan);
    r->scan = NULL;
    upstream_push_free(r->upstream);
    r->upstream = NULL;
}

/* The next pack bytes, while overlapping: forward what is surely not the
 * trailer. A pack the scanner cannot follow stops the overlap. */
void receive_overlap_pack(gateway_receive *r, const char *data, size_t len)
{
    rg_error e = RG_ERROR_INIT;
    uint64_t start = r->pack_bytes, safe;

    if (r->scan == NULL || r->scan_state != 0)
        return;
    r->scan_state = rgit_packscan_feed(r->scan, data, len, &e);
    if (r->scan_state < 0)
        return;
    safe = rgit_packscan_safe(r->scan);
    /* What is safe and unsent lies in this chunk: before the trailer
     * starts, safe is everything scanned. */
    if (safe > r->sent && !r->upstream_failed &&
        receive_send_upstream(r, data + (r->sent - start), (size_t)(safe - r->sent), &e) < 0)
        receive_upstream_failed(r, &e);
    r->sent = safe;
}

/*
 * Whether the overlapped push can be completed: the pack's end was found,
 * upstream took everything so far, and the refs sent early are exactly the
 * refs now allowed. Otherwise it is abandoned (receive_abort_overlap) and the push
 * takes the spooled path.
 */
int receive_overlap_holds(const gateway_receive *r)
{
    if (r->upstream == NULL || r->scan == NULL || r->scan_state != 1 || r->upstream_failed)
        return 0;
    for (size_t i = 0; i < r->req->nupdates; i++)
        if (r->cmds[i].tentative != (r->cmds[i].plan.allowed && !r->cmds[i].unaudited))
            return 0;
    return 1;
}

/*
 * Give up the overlapped request: its input ends without the trailer, so
 * upstream's index-pack fails on the incomplete pack, receive-pack applies
 * nothing and cleans its own quarantine (a kill would leave it behind).
 */
void receive_abort_overlap(gateway_receive *r)
{
    rgit_report ignored = {0};
    rg_error e = RG_ERROR_INIT;

    if (r->upstream == NULL)
        return;
    upstream_push_finish(r->upstream, &ignored, NULL, &e);
    rgit_report_free(&ignored);
    upstream_push_free(r->upstream);
    r->upstream = NULL;
    r->upstream_failed = 0;
    for (size_t i = 0; i < r->req->nupdates; i++)
        r->cmds[i].tentative = 0;
}

/* Complete the overlapped request: send the trailer, read back from the
 * spool where the scanner found it. */
void receive_complete_overlap(gateway_receive *r)
{
    uint64_t end = rgit_packscan_end(r->scan);
    char trailer[RGIT_OID_HEX_MAX / 2];
    size_t n = (size_t)(end - r->sent);
    rg_error e = RG_ERROR_INIT;

    for (size_t i = 0; i < r->req->nupdates; i++)
        r->nforward += r->cmds[i].tentative;
    r->send_pack = 1;
    if (n > sizeof(trailer) || pread(r->spool_fd, trailer, n, (off_t)r->sent) != (ssize_t)n) {
        rg_error_set(&e, RG_E_UPSTREAM, "cannot read the pack's trailer back");
        receive_upstream_failed(r, &e);
        return;
    }
    if (receive_send_upstream(r, trailer, n, &e) < 0)
        receive_upstream_failed(r, &e);
    r->sent = end;
}

/* Send the spooled pack upstream once the decision is made. */
void receive_send_spool(gateway_receive *r)
{
    uint64_t end = r->scan && r->scan_state == 1 ? rgit_packscan_end(r->scan) : 0, done = 0;
    rg_error e = RG_ERROR_INIT;
    char *chunk;
    ssize_t n;

    chunk = malloc(SPOOL_CHUNK);
    if (chunk == NULL || lseek(r->spool_fd, 0, SEEK_SET) < 0) {
        rg_error_set(&e, RG_E_UPSTREAM, "cannot read the spooled pack");
        receive_upstream_failed(r, &e);
        free(chunk);
        return;
    }
    /* Bounded: the spool holds at most max_body_bytes. Where the pack's
     * end is known, nothing after it goes upstream. */
    while ((n = read(r->spool_fd, chunk, SPOOL_CHUNK)) > 0) {
        if (end && (uint64_t)n > end - done)
            n = (ssize_t)(end - done);
        done += (uint64_t)n;
        if (n > 0 && receive_send_upstream(r, chunk, (size_t)n, &e) < 0) {
            receive_upstream_failed(r, &e);
            break;
        }
    }
    free(chunk);
}
