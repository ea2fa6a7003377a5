/*
 * Approvals in the running gateway (see approve.h): the push side (a ref
 * a rule asks about) and the control socket's approval ops, both over
 * ctx->approvals and both audited in the gateway's one chain.
 */
#include "gateway/approve.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "upstream/mirror.h"
#include "gateway/route.h"
#include "git/quarantine.h"
#include "util/log.h"

/* Refs are shown at most this long in a reason, as policy_eval shows them. */
#define REF_SHOWN_MAX 128

/* What a kept pack is read back in, for the quarantine that shows it. */
#define PACK_CHUNK (1u << 20)

/* Append one approval event; a failure is logged and returned. */
static int audit_event(const gateway_ctx *ctx, const char *event, const char *detail)
{
    audit_record rec = {.kind = AUDIT_EVENT, .event = event, .detail = detail};
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    int rc = audit_append(ctx->audit, &rec, &e);

    if (rc < 0)
        rg_log(RG_LOG_ERR, "audit_append_failed", "event=%s error=%s", event,
               rg_log_quote(q, sizeof(q), e.msg));
    return rc;
}

/* ------------------------------------------------------------------------
 * A push
 * ------------------------------------------------------------------------ */

int gateway_approval_needed(const policy_plan_ref *plan)
{
    return !plan->allowed && !plan->invalid && plan->atomic_ref == NULL &&
           plan->decision.rule_effect == CONFIG_ASK;
}

/*
 * Why the rules ask, without policy_eval's "no approver" ending (that is
 * for gateways without approvals): the rule's own reason, or what it asks.
 */
static void ask_reason(char *out, size_t size, const policy_plan_ref *plan, const gateway_ctx *ctx,
                       const char *ref)
{
    const policy_decision *d = &plan->decision;
    const config_rule *rule = d->rule_index >= 0 && (size_t)d->rule_index < ctx->cfg->nrules
                                  ? &ctx->cfg->rules[d->rule_index]
                                  : NULL;
    const char *action = config_action_name(plan->action);

    if (rule != NULL && rule->reason != NULL)
        snprintf(out, size, "%s", rule->reason);
    else if (rule != NULL)
        snprintf(out, size, "rule \"%s\" requires approval for %s on %.*s", rule->name, action,
                 REF_SHOWN_MAX, ref);
    else
        snprintf(out, size, "no rule allows %s on %.*s (default: ask)", action, REF_SHOWN_MAX, ref);
}

void gateway_approval_resolve(gateway_approval_ref *out, policy_plan_ref *plan,
                              const gateway_ctx *ctx, const gateway_approval_push *push)
{
    policy_decision *d = &plan->decision;
    approvals_key key = {push->repo, push->ref, push->old_id, push->new_id};
    approvals_ask_info info = {push->run, d->rule_name, NULL};
    approvals_entry e;
    rg_error err = RG_ERROR_INIT;
    char base[sizeof(d->reason)], detail[2048];
    int created = 0, asked = out->created;

    memset(out, 0, sizeof(*out));
    out->created = asked;
    ask_reason(base, sizeof(base), plan, ctx, push->ref);
    info.reason = base;
    if (ctx->approvals == NULL) {
        snprintf(d->reason, sizeof(d->reason),
                 "%s; approval required, but this gateway keeps no approvals", base);
        return;
    }
    if (approvals_ask(ctx->approvals, &e, &created, &key, &info, (int64_t)time(NULL), &err) < 0) {
        /* Fail closed: an approval that cannot be looked up is none. */
        snprintf(d->reason, sizeof(d->reason),
                 "%s; approval required, but none can be asked for: %s", base, err.msg);
        return;
    }
    memcpy(out->id, e.id, sizeof(e.id));
    switch (e.state) {
    case APPROVALS_APPROVED:
        /* Claimed before it lets anything through: of pushes of this
         * update at once (through any gateway), one forwards on it. */
        snprintf(out->holder, sizeof(out->holder), "%s:%s", ctx->gateway_id, push->push_id);
        if (approvals_claim(ctx->approvals, &e, e.id, &key, out->holder, (int64_t)time(NULL),
                            &err) < 0) {
            snprintf(d->reason, sizeof(d->reason), "%s; approval %s cannot be used now: %s%s", base,
                     e.id, err.msg,
                     err.code == -EBUSY ? " (push again when that push is over)" : "");
            return;
        }
        out->claimed = 1;
        plan->allowed = 1;
        d->effect = CONFIG_ALLOW;
        out->approved = 1;
        snprintf(d->reason, sizeof(d->reason), "%s; approved by %s (approval %s)", base, e.by,
                 e.id);
        return;
    case APPROVALS_DENIED:
        snprintf(d->reason, sizeof(d->reason), "%s; approval %s was denied by %s%s%s", base, e.id,
                 e.by, e.note[0] ? ": " : "", e.note);
        return;
    case APPROVALS_PENDING:
        break;
    }
    snprintf(d->reason, sizeof(d->reason), "%s (approval needed: refgate approve %s)", base, e.id);
    if (!created)
        return;
    out->created = 1;
    snprintf(detail, sizeof(detail),
             "approval %s requested by push %s, run %s: %s %.*s in %s (%s..%s), rule %s", e.id,
             push->push_id, push->run && push->run[0] ? push->run : "(unknown)",
             config_action_name(plan->action), REF_SHOWN_MAX, push->ref, push->repo, push->old_id,
             push->new_id, d->rule_name);
    audit_event(ctx, "approval-request", detail);
    rg_log(RG_LOG_NOTICE, "approval_requested", "id=%s push=%s", e.id, push->push_id);
}

/* The hold of the rule deciding a copy of `plan` as it stands. */
static unsigned hold_as(const policy_plan_ref *plan, const config_model *cfg, const char *repo)
{
    policy_plan_ref t = *plan;

    policy_plan_decide(&t, cfg, repo);
    if (t.allowed || t.decision.rule_effect != CONFIG_ASK || t.decision.rule_index < 0 ||
        (size_t)t.decision.rule_index >= cfg->nrules)
        return 0;
    return cfg->rules[t.decision.rule_index].hold;
}

unsigned gateway_approval_hold(const policy_plan_ref *plan, const config_model *cfg,
                               const char *repo)
{
    policy_plan_ref as_update = *plan;
    unsigned force = hold_as(plan, cfg, repo), update;

    if (!plan->needs_ancestry)
        return force;
    policy_plan_set_ancestry(&as_update, 1, 1);
    update = hold_as(&as_update, cfg, repo);
    return update > force ? update : force;
}

int gateway_approval_pending(const gateway_ctx *ctx, const char *id)
{
    approvals_entry e;

    return ctx->approvals != NULL &&
           approvals_get(ctx->approvals, &e, id, (int64_t)time(NULL), NULL) == 0 &&
           e.state == APPROVALS_PENDING;
}

void gateway_approval_consume(const gateway_ctx *ctx, gateway_approval_ref *ref,
                              const gateway_approval_push *push)
{
    approvals_key key = {push->repo, push->ref, push->old_id, push->new_id};
    rg_error err = RG_ERROR_INIT;
    char detail[2048], q[RG_LOG_VALUE_MAX];

    if (ctx->approvals == NULL || !ref->claimed)
        return;
    ref->claimed = 0;
    if (approvals_consume(ctx->approvals, ref->id, &key, ref->holder, (int64_t)time(NULL), &err) <
        0) {
        /* The update landed; a second push of it would find the ref moved,
         * and the claim lapses (APPROVALS_CLAIM_SECONDS). */
        rg_log(RG_LOG_ERR, "approval_consume_failed", "id=%s error=%s", ref->id,
               rg_log_quote(q, sizeof(q), err.msg));
        return;
    }
    snprintf(detail, sizeof(detail), "approval %s used by push %s: %.*s in %s is now %s", ref->id,
             push->push_id, REF_SHOWN_MAX, push->ref, push->repo, push->new_id);
    audit_event(ctx, "approval-consume", detail);
}

void gateway_approval_release(const gateway_ctx *ctx, gateway_approval_ref *ref)
{
    rg_error err = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];

    if (ctx->approvals == NULL || !ref->claimed)
        return;
    ref->claimed = 0;
    /* Not given back (the database is away): it lapses by itself. */
    if (approvals_unclaim(ctx->approvals, ref->id, ref->holder, &err) < 0)
        rg_log(RG_LOG_WARNING, "approval_release_failed", "id=%s error=%s", ref->id,
               rg_log_quote(q, sizeof(q), err.msg));
}

void gateway_approval_keep_pack(const gateway_ctx *ctx, gateway_spool_lease *lease, const char *id,
                                int fd, uint64_t len)
{
    rg_error err = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    uint64_t total, cap = ctx->cfg->limits.spool_bytes / 2;

    if (ctx->approvals == NULL || len == 0)
        return;
    /* Kept packs outlive their pushes: however many pushes ask, they leave
     * half the budget to the pushes still to come. */
    total = approvals_pack_total(ctx->approvals); /* UINT64_MAX: cannot be known */
    if (total > cap || len > cap - total) {
        rg_log(RG_LOG_WARNING, "approval_pack_not_kept",
               "id=%s bytes=%llu reason=\"kept packs may take half of limits.spool_bytes\"", id,
               (unsigned long long)len);
        return;
    }
    if (gateway_spool_take(lease, len) < 0) {
        rg_log(RG_LOG_WARNING, "approval_pack_not_kept",
               "id=%s bytes=%llu reason=\"the spool budget (limits.spool_bytes) is taken\"", id,
               (unsigned long long)len);
        return;
    }
    if (approvals_keep_pack(ctx->approvals, id, fd, len, (int64_t)time(NULL), &err) < 0) {
        rg_log(RG_LOG_WARNING, "approval_pack_not_kept", "id=%s error=%s", id,
               rg_log_quote(q, sizeof(q), err.msg));
        return;
    }
    /* Packs kept in the database leave this disk when the push ends. */
    if (approvals_packs_local(ctx->approvals))
        gateway_spool_lease_keep(lease, len);
}

/* ------------------------------------------------------------------------
 * The control socket
 * ------------------------------------------------------------------------ */

static json_t *time_value(int64_t t)
{
    struct tm tm;
    time_t tt = (time_t)t;
    char buf[32];

    if (t == 0 || gmtime_r(&tt, &tm) == NULL ||
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return json_null();
    return json_string(buf);
}

static json_t *entry_json(const approvals_entry *e)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "id",
                     e->id, "state", approvals_state_name(e->state), "repo", e->repo, "ref", e->ref,
                     "old", e->old_id, "new", e->new_id, "run", e->run, "rule", e->rule, "reason",
                     e->reason, "by", e->by, "note", e->note, "created", time_value(e->created),
                     "decided", time_value(e->decided), "expires", time_value(e->expires));
}

/* The answer {"ok": true, "approval": ...}; -ENOMEM when it cannot be built. */
static int answer_entry(json_t **answer, const approvals_entry *e, rg_error *err)
{
    json_t *v = entry_json(e);

    *answer = v ? json_pack("{s:b, s:o}", "ok", 1, "approval", v) : NULL;
    return *answer ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
}

/* ------------------------------------------------------------------------
 * What a kept pack would land
 * ------------------------------------------------------------------------ */

/* Trailing spaces off (git's %<(N,trunc) pads). */
static char *trim(char *s)
{
    size_t len = strlen(s);

    while (len > 0 && s[len - 1] == ' ')
        s[--len] = '\0';
    return s;
}

/* git log's lines (rgit_quarantine_log) as {"id", "date", "author", "subject"} objects. */
static json_t *commits_json(char *text, int *more)
{
    json_t *arr = json_array();
    char *line, *save = NULL;
    size_t n = 0;

    *more = 0;
    /* Bounded: the lines of a capped buffer. */
    for (line = strtok_r(text, "\n", &save); arr && line; line = strtok_r(NULL, "\n", &save)) {
        char *f[4] = {line, NULL, NULL, NULL};

        for (int i = 1; i < 4 && f[i - 1]; i++) {
            f[i] = strchr(f[i - 1], '\t');
            if (f[i])
                *f[i]++ = '\0';
        }
        if (f[3] == NULL)
            continue;
        if (++n > GATEWAY_APPROVALS_COMMITS) {
            *more = 1;
            break;
        }
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s}", "id", f[0], "date", f[1],
                                             "author", trim(f[2]), "subject", trim(f[3])));
    }
    return arr;
}

/*
 * The commits `e`'s kept pack would land: indexed into a quarantine over
 * the upstream (a local repository, or a remote's mirror) and walked from
 * the new commit back to the old one (for a create: to what upstream has).
 */
static int show_commits(json_t **out, int *more, const gateway_ctx *ctx, const approvals_entry *e,
                        rg_error *err)
{
    const char *slash = strchr(e->repo, '/'), *gitdir = NULL, *zero;
    gateway_route route = {0};
    const config_upstream *up;
    upstream_target target = {0};
    upstream_mirror *mirror = NULL;
    rgit_quarantine *q = NULL;
    rg_buf log = RG_BUF_INIT(1024 * 1024);
    char *repo_dir = NULL, *chunk = NULL;
    const char *have[1];
    int fd = -1, rc;
    ssize_t n;

    *out = NULL;
    if (slash == NULL || (size_t)(slash - e->repo) >= sizeof(route.host) ||
        strlen(slash + 1) >= sizeof(route.path))
        return rg_error_set(err, -EINVAL, "approval %s names no repository", e->id);
    memcpy(route.host, e->repo, (size_t)(slash - e->repo));
    snprintf(route.path, sizeof(route.path), "%s", slash + 1);
    snprintf(route.repo, sizeof(route.repo), "%s", e->repo);
    up = config_find_upstream(ctx->cfg, route.host);
    if (up == NULL)
        return rg_error_set(err, -ENOENT, "%s is no longer an upstream of this gateway",
                            route.host);
    if ((rc = approvals_open_pack(&fd, ctx->approvals, e->id, (int64_t)time(NULL), err)) < 0)
        return rc;
    zero = strspn(e->old_id, "0") == strlen(e->old_id) ? e->old_id : NULL;
    if (up->root != NULL) {
        if ((rc = gateway_route_local_dir(&repo_dir, up, &route, err)) < 0)
            goto done;
        gitdir = repo_dir;
    } else {
        target = (upstream_target){
            .up = up, .repo_path = route.path, .read = ctx->read_creds[up - ctx->cfg->upstreams]};
        have[0] = e->old_id;
        if ((rc = upstream_mirror_acquire(&mirror, ctx->cfg->state_dir, &target, have, zero ? 0 : 1,
                                          err)) < 0)
            goto done;
        gitdir = upstream_mirror_dir(mirror);
    }
    if ((rc = rgit_quarantine_new(&q, gitdir, ctx->tmp_dir, strlen(e->new_id), err)) < 0)
        goto done;
    chunk = malloc(PACK_CHUNK);
    if (chunk == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    /* Bounded: the kept pack's size. */
    while ((n = read(fd, chunk, PACK_CHUNK)) > 0)
        if ((rc = rgit_quarantine_write(q, chunk, (size_t)n, err)) < 0)
            goto done;
    if ((rc = rgit_quarantine_finish(q, err)) < 0 ||
        (rc = rgit_quarantine_log(&log, q, zero ? NULL : e->old_id, e->new_id,
                                  GATEWAY_APPROVALS_COMMITS + 1, err)) < 0)
        goto done;
    *out = commits_json(log.data ? log.data : (char *)"", more);
    if (*out == NULL)
        rc = rg_error_set(err, -ENOMEM, "out of memory");
done:
    /* The quarantine reads the mirror's objects: it goes first. */
    rgit_quarantine_free(q);
    upstream_mirror_release(mirror);
    rg_buf_free(&log);
    free(chunk);
    free(repo_dir);
    if (fd >= 0)
        close(fd);
    return rc;
}

typedef struct show_job {
    const gateway_ctx *ctx;
    const approvals_entry *e;
    json_t *commits;
    int more;
    rg_error err;
} show_job;

static void *show_job_main(void *arg)
{
    show_job *j = arg;

    show_commits(&j->commits, &j->more, j->ctx, j->e, &j->err);
    return NULL;
}

/*
 * show_commits on a thread of its own: libgit2 keeps per-thread state
 * that is freed when its thread ends, and the control thread lives as long
 * as the gateway.
 */
static json_t *show_commits_threaded(int *more, const gateway_ctx *ctx, const approvals_entry *e,
                                     rg_error *err)
{
    show_job j = {.ctx = ctx, .e = e};
    pthread_t tid;
    int rc = pthread_create(&tid, NULL, show_job_main, &j);

    if (rc != 0) {
        rg_error_set(err, -rc, "cannot start a thread: %s", strerror(rc));
        return NULL;
    }
    pthread_join(tid, NULL);
    *more = j.more;
    if (j.commits == NULL)
        *err = j.err;
    return j.commits;
}

/* `approval` with "commits": the entry, and what its kept pack would land. */
static int op_show(json_t **answer, const gateway_ctx *ctx, const char *id, const json_t *req,
                   rg_error *err)
{
    json_t *commits = NULL;
    approvals_entry e;
    rg_error why = RG_ERROR_INIT;
    int more = 0, rc;

    if ((rc = approvals_get(ctx->approvals, &e, id, (int64_t)time(NULL), err)) < 0 ||
        (rc = answer_entry(answer, &e, err)) < 0)
        return rc;
    if (!json_is_true(json_object_get(req, "commits")))
        return 0;
    /* What cannot be shown is said, not failed: the approval is still there to decide. */
    if (e.pack_bytes == 0)
        rg_error_set(&why, -ENOENT,
                     "no pack was kept for this approval (a delete, a pack the "
                     "spool budget could not take, or a decided approval)");
    else
        commits = show_commits_threaded(&more, ctx, &e, &why);
    if (commits != NULL) {
        json_object_set_new(*answer, "commits", commits);
        json_object_set_new(*answer, "more_commits", json_boolean(more));
    } else {
        json_object_set_new(*answer, "commits_error", json_string(why.msg));
    }
    return 0;
}

static int op_list(json_t **answer, const gateway_ctx *ctx, const json_t *req, rg_error *err)
{
    const json_t *off = json_object_get(req, "offset"), *all = json_object_get(req, "all");
    approvals_entry *list = NULL;
    size_t n = 0, total = 0, skip;
    json_t *arr = NULL;
    int rc;

    if (off != NULL && (!json_is_integer(off) || json_integer_value(off) < 0))
        return rg_error_set(err, -EINVAL, "offset: expected a count from 0");
    if (all != NULL && !json_is_boolean(all))
        return rg_error_set(err, -EINVAL, "all: expected true or false");
    skip = off ? (size_t)json_integer_value(off) : 0;
    if ((rc = approvals_list(ctx->approvals, &list, &n, (int64_t)time(NULL), err)) < 0)
        return rc;
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        if (!json_is_true(all) && list[i].state != APPROVALS_PENDING)
            continue;
        if (total++ < skip || json_array_size(arr) >= GATEWAY_APPROVALS_PAGE)
            continue;
        if (json_array_append_new(arr, entry_json(&list[i])) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    free(list);
    *answer = arr ? json_pack("{s:b, s:o, s:I, s:I}", "ok", 1, "approvals", arr, "total",
                              (json_int_t)total, "offset", (json_int_t)skip)
                  : NULL;
    return *answer ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
}

/* Approve (deny 0) or deny one approval for `peer`, audited first. */
static int op_decide(json_t **answer, const gateway_ctx *ctx, const gateway_approval_peer *peer,
                     const char *id, int deny, const json_t *req, rg_error *err)
{
    const json_t *rv = json_object_get(req, "reason");
    const char *note = json_string_value(rv);
    approvals_entry e;
    char by[APPROVALS_NAME_MAX], who[APPROVALS_NAME_MAX + 64], detail[3072], q[RG_LOG_VALUE_MAX];
    int64_t now = (int64_t)time(NULL);
    int rc;

    if (rv != NULL && (!json_is_string(rv) || deny == 0))
        return rg_error_set(err, -EINVAL, "reason: a denial's reason, as a string");
    if (note != NULL && strlen(note) >= APPROVALS_TEXT_MAX)
        return rg_error_set(err, -EINVAL, "reason: at most %d bytes", APPROVALS_TEXT_MAX - 1);
    for (const char *p = note; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return rg_error_set(err, -EINVAL, "reason: one line without control characters");
    /* Checked first, so the record is written only for a decision that can be made. */
    if ((rc = approvals_get(ctx->approvals, &e, id, now, err)) < 0)
        return rc;
    if (e.state == APPROVALS_DENIED || (!deny && e.state == APPROVALS_APPROVED))
        return rg_error_set(err, -EALREADY, "approval %s is already %s by %s", id,
                            approvals_state_name(e.state), e.by);
    if (peer->console_user != NULL) {
        snprintf(by, sizeof(by), "%s via console", peer->console_user);
        snprintf(who, sizeof(who), "console user %s via console", peer->console_user);
    } else if (ctx->db != NULL) {
        /* Gateways share the approvals: say which one the reviewer used. */
        snprintf(by, sizeof(by), "uid %lu (%s) via control socket of gateway %s", peer->uid,
                 peer->user, ctx->gateway_id);
        snprintf(who, sizeof(who), "peer uid %lu (%s) pid %ld via control socket", peer->uid,
                 peer->user, peer->pid);
    } else {
        snprintf(by, sizeof(by), "uid %lu (%s) via control socket", peer->uid, peer->user);
        snprintf(who, sizeof(who), "peer uid %lu (%s) pid %ld via control socket", peer->uid,
                 peer->user, peer->pid);
    }
    snprintf(detail, sizeof(detail), "approval %s %s by %s: %.*s in %s (%s..%s), run %s%s%s", id,
             deny ? (e.state == APPROVALS_APPROVED ? "revoked" : "denied") : "granted", who,
             REF_SHOWN_MAX, e.ref, e.repo, e.old_id, e.new_id, e.run[0] ? e.run : "(unknown)",
             note ? ", reason: " : "", note ? note : "");
    /* The record is durable before the decision exists: an approval the
     * log does not know of never lets a push through. */
    if (audit_event(ctx, deny ? "approval-deny" : "approval-grant", detail) < 0)
        return rg_error_set(err, -EIO, "the audit log cannot be written; approval %s is unchanged",
                            id);
    rc = deny ? approvals_deny(ctx->approvals, &e, id, by, note, now, err)
              : approvals_approve(ctx->approvals, &e, id, by, now, err);
    if (rc < 0)
        return rc;
    rg_log(RG_LOG_NOTICE, deny ? "approval_denied" : "approval_granted", "id=%s by=%s", id,
           rg_log_quote(q, sizeof(q), by));
    return answer_entry(answer, &e, err);
}

int gateway_approval_control(json_t **answer, const gateway_ctx *ctx,
                             const gateway_approval_peer *peer, const char *op, const json_t *req,
                             rg_error *err)
{
    const char *id = json_string_value(json_object_get(req, "id"));
    int list = !strcmp(op, "approvals"), show = !strcmp(op, "approval"),
        approve = !strcmp(op, "approve"), deny = !strcmp(op, "deny");

    *answer = NULL;
    if (!list && !show && !approve && !deny)
        return 0;
    if (ctx->approvals == NULL) {
        rg_error_set(err, -ENOTSUP, "this gateway keeps no approvals");
        return 1;
    }
    if (list) {
        op_list(answer, ctx, req, err);
        return 1;
    }
    if (id == NULL) {
        rg_error_set(err, -EINVAL, "id: expected an approval id");
        return 1;
    }
    if (show) {
        op_show(answer, ctx, id, req, err);
        return 1;
    }
    op_decide(answer, ctx, peer, id, deny, req, err);
    return 1;
}
