/*
 * Inside the audit library: the ops table a store implements, and the
 * record serialisation every store shares (the chain hashes the exact
 * bytes of a line, so all stores must write the same bytes for a record).
 * Not for use outside audit/.
 */
#ifndef RG_AUDIT_STORE_OPS_H
#define RG_AUDIT_STORE_OPS_H

#include "audit/audit.h"
#include "util/buf.h"

#define AUDIT_HASH_LEN  32
#define AUDIT_HASH_HEX  (AUDIT_HASH_LEN * 2)
#define AUDIT_TIME_LEN  48
#define AUDIT_ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* The outcome text of a decision completed at recovery. */
#define AUDIT_UNKNOWN_OUTCOME                                                                      \
    "unknown: the gateway stopped before upstream answered (completed when it started again)"

/*
 * What a store does. audit.c checks arguments and records before calling
 * these, so append_many gets n > 0 well-formed records; each op is
 * thread-safe on its own.
 */
typedef struct audit_store_ops {
    int (*append_many)(audit_log *log, const audit_record *recs, size_t n, uint64_t *first_seq,
                       rg_error *err);
    /* audit_append_outcomes: n > 0 outcome records, each naming a decision. */
    int (*append_outcomes)(audit_log *log, const audit_record *recs, size_t n, size_t *appended,
                           rg_error *err);
    int (*ready)(audit_log *log, size_t nbytes, rg_error *err);
    int (*head)(audit_log *log, uint64_t *seq, char hash_hex[AUDIT_HASH_HEX + 1], rg_error *err);
    int (*complete_pending)(audit_log *log, size_t *completed, rg_error *err);
    void (*close)(audit_log *log);
} audit_store_ops;

/* The head of every store's own struct, which embeds it first. */
struct audit_log {
    const audit_store_ops *ops;
    audit_append_observer on_append; /* NULL: nobody times appends */
    void *on_append_arg;
};

/* The file store (store_file.c). */
int audit_file_open(audit_log **out, const char *path, rg_error *err);

/* audit_read_head of the file at `path` (store_file.c). */
int audit_file_read_head(uint64_t *seq, char hash_hex[AUDIT_HASH_HEX + 1], const char *path,
                         rg_error *err);

/*
 * Reading the database's records (store_pg_read.c), for the readers and verify:
 * rows one at a time in seq order (or seq DESC when `backward`), fetched a
 * page at a time, all in one read-only snapshot on one pooled connection
 * held from open to free.
 */
typedef struct audit_pg_read audit_pg_read;

typedef struct audit_pg_row {
    const char *data; /* the stored line, NUL-terminated, cut at AUDIT_LINE_MAX; until next */
    size_t len;
    size_t full_len;                      /* the stored line's length */
    uint64_t seq;                         /* the row's seq */
    unsigned char sha256[AUDIT_HASH_LEN]; /* of all the stored bytes */
} audit_pg_row;

/* Only rows whose bytes contain `needle` when it is not NULL. */
int audit_pg_read_open(audit_pg_read **out, struct db_pool *db, int backward, const char *needle,
                       rg_error *err);

/* The next row: 1, 0 after the last, negative (RG_E_STATE) on error. */
int audit_pg_read_next(audit_pg_read *r, audit_pg_row *out, rg_error *err);

/* The audit_head row, in the reader's snapshot. */
int audit_pg_read_head(audit_pg_read *r, uint64_t *seq, char hash_hex[AUDIT_HASH_HEX + 1],
                       rg_error *err);

void audit_pg_read_free(audit_pg_read *r);

/* Whether `rec` may be appended as record `seq` of a chain; -EINVAL with a message if not. */
int audit_record_check(const audit_record *rec, uint64_t seq, rg_error *err);

/*
 * Serialise `rec` as record `seq` chained to `prev` (the previous line's
 * hash), appending the line and its newline to `out`; `prev` then holds
 * this line's hash. 0, -ENOMEM, or RG_E_TOO_BIG past AUDIT_LINE_MAX.
 */
int audit_record_line(rg_buf *out, const audit_record *rec, const char *time, uint64_t seq,
                      char prev[AUDIT_HASH_HEX + 1]);

/* The time as records carry it: RFC 3339 UTC with milliseconds. */
void audit_time_now(char out[AUDIT_TIME_LEN]);

int audit_sha256_hex(char out[AUDIT_HASH_HEX + 1], const void *data, size_t len);

#endif
