/*
 * The audit log: `<state_dir>/audit.jsonl`, one JSON object per ref
 * decision, appended and fsynced before the client is answered. Each line
 * carries `seq` and `prev`, the SHA-256 (hex) of the previous line's exact
 * bytes (64 zeros for the first), so `refgate audit verify` recomputes the
 * chain without canonicalising JSON. A crash mid-append leaves a torn last
 * line; on reopen the torn fragment is terminated and kept (verify names
 * it) and the chain continues from its bytes, so nothing after it can be
 * cut out unseen.
 */
#ifndef RG_GATEWAY_AUDIT_H
#define RG_GATEWAY_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef enum audit_kind { AUDIT_DECISION = 1, AUDIT_OUTCOME, AUDIT_EVENT } audit_kind;

typedef struct audit_record {
    audit_kind kind;
    const char *push_id;
    const char *run;
    const char *token_hash; /* tokens_hash_prefix(), never the token */
    const char *remote;     /* client address */
    const char *repo;       /* <host>/<path> */
    const char *ref;
    const char *old_id;
    const char *new_id;
    const char *action;   /* create | update | force | delete */
    const char *decision; /* allow | deny */
    const char *rule;     /* deciding rule name, or "default" */
    const char *reason;
    const char *outcome;   /* e.g. "forwarded: ok", "forwarded: ng <reason>", "rejected" */
    const char *evaluate;  /* evaluate-mode verdict, or NULL */
    uint64_t decision_seq; /* outcome records: the seq of their decision */
    const char *event, *detail;
} audit_record;

typedef struct audit_log audit_log;

/*
 * Open (creating, 0600) the log at `path` and find where the chain stands,
 * reading back from the end (the cost does not grow with the log). One
 * process writes a log at a time: the log holds an exclusive flock(2) until
 * audit_close, and a second audit_open of the same file fails with -EBUSY
 * rather than fork the chain.
 */
int audit_open(audit_log **out, const char *path, rg_error *err);

/*
 * Append one record (time and seq are filled in) and fsync. Thread-safe.
 * Several records of one push may be appended under one fsync with
 * audit_append_many. NULL fields are written as JSON null, except
 * `evaluate`, which is left out; strings longer than 4 KiB are cut (ending
 * in "...") and bytes that are not UTF-8 are written as \xHH, so a
 * hostile ref name or upstream message can neither bloat nor break a line.
 * After a failed write or fsync the next append first re-reads the tail.
 */
int audit_append(audit_log *log, const audit_record *rec, rg_error *err);
int audit_append_many(audit_log *log, const audit_record *recs, size_t n, uint64_t *first_seq,
                      rg_error *err);
size_t audit_record_size_max(const audit_record *rec);

/*
 * Whether `nrecords` records can be appended now: the log's tail is known
 * and its filesystem has room for them. Checked before a push is forwarded,
 * so a log that cannot be written stops pushes instead of missing them.
 */
int audit_ready(audit_log *log, size_t nbytes, rg_error *err);

void audit_close(audit_log *log);

typedef struct audit_verify_result {
    uint64_t lines;    /* lines read */
    uint64_t bad_line; /* 1-based number of the first bad line, 0 if none */
    char why[256];     /* what is wrong with it, without a "line N: " prefix */
} audit_verify_result;

/*
 * Check the chain of the log at `path`, streaming it. A line is bad when it
 * is torn (no newline at the end of the file), not a JSON object, longer
 * than AUDIT_LINE_MAX, has a `seq` other than the previous one plus 1 (the
 * first is 1), or a `prev` other than the hash of the previous line (64
 * zeros for the first). Changing a line's bytes without breaking its JSON
 * is seen at the next line, whose `prev` no longer matches; `why` then
 * names the changed line. Returns 0 when it could be read (then
 * out->bad_line says whether it is intact), negative when not (-ENOENT
 * when there is no log).
 */
int audit_verify(audit_verify_result *out, const char *path, rg_error *err);

/* ------------------------------------------------------------------------
 * Reading the log line by line (refgate audit, audit_verify)
 * ------------------------------------------------------------------------ */

/* The longest line a reader hands over whole; our own lines stay far below. */
#define AUDIT_LINE_MAX (1024 * 1024)

typedef struct audit_line {
    /* The line without its newline, NUL-terminated; valid until the next call. */
    const char *data;
    size_t len;
    uint64_t number;          /* 1-based */
    int torn;                 /* the file ends without a newline after it */
    int too_long;             /* longer than AUDIT_LINE_MAX: data holds only the start */
    unsigned char sha256[32]; /* of all the line's bytes, as the next `prev` names it */
} audit_line;

typedef struct audit_reader audit_reader;

/* Open the log at `path` for reading; -ENOENT (with a message) when absent. */
int audit_reader_open(audit_reader **out, const char *path, rg_error *err);

/* The next line into *out: returns 1 for a line, 0 at the end, negative on error. */
int audit_reader_next(audit_reader *r, audit_line *out, rg_error *err);

void audit_reader_free(audit_reader *r);

#endif
