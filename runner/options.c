/*
 * refgate-run's options, one table read by refgate-run's parser and by
 * `refgate run`'s pass-through (see options.h). What the run's network,
 * namespaces and confinement are is refgate run's to decide: those options
 * are refused there (refgate-run itself takes them).
 */
#include "runner/options.h"

#include <string.h>

#define NETWORK     "its network is the gateway"
#define CONFINEMENT "its confinement is whole"

/* clang-format off */
const runner_option runner_options[] = {
    {"--dir", "-d", RUNNER_ARG_REQUIRED, 'd', RUNNER_RUN_REFUSED,
     "it runs in a fork of the work tree"},
    {"--read", "-r", RUNNER_ARG_REQUIRED, 'r', RUNNER_RUN_PASSED, NULL},
    {"--write", "-w", RUNNER_ARG_REQUIRED, 'w', RUNNER_RUN_PASSED, NULL},
    {"--env", "-e", RUNNER_ARG_REQUIRED, 'e', RUNNER_RUN_PASSED, NULL},
    {"--rm", NULL, RUNNER_ARG_NONE, RUNNER_OPT_RM, RUNNER_RUN_PASSED, NULL},
    {"--keep-tmp", NULL, RUNNER_ARG_NONE, RUNNER_OPT_KEEP_TMP, RUNNER_RUN_PASSED, NULL},
    {"--force", NULL, RUNNER_ARG_NONE, RUNNER_OPT_FORCE, RUNNER_RUN_REFUSED,
     "secrets stay unreadable"},
    {"--no-scope", NULL, RUNNER_ARG_NONE, RUNNER_OPT_NO_SCOPE, RUNNER_RUN_REFUSED, CONFINEMENT},
    {"--no-truncate-control", NULL, RUNNER_ARG_NONE, RUNNER_OPT_NO_TRUNCATE, RUNNER_RUN_REFUSED,
     CONFINEMENT},
    {"--allow-unconfined", NULL, RUNNER_ARG_NONE, RUNNER_OPT_UNCONFINED, RUNNER_RUN_REFUSED,
     CONFINEMENT},
    {"--check", NULL, RUNNER_ARG_NONE, RUNNER_OPT_CHECK, RUNNER_RUN_NOT_OFFERED, NULL},
    {"--quiet", "-q", RUNNER_ARG_NONE, 'q', RUNNER_RUN_PASSED, NULL},
    {"--verbose", "-v", RUNNER_ARG_NONE, 'v', RUNNER_RUN_PASSED, NULL},
    {"--help", "-h", RUNNER_ARG_NONE, 'h', RUNNER_RUN_NOT_OFFERED, NULL},
    {"--version", NULL, RUNNER_ARG_NONE, RUNNER_OPT_VERSION, RUNNER_RUN_NOT_OFFERED, NULL},
    {"--debug-landlock-abi", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_DEBUG_ABI,
     RUNNER_RUN_NOT_OFFERED, NULL},
    {"--unshare", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_UNSHARE, RUNNER_RUN_REFUSED, CONFINEMENT},
    {"--share", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_SHARE, RUNNER_RUN_REFUSED, CONFINEMENT},
    {"--share-net", NULL, RUNNER_ARG_NONE, RUNNER_OPT_SHARE_NET, RUNNER_RUN_REFUSED, NETWORK},
    {"--hide", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_HIDE, RUNNER_RUN_PASSED, NULL},
    {"--no-pty", NULL, RUNNER_ARG_NONE, RUNNER_OPT_NO_PTY, RUNNER_RUN_NOT_OFFERED, NULL},
    {"--net", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_NET, RUNNER_RUN_REFUSED, NETWORK},
    {"--gateway", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_GATEWAY, RUNNER_RUN_SETS,
     NETWORK ", at the URL its git uses"},
    {"--exclude", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_EXCLUDE, RUNNER_RUN_PASSED, NULL},
    {"--exclude-ignored", NULL, RUNNER_ARG_NONE, RUNNER_OPT_EXCLUDE_IGNORED, RUNNER_RUN_PASSED,
     NULL},
    {"--bind", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_BIND, RUNNER_RUN_PASSED, NULL},
    {"--ro-bind", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_RO_BIND, RUNNER_RUN_PASSED, NULL},
    {"--continue", NULL, RUNNER_ARG_OPTIONAL, RUNNER_OPT_CONTINUE, RUNNER_RUN_SETS,
     "refgate run takes --continue [FORK] itself"},
    {"--no-caches", NULL, RUNNER_ARG_NONE, RUNNER_OPT_NO_CACHES, RUNNER_RUN_PASSED, NULL},
    {"--cache-dir", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_CACHE_DIR, RUNNER_RUN_PASSED, NULL},
    {"--mkdir", NULL, RUNNER_ARG_NONE, RUNNER_OPT_MKDIR, RUNNER_RUN_PASSED, NULL},
    {"--debug-ns-unavailable", NULL, RUNNER_ARG_REQUIRED, RUNNER_OPT_DEBUG_NS,
     RUNNER_RUN_NOT_OFFERED, NULL},
    {NULL, NULL, RUNNER_ARG_NONE, 0, RUNNER_RUN_NOT_OFFERED, NULL},
};
/* clang-format on */

/* Whether `arg` starts with `name`, followed by its end or '='. */
static int runner_option_spells(const char *arg, const char *name, size_t *len)
{
    size_t n;

    if (name == NULL)
        return 0;
    n = strlen(name);
    if (strncmp(arg, name, n) != 0 || (arg[n] != '\0' && arg[n] != '='))
        return 0;
    *len = n;
    return 1;
}

const runner_option *runner_option_lookup(const char *arg, size_t *len)
{
    const runner_option *o;

    for (o = runner_options; o->name != NULL; o++)
        if (runner_option_spells(arg, o->name, len) ||
            runner_option_spells(arg, o->short_name, len))
            return o;
    return NULL;
}
