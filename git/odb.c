/*
 * Object presence (see odb.h) with libgit2: the object database only, no
 * config that could run anything.
 */
#include "git/odb.h"

#include <git2.h>
#include <string.h>

int rgit_odb_has_all(int *out, const char *gitdir, const char *const *ids, size_t n, rg_error *err)
{
    git_repository *repo = NULL;
    git_odb *odb = NULL;
    git_oid oid;
    int rc = 0;

    *out = 0;
    for (size_t i = 0; i < n; i++)
        if (strlen(ids[i]) != 40)
            return 0;
    git_libgit2_init();
    if (git_repository_open_bare(&repo, gitdir) < 0 || git_repository_odb(&odb, repo) < 0) {
        rc = rg_error_set(err, RG_E_UPSTREAM, "cannot open %s: %s", gitdir,
                          git_error_last() ? git_error_last()->message : "unknown error");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (git_oid_fromstr(&oid, ids[i]) < 0 || !git_odb_exists(odb, &oid))
            goto done;
    *out = 1;
done:
    git_odb_free(odb);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}
