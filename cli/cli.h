/*
 * The `refgate` subcommands. Each takes the arguments after its own name
 * (argv[0] is the subcommand) and returns the process exit status; main.c
 * only dispatches. These are the only functions in the gateway library that
 * print.
 */
#ifndef RG_GATEWAY_CLI_H
#define RG_GATEWAY_CLI_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "util/error.h"

int cli_serve(int argc, char **argv);
int cli_token(int argc, char **argv);
int cli_audit(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_diff(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_policy(int argc, char **argv);
int cli_approvals(int argc, char **argv);
int cli_approve(int argc, char **argv);
int cli_deny(int argc, char **argv);
int cli_console(int argc, char **argv);
int cli_db(int argc, char **argv);

/*
 * Option parsing, one parser for every subcommand. A subcommand declares a
 * static table of its options and a cli_cmd naming it, and calls
 * cli_opts_parse, which takes `--opt VALUE`, `--opt=VALUE`, `--` (the rest
 * are operands), `-h`/`--help` (and `help` as the first argument), and says
 * every mistake in one wording: "refgate WORDS: unknown option '--x'",
 * "--x needs a value (FILE)", "--x takes no value", "at most N --x".
 */

typedef enum cli_opt_kind {
    CLI_OPT_FLAG,  /* no value: the int at `off` becomes 1 */
    CLI_OPT_VALUE, /* one value (the last one given): the const char * at `off` */
    CLI_OPT_LIST,  /* repeatable value: appended to the cli_opt_list at `off` */
} cli_opt_kind;

/* A repeatable option's values, in the order given (pointers into argv). */
#define CLI_OPT_LIST_MAX 64
typedef struct cli_opt_list {
    const char *v[CLI_OPT_LIST_MAX];
    size_t n;
} cli_opt_list;

typedef struct cli_opt {
    const char *name; /* "--config", "-q" */
    cli_opt_kind kind;
    size_t off;       /* offsetof(the subcommand's options struct, its field) */
    const char *word; /* the value's word in messages ("FILE"); NULL for a flag */
} cli_opt;

/* The operands (arguments that are not options), pointers into argv. */
#define CLI_ARGS_MAX 64
typedef struct cli_args {
    const char *v[CLI_ARGS_MAX];
    size_t n;
    /* With CLI_CMD_STOP: argv from the first operand on (v[0] is the same), else NULL. */
    char **rest;
    int nrest;
} cli_args;

/* cli_cmd.flags */
#define CLI_CMD_STOP 1 /* the first operand ends the options (a command line follows) */

typedef struct cli_cmd {
    const char *words; /* "token mint": its refgate(1) entry, and messages' prefix */
    const cli_opt *opts;
    size_t nopts;
    unsigned flags;
    /*
     * Options a table cannot say (`refgate run`'s passed-on ones): called
     * with argv[*i] an option none of opts names. Returns 1 when it took it
     * (moving *i past its value), 0 when it is unknown, -1 when it said on
     * stderr what is wrong.
     */
    int (*other)(void *dst, int argc, char **argv, int *i);
} cli_cmd;

#define CLI_OPTS(table) (table), sizeof(table) / sizeof((table)[0])

/* cli_opts_parse's answers besides 0. */
#define CLI_PARSE_HELP  1  /* help was asked for and printed on stdout: exit 0 */
#define CLI_PARSE_USAGE -1 /* a mistake, said on stderr: exit 2 */

/*
 * Parse argv[1..argc-1] (argv[0] is the subcommand's last word) by cmd's
 * table into the struct at dst, which the caller has zeroed, and the
 * operands into *args. Returns 0, CLI_PARSE_HELP or CLI_PARSE_USAGE.
 */
int cli_opts_parse(const cli_cmd *cmd, void *dst, cli_args *args, int argc, char **argv);

/* The exit status for cli_opts_parse's non-zero answer: 0 for help, else 2. */
int cli_opts_exit(int rc);

/*
 * Say "refgate WORDS: <message> (see refgate WORDS --help)" on stderr and
 * return 2, the usage exit status.
 */
int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Print refgate(1)'s entries for the command `words` ("token" prints
 * token mint, token revoke, ...), or its SYNOPSIS when words is NULL or
 * no entry has them. Returns the number of entries printed.
 */
int cli_help_print(FILE *f, const char *words);

/* The rendered refgate(1) entry of exactly `words`, or NULL. */
const char *cli_help_text(const char *words);

/* Each subcommand's options, and all of them (NULL-terminated) for tests. */
extern const cli_cmd cli_cmd_approvals;
extern const cli_cmd cli_cmd_approvals_show;
extern const cli_cmd cli_cmd_approve;
extern const cli_cmd cli_cmd_audit;
extern const cli_cmd cli_cmd_audit_head;
extern const cli_cmd cli_cmd_audit_verify;
extern const cli_cmd cli_cmd_console_user_add;
extern const cli_cmd cli_cmd_db_import;
extern const cli_cmd cli_cmd_db_migrate;
extern const cli_cmd cli_cmd_demo;
extern const cli_cmd cli_cmd_deny;
extern const cli_cmd cli_cmd_diff;
extern const cli_cmd cli_cmd_policy_check;
extern const cli_cmd cli_cmd_policy_current;
extern const cli_cmd cli_cmd_policy_lint;
extern const cli_cmd cli_cmd_policy_publish;
extern const cli_cmd cli_cmd_run;
extern const cli_cmd cli_cmd_serve;
extern const cli_cmd cli_cmd_token_key_rotate;
extern const cli_cmd cli_cmd_token_mint;
extern const cli_cmd cli_cmd_token_revoke;
extern const cli_cmd *const cli_cmds[];

/*
 * An argument as it may be echoed in an error: a mistyped command line
 * often holds a token in the wrong place, and a token is never printed.
 */
const char *cli_safe_arg(const char *arg);

/* 1 for --help, -h and help. */
int cli_is_help(const char *arg);

/*
 * Match option `name` at argv[*i], as `--name VALUE` or `--name=VALUE`.
 * Returns 1 (and *value) when it matched, 0 when argv[*i] is another
 * option, -1 when the value is missing (said on stderr, prefixed `prog`).
 * Only refgate run's passed-on options use it; everything else uses
 * cli_opts_parse.
 */
int cli_opt_value(const char **value, int argc, char **argv, int *i, const char *name,
                  const char *prog);

/* The longest answer line read from the control socket (a page of approvals). */
#define CLI_CONTROL_ANSWER_MAX (1024 * 1024)

/*
 * Send `req` to the gateway's control socket at `path` and read its
 * one-line answer (a JSON object) into *out. -ENOENT / -ECONNREFUSED: no
 * gateway answers there. The request text (a revoke holds the token) and
 * the answer bytes (a mint's hold one) are wiped.
 */
int cli_control_call(json_t **out, const char *path, const json_t *req, rg_error *err);

#endif
