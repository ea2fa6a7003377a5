/*
 * Forks of a work tree whose .git is a gitfile ("gitdir: PATH"): a linked
 * worktree (`git worktree add`, PATH = <common>/worktrees/<name>) or a
 * submodule (PATH = <super>/.git/modules/<name>). Copied as it is, such a
 * fork's git would use the original's state: its index and HEAD, which
 * are read-only inside the run, and which the user's git in the fork would
 * change after it (a fork's commits would move the original worktree's
 * branch). So each copy's .git becomes a repository of its own: HEAD and
 * index of the worktree; config, packed-refs, shallow, refs and info of the
 * common directory; and the common object store as an alternate
 * (objects/info/alternates), read-only, so no object is copied. The run
 * is granted reading that object store and writes only its fork's own.
 * Nothing of the original repository is written, and no git program runs.
 */
#ifndef RG_FORK_WORKTREE_H
#define RG_FORK_WORKTREE_H

#include "util/error.h"

typedef struct fork_worktree {
    char *gitdir;  /* the worktree's git directory (canonical) */
    char *common;  /* the common git directory (canonical; gitdir for a submodule) */
    char *objects; /* common/objects: the alternate, to be readable inside */
} fork_worktree;

#define FORK_WORKTREE_INIT                                                                         \
    {                                                                                              \
        NULL, NULL, NULL                                                                           \
    }

/*
 * Whether canonical directory `top` has a gitfile for .git: 1 and *out
 * filled (free with fork_worktree_free), 0 when .git is a directory or
 * absent, or a negative error when the gitfile names no git directory.
 */
int fork_worktree_find(fork_worktree *out, const char *top, rg_error *err);

/*
 * Replace the gitfile `dir`/.git (a copy of the original's) by the
 * standalone repository described above.
 */
int fork_worktree_standalone(const char *dir, const fork_worktree *wt, rg_error *err);

void fork_worktree_free(fork_worktree *wt);

#endif
