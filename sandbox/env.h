/*
 * The command's environment, built from an allow-list rather than copied:
 * variables change what programs load and run (LD_PRELOAD, NODE_OPTIONS,
 * BASH_ENV, GIT_CONFIG_*), and credentials live in them (GITHUB_TOKEN), so
 * only what is listed here or named with --env reaches the command.
 *
 * Precedence, highest first: a variable named with --env; the deny rules
 * (loader and startup hooks, credential-looking names), which override the
 * allow-list's patterns such as LC_*; the allow-list; everything else is
 * dropped.
 */
#ifndef RG_SANDBOX_ENV_H
#define RG_SANDBOX_ENV_H

#include <stddef.h>

#include "util/error.h"

typedef enum sandbox_env_verdict {
    SANDBOX_ENV_PASS = 0,   /* on the allow-list */
    SANDBOX_ENV_UNLISTED,   /* not on the allow-list */
    SANDBOX_ENV_HOOK,       /* changes what programs load or run at start */
    SANDBOX_ENV_CREDENTIAL, /* its name looks like a credential's */
} sandbox_env_verdict;

/* Classify the variable name name[0..len) (len excludes any "=value"). */
sandbox_env_verdict sandbox_env_classify(const char *name, size_t len);

/*
 * Classify a whole "NAME=VALUE" entry: the name as above, and a proxy
 * variable whose URL holds a user or password is a credential.
 */
sandbox_env_verdict sandbox_env_check(const char *entry);

/* A short reason for a verdict, for messages: "not on the allow-list". */
const char *sandbox_env_verdict_str(sandbox_env_verdict v);

typedef struct sandbox_env_opts {
    const char *const *named; /* --env arguments: NAME or NAME=VALUE */
    size_t nnamed;
    const char *home;   /* HOME for the command, when the caller's is unset */
    const char *tmpdir; /* TMPDIR for the command (the private directory) */
} sandbox_env_opts;

#define SANDBOX_ENV_OPTS_INIT                                                                      \
    {                                                                                              \
        NULL, 0, NULL, NULL                                                                        \
    }

/*
 * Build the command's environment from `envp` into *out, a NULL-terminated
 * array of malloc'd "NAME=VALUE" strings; free it with sandbox_env_free().
 * TMPDIR is set to opts->tmpdir and HOME to opts->home when the caller has
 * none; a --env NAME=VALUE or --env NAME overrides both. A --env NAME that
 * is not set in `envp` passes nothing. -EINVAL for a malformed --env.
 */
int sandbox_env_build(char ***out, char *const *envp, const sandbox_env_opts *opts, rg_error *err);

/*
 * Add NAME=VALUE to a built environment (*env, from sandbox_env_build)
 * unless it has NAME already, which then wins (an --env, say).
 */
int sandbox_env_setdefault(char ***env, const char *name, const char *value, rg_error *err);

/* Set NAME=VALUE in a built environment, replacing what it had. */
int sandbox_env_put(char ***env, const char *name, const char *value, rg_error *err);

/*
 * The names (never the values) of the variables in `envp` that the built
 * environment `built` does not have, ", "-separated, into *out (malloc'd,
 * NULL when none); the shell's own bookkeeping (PWD, OLDPWD, SHLVL, _) is
 * left out. At most `max` bytes: *out then ends with "...".
 */
int sandbox_env_dropped(char **out, char *const *envp, char *const *built, size_t max);

/* Frees the array and its strings, wiping values first; accepts NULL. */
void sandbox_env_free(char **env);

/* The value of `name` in `env`, or NULL. */
const char *sandbox_env_get(char *const *env, const char *name);

#endif
