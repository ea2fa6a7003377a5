/*
 * Holding a push for an approval (see receive.c for the whole walk): the
 * pack an asked-for approval keeps, whether a push may be held at all,
 * then, when the deciding rule holds, the push kept open with keepalives
 * until the approval is decided or the hold is up, and the push decided
 * again and answered.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/receive_int.h"
#include "util/fs.h"
#include "util/log.h"

/* A held push: a keepalive this often, and the approvals looked at this
 * often (in the shared database, where another gateway may decide, less). */
#define HOLD_KEEPALIVE_MS 5000
#define HOLD_POLL_MS      250
#define HOLD_POLL_DB_MS   1000

/* ----------------------------------------------------------------- keep */

/* Whether a ref of this push asked for a new approval, which keeps the pack. */
static int asked_for_approval(const gateway_receive *r)
{
    for (size_t i = 0; i < r->req->nupdates; i++)
        if (r->cmds[i].approval.created)
            return 1;
    return 0;
}

/* Decided before the pack came: keep the pack bytes still to come. */
void receive_start_keep(gateway_receive *r)
{
    if (!asked_for_approval(r))
        return;
    r->keep_fd = open(r->ctx->tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (r->keep_fd < 0)
        r->keep_failed = 1;
}

void receive_keep_write(gateway_receive *r, const char *data, size_t len)
{
    if (r->keep_fd < 0 || r->keep_failed)
        return;
    /* Charged like a spool: the budget bounds what a pending push keeps. */
    if (gateway_spool_take(r->lease, len) < 0 || rg_fs_write_all(r->keep_fd, data, len) < 0) {
        r->keep_failed = 1;
        return;
    }
    r->keep_bytes += len;
}

/* The push is over: each approval it asked for keeps a copy of its pack. */
void receive_keep_packs(gateway_receive *r)
{
    int fd = r->keep_fd >= 0 ? r->keep_fd : r->spool_fd;
    uint64_t len = r->keep_fd >= 0 ? r->keep_bytes : r->pack_bytes;

    if (r->kept || r->failed || fd < 0 || (len == 0 && !r->keep_failed))
        return;
    r->kept = 1;
    for (size_t i = 0; i < r->req->nupdates; i++) {
        if (!r->cmds[i].approval.created)
            continue;
        if (r->keep_failed)
            rg_log(RG_LOG_WARNING, "approval_pack_not_kept",
                   "id=%s reason=\"the spool budget (limits.spool_bytes) is taken, or the pack "
                   "could not be spooled\"",
                   r->cmds[i].approval.id);
        else
            gateway_approval_keep_pack(r->ctx, r->lease, r->cmds[i].approval.id, fd, len);
    }
}

/* ----------------------------------------------------------------- hold */

/*
 * Whether a rule with a hold may ask about a ref of this push (so it is
 * decided once the pack is in, where it can wait). Only a client that
 * speaks side-band hears keepalives, and only one that asked for
 * report-status hears the outcome: others are refused at once.
 */
int receive_may_hold(const gateway_receive *r)
{
    const config_model *cfg = r->ctx->cfg;
    size_t i;

    if (r->ctx->approvals == NULL || r->sideband == RGIT_SIDEBAND_NONE || !r->report_status)
        return 0;
    /* Most configs hold nothing: then no ref is decided twice for it. */
    for (i = 0; i < cfg->nrules && cfg->rules[i].hold == 0; i++)
        ;
    if (i == cfg->nrules)
        return 0;
    for (i = 0; i < r->req->nupdates; i++)
        if (gateway_approval_hold(&r->cmds[i].plan, cfg, r->route.repo) > 0)
            return 1;
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The refs waiting for an approval that is still pending. */
static int waiting(const gateway_receive *r)
{
    for (size_t i = 0; i < r->req->nupdates; i++) {
        const ref_cmd *c = &r->cmds[i];

        if (c->approval.id[0] && !c->approval.approved &&
            gateway_approval_pending(r->ctx, c->approval.id))
            return 1;
    }
    return 0;
}

/*
 * Decided, and a ref waits for a pending approval whose rule holds: keep
 * the push open (the reviewer sees its kept pack meanwhile). The client
 * hears why on band 2, then keepalives until gateway_receive_read ends it.
 */
int receive_start_hold(gateway_receive *r)
{
    unsigned hold = 0, h;
    char msg[300];

    if (!r->may_hold || r->failed)
        return 0;
    for (size_t i = 0; i < r->req->nupdates; i++) {
        ref_cmd *c = &r->cmds[i];

        if (!c->approval.id[0] || c->approval.approved ||
            !gateway_approval_pending(r->ctx, c->approval.id))
            continue;
        h = gateway_approval_hold(&c->plan, r->ctx->cfg, r->route.repo);
        if (h > hold)
            hold = h;
        if (h > 0)
            snprintf(msg, sizeof(msg),
                     "refgate: waiting up to %u s for approval %s of %.128s (refgate approve %s)\n",
                     h, c->approval.id, c->u->refname, c->approval.id);
    }
    if (hold == 0)
        return 0;
    receive_keep_packs(r);
    /* Nothing else needs the quarantine unless workflows are asked about. */
    if (!r->check_workflows)
        receive_end_inspection(r);
    receive_phase_hold(r);
    r->hold_until = now_ms() + (int64_t)hold * 1000;
    r->next_keepalive = now_ms() + HOLD_KEEPALIVE_MS;
    rgit_sideband_write(&r->held_out, 2, msg, strlen(msg), r->sideband);
    return 1;
}

/*
 * One step of a held push: wait until the next keepalive (sent then) or
 * until every awaited approval is decided, the hold is up or the gateway
 * stops; then decide the push again, forward what is allowed and build
 * the answer.
 */
static void hold_step(gateway_receive *r)
{
    unsigned status = 200;
    const char *ctype = NULL;
    rg_buf tail = RG_BUF_INIT(UPSTREAM_REPORT_MAX * 2 + UPSTREAM_PROGRESS_MAX * 2);
    int64_t t;

    /* Bounded: until the next keepalive at most. */
    while ((t = now_ms()) < r->next_keepalive) {
        if (t >= r->hold_until || atomic_load(r->ctx->stopping) || !waiting(r))
            goto decide;
        usleep((r->ctx->db ? HOLD_POLL_DB_MS : HOLD_POLL_MS) * 1000);
    }
    if (t < r->hold_until && !atomic_load(r->ctx->stopping) && waiting(r)) {
        /* An empty band-1 packet, as receive-pack's keepalive. */
        rg_buf_append(&r->held_out, "0005\1", 5);
        r->next_keepalive = t + HOLD_KEEPALIVE_MS;
        return;
    }
decide:
    /* Leaves PUSH_HELD whatever happens: forwarded, or failed. */
    if (receive_decide_and_forward(r) < 0) {
        char msg[700];

        /* Too late for an HTTP error: side-band's error band says it. */
        snprintf(msg, sizeof(msg), "refgate: %s\n", r->fail_err.msg);
        rgit_sideband_write(&r->held_out, 3, msg, strlen(msg), r->sideband);
        rg_buf_free(&tail);
        return;
    }
    receive_answer(r, &tail, &status, &ctype);
    if (tail.len)
        rg_buf_append(&r->held_out, tail.data, tail.len);
    rg_buf_free(&tail);
}

int gateway_receive_held(const gateway_receive *r)
{
    /* Set when the push is held, and kept: the answer is read from here on. */
    return r->hold_until != 0;
}

size_t gateway_receive_read(gateway_receive *r, char *buf, size_t max)
{
    size_t n;

    /* Bounded: each round either waits out part of the hold or ends it. */
    while (r->held_off == r->held_out.len && r->phase == PUSH_HELD)
        hold_step(r);
    n = r->held_out.len - r->held_off;
    if (n > max)
        n = max;
    if (n)
        memcpy(buf, r->held_out.data + r->held_off, n);
    r->held_off += n;
    return n;
}
