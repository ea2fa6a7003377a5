/*
 * libFuzzer target for the Authorization header check (gateway/auth.h),
 * the first code to read a pushing client's credential. A gateway's token
 * store and key live in a directory made once, with one valid token for
 * local/acme/app. The first input byte picks how the rest is used: as the
 * whole header, as the password of Basic credentials, as edits to the
 * valid token, or appended to it; and the repository asked for. Besides
 * "no crash, no leak, no UB" it checks: claims exactly when authorised,
 * only the documented statuses, a message for every refusal that never
 * quotes the token, and claims that cover the repository asked for.
 */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_common.h"
#include "gateway/auth.h"
#include "tokens/key.h"
#include "tokens/store.h"
#include "util/fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char state[64];
static tokens_store *store;
static tokens_key *key;
static char *token;

static void cleanup(void)
{
    tokens_secret_free(token);
    tokens_key_free(key);
    tokens_store_free(store);
    rg_fs_remove_tree(state, 0, NULL);
}

static void setup(void)
{
    static const char *const repos[] = {"local/acme/app"};
    rg_error err = RG_ERROR_INIT;

    snprintf(state, sizeof(state), "/tmp/rgfuzz-auth.XXXXXX");
    FUZZ_CHECK(mkdtemp(state) != NULL);
    FUZZ_CHECK(tokens_store_file_open(&store, state, &err) == 0);
    FUZZ_CHECK(tokens_key_load(&key, state, &err) == 0);
    FUZZ_CHECK(tokens_key_publish(key, store, "fuzz", &err) == 0);
    FUZZ_CHECK(tokens_mint(&token, key, "run-1", repos, 1, 3600, (int64_t)time(NULL), &err) == 0);
    atexit(cleanup);
}

/* "Basic " + base64(user:password) for `password` of `len` bytes. */
static char *basic(const char *password, size_t len)
{
    size_t plen = 4 + len, hlen = 6 + 4 * ((plen + 2) / 3) + 1;
    unsigned char *plain = malloc(plen);
    char *h = malloc(hlen);

    FUZZ_CHECK(plain != NULL && h != NULL);
    memcpy(plain, "run:", 4);
    memcpy(plain + 4, password, len);
    memcpy(h, "Basic ", 6);
    EVP_EncodeBlock((unsigned char *)h + 6, plain, (int)plen);
    free(plain);
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *repo;
    char *header = NULL, *password = NULL;
    size_t plen = 0, i, tlen;
    gateway_ctx ctx;
    gateway_auth out;

    if (size < 1)
        return 0;
    if (store == NULL)
        setup();
    tlen = strlen(token);
    repo = data[0] & 0x10 ? "local/acme/other" : "local/acme/app";
    switch (data[0] % 4) {
    case 0: /* the header as sent, up to its first NUL */
        header = strndup((const char *)data + 1, size - 1);
        FUZZ_CHECK(header != NULL);
        break;
    case 1: /* any password */
        header = basic((const char *)data + 1, size - 1);
        break;
    case 2: /* the valid token, edited: pairs of (position, byte) */
        password = strdup(token);
        FUZZ_CHECK(password != NULL);
        plen = tlen;
        for (i = 1; i + 1 < size; i += 2)
            password[data[i] % tlen] = (char)data[i + 1];
        header = basic(password, plen);
        break;
    default: /* the valid token with more after it */
        plen = tlen + size - 1;
        password = malloc(plen);
        FUZZ_CHECK(password != NULL);
        memcpy(password, token, tlen);
        memcpy(password + tlen, data + 1, size - 1);
        header = basic(password, plen);
        break;
    }

    memset(&ctx, 0, sizeof(ctx));
    ctx.tokens = store;
    gateway_auth_check(&out, &ctx, header, repo);
    FUZZ_CHECK(out.status == 0 || out.status == 401 || out.status == 403 || out.status == 503);
    FUZZ_CHECK((out.status == 0) == (out.claims != NULL));
    FUZZ_CHECK(memchr(out.message, '\0', sizeof(out.message)) != NULL);
    if (out.status != 0)
        FUZZ_CHECK(out.message[0] != '\0');
    else
        FUZZ_CHECK(tokens_claims_allow_repo(out.claims, repo));
    /* The valid token, whole or in its first 40 characters, is never quoted. */
    FUZZ_CHECK(strstr(out.message, token) == NULL);
    FUZZ_CHECK(tlen < 40 || memmem(out.message, strlen(out.message), token, 40) == NULL);
    tokens_claims_free(out.claims);
    free(password);
    free(header);
    return 0;
}
