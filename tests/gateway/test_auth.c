/*
 * Authentication of requests by run token (gateway/auth.c): how the HTTP
 * Basic header is read (scheme in any case, padding, a missing or second
 * colon, an empty password, bad base64, a header too long) and what each
 * token state is answered, against a real key and token store in a
 * temporary state directory.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "gateway/auth.h"
#include "support/gwctx.h"
#include "tokens/key.h"
#include "tokens/token.h"
#include "util/fs.h"

#define REPO "local/acme/app"

static char dir[PATH_MAX];
static config_model *cfg;
static gateway_ctx ctx;
static char *token; /* a valid token for REPO */

static void setup(void)
{
    const char *repos[] = {REPO};
    rg_error err = RG_ERROR_INIT;

    snprintf(dir, sizeof(dir), "/tmp/rg-auth-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cfg = test_gw_config(&ctx, dir, NULL);
    test_gw_tokens(&ctx);
    cr_assert_eq(tokens_mint(&token, ctx.key, "unit", repos, 1, 600, time(NULL), &err), 0, "%s",
                 err.msg);
}

static void teardown(void)
{
    tokens_secret_free(token);
    test_gw_free(&ctx, cfg, dir);
}

TestSuite(auth, .init = setup, .fini = teardown);

/* "<scheme> base64(<user>:<password>)" into a buffer the caller frees. */
static char *basic(const char *scheme, const char *user, const char *password)
{
    size_t ulen = strlen(user), plen = strlen(password), len = ulen + 1 + plen;
    char *raw = malloc(len + 1), *out = malloc(strlen(scheme) + 1 + 4 * (len / 3 + 1) + 1);

    cr_assert(raw && out);
    memcpy(raw, user, ulen);
    raw[ulen] = ':';
    memcpy(raw + ulen + 1, password, plen + 1);
    sprintf(out, "%s ", scheme);
    EVP_EncodeBlock((unsigned char *)out + strlen(out), (unsigned char *)raw, (int)len);
    free(raw);
    return out;
}

/* Check `header` for REPO; the status, with out filled for the caller. */
static unsigned check(gateway_auth *out, const char *header)
{
    gateway_auth_check(out, &ctx, header, REPO);
    cr_expect_null(strstr(out->message, token), "the message must not carry the token");
    if (out->status != 0)
        cr_expect_null(out->claims, "a refused request has no claims");
    return out->status;
}

Test(auth, a_valid_token_as_the_basic_password_is_authorised)
{
    gateway_auth a;
    char *h = basic("Basic", "x-access-token", token);
    char want[TOKENS_HASH_PREFIX_SIZE];

    cr_assert_eq(check(&a, h), 0, "%s", a.message);
    cr_assert_not_null(a.claims);
    cr_expect_str_eq(a.claims->run, "unit");
    tokens_hash_prefix(want, token);
    cr_expect_str_eq(a.token_hash, want);
    tokens_claims_free(a.claims);
    free(h);
}

Test(auth, the_scheme_is_matched_in_any_case_and_an_empty_user_is_fine)
{
    const char *schemes[] = {"basic", "BASIC", "bAsIc"};

    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        gateway_auth a;
        char *h = basic(schemes[i], "", token);

        cr_expect_eq(check(&a, h), 0, "%s: %s", schemes[i], a.message);
        tokens_claims_free(a.claims);
        free(h);
    }
}

Test(auth, extra_spaces_after_the_scheme_are_skipped)
{
    gateway_auth a;
    char *h = basic("Basic", "u", token), *spaced = malloc(strlen(h) + 4);

    sprintf(spaced, "Basic   %s", h + strlen("Basic "));
    cr_expect_eq(check(&a, spaced), 0, "%s", a.message);
    tokens_claims_free(a.claims);
    free(spaced);
    free(h);
}

Test(auth, no_header_asks_for_credentials_with_401)
{
    gateway_auth a;

    cr_assert_eq(check(&a, NULL), 401);
    cr_expect(strstr(a.message, "authentication required") != NULL, "%s", a.message);
}

Test(auth, other_schemes_and_a_bare_scheme_are_refused_as_unsupported)
{
    const char *headers[] = {"Bearer abc", "Basic", "Basicx", "Digest username=\"u\"", ""};

    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        gateway_auth a;

        cr_expect_eq(check(&a, headers[i]), 401, "%s", headers[i]);
        cr_expect(strstr(a.message, "unsupported authorization") != NULL, "%s: %s", headers[i],
                  a.message);
    }
}

Test(auth, bad_base64_is_malformed)
{
    /* Not base64, a length that is not a multiple of 4, padding in the middle. */
    const char *headers[] = {"Basic !!!!", "Basic dTp", "Basic dT0=dTp4",
                             "Basic ====", "Basic dTp4\n"};

    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        gateway_auth a;

        cr_expect_eq(check(&a, headers[i]), 401, "%s", headers[i]);
        cr_expect(strstr(a.message, "malformed") != NULL || strstr(a.message, "invalid") != NULL,
                  "%s: %s", headers[i], a.message);
    }
}

Test(auth, credentials_without_a_colon_are_malformed)
{
    gateway_auth a;
    unsigned char enc[TOKENS_MAX_LEN * 2];
    char h[TOKENS_MAX_LEN * 2 + 8];

    EVP_EncodeBlock(enc, (const unsigned char *)token, (int)strlen(token));
    snprintf(h, sizeof(h), "Basic %s", enc);
    cr_assert_eq(check(&a, h), 401);
    cr_expect_str_eq(a.message, "malformed Basic credentials");
}

Test(auth, a_nul_inside_the_credentials_is_malformed)
{
    gateway_auth a;
    unsigned char enc[64];
    char h[80];

    EVP_EncodeBlock(enc, (const unsigned char *)"u\0:abc", 6);
    snprintf(h, sizeof(h), "Basic %s", enc);
    cr_assert_eq(check(&a, h), 401);
    cr_expect_str_eq(a.message, "malformed Basic credentials");
}

Test(auth, the_password_is_everything_after_the_first_colon)
{
    gateway_auth a;
    char *h = basic("Basic", "user:name", token);
    char *extra = basic("Basic", "user", "x:y");

    /* A user name cannot hold a colon: the rest of it joins the password. */
    cr_expect_eq(check(&a, h), 401);
    cr_expect_str_eq(a.message, "invalid run token");
    cr_expect_eq(check(&a, extra), 401);
    cr_expect_str_eq(a.message, "invalid run token");
    free(h);
    free(extra);
}

Test(auth, an_empty_password_is_an_invalid_token)
{
    gateway_auth a;
    char *h = basic("Basic", "user", "");

    cr_assert_eq(check(&a, h), 401);
    cr_expect_str_eq(a.message, "invalid run token");
    free(h);
}

Test(auth, an_oversized_header_is_refused_before_decoding)
{
    gateway_auth a;
    size_t n = 13000;
    char *h = malloc(n + 1);

    memcpy(h, "Basic ", 6);
    memset(h + 6, 'A', n - 6);
    h[n] = '\0';
    cr_assert_eq(check(&a, h), 401);
    cr_expect(strstr(a.message, "unsupported authorization") != NULL, "%s", a.message);
    free(h);
}

Test(auth, a_token_with_one_byte_changed_is_invalid)
{
    gateway_auth a;
    char *bad = strdup(token), *h;

    bad[strlen(bad) - 2] = bad[strlen(bad) - 2] == 'A' ? 'B' : 'A';
    h = basic("Basic", "u", bad);
    cr_assert_eq(check(&a, h), 401);
    cr_expect_str_eq(a.message, "invalid run token");
    free(h);
    free(bad);
}

Test(auth, a_token_for_another_repository_gets_403_naming_the_repository)
{
    gateway_auth a;
    char *h = basic("Basic", "u", token);

    gateway_auth_check(&a, &ctx, h, "local/acme/other");
    cr_assert_eq(a.status, 403);
    cr_expect_null(a.claims);
    cr_expect(strstr(a.message, "local/acme/other") != NULL, "%s", a.message);
    free(h);
}

Test(auth, expired_and_revoked_tokens_get_403_saying_which)
{
    const char *repos[] = {REPO};
    rg_error err = RG_ERROR_INIT;
    gateway_auth a;
    char *old = NULL, *h;

    cr_assert_eq(tokens_mint(&old, ctx.key, "unit", repos, 1, 60, time(NULL) - 3600, &err), 0, "%s",
                 err.msg);
    h = basic("Basic", "u", old);
    cr_expect_eq(check(&a, h), 403);
    cr_expect(strstr(a.message, "expired") != NULL, "%s", a.message);
    free(h);
    tokens_secret_free(old);

    cr_assert_eq(tokens_revoke(ctx.tokens, token, &err), 0, "%s", err.msg);
    h = basic("Basic", "u", token);
    cr_expect_eq(check(&a, h), 403);
    cr_expect(strstr(a.message, "revoked") != NULL, "%s", a.message);
    free(h);
}
