/*
 * The policy: the part of a configuration that is the team's rules rather
 * than the host's setup. It is the top-level keys
 *
 *   "default"   what no rule decides
 *   "rules"     the branch rules, with their content conditions
 *   "secrets"   extra secret detectors and allowed fingerprints
 *
 * and nothing else. Everything that names this host stays local: listen,
 * state_dir, upstreams and their credentials, limits, control, approvals,
 * admin, console, state, and "signing", whose values are paths of key
 * files on this host (the keys an "unsigned" rule verifies against are
 * deployed with the host, like upstream credentials; a rule that needs
 * them does not load on a host without them).
 *
 * A policy is published to the shared database (`refgate policy
 * publish`, db/pool.h) and gateways on that database enforce it merged over
 * their own config (config_with_policy). Its digest, "sha256:<hex>", is
 * the SHA-256 of its canonical form: the policy object written by jansson
 * with JSON_COMPACT | JSON_SORT_KEYS. Only the keys present count (a
 * config without "default" and one with "default": "deny" decide alike
 * but differ in digest). The file store has the same definition: a
 * config's digest is that of its policy part, so every audit decision
 * record names the digest of the policy that decided it, whatever the
 * store.
 */
#ifndef RG_CONFIG_POLICY_H
#define RG_CONFIG_POLICY_H

#include <jansson.h>
#include <stddef.h>

#include "util/error.h"

/* "sha256:" and 64 hex digits, NUL-terminated. */
#define CONFIG_POLICY_DIGEST_SIZE (7 + 64 + 1)

/* A policy is a page of rules; anything near this is not one. */
#define CONFIG_POLICY_MAX_BYTES (4u * 1024 * 1024)

/* The policy keys, NULL-terminated, and their names for messages. */
extern const char *const config_policy_keys[];
#define CONFIG_POLICY_KEYS_TEXT "default, rules or secrets"

/* Whether `key` is a policy key. */
int config_policy_is_key(const char *key);

/* The policy part of a config's top-level object (a new object, the caller's). */
int config_policy_extract(json_t **out, const json_t *root, rg_error *err);

/*
 * A policy as its own JSON text (a --policy file, a published body): an
 * object with only policy keys, no repeated key. `label` names it in
 * errors. Whether its rules load is config_with_policy's to say.
 */
int config_policy_parse(json_t **out, const char *text, size_t len, const char *label,
                        rg_error *err);

/* The canonical form (malloc'd, NUL-terminated, *len without the NUL). */
int config_policy_canonical(char **out, size_t *len, const json_t *policy, rg_error *err);

/* The digest of the policy object: "sha256:" + hex of its canonical form. */
int config_policy_digest(char out[CONFIG_POLICY_DIGEST_SIZE], const json_t *policy, rg_error *err);

/* The digest of canonical bytes already made. */
int config_policy_digest_bytes(char out[CONFIG_POLICY_DIGEST_SIZE], const void *canonical,
                               size_t len, rg_error *err);

#endif
