/*
 * Where `refgate run` works; see runplace.h.
 */
#include "cli/runplace.h"

#include <errno.h>
#include <git2.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/home.h"
#include "fork/place.h"

/* The git config with the remotes of the repository at `path`. */
static void runplace_config(cli_runplace *out, const char *path)
{
    git_repository *repo = NULL;
    const char *common;

    if (git_repository_open_ext(&repo, path, 0, NULL) < 0)
        return;
    common = git_repository_commondir(repo);
    if (common != NULL)
        snprintf(out->config, sizeof(out->config), "%s%sconfig", common,
                 common[0] && common[strlen(common) - 1] == '/' ? "" : "/");
    git_repository_free(repo);
}

int cli_runplace_find(cli_runplace *out, const char *cwd, int continuing, const char *fork,
                      rg_error *err)
{
    sandbox_home home = SANDBOX_HOME_INIT;
    fork_place pl = FORK_PLACE_INIT;
    rg_error herr = RG_ERROR_INIT;
    int have_home, rc = 0;

    memset(out, 0, sizeof(*out));
    /* Without a home refgate-run refuses to run, so the top matters little. */
    have_home = sandbox_home_load(&home, environ, &herr) == 0;
    rc = fork_place_find(&pl, cwd, fork, continuing, have_home ? &home : NULL, err);
    if (rc == 0 && (size_t)snprintf(out->top, sizeof(out->top), "%s", pl.top) >= sizeof(out->top))
        rc = rg_error_set(err, -ENAMETOOLONG, "%s: path too long", pl.top);
    if (have_home)
        sandbox_home_free(&home);
    if (rc == 0 && pl.is_fork)
        snprintf(out->fork, sizeof(out->fork), "%s", pl.top);
    out->implicit = pl.implicit;
    fork_place_free(&pl);
    if (rc == 0)
        runplace_config(out, out->fork[0] ? out->fork : cwd);
    return rc;
}
