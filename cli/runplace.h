/*
 * Where `refgate run` works, decided by refgate-run's own code (fork/place.h):
 * the directory that is forked (the top of the git work tree around the
 * current directory, whose forks are <top>.N; a submodule's is its
 * superproject's), or the fork a run continues
 * (--continue FORK, or the fork the current directory is in: refgate-run
 * never nests a fork in a fork), and the git config whose remotes name the
 * run's repositories (a linked worktree's is its common directory's). So
 * refgate run can name the fork the run used, and read the remotes of the
 * fork it continues. libgit2 only opens the repository: nothing in it runs.
 * One decision, so the fork refgate run names is the one the run used.
 */
#ifndef RG_CLI_RUNPLACE_H
#define RG_CLI_RUNPLACE_H

#include <limits.h>
#include <stddef.h>

#include "util/error.h"

typedef struct cli_runplace {
    char top[PATH_MAX];    /* what is forked: its forks are <top>.N */
    char fork[PATH_MAX];   /* the fork continued; "" for a new one */
    char config[PATH_MAX]; /* the git config with the remotes; "" outside a repository */
    int implicit;          /* fork found from the current directory, without --continue */
} cli_runplace;

/*
 * The place of a run from canonical directory `cwd`: with `continuing`,
 * `fork` (may be NULL) or the fork around `cwd`; without, the fork around
 * `cwd` if any, else a new fork of the work tree's top. -EINVAL with a
 * message for a --continue that names no fork.
 */
int cli_runplace_find(cli_runplace *out, const char *cwd, int continuing, const char *fork,
                      rg_error *err);

#endif
