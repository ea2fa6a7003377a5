/*
 * Symbolic refs of an upstream repository. A push to a symbolic ref moves
 * the ref it points to (receive-pack follows it), and the v0 advertisement
 * and a `clone --mirror` show it as a plain ref. So the gateway reads a
 * local repository itself, and asks a remote one with protocol v2's
 * `ls-refs` and its `symrefs` argument, whose `symref-target` attribute
 * names the end of the chain.
 */
#ifndef RG_GIT_SYMREF_H
#define RG_GIT_SYMREF_H

#include <stddef.h>

#include "util/buf.h"
#include "util/error.h"

typedef struct rgit_symrefs rgit_symrefs;

/* Open the bare repository at `gitdir` for reading its refs. */
int rgit_symrefs_open(rgit_symrefs **out, const char *gitdir, rg_error *err);

/*
 * The body of a protocol v2 `ls-refs` request (for upload-pack) asking for
 * the refs named in `refnames` (as ref-prefix lines) with their symref
 * targets. `oid_hexlen` 64 asks for SHA-256 (upstream refuses a request in
 * the wrong object format).
 */
int rgit_symrefs_lsrefs_request(rg_buf *out, const char *const *refnames, size_t n,
                                size_t oid_hexlen);

/*
 * Read an `ls-refs` answer (pkt-lines up to the flush) into a set of
 * symbolic refs; RG_E_PROTOCOL for anything that is not one.
 */
int rgit_symrefs_from_lsrefs(rgit_symrefs **out, const char *data, size_t len, rg_error *err);

/*
 * Where `refname` leads: *out gets the ref at the end of its chain of
 * symbolic refs (the caller frees it), or NULL when `refname` is not
 * symbolic (or does not exist). A chain longer than git's own limit (5) is
 * an error, as it is for receive-pack.
 */
int rgit_symrefs_resolve(char **out, rgit_symrefs *refs, const char *refname, rg_error *err);

/* Accepts NULL. */
void rgit_symrefs_free(rgit_symrefs *refs);

#endif
