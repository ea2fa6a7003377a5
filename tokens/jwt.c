/*
 * RS256 JWT signing for GitHub App authentication (see jwt.h). The claims
 * are built with jansson in a fixed key order so that a JWT is easy to
 * read in a debugger; nothing depends on the order.
 */
#include "tokens/jwt.h"
#include "tokens/b64url.h"
#include "tokens/token.h"

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

/* GitHub App keys are 2048-bit; 16384 bits is far past any real key. */
#define KEY_PEM_MAX  (64u * 1024)
#define RSA_MIN_BITS 2048

struct tokens_jwt_key {
    EVP_PKEY *pkey;
};

/* The header never changes: RS256, and "typ" as RFC 7519 suggests. */
static const char jwt_header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";

int tokens_jwt_key_parse(tokens_jwt_key **out, const char *pem, size_t len, const char *what,
                         rg_error *err)
{
    tokens_jwt_key *k = NULL;
    EVP_PKEY *pkey = NULL;
    BIO *bio = NULL;
    int rc = 0;

    *out = NULL;
    if (len == 0 || len > KEY_PEM_MAX)
        return rg_error_set(err, RG_E_CONFIG, "%s: not a PEM private key (%zu bytes)", what, len);
    bio = BIO_new_mem_buf(pem, (int)len);
    if (bio == NULL) {
        rc = rg_error_set(err, -ENOMEM, "%s: out of memory", what);
        goto done;
    }
    /* A NULL password callback with an empty password: an encrypted key
     * fails here instead of prompting on the gateway's terminal. */
    pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, (void *)"");
    /* OpenSSL's error queue may hold parts of what it read; drop it. */
    ERR_clear_error();
    if (pkey == NULL) {
        rc = rg_error_set(err, RG_E_CONFIG,
                          "%s: not a PEM RSA private key (expected the .pem file GitHub "
                          "generated for the App, unencrypted)",
                          what);
        goto done;
    }
    if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: not an RSA key (RS256 needs RSA)", what);
        goto done;
    }
    if (EVP_PKEY_get_bits(pkey) < RSA_MIN_BITS) {
        rc = rg_error_set(err, RG_E_CONFIG, "%s: a %d-bit RSA key is too weak (at least %d)", what,
                          EVP_PKEY_get_bits(pkey), RSA_MIN_BITS);
        goto done;
    }
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        rc = rg_error_set(err, -ENOMEM, "%s: out of memory", what);
        goto done;
    }
    k->pkey = pkey;
    pkey = NULL;
    *out = k;
done:
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    return rc;
}

void tokens_jwt_key_free(tokens_jwt_key *k)
{
    if (k == NULL)
        return;
    /* EVP_PKEY_free clears RSA private components (BN_clear_free). */
    EVP_PKEY_free(k->pkey);
    free(k);
}

/* Append the base64url form of `len` bytes to `out` at *pos. */
static void put_b64(char *out, size_t *pos, const void *in, size_t len)
{
    *pos += tokens_b64url_encode(out + *pos, in, len);
}

int tokens_jwt_sign_rs256(char **out, const tokens_jwt_key *k, const char *iss, int64_t iat,
                          int64_t exp, rg_error *err)
{
    unsigned char *sig = NULL;
    EVP_MD_CTX *md = NULL;
    json_t *claims = NULL;
    char *payload = NULL, *jwt = NULL;
    size_t plen, siglen = 0, cap, pos = 0;
    int rc = 0;

    *out = NULL;
    if (k == NULL || iss == NULL || exp <= iat)
        return rg_error_set(err, -EINVAL, "jwt: bad arguments");
    claims = json_pack("{sIsIss}", "iat", (json_int_t)iat, "exp", (json_int_t)exp, "iss", iss);
    payload = claims ? json_dumps(claims, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (payload == NULL) {
        rc = rg_error_set(err, -ENOMEM, "jwt: out of memory");
        goto done;
    }
    plen = strlen(payload);
    md = EVP_MD_CTX_new();
    if (md == NULL || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k->pkey) != 1 ||
        EVP_DigestSign(md, NULL, &siglen, NULL, 0) != 1) {
        rc = rg_error_set(err, RG_E_CONFIG, "jwt: cannot set up RS256 signing");
        goto done;
    }
    cap = tokens_b64url_encoded_len(sizeof(jwt_header) - 1) + 1 + tokens_b64url_encoded_len(plen) +
          1 + tokens_b64url_encoded_len(siglen) + 1;
    jwt = malloc(cap);
    sig = malloc(siglen);
    if (jwt == NULL || sig == NULL) {
        rc = rg_error_set(err, -ENOMEM, "jwt: out of memory");
        goto done;
    }
    put_b64(jwt, &pos, jwt_header, sizeof(jwt_header) - 1);
    jwt[pos++] = '.';
    put_b64(jwt, &pos, payload, plen);
    /* The signature covers "<header>.<payload>" exactly as encoded. */
    if (EVP_DigestSign(md, sig, &siglen, (const unsigned char *)jwt, pos) != 1) {
        rc = rg_error_set(err, RG_E_CONFIG, "jwt: RS256 signing failed");
        goto done;
    }
    jwt[pos++] = '.';
    put_b64(jwt, &pos, sig, siglen);
    *out = jwt;
    jwt = NULL;
done:
    ERR_clear_error();
    EVP_MD_CTX_free(md);
    free(sig);
    free(payload);
    json_decref(claims);
    /* Only an unsigned JWT is left here, which grants nothing. */
    free(jwt);
    return rc;
}
