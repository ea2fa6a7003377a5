/* The shared spool budget; see spool.h. */
#include "gateway/spool.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

struct gateway_spool {
    uint64_t cap;
    _Atomic uint64_t used;
};

int gateway_spool_new(gateway_spool **out, uint64_t cap)
{
    gateway_spool *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return -ENOMEM;
    s->cap = cap;
    atomic_init(&s->used, 0);
    *out = s;
    return 0;
}

void gateway_spool_free(gateway_spool *s)
{
    free(s);
}

uint64_t gateway_spool_used(const gateway_spool *s)
{
    return atomic_load(&((gateway_spool *)s)->used);
}

void gateway_spool_lease_init(gateway_spool_lease *out, gateway_spool *s)
{
    out->spool = s;
    out->held = 0;
}

int gateway_spool_take(gateway_spool_lease *l, size_t len)
{
    gateway_spool *s = l ? l->spool : NULL;
    uint64_t cur;

    if (s == NULL)
        return 0;
    cur = atomic_load(&s->used);
    /* Bounded: a retry happens only when another request charged or
     * released in between, and each of those moves the counter. */
    do {
        if (len > s->cap || cur > s->cap - len)
            return -ENOSPC;
    } while (!atomic_compare_exchange_weak(&s->used, &cur, cur + len));
    l->held += len;
    return 0;
}

void gateway_spool_lease_release(gateway_spool_lease *l)
{
    if (l == NULL || l->spool == NULL || l->held == 0)
        return;
    atomic_fetch_sub(&l->spool->used, l->held);
    l->held = 0;
}

int gateway_spool_lease_keep(gateway_spool_lease *l, uint64_t len)
{
    if (l == NULL || l->spool == NULL || l->held < len)
        return -EINVAL;
    l->held -= len;
    return 0;
}

void gateway_spool_hold(gateway_spool *s, uint64_t len)
{
    if (s != NULL)
        atomic_fetch_add(&s->used, len);
}

void gateway_spool_give_back(gateway_spool *s, uint64_t len)
{
    if (s != NULL)
        atomic_fetch_sub(&s->used, len);
}
