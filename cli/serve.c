/*
 * `refgate serve --config FILE`: run the gateway in the foreground until
 * SIGTERM or SIGINT, then let in-flight pushes finish and exit 0.
 * SIGHUP reloads the config file: new pushes use it, pushes in flight
 * finish under the old one, and a file that does not load is logged and
 * changes nothing. `--check-config` loads the config and its credentials
 * as serving would, says what is wrong and exits (for CI).
 */
#include <git2.h>
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

static void usage(FILE *f)
{
    fprintf(f, "usage: refgate serve --config FILE [--check-config]\n\n"
               "Serve git pushes on the config's \"listen\" address (default 127.0.0.1:8470;\n"
               "port 0 picks a free port) and enforce its rules. Once it accepts connections\n"
               "the base URL is written to <state_dir>/url (and, with \"admin\", the admin\n"
               "listener's to <state_dir>/admin.url). SIGTERM or SIGINT stops it after\n"
               "in-flight pushes finish. SIGHUP reloads the config: new pushes use it,\n"
               "pushes in flight finish under the old one, a file that does not load\n"
               "changes nothing (the log says why), and keys only a restart applies\n"
               "(listen, admin, limits on connections and spool, control, approvals) are\n"
               "named in the log; state_dir cannot change. With a \"console\" key the\n"
               "review console is served too, on its own address (its URL in\n"
               "<state_dir>/console.url).\n\n"
               "  --check-config  load the config and the upstream credentials it names as\n"
               "                  serving would, print what is wrong and exit 1, or exit 0\n");
}

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
    config_model *cfg = NULL;
    gateway_server *srv = NULL;
    console *con = NULL;
    rg_error err = RG_ERROR_INIT;
    sigset_t set;
    static int journald;
    int sig = 0, check = 0;
    char q[RG_LOG_VALUE_MAX];

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
        } else if (!strcmp(argv[i], "--check-config")) {
            check = 1;
        } else {
            fprintf(stderr, "refgate serve: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (config == NULL) {
        usage(stderr);
        return 2;
    }
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
