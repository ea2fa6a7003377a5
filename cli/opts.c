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

long long cli_parse_duration(const char *s)
{
    static const struct {
        char suffix;
        long long seconds;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
    long long n = 0, unit = 1;
    const char *p = s;
    size_t i;

    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n > 1000000000LL)
            return -1;
    }
    if (*p != '\0') {
        for (i = 0; i < sizeof(units) / sizeof(units[0]) && units[i].suffix != *p; i++)
            ;
        if (i == sizeof(units) / sizeof(units[0]) || p[1] != '\0')
            return -1;
        unit = units[i].seconds;
    }
    return n * unit;
}
