/*
 * The mirror cache: a bare mirror of each remote upstream repository under
 * <state_dir>/mirrors/<host>/<path>.git, fetched incrementally with the
 * read credential before a push is inspected, so ancestry (and later
 * content rules) is computed against upstream history exactly as for a
 * local upstream, and thin packs resolve against it. Concurrent pushes to
 * one repository share the mirror. A fetch only adds objects and moves refs
 * atomically, so it runs under a lock of its own (held only while fetching,
 * and pushes arriving together fetch once) while inspections hold a shared
 * "in use" lock; the one thing that deletes data, gc, runs only when that
 * lock can be taken exclusively. So an update never waits for inspections
 * and nothing corrupts the mirror.
 */
#ifndef RG_UPSTREAM_MIRROR_H
#define RG_UPSTREAM_MIRROR_H

#include "upstream/upstream.h"
#include "util/error.h"

typedef struct upstream_mirror upstream_mirror;

/*
 * Create or update the mirror of t's repository and hold it (shared) until
 * released. Fails with RG_E_UPSTREAM and a message naming what upstream did
 * when it cannot be fetched (callers then fail closed).
 *
 * With `have` (n ids, may be 0), an existing mirror that already holds
 * every one of them is not fetched first: a push whose old ids the mirror
 * has pays no round trip to upstream. upstream_mirror_refresh fetches
 * later, when the inspection finds the mirror short after all.
 */
int upstream_mirror_acquire(upstream_mirror **out, const char *state_dir, const upstream_target *t,
                            const char *const *have, size_t n, rg_error *err);

/* Whether the held mirror was brought up to date by this acquire. */
int upstream_mirror_fresh(const upstream_mirror *m);

/* Fetch into the held mirror now (it stays held). */
int upstream_mirror_refresh(upstream_mirror *m, const upstream_target *t, rg_error *err);

/* The mirror's git directory, valid until release. */
const char *upstream_mirror_dir(const upstream_mirror *m);

void upstream_mirror_release(upstream_mirror *m);

#endif
