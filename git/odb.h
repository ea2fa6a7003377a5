/*
 * Whether a repository already holds objects: asked before a remote
 * upstream's mirror is fetched, so a push whose old ids the mirror has
 * needs no round trip to upstream first.
 */
#ifndef RG_GIT_ODB_H
#define RG_GIT_ODB_H

#include <stddef.h>

#include "util/error.h"

/*
 * *out is 1 when the repository at `gitdir` has every id in `ids` (hex,
 * SHA-1), else 0. SHA-256 ids are never claimed present (libgit2 1.5 reads
 * no SHA-256 repositories): the caller then fetches, which is always right.
 */
int rgit_odb_has_all(int *out, const char *gitdir, const char *const *ids, size_t n, rg_error *err);

#endif
