/*
 * This gateway's run-token signing key: an Ed25519 key whose private half
 * lives only in `<state_dir>/token-ed25519.key` (the 32-byte seed, 0600,
 * created on first use) and never in the database, a message or a log.
 * Its public half is published to the token store (tokens/store.h) under
 * a key id (kid): the first TOKENS_KID_HEX hex digits of SHA-256 of the
 * raw public key, so every gateway sharing the store verifies this one's
 * tokens.
 *
 * Rotation makes a new key, publishes its public half, puts it in place of
 * the old private key (rename: readers see one or the other) and retires
 * the old kid in the store: tokens signed with it verify until they expire,
 * new ones are signed with the new kid. A tokens_key is safe to use from
 * several threads (mint and rotate take its lock).
 */
#ifndef RG_TOKENS_KEY_H
#define RG_TOKENS_KEY_H

#include "tokens/store.h"
#include "util/error.h"

#define TOKENS_KEY_FILE "token-ed25519.key"

typedef struct tokens_key tokens_key;

/* Load the key from state_dir, creating it (0600, state_dir 0700) when absent. */
int tokens_key_load(tokens_key **out, const char *state_dir, rg_error *err);
void tokens_key_free(tokens_key *k); /* wipes the key; accepts NULL */

/* The kid of the key that signs now. */
void tokens_key_kid(char out[TOKENS_KID_SIZE], tokens_key *k);

/*
 * Publish the public half to `s` on behalf of `gateway` (a name for the
 * store's records, e.g. the gateway id); publishing again is not an error.
 */
int tokens_key_publish(tokens_key *k, tokens_store *s, const char *gateway, rg_error *err);

/*
 * Replace the key (see above). old_kid and new_kid (either may be NULL)
 * get the kids. On failure the old key still signs.
 */
int tokens_key_rotate(tokens_key *k, tokens_store *s, const char *state_dir, const char *gateway,
                      char old_kid[TOKENS_KID_SIZE], char new_kid[TOKENS_KID_SIZE], rg_error *err);

/*
 * Sign with the current key a message that names its kid: build(kid, arg)
 * returns the bytes to sign (owned by arg), then sig gets their
 * TOKENS_SIG_LEN-byte Ed25519 signature. The kid and the signature come
 * from one key even when another thread rotates meanwhile.
 */
typedef int (*tokens_key_build_fn)(const char *kid, void *arg, const void **msg, size_t *len,
                                   rg_error *err);
int tokens_key_sign_built(unsigned char sig[TOKENS_SIG_LEN], tokens_key *k,
                          tokens_key_build_fn build, void *arg, rg_error *err);

#endif
