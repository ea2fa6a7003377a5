/*
 * The .git of a -d run's directory; see dirgit.h.
 */
#include "fork/dirgit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork/gitconf.h"

int fork_dirgit_plan(fork_dirgit *out, const char *dir, int mount_ns, rg_error *err)
{
    struct stat st;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    out->dir = strdup(dir);
    if (out->dir == NULL || asprintf(&out->git, "%s/.git", dir) < 0) {
        out->git = NULL;
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if (lstat(out->git, &st) < 0) {
        if (errno != ENOENT)
            rc = rg_error_set(err, -errno, "%s: %s", out->git, strerror(errno));
        goto done;
    }
    if (S_ISLNK(st.st_mode)) {
        rc = rg_error_set(err, RG_E_DENIED,
                          "refusing -d %s: its .git is a symlink, which the command could "
                          "replace to plant what your next git command there runs; run in a "
                          "fork (without -d)",
                          dir);
        goto done;
    }
    if (!mount_ns) {
        rc = rg_error_set(err, RG_E_DENIED,
                          "refusing -d %s: it holds a .git, which a -d run binds read-only so "
                          "the command cannot plant what your next git command there runs; "
                          "that needs the mount namespace (drop --share=mount), or run in a "
                          "fork (without -d)",
                          dir);
        goto done;
    }
    out->existed = 1;
done:
    if (rc < 0) {
        fork_dirgit_free(out);
        memset(out, 0, sizeof(*out));
    }
    return rc;
}

int fork_dirgit_after(int *out, const fork_dirgit *d, rg_error *err)
{
    struct stat st;
    int dfd, rc = 0;

    *out = 0;
    if (d->dir == NULL || d->existed)
        return 0;
    dfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return rg_error_set(err, -errno, "%s: %s", d->dir, strerror(errno));
    if (fstatat(dfd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        rc = fork_gitconf_move_aside(dfd, ".git", ".refgate-disabled");
        if (rc < 0)
            rg_error_set(err, rc, "%s: moving aside the .git the run created: %s", d->git,
                         strerror(-rc));
        else
            *out = 1;
    }
    close(dfd);
    return rc;
}

void fork_dirgit_free(fork_dirgit *d)
{
    free(d->dir);
    free(d->git);
    d->dir = d->git = NULL;
}
