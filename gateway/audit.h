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

typedef struct audit_record {
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
    const char *outcome;  /* e.g. "forwarded: ok", "forwarded: ng <reason>", "rejected" */
    const char *evaluate; /* evaluate-mode verdict, or NULL */
} audit_record;

typedef struct audit_log audit_log;

/* Open (creating, 0600) the log at `path` and find where the chain stands. */
int audit_open(audit_log **out, const char *path, rg_error *err);

/*
 * Append one record (time and seq are filled in) and fsync. Thread-safe.
 * Several records of one push may be appended under one fsync with
 * audit_append_many.
 */
int audit_append(audit_log *log, const audit_record *rec, rg_error *err);
int audit_append_many(audit_log *log, const audit_record *recs, size_t n, rg_error *err);

void audit_close(audit_log *log);

typedef struct audit_verify_result {
    uint64_t lines;    /* lines read */
    uint64_t bad_line; /* 1-based number of the first bad line, 0 if none */
    char why[256];     /* what is wrong with it */
} audit_verify_result;

/*
 * Check the chain of the log at `path`. Returns 0 when it could be read
 * (then out->bad_line says whether it is intact), negative when not.
 */
int audit_verify(audit_verify_result *out, const char *path, rg_error *err);

#endif
