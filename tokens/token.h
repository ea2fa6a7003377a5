/*
 * Run tokens: what a sandboxed run holds instead of a write credential.
 * A token is `rg2.<kid>.<base64url(JSON claims)>.<base64url(Ed25519
 * signature)>`, the signature taken over everything before its dot, made
 * with the minting gateway's private key (tokens/key.h) and checked with
 * the public key the token store (tokens/store.h) holds under `kid` (16
 * hex digits), so any gateway sharing the store verifies it. There is one
 * algorithm and no field naming one. Claims: a random id, the run name,
 * the repos it may push to and an expiry. Revocations are kept in the
 * store by token id and asked of it at every verification, so a token
 * revoked through one gateway is refused by every other at its next
 * request.
 */
#ifndef RG_TOKENS_TOKEN_H
#define RG_TOKENS_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "tokens/key.h"
#include "tokens/store.h"
#include "util/error.h"

/* The longest token tokens_verify accepts (and tokens_mint produces). */
#define TOKENS_MAX_LEN 8192
/* The longest lifetime tokens_mint grants: 7 days. */
#define TOKENS_TTL_MAX (7 * 24 * 3600)
/* Run names are 1..TOKENS_RUN_MAX printable ASCII characters, no spaces. */
#define TOKENS_RUN_MAX 64
/* A token names 1..TOKENS_REPOS_MAX repositories. */
#define TOKENS_REPOS_MAX 32

typedef struct tokens_claims {
    char *id;  /* random, 128 bits, hex */
    char *run; /* run name */
    char **repos;
    size_t nrepos;
    int64_t exp;               /* unix seconds */
    char kid[TOKENS_KID_SIZE]; /* the key that signed it */
} tokens_claims;

/*
 * Mint a token valid for `ttl` seconds (1..TOKENS_TTL_MAX) from `now`.
 * Repos are `<host>/<path>` without `.git`, each segment a plain name as in
 * gateway URLs (letters, digits, `._-+~`, not starting with `.` or `-`).
 * *out is a string the caller frees with tokens_secret_free.
 */
int tokens_mint(char **out, tokens_key *k, const char *run, const char *const *repos, size_t nrepos,
                int64_t ttl, int64_t now, rg_error *err);

/* Why a token was refused. */
typedef enum tokens_status {
    TOKENS_OK = 0,
    TOKENS_MALFORMED, /* not a refgate token */
    TOKENS_BAD_SIGNATURE,
    TOKENS_UNKNOWN_KEY, /* signed by a key the store does not hold */
    TOKENS_EXPIRED,
    TOKENS_REVOKED,
} tokens_status;

/*
 * Verify `token` at time `now` against the keys and revocations of `s`.
 * *status says why it was refused; claims are returned (in *out, free
 * with tokens_claims_free) only when *status is TOKENS_OK. Returns 0
 * whenever the answer is known, negative only when a check could not be
 * made (the store cannot be read: RG_E_STATE for the database; -EAGAIN
 * when too many unknown kids were asked this second): then *status is
 * never TOKENS_OK (fail closed). A token expires at `exp`: valid while
 * now < exp.
 */
int tokens_verify(tokens_claims **out, tokens_status *status, tokens_store *s, const char *token,
                  int64_t now, rg_error *err);

void tokens_claims_free(tokens_claims *c);

/* 1 when the claims name `repo` (exactly, `<host>/<path>` without .git). */
int tokens_claims_allow_repo(const tokens_claims *c, const char *repo);

/*
 * Record a revocation of `token` in `s` (the token must verify there,
 * though it may be expired or signed by a retired key). Revoking a token
 * twice is not an error.
 */
int tokens_revoke(tokens_store *s, const char *token, rg_error *err);

/* How logs name a token: the first 12 hex digits of SHA-256(token), enough
 * to tell a run's tokens apart and far too few to help guess one. */
#define TOKENS_HASH_PREFIX_HEX  12
#define TOKENS_HASH_PREFIX_SIZE (TOKENS_HASH_PREFIX_HEX + 1) /* with the NUL */

void tokens_hash_prefix(char out[TOKENS_HASH_PREFIX_SIZE], const char *token);

/* Wipe and free a secret string. Accepts NULL. */
void tokens_secret_free(char *s);

const char *tokens_status_message(tokens_status s);

#endif
