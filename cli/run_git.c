/*
 * The git side of `refgate run`: which repositories the current
 * directory's git remotes name (read with libgit2, which runs nothing from
 * .git/config), and the environment that points the run's git at the
 * gateway (GIT_CONFIG_COUNT/KEY_n/VALUE_n and the token for the runner),
 * so that nothing is written to any git config.
 */
#include "cli/run_int.h"
#include "config/config.h"
#include "tokens/token.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/text.h"

#include <errno.h>
#include <git2.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What git needs to reach the gateway: see run_git_env. */
#define CREDENTIAL_HELPER                                                                          \
    "!f() { test \"$1\" = get || exit 0; echo username=run; "                                      \
    "echo \"password=$REFGATE_RUN_TOKEN\"; }; f"

/* Repositories from the git remotes                                        */
/* ------------------------------------------------------------------------ */

/* An upstream's URL cut into what remotes are compared with. */
typedef struct run_upstream_url {
    char authority[256]; /* host[:port] of an http(s) upstream */
    char hostname[256];  /* the same without the port (for ssh forms) */
    char prefix[1024];   /* the URL's path, without a trailing '/' ("" for none) */
} run_upstream_url;

static int run_split_upstream(run_upstream_url *out, const config_upstream *up)
{
    const char *p = up->url, *slash, *at;
    size_t alen;

    memset(out, 0, sizeof(*out));
    if (!strncmp(p, "https://", 8))
        p += 8;
    else if (!strncmp(p, "http://", 7))
        p += 7;
    else
        return -1;
    slash = strchr(p, '/');
    alen = slash ? (size_t)(slash - p) : strlen(p);
    at = memchr(p, '@', alen);
    if (at != NULL) {
        alen -= (size_t)(at + 1 - p);
        p = at + 1;
    }
    if (alen == 0 || alen >= sizeof(out->authority))
        return -1;
    memcpy(out->authority, p, alen);
    memcpy(out->hostname, p, alen);
    if (out->hostname[0] != '[' && strchr(out->hostname, ':'))
        *strchr(out->hostname, ':') = '\0';
    snprintf(out->prefix, sizeof(out->prefix), "%s", slash ? slash : "");
    while (strlen(out->prefix) > 0 && out->prefix[strlen(out->prefix) - 1] == '/')
        out->prefix[strlen(out->prefix) - 1] = '\0';
    return 0;
}

/*
 * The repository `rest` (a path under an upstream, e.g. "acme/app.git/")
 * names, as "<host>/acme/app"; NULL when empty.
 */
static char *run_repo_name(const char *host, const char *rest)
{
    char *out;
    size_t len;

    while (*rest == '/')
        rest++;
    len = strlen(rest);
    while (len > 0 && rest[len - 1] == '/')
        len--;
    if (len >= 4 && !strncmp(rest + len - 4, ".git", 4))
        len -= 4;
    if (len == 0 || memchr(rest, '/', len) == NULL)
        return NULL;
    if (asprintf(&out, "%s/%.*s", host, (int)len, rest) < 0)
        return NULL;
    return out;
}

/* `rest` after `prefix` + "/" in `path` (or the whole path when prefix is ""). */
static const char *run_under(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);

    if (n == 0)
        return path[0] == '/' ? path : NULL;
    if (strncmp(path, prefix, n) != 0 || path[n] != '/')
        return NULL;
    return path + n;
}

/*
 * Map one remote URL to `<configured host>/<path>`: https://H/P, git@H:P
 * and ssh://git@H/P where an http(s) upstream's URL is on H (and P under
 * its path), file:///R/P or /R/P under a local upstream's root R. *up_index
 * gets the upstream. Returns NULL when the URL is on no configured upstream.
 */
static char *run_map_remote(size_t *up_index, const config_model *cfg, const char *url)
{
    char authority[256] = "", hostname[256] = "", path[2048] = "";
    const char *p, *slash, *colon, *at, *rest;
    int is_http = 0, is_ssh = 0, is_local = 0;
    run_upstream_url u;
    size_t i, n;

    if (!strncmp(url, "https://", 8) || !strncmp(url, "http://", 7)) {
        is_http = 1;
        p = strstr(url, "://") + 3;
    } else if (!strncmp(url, "ssh://", 6)) {
        is_ssh = 1;
        p = url + 6;
    } else if (!strncmp(url, "file://", 7)) {
        is_local = 1;
        snprintf(path, sizeof(path), "%s", url + 7);
    } else if (url[0] == '/') {
        is_local = 1;
        snprintf(path, sizeof(path), "%s", url);
    } else if ((colon = strchr(url, ':')) != NULL &&
               ((slash = strchr(url, '/')) == NULL || colon < slash)) {
        /* scp-like [user@]host:path, as git reads it. */
        at = memchr(url, '@', (size_t)(colon - url));
        p = at ? at + 1 : url;
        n = (size_t)(colon - p);
        if (n == 0 || n >= sizeof(hostname))
            return NULL;
        memcpy(hostname, p, n);
        snprintf(path, sizeof(path), "/%s", colon + 1);
        is_ssh = 2;
    } else {
        return NULL;
    }
    if (is_http || is_ssh == 1) {
        slash = strchr(p, '/');
        if (slash == NULL)
            return NULL;
        n = (size_t)(slash - p);
        at = memchr(p, '@', n);
        if (at != NULL) {
            n -= (size_t)(at + 1 - p);
            p = at + 1;
        }
        if (n == 0 || n >= sizeof(authority))
            return NULL;
        memcpy(authority, p, n);
        memcpy(hostname, p, n);
        if (hostname[0] != '[' && strchr(hostname, ':'))
            *strchr(hostname, ':') = '\0';
        snprintf(path, sizeof(path), "%s", slash);
    }
    for (i = 0; i < cfg->nupstreams; i++) {
        const config_upstream *up = &cfg->upstreams[i];

        if (up->root != NULL) {
            /* A local upstream also stands for its host name's https and
             * ssh URLs, so a clone of a forge's repository can push to a
             * local copy of it. */
            if (is_local)
                rest = run_under(path, up->root);
            else
                rest = strcmp(is_http ? authority : hostname, up->host) == 0 ? run_under(path, "")
                                                                             : NULL;
            if (rest == NULL)
                continue;
        } else {
            if (is_local || run_split_upstream(&u, up) < 0)
                continue;
            /* http(s) compares host and port; ssh has its own port. */
            if (is_http ? strcmp(authority, u.authority) != 0 : strcmp(hostname, u.hostname) != 0)
                continue;
            if ((rest = run_under(path, u.prefix)) == NULL)
                continue;
        }
        *up_index = i;
        return run_repo_name(up->host, rest);
    }
    return NULL;
}

/*
 * The remotes in the git config `path` (the repository's, runplace.h),
 * mapped (into repos/nrepos, deduplicated; used[] marks their upstreams).
 * The config is read as a file: nothing in it is run.
 */
int run_infer_repos(char **repos, size_t *nrepos, unsigned char *used, const config_model *cfg,
                    const char *path)
{
    git_config *gc = NULL;
    git_config_iterator *it = NULL;
    git_config_entry *e;
    char seen[2048] = "";
    size_t seen_len = 0, count = 0, up = 0, j;
    int rc = -1;

    if (path[0] == '\0') {
        fprintf(stderr, "refgate run: the current directory is not in a git repository; name the "
                        "repositories with --repo HOST/PATH\n");
        goto done;
    }
    /* A plain iterator filtered here: libgit2's regex glob leaks pcre2's match data. */
    if (git_config_open_ondisk(&gc, path) < 0 || git_config_iterator_new(&it, gc) < 0) {
        fprintf(stderr, "refgate run: cannot read %s: %s\n", path,
                git_error_last() ? git_error_last()->message : "unknown error");
        goto done;
    }
    /* Bounded: at most REMOTES_MAX entries are looked at. */
    while (count < REMOTES_MAX && git_config_next(&e, it) == 0) {
        size_t nl = strlen(e->name);
        char *repo;

        if (strncmp(e->name, "remote.", 7) != 0 ||
            !((nl > 4 && !strcmp(e->name + nl - 4, ".url")) ||
              (nl > 8 && !strcmp(e->name + nl - 8, ".pushurl"))))
            continue;
        count++;
        repo = run_map_remote(&up, cfg, e->value);

        if (repo == NULL) {
            if (seen_len < sizeof(seen))
                seen_len += (size_t)snprintf(seen + seen_len, sizeof(seen) - seen_len, "%s%s",
                                             seen_len ? ", " : "", e->value);
            continue;
        }
        for (j = 0; j < *nrepos && strcmp(repos[j], repo) != 0; j++)
            ;
        if (j < *nrepos || *nrepos == TOKENS_REPOS_MAX) {
            free(repo);
            continue;
        }
        repos[(*nrepos)++] = repo;
        used[up] = 1;
    }
    if (*nrepos == 0) {
        fprintf(stderr,
                "refgate run: no remote in %s is on an upstream of %s (remotes: %s; "
                "upstreams:",
                path, cfg->path, seen_len ? seen : "none");
        for (j = 0; j < cfg->nupstreams; j++)
            fprintf(stderr, " %s=%s", cfg->upstreams[j].host, cfg->upstreams[j].url);
        fprintf(stderr, "); name the repositories with --repo HOST/PATH\n");
        goto done;
    }
    rc = 0;
done:
    git_config_iterator_free(it);
    git_config_free(gc);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The run's environment                                                    */
/* ------------------------------------------------------------------------ */

static int run_env_add(run_env *e, char *key, char *value)
{
    if (key == NULL || value == NULL || e->n == GIT_ENV_MAX) {
        free(key);
        free(value);
        return -1;
    }
    e->keys[e->n] = key;
    e->values[e->n++] = value;
    return 0;
}

void run_env_free(run_env *e)
{
    size_t i;

    for (i = 0; i < e->n; i++) {
        free(e->keys[i]);
        free(e->values[i]);
    }
    e->n = 0;
}

/* url.<gw>/<host>/.insteadOf and .pushInsteadOf = `from`. */
static int run_env_rewrite(run_env *e, const char *gw, const char *host, const char *from)
{
    char *k1 = NULL, *k2 = NULL;

    if (asprintf(&k1, "url.%s/%s/.insteadOf", gw, host) < 0)
        k1 = NULL;
    if (asprintf(&k2, "url.%s/%s/.pushInsteadOf", gw, host) < 0)
        k2 = NULL;
    if (run_env_add(e, k1, strdup(from)) < 0) {
        free(k2);
        return -1;
    }
    return run_env_add(e, k2, strdup(from));
}

/*
 * The git configuration a run needs, as GIT_CONFIG_KEY_n/VALUE_n pairs:
 * every URL form of each used upstream rewritten to the gateway (for
 * fetches too: inside the run the gateway is the only way out), and a
 * credential helper for the gateway that prints the token from the
 * environment. The empty helper first resets the list, so a helper from
 * the user's own git config is never asked for (or told) the gateway's
 * credential.
 */
int run_git_env(run_env *e, const config_model *cfg, const unsigned char *used, const char *gw)
{
    char from[2048];
    run_upstream_url u;
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < cfg->nupstreams; i++) {
        const config_upstream *up = &cfg->upstreams[i];

        if (!used[i])
            continue;
        if (up->root != NULL) {
            snprintf(from, sizeof(from), "file://%s/", up->root);
            rc = run_env_rewrite(e, gw, up->host, from);
            snprintf(from, sizeof(from), "%s/", up->root);
            if (rc == 0)
                rc = run_env_rewrite(e, gw, up->host, from);
            snprintf(from, sizeof(from), "https://%s/", up->host);
            if (rc == 0)
                rc = run_env_rewrite(e, gw, up->host, from);
            snprintf(from, sizeof(from), "git@%s:", up->host);
            if (rc == 0)
                rc = run_env_rewrite(e, gw, up->host, from);
            snprintf(from, sizeof(from), "ssh://git@%s/", up->host);
            if (rc == 0)
                rc = run_env_rewrite(e, gw, up->host, from);
            continue;
        }
        if (run_split_upstream(&u, up) < 0)
            continue;
        snprintf(from, sizeof(from), "%s/", up->url);
        rc = run_env_rewrite(e, gw, up->host, from);
        snprintf(from, sizeof(from), "git@%s:%s%s", u.hostname, u.prefix[0] ? u.prefix + 1 : "",
                 u.prefix[0] ? "/" : "");
        if (rc == 0)
            rc = run_env_rewrite(e, gw, up->host, from);
        snprintf(from, sizeof(from), "ssh://git@%s%s/", u.hostname, u.prefix);
        if (rc == 0)
            rc = run_env_rewrite(e, gw, up->host, from);
    }
    if (rc == 0) {
        char *k = NULL;

        if (asprintf(&k, "credential.%s.helper", gw) < 0)
            k = NULL;
        rc = run_env_add(e, k, strdup(""));
        if (asprintf(&k, "credential.%s.helper", gw) < 0)
            k = NULL;
        if (rc == 0)
            rc = run_env_add(e, k, strdup(CREDENTIAL_HELPER));
    }
    return rc;
}

/* 1 when NAME=... in `entry` is one of ours (so the caller's is dropped). */
static int run_env_ours(const char *entry)
{
    return !strncmp(entry, "GIT_CONFIG_COUNT=", 17) || !strncmp(entry, "GIT_CONFIG_KEY_", 15) ||
           !strncmp(entry, "GIT_CONFIG_VALUE_", 17) ||
           !strncmp(entry, "GIT_CONFIG_PARAMETERS=", 22) ||
           !strncmp(entry, "REFGATE_RUN_TOKEN=", 18);
}

/*
 * The runner's environment (ours, without the caller's GIT_CONFIG_* and
 * REFGATE_RUN_TOKEN, plus the run's) and the `-e NAME` options that let
 * those through refgate-run's allow-list. refgate-run denies GIT_CONFIG_*
 * and names that look like credentials unless named with --env: naming
 * them (not NAME=VALUE) keeps the values, the token above all, out of
 * argv. The strings are allocated into `owned`.
 */
/* A formatted string recorded in owned[] (freed, wiped, by the caller); NULL when out of memory. */
char *run_own(char **owned, size_t *nowned, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (s != NULL)
        owned[(*nowned)++] = s;
    return s;
}

int run_runner_env(char ***envp_out, const char **args, size_t *nargs, char **owned, size_t *nowned,
                   const run_env *e, const char *token)
{
    extern char **environ;
    size_t n = 0, i, k = 0;
    char **envp, *s, *name;
    int rc = -1;

    for (i = 0; environ[i]; i++)
        n++;
    envp = calloc(n + 2 * e->n + 3, sizeof(*envp));
    if (envp == NULL)
        goto done;
    for (i = 0; environ[i]; i++)
        if (!run_env_ours(environ[i]))
            envp[k++] = environ[i];
    if ((s = run_own(owned, nowned, "REFGATE_RUN_TOKEN=%s", token)) == NULL)
        goto done;
    envp[k++] = s;
    args[(*nargs)++] = "-e";
    args[(*nargs)++] = "REFGATE_RUN_TOKEN";
    if ((s = run_own(owned, nowned, "GIT_CONFIG_COUNT=%zu", e->n)) == NULL)
        goto done;
    envp[k++] = s;
    args[(*nargs)++] = "-e";
    args[(*nargs)++] = "GIT_CONFIG_COUNT";
    for (i = 0; i < e->n; i++) {
        if ((s = run_own(owned, nowned, "GIT_CONFIG_KEY_%zu=%s", i, e->keys[i])) == NULL)
            goto done;
        envp[k++] = s;
        if ((s = run_own(owned, nowned, "GIT_CONFIG_VALUE_%zu=%s", i, e->values[i])) == NULL)
            goto done;
        envp[k++] = s;
        if ((name = run_own(owned, nowned, "GIT_CONFIG_KEY_%zu", i)) == NULL)
            goto done;
        args[(*nargs)++] = "-e";
        args[(*nargs)++] = name;
        if ((name = run_own(owned, nowned, "GIT_CONFIG_VALUE_%zu", i)) == NULL)
            goto done;
        args[(*nargs)++] = "-e";
        args[(*nargs)++] = name;
    }
    rc = 0;
done:
    if (rc < 0) {
        free(envp);
        envp = NULL;
    }
    *envp_out = envp;
    return rc;
}

/* ------------------------------------------------------------------------ */
