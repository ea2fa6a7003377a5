/*
 * Published policies in the shared database (table `policies`, db/schema.c):
 * each publish is a new row, version N+1, with the policy's digest and its
 * exact canonical bytes (config/policy.h), so sha256(body) is the digest
 * and a gateway checks that before it enforces a body. The highest version
 * is the current policy; rows are never changed or removed, so the
 * history of what was enforced stays readable.
 *
 * Publishing takes an advisory lock inside its transaction (reads go on, and
 * a publisher needs no privilege beyond SELECT and INSERT): two publishers at
 * once get N+1 and N+2, never the same, and a publish whose digest is
 * already the current one adds nothing.
 */
#ifndef RG_DB_POLICIES_H
#define RG_DB_POLICIES_H

#include <jansson.h>
#include <stddef.h>

#include "config/policy.h"
#include "db/pool.h"

typedef struct db_policy_info {
    long long version; /* 0: none was ever published */
    char digest[CONFIG_POLICY_DIGEST_SIZE];
    char published[32]; /* RFC 3339 UTC, seconds */
    char by[128];       /* who published it, as the publisher named itself */
} db_policy_info;

/* The current policy's version and digest (version 0 when there is none). */
int db_policy_current(PGconn *c, db_policy_info *out, rg_error *err);

/*
 * The body of `version` (malloc'd, NUL-terminated, *len without the NUL).
 * RG_E_STATE when there is no such version.
 */
int db_policy_body(PGconn *c, long long version, char **body, size_t *len, rg_error *err);

/*
 * The policy of version info->version: its body read, checked to hash to
 * info->digest (RG_E_TAMPER when not: a body changed behind refgate's back
 * is never enforced) and parsed as a policy (RG_E_CONFIG); RG_E_STATE when
 * the database failed (the version may be read later). Whether it loads
 * over a host's config is config_with_policy's to say.
 */
int db_policy_load(PGconn *c, const db_policy_info *info, json_t **out, rg_error *err);

/*
 * Store `body` (canonical bytes whose digest is `digest`) as the next
 * version, in one transaction. *out gets the current policy afterwards;
 * *unchanged 1 when `digest` already was the current one (nothing stored).
 */
int db_policy_publish(db_pool *p, db_policy_info *out, int *unchanged, const char *digest,
                      const char *body, size_t len, const char *by, rg_error *err);

#endif
