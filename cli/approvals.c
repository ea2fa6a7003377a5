/*
 * `refgate approvals`, `refgate approve` and `refgate deny`: the reviewer's
 * side of approvals. The running gateway holds the approvals (and the audit
 * log they are recorded in), so these never touch state_dir: every request
 * goes over the gateway's control socket (gateway/approve.h), which checks
 * who asks (control.users, control.groups) and records the decision with
 * the caller's uid.
 *
 * Exit status: 0 done, 1 refused or failed (unknown id, expired, already
 * decided, no gateway running), 2 usage.
 */
#include "cli/cli.h"
#include "config/config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2

/* Print s with control characters as '?': names and texts come from pushes. */
static void put_text(const char *s)
{
    for (; s && *s; s++)
        putchar((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

static const char *str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));

    return s ? s : "";
}

/* One approval for people: a line of what, a line of why. */
static void print_entry(const json_t *a)
{
    const char *by = str(a, "by"), *note = str(a, "note");

    printf("%s  %-8s  ", str(a, "id"), str(a, "state"));
    put_text(str(a, "repo"));
    printf("  ");
    put_text(str(a, "ref"));
    printf("  %.12s..%.12s  created %s  expires %s", str(a, "old"), str(a, "new"),
           str(a, "created"), str(a, "expires"));
    if (*str(a, "run")) {
        printf("  run ");
        put_text(str(a, "run"));
    }
    printf("\n    ");
    put_text(str(a, "reason"));
    if (*by) {
        printf("\n    %s by ", str(a, "state"));
        put_text(by);
        if (*note) {
            printf(": ");
            put_text(note);
        }
    }
    printf("\n");
}

static int print_json(const json_t *a)
{
    char *text = json_dumps(a, JSON_COMPACT);
    int rc = text && printf("%s\n", text) >= 0 ? 0 : -1;

    free(text);
    return rc;
}

/* The approval and, beneath it, the commits its kept pack would land. */
static void print_show(const json_t *ans)
{
    const json_t *commits = json_object_get(ans, "commits"), *c;
    size_t i;

    print_entry(json_object_get(ans, "approval"));
    if (commits == NULL) {
        printf("  what would land cannot be shown: %s\n", str(ans, "commits_error"));
        return;
    }
    printf("  would land %zu commit%s%s:\n", json_array_size(commits),
           json_array_size(commits) == 1 ? "" : "s",
           json_is_true(json_object_get(ans, "more_commits")) ? " (and more)" : "");
    json_array_foreach(commits, i, c)
    {
        printf("    %.12s %.10s ", str(c, "id"), str(c, "date"));
        put_text(str(c, "author"));
        printf(": ");
        put_text(str(c, "subject"));
        printf("\n");
    }
}

/* --json: the approval's object with "commits" (or "commits_error") added. */
static int print_show_json(const json_t *ans)
{
    json_t *a = json_deep_copy(json_object_get(ans, "approval"));
    const char *keys[] = {"commits", "more_commits", "commits_error"};
    int rc;

    if (a == NULL)
        return -1;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (json_object_get(ans, keys[i]) != NULL)
            json_object_set(a, keys[i], json_object_get(ans, keys[i]));
    rc = print_json(a);
    json_decref(a);
    return rc;
}

/*
 * Send one request to the gateway of `config_path` and hand back its answer
 * when it says ok; otherwise say why on stderr, prefixed `prog`.
 */
static int call(json_t **ans, const char *prog, const char *config_path, json_t *req)
{
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    int status = EXIT_FAILED;

    *ans = NULL;
    if (req == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_FAILED;
    }
    if (config_load(&cfg, config_path, &err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        status = EXIT_USAGE;
        goto done;
    }
    if (cfg->control.socket == NULL) {
        fprintf(stderr, "%s: %s has no control socket; set control.socket there\n", prog,
                cfg->path);
        goto done;
    }
    if (cli_control_call(ans, cfg->control.socket, req, &err) < 0) {
        if (err.code == -ENOENT || err.code == -ECONNREFUSED)
            fprintf(stderr,
                    "%s: no gateway is running for %s (nothing answers on %s).\n"
                    "Approvals are kept by the running gateway; start it with: refgate serve "
                    "--config %s\n",
                    prog, cfg->path, cfg->control.socket, cfg->path);
        else
            fprintf(stderr, "%s: %s\n", prog, err.msg);
        goto done;
    }
    if (!json_is_true(json_object_get(*ans, "ok"))) {
        const char *why = json_string_value(json_object_get(*ans, "error"));

        fprintf(stderr, "%s: %s\n", prog, why ? why : "the gateway refused");
        json_decref(*ans);
        *ans = NULL;
        goto done;
    }
    status = 0;
done:
    json_decref(req);
    config_free(cfg);
    return status;
}

/* The options of the four commands; `id` is the positional ID. */
typedef struct opts {
    const char *config;
    const char *reason;
    const char *id;
    int json, all, show;
} opts;

static const cli_opt list_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(opts, config), "FILE"},
    {"--all", CLI_OPT_FLAG, offsetof(opts, all), NULL},
    {"--json", CLI_OPT_FLAG, offsetof(opts, json), NULL},
};
static const cli_opt show_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(opts, config), "FILE"},
    {"--json", CLI_OPT_FLAG, offsetof(opts, json), NULL},
};
static const cli_opt approve_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(opts, config), "FILE"},
};
static const cli_opt deny_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(opts, config), "FILE"},
    {"--reason", CLI_OPT_VALUE, offsetof(opts, reason), "TEXT"},
};
const cli_cmd cli_cmd_approvals = {"approvals", CLI_OPTS(list_opts), 0, NULL};
const cli_cmd cli_cmd_approvals_show = {"approvals show", CLI_OPTS(show_opts), 0, NULL};
const cli_cmd cli_cmd_approve = {"approve", CLI_OPTS(approve_opts), 0, NULL};
const cli_cmd cli_cmd_deny = {"deny", CLI_OPTS(deny_opts), 0, NULL};

/* Parse by cmd into *o: 0, 1 when help was printed, -1 on a mistake (said). */
static int parse(opts *o, const cli_cmd *cmd, int argc, char **argv)
{
    cli_args args;
    int rc = cli_opts_parse(cmd, o, &args, argc, argv);

    if (rc != 0)
        return cli_opts_exit(rc) == 0 ? 1 : -1;
    if (o->config == NULL)
        o->config = getenv("REFGATE_CONFIG");
    if (o->config == NULL || *o->config == '\0')
        o->config = "/etc/refgate/refgate.json";
    if (cmd == &cli_cmd_approvals && args.n > 0) {
        cli_usage_error(cmd, "unexpected argument '%s'", args.v[0]);
        return -1;
    }
    if (cmd != &cli_cmd_approvals && args.n != 1) {
        if (args.n == 0)
            cli_usage_error(cmd, "an approval ID is required (see refgate approvals)");
        else
            cli_usage_error(cmd, "unexpected argument '%s'", args.v[1]);
        return -1;
    }
    o->id = args.n ? args.v[0] : NULL;
    return 0;
}

static int list(const opts *o)
{
    json_t *ans = NULL;
    size_t offset = 0, total = 0, shown = 0;
    int status;

    /* Bounded: each page moves the offset on, and the gateway's total caps it. */
    do {
        const json_t *arr;
        size_t i;
        json_t *a;

        status = call(&ans, "refgate approvals", o->config,
                      json_pack("{s:s, s:b, s:I}", "op", "approvals", "all", o->all, "offset",
                                (json_int_t)offset));
        if (status != 0)
            return status;
        arr = json_object_get(ans, "approvals");
        total = (size_t)json_integer_value(json_object_get(ans, "total"));
        json_array_foreach(arr, i, a)
        {
            if (o->json ? print_json(a) < 0 : (print_entry(a), 0))
                status = EXIT_FAILED;
            shown++;
        }
        offset += json_array_size(arr);
        if (json_array_size(arr) == 0)
            offset = total;
        json_decref(ans);
    } while (status == 0 && offset < total);
    if (!o->json && shown == 0)
        fprintf(stderr, "no %sapprovals\n", o->all ? "" : "pending ");
    return fflush(stdout) == 0 ? status : EXIT_FAILED;
}

int cli_approvals(int argc, char **argv)
{
    opts o = {0};
    json_t *ans = NULL;
    int show = argc > 1 && !strcmp(argv[1], "show"), status;
    int rc = show ? parse(&o, &cli_cmd_approvals_show, argc - 1, argv + 1)
                  : parse(&o, &cli_cmd_approvals, argc, argv);

    if (rc != 0)
        return rc > 0 ? 0 : EXIT_USAGE;
    o.show = show;
    if (!o.show)
        return list(&o);
    status = call(&ans, "refgate approvals show", o.config,
                  json_pack("{s:s, s:s, s:b}", "op", "approval", "id", o.id, "commits", 1));
    if (status != 0)
        return status;
    if (o.json)
        status = print_show_json(ans) < 0 ? EXIT_FAILED : 0;
    else
        print_show(ans);
    json_decref(ans);
    return fflush(stdout) == 0 ? status : EXIT_FAILED;
}

/* approve (deny 0) or deny. */
static int decide(int argc, char **argv, int deny)
{
    const char *prog = deny ? "refgate deny" : "refgate approve";
    opts o = {0};
    json_t *ans = NULL, *req;
    const json_t *a;
    int rc = parse(&o, deny ? &cli_cmd_deny : &cli_cmd_approve, argc, argv), status;

    if (rc != 0)
        return rc > 0 ? 0 : EXIT_USAGE;
    req = json_pack("{s:s, s:s}", "op", deny ? "deny" : "approve", "id", o.id);
    if (req != NULL && o.reason != NULL &&
        json_object_set_new(req, "reason", json_string(o.reason)) < 0) {
        fprintf(stderr, "%s: --reason: expected UTF-8 text\n", prog);
        json_decref(req);
        return EXIT_USAGE;
    }
    status = call(&ans, prog, o.config, req);
    if (status != 0)
        return status;
    a = json_object_get(ans, "approval");
    printf("%s %s: ", deny ? "denied" : "approved", str(a, "id"));
    put_text(str(a, "ref"));
    printf(" in ");
    put_text(str(a, "repo"));
    printf(" (%.12s..%.12s)", str(a, "old"), str(a, "new"));
    if (!deny)
        printf("; the same push passes once until %s", str(a, "expires"));
    printf("\n");
    json_decref(ans);
    return fflush(stdout) == 0 ? 0 : EXIT_FAILED;
}

int cli_approve(int argc, char **argv)
{
    return decide(argc, argv, 0);
}

int cli_deny(int argc, char **argv)
{
    return decide(argc, argv, 1);
}
