/*
 * The names of a fork and of the files refgate-run keeps beside it: the one
 * place they are spelled.
 *
 * refgate-run forks directory DIR into DIR.N beside it, and keeps, beside
 * the fork, hidden files named after the fork's own name:
 *
 *     DIR.N             the fork, the only place the run may write
 *     .DIR.N.base       its read-only base: DIR as it was at the fork
 *     .DIR.N.excluded   the record of what --exclude left out
 *     .DIR.N.run        the run's marker, flocked while the run lives
 *
 * (DIR's last component after the dot; "/a/b", 3 -> "/a/b.3" and
 * "/a/.b.3.base"). They lie outside the fork, where the run cannot write.
 *
 * Names only: nothing here touches the filesystem, so the fork step,
 * `refgate diff` and anything that lists runs agree on them without
 * sharing anything else. Depends on libc and util/ only.
 */
#ifndef RG_FORK_LAYOUT_H
#define RG_FORK_LAYOUT_H

#include "util/error.h"

/* The highest N refgate-run makes; N starts at 1. */
#define FORK_LAYOUT_MAX_N 9999

/* The files beside a fork. */
typedef enum fork_layout_side {
    FORK_LAYOUT_BASE,     /* .DIR.N.base */
    FORK_LAYOUT_EXCLUDED, /* .DIR.N.excluded */
    FORK_LAYOUT_RUN,      /* .DIR.N.run */
} fork_layout_side;

/*
 * *out = the fork number `n` of directory `dir`: "/a/b", 3 -> "/a/b.3"
 * (malloc'd). Trailing slashes of `dir` are ignored; relative names stay
 * relative. -EINVAL when `dir` has no last component ("", "/"): there is
 * nothing to put a fork beside. -ENOMEM.
 */
int fork_layout_fork(char **out, const char *dir, unsigned n, rg_error *err);

/*
 * *out = the file `side` beside fork `fork`: "/a/b.3" -> "/a/.b.3.base",
 * "b.3" -> ".b.3.run" (malloc'd). Trailing slashes of `fork` are ignored.
 * -EINVAL when `fork` has no last component that could name a fork ("",
 * "/", ".", ".."). -ENOMEM.
 */
int fork_layout_side_path(char **out, const char *fork, fork_layout_side side, rg_error *err);

/*
 * The inverse of fork_layout_fork, on names only: "/a/b.3" -> *out_dir
 * "/a/b" (malloc'd), *out_n 3. Trailing slashes of `fork` are ignored.
 * -EINVAL when the name does not end in ".<digits>" after something other
 * than a slash ("/a/b", "/a/.3", "/a/b."). *out_n is 0 when the digits are
 * not a number refgate-run makes (a leading zero, 0, or above
 * FORK_LAYOUT_MAX_N): the name is DIR.N in form only. *out_dir is NULL on
 * failure. -ENOMEM.
 */
int fork_layout_parse(char **out_dir, unsigned *out_n, const char *fork, rg_error *err);

#endif
