/*
 * A push through the gateway, from the first body byte to the answer; see
 * receive.h for the flow. Sections: state, policy, forwarding, body, answer.
 */
#include "gateway/receive.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "gateway/inflate.h"
#include "gateway/mirror.h"
#include "gateway/upstream.h"
#include "git/push.h"
#include "git/quarantine.h"
#include "git/report.h"
#include "policy/eval.h"
#include "util/fs.h"
#include "util/log.h"

/* ---------------------------------------------------------------- state */

typedef enum body_mode {
    MODE_HEADER,  /* still reading the command list */
    MODE_STREAM,  /* pack bytes go straight to upstream */
    MODE_SPOOL,   /* pack bytes go to disk and the quarantine */
    MODE_DISCARD, /* nothing of the rest is needed */
} body_mode;

typedef struct ref_state {
    config_action action;
    int needs_ancestry; /* an update whose class a rule cares about */
    int classified;     /* action is known exactly (not "update or force") */
    char note[256];     /* why ancestry could not be decided, if so */
    policy_decision decision;
    int allowed;
    int forwarded;
    char atomic_ref[256]; /* set when denied only because another ref was */
    int unaudited;        /* allowed, but the audit log could not take it */
} ref_state;

struct gateway_receive {
    const gateway_ctx *ctx;
    gateway_route route;
    upstream_target target; /* its strings point into route and repo_dir */
    char *repo_dir;
    char *run;
    char token_hash[13];
    char remote[64];
    char push_id[17];

    gateway_inflate *z;
    uint64_t raw_bytes;
    uint64_t decoded_bytes;
    rgit_push_parser *parser;
    const rgit_push_request *req;
    ref_state *refs;
    body_mode mode;
    rgit_sideband_mode sideband;
    int report_status;

    upstream_push *upstream;
    int upstream_failed;
    rg_error upstream_err;
    int send_pack;

    int spool_fd;
    gateway_spool_lease *lease; /* the server's: charged before the spool grows */
    gateway_mirror *mirror;     /* remote upstreams: held while the pack is inspected */
    rgit_quarantine *q;
    int q_failed;
    rg_error q_err;
    int check_workflows; /* the write credential needs to know about workflow changes */
    unsigned cred_flags; /* TOKENS_CRED_* for the forwarded push */

    int failed;
    unsigned fail_status;
    rg_error fail_err;
};

static int on_decoded(void *arg, const char *data, size_t len);

static int fail(gateway_receive *r, unsigned status, int code, const char *msg)
{
    if (!r->failed) {
        r->failed = 1;
        r->fail_status = status;
        rg_error_set(&r->fail_err, code, "%s", msg);
    }
    return code;
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
    if (info->gzip && gateway_inflate_new(&r->z, r->ctx->cfg->max_body_bytes,
                                          r->ctx->cfg->limits.inflate_ratio, on_decoded, r) < 0)
        goto done;
    rc = 0;
done:
    if (rc < 0) {
        gateway_receive_free(r);
        return rg_error_set(err, rc, "out of memory");
    }
    *out = r;
    return 0;
}

/* --------------------------------------------------------------- policy */

static const char *action_label(const ref_state *s)
{
    if (!s->classified)
        return "update|force";
    return config_action_name(s->action);
}

/* Classify every command; mark the updates whose class a rule cares about. */
static int classify(gateway_receive *r)
{
    const rgit_push_request *req = r->req;
    policy_decision as_update, as_force;
    int any = 0;

    for (size_t i = 0; i < req->nupdates; i++) {
        const rgit_ref_update *u = &req->updates[i];
        ref_state *s = &r->refs[i];

        s->classified = 1;
        if (rgit_oid_hex_is_zero(u->old_id)) {
            s->action = CONFIG_ACTION_CREATE;
        } else if (rgit_oid_hex_is_zero(u->new_id)) {
            s->action = CONFIG_ACTION_DELETE;
        } else {
            /* The protocol has no force bit: only ancestry tells, and
             * computing it needs the pack. Ask the rules whether it matters. */
            policy_eval(&as_update, r->ctx->cfg, r->route.repo, u->refname, CONFIG_ACTION_UPDATE);
            policy_eval(&as_force, r->ctx->cfg, r->route.repo, u->refname, CONFIG_ACTION_FORCE);
            s->action = CONFIG_ACTION_UPDATE;
            if (as_update.effect != as_force.effect ||
                as_update.rule_index != as_force.rule_index ||
                as_update.evaluate_matched != as_force.evaluate_matched ||
                as_update.evaluate_effect != as_force.evaluate_effect) {
                s->needs_ancestry = 1;
                any = 1;
            } else {
                s->classified = 0;
            }
        }
    }
    return any;
}

/* Settle the updates that needed ancestry, from the quarantine. */
static void resolve_ancestry(gateway_receive *r)
{
    for (size_t i = 0; i < r->req->nupdates; i++) {
        const rgit_ref_update *u = &r->req->updates[i];
        ref_state *s = &r->refs[i];
        rg_error e = RG_ERROR_INIT;
        int anc = 0;

        if (!s->needs_ancestry)
            continue;
        if (r->q == NULL || r->q_failed) {
            snprintf(s->note, sizeof(s->note), "ancestry undecidable (%s): treated as force",
                     r->q_err.msg[0] ? r->q_err.msg : "no pack");
            s->action = CONFIG_ACTION_FORCE;
        } else if (rgit_quarantine_is_ancestor(&anc, r->q, u->old_id, u->new_id, &e) < 0) {
            snprintf(s->note, sizeof(s->note), "ancestry undecidable (%s): treated as force",
                     e.msg);
            s->action = CONFIG_ACTION_FORCE;
        } else {
            s->action = anc ? CONFIG_ACTION_UPDATE : CONFIG_ACTION_FORCE;
        }
    }
}

/*
 * A github-app write token may change files under .github/workflows/ only
 * when it has the "workflows" permission, which is asked for only when an
 * allowed ref update needs it.
 */
#define WORKFLOWS_PREFIX ".github/workflows/"

/* Does a push to this upstream need to know whether it changes workflows? */
static int workflows_matter(gateway_receive *r)
{
    const rgit_push_request *req = r->req;
    policy_decision d;

    if (r->target.repo_dir != NULL || r->target.up == NULL ||
        r->target.up->credentials.type != CONFIG_CRED_GITHUB_APP)
        return 0;
    /* Only refs that may be forwarded carry content the token would write. */
    for (size_t i = 0; i < req->nupdates; i++) {
        const rgit_ref_update *u = &req->updates[i];
        const ref_state *s = &r->refs[i];

        if (rgit_oid_hex_is_zero(u->new_id))
            continue;
        policy_eval(&d, r->ctx->cfg, r->route.repo, u->refname, s->action);
        if (d.effect == CONFIG_ALLOW)
            return 1;
        if (s->needs_ancestry) {
            policy_eval(&d, r->ctx->cfg, r->route.repo, u->refname, CONFIG_ACTION_FORCE);
            if (d.effect == CONFIG_ALLOW)
                return 1;
        }
    }
    return 0;
}

static void add_note(ref_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(ref_state *s, const char *fmt, ...)
{
    size_t len = strlen(s->note);
    va_list ap;

    if (len > 0 && len + 2 < sizeof(s->note)) {
        memcpy(s->note + len, "; ", 3);
        len += 2;
    }
    va_start(ap, fmt);
    vsnprintf(s->note + len, sizeof(s->note) - len, fmt, ap);
    va_end(ap);
}

/*
 * Set TOKENS_CRED_WORKFLOWS when an allowed create or update changes
 * .github/workflows/: an update compares the old and new trees, a create
 * (whose base is unknown) the upstream's HEAD tree and the new one. What
 * cannot be decided does not get the permission, so upstream refuses a
 * workflow change itself (fail closed); the note says so.
 */
static void resolve_workflows(gateway_receive *r)
{
    for (size_t i = 0; i < r->req->nupdates; i++) {
        const rgit_ref_update *u = &r->req->updates[i];
        ref_state *s = &r->refs[i];
        rg_error e = RG_ERROR_INIT;
        int changed = 0;

        if (!s->allowed || rgit_oid_hex_is_zero(u->new_id))
            continue;
        if (r->q == NULL || r->q_failed) {
            add_note(s, "workflow changes undecidable (%s): no workflows permission",
                     r->q_err.msg[0] ? r->q_err.msg : "no pack");
        } else if (rgit_quarantine_changes_prefix(
                       &changed, r->q, s->action == CONFIG_ACTION_CREATE ? NULL : u->old_id,
                       u->new_id, WORKFLOWS_PREFIX, &e) < 0) {
            add_note(s, "workflow changes undecidable (%s): no workflows permission", e.msg);
        } else if (changed) {
            add_note(s, "changes " WORKFLOWS_PREFIX);
            r->cred_flags |= TOKENS_CRED_WORKFLOWS;
        }
    }
}

static void decide_all(gateway_receive *r)
{
    const rgit_push_request *req = r->req;
    const char *denied_ref = NULL;

    for (size_t i = 0; i < req->nupdates; i++) {
        ref_state *s = &r->refs[i];

        policy_eval(&s->decision, r->ctx->cfg, r->route.repo, req->updates[i].refname, s->action);
        s->allowed = s->decision.effect == CONFIG_ALLOW;
        if (!s->allowed && denied_ref == NULL)
            denied_ref = req->updates[i].refname;
    }
    /* --atomic: one denied ref rejects every ref. */
    if (denied_ref && rgit_push_has_cap(req, "atomic")) {
        for (size_t i = 0; i < req->nupdates; i++) {
            if (!r->refs[i].allowed)
                continue;
            r->refs[i].allowed = 0;
            snprintf(r->refs[i].atomic_ref, sizeof(r->refs[i].atomic_ref), "%s", denied_ref);
        }
    }
}

/* ----------------------------------------------------------- forwarding */

static void upstream_failed(gateway_receive *r, const rg_error *e)
{
    if (!r->upstream_failed) {
        r->upstream_failed = 1;
        r->upstream_err = *e;
    }
}

/* Start upstream with the allowed commands; the pack follows if needed. */
static int start_forward(gateway_receive *r)
{
    const rgit_push_request *req = r->req;
    rg_buf header = RG_BUF_INIT(16 * 1024 * 1024);
    rg_error e = RG_ERROR_INIT;
    char q[600];
    size_t *keep, nkeep = 0;
    int rc = 0;

    keep = calloc(req->nupdates ? req->nupdates : 1, sizeof(*keep));
    if (keep == NULL)
        return fail(r, 500, -ENOMEM, "out of memory");
    r->send_pack = 0;
    for (size_t i = 0; i < req->nupdates; i++) {
        if (!r->refs[i].allowed)
            continue;
        keep[nkeep++] = i;
        r->refs[i].forwarded = 1;
        /* Upstream reads a pack unless every command it gets is a delete. */
        if (!rgit_oid_hex_is_zero(req->updates[i].new_id))
            r->send_pack = 1;
    }
    if (nkeep == 0) {
        r->mode = MODE_DISCARD;
        goto done;
    }
    /* Fail closed: what cannot be audited is not forwarded. */
    if (audit_ready(r->ctx->audit, req->nupdates, &e) < 0) {
        rg_log(RG_LOG_ERR, "push_refused_audit_unwritable", "push=%s error=%s", r->push_id,
               rg_log_quote(q, sizeof(q), e.msg));
        for (size_t i = 0; i < nkeep; i++) {
            r->refs[keep[i]].allowed = 0;
            r->refs[keep[i]].forwarded = 0;
            r->refs[keep[i]].unaudited = 1;
        }
        r->send_pack = 0;
        r->mode = MODE_DISCARD;
        goto done;
    }
    rc = rgit_push_request_write(&header, req, keep, nkeep);
    if (rc < 0) {
        rc = fail(r, 500, rc, "cannot rewrite the command list");
        goto done;
    }
    if (upstream_push_start(&r->upstream, &r->target, r->sideband, r->cred_flags, &e) < 0 ||
        upstream_push_write(r->upstream, header.data, header.len, &e) < 0)
        upstream_failed(r, &e);
    r->mode = (r->send_pack && !r->upstream_failed) ? MODE_STREAM : MODE_DISCARD;
done:
    rg_buf_free(&header);
    free(keep);
    return rc;
}

static int start_spool(gateway_receive *r)
{
    const char *gitdir = r->repo_dir;

    r->spool_fd = open(r->ctx->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (r->spool_fd < 0)
        return fail(r, 500, -errno, "cannot create a spool file for the pack");
    r->mode = MODE_SPOOL;
    if (gitdir == NULL) {
        /*
         * A remote upstream's history is read from its mirror, brought up
         * to date now, before the pack arrives, so thin-pack bases and the
         * old ids the client saw are there. When upstream moved after the
         * client's advertisement and the mirror lacks an old id, or the
         * mirror cannot be had at all, the quarantine cannot answer and
         * the ref counts as a force (fail closed), with the reason noted.
         */
        if (gateway_mirror_acquire(&r->mirror, r->ctx->cfg->state_dir, &r->target, &r->q_err) < 0) {
            r->q_failed = 1;
            return 0;
        }
        gitdir = gateway_mirror_dir(r->mirror);
    }
    if (rgit_quarantine_new(&r->q, gitdir, r->ctx->tmp_dir, r->req->oid_hexlen, &r->q_err) < 0)
        r->q_failed = 1;
    return 0;
}

/* Send the spooled pack upstream once the decision is made. */
static void send_spool(gateway_receive *r)
{
    char *chunk;
    rg_error e = RG_ERROR_INIT;
    ssize_t n;

    chunk = malloc(1 << 20);
    if (chunk == NULL || lseek(r->spool_fd, 0, SEEK_SET) < 0) {
        rg_error_set(&e, RG_E_UPSTREAM, "cannot read the spooled pack");
        upstream_failed(r, &e);
        free(chunk);
        return;
    }
    while ((n = read(r->spool_fd, chunk, 1 << 20)) > 0) {
        if (upstream_push_write(r->upstream, chunk, (size_t)n, &e) < 0) {
            upstream_failed(r, &e);
            break;
        }
    }
    free(chunk);
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
        r->mode = MODE_DISCARD;
        return 0;
    }
    r->refs = calloc(r->req->nupdates, sizeof(*r->refs));
    if (r->refs == NULL)
        return fail(r, 500, -ENOMEM, "out of memory");
    need_pack = classify(r);
    r->check_workflows = workflows_matter(r);
    if (need_pack || r->check_workflows)
        return start_spool(r);
    decide_all(r);
    return start_forward(r);
}

static int on_pack(gateway_receive *r, const char *data, size_t len)
{
    rg_error e = RG_ERROR_INIT;
    int rc;

    switch (r->mode) {
    case MODE_STREAM:
        if (!r->upstream_failed && upstream_push_write(r->upstream, data, len, &e) < 0)
            upstream_failed(r, &e);
        return 0;
    case MODE_SPOOL:
        if ((rc = gateway_spool_take(r->lease, len)) < 0)
            return fail(r, 503, rc, GATEWAY_SPOOL_FULL);
        rc = rg_fs_write_all(r->spool_fd, data, len);
        if (rc < 0)
            return fail(r, 500, rc, "cannot spool the pack to disk");
        if (r->q && !r->q_failed && rgit_quarantine_write(r->q, data, len, &r->q_err) < 0)
            r->q_failed = 1;
        return 0;
    default:
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
        return fail(r, 413, RG_E_TOO_BIG, "push body larger than the configured max_body_bytes");
    if (r->mode == MODE_HEADER) {
        rc = rgit_push_parser_feed(r->parser, data, len, &consumed, &e);
        if (rc < 0)
            return fail(r, rc == RG_E_TOO_BIG ? 413 : 400, rc, e.msg);
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
        return fail(r, 413, RG_E_TOO_BIG, "push body larger than the configured max_body_bytes");
    if (!r->z)
        return on_decoded(r, data, len);
    rc = gateway_inflate_feed(r->z, data, len, &e);
    if (rc < 0 && !r->failed)
        return fail(r, rc == RG_E_TOO_BIG ? 413 : 400, rc, e.msg);
    return rc;
}

/* --------------------------------------------------------------- answer */

static const rgit_ref_status *find_status(const rgit_report *rep, const char *ref)
{
    for (size_t i = 0; i < rep->nrefs; i++)
        if (!strcmp(rep->refs[i].refname, ref))
            return &rep->refs[i];
    return NULL;
}

/* Printable, single-line text for report lines and the audit log. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

static int write_audit(gateway_receive *r, char (*reasons)[600], char (*outcomes)[600])
{
    const rgit_push_request *req = r->req;
    audit_record *recs;
    char(*evals)[300];
    rg_error e = RG_ERROR_INIT;
    char q[600];
    int rc;

    recs = calloc(req->nupdates, sizeof(*recs));
    evals = calloc(req->nupdates, sizeof(*evals));
    if (recs == NULL || evals == NULL) {
        free(recs);
        free(evals);
        return -ENOMEM;
    }
    for (size_t i = 0; i < req->nupdates; i++) {
        const ref_state *s = &r->refs[i];

        if (s->decision.evaluate_matched)
            snprintf(evals[i], sizeof(evals[i]), "%s by %s",
                     config_effect_name(s->decision.evaluate_effect),
                     s->decision.evaluate_rule_name);
        recs[i] = (audit_record){
            .push_id = r->push_id,
            .run = r->run,
            .token_hash = r->token_hash,
            .remote = r->remote,
            .repo = r->route.repo,
            .ref = req->updates[i].refname,
            .old_id = req->updates[i].old_id,
            .new_id = req->updates[i].new_id,
            .action = action_label(s),
            .decision = s->allowed ? "allow" : "deny",
            .rule = s->decision.rule_name,
            .reason = reasons[i],
            .outcome = outcomes[i],
            .evaluate = s->decision.evaluate_matched ? evals[i] : NULL,
        };
    }
    rc = audit_append_many(r->ctx->audit, recs, req->nupdates, &e);
    if (rc < 0)
        rg_log(RG_LOG_ERR, "audit_append_failed", "push=%s error=%s", r->push_id,
               rg_log_quote(q, sizeof(q), e.msg));
    free(recs);
    free(evals);
    return rc;
}

static void error_response(rg_buf *response, unsigned *status, const char **ctype, unsigned code,
                           const char *msg)
{
    rg_buf_reset(response);
    rg_buf_printf(response, "refgate: %s\n", msg);
    *status = code;
    *ctype = "text/plain; charset=utf-8";
}

void gateway_receive_end(gateway_receive *r, rg_buf *response, unsigned *status,
                         const char **content_type)
{
    rgit_report up_report = {0};
    rg_buf progress = RG_BUF_INIT(UPSTREAM_PROGRESS_MAX);
    rgit_ref_status *st = NULL;
    char(*reasons)[600] = NULL, (*outcomes)[600] = NULL, (*errs)[600] = NULL;
    char unpack[300] = "ok";
    rg_error e = RG_ERROR_INIT;
    const rgit_push_request *req;
    int have_report = 0;

    *status = 200;
    *content_type = "application/x-git-receive-pack-result";
    if (!r->failed && r->z && gateway_inflate_finish(r->z, &e) < 0)
        fail(r, 400, RG_E_PROTOCOL, e.msg);
    if (!r->failed && r->mode == MODE_HEADER)
        fail(r, 400, RG_E_PROTOCOL, "the request ended before its command list did");
    if (r->failed) {
        error_response(response, status, content_type, r->fail_status, r->fail_err.msg);
        goto done;
    }
    req = r->req;
    if (req->nupdates == 0)
        goto done;

    if (r->mode == MODE_SPOOL) {
        if (r->q && !r->q_failed && rgit_quarantine_finish(r->q, &r->q_err) < 0)
            r->q_failed = 1;
        resolve_ancestry(r);
        decide_all(r);
        if (r->check_workflows)
            resolve_workflows(r);
        if (r->mirror != NULL) {
            /* Inspection is over: let waiting updates of the mirror in
             * while the push is forwarded. The quarantine reads the
             * mirror's objects, so it goes first. */
            rgit_quarantine_free(r->q);
            r->q = NULL;
            gateway_mirror_release(r->mirror);
            r->mirror = NULL;
        }
        if (start_forward(r) < 0) {
            error_response(response, status, content_type, r->fail_status, r->fail_err.msg);
            goto done;
        }
        if (r->upstream && r->send_pack && !r->upstream_failed)
            send_spool(r);
    }
    if (r->upstream) {
        if (upstream_push_finish(r->upstream, &up_report, &progress, &e) < 0)
            upstream_failed(r, &e);
        else
            have_report = 1;
    }

    st = calloc(req->nupdates, sizeof(*st));
    reasons = calloc(req->nupdates, sizeof(*reasons));
    outcomes = calloc(req->nupdates, sizeof(*outcomes));
    errs = calloc(req->nupdates, sizeof(*errs));
    if (st == NULL || reasons == NULL || outcomes == NULL || errs == NULL) {
        error_response(response, status, content_type, 500, "out of memory");
        goto done;
    }
    if (have_report)
        snprintf(unpack, sizeof(unpack), "%s", up_report.unpack ? up_report.unpack : "ok");
    else if (r->upstream_failed)
        snprintf(unpack, sizeof(unpack), "upstream: %s", r->upstream_err.msg);
    one_line(unpack);
    for (size_t i = 0; i < req->nupdates; i++) {
        const ref_state *s = &r->refs[i];
        const rgit_ref_status *us =
            have_report ? find_status(&up_report, req->updates[i].refname) : NULL;

        st[i].refname = req->updates[i].refname;
        if (s->unaudited)
            snprintf(reasons[i], sizeof(reasons[i]),
                     "the audit log cannot be written, so nothing was forwarded");
        else if (s->atomic_ref[0])
            snprintf(reasons[i], sizeof(reasons[i]), "atomic push rejected because %s is denied",
                     s->atomic_ref);
        else
            snprintf(reasons[i], sizeof(reasons[i]), "%s%s%s", s->decision.reason,
                     s->note[0] && s->decision.reason[0] ? "; " : "", s->note);
        one_line(reasons[i]);
        if (!s->forwarded) {
            snprintf(errs[i], sizeof(errs[i]), "%s: %s", s->unaudited ? "refgate" : "policy",
                     reasons[i]);
            snprintf(outcomes[i], sizeof(outcomes[i]), "rejected");
        } else if (!have_report) {
            snprintf(errs[i], sizeof(errs[i]), "upstream: %s", r->upstream_err.msg);
            snprintf(outcomes[i], sizeof(outcomes[i]), "upstream error: %s", r->upstream_err.msg);
        } else if (us == NULL) {
            snprintf(errs[i], sizeof(errs[i]), "upstream: no status for this ref");
            snprintf(outcomes[i], sizeof(outcomes[i]), "upstream error: no status for this ref");
        } else if (us->error) {
            snprintf(errs[i], sizeof(errs[i]), "%s", us->error);
            snprintf(outcomes[i], sizeof(outcomes[i]), "forwarded: ng %s", us->error);
        } else {
            snprintf(outcomes[i], sizeof(outcomes[i]), "forwarded: ok");
        }
        one_line(errs[i]);
        one_line(outcomes[i]);
        st[i].error = errs[i][0] ? errs[i] : NULL;
    }
    /* Audit before answering: the pusher learns nothing the log lacks. */
    write_audit(r, reasons, outcomes);
    rg_buf_reset(response);
    if (progress.len && r->sideband != RGIT_SIDEBAND_NONE)
        rgit_sideband_write(response, 2, progress.data, progress.len, r->sideband);
    if (r->report_status)
        rgit_report_write(response, unpack, st, req->nupdates, r->sideband);
    else if (r->sideband != RGIT_SIDEBAND_NONE)
        rg_buf_append(response, "0000", 4);
done:
    rgit_report_free(&up_report);
    rg_buf_free(&progress);
    free(st);
    free(reasons);
    free(outcomes);
    free(errs);
}

void gateway_receive_free(gateway_receive *r)
{
    if (r == NULL)
        return;
    upstream_push_free(r->upstream);
    /* The quarantine reads the mirror's objects: free it first. */
    rgit_quarantine_free(r->q);
    gateway_mirror_release(r->mirror);
    if (r->spool_fd >= 0)
        close(r->spool_fd);
    gateway_inflate_free(r->z);
    rgit_push_parser_free(r->parser);
    free(r->refs);
    free(r->repo_dir);
    free(r->run);
    free(r);
}
