/*
 * Symbolic refs of an upstream repository. A push to a symbolic ref moves
 * the ref it points to (receive-pack follows it), and the v0 advertisement
 * shows it as a plain ref, so the gateway reads the repository itself.
 */
#ifndef RG_GIT_SYMREF_H
#define RG_GIT_SYMREF_H

#include "util/error.h"

typedef struct rgit_symrefs rgit_symrefs;

/* Open the bare repository at `gitdir` for reading its refs. */
int rgit_symrefs_open(rgit_symrefs **out, const char *gitdir, rg_error *err);

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
