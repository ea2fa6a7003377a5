/*
 * refgate-run's options, one table: the name and short name, whether each
 * takes a value, and what `refgate run` does with it (passes it on as
 * given, refuses it, sets it itself, or does not offer it). refgate-run's
 * parser (runner/opts.c) builds its getopt table from it and `refgate run`
 * (cli/run.c) its pass-through, so the argv contract between the two
 * programs is written once. A library of its own with nothing but libc, so
 * the cli links it without the runner.
 */
#ifndef REFGATE_RUNNER_OPTIONS_H
#define REFGATE_RUNNER_OPTIONS_H

#include <stddef.h>

/* getopt's values for the options without a short name. */
enum {
    RUNNER_OPT_RM = 256,
    RUNNER_OPT_KEEP_TMP,
    RUNNER_OPT_FORCE,
    RUNNER_OPT_NO_SCOPE,
    RUNNER_OPT_NO_TRUNCATE,
    RUNNER_OPT_UNCONFINED,
    RUNNER_OPT_CHECK,
    RUNNER_OPT_VERSION,
    RUNNER_OPT_DEBUG_ABI,
    RUNNER_OPT_UNSHARE,
    RUNNER_OPT_SHARE,
    RUNNER_OPT_SHARE_NET,
    RUNNER_OPT_HIDE,
    RUNNER_OPT_DEBUG_NS,
    RUNNER_OPT_NO_PTY,
    RUNNER_OPT_NET,
    RUNNER_OPT_GATEWAY,
    RUNNER_OPT_EXCLUDE,
    RUNNER_OPT_EXCLUDE_IGNORED,
    RUNNER_OPT_BIND,
    RUNNER_OPT_RO_BIND,
    RUNNER_OPT_CONTINUE,
    RUNNER_OPT_NO_CACHES,
    RUNNER_OPT_CACHE_DIR,
    RUNNER_OPT_MKDIR,
};

/* Whether an option takes a value (getopt's no/required/optional_argument). */
typedef enum runner_option_arg {
    RUNNER_ARG_NONE = 0,
    RUNNER_ARG_REQUIRED = 1,
    RUNNER_ARG_OPTIONAL = 2,
} runner_option_arg;

/* What `refgate run` does with an option. */
typedef enum runner_option_run {
    RUNNER_RUN_NOT_OFFERED = 0, /* not one of refgate run's options: unknown there */
    RUNNER_RUN_PASSED,          /* passed on as given */
    RUNNER_RUN_REFUSED,         /* refused: `why` */
    RUNNER_RUN_SETS,            /* refgate run sets it itself (`why`); refused if given */
} runner_option_run;

typedef struct runner_option {
    const char *name;       /* "--name" */
    const char *short_name; /* "-x", or NULL */
    runner_option_arg arg;
    int id;                /* getopt's value: the short letter, or RUNNER_OPT_* */
    runner_option_run run; /* what refgate run does with it */
    const char *why;       /* refused or set: why, for the message; else NULL */
} runner_option;

/* Every option of refgate-run, ended by an entry whose name is NULL. */
extern const runner_option runner_options[];

/*
 * The option `arg` spells ("--name", "--name=VALUE", "-x", "-x=VALUE"),
 * or NULL; *len is the length of the name as spelled in `arg`.
 */
const runner_option *runner_option_lookup(const char *arg, size_t *len);

#endif
