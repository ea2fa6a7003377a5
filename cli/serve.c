/*
 * `refgate serve --config FILE`: run the gateway in the foreground until
 * SIGTERM or SIGINT, then let in-flight pushes finish and exit 0.
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

static void usage(FILE *f)
{
    fprintf(f, "usage: refgate serve --config FILE\n\n"
               "Serve git pushes on the config's \"listen\" address (default 127.0.0.1:8470;\n"
               "port 0 picks a free port) and enforce its rules. Once it accepts connections\n"
               "the base URL is written to <state_dir>/url. With a \"console\" key the review\n"
               "console is served too, on its own address (its URL in <state_dir>/console.url).\n"
               "SIGTERM or SIGINT stops it after in-flight pushes finish.\n");
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
    int sig = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
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
    if (config_load(&cfg, config, &err) < 0) {
        fprintf(stderr, "refgate serve: %s\n", err.msg);
        return 1;
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
    fprintf(stderr, "refgate: serving %s (state in %s)\n", gateway_server_url(srv), cfg->state_dir);
    if (con != NULL)
        fprintf(stderr, "refgate: review console at %s\n", console_url(con));
    sigwait(&set, &sig);
    fprintf(stderr, "refgate: %s received, finishing in-flight pushes\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    console_stop(con);
    gateway_server_stop(srv);
    git_libgit2_shutdown();
    config_free(cfg);
    return 0;
}
