/*
 * Following symbolic refs with libgit2 (see symref.h). Only ref files and
 * packed-refs are read: nothing in the repository's config runs.
 */
#include "git/symref.h"

#include <git2.h>
#include <stdlib.h>
#include <string.h>

/* git's own limit on symbolic ref chains (refs.c SYMREF_MAXDEPTH). */
#define SYMREF_MAXDEPTH 5

struct rgit_symrefs {
    git_repository *repo;
};

int rgit_symrefs_open(rgit_symrefs **out, const char *gitdir, rg_error *err)
{
    rgit_symrefs *s;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    git_libgit2_init();
    if (git_repository_open_bare(&s->repo, gitdir) < 0) {
        rg_error_set(err, RG_E_UPSTREAM, "cannot open the upstream repository: %s",
                     git_error_last() ? git_error_last()->message : "unknown error");
        rgit_symrefs_free(s);
        return RG_E_UPSTREAM;
    }
    *out = s;
    return 0;
}

int rgit_symrefs_resolve(char **out, rgit_symrefs *refs, const char *refname, rg_error *err)
{
    git_reference *ref = NULL;
    char *name;
    int rc = 0, depth;

    *out = NULL;
    name = strdup(refname);
    if (name == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (depth = 0;; depth++) {
        const char *target;

        git_reference_free(ref);
        ref = NULL;
        if (git_reference_lookup(&ref, refs->repo, name) < 0 ||
            git_reference_type(ref) != GIT_REFERENCE_SYMBOLIC)
            break;
        if (depth == SYMREF_MAXDEPTH) {
            rc = rg_error_set(err, RG_E_UPSTREAM, "%s: symbolic refs nest too deep", refname);
            goto done;
        }
        target = git_reference_symbolic_target(ref);
        free(name);
        name = strdup(target ? target : "");
        if (name == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
    }
    if (depth > 0) {
        *out = name;
        name = NULL;
    }
done:
    git_reference_free(ref);
    free(name);
    return rc;
}

void rgit_symrefs_free(rgit_symrefs *refs)
{
    if (refs == NULL)
        return;
    if (refs->repo) {
        git_repository_free(refs->repo);
        git_libgit2_shutdown();
    }
    free(refs);
}
