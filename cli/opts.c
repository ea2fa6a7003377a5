/* Option parsing shared by the refgate subcommands; see cli.h. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cli_is_help(const char *arg)
{
    return !strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, "help");
}

int cli_opt_value(const char **value, int argc, char **argv, int *i, const char *name,
                  const char *prog)
{
    size_t len = strlen(name);

    if (strncmp(argv[*i], name, len) != 0)
        return 0;
    if (argv[*i][len] == '=') {
        *value = argv[*i] + len + 1;
        return 1;
    }
    if (argv[*i][len] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", prog, name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}
