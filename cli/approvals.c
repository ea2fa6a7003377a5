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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2

static void usage(FILE *f)
{
    fprintf(f, "usage: refgate approvals [--config FILE] [--all] [--json]\n"
               "       refgate approvals show [--config FILE] [--json] ID\n"
               "       refgate approve [--config FILE] ID\n"
               "       refgate deny [--config FILE] [--reason TEXT] ID\n"
               "\n"
               "A push to a ref a rule asks about (\"effect\": \"ask\") is refused with an\n"
               "approval id. Approving it lets exactly that update (repo, ref, old and new\n"
               "commit) through once, when it is pushed again before the approval expires\n"
               "(approvals.expire in the config, default 24h); another commit needs another\n"
               "approval. Denying it refuses that update until the denial expires. With\n"
               "\"hold\" on the rule the push waits instead, and lands as soon as it is\n"
               "approved.\n"
               "\n"
               "approvals       list the pending approvals, oldest first\n"
               "  --all         also the approved and denied ones not yet used or expired\n"
               "  --json        one JSON object a line: id, state, repo, ref, old, new, run,\n"
               "                rule, reason, by, note, created, decided, expires\n"
               "approvals show  one approval, whatever its state, and what its push would land:\n"
               "                the commits of the pack it kept (--json: \"commits\", each with\n"
               "                id, date, author and subject)\n"
               "approve         approve a pending approval\n"
               "deny            deny a pending approval, or revoke an approved one\n"
               "  --reason TEXT the pusher is told it when the update is pushed again\n"
               "\n"
               "  --config FILE the gateway's configuration (default $REFGATE_CONFIG, else\n"
               "                /etc/refgate/refgate.json); only read, for the control socket\n"
               "\n"
               "These talk to the running gateway over its control socket, which decides\n"
               "who may (control.users and control.groups); every decision is recorded in\n"
               "the audit log with the caller's uid.\n");
}

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

/* The options of the three commands; `id` is the positional ID. */
typedef struct opts {
    const char *config;
    const char *reason;
    const char *id;
    int json, all, show;
} opts;

static int parse(opts *o, int argc, char **argv, const char *prog, int takes_reason, int takes_list)
{
    const char *value;
    int m;

    o->config = getenv("REFGATE_CONFIG");
    if (o->config == NULL || *o->config == '\0')
        o->config = "/etc/refgate/refgate.json";
    for (int i = 1; i < argc; i++) {
        m = 0;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 1;
        }
        if ((m = cli_opt_value(&value, argc, argv, &i, "--config", prog)) != 0) {
            o->config = value;
        } else if (takes_reason &&
                   (m = cli_opt_value(&value, argc, argv, &i, "--reason", prog)) != 0) {
            o->reason = value;
        } else if (takes_list && !strcmp(argv[i], "--json")) {
            o->json = 1;
        } else if (takes_list && !o->show && !strcmp(argv[i], "--all")) {
            o->all = 1;
        } else if (takes_list && !o->show && o->id == NULL && !strcmp(argv[i], "show")) {
            o->show = 1;
        } else if (argv[i][0] == '-' || o->id != NULL || (takes_list && !o->show)) {
            fprintf(stderr, "%s: unexpected argument '%s'\n\n", prog, argv[i]);
            usage(stderr);
            return -1;
        } else {
            o->id = argv[i];
        }
        if (m < 0)
            return -1;
    }
    if (o->id == NULL && (!takes_list || o->show)) {
        fprintf(stderr, "%s: an approval ID is required (see refgate approvals)\n\n", prog);
        usage(stderr);
        return -1;
    }
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
    int rc = parse(&o, argc, argv, "refgate approvals", 0, 1), status;

    if (rc != 0)
        return rc > 0 ? 0 : EXIT_USAGE;
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
    int rc = parse(&o, argc, argv, prog, deny, 0), status;

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
