/*
 * Writable tool caches of refgate's own; see caches.h. The table below is
 * the list --help prints: a tool's cache is named after the tool, lives at
 * the path the tool uses by default and is named by the variable it reads.
 */
#include "sandbox/caches.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/env.h"
#include "sandbox/home.h"
#include "sandbox/landlock.h"
#include "sandbox/mount.h"

const sandbox_cache_tool sandbox_cache_tools[] = {
    {"go-build", ".cache/go-build", "GOCACHE"},  {"go-mod", "go/pkg/mod", "GOMODCACHE"},
    {"npm", ".npm", "npm_config_cache"},         {"pip", ".cache/pip", "PIP_CACHE_DIR"},
    {"uv", ".cache/uv", "UV_CACHE_DIR"},         {"yarn", ".cache/yarn", "YARN_CACHE_FOLDER"},
    {"cargo-registry", ".cargo/registry", NULL}, {"cargo-git", ".cargo/git", NULL},
    {"maven", ".m2/repository", NULL},           {"gradle", ".gradle/caches", NULL},
    {"gem", ".local/share/gem", NULL},           {NULL, NULL, NULL},
};

static const char *caches_getenv(char *const *envp, const char *name)
{
    size_t len = strlen(name), i;

    for (i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
            return envp[i] + len + 1;
    return NULL;
}

int sandbox_caches_default_root(char **out, const char *home, char *const *envp, rg_error *err)
{
    const char *xdg = caches_getenv(envp, "XDG_CACHE_HOME");
    int n;

    /* The XDG spec: a relative XDG_CACHE_HOME is invalid and ignored. */
    if (xdg != NULL && xdg[0] == '/')
        n = asprintf(out, "%s/refgate/caches", xdg);
    else
        n = asprintf(out, "%s/.cache/refgate/caches", home);
    if (n < 0) {
        *out = NULL;
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int sandbox_caches_mkdirs(const char *path, mode_t mode, rg_error *err)
{
    char buf[PATH_MAX];
    size_t i, len = strlen(path);

    if (path[0] != '/' || len >= sizeof(buf))
        return rg_error_set(err, -EINVAL, "cache directory %s: not an absolute path", path);
    memcpy(buf, path, len + 1);
    for (i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        buf[i] = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return rg_error_set(err, -errno, "cannot create the cache directory %s: %s", buf,
                                strerror(errno));
        buf[i] = i < len ? '/' : '\0';
    }
    return 0;
}

/* A cache directory must be the caller's alone: see sandbox_caches_prepare. */
static int caches_check(int fd, const char *path, rg_error *err)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    if (st.st_uid != geteuid() || (st.st_mode & 022) != 0)
        return rg_error_set(
            err, RG_E_DENIED,
            "refusing the cache directory %s: it is %s, so another user could "
            "poison what runs read from it (chmod 700 it, --cache-dir elsewhere, "
            "or --no-caches)",
            path, st.st_uid != geteuid() ? "owned by someone else" : "writable by group or others");
    return 0;
}

static int caches_add(sandbox_caches *c, const sandbox_cache_tool *t, const char *home,
                      const char *cargo_home, rg_error *err)
{
    sandbox_cache *e = &c->v[c->n];
    const char *base = home, *rel = t->rel;

    /* CARGO_HOME moves cargo's caches; one outside the home directory is
     * left as the host has it (the read-only tree), see --help. */
    if (strncmp(t->rel, ".cargo/", 7) == 0 && cargo_home != NULL) {
        if (sandbox_home_relate(cargo_home, home) != SANDBOX_HOME_INSIDE)
            return 0;
        base = cargo_home;
        rel = t->rel + 7;
    }
    e->name = t->name;
    e->env = t->env;
    if (asprintf(&e->src, "%s/%s", c->root, t->name) < 0) {
        e->src = NULL;
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    if (asprintf(&e->dst, "%s/%s", base, rel) < 0) {
        e->dst = NULL;
        free(e->src);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    c->n++;
    return 0;
}

int sandbox_caches_prepare(sandbox_caches *out, const char *root, const char *home,
                           const char *cargo_home, rg_error *err)
{
    sandbox_caches c = SANDBOX_CACHES_INIT;
    char buf[PATH_MAX];
    size_t i, ntools = 0;
    int rc, rootfd = -1, fd;

    rc = sandbox_caches_mkdirs(root, 0700, err);
    if (rc < 0)
        goto done;
    if (realpath(root, buf) == NULL) {
        rc = rg_error_set(err, -errno, "%s: %s", root, strerror(errno));
        goto done;
    }
    c.root = strdup(buf);
    while (sandbox_cache_tools[ntools].name)
        ntools++;
    c.v = calloc(ntools, sizeof(*c.v));
    if (c.root == NULL || c.v == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    rootfd = open(c.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", c.root, strerror(errno));
        goto done;
    }
    rc = caches_check(rootfd, c.root, err);
    for (i = 0; rc == 0 && i < ntools; i++) {
        const sandbox_cache_tool *t = &sandbox_cache_tools[i];

        if (mkdirat(rootfd, t->name, 0700) < 0 && errno != EEXIST) {
            rc = rg_error_set(err, -errno, "cannot create the cache directory %s/%s: %s", c.root,
                              t->name, strerror(errno));
            break;
        }
        /* O_NOFOLLOW: a symlink planted here would point the bind elsewhere. */
        fd = openat(rootfd, t->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            rc = rg_error_set(err, -errno, "the cache directory %s/%s: %s", c.root, t->name,
                              errno == ELOOP || errno == ENOTDIR
                                  ? "a symlink or not a directory; refused (remove it)"
                                  : strerror(errno));
            break;
        }
        snprintf(buf, sizeof(buf), "%s/%s", c.root, t->name);
        rc = caches_check(fd, buf, err);
        close(fd);
        if (rc == 0)
            rc = caches_add(&c, t, home, cargo_home, err);
    }
done:
    if (rootfd >= 0)
        close(rootfd);
    if (rc < 0)
        sandbox_caches_free(&c);
    else
        *out = c;
    return rc;
}

/* go's default when GOPROXY is unset or empty. */
#define CACHES_GOPROXY_DEFAULT "https://proxy.golang.org,direct"

/* GOPROXY from go's own env file (`go env -w`), malloc'd, or NULL. */
static char *caches_goenv_proxy(const char *home)
{
    char path[PATH_MAX], line[4096], *v = NULL;
    FILE *f;

    snprintf(path, sizeof(path), "%s/.config/go/env", home);
    f = fopen(path, "re");
    if (f == NULL)
        return NULL;
    /* Bounded: the file's lines, 4 KiB each. */
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "GOPROXY=", 8) == 0) {
            free(v);
            v = strdup(line + 8);
        }
    }
    fclose(f);
    return v;
}

/* A URL list with a user or password in it (see env.c's check). */
static int caches_has_userinfo(const char *v)
{
    const char *p, *q;

    for (p = v; (p = strstr(p, "://")) != NULL; p += 3)
        for (q = p + 3; *q && *q != '/' && *q != ',' && *q != '|'; q++)
            if (*q == '@')
                return 1;
    return 0;
}

int sandbox_caches_seed_go(sandbox_caches *c, const struct sandbox_home *h, char *const *env,
                           int mounted, rg_error *err)
{
    const char *gomod = sandbox_env_get(env, "GOMODCACHE"),
               *gopath = sandbox_env_get(env, "GOPATH");
    const char *proxy = sandbox_env_get(env, "GOPROXY");
    char modcache[PATH_MAX], real[PATH_MAX], *fromfile = NULL;
    struct stat st;
    int rc = 0;

    if (c->n == 0)
        return 0;
    if (gomod != NULL && gomod[0] == '/')
        snprintf(modcache, sizeof(modcache), "%s/cache/download", gomod);
    else if (gopath != NULL && gopath[0] == '/')
        snprintf(modcache, sizeof(modcache), "%.*s/pkg/mod/cache/download",
                 (int)strcspn(gopath, ":"), gopath);
    else
        snprintf(modcache, sizeof(modcache), "%s/go/pkg/mod/cache/download", h->path);
    if (realpath(modcache, real) == NULL || stat(real, &st) < 0 || !S_ISDIR(st.st_mode) ||
        sandbox_home_conflict(h, real) != NULL ||
        sandbox_home_relate(real, c->root) != SANDBOX_HOME_UNRELATED)
        return 0;
    if (proxy == NULL || proxy[0] == '\0')
        proxy = fromfile = caches_goenv_proxy(h->path);
    if (proxy == NULL || proxy[0] == '\0')
        proxy = CACHES_GOPROXY_DEFAULT;
    if (strcmp(proxy, "off") == 0 || caches_has_userinfo(proxy))
        goto done;
    c->seed_src = strdup(real);
    if (asprintf(&c->seed_dst, "%s/.cache/refgate-seed/go", h->path) < 0)
        c->seed_dst = NULL;
    if (c->seed_src == NULL || c->seed_dst == NULL ||
        asprintf(&c->goproxy, "file://%s,%s", mounted ? c->seed_dst : c->seed_src, proxy) < 0) {
        c->goproxy = NULL;
        rc = rg_error_set(err, -ENOMEM, "out of memory");
    }
done:
    free(fromfile);
    return rc;
}

void sandbox_caches_free(sandbox_caches *c)
{
    size_t i;

    if (c == NULL)
        return;
    free(c->seed_src);
    free(c->seed_dst);
    free(c->goproxy);
    for (i = 0; i < c->n; i++) {
        free(c->v[i].src);
        free(c->v[i].dst);
    }
    free(c->v);
    free(c->root);
    memset(c, 0, sizeof(*c));
}

int sandbox_caches_mount(const sandbox_caches *c, struct sandbox_mount_plan *p, unsigned flags,
                         rg_error *err)
{
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < c->n; i++)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, c->v[i].src, c->v[i].dst,
                                    flags | SANDBOX_MOUNT_RW, err);
    if (rc == 0 && c->seed_src != NULL)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, c->seed_src, c->seed_dst,
                                    (flags & ~SANDBOX_MOUNT_RW) | SANDBOX_MOUNT_OPTIONAL, err);
    return rc;
}

int sandbox_caches_allow(const sandbox_caches *c, struct sandbox_landlock *ll, int mounted,
                         rg_error *err)
{
    size_t i;
    int rc = 0;

    /* Without the mount namespace a tool without a variable would still
     * look at the user's cache (read-only): nothing to grant for it. */
    for (i = 0; rc == 0 && i < c->n; i++)
        if (mounted || c->v[i].env != NULL)
            rc = sandbox_landlock_allow(ll, mounted ? c->v[i].dst : c->v[i].src,
                                        SANDBOX_LANDLOCK_WRITE, err);
    if (rc == 0 && c->seed_src != NULL)
        rc = sandbox_landlock_allow(ll, mounted ? c->seed_dst : c->seed_src, SANDBOX_LANDLOCK_READ,
                                    err);
    return rc;
}

int sandbox_caches_env(const sandbox_caches *c, char ***env, int mounted, rg_error *err)
{
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < c->n; i++)
        if (c->v[i].env != NULL)
            rc = sandbox_env_setdefault(env, c->v[i].env, mounted ? c->v[i].dst : c->v[i].src, err);
    /* Replacing the user's GOPROXY, which it ends with. */
    if (rc == 0 && c->goproxy != NULL)
        rc = sandbox_env_put(env, "GOPROXY", c->goproxy, err);
    return rc;
}
