/*
 * refgate-run's options: the --help text and the parsing of the command
 * line into run_opts, with the checks that options agree with each other
 * (the network mode and the namespaces, -d and the fork's options).
 */
#include "runner/runner.h"

#include <getopt.h>

/*
 * The --help text is refgate-run(1)'s SYNOPSIS and OPTIONS, rendered at
 * build time (cmake/ManHelp.cmake): the page is its one source.
 */
extern const char run_help_synopsis[];
extern const char run_help_section[];

void run_opts_help(FILE *f)
{
    fprintf(f, "usage:\n%s\noptions:\n%s\nThe whole of it: man refgate-run (doc/refgate-run.1).\n",
            run_help_synopsis, run_help_section);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

static int run_is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int run_push(const char ***list, size_t *n, const char *v)
{
    const char **grown = realloc(*list, (*n + 1) * sizeof(*grown));

    if (grown == NULL)
        return -ENOMEM;
    grown[(*n)++] = v;
    *list = grown;
    return 0;
}

/*
 * --net MODE, --gateway ADDR and the net namespace agree. The default is
 * the narrowest that works: `gateway` when a gateway is named (refgate run
 * names it: its git must reach it and nothing else), else `none`. Sharing
 * the net namespace (--share-net, --share=net, --unshare without net) is
 * `host`, as before; asking for none or gateway without the namespace is
 * refused rather than quietly run open.
 */
static int run_parse_net(run_opts *o, rg_error *err)
{
    const char *m = o->net;

    if (m == NULL)
        o->net_mode = !(o->ns & SANDBOX_NS_NET) ? SANDBOX_NET_HOST
                      : o->gateway != NULL      ? SANDBOX_NET_GATEWAY
                                                : SANDBOX_NET_NONE;
    else if (strcmp(m, "none") == 0)
        o->net_mode = SANDBOX_NET_NONE;
    else if (strcmp(m, "host") == 0)
        o->net_mode = SANDBOX_NET_HOST;
    else if (strcmp(m, "gateway") == 0)
        o->net_mode = SANDBOX_NET_GATEWAY;
    else if (strncmp(m, "gateway=", 8) == 0) {
        if (o->gateway != NULL && strcmp(o->gateway, m + 8) != 0)
            return rg_error_set(err, -EINVAL, "--net %s and --gateway %s name two gateways", m,
                                o->gateway);
        o->gateway = m + 8;
        o->net_mode = SANDBOX_NET_GATEWAY;
    } else if (strncmp(m, "allow=", 6) == 0) {
        o->net_mode = SANDBOX_NET_ALLOW;
        o->allow = m + 6;
    } else {
        return rg_error_set(err, -EINVAL,
                            "--net: unknown mode '%s' (expected none, gateway, gateway=HOST:PORT, "
                            "allow=HOST:PORT,... or host)",
                            m);
    }
    if (o->net_mode == SANDBOX_NET_GATEWAY && o->gateway == NULL)
        return rg_error_set(err, -EINVAL,
                            "--net gateway needs the gateway's address: --gateway URL or --net "
                            "gateway=HOST:PORT");
    if (o->net_mode == SANDBOX_NET_HOST) {
        o->ns &= ~SANDBOX_NS_NET;
    } else if (!(o->ns & SANDBOX_NS_NET)) {
        return rg_error_set(
            err, -EINVAL,
            "--net %s needs the net namespace: drop --share-net / --share=net, or use --net host",
            o->net_mode == SANDBOX_NET_NONE      ? "none"
            : o->net_mode == SANDBOX_NET_GATEWAY ? "gateway"
                                                 : "allow");
    }
    return 0;
}

/* getopt's tables, from the option table (options.h). */
static void run_getopt_tables(struct option *longopts, char *shorts)
{
    const runner_option *o;
    size_t n = 0, k = 0;

    /* "+": options end at the command, so its own options stay its own;
     * ":": a missing value is told apart from an unknown option. */
    shorts[k++] = '+';
    shorts[k++] = ':';
    for (o = runner_options; o->name != NULL; o++, n++) {
        longopts[n] = (struct option){o->name + 2, (int)o->arg, NULL, o->id};
        if (o->short_name == NULL)
            continue;
        shorts[k++] = o->short_name[1];
        if (o->arg == RUNNER_ARG_REQUIRED)
            shorts[k++] = ':';
    }
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    shorts[k] = '\0';
}

/* --unshare, --share and --debug-ns-unavailable: a list of namespaces. */
static int run_parse_ns(run_opts *o, unsigned *shared, int c, const char *arg, rg_error *err)
{
    unsigned set;

    if (sandbox_ns_parse(&set, arg,
                         c == RUNNER_OPT_UNSHARE ? "--unshare"
                         : c == RUNNER_OPT_SHARE ? "--share"
                                                 : "--debug-ns-unavailable",
                         err) < 0)
        return -EINVAL;
    if (c == RUNNER_OPT_UNSHARE)
        o->ns = set;
    else if (c == RUNNER_OPT_SHARE)
        *shared |= set;
    else
        o->debug_no_ns |= set;
    return 0;
}

/* What getopt could not take: an unknown option or one without its value. */
static int run_parse_bad(int c, char **argv, rg_error *err)
{
    const char *arg = argv[optind - 1];

    if (c == ':')
        return rg_error_set(err, -EINVAL, "%s needs a value; try 'refgate-run --help'", arg);
    if (optopt > 0 && optopt < 256)
        return rg_error_set(err, -EINVAL, "unknown option '-%c'; try 'refgate-run --help'", optopt);
    return rg_error_set(err, -EINVAL, "unknown option '%s'; try 'refgate-run --help'", arg);
}

/* The options once all are read: whether they agree. */
static int run_parse_check(run_opts *o, rg_error *err)
{
    if (run_parse_net(o, err) < 0)
        return -EINVAL;
    if (o->nhides > 0 && !(o->ns & SANDBOX_NS_MOUNT))
        return rg_error_set(err, -EINVAL, "--hide needs the mount namespace (drop --share=mount)");
    if (o->nbinds + o->nrobinds > 0 && !(o->ns & SANDBOX_NS_MOUNT))
        return rg_error_set(err, -EINVAL,
                            "--bind and --ro-bind need the mount namespace (drop --share=mount)");
    if (!o->check && o->argv[0] == NULL)
        return rg_error_set(err, -EINVAL,
                            "no command given; usage: refgate-run [options] -- CMD [ARGS...]");
    /* Without the mount namespace an excluded directory would be an empty
     * placeholder inside: refused rather than silently empty. */
    if ((o->nexcludes > 0 || o->exclude_ignored) && (o->dir != NULL || !(o->ns & SANDBOX_NS_MOUNT)))
        return rg_error_set(err, -EINVAL,
                            "--exclude and --exclude-ignored need a fork (no -d) and the mount "
                            "namespace (drop --share=mount): an excluded directory is shown "
                            "read-only from the original");
    if (o->dir != NULL && o->rm)
        return rg_error_set(err, -EINVAL, "--rm removes a fork; with -d there is none");
    if (o->dir != NULL && o->cont)
        return rg_error_set(err, -EINVAL, "--continue runs in a fork; with -d there is none");
    if (o->cont && (o->nexcludes > 0 || o->exclude_ignored))
        return rg_error_set(err, -EINVAL,
                            "--exclude and --exclude-ignored apply when a fork is made; a "
                            "continued fork keeps the exclusions it was made with");
    return 0;
}

int run_parse(run_opts *o, int argc, char **argv, rg_error *err)
{
    struct option longopts[64];
    char shorts[64];
    unsigned shared = 0;
    char *end;
    long v;
    int c, rc = 0;

    run_getopt_tables(longopts, shorts);
    o->debug_abi = -1;
    o->ns = SANDBOX_NS_ALL;
    /* From the start, and quietly: every message is the caller's to say. */
    optind = 0;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            o->dir = optarg;
            break;
        case 'r':
            rc = run_push(&o->reads, &o->nreads, optarg);
            break;
        case 'w':
            rc = run_push(&o->writes, &o->nwrites, optarg);
            break;
        case 'e':
            rc = run_push(&o->envs, &o->nenvs, optarg);
            break;
        case RUNNER_OPT_RM:
            o->rm = 1;
            break;
        case RUNNER_OPT_KEEP_TMP:
            o->keep_tmp = 1;
            break;
        case RUNNER_OPT_FORCE:
            o->force = 1;
            break;
        case RUNNER_OPT_NO_SCOPE:
            o->no_scope = 1;
            break;
        case RUNNER_OPT_NO_TRUNCATE:
            o->no_truncate = 1;
            break;
        case RUNNER_OPT_UNCONFINED:
            o->allow_unconfined = 1;
            break;
        case RUNNER_OPT_CHECK:
            o->check = 1;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'v':
            o->verbose = 1;
            break;
        case 'h':
            return RUN_PARSE_HELP;
        case RUNNER_OPT_VERSION:
            return RUN_PARSE_VERSION;
        case RUNNER_OPT_UNSHARE:
        case RUNNER_OPT_SHARE:
        case RUNNER_OPT_DEBUG_NS:
            if (run_parse_ns(o, &shared, c, optarg, err) < 0)
                return -EINVAL;
            break;
        case RUNNER_OPT_SHARE_NET:
            shared |= SANDBOX_NS_NET;
            break;
        case RUNNER_OPT_NO_PTY:
            o->no_pty = 1;
            break;
        case RUNNER_OPT_NET:
            o->net = optarg;
            break;
        case RUNNER_OPT_GATEWAY:
            o->gateway = optarg;
            break;
        case RUNNER_OPT_HIDE:
            rc = run_push(&o->hides, &o->nhides, optarg);
            break;
        case RUNNER_OPT_EXCLUDE:
            rc = run_push(&o->excludes, &o->nexcludes, optarg);
            break;
        case RUNNER_OPT_EXCLUDE_IGNORED:
            o->exclude_ignored = 1;
            break;
        case RUNNER_OPT_BIND:
            rc = run_push(&o->binds, &o->nbinds, optarg);
            break;
        case RUNNER_OPT_RO_BIND:
            rc = run_push(&o->robinds, &o->nrobinds, optarg);
            break;
        case RUNNER_OPT_CONTINUE:
            o->cont = 1;
            o->cont_fork = optarg;
            /* `--continue FORK`: the next argument, when it is a directory. */
            if (optarg == NULL && optind < argc && argv[optind][0] != '-' &&
                run_is_dir(argv[optind]))
                o->cont_fork = argv[optind++];
            break;
        case RUNNER_OPT_NO_CACHES:
            o->no_caches = 1;
            break;
        case RUNNER_OPT_CACHE_DIR:
            o->cache_dir = optarg;
            break;
        case RUNNER_OPT_MKDIR:
            o->mkdir = 1;
            break;
        case RUNNER_OPT_DEBUG_ABI:
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || v < 0 || v > 100)
                return rg_error_set(err, -EINVAL,
                                    "--debug-landlock-abi: expected a number from 0, got '%s'",
                                    optarg);
            o->debug_abi = (int)v;
            break;
        default:
            return run_parse_bad(c, argv, err);
        }
    }
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    o->ns &= ~shared;
    o->argv = argv + optind;
    return run_parse_check(o, err);
}
