/*
 * Content conditions on rules (issue 10), as the configuration states them:
 * predicates "the push contains ..." that sit on a rule next to its
 * selectors. A rule with conditions matches an update when its selectors
 * match and every one of its conditions holds (policy/eval.h); whether they
 * hold is worked out by the gateway from the pushed pack
 * (inspect/conditions.h).
 *
 *   "paths": ["glob", ...]          a changed path matches one (rg_glob_match:
 *                                   `*` one segment, `**` any)
 *   "max_file_bytes": N             a blob the push brings is larger than N
 *   "max_path_length": N            a changed path is longer than N bytes
 *   "secrets": true                 added content carries a credential
 *   "author_email_not": "ERE"       a commit's author email does not match
 *   "committer_email_not": "ERE"    a commit's committer email does not match
 *   "message_not": "ERE"            a commit message does not match (any line;
 *                                   ^ and $ anchor at line ends)
 *   "merge_commits": true           a commit has more than one parent
 *   "unsigned": true                a commit carries no signature verified
 *                                   against the keys "signing" names
 *
 * Top level, next to "rules":
 *   "secrets": {"patterns": [{"name", "regex"}], "allow": ["<fingerprint>"]}
 * extra detectors and allowed false positives for "secrets": true, compiled
 * once at load (content/secrets.h);
 *   "signing": {"allowed_signers": FILE, "gpg_keyring": FILE}
 * the keys "unsigned" accepts: an SSH allowed-signers file (git's
 * gpg.ssh.allowedSignersFile format) and/or an OpenPGP keyring (`gpg
 * --export`), paths relative to the config, read when a push is checked.
 * "unsigned" without either is an error: nothing could ever verify.
 *
 * Regexes are POSIX extended, compiled at load; an error names the rule.
 * The model owns everything here; config_free releases it.
 */
#ifndef RG_CONFIG_CONDITIONS_H
#define RG_CONFIG_CONDITIONS_H

#include <jansson.h>
#include <regex.h>
#include <stddef.h>
#include <stdint.h>

#include "content/secrets.h"
#include "util/error.h"

typedef enum config_condition {
    CONFIG_COND_PATHS = 1 << 0,
    CONFIG_COND_MAX_FILE_BYTES = 1 << 1,
    CONFIG_COND_MAX_PATH_LENGTH = 1 << 2,
    CONFIG_COND_SECRETS = 1 << 3,
    CONFIG_COND_AUTHOR_EMAIL_NOT = 1 << 4,
    CONFIG_COND_COMMITTER_EMAIL_NOT = 1 << 5,
    CONFIG_COND_MESSAGE_NOT = 1 << 6,
    CONFIG_COND_MERGE_COMMITS = 1 << 7,
    CONFIG_COND_UNSIGNED = 1 << 8,
} config_condition;

#define CONFIG_COND_COUNT 9

/* Decided by every object of the pack, whatever ref it reaches. */
#define CONFIG_COND_PACK (CONFIG_COND_MAX_FILE_BYTES | CONFIG_COND_SECRETS)

typedef struct config_conditions {
    unsigned set; /* config_condition bits the rule has; 0: no conditions */
    char **paths;
    size_t npaths;
    uint64_t max_file_bytes;
    uint64_t max_path_length;
    /* Compiled when their bit is set. */
    regex_t author_email_not, committer_email_not, message_not;
} config_conditions;

/* The top-level "secrets" object: NULL scanner until a rule asks for secrets. */
typedef struct config_secrets {
    content_secrets *scanner;
} config_secrets;

/* The top-level "signing" object: absolute paths, NULL when not given. */
typedef struct config_signing {
    char *allowed_signers;
    char *gpg_keyring;
} config_signing;

/* The rule keys this module owns, NULL-terminated, and their names for messages. */
extern const char *const config_condition_keys[];
#define CONFIG_CONDITION_KEYS_TEXT                                                                 \
    "paths, max_file_bytes, max_path_length, secrets, author_email_not, committer_email_not, "     \
    "message_not, merge_commits, unsigned"

/* The key that states `c` ("paths", ...); "unknown" otherwise. */
const char *config_condition_name(config_condition c);

/*
 * Parse the condition keys of the rule object `rule` (key path `kp`, file
 * `file` for messages) into `out`. RG_E_CONFIG with "<file>: <key>: why".
 */
int config_conditions_parse(config_conditions *out, const json_t *rule, const char *file,
                            const char *kp, rg_error *err);
void config_conditions_free(config_conditions *c);

/*
 * Parse the top-level "secrets" object (`v`, may be NULL) and compile the
 * scanner when `needed` (some rule has "secrets": true).
 */
int config_secrets_parse(config_secrets *out, const json_t *v, int needed, const char *file,
                         rg_error *err);
void config_secrets_free(config_secrets *s);

/*
 * Parse the top-level "signing" object (`v`, may be NULL); relative paths
 * are taken from `dir`, and each file must be readable now.
 */
int config_signing_parse(config_signing *out, const json_t *v, const char *file, const char *dir,
                         rg_error *err);
void config_signing_free(config_signing *s);

#endif
