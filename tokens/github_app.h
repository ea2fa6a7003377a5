/*
 * The github-app credential provider: a GitHub App's private key turned
 * into installation tokens scoped to one repository and one permission set,
 * minted for one request and revoked after it. The App key never leaves
 * the gateway; what goes upstream is an installation token that is worth
 * little once revoked. Used by tokens/credentials.c, which owns the file
 * checks; this module owns the GitHub REST API conversation.
 */
#ifndef RG_TOKENS_GITHUB_APP_H
#define RG_TOKENS_GITHUB_APP_H

#include <stddef.h>

#include "config/config.h"
#include "tokens/credentials.h"
#include "util/error.h"

typedef struct tokens_github_app tokens_github_app;

/*
 * Make a provider from `cfg` (type github-app) and the private key's PEM
 * text (`pem`, `len`; the caller wipes it). `key_name` names the key in
 * errors. `ca_file` (may be NULL: the system CAs) verifies the API's TLS.
 */
int tokens_github_app_new(tokens_github_app **out, const config_credentials *cfg, const char *pem,
                          size_t len, const char *key_name, const char *ca_file, rg_error *err);
void tokens_github_app_free(tokens_github_app *app);

/* Read the time and wait on `clock` (copied) instead of the system's. */
void tokens_github_app_set_clock(tokens_github_app *app, const tokens_clock *clock);

/*
 * Mint an installation token for `repo_path` ("owner/name") alone:
 * contents read or write, plus workflows write when `flags` has
 * TOKENS_CRED_WORKFLOWS and access is write. *out is the caller's, freed
 * with tokens_secret_free. Thread-safe.
 */
int tokens_github_app_mint(char **out, tokens_github_app *app, const char *repo_path,
                           tokens_access access, unsigned flags, rg_error *err);

/* Revoke an installation token (DELETE /installation/token). */
int tokens_github_app_revoke(tokens_github_app *app, const char *token, rg_error *err);

#endif
