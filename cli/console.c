/*
 * `refgate console user add [--config FILE] NAME`: make a reviewer account
 * for the review console (or set its password). The password is read from
 * stdin (one line; from a terminal, without echo), sent to the running
 * gateway over its control socket, which hashes it (yescrypt) into
 * <state_dir>/console-users and audits the change; it is never an argument
 * (those are visible in /proc) and is wiped once sent.
 *
 * Exit status: 0 done, 1 refused or failed, 2 usage.
 */
#include "cli/cli.h"
#include "config/config.h"
#include "gateway/reviewers.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2
#define PROG        "refgate console user add"

/* refgate console user add's options (refgate(1) says what they do). */
typedef struct console_opts {
    const char *config;
} console_opts;

static const cli_opt console_opts_table[] = {
    {"--config", CLI_OPT_VALUE, offsetof(console_opts, config), "FILE"},
};
const cli_cmd cli_cmd_console_user_add = {"console user add", CLI_OPTS(console_opts_table), 0,
                                          NULL};

/* One line of stdin into buf (without its newline); -1 when none or too long. */
static int read_password(char *buf, size_t bufsz)
{
    struct termios old, quiet;
    int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &old) == 0;
    size_t len;
    int rc = 0;

    if (tty) {
        fprintf(stderr, "Password: ");
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    if (fgets(buf, (int)bufsz, stdin) == NULL)
        rc = -1;
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fprintf(stderr, "\n");
    }
    if (rc < 0)
        return -1;
    len = strlen(buf);
    if (len > 0 && buf[len - 1] == '\n')
        buf[--len] = '\0';
    else if (!feof(stdin))
        return -1; /* longer than the buffer */
    if (len > 0 && buf[len - 1] == '\r')
        buf[--len] = '\0';
    return 0;
}

static int user_add(const char *config_path, const char *name)
{
    char *password = calloc(1, GATEWAY_REVIEWER_PASSWORD_MAX + 2);
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *req = NULL, *ans = NULL;
    int status = EXIT_FAILED;

    if (password == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        return EXIT_FAILED;
    }
    if (config_load(&cfg, config_path, &err) < 0) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        status = EXIT_USAGE;
        goto done;
    }
    if (cfg->control.socket == NULL) {
        fprintf(stderr, PROG ": %s has no control socket; set control.socket there\n", cfg->path);
        goto done;
    }
    if (read_password(password, GATEWAY_REVIEWER_PASSWORD_MAX + 2) < 0) {
        fprintf(stderr, PROG ": expected the password on stdin, one line of at most %d bytes\n",
                GATEWAY_REVIEWER_PASSWORD_MAX);
        status = EXIT_USAGE;
        goto done;
    }
    req =
        json_pack("{s:s, s:s, s:s}", "op", "console-user-add", "name", name, "password", password);
    if (req == NULL) {
        fprintf(stderr, PROG ": the password is not UTF-8 text\n");
        status = EXIT_USAGE;
        goto done;
    }
    if (cli_control_call(&ans, cfg->control.socket, req, &err) < 0) {
        if (err.code == -ENOENT || err.code == -ECONNREFUSED)
            fprintf(stderr,
                    PROG ": no gateway is running for %s (nothing answers on %s); start it "
                         "with: refgate serve --config %s\n",
                    cfg->path, cfg->control.socket, cfg->path);
        else
            fprintf(stderr, PROG ": %s\n", err.msg);
        goto done;
    }
    if (!json_is_true(json_object_get(ans, "ok"))) {
        const char *why = json_string_value(json_object_get(ans, "error"));

        fprintf(stderr, PROG ": %s\n", why ? why : "the gateway refused");
        goto done;
    }
    printf("%s console user %s\n",
           json_is_true(json_object_get(ans, "replaced")) ? "changed the password of" : "added",
           name);
    status = fflush(stdout) == 0 ? 0 : EXIT_FAILED;
done:
    /* jansson's copy of the password goes with req; ours is wiped. */
    json_decref(req);
    json_decref(ans);
    explicit_bzero(password, GATEWAY_REVIEWER_PASSWORD_MAX + 2);
    free(password);
    config_free(cfg);
    return status;
}

int cli_console(int argc, char **argv)
{
    const char *config = getenv("REFGATE_CONFIG"), *name;
    console_opts o = {0};
    cli_args args;
    int rc;

    if (config == NULL || *config == '\0')
        config = "/etc/refgate/refgate.json";
    if (argc >= 2 && cli_is_help(argv[1])) {
        cli_help_print(stdout, "console");
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "user") != 0 || strcmp(argv[2], "add") != 0)
        return cli_usage_error(&cli_cmd_console_user_add,
                               "expected: refgate console user add NAME");
    rc = cli_opts_parse(&cli_cmd_console_user_add, &o, &args, argc - 2, argv + 2);
    if (rc != 0)
        return cli_opts_exit(rc);
    if (o.config != NULL)
        config = o.config;
    if (args.n > 1)
        return cli_usage_error(&cli_cmd_console_user_add, "unexpected argument '%s'", args.v[1]);
    name = args.n ? args.v[0] : NULL;
    if (name == NULL || !gateway_reviewer_name_ok(name))
        return cli_usage_error(&cli_cmd_console_user_add, "NAME: 1 to %d of A-Z a-z 0-9 . _ -",
                               GATEWAY_REVIEWER_NAME_MAX);
    return user_add(config, name);
}
