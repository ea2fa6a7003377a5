/*
 * `refgate serve --config FILE`: run the gateway in the foreground until
 * SIGTERM or SIGINT, then let in-flight pushes finish and exit 0.
 * SIGHUP reloads the config file: new pushes use it, pushes in flight
 * finish under the old one, and a file that does not load is logged and
 * changes nothing. `--check-config` loads the config and its credentials
 * as serving would, says what is wrong and exits (for CI).
 */
#include <git2.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "console/console.h"
#include "gateway/server.h"
#include "util/log.h"
#include "config/config.h"
#include "tokens/credentials.h"

/* refgate serve's options (refgate(1) says what they do). */
typedef struct serve_opts {
    const char *config;
    int check;
} serve_opts;

static const cli_opt serve_opts_table[] = {
    {"--config", CLI_OPT_VALUE, offsetof(serve_opts, config), "FILE"},
    {"--check-config", CLI_OPT_FLAG, offsetof(serve_opts, check), NULL},
};
const cli_cmd cli_cmd_serve = {"serve", CLI_OPTS(serve_opts_table), 0, NULL};

/* What serving would refuse at start, without binding or opening the state. */
static int check_config(const config_model *cfg, rg_error *err)
{
    tokens_provider *p = NULL;
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < cfg->nupstreams; i++) {
        const config_upstream *up = &cfg->upstreams[i];

        if (up->root != NULL)
            continue;
        rc = tokens_provider_new(&p, &up->credentials, up->ca_file, err);
        tokens_provider_free(p);
        p = NULL;
        if (rc == 0)
            rc = tokens_provider_new(&p, &up->read_credentials, up->ca_file, err);
        tokens_provider_free(p);
        p = NULL;
        if (rc < 0)
            rg_error_wrap(err, "upstream %s", up->host);
    }
    return rc;
}

/* SIGHUP: load the file again; a bad one is logged and changes nothing. */
static void reload(gateway_server *srv, const char *path)
{
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];

    rg_log(RG_LOG_NOTICE, "reload_requested", "config=%s", rg_log_quote(q, sizeof(q), path));
    if (config_load(&cfg, path, &err) < 0) {
        rg_log(RG_LOG_ERR, "reload_failed", "kept=old error=%s",
               rg_log_quote(q, sizeof(q), err.msg));
        return;
    }
    /* Consumes cfg, and logs a failure (the old config stays) itself. */
    gateway_server_reload(srv, cfg, &err);
}

int cli_serve(int argc, char **argv)
{
    const char *config = NULL;
    serve_opts o = {0};
    cli_args args;
    int rc;
    config_model *cfg = NULL;
    gateway_server *srv = NULL;
    console *con = NULL;
    rg_error err = RG_ERROR_INIT;
    sigset_t set;
    static int journald;
    int sig = 0, check = 0;
    char q[RG_LOG_VALUE_MAX];

    rc = cli_opts_parse(&cli_cmd_serve, &o, &args, argc, argv);
    if (rc != 0)
        return cli_opts_exit(rc);
    if (args.n > 0)
        return cli_usage_error(&cli_cmd_serve, "unexpected argument '%s'", args.v[0]);
    if (o.config == NULL)
        return cli_usage_error(&cli_cmd_serve, "--config FILE is required");
    config = o.config;
    check = o.check;
    if (config_load(&cfg, config, &err) < 0 || (check && check_config(cfg, &err) < 0)) {
        fprintf(stderr, "refgate serve: %s\n", err.msg);
        config_free(cfg);
        return 1;
    }
    if (check) {
        printf("%s: ok (%zu upstreams, %zu rules)\n", config, cfg->nupstreams, cfg->nrules);
        config_free(cfg);
        return 0;
    }
    /* Writes to a receive-pack that died must fail with EPIPE, not kill us;
     * the stop signals are taken synchronously below, in this thread only,
     * so every server thread inherits the blocked mask. */
    /* journald sets JOURNAL_STREAM for a service's stderr: it then reads
     * each line's priority from a "<N>" prefix. */
    journald = getenv("JOURNAL_STREAM") != NULL;
    rg_log_set_sink(rg_log_stderr_sink, &journald);
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /*
     * libgit2 counts its initialisations, and each push's symbolic-ref
     * lookup and quarantine take and drop one: held here for the process's
     * life, so a push does not pay a whole initialisation (with Debian's
     * mbedtls, parsing every system CA certificate: 8-20 ms) each time.
     */
    git_libgit2_init();
    if (gateway_server_start(&srv, cfg, &err) < 0) {
        fprintf(stderr, "refgate serve: %s\n", err.msg);
        git_libgit2_shutdown();
        config_free(cfg);
        return 1;
    }
    /* The console serves beside the gateway, on its own listener, from its context. */
    if (cfg->console.listen_host != NULL &&
        console_start(&con, gateway_server_ctx(srv), &err) < 0) {
        fprintf(stderr, "refgate serve: %s\n", err.msg);
        gateway_server_stop(srv);
        git_libgit2_shutdown();
        config_free(cfg);
        return 1;
    }
    /* Through the logger, so journald reads these lines' priority too. */
    rg_log(RG_LOG_NOTICE, "serving", "url=%s state_dir=%s", gateway_server_url(srv),
           rg_log_quote(q, sizeof(q), cfg->state_dir));
    if (con != NULL)
        rg_log(RG_LOG_NOTICE, "console_serving", "url=%s", console_url(con));
    /* Bounded by the signals sent: each SIGHUP is one reload. */
    while (sigwait(&set, &sig) == 0 && sig == SIGHUP)
        reload(srv, config);
    rg_log(RG_LOG_NOTICE, "stopping", "signal=%s (finishing in-flight pushes)",
           sig == SIGINT ? "SIGINT" : "SIGTERM");
    console_stop(con);
    gateway_server_stop(srv);
    git_libgit2_shutdown();
    config_free(cfg);
    return 0;
}
