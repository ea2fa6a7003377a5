/*
 * refgate-run's command line (runner/opts.c) and the option table it shares
 * with `refgate run` (runner/options.h): what parses, what is refused with
 * which message, and that every option refgate run passes on is one
 * refgate-run takes, with the same arity.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "runner/runner.h"

#define ARGS_MAX 8

/* The lists run_parse allocates, freed as refgate-run's run_free does. */
static void free_opts(run_opts *o)
{
    free(o->reads);
    free(o->writes);
    free(o->envs);
    free(o->hides);
    free(o->excludes);
    free(o->binds);
    free(o->robinds);
}

/* run_parse over a NULL-ended list of words (argv[0] added). */
static int parse(run_opts *o, const char *const *words, rg_error *err)
{
    static char *argv[32];
    int argc = 1;

    argv[0] = (char *)"refgate-run";
    for (; words[argc - 1] != NULL; argc++) {
        cr_assert_lt(argc, 31, "too many words for parse()");
        argv[argc] = (char *)words[argc - 1];
    }
    argv[argc] = NULL;
    memset(o, 0, sizeof(*o));
    return run_parse(o, argc, argv, err);
}

/* ------------------------------------------------------------------------ */
/* Refusals                                                                  */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *words[ARGS_MAX];
    const char *msg;
} bad[] = {
    {{"--bogus", "--", "true"}, "unknown option '--bogus'; try 'refgate-run --help'"},
    {{"-x", "--", "true"}, "unknown option '-x'; try 'refgate-run --help'"},
    {{"--rm=1", "--", "true"}, "unknown option '--rm=1'; try 'refgate-run --help'"},
    {{"-r"}, "-r needs a value; try 'refgate-run --help'"},
    {{"--net"}, "--net needs a value; try 'refgate-run --help'"},
    {{"--rm"}, "no command given; usage: refgate-run [options] -- CMD [ARGS...]"},
    {{"--net", "foo", "true"},
     "--net: unknown mode 'foo' (expected none, gateway, gateway=HOST:PORT, allow=HOST:PORT,... "
     "or host)"},
    {{"--net", "gateway", "true"},
     "--net gateway needs the gateway's address: --gateway URL or --net gateway=HOST:PORT"},
    {{"--gateway", "a:1", "--net", "gateway=b:2", "true"},
     "--net gateway=b:2 and --gateway a:1 name two gateways"},
    {{"--share-net", "--net", "none", "true"},
     "--net none needs the net namespace: drop --share-net / --share=net, or use --net host"},
    {{"--share=mount", "--hide", "/x", "true"},
     "--hide needs the mount namespace (drop --share=mount)"},
    {{"--share=mount", "--bind", "/a:/b", "true"},
     "--bind and --ro-bind need the mount namespace (drop --share=mount)"},
    {{"-d", "/tmp", "--exclude", "node_modules", "true"},
     "--exclude and --exclude-ignored need a fork (no -d) and the mount namespace (drop "
     "--share=mount): an excluded directory is shown read-only from the original"},
    {{"-d", "/tmp", "--rm", "true"}, "--rm removes a fork; with -d there is none"},
    {{"-d", "/tmp", "--continue=x", "true"}, "--continue runs in a fork; with -d there is none"},
    {{"--continue=x", "--exclude-ignored", "true"},
     "--exclude and --exclude-ignored apply when a fork is made; a continued fork keeps the "
     "exclusions it was made with"},
    {{"--debug-landlock-abi", "x", "true"},
     "--debug-landlock-abi: expected a number from 0, got 'x'"},
};

ParameterizedTestParameters(runner_opts, refusals_say_why)
{
    static int cases[sizeof(bad) / sizeof(bad[0])];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cases[i] = (int)i;
    return cr_make_param_array(int, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(int *i, runner_opts, refusals_say_why)
{
    rg_error err = RG_ERROR_INIT;
    run_opts o;

    cr_assert_lt(parse(&o, bad[*i].words, &err), 0, "case %d parsed", *i);
    cr_assert_str_eq(err.msg, bad[*i].msg);
    free_opts(&o);
}

Test(runner_opts, an_unknown_namespace_is_refused)
{
    const char *words[] = {"--unshare=nosuch", "true", NULL};
    rg_error err = RG_ERROR_INIT;
    run_opts o;

    cr_assert_lt(parse(&o, words, &err), 0);
    cr_assert_neq(strstr(err.msg, "--unshare"), NULL, "%s", err.msg);
    free_opts(&o);
}

/* ------------------------------------------------------------------------ */
/* What parses                                                               */
/* ------------------------------------------------------------------------ */

Test(runner_opts, options_end_at_the_command)
{
    const char *words[] = {"-q",  "-r",   "/a",  "--read=/b", "-w",   "/c", "-e",
                           "X=1", "--rm", "cmd", "-v",        "--rm", NULL};
    rg_error err = RG_ERROR_INIT;
    run_opts o;

    cr_assert_eq(parse(&o, words, &err), 0, "%s", err.msg);
    cr_assert(o.quiet && o.rm && !o.verbose);
    cr_assert_eq(o.nreads, 2);
    cr_assert_str_eq(o.reads[1], "/b");
    cr_assert_eq(o.nwrites, 1);
    cr_assert_str_eq(o.envs[0], "X=1");
    cr_assert_str_eq(o.argv[0], "cmd");
    cr_assert_str_eq(o.argv[1], "-v");
    free_opts(&o);
}

Test(runner_opts, the_network_is_the_narrowest_that_works)
{
    const char *none[] = {"true", NULL}, *gw[] = {"--gateway", "127.0.0.1:9", "true", NULL};
    const char *host[] = {"--share-net", "true", NULL};
    const char *allow[] = {"--net=allow=example.com:443", "true", NULL};
    rg_error err = RG_ERROR_INIT;
    run_opts o;

    cr_assert_eq(parse(&o, none, &err), 0, "%s", err.msg);
    cr_assert_eq(o.net_mode, SANDBOX_NET_NONE);
    cr_assert_eq(parse(&o, gw, &err), 0, "%s", err.msg);
    cr_assert_eq(o.net_mode, SANDBOX_NET_GATEWAY);
    cr_assert_eq(parse(&o, host, &err), 0, "%s", err.msg);
    cr_assert_eq(o.net_mode, SANDBOX_NET_HOST);
    cr_assert_eq(o.ns & SANDBOX_NS_NET, 0);
    cr_assert_eq(parse(&o, allow, &err), 0, "%s", err.msg);
    cr_assert_eq(o.net_mode, SANDBOX_NET_ALLOW);
    cr_assert_str_eq(o.allow, "example.com:443");
}

Test(runner_opts, continue_takes_a_directory_as_its_fork)
{
    const char *dir[] = {"--continue", "/tmp", "true", NULL};
    const char *cmd[] = {"--continue", "true", NULL};
    rg_error err = RG_ERROR_INIT;
    run_opts o;

    cr_assert_eq(parse(&o, dir, &err), 0, "%s", err.msg);
    cr_assert(o.cont);
    cr_assert_str_eq(o.cont_fork, "/tmp");
    cr_assert_str_eq(o.argv[0], "true");
    cr_assert_eq(parse(&o, cmd, &err), 0, "%s", err.msg);
    cr_assert_null(o.cont_fork);
    cr_assert_str_eq(o.argv[0], "true");
}

Test(runner_opts, help_and_version_stop_the_parse)
{
    const char *help[] = {"-q", "--help", "--bogus", NULL}, *version[] = {"--version", NULL};
    rg_error err = RG_ERROR_INIT;
    run_opts o;

    cr_assert_eq(parse(&o, help, &err), RUN_PARSE_HELP);
    cr_assert_eq(parse(&o, version, &err), RUN_PARSE_VERSION);
    cr_assert_eq(strncmp(run_opts_help(), "usage: refgate-run [options] -- CMD", 35), 0);
    free_opts(&o);
}

Test(runner_opts, check_needs_no_command)
{
    const char *words[] = {"--check", NULL};
    rg_error err = RG_ERROR_INIT;
    run_opts o;

    cr_assert_eq(parse(&o, words, &err), 0, "%s", err.msg);
    cr_assert(o.check);
}

/* ------------------------------------------------------------------------ */
/* The table refgate run shares                                              */
/* ------------------------------------------------------------------------ */

/* A value run_parse takes for an option at parse time. */
static const char *a_value(const runner_option *opt)
{
    return opt->id == RUNNER_OPT_BIND || opt->id == RUNNER_OPT_RO_BIND ? "/a:/b" : "/tmp";
}

/*
 * Where run_parse keeps each option refgate run passes on: the value, or
 * (without one) a non-NULL mark for the flag it set. An option passed on
 * but missing here fails the test below: say here where it lands.
 */
static const void *landed(const run_opts *o, int id)
{
    static const char set[] = "set";

    switch (id) {
    case 'r':
        return o->nreads ? o->reads[0] : NULL;
    case 'w':
        return o->nwrites ? o->writes[0] : NULL;
    case 'e':
        return o->nenvs ? o->envs[0] : NULL;
    case RUNNER_OPT_HIDE:
        return o->nhides ? o->hides[0] : NULL;
    case RUNNER_OPT_EXCLUDE:
        return o->nexcludes ? o->excludes[0] : NULL;
    case RUNNER_OPT_BIND:
        return o->nbinds ? o->binds[0] : NULL;
    case RUNNER_OPT_RO_BIND:
        return o->nrobinds ? o->robinds[0] : NULL;
    case RUNNER_OPT_CACHE_DIR:
        return o->cache_dir;
    case 'q':
        return o->quiet ? set : NULL;
    case 'v':
        return o->verbose ? set : NULL;
    case RUNNER_OPT_RM:
        return o->rm ? set : NULL;
    case RUNNER_OPT_KEEP_TMP:
        return o->keep_tmp ? set : NULL;
    case RUNNER_OPT_NO_CACHES:
        return o->no_caches ? set : NULL;
    case RUNNER_OPT_MKDIR:
        return o->mkdir ? set : NULL;
    case RUNNER_OPT_EXCLUDE_IGNORED:
        return o->exclude_ignored ? set : NULL;
    default:
        return NULL;
    }
}

/*
 * Each option refgate run passes on, by either spelling, parses with the
 * table's arity and lands where refgate-run reads it: with a value, the
 * next word is its value; without one, the next word is the command.
 */
Test(runner_opts, every_option_refgate_run_passes_on_is_taken_with_its_arity)
{
    const runner_option *opt;
    rg_error err = RG_ERROR_INIT;
    run_opts o;
    int passed = 0;

    for (opt = runner_options; opt->name != NULL; opt++) {
        for (int k = 0; k < 2; k++) {
            const char *spelled = k == 0 ? opt->name : opt->short_name;
            const char *words[4] = {spelled, NULL, NULL, NULL};
            const void *got;

            if (opt->run != RUNNER_RUN_PASSED || spelled == NULL)
                continue;
            cr_assert(opt->arg == RUNNER_ARG_NONE || opt->arg == RUNNER_ARG_REQUIRED,
                      "%s: refgate run passes on only options with or without a value", spelled);
            words[1] = opt->arg == RUNNER_ARG_NONE ? "cmd" : a_value(opt);
            words[2] = opt->arg == RUNNER_ARG_NONE ? NULL : "cmd";
            cr_assert_eq(parse(&o, words, &err), 0, "%s: %s", spelled, err.msg);
            cr_assert_not_null(o.argv[0], "%s: the command was taken as its value", spelled);
            cr_assert_str_eq(o.argv[0], "cmd", "%s: its value was taken as the command", spelled);
            got = landed(&o, opt->id);
            cr_assert_not_null(got, "%s: not where refgate-run reads it", spelled);
            if (opt->arg == RUNNER_ARG_REQUIRED)
                cr_assert_eq(got, words[1], "%s: its value is not the word after it", spelled);
            free_opts(&o);
            passed++;
        }
    }
    cr_assert_geq(passed, 15, "fewer options passed on than refgate run documents");
}

Test(runner_opts, the_table_is_well_formed)
{
    const runner_option *a, *b;
    size_t len;

    for (a = runner_options; a->name != NULL; a++) {
        cr_assert_eq(strncmp(a->name, "--", 2), 0, "%s", a->name);
        cr_assert(a->short_name == NULL || (a->short_name[0] == '-' && a->short_name[1] == a->id &&
                                            a->short_name[2] == '\0'),
                  "%s: its short name is its id", a->name);
        /* What is refused or set needs a reason for the message. */
        cr_assert_eq(a->why != NULL, a->run == RUNNER_RUN_REFUSED || a->run == RUNNER_RUN_SETS,
                     "%s", a->name);
        for (b = a + 1; b->name != NULL; b++)
            cr_assert(a->id != b->id && strcmp(a->name, b->name) != 0, "%s twice", a->name);
        cr_assert_eq(runner_option_lookup(a->name, &len), a);
        cr_assert_eq(len, strlen(a->name));
    }
}

/* What refgate run must never pass on: its run's network and confinement. */
Test(runner_opts, refgate_run_keeps_the_network_and_confinement)
{
    static const char *const kept[] = {"-d",
                                       "--net",
                                       "--share-net",
                                       "--share",
                                       "--unshare",
                                       "--gateway",
                                       "--force",
                                       "--no-scope",
                                       "--no-truncate-control",
                                       "--allow-unconfined"};
    size_t len;

    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        const runner_option *o = runner_option_lookup(kept[i], &len);

        cr_assert_not_null(o, "%s", kept[i]);
        cr_assert_neq(o->run, RUNNER_RUN_PASSED, "%s is passed on", kept[i]);
    }
}

Test(runner_opts, lookup_takes_both_spellings_and_a_value_after_equals)
{
    size_t len;

    cr_assert_eq(runner_option_lookup("-r=/x", &len)->id, 'r');
    cr_assert_eq(len, 2);
    cr_assert_eq(runner_option_lookup("--unshare=none", &len)->id, RUNNER_OPT_UNSHARE);
    cr_assert_eq(len, 9);
    cr_assert_null(runner_option_lookup("--rmx", &len));
    cr_assert_null(runner_option_lookup("-rx", &len));
    cr_assert_null(runner_option_lookup("cmd", &len));
}
