/*
 * The `refgate` subcommands. Each takes the arguments after its own name
 * (argv[0] is the subcommand) and returns the process exit status; main.c
 * only dispatches. These are the only functions in the gateway library that
 * print.
 */
#ifndef RG_GATEWAY_CLI_H
#define RG_GATEWAY_CLI_H

#include <jansson.h>

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

/* Shared by the subcommands' option parsing. */

/* 1 for --help, -h and help. */
int cli_is_help(const char *arg);

/*
 * Match option `name` at argv[*i], as `--name VALUE` or `--name=VALUE`.
 * Returns 1 (and *value) when it matched, 0 when argv[*i] is another
 * option, -1 when the value is missing (said on stderr, prefixed `prog`).
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
