/*
 * The PostgreSQL store: one audit chain for every gateway of a team, in
 * the tables audit_head (one row: the last seq and its line's hash) and
 * audit_records (one row per record: its seq, the exact bytes of its line
 * without the newline, its kind, the gateway that wrote it, the decision
 * an outcome names, and whether a decision still waits for its outcome).
 *
 * Every append is one transaction that first locks the head row (SELECT
 * ... FOR UPDATE): that lock is where the appends of all gateways
 * serialise, so seq comes from the head row (never a SEQUENCE, which would
 * leave gaps on rollback) and each record chains onto the line committed
 * just before it. Lines are made by audit_record_line, the same bytes the
 * file store writes, so a chain moves between stores intact (`refgate db
 * import`). COMMIT returns once the records are durable (synchronous_commit,
 * PostgreSQL's default, must stay on), so a decision is in the database
 * before anything is forwarded. Any failure rolls the whole batch back:
 * nothing is half-written, and the next call simply tries again on a fresh
 * connection once the database is back.
 *
 * Decisions left pending by a gateway that died (db/lease.h) are completed
 * by a live gateway, inside the same head-locked transaction that finds
 * them, so two gateways never complete one record twice; a sweep first
 * looks without the lock and takes it only when there is something to
 * complete. An outcome retried after a failed append is written only if
 * its decision is still pending, checked under the same lock.
 */
#include "audit/store_ops.h"
#include "db/lease.h"
#include "util/text.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Connections tried before giving up: every stale one in the pool, and a new one. */
#define BEGIN_TRIES (CONFIG_STATE_CONNECTIONS_MAX + 1)

/* Pending decisions completed per transaction; a larger backlog takes several. */
#define COMPLETE_BATCH 1000

typedef struct audit_pg {
    audit_log base; /* first: audit_log * and audit_pg * convert */
    db_pool *db;    /* borrowed */
    char *gateway;  /* this gateway's id, written with each record */
} audit_pg;

/* ------------------------------------------------------------------------
 * Appending
 * ------------------------------------------------------------------------ */

/* A failure of the database (not a malformed record): say it is the audit log's. */
static int db_failed(int rc, rg_error *err)
{
    if (rc == RG_E_STATE)
        rg_error_wrap(err, "the audit log's database");
    return rc;
}

/*
 * A connection of the pool inside a new transaction. A pooled connection
 * whose server went away (a restart) still looks connected until it is
 * used: BEGIN on it fails having changed nothing, so it is dropped and the
 * next one tried, and the first append after the database returns works.
 */
static int acquire_begin(audit_pg *g, PGconn **out, rg_error *err)
{
    PGconn *c;
    int rc = 0, lost;

    /* Bounded: each failed try closes the connection it used. */
    for (int i = 0; i < BEGIN_TRIES; i++) {
        if ((rc = db_acquire(g->db, &c, err)) < 0)
            return rc;
        if ((rc = db_begin(c, err)) == 0) {
            *out = c;
            return 0;
        }
        lost = PQstatus(c) != CONNECTION_OK;
        db_release(g->db, c);
        if (!lost)
            break;
    }
    return rc;
}

static void release(audit_pg *g, PGconn *c)
{
    db_rollback(c);
    db_release(g->db, c);
}

/* Take the head row's lock (the serialisation point) and read where the chain stands. */
static int lock_head(PGconn *c, uint64_t *seq, char prev[AUDIT_HASH_HEX + 1], rg_error *err)
{
    PGresult *r = NULL;
    int rc;

    rc = db_exec(c, &r, "locking the audit chain's head",
                 "SELECT seq, hash FROM audit_head FOR UPDATE", 0, NULL, err);
    if (rc == 0 && (PQntuples(r) != 1 || strlen(PQgetvalue(r, 0, 1)) != AUDIT_HASH_HEX))
        rc = rg_error_set(err, RG_E_STATE, "the audit chain's head row is missing or damaged");
    if (rc == 0) {
        *seq = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
        memcpy(prev, PQgetvalue(r, 0, 1), AUDIT_HASH_HEX + 1);
    }
    PQclear(r);
    return rc;
}

/* Whether an outcome among recs[0..n) names `seq`. */
static int completed_in_batch(const audit_record *recs, size_t n, uint64_t seq)
{
    for (size_t i = 0; i < n; i++)
        if (recs[i].kind == AUDIT_OUTCOME && recs[i].decision_seq == seq)
            return 1;
    return 0;
}

static const char *kind_text(audit_kind k)
{
    return k == AUDIT_DECISION ? "decision" : k == AUDIT_OUTCOME ? "outcome" : "event";
}

/*
 * Append recs as the records after *seq / prev, inside an open transaction
 * that holds the head row's lock; on success *seq and prev are the new
 * head. One statement writes the rows, clears `pending` of the decisions
 * the batch's outcomes complete, and moves the head.
 */
static int append_locked(audit_pg *g, PGconn *c, const audit_record *recs, size_t n, uint64_t *seq,
                         char prev[AUDIT_HASH_HEX + 1], rg_error *err)
{
    /* Arrays of n elements: lines in hex, the rest at most 21 digits each. */
    rg_buf line = RG_BUF_INIT(AUDIT_LINE_MAX + 1),
           lines = RG_BUF_INIT(n * (2 * (size_t)AUDIT_LINE_MAX + 1) + 2),
           kinds = RG_BUF_INIT(n * 24 + 2), dseqs = RG_BUF_INIT(n * 24 + 2),
           pend = RG_BUF_INIT(n * 24 + 2), done = RG_BUF_INIT(n * 24 + 2);
    char now[AUDIT_TIME_LEN], base[24], head[24], *hex = NULL;
    uint64_t s = *seq;
    int rc = 0;

    audit_time_now(now);
    rc = rg_buf_puts(&lines, "{") | rg_buf_puts(&kinds, "{") | rg_buf_puts(&dseqs, "{") |
         rg_buf_puts(&pend, "{") | rg_buf_puts(&done, "{");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const audit_record *r = &recs[i];
        const char *sep = i ? "," : "";

        rc = audit_record_check(r, ++s, err);
        if (rc < 0) {
            rg_error_wrap(err, "record %zu", i + 1);
            goto done;
        }
        rg_buf_reset(&line);
        rc = audit_record_line(&line, r, now, s, prev);
        if (rc < 0) {
            rg_error_set(err, rc, "cannot write record %zu: %s", i + 1,
                         rc == RG_E_TOO_BIG ? "too large" : strerror(-rc));
            goto done;
        }
        /* Without its newline, hex-encoded: an array of text needs no quoting then. */
        free(hex);
        hex = malloc(2 * (line.len - 1) + 1);
        if (hex == NULL) {
            rc = -ENOMEM;
            break;
        }
        rg_hex_encode(hex, (const unsigned char *)line.data, line.len - 1);
        rc = rg_buf_printf(&lines, "%s%s", sep, hex) |
             rg_buf_printf(&kinds, "%s%s", sep, kind_text(r->kind));
        if (r->kind == AUDIT_OUTCOME)
            rc |= rg_buf_printf(&dseqs, "%s%" PRIu64, sep, r->decision_seq) |
                  rg_buf_printf(&done, "%s%" PRIu64, done.len > 1 ? "," : "", r->decision_seq);
        else
            rc |= rg_buf_printf(&dseqs, "%sNULL", sep);
        rc |= rg_buf_printf(&pend, "%s%s", sep,
                            r->kind == AUDIT_DECISION && r->outcome == NULL &&
                                    !completed_in_batch(recs + i + 1, n - i - 1, s)
                                ? "t"
                                : "f");
    }
    if (rc == 0)
        rc = rg_buf_puts(&lines, "}") | rg_buf_puts(&kinds, "}") | rg_buf_puts(&dseqs, "}") |
             rg_buf_puts(&pend, "}") | rg_buf_puts(&done, "}");
    if (rc != 0) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    snprintf(base, sizeof(base), "%" PRIu64, *seq);
    snprintf(head, sizeof(head), "%" PRIu64, s);
    {
        const char *params[9] = {base,      g->gateway, lines.data, kinds.data, dseqs.data,
                                 pend.data, done.data,  head,       prev};

        /* Data-modifying CTEs see one snapshot: the UPDATE of pending never
         * sees the rows inserted beside it, which is why a decision whose
         * outcome is in the same batch is inserted complete. */
        rc = db_exec(c, NULL, "writing audit records",
                     "WITH ins AS ("
                     "  INSERT INTO audit_records (seq, line, kind, gateway, decision_seq, pending)"
                     "  SELECT $1::bigint + t.o, decode(t.l, 'hex'), t.k, $2, t.d, t.p"
                     "  FROM unnest($3::text[], $4::text[], $5::bigint[], $6::boolean[])"
                     "    WITH ORDINALITY AS t(l, k, d, p, o)),"
                     " clr AS ("
                     "  UPDATE audit_records SET pending = false"
                     "  WHERE pending AND seq = ANY($7::bigint[]))"
                     "UPDATE audit_head SET seq = $8::bigint, hash = $9",
                     9, params, err);
    }
    if (rc == 0)
        *seq = s;
done:
    free(hex);
    rg_buf_free(&line);
    rg_buf_free(&lines);
    rg_buf_free(&kinds);
    rg_buf_free(&dseqs);
    rg_buf_free(&pend);
    rg_buf_free(&done);
    return rc;
}

static int pg_append_many(audit_log *log, const audit_record *recs, size_t n, uint64_t *first_seq,
                          rg_error *err)
{
    audit_pg *g = (audit_pg *)log;
    char prev[AUDIT_HASH_HEX + 1];
    uint64_t seq = 0, first;
    PGconn *c;
    int rc;

    if ((rc = acquire_begin(g, &c, err)) < 0)
        return db_failed(rc, err);
    if ((rc = lock_head(c, &seq, prev, err)) == 0) {
        first = seq + 1;
        rc = append_locked(g, c, recs, n, &seq, prev, err);
        if (rc == 0)
            rc = db_commit(c, err);
        if (rc == 0 && first_seq != NULL)
            *first_seq = first;
    }
    release(g, c);
    return db_failed(rc, err);
}

/*
 * The outcomes of recs whose decisions are still pending, checked under
 * the head lock held on c: a decision completed by an earlier try (its
 * COMMIT landed, the answer was lost) or by another gateway's sweep is no
 * longer pending, and no one can complete it between this check and the
 * COMMIT that follows. *keep gets them, in order; *nkeep how many.
 */
static int still_pending(PGconn *c, const audit_record *recs, size_t n, audit_record *keep,
                         size_t *nkeep, rg_error *err)
{
    rg_buf seqs = RG_BUF_INIT(n * 24 + 2);
    const char *params[1];
    PGresult *r = NULL;
    size_t rows = 0;
    uint64_t *open = NULL;
    int rc;

    *nkeep = 0;
    rc = rg_buf_puts(&seqs, "{");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = rg_buf_printf(&seqs, "%s%" PRIu64, i ? "," : "", recs[i].decision_seq);
    if (rc == 0)
        rc = rg_buf_puts(&seqs, "}");
    if (rc != 0) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    params[0] = seqs.data;
    rc = db_exec(c, &r, "looking for the decisions still pending",
                 "SELECT seq FROM audit_records WHERE pending AND seq = ANY($1::bigint[])", 1,
                 params, err);
    if (rc < 0)
        goto done;
    rows = (size_t)PQntuples(r);
    open = calloc(rows ? rows : 1, sizeof(*open));
    if (open == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t j = 0; j < rows; j++)
        open[j] = strtoull(PQgetvalue(r, (int)j, 0), NULL, 10);
    /* Bounded: n records against at most n rows. A decision is taken once,
     * so a second outcome for it in the same batch is passed over too. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < rows; j++)
            if (open[j] == recs[i].decision_seq) {
                open[j] = 0;
                keep[(*nkeep)++] = recs[i];
                break;
            }
done:
    free(open);
    PQclear(r);
    rg_buf_free(&seqs);
    return rc;
}

static int pg_append_outcomes(audit_log *log, const audit_record *recs, size_t n, size_t *appended,
                              rg_error *err)
{
    audit_pg *g = (audit_pg *)log;
    char prev[AUDIT_HASH_HEX + 1];
    audit_record *keep;
    size_t nkeep = 0;
    uint64_t seq = 0;
    PGconn *c;
    int rc;

    keep = calloc(n, sizeof(*keep));
    if (keep == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if ((rc = acquire_begin(g, &c, err)) < 0)
        goto done;
    rc = lock_head(c, &seq, prev, err);
    if (rc == 0)
        rc = still_pending(c, recs, n, keep, &nkeep, err);
    if (rc == 0 && nkeep > 0 && (rc = append_locked(g, c, keep, nkeep, &seq, prev, err)) == 0)
        rc = db_commit(c, err);
    if (rc == 0)
        *appended = nkeep;
    release(g, c);
done:
    free(keep);
    return db_failed(rc, err);
}

/* ------------------------------------------------------------------------
 * Ready, head
 * ------------------------------------------------------------------------ */

static int pg_ready(audit_log *log, size_t nbytes, rg_error *err)
{
    audit_pg *g = (audit_pg *)log;
    PGconn *c;
    int rc;

    /* The database's free space is its operator's to watch: what can be
     * known here is whether it answers now. */
    (void)nbytes;
    if ((rc = acquire_begin(g, &c, err)) == 0) {
        rc = db_exec(c, NULL, "reading the audit chain's head", "SELECT seq FROM audit_head", 0,
                     NULL, err);
        release(g, c);
    }
    if (rc < 0)
        rg_error_wrap(err, "the audit log's database cannot be reached");
    return rc;
}

static int pg_head(audit_log *log, uint64_t *seq, char hash_hex[AUDIT_HASH_HEX + 1], rg_error *err)
{
    audit_pg *g = (audit_pg *)log;
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    if ((rc = acquire_begin(g, &c, err)) < 0)
        return db_failed(rc, err);
    rc = db_exec(c, &r, "reading the audit chain's head", "SELECT seq, hash FROM audit_head", 0,
                 NULL, err);
    if (rc == 0 && (PQntuples(r) != 1 || strlen(PQgetvalue(r, 0, 1)) != AUDIT_HASH_HEX))
        rc = rg_error_set(err, RG_E_STATE, "the audit chain's head row is missing or damaged");
    if (rc == 0) {
        *seq = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
        memcpy(hash_hex, PQgetvalue(r, 0, 1), AUDIT_HASH_HEX + 1);
    }
    PQclear(r);
    release(g, c);
    return db_failed(rc, err);
}

/* ------------------------------------------------------------------------
 * Completing what dead gateways left pending
 * ------------------------------------------------------------------------ */

typedef struct orphan {
    uint64_t seq;
    char *gateway; /* NULL: imported from a file log */
    char *push_id, *repo, *ref;
    char outcome[200];
} orphan;

static char *json_field_dup(const json_t *root, const char *key)
{
    const char *v = json_string_value(json_object_get(root, key));

    return v ? strdup(v) : NULL;
}

/* Row i of (seq, gateway, line) into *o; the line's bytes as the decision wrote them. */
static void orphan_load(orphan *o, const PGresult *r, int i, const char *me)
{
    size_t len = 0;
    unsigned char *line;
    json_t *root = NULL;

    memset(o, 0, sizeof(*o));
    o->seq = strtoull(PQgetvalue(r, i, 0), NULL, 10);
    o->gateway = PQgetisnull(r, i, 1) ? NULL : strdup(PQgetvalue(r, i, 1));
    line = PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, 2), &len);
    if (line != NULL)
        root = json_loadb((const char *)line, len, 0, NULL);
    PQfreemem(line);
    o->push_id = json_field_dup(root, "push_id");
    o->repo = json_field_dup(root, "repo");
    o->ref = json_field_dup(root, "ref");
    json_decref(root);
    if (o->gateway != NULL)
        snprintf(o->outcome, sizeof(o->outcome),
                 "unknown: gateway %s stopped before upstream answered (completed by gateway %s)",
                 o->gateway, me);
    else
        snprintf(o->outcome, sizeof(o->outcome),
                 "unknown: the gateway of the imported file log stopped before upstream "
                 "answered (completed by gateway %s)",
                 me);
}

static void orphans_free(orphan *list, size_t n)
{
    for (size_t i = 0; list != NULL && i < n; i++) {
        free(list[i].gateway);
        free(list[i].push_id);
        free(list[i].repo);
        free(list[i].ref);
    }
    free(list);
}

static int same_gateway(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && !strcmp(a, b));
}

/*
 * In the transaction open on c: lock the head, find up to COMPLETE_BATCH
 * decisions pending for dead gateways, and append an outcome for each plus
 * one "recovered" event per dead gateway (per batch: a backlog larger than
 * a batch gets one event per batch). *done gets how many were completed.
 */
static int complete_batch(audit_pg *g, PGconn *c, size_t *done, rg_error *err)
{
    const char *params[1] = {g->gateway};
    char prev[AUDIT_HASH_HEX + 1], (*details)[240] = NULL;
    audit_record *recs = NULL;
    orphan *list = NULL;
    PGresult *r = NULL;
    size_t n = 0, nrec = 0, from;
    uint64_t seq;
    int rc;

    *done = 0;
    /* A look without the lock first: nearly every sweep finds nothing, and
     * taking the head lock for nothing would queue it behind every append
     * of every gateway. What it finds is looked for again under the lock. */
    rc = db_exec(c, &r, "looking for pending decisions of dead gateways",
                 "SELECT 1 FROM audit_records WHERE pending AND gateway IS DISTINCT FROM $1"
                 " AND " DB_LEASE_DEAD_SQL("gateway") " LIMIT 1",
                 1, params, err);
    if (rc < 0 || PQntuples(r) == 0)
        goto done;
    PQclear(r);
    r = NULL;
    if ((rc = lock_head(c, &seq, prev, err)) < 0)
        goto done;
    /* Under the head lock: a gateway completing the same records waits
     * here, then finds them no longer pending. */
    rc = db_exec(
        c, &r, "looking for pending decisions of dead gateways",
        "SELECT seq, gateway, line FROM audit_records"
        " WHERE pending AND gateway IS DISTINCT FROM $1 AND " DB_LEASE_DEAD_SQL(
            "gateway") " ORDER BY gateway NULLS FIRST, seq LIMIT " DB_LEASE_STR(COMPLETE_BATCH),
        1, params, err);
    if (rc < 0 || (n = (size_t)PQntuples(r)) == 0)
        goto done;
    list = calloc(n, sizeof(*list));
    recs = calloc(2 * n, sizeof(*recs));
    details = calloc(n, sizeof(*details));
    if (list == NULL || recs == NULL || details == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        orphan_load(&list[i], r, (int)i, g->gateway);
    /* Each dead gateway's outcomes, then its recovered event. */
    for (size_t i = 0; i < n; i = from) {
        for (from = i; from < n && same_gateway(list[from].gateway, list[i].gateway); from++)
            recs[nrec++] = (audit_record){.kind = AUDIT_OUTCOME,
                                          .push_id = list[from].push_id,
                                          .repo = list[from].repo,
                                          .ref = list[from].ref,
                                          .decision_seq = list[from].seq,
                                          .outcome = list[from].outcome};
        snprintf(details[i], sizeof(details[i]),
                 "%s%s %s %zu forwarded ref update%s without an outcome; completed as unknown "
                 "by gateway %s",
                 list[i].gateway ? "gateway " : "the imported file log",
                 list[i].gateway ? list[i].gateway : "", list[i].gateway ? "died with" : "had",
                 from - i, from - i == 1 ? "" : "s", g->gateway);
        recs[nrec++] =
            (audit_record){.kind = AUDIT_EVENT, .event = "recovered", .detail = details[i]};
    }
    if ((rc = append_locked(g, c, recs, nrec, &seq, prev, err)) == 0 &&
        (rc = db_commit(c, err)) == 0)
        *done = n;
done:
    PQclear(r);
    orphans_free(list, n);
    free(recs);
    free(details);
    return rc;
}

static int pg_complete_pending(audit_log *log, size_t *completed, rg_error *err)
{
    audit_pg *g = (audit_pg *)log;
    size_t done = 0;
    PGconn *c;
    int rc;

    *completed = 0;
    /* Bounded: every round completes COMPLETE_BATCH records that stay completed. */
    do {
        if ((rc = acquire_begin(g, &c, err)) < 0)
            break;
        rc = complete_batch(g, c, &done, err);
        release(g, c);
        *completed += done;
    } while (rc == 0 && done == COMPLETE_BATCH);
    return db_failed(rc, err);
}

/* ------------------------------------------------------------------------
 * Opening and closing
 * ------------------------------------------------------------------------ */

static void pg_close(audit_log *log)
{
    audit_pg *g = (audit_pg *)log;

    free(g->gateway);
    free(g);
}

static const audit_store_ops pg_ops = {
    .append_many = pg_append_many,
    .append_outcomes = pg_append_outcomes,
    .ready = pg_ready,
    .head = pg_head,
    .complete_pending = pg_complete_pending,
    .close = pg_close,
};

int audit_pg_open(audit_log **out, db_pool *db, const char *gateway_id, rg_error *err)
{
    audit_pg *g;

    if (out == NULL || db == NULL || gateway_id == NULL || *gateway_id == '\0')
        return rg_error_set(err, -EINVAL, "audit_pg_open: missing argument");
    *out = NULL;
    g = calloc(1, sizeof(*g));
    if (g == NULL || (g->gateway = strdup(gateway_id)) == NULL) {
        free(g);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    g->base.ops = &pg_ops;
    g->db = db;
    *out = &g->base;
    return 0;
}
