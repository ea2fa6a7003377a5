/*
 * The fork a run works in: the directory `<dir>` is copied to a hidden base
 * `.<dir>.<N>.base` beside it, which holds the directory as it was at the
 * fork, and the base is copied again to `<dir>.<N>`, the fork, which only
 * the command may write. N is the first number for which neither name
 * exists. `refgate diff` compares the fork against its base, so what the run
 * changed is told apart from what changed in <dir> meanwhile.
 *
 * The copies are clones where the filesystem can clone (tree.h), so a fork
 * of a large tree is fast and takes no space until something is written.
 *
 * While the run lives, the runner holds an exclusive flock on
 * `.<dir>.<N>.run` beside the fork (0600, opened close-on-exec, so the
 * command never holds it). `refgate diff --apply` refuses a fork whose
 * marker is locked: a process of the run could still change it. The
 * command cannot fake the end of its run: it cannot release a lock it does
 * not hold, and it cannot remove or replace the file, which lies outside
 * the fork where it can write nothing. At worst it holds a lock of its own
 * on the file, which makes --apply refuse: it fails closed. With a pid
 * namespace every process of the run is dead before the runner exits and
 * the lock goes with it.
 *
 * Every one of these names is spelled by fork/layout.h.
 */
#ifndef RG_FORK_FORK_H
#define RG_FORK_FORK_H

#include "fork/layout.h"
#include "fork/tree.h"
#include "util/error.h"

#define FORK_FORK_MAX FORK_LAYOUT_MAX_N /* the highest N tried */

typedef struct fork_ws {
    char *src;  /* the directory forked (canonical) */
    char *path; /* <dir>.<N> */
    char *base; /* .<dir>.<N>.base */
    char *lock; /* .<dir>.<N>.run, flocked by lock_fd for the run's life */
    int lock_fd;
    unsigned n;
    fork_tree_stats base_stats; /* src -> base */
    fork_tree_stats fork_stats; /* base -> fork */
    double seconds;             /* both copies */
    int continued;              /* an existing fork, opened by fork_open */
} fork_ws;

#define FORK_FORK_INIT                                                                             \
    {                                                                                              \
        NULL, NULL, NULL, NULL, -1, 0, {0}, {0}, 0, 0                                              \
    }

/*
 * The fork and base paths for canonical directory `src` and number `n`:
 * "/a/b", 3 -> "/a/b.3" and "/a/.b.3.base". -EINVAL for "/" (there is no
 * "beside" for the root). Both malloc'd.
 */
int fork_paths(char **out_fork, char **out_base, const char *src, unsigned n, rg_error *err);

/*
 * Fork canonical directory `src`: claim the first free N by creating both
 * directories (so two runs never share one), then copy src -> base -> fork
 * with `opts`. On failure nothing is left behind. Free with
 * fork_free().
 */
int fork_create(fork_ws *out, const char *src, const fork_tree_opts *opts, rg_error *err);

/*
 * The inverse of fork_paths, on names only: canonical `path`
 * "/a/b.3" -> *out_src "/a/b" (malloc'd), *out_n 3. -EINVAL when the name
 * does not end in ".<N>" with 1 <= N <= FORK_FORK_MAX (no sign, no
 * leading zero) or nothing is left before it.
 */
int fork_parse(char **out_src, unsigned *out_n, const char *path);

/*
 * Whether canonical `path` is a fork: its name parses and its base
 * `.<dir>.<N>.base` is a directory beside it (what the fork step made;
 * a directory merely named like a fork has none). 1 yes, 0 no.
 */
int fork_is_fork(const char *path);

/*
 * Open the existing fork at canonical `path` to run in it again
 * (refgate-run --continue): recognised as above, and its marker taken
 * like a new fork's, so a fork whose run is still alive is refused
 * (-EBUSY) and `refgate diff --apply` waits for this run too. `src` is the
 * directory it was forked from (which may be gone by now); `continued` is
 * set. Nothing is copied. Free with fork_free().
 */
int fork_open(fork_ws *out, const char *path, rg_error *err);

/* Remove the fork, its base and its marker (for --rm). */
int fork_remove(const fork_ws *f, rg_error *err);

/* Frees the paths and lets go of the marker's lock (the run is over). */
void fork_free(fork_ws *f);

#endif
