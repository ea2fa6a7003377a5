/*
 * The `refgate` subcommands. Each takes the arguments after its own name
 * (argv[0] is the subcommand) and returns the process exit status; main.c
 * only dispatches. These are the only functions in the gateway library that
 * print.
 */
#ifndef RG_GATEWAY_CLI_H
#define RG_GATEWAY_CLI_H

int cli_serve(int argc, char **argv);
int cli_token(int argc, char **argv);
int cli_audit(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_diff(int argc, char **argv);

#endif
