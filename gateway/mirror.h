/*
 * The mirror cache: a bare mirror of each remote upstream repository under
 * <state_dir>/mirrors/<host>/<path>.git, fetched incrementally with the
 * read credential before a push is inspected, so ancestry (and later
 * content rules) is computed against upstream history exactly as for a
 * local upstream, and thin packs resolve against it. Concurrent pushes to
 * one repository share the mirror: an update takes the lock exclusively,
 * inspection holds it shared, so they neither corrupt it nor serialise more
 * than they must.
 */
#ifndef RG_GATEWAY_MIRROR_H
#define RG_GATEWAY_MIRROR_H

#include "gateway/upstream.h"
#include "util/error.h"

typedef struct gateway_mirror gateway_mirror;

/*
 * Create or update the mirror of t's repository and hold it (shared) until
 * released. Fails with RG_E_UPSTREAM and a message naming what upstream did
 * when it cannot be fetched (callers then fail closed).
 */
int gateway_mirror_acquire(gateway_mirror **out, const char *state_dir, const upstream_target *t,
                           rg_error *err);

/* The mirror's git directory, valid until release. */
const char *gateway_mirror_dir(const gateway_mirror *m);

void gateway_mirror_release(gateway_mirror *m);

#endif
