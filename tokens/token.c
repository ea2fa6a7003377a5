/*
 * Run tokens: minting, verification and revocation (see token.h).
 *
 * A token is `rg2.<kid>.<b64url(claims JSON)>.<b64url(Ed25519 signature)>`,
 * the signature taken over everything before its dot, so the version and
 * the kid are signed too. The kid sits outside the claims on purpose: it
 * is needed to find the key before anything is verified, and a fixed
 * 16-hex-digit field is all that is read then. Verification checks the
 * shape, finds the public key by kid in the store, checks the signature,
 * and only then parses the claims: nothing an attacker wrote reaches the
 * JSON parser unless a published key signed it. Then the expiry, then the
 * store's revocations, asked every time.
 */
#include "tokens/token.h"
#include "tokens/b64url.h"
#include "util/text.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_BYTES      16
#define ID_HEX        (ID_BYTES * 2)
#define TOKEN_PREFIX  "rg2."
#define PREFIX_LEN    4
#define HOST_MAX      127 /* as gateway/route.h: host[128], path[512] */
#define REPO_PATH_MAX 511
#define REPO_SEGS_MAX 16

/* ------------------------------------------------------------------------
 * Validation of what goes into claims
 * ------------------------------------------------------------------------ */

static int run_valid(const char *run, rg_error *err)
{
    size_t i, len;

    if (run == NULL || run[0] == '\0')
        return rg_error_set(err, -EINVAL, "run name is empty");
    len = strnlen(run, TOKENS_RUN_MAX + 1);
    if (len > TOKENS_RUN_MAX)
        return rg_error_set(err, -EINVAL, "run name is longer than %d characters", TOKENS_RUN_MAX);
    /* Run names end up in logs and terminals: printable ASCII only. */
    for (i = 0; i < len; i++)
        if ((unsigned char)run[i] <= ' ' || (unsigned char)run[i] >= 0x7f)
            return rg_error_set(err, -EINVAL,
                                "run name may hold only printable ASCII without spaces");
    return 0;
}

/* The same segment rule as gateway/route.c, so a token names what a URL can. */
static int repo_valid(const char *repo, rg_error *err)
{
    const char *slash, *p;
    size_t len, seglen, nseg = 0;

    if (repo == NULL || repo[0] == '\0')
        return rg_error_set(err, -EINVAL, "empty repository name");
    len = strnlen(repo, HOST_MAX + 1 + REPO_PATH_MAX + 1);
    if (len > HOST_MAX + 1 + REPO_PATH_MAX)
        return rg_error_set(err, -EINVAL, "repository name is too long");
    slash = strchr(repo, '/');
    if (slash == NULL)
        return rg_error_set(err, -EINVAL, "repository '%s' is not <host>/<path>", repo);
    if ((size_t)(slash - repo) > HOST_MAX || !rg_name_segment_ok(repo, (size_t)(slash - repo)))
        return rg_error_set(err, -EINVAL, "repository '%s': invalid host", repo);
    p = slash + 1;
    if (strlen(p) > REPO_PATH_MAX)
        return rg_error_set(err, -EINVAL, "repository '%s': path is too long", repo);
    for (;; p = slash + 1) {
        slash = strchr(p, '/');
        seglen = slash ? (size_t)(slash - p) : strlen(p);
        if (!rg_name_segment_ok(p, seglen))
            return rg_error_set(err, -EINVAL,
                                "repository '%s': path segments must be plain names "
                                "(letters, digits, ._-+~; no empty, '.' or '..' segment)",
                                repo);
        if (++nseg > REPO_SEGS_MAX)
            return rg_error_set(err, -EINVAL, "repository '%s': more than %d path segments", repo,
                                REPO_SEGS_MAX);
        if (slash == NULL)
            break;
    }
    if (len >= 4 && !strcmp(repo + len - 4, ".git"))
        return rg_error_set(err, -EINVAL, "repository '%s': name it without '.git'", repo);
    return 0;
}

/* ------------------------------------------------------------------------
 * Minting
 * ------------------------------------------------------------------------ */

/* The signed text of a token being minted, written once the kid is known. */
typedef struct mint_text {
    char *tok; /* room for the whole token */
    const char *json;
    size_t jlen;
    size_t plen; /* set by mint_build: the length of the signed text */
} mint_text;

static int mint_build(const char *kid, void *arg, const void **msg, size_t *len, rg_error *err)
{
    mint_text *m = arg;
    size_t off;

    (void)err;
    memcpy(m->tok, TOKEN_PREFIX, PREFIX_LEN);
    memcpy(m->tok + PREFIX_LEN, kid, TOKENS_KID_HEX);
    off = PREFIX_LEN + TOKENS_KID_HEX;
    m->tok[off++] = '.';
    off += tokens_b64url_encode(m->tok + off, m->json, m->jlen);
    m->plen = off;
    *msg = m->tok;
    *len = off;
    return 0;
}

int tokens_mint(char **out, tokens_key *k, const char *run, const char *const *repos, size_t nrepos,
                int64_t ttl, int64_t now, rg_error *err)
{
    unsigned char id[ID_BYTES], sig[TOKENS_SIG_LEN];
    char idhex[ID_HEX + 1];
    json_t *claims = NULL, *list = NULL;
    char *json = NULL, *tok = NULL;
    mint_text m;
    size_t i, jlen, plen, total;
    int rc = 0;

    *out = NULL;
    if (k == NULL || (repos == NULL && nrepos > 0))
        return rg_error_set(err, -EINVAL, "tokens_mint: missing argument");
    rc = run_valid(run, err);
    if (rc < 0)
        goto done;
    if (nrepos == 0 || nrepos > TOKENS_REPOS_MAX) {
        rc = rg_error_set(err, -EINVAL, "a token names 1 to %d repositories, not %zu",
                          TOKENS_REPOS_MAX, nrepos);
        goto done;
    }
    for (i = 0; i < nrepos; i++) {
        rc = repo_valid(repos[i], err);
        if (rc < 0)
            goto done;
    }
    if (ttl <= 0 || ttl > TOKENS_TTL_MAX) {
        rc = rg_error_set(err, -EINVAL, "token lifetime must be 1 to %d seconds", TOKENS_TTL_MAX);
        goto done;
    }
    if (now < 0 || now > INT64_MAX - ttl) {
        rc = rg_error_set(err, -EINVAL, "bad current time");
        goto done;
    }
    if (RAND_bytes(id, sizeof(id)) != 1) {
        rc = rg_error_set(err, -EIO, "no randomness for a token id");
        goto done;
    }
    rg_hex_encode(idhex, id, sizeof(id));

    claims = json_object();
    list = json_array();
    if (claims == NULL || list == NULL)
        goto nomem;
    for (i = 0; i < nrepos; i++)
        if (json_array_append_new(list, json_string(repos[i])) < 0)
            goto nomem;
    if (json_object_set_new(claims, "id", json_string(idhex)) < 0 ||
        json_object_set_new(claims, "run", json_string(run)) < 0 ||
        json_object_set(claims, "repos", list) < 0 ||
        json_object_set_new(claims, "exp", json_integer((json_int_t)(now + ttl))) < 0)
        goto nomem;
    json = json_dumps(claims, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (json == NULL)
        goto nomem;
    jlen = strlen(json);

    plen = PREFIX_LEN + TOKENS_KID_HEX + 1 + tokens_b64url_encoded_len(jlen);
    total = plen + 1 + tokens_b64url_encoded_len(TOKENS_SIG_LEN);
    if (total > TOKENS_MAX_LEN) {
        rc = rg_error_set(err, RG_E_TOO_BIG,
                          "the token would be %zu bytes, more than %d: name fewer repositories",
                          total, TOKENS_MAX_LEN);
        goto done;
    }
    tok = malloc(total + 1);
    if (tok == NULL)
        goto nomem;
    m = (mint_text){.tok = tok, .json = json, .jlen = jlen};
    rc = tokens_key_sign_built(sig, k, mint_build, &m, err);
    if (rc < 0)
        goto done;
    tok[plen] = '.';
    tokens_b64url_encode(tok + plen + 1, sig, TOKENS_SIG_LEN);
    *out = tok;
    tok = NULL;
    goto done;
nomem:
    rc = rg_error_set(err, -ENOMEM, "out of memory");
done:
    tokens_secret_free(tok);
    free(json);
    json_decref(list);
    json_decref(claims);
    return rc;
}

/* ------------------------------------------------------------------------
 * Verification
 * ------------------------------------------------------------------------ */

void tokens_claims_free(tokens_claims *c)
{
    size_t i;

    if (c == NULL)
        return;
    free(c->id);
    free(c->run);
    for (i = 0; i < c->nrepos; i++)
        free(c->repos[i]);
    free(c->repos);
    free(c);
}

static int is_id(const char *s)
{
    size_t i;

    for (i = 0; i < ID_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[ID_HEX] == '\0';
}

/*
 * Turn signed claims JSON into tokens_claims. A signed token is one we
 * minted, so anything unexpected here means a different version or a bug:
 * it is refused as malformed rather than half-understood.
 */
static int claims_parse(tokens_claims **out, const unsigned char *json, size_t len)
{
    json_t *root, *id, *run, *repos, *exp, *item;
    tokens_claims *c = NULL;
    size_t i;
    int rc = -EINVAL;

    *out = NULL;
    root = json_loadb((const char *)json, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(root) || json_object_size(root) != 4)
        goto done;
    id = json_object_get(root, "id");
    run = json_object_get(root, "run");
    repos = json_object_get(root, "repos");
    exp = json_object_get(root, "exp");
    if (!json_is_string(id) || !is_id(json_string_value(id)) || !json_is_string(run) ||
        run_valid(json_string_value(run), NULL) < 0 || !json_is_array(repos) ||
        json_array_size(repos) == 0 || json_array_size(repos) > TOKENS_REPOS_MAX ||
        !json_is_integer(exp) || json_integer_value(exp) <= 0)
        goto done;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto nomem;
    c->id = strdup(json_string_value(id));
    c->run = strdup(json_string_value(run));
    c->repos = calloc(json_array_size(repos), sizeof(char *));
    if (c->id == NULL || c->run == NULL || c->repos == NULL)
        goto nomem;
    json_array_foreach(repos, i, item)
    {
        if (!json_is_string(item) || repo_valid(json_string_value(item), NULL) < 0)
            goto done;
        c->repos[i] = strdup(json_string_value(item));
        if (c->repos[i] == NULL)
            goto nomem;
        c->nrepos = i + 1;
    }
    c->exp = (int64_t)json_integer_value(exp);
    *out = c;
    c = NULL;
    rc = 0;
    goto done;
nomem:
    rc = -ENOMEM;
done:
    tokens_claims_free(c);
    json_decref(root);
    return rc;
}

static int is_kid(const char *s)
{
    size_t i;

    for (i = 0; i < TOKENS_KID_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* Whether sig is an Ed25519 signature of msg by the raw public key pub. */
static int signature_ok(const unsigned char pub[TOKENS_PUBLIC_KEY_LEN], const unsigned char *sig,
                        const char *msg, size_t len)
{
    EVP_PKEY *pkey;
    EVP_MD_CTX *md = NULL;
    int ok = 0;

    pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, TOKENS_PUBLIC_KEY_LEN);
    if (pkey == NULL)
        return 0;
    md = EVP_MD_CTX_new();
    if (md != NULL && EVP_DigestVerifyInit(md, NULL, NULL, NULL, pkey) == 1)
        ok = EVP_DigestVerify(md, sig, TOKENS_SIG_LEN, (const unsigned char *)msg, len) == 1;
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pkey);
    return ok;
}

/*
 * Check shape, key and signature and return the claims, whatever the
 * expiry or revocation: tokens_verify adds those checks, tokens_revoke
 * must not. Returns 0 with *status set, or negative (with err) when the
 * store could not answer or memory ran out.
 */
static int token_check(tokens_claims **out, tokens_status *status, tokens_store *s,
                       const char *token, rg_error *err)
{
    unsigned char given[TOKENS_SIG_LEN + 2], pub[TOKENS_PUBLIC_KEY_LEN];
    unsigned char *json = NULL;
    const char *body, *dot, *sig;
    char kid[TOKENS_KID_SIZE];
    size_t len, plen, siglen, givenlen = 0, jlen = 0, blen;
    int rc = 0, found = 0;

    *out = NULL;
    *status = TOKENS_MALFORMED;
    if (token == NULL)
        goto done;
    len = strnlen(token, TOKENS_MAX_LEN + 1);
    if (len > TOKENS_MAX_LEN || len < PREFIX_LEN + TOKENS_KID_HEX + 1 ||
        memcmp(token, TOKEN_PREFIX, PREFIX_LEN) != 0 || !is_kid(token + PREFIX_LEN) ||
        token[PREFIX_LEN + TOKENS_KID_HEX] != '.')
        goto done;
    memcpy(kid, token + PREFIX_LEN, TOKENS_KID_HEX);
    kid[TOKENS_KID_HEX] = '\0';
    body = token + PREFIX_LEN + TOKENS_KID_HEX + 1;
    dot = memchr(body, '.', len - (size_t)(body - token));
    if (dot == NULL || dot == body)
        goto done;
    plen = (size_t)(dot - token);
    blen = (size_t)(dot - body);
    sig = dot + 1;
    siglen = len - plen - 1;
    /* A fixed length, and the decoder refuses any further dot. */
    if (siglen != tokens_b64url_encoded_len(TOKENS_SIG_LEN) ||
        tokens_b64url_decode(given, &givenlen, sig, siglen) < 0 || givenlen != TOKENS_SIG_LEN)
        goto done;
    rc = tokens_store_key_get(s, &found, pub, kid, err);
    if (rc < 0)
        goto done;
    if (!found) {
        *status = TOKENS_UNKNOWN_KEY;
        goto done;
    }
    if (!signature_ok(pub, given, token, plen)) {
        *status = TOKENS_BAD_SIGNATURE;
        goto done;
    }
    /* Signed by a published key: only now is the payload worth decoding and parsing. */
    json = malloc(blen * 3 / 4 + 1);
    if (json == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if (tokens_b64url_decode(json, &jlen, body, blen) < 0)
        goto done;
    rc = claims_parse(out, json, jlen);
    if (rc == -EINVAL) {
        rc = 0; /* malformed claims: *status stays TOKENS_MALFORMED */
    } else if (rc < 0) {
        rg_error_set(err, rc, "out of memory");
    } else {
        memcpy((*out)->kid, kid, TOKENS_KID_SIZE);
        *status = TOKENS_OK;
    }
done:
    free(json);
    return rc;
}

int tokens_verify(tokens_claims **out, tokens_status *status, tokens_store *s, const char *token,
                  int64_t now, rg_error *err)
{
    tokens_claims *c = NULL;
    int rc, revoked = 0;

    *out = NULL;
    *status = TOKENS_MALFORMED;
    if (s == NULL)
        return rg_error_set(err, -EINVAL, "tokens_verify: missing argument");
    rc = token_check(&c, status, s, token, err);
    if (rc < 0) {
        /* Fail closed: a token whose key cannot be looked up is refused. */
        *status = TOKENS_MALFORMED;
        rg_error_wrap(err, "cannot check the token's key");
        goto done;
    }
    if (*status != TOKENS_OK)
        goto done;
    if (now >= c->exp) {
        *status = TOKENS_EXPIRED;
        goto done;
    }
    rc = tokens_store_is_revoked(s, &revoked, c->id, err);
    if (rc < 0) {
        /* Fail closed: a token we cannot check against revocations is refused. */
        *status = TOKENS_REVOKED;
        rg_error_wrap(err, "cannot check token revocations");
        goto done;
    }
    if (revoked) {
        *status = TOKENS_REVOKED;
        goto done;
    }
    *out = c;
    c = NULL;
done:
    tokens_claims_free(c);
    return rc;
}

int tokens_claims_allow_repo(const tokens_claims *c, const char *repo)
{
    size_t i;

    if (c == NULL || repo == NULL)
        return 0;
    for (i = 0; i < c->nrepos; i++)
        if (!strcmp(c->repos[i], repo))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------
 * Revocation
 * ------------------------------------------------------------------------ */

int tokens_revoke(tokens_store *s, const char *token, rg_error *err)
{
    tokens_claims *c = NULL;
    tokens_status status;
    int rc;

    if (s == NULL)
        return rg_error_set(err, -EINVAL, "tokens_revoke: missing argument");
    rc = token_check(&c, &status, s, token, err);
    if (rc < 0) {
        rg_error_wrap(err, "checking the token");
        goto done;
    }
    if (status != TOKENS_OK) {
        rc = rg_error_set(err, RG_E_AUTH, "%s",
                          status == TOKENS_BAD_SIGNATURE ? "the token's signature does not verify"
                          : status == TOKENS_UNKNOWN_KEY
                              ? "the token was not signed by a key of this gateway's token store"
                              : "not a refgate run token");
        goto done;
    }
    rc = tokens_store_revoke(s, c->id, c->exp, err);
done:
    tokens_claims_free(c);
    return rc;
}

/* ------------------------------------------------------------------------
 * Naming and freeing
 * ------------------------------------------------------------------------ */

void tokens_hash_prefix(char out[TOKENS_HASH_PREFIX_SIZE], const char *token)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    const char *t = token ? token : "";

    if (EVP_Digest(t, strlen(t), md, &mdlen, EVP_sha256(), NULL) != 1 ||
        mdlen < TOKENS_HASH_PREFIX_HEX / 2) {
        /* Never fall back to anything derived from the token itself. */
        memset(out, '?', TOKENS_HASH_PREFIX_HEX);
        out[TOKENS_HASH_PREFIX_HEX] = '\0';
        return;
    }
    rg_hex_encode(out, md, TOKENS_HASH_PREFIX_HEX / 2);
}

void tokens_secret_free(char *s)
{
    if (s == NULL)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

const char *tokens_status_message(tokens_status s)
{
    switch (s) {
    case TOKENS_OK:
        return "valid";
    case TOKENS_MALFORMED:
        return "not a refgate run token";
    case TOKENS_BAD_SIGNATURE:
        return "token signature does not verify";
    case TOKENS_UNKNOWN_KEY:
        return "token was signed by a key no gateway published";
    case TOKENS_EXPIRED:
        return "token has expired";
    case TOKENS_REVOKED:
        return "token has been revoked";
    }
    return "unknown token status";
}
