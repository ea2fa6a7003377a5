/*
 * Writable tool caches for a run. A toolchain that cannot write its cache
 * fails (go: "failed to initialize build cache") or runs cold every time,
 * but the user's own caches must not be writable: a run could plant a
 * poisoned module or build result there that the user's next build, outside
 * the sandbox, would use. So each run gets caches of refgate's own,
 * persistent and per user ($XDG_CACHE_HOME/refgate/caches/<tool>, each
 * directory 0700 and owned by the caller), which stay warm from one run to
 * the next and are never the user's.
 *
 * With the mount namespace a cache is bound where the tool looks by default
 * ($HOME/.cache/go-build, $HOME/.npm, ...), so tools that take no variable
 * (cargo, maven, gradle, gem) find it too; the variable a tool does read
 * (GOCACHE, npm_config_cache, ...) is also set to that place, so a setting
 * in the user's own configuration does not send it back to the real cache.
 * Without the mount namespace only the tools with such a variable get one.
 */
#ifndef RG_SANDBOX_CACHES_H
#define RG_SANDBOX_CACHES_H

#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

/* One tool's cache: its name, where it lives, where the tool looks. */
typedef struct sandbox_cache {
    const char *name; /* static: "go-build" */
    const char *env;  /* static: the variable naming it ("GOCACHE"), or NULL */
    char *src;        /* refgate's directory for it on the host */
    char *dst;        /* the tool's usual path, under the home directory */
} sandbox_cache;

typedef struct sandbox_caches {
    char *root; /* canonical: the directory holding one directory per tool */
    sandbox_cache *v;
    size_t n;
    /* Go's seed (sandbox_caches_seed_go): the user's module download cache,
     * read-only at seed_dst, and the GOPROXY that reads it first. */
    char *seed_src, *seed_dst, *goproxy;
} sandbox_caches;

#define SANDBOX_CACHES_INIT                                                                        \
    {                                                                                              \
        NULL, NULL, 0, NULL, NULL, NULL                                                            \
    }

/* The tools, for --help and tests: name, path under the home directory,
 * variable or NULL. NULL-terminated on name. */
typedef struct sandbox_cache_tool {
    const char *name;
    const char *rel;
    const char *env;
} sandbox_cache_tool;

extern const sandbox_cache_tool sandbox_cache_tools[];

/*
 * The default root for `home` (canonical) and `envp`:
 * $XDG_CACHE_HOME/refgate/caches when XDG_CACHE_HOME is absolute, else
 * <home>/.cache/refgate/caches. malloc'd into *out.
 */
int sandbox_caches_default_root(char **out, const char *home, char *const *envp, rg_error *err);

/*
 * Make (mode 0700) or check the root and one directory per tool in it, and
 * fill *out. Every directory must be a directory (not a symlink) owned by
 * the effective uid and not writable by group or others, or the run is
 * refused: a cache someone else can write is a cache someone else can
 * poison. `home` is the home directory the tools' paths are under;
 * `cargo_home` ($CARGO_HOME, or NULL) moves cargo's two caches under it
 * when it lies in the home directory. Free with sandbox_caches_free().
 */
int sandbox_caches_prepare(sandbox_caches *out, const char *root, const char *home,
                           const char *cargo_home, rg_error *err);

void sandbox_caches_free(sandbox_caches *c);

struct sandbox_home;

/*
 * Seed go's module cache from the user's, read-only: refgate's module
 * cache starts empty, but a module the user has downloaded before is in
 * their $GOMODCACHE/cache/download, which is laid out as a module proxy.
 * So that directory is given read-only (at <home>/.cache/refgate-seed/go,
 * with the mount namespace) and GOPROXY becomes "file://<it>,<GOPROXY>":
 * go copies what it finds there into the run's own cache, offline, and
 * asks the usual proxy for the rest. The user's GOPROXY is the one in
 * `env` (the built environment), else the one in ~/.config/go/env, else
 * go's default; none when it is "off" or holds a user:password@, or the
 * download cache does not exist or is, holds or lies in a secret.
 * `mounted`: with the mount namespace. Call after sandbox_caches_prepare.
 */
int sandbox_caches_seed_go(sandbox_caches *c, const struct sandbox_home *h, char *const *env,
                           int mounted, rg_error *err);

/* `mkdir -p path`, with `mode` (less the umask) for what it creates. */
int sandbox_caches_mkdirs(const char *path, mode_t mode, rg_error *err);

struct sandbox_mount_plan;
struct sandbox_landlock;

/*
 * With the mount namespace: bind each cache at its tool's usual path, with
 * `flags` (SANDBOX_MOUNT_RW, plus IDMAP for a root caller). Call before the
 * read-only toolchain binds of the same paths are planned: the first entry
 * for a destination is the one kept.
 */
int sandbox_caches_mount(const sandbox_caches *c, struct sandbox_mount_plan *p, unsigned flags,
                         rg_error *err);

/* Let the command write its caches: at the usual paths with the mount
 * namespace (`mounted`), else refgate's directories themselves. */
int sandbox_caches_allow(const sandbox_caches *c, struct sandbox_landlock *ll, int mounted,
                         rg_error *err);

/* Point each tool's variable at its cache (where the command sees it),
 * unless the environment names it already (an --env wins). */
int sandbox_caches_env(const sandbox_caches *c, char ***env, int mounted, rg_error *err);

#endif
