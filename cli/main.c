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
} commands[] = {
    {"serve", cli_serve},   {"token", cli_token},         {"audit", cli_audit},
    {"policy", cli_policy}, {"approvals", cli_approvals}, {"approve", cli_approve},
    {"deny", cli_deny},     {"console", cli_console},     {"db", cli_db},
    {"run", cli_run},       {"diff", cli_diff},           {"demo", cli_demo},
};

/* The SYNOPSIS of refgate(1): the help text is the page's (cli/opts.c). */
static void usage(FILE *f)
{
    cli_help_print(f, NULL);
    fprintf(f, "Run `refgate <command> --help` for a command's entry.\n");
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
