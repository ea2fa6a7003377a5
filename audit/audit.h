/*
 * The audit log: a hash-chained record of every ref decision of every push
 * and of what became of it, kept by a store behind an ops table: the file
 * `<state_dir>/audit.jsonl` (audit_open), or the tables audit_head and
 * audit_records of the shared PostgreSQL database (audit_pg_open), one
 * chain for every gateway of a team. Both stores write the same bytes for
 * a record, so a chain verifies the same way in either.
 *
 * Record format v2. Every line is one compact JSON object that starts with
 * `"v":2,"seq":N,"prev":"<hex>","time":"<RFC 3339 UTC>","type":"<type>"`:
 * `seq` counts from 1 without a gap, and `prev` is the SHA-256 (hex) of the
 * previous line's exact bytes (64 zeros for the first), so `refgate audit
 * verify` recomputes the chain without canonicalising JSON. Types:
 *
 *   decision  one per ref of a push, all refs of a push in one batch,
 *             durable BEFORE anything is forwarded. When the ref is not
 *             forwarded it carries its final `outcome` ("rejected") and is
 *             complete; when it is forwarded `outcome` is null (pending)
 *             and an outcome record follows.
 *   outcome   one per forwarded ref once upstream answered or the push
 *             ended otherwise; `decision_seq` names its decision record.
 *   event     gateway events: start, stop, recovered, token-mint,
 *             token-revoke, approval-request (an `ask` made a pending
 *             approval), approval-grant, approval-deny (a reviewer's
 *             decision, naming who and from where), approval-consume (an
 *             approved update landed), console-user-add (a reviewer
 *             account made or its password changed), policy (the gateway
 *             began enforcing a published policy: its version and digest),
 *             token-key-rotate (a new run-token signing key), with a free
 *             `detail` text.
 *
 * A decision record names the digest of the policy that decided it in
 * `policy`, "sha256:<hex>" (config/policy.h), between `evaluate` and
 * `outcome`; records written before it existed have none and verify as
 * they are.
 *
 * Lines without `"v"` are v1 (one complete record per decision, written
 * after the push): they verify and list alongside v2, and new lines chain
 * onto them.
 *
 * What any store must guarantee: append-only (a record once appended is
 * never changed or removed); seq contiguous per chain; the exact bytes of
 * each line kept (the chain hashes bytes, not values); a record durable
 * when audit_append_many returns 0, and a failed batch not written at all
 * or, where a crash tore it (the file), found by verify; writers that
 * cannot fork the chain. The file store allows one writer (a second
 * audit_open of a file in use fails with -EBUSY); the database store
 * allows many, serialised by the lock on the head row, each batch one
 * transaction that chains onto the line committed just before it. A chain
 * alone cannot detect a cut tail: keep the head (audit_head) where the host
 * cannot rewrite it and verify against it.
 */
#ifndef RG_AUDIT_AUDIT_H
#define RG_AUDIT_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef enum audit_kind { AUDIT_DECISION = 1, AUDIT_OUTCOME, AUDIT_EVENT } audit_kind;

/*
 * One record to append. Strings are borrowed for the call. NULL strings are
 * written as JSON null, except `evaluate`, `policy` and `detail`, which are
 * left out;
 * bytes that are not UTF-8 are written as \xHH, and a string whose written
 * form (escapes included) would pass 4 KiB is cut (ending in "..."), so a
 * hostile ref name or upstream message can neither bloat nor break a line.
 */
typedef struct audit_record {
    audit_kind kind;
    const char *push_id, *run, *token_hash, *remote, *repo, *ref, *old_id, *new_id;
    const char *action, *decision, *rule, *reason, *evaluate; /* decision records */
    const char *policy;         /* decision: the deciding policy's digest (config/policy.h) */
    const char *outcome;        /* decision: NULL = pending (written as null); outcome: required */
    uint64_t decision_seq;      /* outcome records */
    const char *event, *detail; /* event records */
} audit_record;

/* The store: opaque, behind an ops table. */
typedef struct audit_log audit_log;

/*
 * Open (creating, 0600) the file store at `path` and find where the chain
 * stands, reading back from the end (the cost does not grow with the log).
 * The store holds an exclusive flock(2) until audit_close, and a second
 * audit_open of the same file fails with -EBUSY rather than fork the
 * chain. A torn last line (a crash mid-append) is terminated and kept, and
 * the chain continues from its bytes, so verify names it and nothing after
 * it can be cut out unseen.
 */
int audit_open(audit_log **out, const char *path, rg_error *err);

/*
 * Open the store in the shared database `db` (borrowed: it must outlive the
 * log; schema from `refgate db migrate`) for the gateway `gateway_id`
 * (db_gateway_id_new), whose id each record's row carries so a record it
 * leaves pending is known as its own; the gateway holds a lease under that
 * id (db/lease.h) while it appends, or its pending records count as a dead
 * gateway's. Nothing is connected here: a database that cannot be reached
 * fails the calls that need it, with RG_E_STATE, until it answers again.
 * Several gateways (and several handles) may append to one chain at once:
 * each batch is one transaction that locks the chain's head row, takes seq
 * and prev from it, and commits (durable) before audit_append_many returns.
 *
 * audit_ready checks the database answers now ("the audit log's database
 * cannot be reached: ..." when not). audit_complete_pending completes the
 * decisions left pending by gateways that are dead (no live lease in the
 * `gateways` table, db/lease.h; never those of a live gateway nor this
 * one's), each with an outcome naming the dead gateway and this one, plus a
 * "recovered" event per dead gateway with the count, in one head-locked
 * transaction so no record is completed twice. It looks without the lock
 * first, and takes it (and looks again) only when there is something to
 * complete, so an idle sweep never holds up appends.
 */
typedef struct db_pool db_pool;
int audit_pg_open(audit_log **out, db_pool *db, const char *gateway_id, rg_error *err);

typedef struct audit_import_result {
    uint64_t records;   /* lines imported: the head's seq */
    uint64_t pending;   /* decisions forwarded without an outcome, now pending in the database */
    char head_hash[65]; /* the head's hash: the last line's */
} audit_import_result;

/*
 * Copy the file log at `path` into the database's chain, each line's exact
 * bytes, in one transaction, the head set to the last line: `refgate db
 * import`. Refused (nothing written) when the database's chain is not
 * empty (RG_E_STATE), the file does not verify (RG_E_TAMPER, naming the
 * line) or a gateway holds it (-EBUSY). Imported rows name no gateway, so
 * their pending decisions are completed by the first gateway that sweeps.
 */
int audit_pg_import(audit_import_result *out, db_pool *db, const char *path, rg_error *err);

/*
 * Append n records in one fsynced batch; *first_seq (may be NULL) gets the
 * first one's seq (the others follow it). Time and seq are filled in.
 * Thread-safe. Fails with -EINVAL (nothing written) when a record is not
 * well-formed: an unknown kind, a decision without ref or decision, an
 * outcome without outcome or with a decision_seq that is not an earlier
 * record, an event that is not one of the known names. After a failed
 * write the next call first re-reads the tail.
 */
int audit_append_many(audit_log *log, const audit_record *recs, size_t n, uint64_t *first_seq,
                      rg_error *err);

/* audit_append_many of one record. */
int audit_append(audit_log *log, const audit_record *rec, rg_error *err);

/*
 * Append, in one batch, those of the n outcome records whose decisions are
 * still pending, in their order, and pass over the others: their decision
 * was completed meanwhile, by an earlier try whose write landed though its
 * answer was lost, or by a gateway that took this one for dead. For
 * retrying outcomes that could not be written (gateway/outbox.h), so a
 * retry never gives a decision a second outcome. *appended (may be NULL)
 * gets how many were appended. Every record must be an outcome naming a
 * decision (-EINVAL, nothing written, otherwise). The database store
 * checks `pending` in the head-locked transaction that appends. The file
 * store, the only writer of its file, reads back from the end to the
 * oldest decision named and passes over those an outcome already names.
 */
int audit_append_outcomes(audit_log *log, const audit_record *recs, size_t n, size_t *appended,
                          rg_error *err);

/*
 * Told after every append that reached the store, with its wall time in
 * seconds (the fsync included) and whether it succeeded: for the gateway's
 * metrics. Set before the log is shared between threads.
 */
typedef void (*audit_append_observer)(void *arg, double seconds, int ok);
void audit_on_append(audit_log *log, audit_append_observer fn, void *arg);

/*
 * Whether nbytes more can be appended now (tail known, room on the
 * filesystem for them plus a fixed margin). Checked before a push is
 * forwarded, so a log that cannot be written stops pushes instead of
 * missing them.
 */
int audit_ready(audit_log *log, size_t nbytes, rg_error *err);

/*
 * An upper bound of the bytes `rec` takes as a line, newline included, so a
 * caller sizes audit_ready by the push: its decision records plus, for the
 * forwarded refs, outcome records built with `outcome` NULL, which counts
 * at its largest (4 KiB written) so any text upstream sends back fits. A
 * string field never takes more than 4 KiB of a line, whatever it holds.
 */
size_t audit_record_size_max(const audit_record *rec);

/* The chain's head: last seq and the SHA-256 hex of that line (0 and 64 zeros when empty). */
int audit_head(audit_log *log, uint64_t *seq, char hash_hex[65], rg_error *err);

/*
 * Complete every pending decision (forwarded, no outcome) with an outcome
 * record "unknown: the gateway stopped before upstream answered (...)" and
 * append one "recovered" event naming how many; *completed (may be NULL)
 * gets the count. With nothing pending nothing is appended. Called at
 * gateway start, before serving: the scan goes back from the end only to
 * the last "start" or "stop" event (a start comes after this call, so
 * everything before it is complete; a stop is written once every request
 * has ended) or the last v1 line (v1 has no pending records). This is the
 * file store's; the database store's is described at audit_pg_open.
 */
int audit_complete_pending(audit_log *log, size_t *completed, rg_error *err);

void audit_close(audit_log *log);

/* ------------------------------------------------------------------------
 * Reading the log line by line (refgate audit, audit_verify)
 * ------------------------------------------------------------------------ */

/* The longest line a reader hands over whole; our own lines stay far below. */
#define AUDIT_LINE_MAX (1024 * 1024)

struct db_pool;

/*
 * Where the log is read from: the file at `path`, or, when `db` is set
 * (config "state.postgres"), the database's audit_records, a row's `line`
 * being the exact bytes of a line without its newline (`path` is then not
 * used). Both borrowed. In the database every reader works in one
 * read-only snapshot (REPEATABLE READ) held on one pooled connection from
 * open to free, and fetches rows a page at a time by seq, so it never
 * holds the table and sees no append half made. An unreachable database
 * or one whose schema is not this build's fails the open with RG_E_STATE.
 */
typedef struct audit_source {
    const char *path;
    struct db_pool *db;
} audit_source;

typedef struct audit_line {
    /* The line without its newline, NUL-terminated; valid until the next call. */
    const char *data;
    size_t len;
    uint64_t number;          /* 1-based: the line in the file, the row in seq order */
    uint64_t stored_seq;      /* the database row's seq (0 from the file) */
    int torn;                 /* the file ends without a newline after it */
    int too_long;             /* longer than AUDIT_LINE_MAX: data holds only the start */
    unsigned char sha256[32]; /* of all the line's bytes, as the next `prev` names it */
} audit_line;

typedef struct audit_reader audit_reader;

/* Open the log for reading from its start; -ENOENT (with a message) when the file is absent. */
int audit_reader_open(audit_reader **out, const audit_source *src, rg_error *err);

/*
 * audit_reader_open for a caller that wants only the lines containing
 * `needle` and checks each line itself: from the database only the rows
 * holding those bytes are fetched (the filter runs in the server), from
 * the file every line comes. Line numbers then count the lines handed
 * over, not the log's.
 */
int audit_reader_open_containing(audit_reader **out, const audit_source *src, const char *needle,
                                 rg_error *err);

/* The next line into *out: returns 1 for a line, 0 at the end, negative on error. */
int audit_reader_next(audit_reader *r, audit_line *out, rg_error *err);

void audit_reader_free(audit_reader *r);

/*
 * Reading the log back to front, for the newest records first (the review
 * console's listings) at a cost that grows with what is read, not with the
 * log. Lines are handed over without their newline and without hashes
 * (nothing is verified); a line longer than AUDIT_LINE_MAX is passed over.
 */
typedef struct audit_back_reader audit_back_reader;

int audit_back_reader_open(audit_back_reader **out, const audit_source *src, rg_error *err);

/*
 * The previous line: 1 with *data and *len set (NUL-terminated, valid until
 * the next call), 0 at the start of the log, negative on error.
 */
int audit_back_reader_prev(audit_back_reader *r, const char **data, size_t *len, rg_error *err);

void audit_back_reader_free(audit_back_reader *r);

struct json_t;

/*
 * What a parsed line is: AUDIT_DECISION, AUDIT_OUTCOME or AUDIT_EVENT, and
 * in *version 1 or 2 (a v1 line is a complete decision); 0 when it is no
 * record this version knows.
 */
int audit_json_kind(int *version, const struct json_t *obj);

/*
 * The head of the log without opening it as a writer (a running gateway
 * holds the file's lock): the seq of the last complete record line and
 * its SHA-256 hex. In the file an unterminated last line (an append in
 * progress, or torn) is not part of the head. In the database the head is
 * the audit_head row, and RG_E_STATE when it does not name the last
 * record (seq and hash): a head that cannot be trusted is not handed out.
 */
int audit_read_head(uint64_t *seq, char hash_hex[65], const audit_source *src, rg_error *err);

/* ------------------------------------------------------------------------
 * Verification
 * ------------------------------------------------------------------------ */

typedef struct audit_verify_result {
    uint64_t lines;    /* lines read */
    uint64_t last_seq; /* seq of the last record read */
    uint64_t bad_line; /* 1-based number of the first bad line, 0 if none */
    int head_bad;      /* the log does not reach the given head, or differs at it */
    int db_head_bad;   /* the database's audit_head row does not name the last record */
    char why[256];     /* what is wrong, without a "line N: " prefix */
} audit_verify_result;

/*
 * Check the chain of the log, streaming it. A line is bad when it is torn
 * (no newline at the end of the file), not a JSON object, longer than
 * AUDIT_LINE_MAX, has a `seq` other than the previous one plus 1 (the
 * first is 1) or, in the database, other than its row's seq, or a `prev`
 * other than the hash of the previous line (64 zeros for the first).
 * Changing a line's bytes without breaking its JSON is seen at the next
 * line, whose `prev` no longer matches; `why` then names the changed line.
 * v1 and v2 lines may share one chain. In the database an intact chain is
 * then checked against the audit_head row, read in the same snapshot:
 * when it does not name the last record, out->db_head_bad is set and `why`
 * says whether records were cut from the end, the head was moved back, or
 * the last record (or the head's hash) was changed. Returns 0 when it
 * could be read (then bad_line and db_head_bad say whether it is intact),
 * negative when not (-ENOENT when there is no file).
 */
int audit_verify(audit_verify_result *out, const audit_source *src, rg_error *err);

/*
 * audit_verify, and then check the log reaches a head kept apart from it:
 * it has a record with seq `head_seq` whose line hashes to `head_hash`
 * (hex). When not, out->head_bad is set and `why` says whether the log
 * ends before that seq (records were cut from its end) or differs there;
 * that is checked before the database's own head.
 */
int audit_verify_head(audit_verify_result *out, const audit_source *src, uint64_t head_seq,
                      const char *head_hash, rg_error *err);

#endif
