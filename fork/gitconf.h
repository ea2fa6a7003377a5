/*
 * Making a fork's .git safe to use after a run. Everything the run wrote in
 * the fork's .git would take effect at the user's first git command there,
 * outside the sandbox: core.fsmonitor, core.hooksPath, hooks, filters,
 * diff.external, textconv, aliases, include paths, credential.helper,
 * core.sshCommand, core.editor, core.pager... each runs a program. So once
 * the command has exited, the runner rewrites the fork's .git/config
 * keeping only an allow-list of keys that run nothing (every other key is
 * removed, whoever set it), moves the hooks aside, and moves aside what
 * would point git at another configuration (a .git that is a link or a
 * gitfile the run changed, .git/commondir, .git/config.worktree). The
 * submodule repositories under .git/modules and every .git below the top
 * of the fork get the same treatment, since `git status` recurses into
 * submodules (and the run may have written the index that names them).
 *
 * No git program runs and no library reads the file: the config syntax
 * (sections, quoted subsections, quoted values, escapes, continuation
 * lines, comments) is parsed here, and `include.path` is just another key
 * that is not on the list. A file that does not parse is replaced by an
 * empty one. The original is kept as .git/config.refgate-run-orig (0600),
 * which git never reads.
 */
#ifndef RG_FORK_GITCONF_H
#define RG_FORK_GITCONF_H

#include <stddef.h>

#include "util/error.h"

/* Told each thing neutralised: "config core.fsmonitor", "hooks/pre-commit",
 * ".git (a symlink)"... `where` is the git directory's path in the fork
 * (".git", ".git/modules/sub", "lib/.git"), "" when `what` names it. */
typedef void (*fork_gitconf_tell_fn)(void *ctx, const char *where, const char *what);

/*
 * Whether the key (section and name lowercased, subsection as written,
 * "remote.origin.url") is on the allow-list. *need_base is set for keys
 * kept only when the base's config had the same key with the same value
 * (remote and submodule URLs: a changed URL would send the user's
 * credentials elsewhere at the next fetch).
 */
int fork_gitconf_allowed(const char *section, const char *subsection, const char *name,
                         int *need_base);

/*
 * Rewrite `config` (a git config file's text, `len` bytes) into *out (a
 * malloc'd, NUL-terminated text) keeping only allowed keys; `base`, which
 * may be NULL, is the base's config for the keys that must match it. Each
 * removed key is told (as "config section.sub.name"). Returns 1 when
 * something was removed, 0 when nothing was, RG_E_CONFIG when `config`
 * does not parse (*out is then the empty text).
 */
int fork_gitconf_filter(char **out, const char *config, size_t len, const char *base,
                        size_t base_len, fork_gitconf_tell_fn tell, void *ctx);

/*
 * Neutralise the .git of the fork `fork` (its base `base`, which may be
 * NULL, is read for the values that must match). Nothing to do without a
 * .git; one the run created is treated like one it was given. Never
 * follows a symlink. *out gets the number of things neutralised (each also
 * told), also when a later step fails.
 */
int fork_gitconf_neutralise(int *out, const char *fork, const char *base, fork_gitconf_tell_fn tell,
                            void *ctx, rg_error *err);

/*
 * Rename dirfd/name to name+suffix (name+suffix.1, .2... when taken; never
 * replacing anything). 0 or a negative errno.
 */
int fork_gitconf_move_aside(int dirfd, const char *name, const char *suffix);

#endif
