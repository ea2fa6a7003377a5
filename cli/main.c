/*
 * refgate: the entry point. It dispatches to one subcommand (cli/)
 * and does nothing else, so every subcommand is reachable from tests and the
 * demo through the same functions.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/version.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"serve", cli_serve, "run the gateway in the foreground"},
    {"token", cli_token, "mint or revoke run tokens"},
    {"audit", cli_audit, "read or verify the audit log"},
    {"policy", cli_policy, "explain a decision (check), find dead rules (lint), publish"},
    {"approvals", cli_approvals, "list approvals a push asked for, or show one"},
    {"approve", cli_approve, "let a pending push's exact update through, once"},
    {"deny", cli_deny, "refuse a pending push's update (or revoke its approval)"},
    {"console", cli_console, "manage the review console's reviewer accounts"},
    {"db", cli_db, "create or migrate the shared PostgreSQL database"},
    {"run", cli_run, "run a command in a sandbox with a run token that dies with it"},
    {"diff", cli_diff, "show what a sandboxed run changed in its fork"},
    {"demo", cli_demo, "push through a gateway to a throwaway upstream"},
};

static void usage(FILE *f)
{
    size_t i;

    fprintf(f, "usage: refgate <command> [options]\n\n"
               "A loopback smart-HTTP git gateway that enforces branch rules on pushes.\n\n"
               "Commands:\n");
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun `refgate <command> --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("refgate %s\n", RG_VERSION);
        return 0;
    }
    for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "refgate: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
