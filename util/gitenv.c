/* The git child environment; see gitenv.h. */
#include "util/gitenv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixed variables, the three options, the count and two per setting. */
#define GITENV_VARS_MAX (16 + 2 * RG_GITENV_CONFIG_MAX)

struct rg_gitenv {
    char *vars[GITENV_VARS_MAX + 1]; /* NULL-terminated; every string heap-allocated */
    size_t n;
    size_t nconfig;
    size_t count_at; /* the index of GIT_CONFIG_COUNT=, rewritten per setting */
};

static int gitenv_add(rg_gitenv *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gitenv_add(rg_gitenv *e, const char *fmt, ...)
{
    va_list ap;
    int rc;

    if (e->n >= GITENV_VARS_MAX)
        return -E2BIG;
    va_start(ap, fmt);
    rc = vasprintf(&e->vars[e->n], fmt, ap);
    va_end(ap);
    if (rc < 0) {
        e->vars[e->n] = NULL;
        return -ENOMEM;
    }
    e->n++;
    e->vars[e->n] = NULL;
    return 0;
}

int rg_gitenv_new(rg_gitenv **out, const rg_gitenv_opts *opts, rg_error *err)
{
    const char *path = getenv("PATH");
    rg_gitenv *e;
    int rc = 0;

    *out = NULL;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    /* git finds its helpers in its compiled-in exec path; PATH is for what
     * those run in turn (the ssh or curl transports, hooks of a local
     * upstream), as the administrator set it for the gateway. */
    rc |= gitenv_add(e, "PATH=%s", path ? path : "/usr/bin:/bin");
    /* Messages in English: callers pick "fatal:" lines out of stderr. */
    rc |= gitenv_add(e, "LANG=C");
    /* No user configuration (~/.gitconfig, $XDG_CONFIG_HOME/git/config,
     * credentials, hooks paths) can be read: it could run anything, as a
     * core.fsmonitor, credential helper or alias does. */
    rc |= gitenv_add(e, "HOME=/nonexistent");
    rc |= gitenv_add(e, "GIT_CONFIG_GLOBAL=/dev/null");
    /* Nor the system's (/etc/gitconfig): the gateway's children behave the
     * same on every machine, and settings come only from the repository
     * and from rg_gitenv_config. */
    rc |= gitenv_add(e, "GIT_CONFIG_NOSYSTEM=1");
    /* Nobody is at a terminal: a missing credential fails, never waits. */
    rc |= gitenv_add(e, "GIT_TERMINAL_PROMPT=0");
    /* refs/replace must not change what an ancestry question answers: the
     * libgit2 path ignores replacements, so the git path must too. */
    rc |= gitenv_add(e, "GIT_NO_REPLACE_OBJECTS=1");
    if (opts != NULL && opts->object_dir != NULL)
        rc |= gitenv_add(e, "GIT_OBJECT_DIRECTORY=%s", opts->object_dir);
    if (opts != NULL && opts->alternates != NULL)
        rc |= gitenv_add(e, "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s", opts->alternates);
    if (opts != NULL && opts->protocol != NULL)
        rc |= gitenv_add(e, "GIT_PROTOCOL=%s", opts->protocol);
    if (opts != NULL && opts->gnupg_home != NULL)
        rc |= gitenv_add(e, "GNUPGHOME=%s", opts->gnupg_home);
    /* Always present, so a count inherited some other way cannot apply. */
    e->count_at = e->n;
    rc |= gitenv_add(e, "GIT_CONFIG_COUNT=0");
    if (rc != 0) {
        rg_gitenv_free(e);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    *out = e;
    return 0;
}

static void gitenv_wipe(char *s)
{
    if (s == NULL)
        return;
    explicit_bzero(s, strlen(s));
    free(s);
}

int rg_gitenv_config(rg_gitenv *e, const char *key, const char *value, rg_error *err)
{
    char *count = NULL;

    if (e->nconfig >= RG_GITENV_CONFIG_MAX || e->n + 2 > GITENV_VARS_MAX)
        return rg_error_set(err, -E2BIG, "more than %d git settings", RG_GITENV_CONFIG_MAX);
    if (asprintf(&count, "GIT_CONFIG_COUNT=%zu", e->nconfig + 1) < 0)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (gitenv_add(e, "GIT_CONFIG_KEY_%zu=%s", e->nconfig, key) < 0) {
        free(count);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    if (gitenv_add(e, "GIT_CONFIG_VALUE_%zu=%s", e->nconfig, value) < 0) {
        free(count);
        gitenv_wipe(e->vars[--e->n]);
        e->vars[e->n] = NULL;
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    free(e->vars[e->count_at]);
    e->vars[e->count_at] = count;
    e->nconfig++;
    return 0;
}

const char *const *rg_gitenv_envp(const rg_gitenv *e)
{
    return (const char *const *)e->vars;
}

void rg_gitenv_free(rg_gitenv *e)
{
    if (e == NULL)
        return;
    for (size_t i = 0; i < e->n; i++)
        gitenv_wipe(e->vars[i]);
    free(e);
}
