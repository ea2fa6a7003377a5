/*
 * Reading the audit chain out of the database (store_ops.h): the rows of
 * audit_records one at a time, in seq order or backwards, for the readers
 * in reader.c and backward.c and for verify.
 *
 * A reader takes one pooled connection for its whole life and opens a
 * READ ONLY, REPEATABLE READ transaction on it, so every page it fetches,
 * and the audit_head row, come from one snapshot: appends made meanwhile
 * (one transaction each, head and records together) are either all seen
 * or not at all. Pages go by seq (keyset, so each costs the same wherever
 * it starts) and hold at most PAGE_ROWS rows and about PAGE_BYTES bytes; a
 * line longer than AUDIT_LINE_MAX comes cut at that length with the hash
 * of all its bytes computed by the server, so no row, however large,
 * is held whole. The hash of every other line is computed here from the
 * bytes, as the file reader does.
 */
#include "audit/store_ops.h"
#include "db/pool.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_ROWS  "1000"
#define PAGE_BYTES (4 * 1024 * 1024)

/*
 * $1: the seq the previous page ended at (NULL for the first page); $2:
 * AUDIT_LINE_MAX; $3: PAGE_BYTES; $4: bytes a row must contain (NULL: any
 * row). `before` is what the rows ahead of a row in the page add up to, so
 * a page ends once it passes PAGE_BYTES but always holds its first row.
 * The result comes in binary: the bytes of a line as stored, the numbers
 * as text.
 */
#define PAGE_SQL(cmp, dir)                                                                         \
    "SELECT seq::text, CASE WHEN n <= $2::int THEN line ELSE substring(line FROM 1 FOR $2::int)"   \
    "       END, n::text, CASE WHEN n > $2::int THEN sha256(line) END"                             \
    "  FROM (SELECT seq, line, octet_length(line) AS n,"                                           \
    "               sum(octet_length(line)) OVER (ORDER BY seq " dir ") - octet_length(line)"      \
    "                 AS before"                                                                   \
    "          FROM audit_records WHERE ($1::bigint IS NULL OR seq " cmp " $1::bigint)"            \
    "           AND ($4::bytea IS NULL OR position($4::bytea IN line) > 0)"                        \
    "         ORDER BY seq " dir " LIMIT " PAGE_ROWS ") AS page"                                   \
    " WHERE before < $3::bigint ORDER BY page.seq " dir

struct audit_pg_read {
    db_pool *db;
    PGconn *c;
    int backward;
    char *needle; /* NULL: every row */
    int started;  /* a row was handed over: last_seq is its seq */
    int done;     /* a page came back empty */
    long long last_seq;
    PGresult *page;
    int row; /* the next row of page to hand over */
};

int audit_pg_read_open(audit_pg_read **out, db_pool *db, int backward, const char *needle,
                       rg_error *err)
{
    audit_pg_read *r;
    int rc;

    *out = NULL;
    if ((r = calloc(1, sizeof(*r))) == NULL ||
        (needle != NULL && (r->needle = strdup(needle)) == NULL)) {
        free(r);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    r->db = db;
    r->backward = backward;
    if ((rc = db_acquire(db, &r->c, err)) < 0) {
        audit_pg_read_free(r);
        return rc;
    }
    if ((rc = db_schema_check(r->c, err)) < 0 ||
        (rc = db_exec(r->c, NULL, "reading the audit log",
                      "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", 0, NULL, err)) < 0) {
        audit_pg_read_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int fetch_page(audit_pg_read *r, rg_error *err)
{
    static const char *const forward_sql = PAGE_SQL(">", "ASC");
    static const char *const backward_sql = PAGE_SQL("<", "DESC");
    char after[32], cap[32], budget[32];
    const char *params[4] = {NULL, cap, budget, r->needle};
    /* The needle goes as binary bytea: its bytes as they are, no escapes. */
    int lengths[4] = {0, 0, 0, r->needle ? (int)strlen(r->needle) : 0}, formats[4] = {0, 0, 0, 1};

    PQclear(r->page);
    r->page = NULL;
    r->row = 0;
    if (r->started) {
        snprintf(after, sizeof(after), "%lld", r->last_seq);
        params[0] = after;
    }
    snprintf(cap, sizeof(cap), "%d", AUDIT_LINE_MAX);
    snprintf(budget, sizeof(budget), "%d", PAGE_BYTES);
    return db_query_bin(r->c, &r->page, "reading the audit log",
                        r->backward ? backward_sql : forward_sql, 4, params, lengths, formats, err);
}

int audit_pg_read_next(audit_pg_read *r, audit_pg_row *out, rg_error *err)
{
    unsigned int mdlen = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if (r->done)
        return 0;
    if (r->page == NULL || r->row >= PQntuples(r->page)) {
        if ((rc = fetch_page(r, err)) < 0) {
            PQclear(r->page);
            r->page = NULL;
            return rc;
        }
        if (PQntuples(r->page) == 0) {
            r->done = 1;
            return 0;
        }
    }
    /* libpq ends every value, binary too, with a NUL: the line is handed
     * over in place, valid until the next page replaces it. */
    out->data = PQgetvalue(r->page, r->row, 1);
    out->len = (size_t)PQgetlength(r->page, r->row, 1);
    out->seq = strtoull(PQgetvalue(r->page, r->row, 0), NULL, 10);
    out->full_len = strtoull(PQgetvalue(r->page, r->row, 2), NULL, 10);
    if (!PQgetisnull(r->page, r->row, 3)) {
        /* Cut: the server hashed all of it. */
        if (PQgetlength(r->page, r->row, 3) != AUDIT_HASH_LEN)
            return rg_error_set(err, -EIO, "reading the audit log: a bad hash from the database");
        memcpy(out->sha256, PQgetvalue(r->page, r->row, 3), AUDIT_HASH_LEN);
    } else if (EVP_Digest(out->data, out->len, out->sha256, &mdlen, EVP_sha256(), NULL) != 1 ||
               mdlen != AUDIT_HASH_LEN) {
        return rg_error_set(err, -EIO, "SHA-256 failed");
    }
    r->last_seq = (long long)out->seq;
    r->started = 1;
    r->row++;
    return 1;
}

int audit_pg_read_head(audit_pg_read *r, uint64_t *seq, char hash_hex[AUDIT_HASH_HEX + 1],
                       rg_error *err)
{
    PGresult *res = NULL;
    const char *hash;
    int rc;

    rc = db_exec(r->c, &res, "reading the audit head", "SELECT seq, hash FROM audit_head", 0, NULL,
                 err);
    if (rc == 0 && PQntuples(res) != 1)
        rc = rg_error_set(err, RG_E_STATE, "the database has no audit_head row");
    if (rc == 0) {
        *seq = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        hash = PQgetvalue(res, 0, 1);
        /* Not a hash at all: kept so that it matches no line. */
        snprintf(hash_hex, AUDIT_HASH_HEX + 1, "%s",
                 strlen(hash) == AUDIT_HASH_HEX ? hash : "(not a SHA-256 hex)");
    }
    PQclear(res);
    return rc;
}

void audit_pg_read_free(audit_pg_read *r)
{
    if (r == NULL)
        return;
    PQclear(r->page);
    free(r->needle);
    if (r->c != NULL) {
        db_rollback(r->c);
        db_release(r->db, r->c);
    }
    free(r);
}
