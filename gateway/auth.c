/* Authentication of requests by run token; see auth.h. */
#include "gateway/auth.h"

#include "util/log.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Longer than any token tokens_mint makes, with room for a user name. */
#define AUTH_HEADER_MAX 12288

static void deny(gateway_auth *out, unsigned status, const char *msg)
{
    out->status = status;
    snprintf(out->message, sizeof(out->message), "%s", msg);
}

void gateway_auth_check(gateway_auth *out, const gateway_ctx *ctx, const char *authorization,
                        const char *repo)
{
    unsigned char *decoded = NULL;
    const char *b64, *token;
    tokens_status ts = TOKENS_MALFORMED;
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    size_t len, dlen;
    int n;

    memset(out, 0, sizeof(*out));
    if (authorization == NULL) {
        deny(out, 401, "authentication required: the password is the run's refgate token");
        return;
    }
    len = strlen(authorization);
    if (len > AUTH_HEADER_MAX || strncasecmp(authorization, "Basic ", 6) != 0) {
        deny(out, 401, "unsupported authorization: use HTTP Basic with the run token as password");
        return;
    }
    b64 = authorization + 6;
    while (*b64 == ' ')
        b64++;
    len = strlen(b64);
    decoded = malloc(len + 1);
    if (decoded == NULL) {
        deny(out, 500, "out of memory");
        return;
    }
    n = EVP_DecodeBlock(decoded, (const unsigned char *)b64, (int)len);
    if (n < 0 || len % 4 != 0) {
        deny(out, 401, "malformed Basic credentials");
        goto done;
    }
    /* EVP_DecodeBlock counts the padding as zero bytes: take them off. */
    dlen = (size_t)n;
    if (len >= 1 && b64[len - 1] == '=')
        dlen--;
    if (len >= 2 && b64[len - 2] == '=')
        dlen--;
    decoded[dlen] = '\0';
    token = memchr(decoded, ':', dlen);
    if (token == NULL || strlen((const char *)decoded) != dlen) {
        deny(out, 401, "malformed Basic credentials");
        goto done;
    }
    token++;
    tokens_hash_prefix(out->token_hash, token);
    if (tokens_verify(&out->claims, &ts, ctx->tokens, token, (int64_t)time(NULL), &e) < 0) {
        /* A check that cannot be made refuses (fail closed), and says why. */
        rg_log(RG_LOG_ERR, "token_check_failed", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
        deny(out, 503,
             e.code == RG_E_STATE
                 ? "the run token cannot be checked: the gateway cannot reach its shared state "
                   "database (token keys and revocations); try again later"
             : e.code == -EAGAIN
                 ? "too many tokens signed by unknown keys right now; try again in a second"
                 : "the run token cannot be checked (token keys or revocations cannot be read); "
                   "try again later");
        goto done;
    }
    switch (ts) {
    case TOKENS_OK:
        break;
    case TOKENS_EXPIRED:
        deny(out, 403, "the run token has expired: mint a new one");
        goto done;
    case TOKENS_REVOKED:
        deny(out, 403, "the run token has been revoked");
        goto done;
    case TOKENS_UNKNOWN_KEY:
        deny(out, 401, "invalid run token: signed by a key no gateway of this team published");
        goto done;
    default:
        deny(out, 401, "invalid run token");
        goto done;
    }
    if (!tokens_claims_allow_repo(out->claims, repo)) {
        out->status = 403;
        snprintf(out->message, sizeof(out->message),
                 "the run token does not cover %s (it is for another repository)", repo);
        tokens_claims_free(out->claims);
        out->claims = NULL;
    }
done:
    explicit_bzero(decoded, len + 1);
    free(decoded);
}
