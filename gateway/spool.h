/*
 * One disk budget for everything requests spool (push packs kept for
 * inspection, fetch request bodies), shared by all concurrent requests, so
 * a few large or decompressed bodies cannot fill the disk the audit log and
 * upstream repositories live on. Each request holds a lease: bytes are
 * charged to it as they are spooled and all of them go back to the budget
 * when the lease is released, at the end of the request, but for the ones
 * kept beyond it (a pending approval's pack), which go back when they are
 * deleted.
 */
#ifndef RG_GATEWAY_SPOOL_H
#define RG_GATEWAY_SPOOL_H

#include <stddef.h>
#include <stdint.h>

/* What the client is told (after "refgate: ") when the budget is spent. */
#define GATEWAY_SPOOL_FULL                                                                         \
    "the gateway's spool space (limits.spool_bytes) is taken by other requests: try again later"

typedef struct gateway_spool gateway_spool;

/* A budget of `cap` bytes; -ENOMEM. Freed with gateway_spool_free. */
int gateway_spool_new(gateway_spool **out, uint64_t cap);
void gateway_spool_free(gateway_spool *s);

/* Bytes charged now, across all leases. */
uint64_t gateway_spool_used(const gateway_spool *s);

/* One request's share. Embedded in the request; not shared between threads. */
typedef struct gateway_spool_lease {
    gateway_spool *spool; /* NULL: nothing is charged (no budget) */
    uint64_t held;
} gateway_spool_lease;

void gateway_spool_lease_init(gateway_spool_lease *out, gateway_spool *s);

/*
 * Charge `len` more bytes before they are written: 0, or -ENOSPC (nothing
 * charged) when the budget cannot take them. A NULL lease charges nothing.
 */
int gateway_spool_take(gateway_spool_lease *l, size_t len);

/* Give everything the lease holds back; the lease may be used again. */
void gateway_spool_lease_release(gateway_spool_lease *l);

/*
 * Bytes that outlive the request (a pending approval's kept pack): `len`
 * of what the lease holds leave it without going back to the budget, so
 * they stay charged after the lease is released, until
 * gateway_spool_give_back. -EINVAL (nothing moved) when the lease holds less.
 */
int gateway_spool_lease_keep(gateway_spool_lease *l, uint64_t len);

/* Charge bytes already on disk (kept packs found at start), past the cap if need be. */
void gateway_spool_hold(gateway_spool *s, uint64_t len);

/* Kept bytes are gone from the disk: the budget has them again. */
void gateway_spool_give_back(gateway_spool *s, uint64_t len);

#endif
