/*
 * What a fork leaves out (refgate-run --exclude, --exclude-ignored): big
 * rebuildable directories such as node_modules, which cost most of a fork's
 * time and space where the filesystem cannot reflink.
 *
 * An excluded entry (a directory or a regular file) is not copied: the fork
 * and its base get an empty placeholder with its mode and times, and inside
 * the run the original is bound read-only over the placeholder. Builds that
 * only read it (node_modules for tests and type checks) work at no cost;
 * one that writes there fails loudly with EROFS rather than finding it
 * silently empty. The view is the live original, not a snapshot: that is
 * the price of not copying, so exclusions are asked for, never on by
 * default.
 *
 * Patterns are a subset of .gitignore's, relative to the forked directory:
 * `name` (no slash) matches an entry of that name at any depth; a pattern
 * with a slash inside (or a leading one) is anchored at the top; a trailing
 * slash matches directories only; `*`, `?` and `[...]` match within one
 * path segment; a segment `**` matches any number of segments (so
 * `**`/__pycache__ is __pycache__ at any depth, src/`**`/gen any gen below
 * src). An entry named `.git` is never excluded: the run's git must work on
 * its own copy.
 *
 * --exclude-ignored asks git which directories it ignores and excludes the
 * wholly ignored, untracked ones whose name says they hold fetched
 * dependencies (fork_exclude_ignored_names): exactly what a read-only view
 * serves, and what the run could not fetch again offline. Build outputs
 * (target, build, dist) are not in it: their tools write there.
 *
 * What was excluded is recorded beside the fork, in `.<fork name>.excluded`
 * (outside the fork, so the command cannot edit it): a comment line, then
 * each path relative to the top, NUL-terminated. `refgate diff` reads it and
 * leaves those paths out of both sides, so it never proposes to delete them
 * and --apply never touches them in the original.
 */
#ifndef RG_FORK_EXCLUDE_H
#define RG_FORK_EXCLUDE_H

#include <stddef.h>
#include <sys/stat.h>

#include "sandbox/mount.h"
#include "util/error.h"

/* Entries excluded from one fork, at most: each is a mount inside the run. */
#define FORK_EXCLUDE_MAX 1024

/* The directory names --exclude-ignored excludes when git ignores them. */
extern const char *const fork_exclude_ignored_names[];

typedef struct fork_exclude {
    char **patterns; /* --exclude, as given (validated) */
    size_t npatterns;
    char **paths; /* exact relative directory paths (--exclude-ignored) */
    size_t npaths;
    char **excluded; /* what the copy left out, relative, in walk order */
    size_t nexcluded;
} fork_exclude;

#define FORK_EXCLUDE_INIT                                                                          \
    {                                                                                              \
        NULL, 0, NULL, 0, NULL, 0                                                                  \
    }

/* Check `pattern` (see above) and add a copy. -EINVAL says what is wrong. */
int fork_exclude_add_pattern(fork_exclude *x, const char *pattern, rg_error *err);

/*
 * Whether `path` ('/'-separated, relative to the top, no leading slash), a
 * directory when `is_dir`, matches `pattern`. Pure.
 */
int fork_exclude_pattern_match(const char *pattern, const char *path, int is_dir);

/* Whether `path` is excluded by a pattern or an exact path of `x`. */
int fork_exclude_matches(const fork_exclude *x, const char *path, int is_dir);

/*
 * Add the directories below `dir` that git ignores (wholly: untracked and
 * matched by an ignore rule) and that are named in
 * fork_exclude_ignored_names. Runs `git ls-files` in `dir` with the
 * fsmonitor hook off. *out_n gets how many were added. -ENOENT when `dir`
 * is not in a git work tree or git cannot run (the message says which).
 */
int fork_exclude_add_ignored(size_t *out_n, fork_exclude *x, const char *dir, rg_error *err);

/*
 * For fork_tree_opts.exclude (ctx: the fork_exclude): 1 when `path`
 * is excluded, which is then remembered in x->excluded; 0 to copy it;
 * -E2BIG past FORK_EXCLUDE_MAX entries.
 */
int fork_exclude_tree_cb(void *ctx, const char *path, const struct stat *st);

/* The record's path for fork `fork`: "/a/b.3" -> "/a/.b.3.excluded". */
int fork_exclude_record_path(char **out, const char *fork, rg_error *err);

/*
 * Write x->excluded to the record beside `fork` (0600), or remove a stale
 * record when nothing was excluded.
 */
int fork_exclude_record(const fork_exclude *x, const char *fork, rg_error *err);

/*
 * Read the record beside `fork` into x->excluded (a continued fork's
 * exclusions); no record is nothing excluded. A record that is not a
 * regular file, or holds an absolute path or a "." / ".." segment, is an
 * error (-EINVAL).
 */
int fork_exclude_load(fork_exclude *x, const char *fork, rg_error *err);

/*
 * Plan the read-only views: each excluded path of canonical directory
 * `src` bound over its placeholder in `fork`, with `flags` (IDMAP for a
 * root caller's run; never RW).
 */
int fork_exclude_plan_mounts(sandbox_mount_plan *p, const fork_exclude *x, const char *src,
                             const char *fork, unsigned flags, rg_error *err);

void fork_exclude_free(fork_exclude *x);

#endif
