/*
 * Who is pushing: HTTP Basic with the run token as the password (any user
 * name), as git's credential helpers answer. A missing or unreadable token
 * gets 401 so git asks its helper; a token that verifies but is expired,
 * revoked or for another repository gets 403 with a message saying which
 * (git prints a text/plain body as `remote:` lines). A token that cannot be
 * checked (the token store, e.g. the shared database, cannot be read) gets
 * 503 naming what could not be read: refused, never "invalid".
 */
#ifndef RG_GATEWAY_AUTH_H
#define RG_GATEWAY_AUTH_H

#include "gateway/context.h"
#include "tokens/token.h"

typedef struct gateway_auth {
    unsigned status;   /* 0 when authorised, else the HTTP status to answer */
    char message[256]; /* why not, for the client; never contains the token */
    tokens_claims *claims;
    char token_hash[TOKENS_HASH_PREFIX_SIZE];
} gateway_auth;

/*
 * Check the Authorization header value `authorization` (NULL when absent)
 * for access to `repo`. Fills *out; the caller frees out->claims.
 */
void gateway_auth_check(gateway_auth *out, const gateway_ctx *ctx, const char *authorization,
                        const char *repo);

#endif
