/*
 * Option parsing shared by the refgate subcommands, and their --help text;
 * see cli.h. Each subcommand's options are a table, so every one of them
 * is parsed, refused and helped the same way, and the help text is
 * refgate(1)'s own entry for the command (rendered at build time by
 * cmake/ManHelp.cmake into cli_help_man.c), so the page and --help cannot
 * disagree.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* Made at build time from doc/refgate.1 (cmake/man_help.c). */
extern const char cli_help_synopsis[];
extern const char *const cli_help_words[];
extern const char *const cli_help_texts[];

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

const char *cli_safe_arg(const char *arg)
{
    /* Tokens start with rg2. (rg1. before Ed25519) and, being base64url, hold no '/'. */
    if (!strncmp(arg, "rg2.", 4) || !strncmp(arg, "rg1.", 4) ||
        (strlen(arg) > 64 && strchr(arg, '/') == NULL))
        return "(not shown: it may be a token)";
    return arg;
}

const char *cli_help_text(const char *words)
{
    size_t i;

    for (i = 0; cli_help_words[i] != NULL; i++)
        if (!strcmp(cli_help_words[i], words))
            return cli_help_texts[i];
    return NULL;
}

int cli_help_print(FILE *f, const char *words)
{
    size_t i, len = words ? strlen(words) : 0;
    int n = 0;

    for (i = 0; words != NULL && cli_help_words[i] != NULL; i++) {
        if (strncmp(cli_help_words[i], words, len) != 0 ||
            (cli_help_words[i][len] != '\0' && cli_help_words[i][len] != ' '))
            continue;
        fprintf(f, "%susage: %s", n ? "\n" : "", cli_help_texts[i]);
        n++;
    }
    if (n == 0)
        fprintf(f, "usage:\n%s", cli_help_synopsis);
    fprintf(f, "\nSee refgate(1) for the whole manual.\n");
    return n;
}

int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "refgate %s: ", cmd->words);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see refgate %s --help)\n", cmd->words);
    return 2;
}

int cli_opts_exit(int rc)
{
    return rc == CLI_PARSE_HELP ? 0 : 2;
}

/* The table's option named by arg (up to a `=`), or NULL. */
static const cli_opt *opt_find(const cli_cmd *cmd, const char *arg)
{
    size_t i, len = strcspn(arg, "=");

    for (i = 0; i < cmd->nopts; i++)
        if (strlen(cmd->opts[i].name) == len && !strncmp(cmd->opts[i].name, arg, len))
            return &cmd->opts[i];
    return NULL;
}

/* Store option o (at argv[*i]) into dst: 0, or CLI_PARSE_USAGE (said). */
static int opt_take(const cli_cmd *cmd, const cli_opt *o, void *dst, int argc, char **argv, int *i)
{
    const char *eq = strchr(argv[*i], '='), *value;
    char *field = (char *)dst + o->off;
    cli_opt_list *list;

    if (o->kind == CLI_OPT_FLAG) {
        if (eq != NULL) {
            cli_usage_error(cmd, "%s takes no value", o->name);
            return CLI_PARSE_USAGE;
        }
        *(int *)(void *)field = 1;
        return 0;
    }
    if (eq != NULL) {
        value = eq + 1;
    } else if (*i + 1 < argc) {
        value = argv[++*i];
    } else {
        cli_usage_error(cmd, "%s needs a value (%s)", o->name, o->word ? o->word : "VALUE");
        return CLI_PARSE_USAGE;
    }
    if (o->kind == CLI_OPT_VALUE) {
        *(const char **)(void *)field = value;
        return 0;
    }
    list = (cli_opt_list *)(void *)field;
    if (list->n == CLI_OPT_LIST_MAX) {
        cli_usage_error(cmd, "at most %d %s", CLI_OPT_LIST_MAX, o->name);
        return CLI_PARSE_USAGE;
    }
    list->v[list->n++] = value;
    return 0;
}

/*
 * With CLI_CMD_STOP, argv[i] on is a command line: args->rest. Its first
 * words are in args->v too, as far as they fit.
 */
static void args_rest(cli_args *args, char **argv, int i, int argc)
{
    args->rest = argv + i;
    args->nrest = argc - i;
    for (; i < argc && args->n < CLI_ARGS_MAX; i++)
        args->v[args->n++] = argv[i];
}

int cli_opts_parse(const cli_cmd *cmd, void *dst, cli_args *args, int argc, char **argv)
{
    const cli_opt *o;
    int i, rc, dashdash = 0;

    memset(args, 0, sizeof(*args));
    if (argc > 1 && !strcmp(argv[1], "help")) {
        cli_help_print(stdout, cmd->words);
        return CLI_PARSE_HELP;
    }
    /* Bounded: i only grows, by one or two a round. */
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];

        if (dashdash || arg[0] != '-' || arg[1] == '\0') {
            if (cmd->flags & CLI_CMD_STOP) {
                args_rest(args, argv, i, argc);
                return 0;
            }
            if (args->n == CLI_ARGS_MAX) {
                cli_usage_error(cmd, "more than %d arguments", CLI_ARGS_MAX);
                return CLI_PARSE_USAGE;
            }
            args->v[args->n++] = arg;
            continue;
        }
        if (!strcmp(arg, "--")) {
            dashdash = 1;
            continue;
        }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            cli_help_print(stdout, cmd->words);
            return CLI_PARSE_HELP;
        }
        o = opt_find(cmd, arg);
        if (o != NULL) {
            if (opt_take(cmd, o, dst, argc, argv, &i) < 0)
                return CLI_PARSE_USAGE;
            continue;
        }
        rc = cmd->other ? cmd->other(dst, argc, argv, &i) : 0;
        if (rc < 0)
            return CLI_PARSE_USAGE;
        if (rc == 0) {
            cli_usage_error(cmd, "unknown option '%s'", cli_safe_arg(arg));
            return CLI_PARSE_USAGE;
        }
    }
    return 0;
}
