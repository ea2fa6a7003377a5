/*
 * The PostgreSQL store of approvals (approvals.h): the approvals every
 * gateway of a team shares, as rows of `approvals` (db/schema.c), kept
 * packs as rows of `approval_packs`.
 *
 * Nothing is cached: every op is one or two statements, each atomic on
 * its own, so any number of gateways (and threads) may call at once.
 * - Rows stay as history: state pending, approved, denied, expired or
 *   consumed; the live ones (pending, approved) are unique per update
 *   (the partial index approvals_live), so two gateways asking for the
 *   same update at once both get the one row INSERT ... ON CONFLICT DO
 *   NOTHING left there. A denied row is found too until it expires.
 * - Expiry is marked, not deleted: a row past `expires` becomes expired
 *   (and loses its pack) when a call sees it; get says -ETIME for it.
 * - A claim is the columns claim (holder) and claim_until on an approved
 *   row, taken by one conditional UPDATE: of several pushes claiming at
 *   once, the database lets exactly one match. Consuming needs the claim,
 *   so an approval is consumed once; a claim never settled lapses.
 * - Kept packs are bytea rows, read into memory to be stored (at most
 *   PG_PACK_MAX each) and read back into a memfd. They are not on this
 *   machine's disk, so the gateway does not charge them to its spool;
 *   pack_total is the sum over the database (every gateway's), which the
 *   gateway caps as it caps local ones.
 * Times are the callers' clocks (bigint Unix seconds), as in the file store.
 */
#include "approvals/store_ops.h"
#include "db/pool.h"
#include "util/fs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#define ID_ALPHABET "abcdefghijklmnopqrstuvwxyz234567"

/* A kept pack goes through memory on its way to and from the database. */
#define PG_PACK_MAX (256ull * 1024 * 1024)

/* Rounds of ask when its row changes under it, and new ids tried on a clash. */
#define ASK_ROUNDS 4

/* States a row can be found in by its update (live, or denied until expiry). */
#define OPEN_STATES "('pending', 'approved', 'denied')"

#define COLS                                                                                       \
    "id, state, repo, ref, old_id, new_id, run, rule, reason, decided_by, note, created, "         \
    "decided, expires, pack_bytes, claim, claim_until"

typedef struct approvals_pg {
    approvals_store base; /* first: approvals_store * and approvals_pg * convert */
    db_pool *db;
    int64_t expire;
} approvals_pg;

static const approvals_store_ops pg_ops;

/* ------------------------------------------------------------------------
 * Rows and texts
 * ------------------------------------------------------------------------ */

/* Whether `s` is UTF-8 (PostgreSQL refuses anything else in text). */
static int utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    /* Bounded: the string's bytes. */
    while (*p) {
        int n = *p < 0x80             ? 0
                : (*p & 0xe0) == 0xc0 ? 1
                : (*p & 0xf0) == 0xe0 ? 2
                : (*p & 0xf8) == 0xf0 ? 3
                                      : -1;
        if (n < 0 || (n == 1 && *p < 0xc2))
            return 0;
        p++;
        for (int i = 0; i < n; i++, p++)
            if ((*p & 0xc0) != 0x80)
                return 0;
    }
    return 1;
}

/* A text for the reviewer, cut to `size` bytes and made UTF-8 ('?' for what is not). */
static void text_copy(char *dst, size_t size, const char *s)
{
    approvals_text_copy(dst, size, s);
    if (!utf8_ok(dst))
        for (char *p = dst; *p; p++)
            if ((unsigned char)*p >= 0x80)
                *p = '?';
}

static void field(char *dst, size_t size, const PGresult *r, int row, int col)
{
    snprintf(dst, size, "%s", PQgetvalue(r, row, col));
}

static int64_t field_i64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* Row `row` of a SELECT of COLS; its state as the database has it in *state (may be NULL). */
static void row_entry(approvals_entry *out, const PGresult *r, int row, char *state, size_t ssize)
{
    const char *st = PQgetvalue(r, row, 1);

    memset(out, 0, sizeof(*out));
    field(out->id, sizeof(out->id), r, row, 0);
    out->state = !strcmp(st, "approved") ? APPROVALS_APPROVED
                 : !strcmp(st, "denied") ? APPROVALS_DENIED
                                         : APPROVALS_PENDING;
    if (state)
        snprintf(state, ssize, "%s", st);
    field(out->repo, sizeof(out->repo), r, row, 2);
    field(out->ref, sizeof(out->ref), r, row, 3);
    field(out->old_id, sizeof(out->old_id), r, row, 4);
    field(out->new_id, sizeof(out->new_id), r, row, 5);
    field(out->run, sizeof(out->run), r, row, 6);
    field(out->rule, sizeof(out->rule), r, row, 7);
    field(out->reason, sizeof(out->reason), r, row, 8);
    field(out->by, sizeof(out->by), r, row, 9);
    field(out->note, sizeof(out->note), r, row, 10);
    out->created = field_i64(r, row, 11);
    out->decided = field_i64(r, row, 12);
    out->expires = field_i64(r, row, 13);
    out->pack_bytes = (uint64_t)field_i64(r, row, 14);
    field(out->claim, sizeof(out->claim), r, row, 15);
    out->claim_until = field_i64(r, row, 16);
}

static void i64_text(char *out, size_t size, int64_t v)
{
    snprintf(out, size, "%" PRId64, v);
}

static int new_id(char out[APPROVALS_ID_LEN + 1], rg_error *err)
{
    unsigned char raw[APPROVALS_ID_LEN];

    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return rg_error_set(err, -EIO, "cannot make an approval id: getrandom: %s",
                            strerror(errno));
    for (size_t i = 0; i < APPROVALS_ID_LEN; i++)
        out[i] = ID_ALPHABET[raw[i] & 31];
    out[APPROVALS_ID_LEN] = '\0';
    return 0;
}

/* ------------------------------------------------------------------------
 * Statements shared by the ops
 * ------------------------------------------------------------------------ */

/* Mark what expired at `now` (claimed rows wait for their claim); *n gets how many. */
static int sweep(PGconn *c, size_t *n, int64_t now, rg_error *err)
{
    char t[24];
    const char *p[1] = {t};
    PGresult *r;
    int rc;

    i64_text(t, sizeof(t), now);
    rc = db_exec(c, &r, "expiring approvals",
                 "WITH x AS (UPDATE approvals SET state = 'expired', pack_bytes = 0, settled = $1"
                 "  WHERE state IN " OPEN_STATES " AND expires <= $1 AND claim_until <= $1"
                 "  RETURNING id),"
                 " d AS (DELETE FROM approval_packs WHERE id IN (SELECT id FROM x))"
                 " SELECT count(*) FROM x",
                 1, p, err);
    if (rc == 0 && n != NULL)
        *n = (size_t)strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return rc;
}

/*
 * Row `id` whatever its state: 1 with *out (and its database state) when
 * there is one, 0 when not, or an error.
 */
static int fetch(PGconn *c, approvals_entry *out, char *state, size_t ssize, const char *id,
                 rg_error *err)
{
    const char *p[1] = {id};
    PGresult *r;
    int rc = db_exec(c, &r, "reading an approval", "SELECT " COLS " FROM approvals WHERE id = $1",
                     1, p, err);

    if (rc == 0 && PQntuples(r) == 1) {
        row_entry(out, r, 0, state, ssize);
        rc = 1;
    }
    PQclear(r);
    return rc;
}

/*
 * The live approval `id` (pending, approved or denied, not expired): 0
 * with *out, -ENOENT, -ETIME (marking it expired), or the database's error.
 */
static int live(PGconn *c, approvals_entry *out, const char *id, int64_t now, rg_error *err)
{
    char state[16];
    int rc = fetch(c, out, state, sizeof(state), id, err);

    if (rc < 0)
        return rc;
    if (rc == 0 || !strcmp(state, "consumed"))
        return rg_error_set(err, -ENOENT, "no approval %s: unknown, already used, or expired", id);
    if (!strcmp(state, "expired") || out->expires <= now) {
        if (strcmp(state, "expired") != 0 && out->claim_until <= now)
            sweep(c, NULL, now, NULL);
        return rg_error_set(err, -ETIME, "approval %s expired", id);
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Ops
 * ------------------------------------------------------------------------ */

/* The open row for `key`, live ones first: 1 with *out, 0 when none, or an error. */
static int find_key(PGconn *c, approvals_entry *out, const approvals_key *key, int64_t now,
                    rg_error *err)
{
    char t[24];
    const char *p[5] = {key->repo, key->ref, key->old_id, key->new_id, t};
    PGresult *r;
    int rc;

    i64_text(t, sizeof(t), now);
    rc = db_exec(c, &r, "looking up an approval",
                 "SELECT " COLS " FROM approvals WHERE repo = $1 AND ref = $2 AND old_id = $3"
                 " AND new_id = $4 AND state IN " OPEN_STATES " AND expires > $5"
                 " ORDER BY state = 'denied', created DESC LIMIT 1",
                 5, p, err);
    if (rc == 0 && PQntuples(r) == 1) {
        row_entry(out, r, 0, NULL, 0);
        rc = 1;
    }
    PQclear(r);
    return rc;
}

static int count_open(PGconn *c, size_t *n, int64_t now, rg_error *err)
{
    char t[24];
    const char *p[1] = {t};
    PGresult *r;
    int rc;

    i64_text(t, sizeof(t), now);
    rc = db_exec(c, &r, "counting approvals",
                 "SELECT count(*) FROM approvals WHERE state IN " OPEN_STATES " AND expires > $1",
                 1, p, err);
    if (rc == 0)
        *n = (size_t)strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return rc;
}

/*
 * A new pending row, unless the update has a live one already (then
 * nothing: 0 with *made 0). A clash of ids is tried again with another.
 */
static int insert_pending(PGconn *c, approvals_entry *out, int *made, const approvals_key *key,
                          const approvals_ask_info *info, int64_t now, int64_t expire,
                          rg_error *err)
{
    char id[APPROVALS_ID_LEN + 1], run[APPROVALS_NAME_MAX], rule[APPROVALS_NAME_MAX],
        reason[APPROVALS_TEXT_MAX], created[24], expires[24];
    const char *p[10] = {id,  key->repo, key->ref, key->old_id, key->new_id,
                         run, rule,      reason,   created,     expires};
    PGresult *r = NULL;
    int rc = 0;

    *made = 0;
    text_copy(run, sizeof(run), info->run);
    text_copy(rule, sizeof(rule), info->rule);
    text_copy(reason, sizeof(reason), info->reason);
    i64_text(created, sizeof(created), now);
    i64_text(expires, sizeof(expires), now + expire);
    /* Bounded: ASK_ROUNDS ids (a clash of 50 random bits is already rare). */
    for (int round = 0; round < ASK_ROUNDS; round++) {
        if ((rc = new_id(id, err)) < 0)
            return rc;
        rc = db_exec(c, &r, "asking for an approval",
                     "INSERT INTO approvals (id, state, repo, ref, old_id, new_id, run, rule,"
                     " reason, created, expires) VALUES ($1, 'pending', $2, $3, $4, $5, $6, $7,"
                     " $8, $9, $10)"
                     " ON CONFLICT (repo, ref, old_id, new_id)"
                     " WHERE state IN ('pending', 'approved') DO NOTHING RETURNING " COLS,
                     10, p, err);
        /* 23505: unique_violation, here only the id's primary key. */
        if (rc < 0 && !strcmp(db_sqlstate(r), "23505")) {
            PQclear(r);
            continue;
        }
        if (rc == 0 && PQntuples(r) == 1) {
            row_entry(out, r, 0, NULL, 0);
            *made = 1;
        }
        PQclear(r);
        return rc;
    }
    return rg_error_set(err, -EIO, "cannot find a free approval id");
}

static int pg_ask(approvals_store *s, approvals_entry *out, int *created, const approvals_key *key,
                  const approvals_ask_info *info, int64_t now, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    PGconn *c;
    size_t n;
    int rc, made = 0;

    if (!utf8_ok(key->repo) || !utf8_ok(key->ref))
        return rg_error_set(err, -EINVAL,
                            "the repo or ref name is not UTF-8: it cannot be approved");
    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    if ((rc = sweep(c, NULL, now, err)) < 0)
        goto done;
    /* Bounded: ASK_ROUNDS; another round only when the row found or
     * inserted changed in between (decided, expired) under a race. */
    for (int round = 0; round < ASK_ROUNDS; round++) {
        if ((rc = find_key(c, out, key, now, err)) != 0)
            goto done;
        if ((rc = count_open(c, &n, now, err)) < 0)
            goto done;
        if (n >= APPROVALS_LIVE_MAX) {
            rc = rg_error_set(err, -ENOSPC,
                              "%d approvals are waiting already: decide or let some expire first",
                              APPROVALS_LIVE_MAX);
            goto done;
        }
        if ((rc = insert_pending(c, out, &made, key, info, now, g->expire, err)) < 0 || made)
            goto done;
    }
    rc = rg_error_set(err, -EAGAIN, "the approval of this update kept changing: push again");
done:
    if (rc > 0)
        rc = 0;
    if (rc == 0 && made && created)
        *created = 1;
    db_release(g->db, c);
    return rc;
}

static int pg_get(approvals_store *s, approvals_entry *out, const char *id, int64_t now,
                  rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    PGconn *c;
    int rc;

    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    rc = live(c, out, id, now, err);
    db_release(g->db, c);
    return rc;
}

static int pg_list(approvals_store *s, approvals_entry **out, size_t *n, int64_t now, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    char t[24], max[16];
    const char *p[2] = {t, max};
    PGresult *r = NULL;
    PGconn *c;
    int rc, rows;

    i64_text(t, sizeof(t), now);
    i64_text(max, sizeof(max), APPROVALS_LIVE_MAX);
    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    if ((rc = sweep(c, NULL, now, err)) < 0 ||
        (rc = db_exec(c, &r, "listing approvals",
                      "SELECT " COLS " FROM approvals WHERE state IN " OPEN_STATES
                      " AND expires > $1 ORDER BY created, id LIMIT $2",
                      2, p, err)) < 0)
        goto done;
    rows = PQntuples(r);
    if (rows > 0) {
        *out = calloc((size_t)rows, sizeof(**out));
        if (*out == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < rows; i++)
            row_entry(&(*out)[i], r, i, NULL, 0);
        *n = (size_t)rows;
    }
done:
    PQclear(r);
    db_release(g->db, c);
    return rc;
}

static int pg_decide(approvals_store *s, approvals_entry *out, const char *id, int deny,
                     const char *by, const char *note, int64_t now, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    char who[APPROVALS_NAME_MAX], why[APPROVALS_TEXT_MAX], t[24], exp[24];
    const char *p[6] = {id, deny ? "denied" : "approved", who, why, t, exp};
    approvals_entry e;
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    text_copy(who, sizeof(who), by);
    text_copy(why, sizeof(why), deny ? note : NULL);
    i64_text(t, sizeof(t), now);
    i64_text(exp, sizeof(exp), now + g->expire);
    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    /* Approving is for pending ones; denying also revokes an approval. A
     * denial drops the kept pack in the same statement. */
    rc = db_exec(c, &r, "deciding an approval",
                 "WITH u AS (UPDATE approvals SET state = $2, decided_by = $3, note = $4,"
                 "  decided = $5, expires = $6,"
                 "  pack_bytes = CASE WHEN $2 = 'denied' THEN 0 ELSE pack_bytes END"
                 "  WHERE id = $1 AND expires > $5"
                 "  AND (state = 'pending' OR ($2 = 'denied' AND state = 'approved'))"
                 "  RETURNING " COLS "),"
                 " d AS (DELETE FROM approval_packs WHERE $2 = 'denied'"
                 "  AND id IN (SELECT id FROM u))"
                 " SELECT * FROM u",
                 6, p, err);
    if (rc < 0)
        goto done;
    if (PQntuples(r) == 1) {
        row_entry(&e, r, 0, NULL, 0);
        if (out)
            *out = e;
        goto done;
    }
    /* Nothing matched: say why, as the file store does. */
    if ((rc = live(c, &e, id, now, err)) == 0)
        rc = rg_error_set(err, -EALREADY, "approval %s is already %s by %s", id,
                          approvals_state_name(e.state), e.by[0] ? e.by : "someone");
done:
    PQclear(r);
    db_release(g->db, c);
    return rc;
}

static int pg_claim(approvals_store *s, approvals_entry *out, const char *id,
                    const approvals_key *key, const char *holder, int64_t now, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    char t[24], until[24];
    const char *p[8] = {id, key->repo, key->ref, key->old_id, key->new_id, holder, t, until};
    approvals_entry e;
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    i64_text(t, sizeof(t), now);
    i64_text(until, sizeof(until), now + APPROVALS_CLAIM_SECONDS);
    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    /* One statement: of claims at once, the row lock lets one match and
     * the others re-check a row that has a claim by then. */
    rc = db_exec(c, &r, "claiming an approval",
                 "UPDATE approvals SET claim = $6, claim_until = $8"
                 " WHERE id = $1 AND state = 'approved' AND repo = $2 AND ref = $3"
                 " AND old_id = $4 AND new_id = $5 AND expires > $7"
                 " AND (claim = '' OR claim = $6 OR claim_until <= $7) RETURNING " COLS,
                 8, p, err);
    if (rc < 0)
        goto done;
    if (PQntuples(r) == 1) {
        row_entry(out, r, 0, NULL, 0);
        goto done;
    }
    if ((rc = live(c, &e, id, now, err)) < 0)
        goto done;
    if (e.state == APPROVALS_APPROVED && e.claim[0] && e.claim_until > now &&
        !strcmp(e.repo, key->repo) && !strcmp(e.ref, key->ref) && !strcmp(e.old_id, key->old_id) &&
        !strcmp(e.new_id, key->new_id))
        rc = rg_error_set(err, -EBUSY, "approval %s is being used by another push", id);
    else
        rc = rg_error_set(err, -ENOENT, "approval %s is not an approval of this update", id);
done:
    PQclear(r);
    db_release(g->db, c);
    return rc;
}

static int pg_unclaim(approvals_store *s, const char *id, const char *holder, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    const char *p[2] = {id, holder};
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    rc = db_exec(c, &r, "giving back an approval",
                 "UPDATE approvals SET claim = '', claim_until = 0"
                 " WHERE id = $1 AND state = 'approved' AND claim = $2",
                 2, p, err);
    if (rc == 0 && strcmp(PQcmdTuples(r), "1") != 0)
        rc = rg_error_set(err, -ENOENT, "approval %s is not claimed by this push", id);
    PQclear(r);
    db_release(g->db, c);
    return rc;
}

/* The claim is what counts, not the expiry: a claimed approval may expire while its push forwards.
 */
static int pg_consume(approvals_store *s, const char *id, const approvals_key *key,
                      const char *holder, int64_t now, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    char t[24];
    const char *p[7] = {id, key->repo, key->ref, key->old_id, key->new_id, holder, t};
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    i64_text(t, sizeof(t), now);
    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    rc = db_exec(c, &r, "consuming an approval",
                 "WITH u AS (UPDATE approvals SET state = 'consumed', pack_bytes = 0, settled = $7"
                 "  WHERE id = $1 AND state = 'approved' AND repo = $2 AND ref = $3"
                 "  AND old_id = $4 AND new_id = $5 AND claim = $6 RETURNING id),"
                 " d AS (DELETE FROM approval_packs WHERE id IN (SELECT id FROM u))"
                 " SELECT id FROM u",
                 7, p, err);
    if (rc == 0 && PQntuples(r) != 1)
        rc = rg_error_set(err, -ENOENT, "approval %s is not claimed for this update by this push",
                          id);
    PQclear(r);
    db_release(g->db, c);
    return rc;
}

static int pg_expire(approvals_store *s, size_t *removed, int64_t now, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    PGconn *c;
    int rc;

    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    rc = sweep(c, removed, now, err);
    db_release(g->db, c);
    return rc;
}

/* len bytes of fd from offset 0 into a new buffer. */
static int read_pack(char **out, int fd, uint64_t len, rg_error *err)
{
    char *buf = malloc(len);
    uint64_t off = 0;
    ssize_t n;

    *out = NULL;
    if (buf == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    /* Bounded: len bytes, each round at least one or the end. */
    while (off < len) {
        n = pread(fd, buf + off, (size_t)(len - off), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(buf);
            return rg_error_set(err, n < 0 ? -errno : -EIO, "reading the pack to keep: %s",
                                n < 0 ? strerror(errno) : "it ended early");
        }
        off += (uint64_t)n;
    }
    *out = buf;
    return 0;
}

static int pg_keep_pack(approvals_store *s, const char *id, int fd, uint64_t len, int64_t now,
                        rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    char *pack = NULL, bytes[24], t[24];
    const char *p[4] = {id, NULL, bytes, t};
    int lengths[4] = {0, 0, 0, 0}, formats[4] = {0, 1, 0, 0};
    approvals_entry e;
    PGresult *r = NULL;
    PGconn *c = NULL;
    int rc;

    if (len == 0)
        return rg_error_set(err, -EINVAL, "no pack to keep");
    if (len > PG_PACK_MAX)
        return rg_error_set(err, -EFBIG, "a pack kept in the database is at most %llu bytes",
                            (unsigned long long)PG_PACK_MAX);
    if ((rc = read_pack(&pack, fd, len, err)) < 0)
        return rc;
    p[1] = pack;
    lengths[1] = (int)len;
    i64_text(bytes, sizeof(bytes), (int64_t)len);
    i64_text(t, sizeof(t), now);
    if ((rc = db_acquire(g->db, &c, err)) < 0)
        goto done;
    rc = db_exec_bin(c, &r, "keeping a pack",
                     "WITH u AS (UPDATE approvals SET pack_bytes = $3"
                     "  WHERE id = $1 AND state = 'pending' AND pack_bytes = 0 AND expires > $4"
                     "  RETURNING id)"
                     " INSERT INTO approval_packs (id, pack) SELECT id, $2 FROM u RETURNING id",
                     4, p, lengths, formats, err);
    if (rc < 0 || PQntuples(r) == 1)
        goto done;
    if ((rc = live(c, &e, id, now, err)) < 0)
        goto done;
    rc = e.state != APPROVALS_PENDING
             ? rg_error_set(err, -ENOENT, "approval %s is not pending", id)
             : rg_error_set(err, -EEXIST, "approval %s has a kept pack already", id);
done:
    PQclear(r);
    if (c != NULL)
        db_release(g->db, c);
    free(pack);
    return rc;
}

/* The pack's bytes in a memfd, read from the start. */
static int pack_memfd(int *fd_out, const unsigned char *data, size_t len, rg_error *err)
{
    int fd = memfd_create("refgate-approval-pack", MFD_CLOEXEC);
    int rc;

    if (fd < 0)
        return rg_error_set(err, -errno, "memfd_create: %s", strerror(errno));
    if ((rc = rg_fs_write_all(fd, data, len)) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return rg_error_set(err, rc < 0 ? rc : -errno, "cannot hold the kept pack: %s",
                            strerror(rc < 0 ? -rc : errno));
    }
    *fd_out = fd;
    return 0;
}

static int pg_open_pack(int *fd_out, approvals_store *s, const char *id, int64_t now, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    const char *p[1] = {id};
    approvals_entry e;
    unsigned char *data = NULL;
    size_t len = 0;
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    if ((rc = live(c, &e, id, now, err)) < 0 ||
        (rc = db_exec(c, &r, "reading a kept pack", "SELECT pack FROM approval_packs WHERE id = $1",
                      1, p, err)) < 0)
        goto done;
    if (PQntuples(r) != 1) {
        rc = rg_error_set(err, -ENOENT, "approval %s has no kept pack", id);
        goto done;
    }
    data = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &len);
    if (data == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    rc = pack_memfd(fd_out, data, len, err);
done:
    PQfreemem(data);
    PQclear(r);
    db_release(g->db, c);
    return rc;
}

static uint64_t pg_pack_total(approvals_store *s)
{
    approvals_pg *g = (approvals_pg *)s;
    uint64_t total = UINT64_MAX;
    PGresult *r = NULL;
    PGconn *c;

    if (db_acquire(g->db, &c, NULL) < 0)
        return total;
    /* pack_bytes is 0 on every row that has left pending or approved. */
    if (db_exec(c, &r, "summing kept packs",
                "SELECT COALESCE(sum(pack_bytes), 0) FROM approvals WHERE pack_bytes > 0", 0, NULL,
                NULL) == 0)
        total = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    db_release(g->db, c);
    return total;
}

static void pg_close(approvals_store *s)
{
    free(s);
}

static const approvals_store_ops pg_ops = {
    .ask = pg_ask,
    .get = pg_get,
    .list = pg_list,
    .decide = pg_decide,
    .claim = pg_claim,
    .unclaim = pg_unclaim,
    .consume = pg_consume,
    .expire = pg_expire,
    .keep_pack = pg_keep_pack,
    .open_pack = pg_open_pack,
    .pack_total = pg_pack_total,
    .packs_local = 0,
    .close = pg_close,
};

/* ------------------------------------------------------------------------
 * Opening, importing
 * ------------------------------------------------------------------------ */

int approvals_pg_open(approvals_store **out, struct db_pool *db, int64_t expire_seconds,
                      rg_error *err)
{
    approvals_pg *g;

    *out = NULL;
    if (expire_seconds <= 0)
        return rg_error_set(err, -EINVAL, "approvals expire after a positive number of seconds");
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    g->base.ops = &pg_ops;
    g->db = db;
    g->expire = expire_seconds;
    *out = &g->base;
    return 0;
}

int approvals_pg_import(approvals_store *s, const approvals_entry *e, rg_error *err)
{
    approvals_pg *g = (approvals_pg *)s;
    char created[24], decided[24], expires[24];
    const char *p[14] = {e->id,     approvals_state_name(e->state),
                         e->repo,   e->ref,
                         e->old_id, e->new_id,
                         e->run,    e->rule,
                         e->reason, e->by,
                         e->note,   created,
                         decided,   expires};
    PGresult *r = NULL;
    PGconn *c;
    int rc;

    if (s->ops != &pg_ops)
        return rg_error_set(err, -EINVAL, "approvals are imported into the database store only");
    if (!approvals_id_ok(e->id))
        return rg_error_set(err, -EINVAL, "not an approval id");
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]) - 3; i++)
        if (!utf8_ok(p[i]))
            return rg_error_set(err, -EINVAL, "approval %s: a text is not UTF-8", e->id);
    i64_text(created, sizeof(created), e->created);
    i64_text(decided, sizeof(decided), e->decided);
    i64_text(expires, sizeof(expires), e->expires);
    if ((rc = db_acquire(g->db, &c, err)) < 0)
        return rc;
    /* Any unique index refuses it: the id, or a live approval of the update. */
    rc = db_exec(c, &r, "importing an approval",
                 "INSERT INTO approvals (id, state, repo, ref, old_id, new_id, run, rule, reason,"
                 " decided_by, note, created, decided, expires) VALUES ($1, $2, $3, $4, $5, $6,"
                 " $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING RETURNING id",
                 14, p, err);
    if (rc == 0 && PQntuples(r) != 1)
        rc = rg_error_set(err, -EEXIST,
                          "approval %s: its id or a live approval of its update is in the "
                          "database already",
                          e->id);
    PQclear(r);
    db_release(g->db, c);
    return rc;
}
