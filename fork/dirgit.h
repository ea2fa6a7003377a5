/*
 * The .git of a -d run's directory. With -d there is no fork: the command
 * writes the user's own directory, and what it planted in DIR/.git (a
 * core.fsmonitor, a hook, a gitfile pointing elsewhere) would run outside
 * the sandbox at the user's next git command there. So:
 *
 * - a DIR/.git that exists (a directory, or a gitfile) is bound read-only
 *   inside the run (mount.h): the command reads the history and can run
 *   git status, log and diff, but writes nothing there (commits fail with
 *   EROFS); and being a mount point, .git cannot be renamed, removed or
 *   replaced. This needs the mount namespace: without it such a -d is
 *   refused. A DIR/.git that is a symlink is refused too (the link itself
 *   could be replaced).
 * - a DIR/.git the run created is moved aside after it, to
 *   DIR/.git.refgate-disabled, and the summary says so.
 *
 * Repositories below DIR (DIR/sub/.git) are not covered: a fork is.
 */
#ifndef RG_FORK_DIRGIT_H
#define RG_FORK_DIRGIT_H

#include "util/error.h"

typedef struct fork_dirgit {
    char *dir;   /* DIR, canonical */
    char *git;   /* DIR/.git */
    int existed; /* DIR/.git existed before the run: bind it read-only */
} fork_dirgit;

#define FORK_DIRGIT_INIT                                                                           \
    {                                                                                              \
        NULL, NULL, 0                                                                              \
    }

/*
 * Before the run: what DIR/.git is. `mount_ns`: the run has a mount
 * namespace. RG_E_DENIED with `err` saying why and what to do when the
 * run must be refused.
 */
int fork_dirgit_plan(fork_dirgit *out, const char *dir, int mount_ns, rg_error *err);

/*
 * After the run: a DIR/.git the run created is moved aside; *out is 1 when
 * it was (0 when there was nothing to do).
 */
int fork_dirgit_after(int *out, const fork_dirgit *d, rg_error *err);

void fork_dirgit_free(fork_dirgit *d);

#endif
