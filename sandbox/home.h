/*
 * The home directory as the sandbox sees it: where it is, which paths in it
 * (or named by the environment) hold secrets, and which paths toolchains
 * need to read. Landlock can only allow, so the runner hides the home
 * directory by granting read on everything beside it; this module says what
 * must stay hidden and refuses grants that would reopen a hole (a -r or -w
 * that is, contains or lies inside a secret).
 *
 * Paths here are absolute and canonical (no `.`, `..`, symlinks or trailing
 * slash), so that comparing them as strings is comparing locations.
 */
#ifndef RG_SANDBOX_HOME_H
#define RG_SANDBOX_HOME_H

#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

typedef enum sandbox_home_relation {
    SANDBOX_HOME_UNRELATED = 0,
    SANDBOX_HOME_SAME,     /* a == b */
    SANDBOX_HOME_CONTAINS, /* b lies below a */
    SANDBOX_HOME_INSIDE,   /* a lies below b */
} sandbox_home_relation;

typedef struct sandbox_home {
    char *path;     /* canonical home directory; never "/" */
    char *env;      /* the value HOME gets in the command's environment */
    char **secrets; /* canonical secret paths, existing or not */
    size_t nsecrets;
    char **hidden; /* what must stay unreadable: path, then secrets outside it */
    size_t nhidden;
} sandbox_home;

#define SANDBOX_HOME_INIT                                                                          \
    {                                                                                              \
        NULL, NULL, NULL, 0, NULL, 0                                                               \
    }

/*
 * Paths relative to the home directory that hold credentials. Listed so a
 * -r or -w that would expose one is refused, not so they are hidden: the
 * whole home directory is hidden already. NULL-terminated.
 */
extern const char *const sandbox_home_secret_names[];

/*
 * Paths relative to the home directory that stay readable by default
 * because toolchains need them (git's global config, user binaries,
 * language toolchains and their download caches). None of them is or
 * contains a secret; tests/sandbox/test_home.c checks that. NULL-terminated.
 */
extern const char *const sandbox_home_readable_names[];

/* How canonical path `a` relates to canonical path `b`. */
sandbox_home_relation sandbox_home_relate(const char *a, const char *b);

/*
 * Find the home directory ($HOME from `envp`, else the passwd entry of the
 * real uid), canonicalise it, and list the secrets: the names above plus
 * the files and directories that credential variables in `envp` point to
 * (GNUPGHOME, KUBECONFIG, AWS_SHARED_CREDENTIALS_FILE, ...). A secret that
 * is a symlink out of the home directory is hidden where it points too.
 * Fails when there is no home directory or it is "/". Free with
 * sandbox_home_free().
 */
int sandbox_home_load(sandbox_home *out, char *const *envp, rg_error *err);

/*
 * Build a home from a canonical `path` and extra secret paths without
 * looking at the environment or the filesystem, for tests.
 */
int sandbox_home_init(sandbox_home *out, const char *path, const char *const *extra, size_t nextra,
                      rg_error *err);

void sandbox_home_free(sandbox_home *h);

/*
 * Whether granting `path` (canonical) to the command, to read or to write,
 * would expose a secret: returns the secret that `path` is, contains or
 * lies inside, or the home directory when `path` is or contains it, or NULL
 * when the grant is safe. Landlock only adds rights, so a grant that
 * contains a secret cannot be narrowed again afterwards.
 */
const char *sandbox_home_conflict(const sandbox_home *h, const char *path);

/* An inode that must not be copied into a fork: one of a secret's. */
typedef struct sandbox_home_inode {
    dev_t dev;
    ino_t ino;
} sandbox_home_inode;

/*
 * Collect into *out (malloc'd, *n entries) the inodes of the home
 * directory, of every existing secret, and of what lies inside secret
 * directories (at most `max` entries, a bound against huge caches), so a
 * hard link or bind mount of a secret inside a forked tree is recognised.
 * Sets *truncated when the bound was hit.
 */
int sandbox_home_secret_inodes(sandbox_home_inode **out, size_t *n, int *truncated,
                               const sandbox_home *h, size_t max, rg_error *err);

/* Whether (dev, ino) is in a set built by sandbox_home_secret_inodes(). */
int sandbox_home_inode_find(const sandbox_home_inode *set, size_t n, dev_t dev, ino_t ino);

#endif
