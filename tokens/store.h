/*
 * Where run tokens are checked against: the public keys of every gateway
 * that signs (by kid, with when each was created and retired) and the
 * revocations (by token id, with the token's expiry so that expired ones
 * can be pruned). Two implementations behind one ops table
 * (tokens/store_ops.h): files under state_dir (tokens/store_file.c: one
 * machine) and the shared PostgreSQL database (tokens/store_pg.c: the
 * tables token_keys and token_revocations), so a token minted by one
 * gateway verifies on every other and a revocation made through one is
 * refused by all at their next request.
 *
 * This layer adds what both share: public keys found are cached in memory
 * (a key never changes under its kid; entries are looked up again after
 * TOKENS_KEY_CACHE_SECONDS, so one removed from the store stops
 * verifying); a kid that is not cached costs a store lookup, at most
 * TOKENS_UNKNOWN_KID_RATE per second after a burst of as many, so a flood
 * of tokens with made-up kids cannot hammer the database; past that the
 * answer is "try again" (an error), not "invalid". Revocations are never
 * cached: every check asks the store. Thread-safe.
 */
#ifndef RG_TOKENS_STORE_H
#define RG_TOKENS_STORE_H

#include <stdint.h>

#include "db/pool.h"
#include "util/error.h"

#define TOKENS_KID_HEX           16
#define TOKENS_KID_SIZE          (TOKENS_KID_HEX + 1)
#define TOKENS_PUBLIC_KEY_LEN    32 /* raw Ed25519 public key */
#define TOKENS_SIG_LEN           64 /* Ed25519 signature */
#define TOKENS_KEY_CACHE_SECONDS 60
#define TOKENS_UNKNOWN_KID_RATE  10
/* Token ids are 128 random bits in hex. */
#define TOKENS_ID_HEX 32

typedef struct tokens_store tokens_store;

/* The file store in state_dir (created 0700 when absent). */
int tokens_store_file_open(tokens_store **out, const char *state_dir, rg_error *err);

/* The database store on `pool` (borrowed: it must outlive the store). */
int tokens_store_pg_open(tokens_store **out, db_pool *pool, rg_error *err);

/* The database store when `pool` is not NULL, else the file store. */
int tokens_store_open(tokens_store **out, const char *state_dir, db_pool *pool, rg_error *err);

void tokens_store_free(tokens_store *s); /* accepts NULL */

/* "files" or "database": for messages. */
const char *tokens_store_kind(const tokens_store *s);

/*
 * Publish a public key under `kid`, on behalf of `gateway`. The same key
 * again is not an error; another key under a kid already taken is.
 */
int tokens_store_key_put(tokens_store *s, const char *kid,
                         const unsigned char pub[TOKENS_PUBLIC_KEY_LEN], const char *gateway,
                         rg_error *err);

/* Mark `kid` retired (no longer signing); it still verifies. Not an error twice. */
int tokens_store_key_retire(tokens_store *s, const char *kid, rg_error *err);

/*
 * The public key published under `kid`: *found 0 when there is none.
 * Negative when the store cannot be read, or when too many unknown kids
 * were looked up this second (-EAGAIN): then the answer is unknown.
 */
int tokens_store_key_get(tokens_store *s, int *found, unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                         const char *kid, rg_error *err);

/* Record that token `id` (expiring at `exp`) is revoked. Not an error twice. */
int tokens_store_revoke(tokens_store *s, const char *id, int64_t exp, rg_error *err);

/* Whether token `id` is revoked, asked of the store itself (never cached). */
int tokens_store_is_revoked(tokens_store *s, int *revoked, const char *id, rg_error *err);

/*
 * `refgate db import`: copy the file store of state_dir (its published
 * public keys, retirements included, and its revocations) into `dst`.
 * Safe to repeat: what dst already holds is left as it is. *nkeys and
 * *nrevoked get how many lines were copied.
 */
int tokens_store_import_files(tokens_store *dst, const char *state_dir, size_t *nkeys,
                              size_t *nrevoked, rg_error *err);

#endif
