/*
 * The cost of checking one run token (bench/tokens.sh drives it): the
 * signature alone, HMAC-SHA-256 (the rg1 tokens before) against Ed25519
 * (rg2 now) over the same signed text, then the whole tokens_verify with
 * the file store (key cached, revocation file read) and, when PG_URL names
 * a migrated database, with the PostgreSQL store (key cached, one
 * primary-key lookup of the revocation per check). Prints microseconds
 * per token and the ratios.
 *
 *   tokens_bench DIR N      (PG_URL in the environment for the database rows)
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokens/token.h"

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double bench_verify(tokens_store *s, const char *tok, long n)
{
    rg_error err = RG_ERROR_INIT;
    tokens_claims *c;
    tokens_status st;
    double t0 = now_us();
    long i;

    for (i = 0; i < n; i++) {
        if (tokens_verify(&c, &st, s, tok, (int64_t)time(NULL), &err) < 0 || st != TOKENS_OK) {
            fprintf(stderr, "tokens_bench: verify failed: %s\n",
                    err.msg[0] ? err.msg : tokens_status_message(st));
            exit(1);
        }
        tokens_claims_free(c);
    }
    return (now_us() - t0) / (double)n;
}

int main(int argc, char **argv)
{
    static const char *const repos[] = {"local/acme/app", "github.com/acme/lib"};
    unsigned char key[32] = {7}, mac[32], given[32] = {0}, raw[32];
    rg_error err = RG_ERROR_INIT;
    tokens_store *files = NULL, *pg = NULL;
    db_pool *pool = NULL;
    tokens_key *k = NULL;
    const char *url = getenv("PG_URL");
    char *tok = NULL;
    unsigned int maclen;
    size_t signed_len;
    double t0, hmac_us, file_us, pg_us = 0, ed_us;
    long n, i;
    int sink = 0;

    if (argc != 3 || (n = atol(argv[2])) <= 0) {
        fprintf(stderr, "usage: tokens_bench DIR N\n");
        return 2;
    }
    if (tokens_key_load(&k, argv[1], &err) < 0 ||
        tokens_store_file_open(&files, argv[1], &err) < 0 ||
        tokens_key_publish(k, files, "bench", &err) < 0 ||
        tokens_mint(&tok, k, "bench", repos, 2, 3600, (int64_t)time(NULL), &err) < 0) {
        fprintf(stderr, "tokens_bench: %s\n", err.msg);
        return 1;
    }
    signed_len = (size_t)(strrchr(tok, '.') - tok);

    /* The rg1 check: HMAC-SHA-256 of the signed text, compared in constant time. */
    t0 = now_us();
    for (i = 0; i < n; i++) {
        HMAC(EVP_sha256(), key, sizeof(key), (const unsigned char *)tok, signed_len, mac, &maclen);
        sink += CRYPTO_memcmp(mac, given, sizeof(mac)) == 0;
    }
    hmac_us = (now_us() - t0) / (double)n;

    /* The rg2 check's signature alone: Ed25519 over the same text, the
     * public key made from its 32 bytes each time as tokens_verify does.
     * A throwaway key signs: the cost does not depend on which key. */
    {
        EVP_PKEY *priv = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, key, 32), *pub;
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned char sig[64];
        size_t siglen = sizeof(sig), publen = sizeof(raw);
        long ok = 0;

        if (priv == NULL || md == NULL || EVP_DigestSignInit(md, NULL, NULL, NULL, priv) != 1 ||
            EVP_DigestSign(md, sig, &siglen, (const unsigned char *)tok, signed_len) != 1 ||
            EVP_PKEY_get_raw_public_key(priv, raw, &publen) != 1) {
            fprintf(stderr, "tokens_bench: Ed25519 signing failed\n");
            return 1;
        }
        EVP_MD_CTX_free(md);
        EVP_PKEY_free(priv);
        t0 = now_us();
        for (i = 0; i < n; i++) {
            pub = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, 32);
            md = EVP_MD_CTX_new();
            EVP_DigestVerifyInit(md, NULL, NULL, NULL, pub);
            ok += EVP_DigestVerify(md, sig, siglen, (const unsigned char *)tok, signed_len) == 1;
            EVP_MD_CTX_free(md);
            EVP_PKEY_free(pub);
        }
        ed_us = (now_us() - t0) / (double)n;
        if (ok != n) {
            fprintf(stderr, "tokens_bench: Ed25519 did not verify\n");
            return 1;
        }
    }

    file_us = bench_verify(files, tok, n);
    if (url != NULL && *url) {
        config_state st = {.postgres = (char *)url, .connections = 1};
        if (db_pool_open(&pool, &st, &err) < 0 || tokens_store_pg_open(&pg, pool, &err) < 0 ||
            tokens_key_publish(k, pg, "bench", &err) < 0) {
            fprintf(stderr, "tokens_bench: %s\n", err.msg);
            return 1;
        }
        pg_us = bench_verify(pg, tok, n);
    }

    printf("tokens checked: %ld each (sink %d)\n", n, sink);
    printf("  signature only, rg1 HMAC-SHA-256       %8.2f us/token\n", hmac_us);
    printf("  signature only, rg2 Ed25519            %8.2f us/token   (%.1fx HMAC)\n", ed_us,
           ed_us / hmac_us);
    printf("  tokens_verify, file store              %8.2f us/token   (%.1fx HMAC)\n", file_us,
           file_us / hmac_us);
    if (pg != NULL)
        printf("  tokens_verify, PostgreSQL store        %8.2f us/token   (%.1fx HMAC, %.1fx file "
               "store)\n",
               pg_us, pg_us / hmac_us, pg_us / file_us);
    else
        printf("  tokens_verify, PostgreSQL store        (PG_URL not set)\n");
    tokens_secret_free(tok);
    tokens_store_free(pg);
    tokens_store_free(files);
    db_pool_close(pool);
    tokens_key_free(k);
    return 0;
}
