/*
 * RS256 JSON Web Tokens, as a GitHub App signs to authenticate as itself:
 * the header {"alg":"RS256","typ":"JWT"}, claims iat, exp and iss, and an
 * RSASSA-PKCS1-v1_5 SHA-256 signature. Only signing lives here; the gateway
 * never needs to verify one. The private key is parsed once and kept as an
 * OpenSSL key object so the PEM text can be wiped right after loading.
 */
#ifndef RG_TOKENS_JWT_H
#define RG_TOKENS_JWT_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct tokens_jwt_key tokens_jwt_key;

/*
 * Parse an RSA private key from `len` bytes of PEM (PKCS#1 "RSA PRIVATE
 * KEY", as GitHub hands it out, or PKCS#8). `what` names the key in errors
 * (its file); the PEM itself never appears in a message.
 */
int tokens_jwt_key_parse(tokens_jwt_key **out, const char *pem, size_t len, const char *what,
                         rg_error *err);
void tokens_jwt_key_free(tokens_jwt_key *k);

/*
 * Sign a JWT with claims {"iat": iat, "exp": exp, "iss": "<iss>"}. *out is
 * the caller's, freed with tokens_secret_free (a JWT is a bearer secret for
 * as long as it lives).
 */
int tokens_jwt_sign_rs256(char **out, const tokens_jwt_key *k, const char *iss, int64_t iat,
                          int64_t exp, rg_error *err);

#endif
