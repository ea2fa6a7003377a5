/*
 * The token store's shared layer (see store.h): the cache of public keys,
 * the rate limit on lookups of unknown kids, and the calls through the
 * implementation's ops table. The cache is a small array searched
 * linearly: a team has a handful of gateways, each with a key or two.
 */
#include "tokens/store_ops.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keys cached at most; past that the least recently checked is dropped. */
#define CACHE_MAX 64

typedef struct cached_key {
    char kid[TOKENS_KID_SIZE];
    unsigned char pub[TOKENS_PUBLIC_KEY_LEN];
    int64_t checked; /* monotonic seconds of the last store answer */
} cached_key;

struct tokens_store {
    const tokens_store_ops *ops;
    void *impl;
    pthread_mutex_t mu;
    cached_key cache[CACHE_MAX];
    size_t ncache;
    /* A token bucket of unknown-kid lookups, TOKENS_UNKNOWN_KID_RATE deep. */
    double tokens;
    struct timespec refilled;
};

static int64_t mono_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

int tokens_store_new(tokens_store **out, const tokens_store_ops *ops, void *impl, rg_error *err)
{
    tokens_store *s;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        ops->free(impl);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    s->ops = ops;
    s->impl = impl;
    pthread_mutex_init(&s->mu, NULL);
    s->tokens = TOKENS_UNKNOWN_KID_RATE;
    clock_gettime(CLOCK_MONOTONIC, &s->refilled);
    *out = s;
    return 0;
}

int tokens_store_open(tokens_store **out, const char *state_dir, db_pool *pool, rg_error *err)
{
    return pool != NULL ? tokens_store_pg_open(out, pool, err)
                        : tokens_store_file_open(out, state_dir, err);
}

void tokens_store_free(tokens_store *s)
{
    if (s == NULL)
        return;
    s->ops->free(s->impl);
    pthread_mutex_destroy(&s->mu);
    explicit_bzero(s->cache, sizeof(s->cache));
    free(s);
}

const char *tokens_store_kind(const tokens_store *s)
{
    return s->ops->kind;
}

static int kid_valid(const char *kid)
{
    size_t i;

    if (kid == NULL)
        return 0;
    for (i = 0; i < TOKENS_KID_HEX; i++)
        if (!((kid[i] >= '0' && kid[i] <= '9') || (kid[i] >= 'a' && kid[i] <= 'f')))
            return 0;
    return kid[TOKENS_KID_HEX] == '\0';
}

static int id_valid(const char *id)
{
    size_t i;

    if (id == NULL)
        return 0;
    for (i = 0; i < TOKENS_ID_HEX; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    return id[TOKENS_ID_HEX] == '\0';
}

/* ------------------------------------------------------------------------
 * The cache (callers hold s->mu)
 * ------------------------------------------------------------------------ */

static cached_key *cache_find(tokens_store *s, const char *kid)
{
    size_t i;

    for (i = 0; i < s->ncache; i++)
        if (!strcmp(s->cache[i].kid, kid))
            return &s->cache[i];
    return NULL;
}

static void cache_put(tokens_store *s, const char *kid, const unsigned char *pub)
{
    cached_key *e = cache_find(s, kid);
    size_t i, oldest = 0;

    if (e == NULL && s->ncache < CACHE_MAX)
        e = &s->cache[s->ncache++];
    if (e == NULL) {
        for (i = 1; i < s->ncache; i++)
            if (s->cache[i].checked < s->cache[oldest].checked)
                oldest = i;
        e = &s->cache[oldest];
    }
    memcpy(e->kid, kid, TOKENS_KID_SIZE);
    memcpy(e->pub, pub, TOKENS_PUBLIC_KEY_LEN);
    e->checked = mono_seconds();
}

static void cache_drop(tokens_store *s, const char *kid)
{
    cached_key *e = cache_find(s, kid);

    if (e != NULL)
        *e = s->cache[--s->ncache];
}

/* Take one unknown-kid lookup from the bucket; 0 when it is empty. */
static int bucket_take(tokens_store *s)
{
    struct timespec now;
    double elapsed;

    clock_gettime(CLOCK_MONOTONIC, &now);
    elapsed = (double)(now.tv_sec - s->refilled.tv_sec) +
              (double)(now.tv_nsec - s->refilled.tv_nsec) / 1e9;
    s->refilled = now;
    s->tokens += elapsed * TOKENS_UNKNOWN_KID_RATE;
    if (s->tokens > TOKENS_UNKNOWN_KID_RATE)
        s->tokens = TOKENS_UNKNOWN_KID_RATE;
    if (s->tokens < 1.0)
        return 0;
    s->tokens -= 1.0;
    return 1;
}

/* ------------------------------------------------------------------------
 * The calls
 * ------------------------------------------------------------------------ */

int tokens_store_key_put(tokens_store *s, const char *kid,
                         const unsigned char pub[TOKENS_PUBLIC_KEY_LEN], const char *gateway,
                         rg_error *err)
{
    int rc;

    if (!kid_valid(kid) || gateway == NULL)
        return rg_error_set(err, -EINVAL, "tokens_store_key_put: bad argument");
    rc = s->ops->key_put(s->impl, kid, pub, gateway, err);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        cache_put(s, kid, pub);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

int tokens_store_key_retire(tokens_store *s, const char *kid, rg_error *err)
{
    if (!kid_valid(kid))
        return rg_error_set(err, -EINVAL, "tokens_store_key_retire: bad kid");
    return s->ops->key_retire(s->impl, kid, err);
}

int tokens_store_key_get(tokens_store *s, int *found, unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                         const char *kid, rg_error *err)
{
    cached_key *e;
    int known = 0, rc;

    *found = 0;
    if (!kid_valid(kid))
        return 0;
    pthread_mutex_lock(&s->mu);
    e = cache_find(s, kid);
    if (e != NULL && mono_seconds() - e->checked < TOKENS_KEY_CACHE_SECONDS) {
        memcpy(pub, e->pub, TOKENS_PUBLIC_KEY_LEN);
        *found = 1;
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    /* A cached kid due for a new look is not an unknown one: no bucket. */
    known = e != NULL;
    if (!known && !bucket_take(s)) {
        pthread_mutex_unlock(&s->mu);
        return rg_error_set(err, -EAGAIN,
                            "too many tokens with unknown key ids this second; try again");
    }
    pthread_mutex_unlock(&s->mu);

    rc = s->ops->key_find(s->impl, found, pub, kid, err);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&s->mu);
    if (*found)
        cache_put(s, kid, pub);
    else
        cache_drop(s, kid);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int tokens_store_revoke(tokens_store *s, const char *id, int64_t exp, rg_error *err)
{
    if (!id_valid(id))
        return rg_error_set(err, -EINVAL, "tokens_store_revoke: bad token id");
    return s->ops->revoke(s->impl, id, exp, err);
}

int tokens_store_is_revoked(tokens_store *s, int *revoked, const char *id, rg_error *err)
{
    *revoked = 0;
    if (!id_valid(id))
        return rg_error_set(err, -EINVAL, "tokens_store_is_revoked: bad token id");
    return s->ops->is_revoked(s->impl, revoked, id, err);
}
