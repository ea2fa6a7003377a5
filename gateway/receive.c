/*
 * A push through the gateway, from the first body byte to the answer; see
 * receive.h. One push reads top to bottom in the sections below:
 *
 *   plan      parse the command list, find the refs that really move,
 *             classify every command (policy/plan.c)
 *   inspect   when a rule needs ancestry (or the credential needs to know
 *             about workflow changes, or a rule with content conditions
 *             may match): spool the pack into a quarantine, and work out
 *             the conditions there (conditions.c).
 *             Unless the write credential is minted per push, overlap: the
 *             commands that may be allowed and the pack go upstream at
 *             once, all but the pack's trailing checksum (git/packscan.c
 *             finds it), so upstream indexes while the gateway does and can
 *             complete nothing until the decision sends the trailer; never
 *             with content conditions: a secret must not reach upstream,
 *             not even as an incomplete pack
 *   decide    every ref's verdict; the decision records are appended and
 *             fsynced before anything can land upstream: before the first
 *             byte goes, or, overlapped, before the trailer does
 *   forward   the allowed commands (asking upstream for report-status
 *             always) and the pack
 *   finish    upstream's report merged with the gateway's own verdicts
 *             (merge.c) and one outcome record per forwarded ref, however
 *             the request ended: answered, failed after forwarding began,
 *             or abandoned by a client that went away
 *
 * inspect lives in receive_inspect.c, the hold for an approval (and the
 * pack it keeps) in hold.c; what they share is receive_int.h.
 *
 * Each ref carries its own state (ref_cmd), as git's `struct command`
 * carries its error_string: the report and the audit records are walks
 * over the commands.
 */
#include "gateway/receive.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "gateway/receive_int.h"
#include "inspect/conditions.h"
#include "util/inflate.h"
#include "gateway/merge.h"
#include "gateway/metrics.h"
#include "upstream/mirror.h"
#include "upstream/upstream.h"
#include "git/packscan.h"
#include "git/push.h"
#include "git/quarantine.h"
#include "git/report.h"
#include "git/symref.h"
#include "util/fs.h"
#include "util/log.h"

/* What every ng for a ref the audit log could not take says. */
#define UNAUDITED_REASON "the audit log cannot be written, so nothing was forwarded"
#define UNAUDITED_DB_REASON                                                                        \
    "the audit log's database cannot be reached, so nothing was forwarded; push again once it is " \
    "back"

static int on_decoded(void *arg, const char *data, size_t len);

/* --------------------------------------------------------------- phases */

/* The command list is read and the pack must be inspected before the
 * decision (receive_start_spool). */
void receive_phase_inspect(gateway_receive *r)
{
    r->phase = PUSH_INSPECTING;
}

/* Decided on the spooled pack, and a ref waits for its approval (receive_start_hold). */
void receive_phase_hold(gateway_receive *r)
{
    r->phase = PUSH_HELD;
}

/* The command list held no command: git's probe (header_done). */
static void receive_phase_probe(gateway_receive *r)
{
    r->phase = PUSH_PROBE;
}

/* The decision records are durable: from here on what is allowed goes
 * upstream (record_and_forward, the only caller). */
static void receive_phase_forward(gateway_receive *r)
{
    r->phase = PUSH_FORWARDING;
}

/* Upstream's answer is in and the outcomes recorded (finish_push). */
static void receive_phase_finish(gateway_receive *r)
{
    r->phase = PUSH_FINISHED;
}

/* The request went wrong before its decision was durable (receive_fail). */
static void receive_phase_fail(gateway_receive *r)
{
    r->phase = PUSH_FAILED;
}

/* Whether the decision records were written (and forwarding began). */
int receive_decided(const gateway_receive *r)
{
    return r->phase == PUSH_FORWARDING || r->phase == PUSH_FINISHED;
}

push_phase receive_phase(const gateway_receive *r)
{
    return r->phase;
}

/*
 * The request went wrong: keep the first status and reason. Before the
 * decision is durable that ends the push (PUSH_FAILED: nothing is
 * forwarded); after it, the forwarded push still finishes and the client
 * hears upstream's report with the reason.
 */
int receive_fail(gateway_receive *r, unsigned status, int code, const char *msg)
{
    if (!r->failed) {
        r->failed = 1;
        r->fail_status = status;
        rg_error_set(&r->fail_err, code, "%s", msg);
    }
    if (!receive_decided(r))
        receive_phase_fail(r);
    return code;
}

void receive_upstream_failed(gateway_receive *r, const rg_error *e)
{
    if (!r->upstream_failed) {
        r->upstream_failed = 1;
        r->upstream_err = *e;
    }
}

void receive_add_note(ref_cmd *c, const char *fmt, ...)
{
    size_t len = strlen(c->note);
    va_list ap;

    if (len > 0 && len + 2 < sizeof(c->note)) {
        memcpy(c->note + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(c->note + len, sizeof(c->note) - len, fmt, ap);
    va_end(ap);
}

/* Every byte sent upstream goes through here, so the metrics count it. */
int receive_send_upstream(gateway_receive *r, const void *data, size_t len, rg_error *err)
{
    int rc = upstream_push_write(r->upstream, data, len, err);

    if (rc == 0)
        gateway_metrics_forwarded(r->ctx->metrics, len);
    return rc;
}

/* Start upstream's side of the push: timed from here to its report. */
int receive_start_upstream(gateway_receive *r, rg_error *err)
{
    r->upstream_t0 = gateway_metrics_now();
    return upstream_push_start(&r->upstream, &r->target, r->sideband, r->cred_flags, err);
}

int gateway_receive_new(gateway_receive **out, const gateway_receive_info *info, rg_error *err)
{
    rgit_push_limits limits = RGIT_PUSH_LIMITS_INIT;
    gateway_receive *r;
    unsigned char rnd[8];
    int rc = -ENOMEM;

    *out = NULL;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    r->ctx = info->ctx;
    r->route = *info->route;
    r->target = *info->target;
    r->target.repo_path = r->route.path;
    r->spool_fd = -1;
    r->keep_fd = -1;
    rg_buf_init(&r->progress, UPSTREAM_PROGRESS_MAX);
    rg_buf_init(&r->held_out, UPSTREAM_REPORT_MAX * 2 + UPSTREAM_PROGRESS_MAX * 2);
    r->lease = info->lease;
    r->repo_dir = info->target->repo_dir ? strdup(info->target->repo_dir) : NULL;
    r->target.repo_dir = r->repo_dir;
    r->run = strdup(info->claims->run ? info->claims->run : "");
    snprintf(r->token_hash, sizeof(r->token_hash), "%s", info->token_hash);
    snprintf(r->remote, sizeof(r->remote), "%s", info->remote ? info->remote : "");
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(r->push_id + 2 * i, 3, "%02x", rnd[i]);
    if ((info->target->repo_dir && r->repo_dir == NULL) || r->run == NULL)
        goto done;
    if (rgit_push_parser_new(&r->parser, &limits) < 0)
        goto done;
    if (info->gzip && rg_inflate_new(&r->z, r->ctx->cfg->max_body_bytes,
                                     r->ctx->cfg->limits.inflate_ratio, on_decoded, r) < 0)
        goto done;
    r->in_flight = 1;
    gateway_metrics_in_flight(r->ctx->metrics, 1);
    rc = 0;
done:
    if (rc < 0) {
        gateway_receive_free(r);
        return rg_error_set(err, rc, "out of memory");
    }
    *out = r;
    return 0;
}

/* ----------------------------------------------------------------- plan */

/*
 * Find the ref a command really moves (upstream.h: read from a local
 * repository, asked of a remote one with ls-refs).
 */
/*
 * The symbolic refs among the pushed ones. Creates are asked about too: a
 * dangling symbolic ref (to a branch that does not exist yet) exists for no
 * one, and a create through it makes its target.
 */
static int open_symrefs(rgit_symrefs **out, gateway_receive *r, rg_error *err)
{
    const rgit_push_request *req = r->req;
    const char **names;
    size_t n = 0;
    int rc;

    *out = NULL;
    names = calloc(req->nupdates, sizeof(*names));
    if (names == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < req->nupdates; i++)
        names[n++] = req->updates[i].refname;
    rc = upstream_symrefs(out, &r->target, names, n, req->oid_hexlen, err);
    free(names);
    return rc;
}

static int find_moves(gateway_receive *r, rgit_symrefs *refs, ref_cmd *c)
{
    rg_error e = RG_ERROR_INIT;

    if (refs == NULL)
        return 0;
    if (rgit_symrefs_resolve(&c->moves, refs, c->u->refname, &e) < 0)
        return receive_fail(r, 502, e.code, e.msg);
    c->plan.moves = c->moves;
    return 0;
}

/* A remote upstream's symbolic refs, asked on a thread of their own. */
typedef struct symref_job {
    gateway_receive *r;
    rgit_symrefs *refs;
    rg_error err;
    int rc;
} symref_job;

static void *symref_job_main(void *arg)
{
    symref_job *j = arg;

    j->rc = open_symrefs(&j->refs, j->r, &j->err);
    return NULL;
}

/* Classify every command on the names alone; 1 when a pack would be read. */
static int guess_need_pack(gateway_receive *r)
{
    int need = 0;

    for (size_t i = 0; i < r->req->nupdates; i++)
        need |= policy_plan_classify(&r->cmds[i].plan, r->ctx->cfg, r->route.repo);
    return need || receive_workflows_matter(r);
}

/*
 * Classify every command; returns 1 when the pack must be inspected first.
 * A remote upstream is asked for its symbolic refs over the network: while
 * it answers, the spool is set up if the names alone already call for
 * inspection, so the round trip costs the push no time. A spool set up is
 * used even when the symbolic refs make it unnecessary (ancestry then only
 * sharpens what the audit log records).
 */
static int plan_push(gateway_receive *r)
{
    symref_job job = {.r = r};
    pthread_t tid;
    int need_pack = 0, rc = 0, threaded = 0;

    r->cmds = calloc(r->req->nupdates, sizeof(*r->cmds));
    if (r->cmds == NULL)
        return receive_fail(r, 500, -ENOMEM, "out of memory");
    for (size_t i = 0; i < r->req->nupdates; i++) {
        ref_cmd *c = &r->cmds[i];

        c->u = &r->req->updates[i];
        c->plan.ref = c->u->refname;
        c->plan.old_zero = rgit_oid_hex_is_zero(c->u->old_id);
        c->plan.new_zero = rgit_oid_hex_is_zero(c->u->new_id);
        c->plan.run = r->run;
        c->result.refname = c->u->refname;
    }
    if (r->repo_dir == NULL && pthread_create(&tid, NULL, symref_job_main, &job) == 0)
        threaded = 1;
    else
        symref_job_main(&job);
    if (threaded) {
        if (guess_need_pack(r))
            rc = receive_start_spool(r);
        pthread_join(tid, NULL);
        if (rc < 0)
            goto done;
    }
    /* Fail closed: what a push moves unknown, nothing is forwarded; the
     * refs are still decided and audited, and answered as upstream errors. */
    if (job.rc < 0) {
        r->symrefs_failed = 1;
        r->symrefs_err = job.err;
    }
    for (size_t i = 0; i < r->req->nupdates; i++) {
        rc = find_moves(r, job.refs, &r->cmds[i]);
        if (rc < 0)
            goto done;
        need_pack |= policy_plan_classify(&r->cmds[i].plan, r->ctx->cfg, r->route.repo);
    }
    for (size_t i = 0; i < r->req->nupdates; i++)
        r->inspect |= r->cmds[i].plan.needs_inspection;
    r->check_workflows = receive_workflows_matter(r);
    r->may_hold = receive_may_hold(r);
    rc = need_pack || r->check_workflows || r->spool_fd >= 0 || r->may_hold;
done:
    rgit_symrefs_free(job.refs);
    return rc;
}

/* --------------------------------------------------------------- decide */

/* The update one ref of this push makes, as approvals name it. */
static gateway_approval_push approval_push(const gateway_receive *r, const ref_cmd *c)
{
    return (gateway_approval_push){r->push_id,    r->run,       r->route.repo,
                                   c->u->refname, c->u->old_id, c->u->new_id};
}

void receive_decide_all(gateway_receive *r)
{
    const char *denied = NULL;

    for (size_t i = 0; i < r->req->nupdates; i++) {
        ref_cmd *c = &r->cmds[i];

        policy_plan_decide(&c->plan, r->ctx->cfg, r->route.repo);
        /* A ref the rules ask about passes on an approval of exactly this update. */
        if (gateway_approval_needed(&c->plan)) {
            gateway_approval_push push = approval_push(r, c);

            gateway_approval_resolve(&c->approval, &c->plan, r->ctx, &push);
        }
        if (!r->cmds[i].plan.allowed && denied == NULL)
            denied = r->cmds[i].u->refname;
    }
    if (denied && rgit_push_has_cap(r->req, "atomic"))
        for (size_t i = 0; i < r->req->nupdates; i++)
            policy_plan_deny_atomic(&r->cmds[i].plan, denied);
}

/* The verdict's reason and, for a ref not forwarded, its ng text. */
static void explain(const gateway_receive *r, ref_cmd *c)
{
    const policy_plan_ref *p = &c->plan;

    if (c->unaudited)
        snprintf(c->reason, sizeof(c->reason), "%s",
                 c->unaudited == 2 ? UNAUDITED_DB_REASON : UNAUDITED_REASON);
    else if (p->atomic_ref && r->content_denied)
        snprintf(c->reason, sizeof(c->reason),
                 "push rejected as a whole because %s is denied for its content", p->atomic_ref);
    else if (p->atomic_ref)
        snprintf(c->reason, sizeof(c->reason), "atomic push rejected because %s is denied",
                 p->atomic_ref);
    else
        snprintf(c->reason, sizeof(c->reason), "%s%s%s", p->decision.reason,
                 c->note[0] && p->decision.reason[0] ? "; " : "", c->note);
    gateway_merge_one_line(c->reason);
    snprintf(c->refusal, sizeof(c->refusal), "%s: %s", c->unaudited ? "refgate" : "policy",
             c->reason);
    /* The log may say more than the ng: where the content that decided sits. */
    snprintf(c->audited, sizeof(c->audited), "%s%s%s", c->reason, c->detail[0] ? "; " : "",
             c->detail);
    c->result.forwarded = p->allowed && !c->unaudited && !r->symrefs_failed;
    c->result.refusal = c->refusal;
    c->result.failure = p->allowed && r->symrefs_failed ? r->symrefs_err.msg : NULL;
    /* A ref not forwarded is complete now: its outcome is known. */
    if (!c->result.forwarded)
        gateway_merge_ref(&c->result, NULL, NULL);
}

/* What every record of one ref of this push names. */
static void ref_record(audit_record *rec, audit_kind kind, const gateway_receive *r,
                       const ref_cmd *c)
{
    *rec = (audit_record){
        .kind = kind,
        .push_id = r->push_id,
        .run = r->run,
        .token_hash = r->token_hash,
        .remote = r->remote,
        .repo = r->route.repo,
        .ref = c->u->refname,
        .old_id = c->u->old_id,
        .new_id = c->u->new_id,
    };
}

/* A forwarded ref's outcome, completing its decision record. */
static void outcome_record(audit_record *rec, const gateway_receive *r, const ref_cmd *c,
                           const char *outcome)
{
    ref_record(rec, AUDIT_OUTCOME, r, c);
    rec->outcome = outcome;
    rec->decision_seq = c->decision_seq;
}

static void decision_record(audit_record *rec, const gateway_receive *r, const ref_cmd *c,
                            const char *evaluate)
{
    ref_record(rec, AUDIT_DECISION, r, c);
    rec->action = policy_plan_action_name(&c->plan);
    rec->decision = c->plan.allowed && !c->unaudited ? "allow" : "deny";
    rec->rule = c->plan.decision.rule_name;
    rec->reason = c->audited;
    /* A ref not forwarded is complete now; a forwarded one is pending
     * until its outcome record. */
    rec->outcome = c->result.forwarded ? NULL : c->result.outcome;
    rec->evaluate = evaluate;
    /* The snapshot this push began under decided it; a gateway that has
     * no policy yet refuses under none, and names none. */
    rec->policy = r->ctx->cfg->policy_digest[0] ? r->ctx->cfg->policy_digest : NULL;
}

/* The most the outcome record of a forwarded ref can take; 0 for others. */
static size_t outcome_size_max(const gateway_receive *r, const ref_cmd *c)
{
    audit_record rec;

    if (!c->result.forwarded)
        return 0;
    outcome_record(&rec, r, c, NULL);
    return audit_record_size_max(&rec);
}

/* Refuse every allowed ref because the log cannot take the push. */
static void refuse_unaudited(gateway_receive *r, const rg_error *e)
{
    char q[RG_LOG_VALUE_MAX];

    rg_log(RG_LOG_ERR, "push_refused_audit_unwritable", "push=%s error=%s", r->push_id,
           rg_log_quote(q, sizeof(q), e->msg));
    for (size_t i = 0; i < r->req->nupdates; i++) {
        if (r->cmds[i].plan.allowed) {
            r->cmds[i].unaudited = e->code == RG_E_STATE ? 2 : 1;
            explain(r, &r->cmds[i]);
        }
    }
}

/* Why an evaluate-mode rule with conditions would have decided as it did. */
static const char *evaluate_why(const gateway_receive *r, const ref_cmd *c)
{
    int ev = c->plan.decision.evaluate_rule_index;

    if (ev < 0 || !r->ctx->cfg->rules[ev].cond.set || c->plan.facts == NULL ||
        c->plan.facts->why == NULL)
        return NULL;
    return c->plan.facts->why[ev];
}

/*
 * Make the decisions durable before anything is forwarded: fail closed,
 * what cannot be audited is not forwarded. Room is asked for the decision
 * records and the outcome records to come.
 */
static int record_decisions(gateway_receive *r)
{
    size_t n = r->req->nupdates, need = 0;
    audit_record *recs;
    char(*evals)[300];
    rg_error e = RG_ERROR_INIT;
    uint64_t first = 0;
    int rc = 0;

    for (size_t i = 0; i < n; i++)
        explain(r, &r->cmds[i]);
    recs = calloc(n, sizeof(*recs));
    evals = calloc(n, sizeof(*evals));
    if (recs == NULL || evals == NULL) {
        rc = receive_fail(r, 500, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const policy_decision *d = &r->cmds[i].plan.decision;
        const char *why = evaluate_why(r, &r->cmds[i]);

        if (d->evaluate_matched)
            snprintf(evals[i], sizeof(evals[i]), "%s by %s%s%s",
                     config_effect_name(d->evaluate_effect), d->evaluate_rule_name, why ? ": " : "",
                     why ? why : "");
        decision_record(&recs[i], r, &r->cmds[i], d->evaluate_matched ? evals[i] : NULL);
        need += audit_record_size_max(&recs[i]) + outcome_size_max(r, &r->cmds[i]);
    }
    if (audit_ready(r->ctx->audit, need, &e) < 0 ||
        audit_append_many(r->ctx->audit, recs, n, &first, &e) < 0) {
        refuse_unaudited(r, &e);
        /* The denials' records are still worth keeping. */
        for (size_t i = 0; i < n; i++)
            decision_record(&recs[i], r, &r->cmds[i],
                            r->cmds[i].plan.decision.evaluate_matched ? evals[i] : NULL);
        first = 0;
        if (audit_append_many(r->ctx->audit, recs, n, &first, &e) < 0)
            first = 0;
    }
    for (size_t i = 0; i < n && first; i++)
        r->cmds[i].decision_seq = first + i;
done:
    free(recs);
    free(evals);
    return rc;
}

/* -------------------------------------------------------------- forward */

/* Start upstream with the allowed commands; the pack follows if needed. */
static int start_forward(gateway_receive *r)
{
    const rgit_push_request *req = r->req;
    rg_buf header = RG_BUF_INIT(FORWARD_HEADER_MAX);
    rg_error e = RG_ERROR_INIT;
    size_t *keep;
    int rc = 0;

    keep = calloc(req->nupdates ? req->nupdates : 1, sizeof(*keep));
    if (keep == NULL)
        return receive_fail(r, 500, -ENOMEM, "out of memory");
    r->send_pack = 0;
    for (size_t i = 0; i < req->nupdates; i++) {
        if (!r->cmds[i].result.forwarded)
            continue;
        keep[r->nforward++] = i;
        /* Upstream reads a pack unless every command it gets is a delete. */
        if (!r->cmds[i].plan.new_zero)
            r->send_pack = 1;
    }
    if (r->nforward == 0)
        goto done;
    /* Without report-status upstream says nothing of what it did: always
     * ask for it, and answer the client in the form it asked for. */
    rc = rgit_push_request_write(&header, req, keep, r->nforward, "report-status");
    if (rc < 0) {
        rg_error_set(&e, RG_E_UPSTREAM, "cannot rewrite the command list");
        receive_upstream_failed(r, &e);
        rc = 0;
        goto done;
    }
    if (receive_start_upstream(r, &e) < 0 ||
        receive_send_upstream(r, header.data, header.len, &e) < 0)
        receive_upstream_failed(r, &e);
done:
    rg_buf_free(&header);
    free(keep);
    return rc;
}

/*
 * Record, then forward: the one path from decided refs to upstream, and
 * the one entry to PUSH_FORWARDING. Overlapped and still exactly right,
 * only the trailer is left to send once the decisions are durable (unless
 * the audit log refused the push, which receive_overlap_holds then sees); else
 * the overlapped request is given up and the allowed commands go anew,
 * followed by the spooled pack when there is one (on the streamed path the
 * pack is still to come and on_pack sends it).
 */
static int record_and_forward(gateway_receive *r)
{
    int overlapped = receive_overlap_holds(r), rc;

    if (!overlapped)
        receive_abort_overlap(r);
    rc = record_decisions(r);
    if (rc < 0)
        return rc;
    receive_phase_forward(r);
    if (overlapped && receive_overlap_holds(r)) {
        receive_complete_overlap(r);
        return 0;
    }
    receive_abort_overlap(r);
    rc = start_forward(r);
    if (rc == 0 && r->spool_fd >= 0 && r->upstream && r->send_pack && !r->upstream_failed)
        receive_send_spool(r);
    return rc;
}

/*
 * Decide every ref, then record and forward: the one way a push is
 * decided, entered when the command list alone decides (the pack then
 * streams), when the body ends on the spooled path, and when a hold is
 * over. On the spooled path the content conditions are settled, and a ref
 * that waits for an approval may hold the push (the first time only).
 */
int receive_decide_and_forward(gateway_receive *r)
{
    push_phase from = r->phase;

    receive_decide_all(r);
    if (from == PUSH_COMMANDS) {
        receive_start_keep(r);
        return record_and_forward(r);
    }
    receive_settle_conditions(r);
    /* Waiting for an approval: gateway_receive_read goes on from here. */
    if (from == PUSH_INSPECTING && receive_start_hold(r))
        return 0;
    if (r->check_workflows)
        receive_resolve_workflows(r);
    receive_end_inspection(r);
    return record_and_forward(r);
}

/* --------------------------------------------------------------- finish */

/*
 * End the forwarded request and learn what upstream did: its input is
 * closed, so a pack that never completed is discarded upstream (an aborted
 * receive-pack drops its quarantine) and a complete one has landed or not
 * as upstream's report says. Then every forwarded ref gets its outcome
 * record. Runs once, whichever way the request ends.
 */
static void finish_push(gateway_receive *r)
{
    audit_record *recs = NULL;
    rg_error e = RG_ERROR_INIT;
    size_t n = 0;
    char q[RG_LOG_VALUE_MAX];
    int kept;

    if (r->phase != PUSH_FORWARDING)
        return;
    receive_phase_finish(r);
    if (r->upstream) {
        if (upstream_push_finish(r->upstream, &r->report, &r->progress, &e) < 0) {
            receive_upstream_failed(r, &e);
        } else {
            r->have_report = 1;
            gateway_metrics_upstream(r->ctx->metrics, gateway_metrics_now() - r->upstream_t0);
        }
    }
    for (size_t i = 0; i < r->req->nupdates; i++) {
        ref_cmd *c = &r->cmds[i];

        gateway_merge_ref(&c->result, r->have_report ? &r->report : NULL,
                          r->upstream_failed ? r->upstream_err.msg : NULL);
        n += c->result.forwarded;
        /* An approval is used up only by an update upstream took. */
        if (c->approval.approved && c->result.forwarded && c->result.error[0] == '\0') {
            gateway_approval_push push = approval_push(r, c);

            gateway_approval_consume(r->ctx, &c->approval, &push);
        }
    }
    if (n == 0)
        return;
    recs = calloc(n, sizeof(*recs));
    if (recs == NULL) {
        rg_log(RG_LOG_ERR, "audit_append_failed", "push=%s error=\"out of memory\"", r->push_id);
        return;
    }
    n = 0;
    for (size_t i = 0; i < r->req->nupdates; i++) {
        const ref_cmd *c = &r->cmds[i];

        if (!c->result.forwarded)
            continue;
        outcome_record(&recs[n++], r, c, c->result.outcome);
    }
    /* The push has happened: a failure here cannot stop it, only be said
     * and retried (gateway/outbox.h). The decision records are durable, so
     * what is never retried is completed as unknown once this gateway is
     * gone. The file store has no lease thread: a request whose own
     * outcomes were written retries what waits. */
    if (audit_append_many(r->ctx->audit, recs, n, NULL, &e) < 0) {
        kept = gateway_outbox_add(r->ctx->outbox, recs, n) == 0;
        rg_log(RG_LOG_ERR, "audit_append_failed", "push=%s outcomes=%zu kept_for_retry=%s error=%s",
               r->push_id, n, kept ? "yes" : "no", rg_log_quote(q, sizeof(q), e.msg));
    } else if (r->ctx->db == NULL && gateway_outbox_count(r->ctx->outbox) > 0) {
        gateway_outbox_flush(r->ctx->outbox, NULL, NULL, &e);
    }
    free(recs);
}

/* ----------------------------------------------------------------- body */

static int header_done(gateway_receive *r)
{
    int need_pack;

    r->req = rgit_push_parser_request(r->parser);
    if (rgit_push_has_cap(r->req, "side-band-64k"))
        r->sideband = RGIT_SIDEBAND_64K;
    else if (rgit_push_has_cap(r->req, "side-band"))
        r->sideband = RGIT_SIDEBAND_1000;
    r->report_status = rgit_push_has_cap(r->req, "report-status");
    if (r->req->nupdates == 0) {
        /* git's 4-byte probe before a large push: answer 200, do nothing. */
        receive_phase_probe(r);
        return 0;
    }
    need_pack = plan_push(r);
    if (need_pack < 0)
        return need_pack;
    if (need_pack) {
        int rc = r->spool_fd >= 0 ? 0 : receive_start_spool(r);

        if (rc == 0)
            receive_start_overlap(r);
        return rc;
    }
    return receive_decide_and_forward(r);
}

static int on_pack(gateway_receive *r, const char *data, size_t len)
{
    rg_error e = RG_ERROR_INIT;
    int rc;

    switch (r->phase) {
    case PUSH_FORWARDING:
        /* Decided on the names: the pack streams to upstream as it comes. */
        if (r->send_pack && !r->upstream_failed && receive_send_upstream(r, data, len, &e) < 0)
            receive_upstream_failed(r, &e);
        receive_keep_write(r, data, len);
        return 0;
    case PUSH_INSPECTING:
        if ((rc = gateway_spool_take(r->lease, len)) < 0)
            return receive_fail(r, 503, rc, GATEWAY_SPOOL_FULL);
        rc = rg_fs_write_all(r->spool_fd, data, len);
        if (rc < 0)
            return receive_fail(r, 500, rc, "cannot spool the pack to disk");
        if (r->q && !r->q_failed && rgit_quarantine_write(r->q, data, len, &r->q_err) < 0)
            r->q_failed = 1;
        receive_overlap_pack(r, data, len);
        r->pack_bytes += len;
        return 0;
    default:
        receive_keep_write(r, data, len);
        return 0;
    }
}

static int on_decoded(void *arg, const char *data, size_t len)
{
    gateway_receive *r = arg;
    rg_error e = RG_ERROR_INIT;
    size_t consumed = 0;
    int rc;

    r->decoded_bytes += len;
    if (r->decoded_bytes > r->ctx->cfg->max_body_bytes)
        return receive_fail(r, 413, RG_E_TOO_BIG,
                            "push body larger than the configured max_body_bytes");
    if (r->phase == PUSH_COMMANDS) {
        rc = rgit_push_parser_feed(r->parser, data, len, &consumed, &e);
        if (rc < 0)
            return receive_fail(r, rc == RG_E_TOO_BIG ? 413 : 400, rc, e.msg);
        if (rc == 0)
            return 0;
        rc = header_done(r);
        if (rc < 0)
            return rc;
        data += consumed;
        len -= consumed;
    }
    return len ? on_pack(r, data, len) : 0;
}

int gateway_receive_body(gateway_receive *r, const char *data, size_t len)
{
    rg_error e = RG_ERROR_INIT;
    int rc;

    if (r->failed)
        return r->fail_err.code;
    r->raw_bytes += len;
    if (r->raw_bytes > r->ctx->cfg->max_body_bytes)
        return receive_fail(r, 413, RG_E_TOO_BIG,
                            "push body larger than the configured max_body_bytes");
    if (!r->z)
        return on_decoded(r, data, len);
    rc = rg_inflate_feed(r->z, data, len, &e);
    if (rc < 0 && !r->failed)
        return receive_fail(r, rc == RG_E_TOO_BIG ? 413 : 400, rc, e.msg);
    return rc;
}

/* --------------------------------------------------------------- answer */

static void error_response(rg_buf *response, unsigned *status, const char **ctype, unsigned code,
                           const char *msg)
{
    rg_buf_reset(response);
    rg_buf_printf(response, "refgate: %s\n", msg);
    *status = code;
    *ctype = "text/plain; charset=utf-8";
}

/* The merged report, in the form the client asked for. */
static void report_response(gateway_receive *r, rg_buf *response)
{
    const rgit_push_request *req = r->req;
    rgit_ref_status *st;
    char unpack[GATEWAY_RESULT_MAX], note[700];

    rg_buf_reset(response);
    if (r->sideband != RGIT_SIDEBAND_NONE) {
        if (r->progress.len)
            rgit_sideband_write(response, 2, r->progress.data, r->progress.len, r->sideband);
        /* A request that went wrong after its pack was forwarded still gets
         * upstream's verdict, and is told what was wrong with it. */
        if (r->failed) {
            snprintf(note, sizeof(note), "refgate: %s (after the push was forwarded)\n",
                     r->fail_err.msg);
            rgit_sideband_write(response, 2, note, strlen(note), r->sideband);
        }
    }
    if (!r->report_status) {
        if (r->sideband != RGIT_SIDEBAND_NONE)
            rg_buf_append(response, "0000", 4);
        return;
    }
    st = calloc(req->nupdates, sizeof(*st));
    if (st == NULL)
        return;
    for (size_t i = 0; i < req->nupdates; i++) {
        st[i].refname = r->cmds[i].u->refname;
        st[i].error = r->cmds[i].result.error[0] ? r->cmds[i].result.error : NULL;
    }
    gateway_merge_unpack(unpack, r->have_report ? &r->report : NULL,
                         r->nforward && !r->have_report ? r->upstream_err.msg : NULL);
    rgit_report_write(response, unpack, st, req->nupdates, r->sideband);
    free(st);
}

/* Whether upstream updated any ref of this push. */
static int any_landed(const gateway_receive *r)
{
    for (size_t i = 0; i < r->req->nupdates; i++)
        if (r->cmds[i].result.forwarded && r->cmds[i].result.error[0] == '\0')
            return 1;
    return 0;
}

/* The push is decided and forwarded: its outcome, and the answer. */
void receive_answer(gateway_receive *r, rg_buf *response, unsigned *status,
                    const char **content_type)
{
    finish_push(r);
    receive_keep_packs(r);
    /* A request that went wrong after forwarding began is answered with
     * upstream's report when upstream applied anything (the client must not
     * be told an HTTP error for a push that landed), else with the error. */
    if (r->failed && !any_landed(r)) {
        error_response(response, status, content_type, r->fail_status, r->fail_err.msg);
        return;
    }
    report_response(r, response);
}

void gateway_receive_end(gateway_receive *r, rg_buf *response, unsigned *status,
                         const char **content_type)
{
    rg_error e = RG_ERROR_INIT;

    *status = 200;
    *content_type = "application/x-git-receive-pack-result";
    if (!r->failed && r->z && rg_inflate_finish(r->z, &e) < 0)
        receive_fail(r, 400, RG_E_PROTOCOL, e.msg);
    if (!r->failed && r->phase == PUSH_COMMANDS)
        receive_fail(r, 400, RG_E_PROTOCOL, "the request ended before its command list did");
    /* Before anything was forwarded a bad request is only an HTTP error. */
    if (r->failed && r->nforward == 0) {
        error_response(response, status, content_type, r->fail_status, r->fail_err.msg);
        return;
    }
    if (r->phase == PUSH_PROBE) {
        rg_buf_reset(response);
        return;
    }
    if (r->phase == PUSH_INSPECTING) {
        receive_finish_inspection(r);
        receive_resolve_ancestry(r);
        receive_run_inspection(r);
        if (receive_decide_and_forward(r) < 0) {
            error_response(response, status, content_type, r->fail_status, r->fail_err.msg);
            return;
        }
        /* Waiting for an approval: gateway_receive_read goes on from here. */
        if (r->phase == PUSH_HELD)
            return;
    }
    receive_answer(r, response, status, content_type);
}

/* The metrics of a push that has ended: its refs and itself, once. */
static void count_push(const gateway_receive *r)
{
    gateway_metrics *m = r->ctx->metrics;
    size_t n = receive_decided(r) ? r->req->nupdates : 0, nallow = 0, nforward = 0, nfailed = 0;

    if (n == 0) {
        gateway_metrics_push(m, "none", "invalid");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const ref_cmd *c = &r->cmds[i];
        int allow = c->plan.allowed && !c->unaudited;
        const char *outcome = !c->result.forwarded         ? "refused"
                              : c->result.error[0] == '\0' ? "ok"
                              : r->have_report             ? "upstream_rejected"
                                                           : "upstream_error";

        nallow += allow;
        nforward += c->result.forwarded;
        nfailed += c->result.forwarded && c->result.error[0] != '\0';
        gateway_metrics_ref(m, allow ? "allow" : "deny", outcome);
    }
    gateway_metrics_push(m,
                         nallow == n   ? "allow"
                         : nallow == 0 ? "deny"
                                       : "partial",
                         nforward == 0 ? "refused"
                         : nfailed     ? "upstream_error"
                                       : "ok");
}

void gateway_receive_free(gateway_receive *r)
{
    if (r == NULL)
        return;
    /* A client that went away after the push was forwarded: upstream may
     * have applied it already, so learn what it did and record it. Before
     * the decision an overlapped request ends without its trailer. */
    finish_push(r);
    /* Claims of approvals whose refs did not land go back for the next push. */
    for (size_t i = 0; r->cmds && i < r->req->nupdates; i++)
        gateway_approval_release(r->ctx, &r->cmds[i].approval);
    if (r->in_flight) {
        count_push(r);
        gateway_metrics_in_flight(r->ctx->metrics, -1);
    }
    if (!receive_decided(r))
        receive_abort_overlap(r);
    upstream_push_free(r->upstream);
    /* The quarantine reads the mirror's objects: free it first. */
    rgit_quarantine_free(r->q);
    upstream_mirror_release(r->mirror);
    inspect_conditions_free(r->conds);
    rgit_packscan_free(r->scan);
    if (r->spool_fd >= 0)
        close(r->spool_fd);
    if (r->keep_fd >= 0)
        close(r->keep_fd);
    rg_inflate_free(r->z);
    /* The commands point into the request the parser owns: they go first. */
    for (size_t i = 0; r->cmds && i < r->req->nupdates; i++)
        free(r->cmds[i].moves);
    free(r->cmds);
    rgit_push_parser_free(r->parser);
    rgit_report_free(&r->report);
    rg_buf_free(&r->progress);
    rg_buf_free(&r->held_out);
    free(r->repo_dir);
    free(r->run);
    free(r);
}
