/*
 * What a token store implementation provides (tokens/store.h): the ops
 * below, each a plain question to the files or the database, without
 * caching or rate limits (tokens/store.c adds those). Implementations set
 * RG_E_STATE (database) or a negative errno (files) with a message when
 * they cannot answer.
 */
#ifndef RG_TOKENS_STORE_OPS_H
#define RG_TOKENS_STORE_OPS_H

#include "tokens/store.h"

typedef struct tokens_store_ops {
    const char *kind;
    int (*key_put)(void *impl, const char *kid, const unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                   const char *gateway, rg_error *err);
    int (*key_retire)(void *impl, const char *kid, rg_error *err);
    int (*key_find)(void *impl, int *found, unsigned char pub[TOKENS_PUBLIC_KEY_LEN],
                    const char *kid, rg_error *err);
    int (*revoke)(void *impl, const char *id, int64_t exp, rg_error *err);
    int (*is_revoked)(void *impl, int *revoked, const char *id, rg_error *err);
    void (*free)(void *impl);
} tokens_store_ops;

/* Wrap an implementation; consumes impl (ops->free'd on failure too). */
int tokens_store_new(tokens_store **out, const tokens_store_ops *ops, void *impl, rg_error *err);

#endif
