/*
 * Moving a file log into the database (audit_pg_import, for `refgate db
 * import`): the chain must arrive intact, so every line goes in as its
 * exact bytes, in one transaction, into a database chain that is still
 * empty, and only from a file that verifies. The file is locked like a
 * writer would lock it, so no gateway appends to it meanwhile.
 */
#include "audit/store_ops.h"
#include "db/pool.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* Lines per INSERT: a round trip per batch, a bounded statement size. */
#define IMPORT_BATCH 500

/* The text of an array of IMPORT_BATCH elements of at most `each` bytes. */
#define ARRAY_MAX(each) (IMPORT_BATCH * ((each) + 1) + 2)

typedef struct batch {
    rg_buf seqs, lines, kinds, dseqs, pend;
    size_t n;
} batch;

static void batch_reset(batch *b)
{
    rg_buf_reset(&b->seqs);
    rg_buf_reset(&b->lines);
    rg_buf_reset(&b->kinds);
    rg_buf_reset(&b->dseqs);
    rg_buf_reset(&b->pend);
    b->n = 0;
}

static void batch_free(batch *b)
{
    rg_buf_free(&b->seqs);
    rg_buf_free(&b->lines);
    rg_buf_free(&b->kinds);
    rg_buf_free(&b->dseqs);
    rg_buf_free(&b->pend);
}

/* Add line l (seq `seq`) to the batch as arrays of text, hex for its bytes. */
static int batch_add(batch *b, const audit_line *l, uint64_t seq)
{
    const char *sep = b->n ? "," : "{", *kind = "other";
    uint64_t dseq = 0;
    int version = 0, pending = 0, rc;
    json_t *root, *v;
    char *hex;

    root = json_loadb(l->data, l->len, 0, NULL);
    switch (audit_json_kind(&version, root)) {
    case AUDIT_DECISION:
        kind = "decision";
        /* A v2 decision forwarded and not yet completed; its outcome,
         * when a later line has one, clears this after the insert. */
        pending = version == 2 && json_is_null(json_object_get(root, "outcome"));
        break;
    case AUDIT_OUTCOME:
        kind = "outcome";
        v = json_object_get(root, "decision_seq");
        if (json_is_integer(v) && json_integer_value(v) > 0)
            dseq = (uint64_t)json_integer_value(v);
        break;
    case AUDIT_EVENT:
        kind = "event";
        break;
    }
    json_decref(root);
    hex = malloc(2 * l->len + 1);
    if (hex == NULL)
        return -ENOMEM;
    rg_hex_encode(hex, (const unsigned char *)l->data, l->len);
    rc = rg_buf_printf(&b->seqs, "%s%" PRIu64, sep, seq) |
         rg_buf_printf(&b->lines, "%s%s", sep, hex) | rg_buf_printf(&b->kinds, "%s%s", sep, kind) |
         rg_buf_printf(&b->pend, "%s%s", sep, pending ? "t" : "f");
    rc |= dseq ? rg_buf_printf(&b->dseqs, "%s%" PRIu64, sep, dseq)
               : rg_buf_printf(&b->dseqs, "%sNULL", sep);
    free(hex);
    b->n++;
    return rc ? -ENOMEM : 0;
}

static int batch_flush(batch *b, PGconn *c, rg_error *err)
{
    const char *params[5];
    int rc;

    if (b->n == 0)
        return 0;
    if ((rg_buf_puts(&b->seqs, "}") | rg_buf_puts(&b->lines, "}") | rg_buf_puts(&b->kinds, "}") |
         rg_buf_puts(&b->dseqs, "}") | rg_buf_puts(&b->pend, "}")) != 0)
        return rg_error_set(err, -ENOMEM, "out of memory");
    params[0] = b->seqs.data;
    params[1] = b->lines.data;
    params[2] = b->kinds.data;
    params[3] = b->dseqs.data;
    params[4] = b->pend.data;
    rc = db_exec(c, NULL, "importing audit records",
                 "INSERT INTO audit_records (seq, line, kind, gateway, decision_seq, pending)"
                 " SELECT t.s, decode(t.l, 'hex'), t.k, NULL, t.d, t.p"
                 " FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::boolean[])"
                 " AS t(s, l, k, d, p)",
                 5, params, err);
    batch_reset(b);
    return rc;
}

/* The database chain must be empty: nothing appended, no record stored. */
static int check_empty(PGconn *c, rg_error *err)
{
    PGresult *r = NULL;
    int rc;

    rc = db_exec(c, &r, "reading the audit chain's head",
                 "SELECT h.seq, (SELECT count(*) FROM audit_records)"
                 " FROM audit_head h FOR UPDATE OF h",
                 0, NULL, err);
    if (rc == 0 && PQntuples(r) != 1)
        rc = rg_error_set(err, RG_E_STATE, "the audit chain's head row is missing");
    else if (rc == 0 && (strcmp(PQgetvalue(r, 0, 0), "0") || strcmp(PQgetvalue(r, 0, 1), "0")))
        rc = rg_error_set(err, RG_E_STATE,
                          "the database's audit chain is not empty (head at seq %s, %s records): "
                          "a file log is imported only into an empty chain",
                          PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
    PQclear(r);
    return rc;
}

/* Copy every line of the open reader, then set pending and the head. */
static int copy_lines(audit_import_result *out, PGconn *c, audit_reader *rd, rg_error *err)
{
    batch b = {.seqs = RG_BUF_INIT(ARRAY_MAX(24)),
               .lines = RG_BUF_INIT(ARRAY_MAX(2 * (size_t)AUDIT_LINE_MAX)),
               .kinds = RG_BUF_INIT(ARRAY_MAX(24)),
               .dseqs = RG_BUF_INIT(ARRAY_MAX(24)),
               .pend = RG_BUF_INIT(ARRAY_MAX(24))};
    char seq[24], *params[2] = {seq, out->head_hash};
    PGresult *r = NULL;
    audit_line l;
    int rc;

    /* Bounded by the file, which verified: every line is whole and in seq order. */
    while ((rc = audit_reader_next(rd, &l, err)) == 1) {
        rc = batch_add(&b, &l, l.number);
        if (rc < 0) {
            rc = rg_error_set(err, rc, "out of memory");
            goto done;
        }
        out->records = l.number;
        rg_hex_encode(out->head_hash, l.sha256, AUDIT_HASH_LEN);
        if (b.n == IMPORT_BATCH && (rc = batch_flush(&b, c, err)) < 0)
            goto done;
    }
    if (rc < 0 || (rc = batch_flush(&b, c, err)) < 0)
        goto done;
    rc = db_exec(c, &r, "marking pending decisions",
                 "UPDATE audit_records SET pending = false WHERE pending AND seq IN"
                 " (SELECT decision_seq FROM audit_records WHERE decision_seq IS NOT NULL)",
                 0, NULL, err);
    PQclear(r);
    r = NULL;
    if (rc == 0)
        rc = db_exec(c, &r, "counting pending decisions",
                     "SELECT count(*) FROM audit_records WHERE pending", 0, NULL, err);
    if (rc == 0)
        out->pending = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    snprintf(seq, sizeof(seq), "%" PRIu64, out->records);
    if (rc == 0)
        rc = db_exec(c, NULL, "setting the audit chain's head",
                     "UPDATE audit_head SET seq = $1::bigint, hash = $2", 2,
                     (const char *const *)params, err);
done:
    PQclear(r);
    batch_free(&b);
    return rc;
}

int audit_pg_import(audit_import_result *out, db_pool *db, const char *path, rg_error *err)
{
    const audit_source file = {.path = path, .db = NULL};
    audit_verify_result v;
    audit_reader *rd = NULL;
    PGconn *c = NULL;
    int fd = -1, rc;

    memset(out, 0, sizeof(*out));
    memcpy(out->head_hash, AUDIT_ZERO_HASH, sizeof(out->head_hash));
    /* A gateway writing to it holds this lock: the log must stand still. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK
                 ? rg_error_set(err, -EBUSY, "%s: a gateway is writing to it; stop it first", path)
                 : rg_error_set(err, -errno, "%s: lock: %s", path, strerror(errno));
        goto done;
    }
    if ((rc = audit_verify(&v, &file, err)) < 0)
        goto done;
    if (v.bad_line != 0) {
        rc = rg_error_set(err, RG_E_TAMPER,
                          "%s does not verify (line %" PRIu64 ": %s): not imported", path,
                          v.bad_line, v.why);
        goto done;
    }
    if ((rc = audit_reader_open(&rd, &file, err)) < 0)
        goto done;
    if ((rc = db_acquire(db, &c, err)) < 0)
        goto done;
    if ((rc = db_begin(c, err)) == 0 && (rc = check_empty(c, err)) == 0 &&
        (rc = copy_lines(out, c, rd, err)) == 0)
        rc = db_commit(c, err);
    db_rollback(c);
    db_release(db, c);
done:
    audit_reader_free(rd);
    close(fd);
    return rc;
}
