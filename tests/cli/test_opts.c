/*
 * The option parser every refgate subcommand uses (cli/opts.c): values
 * given both ways, repeatable options, flags, `--`, help, and the mistakes
 * it must refuse; and every option of every subcommand's table is in that
 * subcommand's refgate(1) entry, which is its --help text.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct t_opts {
    const char *config;
    cli_opt_list repos;
    int json, quiet;
} t_opts;

static const cli_opt t_table[] = {
    {"--config", CLI_OPT_VALUE, offsetof(t_opts, config), "FILE"},
    {"--repo", CLI_OPT_LIST, offsetof(t_opts, repos), "HOST/PATH"},
    {"--json", CLI_OPT_FLAG, offsetof(t_opts, json), NULL},
    {"-q", CLI_OPT_FLAG, offsetof(t_opts, quiet), NULL},
};
static const cli_cmd t_cmd = {"audit", CLI_OPTS(t_table), 0, NULL};
static const cli_cmd t_stop = {"run", CLI_OPTS(t_table), CLI_CMD_STOP, NULL};

/* argv words are writable strings (-Wwrite-strings makes literals const). */
static char w_prog[] = "x", w_repo[] = "--repo", w_r[] = "r";

/* Arrays, not pointers: each case runs in a fresh worker process. */
typedef struct parse_case {
    char args[128];  /* the words after the subcommand, split at spaces */
    int stop;        /* parse as t_stop (a command line follows) */
    int rc;          /* 0, CLI_PARSE_HELP or CLI_PARSE_USAGE */
    char config[16]; /* "" for none */
    char repos[32];  /* the --repo values joined by ',' */
    int json, quiet;
    char operands[32]; /* joined by ',' */
} parse_case;

static parse_case cases[] = {
    {"--config v", 0, 0, "v", "", 0, 0, ""},
    {"--config=v", 0, 0, "v", "", 0, 0, ""},
    {"--config=", 0, 0, "", "", 0, 0, ""},
    {"--config a --config b", 0, 0, "b", "", 0, 0, ""},
    {"--repo a --repo=b --repo c", 0, 0, "", "a,b,c", 0, 0, ""},
    {"--json -q", 0, 0, "", "", 1, 1, ""},
    {"x --json y", 0, 0, "", "", 1, 0, "x,y"},
    {"--json -- --config -q", 0, 0, "", "", 1, 0, "--config,-q"},
    {"- --json", 0, 0, "", "", 1, 0, "-"},
    {"--config", 0, CLI_PARSE_USAGE, "", "", 0, 0, ""},
    {"--json --repo", 0, CLI_PARSE_USAGE, "", "", 0, 0, ""},
    {"--bogus", 0, CLI_PARSE_USAGE, "", "", 0, 0, ""},
    {"--conf v", 0, CLI_PARSE_USAGE, "", "", 0, 0, ""},
    {"--json=1", 0, CLI_PARSE_USAGE, "", "", 0, 0, ""},
    {"-h", 0, CLI_PARSE_HELP, "", "", 0, 0, ""},
    {"--config v --help", 0, CLI_PARSE_HELP, "", "", 0, 0, ""},
    {"help", 0, CLI_PARSE_HELP, "", "", 0, 0, ""},
    {"x help", 0, 0, "", "", 0, 0, "x,help"},
    {"-- --help", 0, 0, "", "", 0, 0, "--help"},
    {"--json cmd --json -q", 1, 0, "", "", 1, 0, "cmd,--json,-q"},
    {"-q -- cmd --bogus", 1, 0, "", "", 0, 1, "cmd,--bogus"},
    {"-q --", 1, 0, "", "", 0, 1, ""},
};

ParameterizedTestParameters(opts, parses_each_form_and_refuses_each_mistake)
{
    return cr_make_param_array(parse_case, cases, sizeof(cases) / sizeof(cases[0]));
}

static void join(char *out, size_t cap, const char *const *v, size_t n)
{
    size_t i;

    out[0] = '\0';
    for (i = 0; i < n; i++) {
        if (i > 0)
            strncat(out, ",", cap - strlen(out) - 1);
        strncat(out, v[i], cap - strlen(out) - 1);
    }
}

ParameterizedTest(parse_case *c, opts, parses_each_form_and_refuses_each_mistake)
{
    char buf[128], *argv[32], *save = NULL, *w, got[64];
    int argc = 0, rc;
    t_opts o = {0};
    cli_args args;

    snprintf(buf, sizeof(buf), "%s", c->args);
    argv[argc++] = w_prog;
    for (w = strtok_r(buf, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    rc = cli_opts_parse(c->stop ? &t_stop : &t_cmd, &o, &args, argc, argv);
    cr_assert_eq(rc, c->rc, "'%s': rc %d, want %d", c->args, rc, c->rc);
    if (rc != 0)
        return;
    cr_expect_str_eq(o.config ? o.config : "", c->config, "'%s': --config", c->args);
    join(got, sizeof(got), o.repos.v, o.repos.n);
    cr_expect_str_eq(got, c->repos, "'%s': --repo", c->args);
    cr_expect_eq(o.json, c->json, "'%s': --json", c->args);
    cr_expect_eq(o.quiet, c->quiet, "'%s': -q", c->args);
    join(got, sizeof(got), args.v, args.n);
    cr_expect_str_eq(got, c->operands, "'%s': operands", c->args);
    if (c->stop && c->operands[0] != '\0') {
        cr_assert_not_null(args.rest);
        cr_expect_str_eq(args.rest[0], args.v[0]);
        cr_expect_eq((size_t)args.nrest, args.n);
    }
    if (c->stop && c->operands[0] == '\0')
        cr_expect_null(args.rest);
}

Test(opts, a_repeatable_option_past_its_cap_is_refused)
{
    char *argv[2 * CLI_OPT_LIST_MAX + 4];
    int argc = 0, i;
    t_opts o = {0};
    cli_args args;

    argv[argc++] = w_prog;
    for (i = 0; i <= CLI_OPT_LIST_MAX; i++) {
        argv[argc++] = w_repo;
        argv[argc++] = w_r;
    }
    cr_expect_eq(cli_opts_parse(&t_cmd, &o, &args, argc, argv), CLI_PARSE_USAGE);
    cr_expect_eq(o.repos.n, CLI_OPT_LIST_MAX);
}

/* Whether text holds word on its own (not inside a longer option). */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    const char *p;

    for (p = strstr(text, word); p != NULL; p = strstr(p + 1, word)) {
        int before = p == text || !(p[-1] == '-' || (p[-1] >= 'a' && p[-1] <= 'z'));
        int after = !(p[n] == '-' || (p[n] >= 'a' && p[n] <= 'z'));

        if (before && after)
            return 1;
    }
    return 0;
}

Test(opts, every_option_of_every_subcommand_is_in_its_refgate_1_entry)
{
    size_t i, j, n = 0;

    for (i = 0; cli_cmds[i] != NULL; i++) {
        const cli_cmd *cmd = cli_cmds[i];
        const char *text = cli_help_text(cmd->words);

        cr_assert_not_null(text, "refgate(1) has no entry for 'refgate %s' (.It Nm Cm %s ...)",
                           cmd->words, cmd->words);
        for (j = 0; j < cmd->nopts; j++, n++)
            cr_expect(has_word(text, cmd->opts[j].name),
                      "refgate %s --help (its refgate(1) entry) does not mention %s", cmd->words,
                      cmd->opts[j].name);
    }
    cr_expect_gt(n, 40, "only %zu options in all the tables", n);
}

Test(opts, help_prints_the_entries_of_a_command_and_its_subcommands)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    cr_assert_not_null(f);
    cr_expect_geq(cli_help_print(f, "token"), 3);
    fclose(f);
    cr_expect_not_null(strstr(buf, "usage: refgate token mint"));
    cr_expect_not_null(strstr(buf, "usage: refgate token revoke"));
    cr_expect_null(strstr(buf, "refgate policy check"));
    free(buf);
}
