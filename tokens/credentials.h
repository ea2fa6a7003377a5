/*
 * Upstream credentials: what the gateway presents to a remote upstream.
 * The run never holds these. A provider is made once per upstream from its
 * config; a credential is acquired for one request (one advertisement, one
 * forwarded push, one mirror fetch) and released as soon as it is answered:
 * a github-app provider mints an installation token scoped to that one
 * repository and revokes it on release. Secrets are wiped when released and
 * never appear in messages (a short SHA-256 prefix may).
 */
#ifndef RG_TOKENS_CREDENTIALS_H
#define RG_TOKENS_CREDENTIALS_H

#include "config/config.h"
#include "tokens/clock.h"
#include "tokens/token.h"
#include "util/error.h"

typedef enum tokens_access {
    TOKENS_ACCESS_READ,  /* contents: read */
    TOKENS_ACCESS_WRITE, /* contents: write */
} tokens_access;

enum {
    /* The push changes .github/workflows/ and policy allowed it:
     * github-app tokens then also get "workflows": "write". */
    TOKENS_CRED_WORKFLOWS = 1 << 0,
};

typedef struct tokens_provider tokens_provider;

typedef struct tokens_credential {
    char *username;                     /* NULL for type none */
    char *password;                     /* the secret; NULL for type none */
    char hash[TOKENS_HASH_PREFIX_SIZE]; /* tokens_hash_prefix() of the password, for logs */
} tokens_credential;

/*
 * Make a provider. Checks now what can be checked: a static token_file or a
 * private key that is group- or world-readable is refused (saying why), as
 * is one that cannot be read. `ca_file` (may be NULL) is used for the API
 * calls of github-app.
 */
int tokens_provider_new(tokens_provider **out, const config_credentials *cfg, const char *ca_file,
                        rg_error *err);
void tokens_provider_free(tokens_provider *p);

/* Read the time and wait on `clock` (copied) instead of the system's: for tests. */
void tokens_provider_set_clock(tokens_provider *p, const tokens_clock *clock);

/*
 * A credential for `repo_path` ("owner/name", no .git) with `access`.
 * github-app: a fresh installation token for that repository alone (the
 * installation found with GET /repos/{owner}/{repo}/installation when not
 * configured, cached), honouring rate-limit answers. Thread-safe.
 */
int tokens_provider_acquire(tokens_credential **out, tokens_provider *p, const char *repo_path,
                            tokens_access access, unsigned flags, rg_error *err);

/* Revoke (github-app: DELETE /installation/token), wipe and free. NULL ok. */
void tokens_provider_release(tokens_provider *p, tokens_credential *c);

/*
 * The same, saying whether the revocation worked: a github-app token that
 * could not be revoked stays valid until it expires (up to an hour), which
 * the caller may want to record. The credential is wiped and freed either
 * way. Returns 0 or a negative code with err set (naming the token only by
 * its hash prefix).
 */
int tokens_provider_release_checked(tokens_provider *p, tokens_credential *c, rg_error *err);

#endif
