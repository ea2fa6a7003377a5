/*
 * Run tokens: what a sandboxed run holds instead of a write credential.
 * A token is `rg1.<base64url(JSON claims)>.<base64url(HMAC-SHA-256)>`, signed
 * with a 32-byte key the gateway keeps in `<state_dir>/token.key` (0600,
 * created on first use). Claims: a random id, the run name, the repos it may
 * push to and an expiry. Verification needs no database and compares the
 * MAC in constant time; revocations are kept by token id in
 * `<state_dir>/revoked` so they survive restarts and are seen by a running
 * gateway when `refgate token revoke` writes them.
 */
#ifndef RG_TOKENS_TOKEN_H
#define RG_TOKENS_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* The longest token tokens_verify accepts (and tokens_mint produces). */
#define TOKENS_MAX_LEN 8192
/* The longest lifetime tokens_mint grants: 7 days. */
#define TOKENS_TTL_MAX (7 * 24 * 3600)
/* Run names are 1..TOKENS_RUN_MAX printable ASCII characters, no spaces. */
#define TOKENS_RUN_MAX 64
/* A token names 1..TOKENS_REPOS_MAX repositories. */
#define TOKENS_REPOS_MAX 32

typedef struct tokens_key tokens_key;

/* Load the key from state_dir, creating it (0600) when absent. */
int tokens_key_load(tokens_key **out, const char *state_dir, rg_error *err);
void tokens_key_free(tokens_key *k); /* wipes the key */

typedef struct tokens_claims {
    char *id;  /* random, 128 bits, hex */
    char *run; /* run name */
    char **repos;
    size_t nrepos;
    int64_t exp; /* unix seconds */
} tokens_claims;

/*
 * Mint a token valid for `ttl` seconds (1..TOKENS_TTL_MAX) from `now`.
 * Repos are `<host>/<path>` without `.git`, each segment a plain name as in
 * gateway URLs (letters, digits, `._-+~`, not starting with `.` or `-`).
 * *out is a string the caller frees with tokens_secret_free.
 */
int tokens_mint(char **out, const tokens_key *k, const char *run, const char *const *repos,
                size_t nrepos, int64_t ttl, int64_t now, rg_error *err);

/* Why a token was refused. */
typedef enum tokens_status {
    TOKENS_OK = 0,
    TOKENS_MALFORMED, /* not a refgate token */
    TOKENS_BAD_SIGNATURE,
    TOKENS_EXPIRED,
    TOKENS_REVOKED,
} tokens_status;

/*
 * Verify `token` at time `now` against `k` and the revocations in
 * `state_dir`. *status says why it was refused; claims are returned (in
 * *out, free with tokens_claims_free) only when *status is TOKENS_OK.
 * Returns 0 whenever the answer is known, negative only when a check could
 * not be made (e.g. the revocation file is unreadable: fail closed); then
 * *status is never TOKENS_OK. A token expires at `exp`: valid while
 * now < exp.
 */
int tokens_verify(tokens_claims **out, tokens_status *status, const tokens_key *k,
                  const char *state_dir, const char *token, int64_t now, rg_error *err);

void tokens_claims_free(tokens_claims *c);

/* 1 when the claims name `repo` (exactly, `<host>/<path>` without .git). */
int tokens_claims_allow_repo(const tokens_claims *c, const char *repo);

/*
 * Record a revocation of `token` (which must verify, though it may be
 * expired). Revoking a token twice is not an error.
 */
int tokens_revoke(const tokens_key *k, const char *state_dir, const char *token, rg_error *err);

/* How logs name a token: the first 12 hex digits of SHA-256(token), enough
 * to tell a run's tokens apart and far too few to help guess one. */
#define TOKENS_HASH_PREFIX_HEX  12
#define TOKENS_HASH_PREFIX_SIZE (TOKENS_HASH_PREFIX_HEX + 1) /* with the NUL */

void tokens_hash_prefix(char out[TOKENS_HASH_PREFIX_SIZE], const char *token);

/* Wipe and free a secret string. Accepts NULL. */
void tokens_secret_free(char *s);

const char *tokens_status_message(tokens_status s);

#endif
