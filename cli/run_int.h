/*
 * Private to refgate run (cli/run.c and cli/run_git.c): the git side of a
 * run, which repositories the current directory's remotes name and the
 * GIT_CONFIG_* environment that points its git at the gateway.
 */
#ifndef RG_CLI_RUN_INT_H
#define RG_CLI_RUN_INT_H

#include <stddef.h>

#include "config/config.h"

/* GIT_CONFIG_* entries at most: two per rewritten prefix, three per upstream, two for the helper.
 */
#define GIT_ENV_MAX 128
/* Remote URLs looked at, at most (a .git/config is the user's, but bounded anyway). */
#define REMOTES_MAX 256

typedef struct run_env {
    char *keys[GIT_ENV_MAX], *values[GIT_ENV_MAX];
    size_t n;
} run_env;

int run_infer_repos(char **repos, size_t *nrepos, unsigned char *used, const config_model *cfg,
                    const char *path);
void run_env_free(run_env *e);
int run_git_env(run_env *e, const config_model *cfg, const unsigned char *used, const char *gw);
/* A formatted string recorded in owned[] (freed, wiped, by the caller); NULL when out of memory. */
char *run_own(char **owned, size_t *nowned, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int run_runner_env(char ***envp_out, const char **args, size_t *nargs, char **owned, size_t *nowned,
                   const run_env *e, const char *token);

#endif
