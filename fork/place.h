/*
 * Where a run works and where it is shown. refgate-run forks the top of
 * the git work tree around the working directory (so a fork is a whole
 * repository, never a copy of a subdirectory left without its .git), or
 * enters an existing fork again (--continue, or a working directory inside
 * a fork, which never nests a fork in a fork), and starts the command in
 * the same subdirectory. With the mount namespace the fork is bound over
 * the directory it was forked from, so inside the run it is at the
 * project's own path (a virtualenv, a CMakeCache.txt or a package name
 * that records the path keeps working).
 *
 * Also the `--bind SRC:DST` specs (a path shown at another path inside)
 * and where the programs beside refgate-run are, for the hints it prints.
 * Paths are canonical, as in home.h.
 */
#ifndef RG_FORK_PLACE_H
#define RG_FORK_PLACE_H

#include <stddef.h>

#include "sandbox/home.h"
#include "util/error.h"

typedef struct fork_place {
    char *top;    /* what is forked, or the existing fork entered (canonical) */
    char *sub;    /* the working directory below top: "" or "a/b" */
    int is_fork;  /* top is an existing fork: continue it, fork nothing */
    int implicit; /* ...found from the working directory, without --continue */
    int narrowed; /* the work tree's top holds a secret (a dotfiles home): cwd only */
} fork_place;

#define FORK_PLACE_INIT                                                                            \
    {                                                                                              \
        NULL, NULL, 0, 0, 0                                                                        \
    }

/*
 * The place of a run started in canonical directory `cwd`. With
 * `continuing` (--continue), `fork` (its argument, may be NULL) names the
 * fork; without it, the fork `cwd` is or lies inside; a path that is not
 * a fork fails with -EINVAL and says so. Without `continuing`, a `cwd`
 * inside a fork is that fork (`implicit` is set); else top is the nearest
 * directory from `cwd` up that holds a `.git` (a directory or a gitfile),
 * not crossing a mount (a submodule's: its superproject's), or `cwd`
 * itself outside any work tree. A top that is, contains or lies inside a
 * secret of `h` (may be NULL), when `cwd` is not (a dotfiles repository
 * around the home directory), gives way to `cwd` (`narrowed` is set).
 */
int fork_place_find(fork_place *out, const char *cwd, const char *fork, int continuing,
                    const sandbox_home *h, rg_error *err);

void fork_place_free(fork_place *p);

/*
 * Where canonical `path` lies below canonical `top`: "" for top itself,
 * "a/b" for top/a/b; NULL when it is not inside.
 */
const char *fork_place_below(const char *path, const char *top);

/*
 * An absolute path with "//" and trailing slashes folded into *out
 * (malloc'd); -EINVAL for a relative path or one with "." or ".."
 * components (DST is a path inside, where nothing resolves them yet).
 */
int fork_place_normalise(char **out, const char *path);

/*
 * Split a --bind spec "SRC:DST" at its first ':' into *out_src (as given)
 * and *out_dst (normalised); both malloc'd. -EINVAL with a message naming
 * `opt` when either is empty or DST is not absolute and plain.
 */
int fork_place_bind_parse(char **out_src, char **out_dst, const char *spec, const char *opt,
                          rg_error *err);

/* A resolved --bind (ro 0) or --ro-bind (ro 1). */
typedef struct sandbox_bind {
    char *src; /* canonical */
    char *dst; /* where it appears inside */
    int ro;
} sandbox_bind;

/*
 * Resolve a --bind / --ro-bind `spec`: SRC canonical, and refused
 * (RG_E_DENIED) when it is, contains or lies inside a secret of `h` or
 * contains the home directory, unless `force`, which sets *exposed to
 * that secret for a warning (NULL otherwise). DST under the home directory
 * (as $HOME or canonical) is kept as written below the canonical home,
 * which inside is a fresh tmpfs where the mount point is made; elsewhere
 * it must exist (the host's tree is read-only inside) and is resolved.
 * DST "/" is refused.
 */
int fork_place_bind_resolve(sandbox_bind *out, const char *spec, int ro, const sandbox_home *h,
                            int force, const char **exposed, rg_error *err);

void fork_place_bind_free(sandbox_bind *b);

/*
 * The absolute path of program `name` beside this one (/proc/self/exe's
 * directory), else in `alt` relative to that directory (a build tree keeps
 * refgate in ../cli), into out; "" when neither is executable, so the hint
 * names the bare program.
 */
void fork_place_sibling(char *out, size_t cap, const char *name, const char *alt);

#endif
