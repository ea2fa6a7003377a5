/*
 * What one audited ref update brought, read back from the upstream
 * repository for the one-push page: the commits it introduced and the
 * paths it changed. The repository is the one the gateway pushes to (a
 * local upstream's bare repository, found as gateway/route.h finds it) or
 * a remote upstream's mirror under the state dir (upstream/mirror.h) when
 * one exists; it is only read, never fetched into or locked.
 *
 * Bounded: at most CONSOLE_REFGIT_COMMITS_MAX commits are walked past the
 * first and at most CONSOLE_REFGIT_PATHS_MAX paths kept; *_cut says when
 * more exist. Every string is attacker-chosen (authors, subjects, paths):
 * the caller escapes them.
 */
#ifndef RG_CONSOLE_REFGIT_H
#define RG_CONSOLE_REFGIT_H

#include <stddef.h>

#include "config/config.h"
#include "util/error.h"

#define CONSOLE_REFGIT_COMMITS_MAX 50
#define CONSOLE_REFGIT_PATHS_MAX   200

/* What console_refgit_read says when the new commit is not in the repository. */
#define CONSOLE_REFGIT_UNAVAILABLE "unavailable: the objects never reached upstream"

/*
 * What to say instead when that repository is a remote's mirror: it is
 * fetched before a push is inspected, not after one lands, so it may lag.
 */
#define CONSOLE_REFGIT_UNAVAILABLE_MIRROR                                                          \
    "unavailable: the objects are not in this gateway's mirror of upstream (they never reached "   \
    "upstream, or the mirror has not fetched since they did)"

typedef struct console_commit {
    char id[13]; /* short id */
    char author[256];
    char subject[512];
} console_commit;

typedef struct console_path {
    char status; /* 'A', 'D', 'M', 'R', 'T' (type change) */
    char *path;  /* the new path (the old one for a deletion); malloc'd */
} console_path;

/* One update's content. Free with console_refgit_clear. */
typedef struct console_refgit {
    int available;  /* 0: see why (the update's objects cannot be read) */
    char why[512];  /* when not available: the reason, plain text */
    int deleted;    /* the update deletes the ref: nothing introduced */
    int empty_base; /* the paths are against an empty tree (a created ref, no base found) */
    console_commit *commits; /* newest first; calloc'd */
    size_t ncommits;
    int commits_cut;
    console_path *paths; /* calloc'd */
    size_t npaths;
    int paths_cut;
} console_refgit;

/*
 * The git directory that holds the objects of `repo` ("<host>/<path>", as
 * the audit log names it) under `cfg`: malloc'd into *out, and *mirror set
 * when it is a remote upstream's mirror. -ENOENT with a
 * message saying why when there is none (the upstream is gone, the
 * repository is missing, a remote upstream has no mirror here yet).
 */
int console_refgit_dir(char **out, int *mirror, const config_model *cfg, const char *repo,
                       rg_error *err);

/*
 * Read update old_id..new_id of `refname` (hex ids; all zeros: none) from
 * `gitdir`. Its commits are new's not reachable from old (for a created
 * ref: not reachable from any other ref of the repository), its paths
 * old's tree against new's (for a created ref: against the first parent
 * of the oldest commit introduced, or an empty tree). When new is not in
 * the repository, out->available is 0 and why is
 * CONSOLE_REFGIT_UNAVAILABLE. Fails only when the repository cannot be
 * read; libgit2 must be initialised by the caller.
 */
int console_refgit_read(console_refgit *out, const char *gitdir, const char *refname,
                        const char *old_id, const char *new_id, rg_error *err);

void console_refgit_clear(console_refgit *g);

#endif
