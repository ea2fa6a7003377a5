/*
 * `refgate demo`: the whole story on this machine alone. In a throwaway
 * directory it makes a bare upstream with a `main`, a config that protects
 * main and allows feature branches, starts a gateway in this process, mints
 * a run token, clones, and pushes with the real git client: a feature
 * branch (lands), main (rejected), a force push of the feature branch
 * (rejected), a branch whose history holds a token (rejected, the token
 * never shown), and a release branch a rule asks about (held for a
 * reviewer, approved over the control socket, then lands). Then it prints
 * the audit log and its verification, and checks upstream got exactly what
 * policy allowed (exit 1 if not).
 */
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gateway/server.h"
#include "config/config.h"
#include "tokens/token.h"
#include "util/fs.h"
#include "util/proc.h"

#define STEP "\n\033[1m==> %s\033[0m\n"

/* How long one git command of the demo may take; all of them are local. */
#define DEMO_GIT_SECONDS 120

typedef struct demo {
    char dir[256];
    char upstream_root[300];
    char upstream_repo[360];
    char work[300];
    char config[300];
    const char *env[24];
    char envbuf[16][1024];
    size_t nenv;
} demo;

__attribute__((format(printf, 2, 3))) static void env_add(demo *d, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->envbuf[d->nenv], sizeof(d->envbuf[0]), fmt, ap);
    va_end(ap);
    d->env[d->nenv] = d->envbuf[d->nenv];
    d->nenv++;
    d->env[d->nenv] = NULL;
}

/* Run git with the demo's environment, its output shown to the user. */
static int git(demo *d, const char *cwd, int quiet, const char *const *args)
{
    const char *argv[16] = {"git"};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_error err = RG_ERROR_INIT;
    rg_proc *p = NULL;
    size_t n = 1;
    int status = -1;

    for (; *args && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    if (!quiet) {
        printf("$");
        for (size_t i = 0; argv[i]; i++)
            printf(" %s", argv[i]);
        printf("\n");
        fflush(stdout);
    }
    s.argv = argv;
    s.envp = d->env;
    s.cwd = cwd;
    s.flags = quiet ? 0 : RG_PROC_INHERIT_STDOUT;
    if (rg_proc_start(&p, &s, &err) < 0 ||
        rg_proc_finish(p, &status, rg_proc_deadline(DEMO_GIT_SECONDS), &err) < 0) {
        fprintf(stderr, "refgate demo: %s\n", err.msg);
        status = -1;
    }
    rg_proc_free(p);
    return status;
}

#define GIT(d, cwd, quiet, ...) git((d), (cwd), (quiet), (const char *const[]){__VA_ARGS__, NULL})

/* The upstream's current id for a ref, or "" when absent. */
static void upstream_ref(demo *d, const char *ref, char *out, size_t outsz)
{
    const char *argv[] = {"git", "--git-dir", d->upstream_repo, "rev-parse", "--verify", "-q",
                          ref,   NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_buf b = RG_BUF_INIT(4096);
    int status = 1;

    out[0] = '\0';
    s.argv = argv;
    s.envp = d->env;
    if (rg_proc_run(&status, &b, &s, rg_proc_deadline(DEMO_GIT_SECONDS), NULL) == 0 &&
        status == 0 && b.data)
        snprintf(out, outsz, "%.*s", (int)strcspn(b.data, "\n"), b.data);
    rg_buf_free(&b);
}

static int write_config(demo *d, rg_error *err)
{
    json_t *cfg;
    char *text;
    int rc;

    cfg = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s}], s:[{s:s, s:[s], s:[s,s,s], s:s, s:s},"
                    " {s:s, s:[s], s:[s,s], s:s}, {s:s, s:b, s:s, s:s},"
                    " {s:s, s:[s], s:[s,s], s:s, s:s}]}",
                    "listen", "127.0.0.1:0", "state_dir", "state", "default", "deny", "upstreams",
                    "host", "local", "url", d->upstream_root, "rules", "name", "protect-main",
                    "refs", "refs/heads/main", "actions", "update", "force", "delete", "effect",
                    "deny", "reason", "main is protected: open a pull request instead", "name",
                    "feature-branches", "refs", "refs/heads/feature/**", "actions", "create",
                    "update", "effect", "allow", "name", "no-secrets", "secrets", 1, "effect",
                    "deny", "reason", "credentials never leave the machine", "name",
                    "releases-need-review", "refs", "refs/heads/release/**", "actions", "create",
                    "update", "effect", "ask", "reason", "a release needs a reviewer");
    text = cfg ? json_dumps(cfg, JSON_INDENT(2)) : NULL;
    json_decref(cfg);
    if (text == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    rc = rg_fs_write_atomic(d->config, text, strlen(text), 0644, err);
    free(text);
    return rc;
}

static int write_file(demo *d, const char *dir, const char *name, const char *text)
{
    char path[400];

    (void)d;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return rg_fs_write_atomic(path, text, strlen(text), 0644, NULL);
}

static int setup_upstream(demo *d)
{
    char seed[320];

    snprintf(seed, sizeof(seed), "%s/seed", d->dir);
    if (GIT(d, NULL, 1, "init", "-q", "--bare", "-b", "main", d->upstream_repo) != 0 ||
        GIT(d, NULL, 1, "clone", "-q", d->upstream_repo, seed) != 0 ||
        write_file(d, seed, "README.md", "# app\n\nThe team's application.\n") < 0 ||
        GIT(d, seed, 1, "add", "README.md") != 0 ||
        GIT(d, seed, 1, "commit", "-q", "-m", "Initial commit") != 0 ||
        GIT(d, seed, 1, "push", "-q", "origin", "main") != 0)
        return -1;
    return 0;
}

/*
 * The run's git environment, as refgate-run gives it: pushes to the
 * upstream are rewritten to the gateway (pushInsteadOf) and the credential
 * helper answers with the run token, all through GIT_CONFIG_* so nothing is
 * written to the repository's config and the token is never in a URL.
 */
static void run_env(demo *d, const char *gateway_url, const char *token)
{
    char key[1100];

    d->nenv = 0;
    env_add(d, "PATH=%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    env_add(d, "HOME=%s", d->dir);
    env_add(d, "GIT_CONFIG_NOSYSTEM=%s", "1");
    env_add(d, "GIT_TERMINAL_PROMPT=%s", "0");
    env_add(d, "GIT_AUTHOR_NAME=%s", "Demo Agent");
    env_add(d, "GIT_AUTHOR_EMAIL=%s", "agent@example.invalid");
    env_add(d, "GIT_COMMITTER_NAME=%s", "Demo Agent");
    env_add(d, "GIT_COMMITTER_EMAIL=%s", "agent@example.invalid");
    if (gateway_url == NULL)
        return;
    env_add(d, "REFGATE_TOKEN=%s", token);
    env_add(d, "GIT_CONFIG_COUNT=%s", "2");
    snprintf(key, sizeof(key), "GIT_CONFIG_KEY_0=url.%s/local/.pushInsteadOf", gateway_url);
    env_add(d, "%s", key);
    env_add(d, "GIT_CONFIG_VALUE_0=file://%s/", d->upstream_root);
    /* Two entries: an empty one resets inherited helpers, ours answers. */
    d->env[d->nenv++] = "GIT_CONFIG_KEY_1=credential.helper";
    d->env[d->nenv++] = "GIT_CONFIG_VALUE_1=!f() { test \"$1\" = get && "
                        "echo username=run && echo \"password=$REFGATE_TOKEN\"; }; f";
    d->env[d->nenv] = NULL;
}

static int demo_main(demo *d, int keep)
{
    config_model *cfg = NULL;
    gateway_server *srv = NULL;
    tokens_key *key = NULL;
    char *token = NULL, before_main[80], after_main[80], feature[80], clone_url[400];
    char leaked[80], release[80], id[64] = "";
    const char *repos[] = {"local/acme/app"};
    rg_error err = RG_ERROR_INIT;
    int rc = 1, s_feature, s_main, s_force, s_secret, s_ask, s_release = 1;

    printf(STEP, "a throwaway upstream, a config that protects main");
    printf("directory: %s\n", d->dir);
    run_env(d, NULL, NULL);
    if (setup_upstream(d) < 0 || write_config(d, &err) < 0) {
        fprintf(stderr, "refgate demo: cannot set up the upstream: %s\n", err.msg);
        goto done;
    }
    printf("config %s:\n", d->config);
    fflush(stdout);
    {
        rg_buf b = RG_BUF_INIT(1 << 16);
        if (rg_fs_read_file(&b, d->config, NULL) == 0)
            printf("%s\n", b.data);
        rg_buf_free(&b);
    }

    printf(STEP, "start the gateway, mint a run token");
    if (config_load(&cfg, d->config, &err) < 0 || gateway_server_start(&srv, cfg, &err) < 0 ||
        tokens_key_load(&key, cfg->state_dir, &err) < 0 ||
        tokens_mint(&token, key, "demo-run", repos, 1, 900, (int64_t)time(NULL), &err) < 0) {
        fprintf(stderr, "refgate demo: %s\n", err.msg);
        goto done;
    }
    {
        char hash[TOKENS_HASH_PREFIX_SIZE];
        tokens_hash_prefix(hash, token);
        printf("gateway: %s\nrun token: minted for local/acme/app, 15 minutes (sha256 %s...)\n",
               gateway_server_url(srv), hash);
    }
    run_env(d, gateway_server_url(srv), token);
    upstream_ref(d, "refs/heads/main", before_main, sizeof(before_main));

    printf(STEP, "clone, then push a feature branch (allowed)");
    snprintf(clone_url, sizeof(clone_url), "file://%s", d->upstream_repo);
    GIT(d, NULL, 0, "clone", "-q", clone_url, d->work);
    write_file(d, d->work, "login.c", "int login(void) { return 0; }\n");
    GIT(d, d->work, 1, "switch", "-q", "-c", "feature/login");
    GIT(d, d->work, 1, "add", "login.c");
    GIT(d, d->work, 0, "commit", "-q", "-m", "Add login");
    s_feature = GIT(d, d->work, 0, "push", "origin", "feature/login");

    printf(STEP, "push to main (protected: rejected)");
    GIT(d, d->work, 1, "switch", "-q", "main");
    write_file(d, d->work, "README.md", "# app\n\nEdited straight on main.\n");
    GIT(d, d->work, 0, "commit", "-q", "-am", "Edit README on main");
    s_main = GIT(d, d->work, 0, "push", "origin", "main");

    printf(STEP, "rewrite the feature branch and force-push it (rejected)");
    GIT(d, d->work, 1, "switch", "-q", "feature/login");
    GIT(d, d->work, 0, "commit", "-q", "--amend", "-m", "Add login (rewritten)");
    s_force = GIT(d, d->work, 0, "push", "--force", "origin", "feature/login");

    printf(STEP, "commit a token, remove it in the next commit, push (rejected: it is history)");
    GIT(d, d->work, 1, "switch", "-q", "-c", "feature/config", "origin/main");
    /* A GitHub token's shape, made up; assembled so this file holds none. */
    write_file(d, d->work, "config.env",
               "GITHUB_TOKEN=ghp_"
               "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d\n");
    GIT(d, d->work, 1, "add", "config.env");
    GIT(d, d->work, 0, "commit", "-q", "-m", "Add config");
    GIT(d, d->work, 0, "rm", "-q", "config.env");
    GIT(d, d->work, 0, "commit", "-q", "-m", "Remove the token again");
    s_secret = GIT(d, d->work, 0, "push", "origin", "feature/config");

    printf(STEP, "push a release branch (a rule asks: refused until a reviewer approves)");
    GIT(d, d->work, 1, "switch", "-q", "-c", "release/1.0", "origin/main");
    write_file(d, d->work, "CHANGELOG.md", "# 1.0\n\nLogin.\n");
    GIT(d, d->work, 1, "add", "CHANGELOG.md");
    GIT(d, d->work, 0, "commit", "-q", "-m", "Release 1.0");
    s_ask = GIT(d, d->work, 0, "push", "origin", "release/1.0");
    {
        json_t *req = json_pack("{s:s}", "op", "approvals"), *ans = NULL;
        const char *got;

        if (req != NULL && cli_control_call(&ans, cfg->control.socket, req, &err) == 0 &&
            (got = json_string_value(
                 json_object_get(json_array_get(json_object_get(ans, "approvals"), 0), "id"))))
            snprintf(id, sizeof(id), "%s", got);
        json_decref(req);
        json_decref(ans);
    }
    printf(STEP, "a reviewer approves it (over the gateway's control socket)");
    if (id[0]) {
        char *args[] = {(char *)"approve", (char *)"--config", d->config, id, NULL};

        printf("$ refgate approve %s\n", id);
        fflush(stdout);
        if (cli_approve(4, args) == 0) {
            printf(STEP, "the same push again (lands, once)");
            s_release = GIT(d, d->work, 0, "push", "origin", "release/1.0");
        }
    } else {
        printf("no pending approval: %s\n", err.msg[0] ? err.msg : "none listed");
    }

    upstream_ref(d, "refs/heads/main", after_main, sizeof(after_main));
    upstream_ref(d, "refs/heads/feature/login", feature, sizeof(feature));
    upstream_ref(d, "refs/heads/feature/config", leaked, sizeof(leaked));
    upstream_ref(d, "refs/heads/release/1.0", release, sizeof(release));

    printf(STEP, "the audit log");
    fflush(stdout);
    {
        char *args[] = {(char *)"audit", (char *)"--config", d->config, NULL};
        cli_audit(3, args);
    }
    printf(STEP, "refgate audit verify");
    fflush(stdout);
    {
        char *args[] = {(char *)"audit", (char *)"verify", (char *)"--config", d->config, NULL};
        rc = cli_audit(4, args) != 0;
    }

    printf(STEP, "result");
    if (s_feature == 0 && feature[0] && s_main != 0 && !strcmp(before_main, after_main) &&
        s_force != 0 && s_secret != 0 && !leaked[0] && s_ask != 0 && s_release == 0 && release[0]) {
        printf("upstream has feature/login and, once approved, release/1.0; main is unchanged;\n"
               "the force push was refused; the token never reached upstream.\n");
    } else {
        printf("UNEXPECTED: feature push %d, main push %d, force push %d, token push %d (%s "
               "upstream), release push %d then %d, main %s\n",
               s_feature, s_main, s_force, s_secret, leaked[0] ? "reached" : "not", s_ask,
               s_release, strcmp(before_main, after_main) ? "changed" : "unchanged");
        rc = 1;
    }
done:
    gateway_server_stop(srv);
    tokens_secret_free(token);
    tokens_key_free(key);
    config_free(cfg);
    if (keep)
        printf("kept %s\n", d->dir);
    else
        rg_fs_remove_tree(d->dir, 0, NULL);
    return rc;
}

/* refgate demo's one option, --keep: leave the directory for a look. */
static const cli_opt demo_opts[] = {
    {"--keep", CLI_OPT_FLAG, 0, NULL},
};
const cli_cmd cli_cmd_demo = {"demo", CLI_OPTS(demo_opts), 0, NULL};

int cli_demo(int argc, char **argv)
{
    demo d = {0};
    cli_args args;
    int keep = 0, rc;
    const char *tmp = getenv("TMPDIR");

    rc = cli_opts_parse(&cli_cmd_demo, &keep, &args, argc, argv);
    if (rc != 0)
        return cli_opts_exit(rc);
    if (args.n > 0)
        return cli_usage_error(&cli_cmd_demo, "unexpected argument '%s'", args.v[0]);
    snprintf(d.dir, sizeof(d.dir), "%s/refgate-demo.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(d.dir) == NULL) {
        perror("refgate demo: mkdtemp");
        return 1;
    }
    snprintf(d.upstream_root, sizeof(d.upstream_root), "%s/upstream", d.dir);
    snprintf(d.upstream_repo, sizeof(d.upstream_repo), "%s/acme/app.git", d.upstream_root);
    snprintf(d.work, sizeof(d.work), "%s/work", d.dir);
    snprintf(d.config, sizeof(d.config), "%s/refgate.json", d.dir);
    signal(SIGPIPE, SIG_IGN);
    return demo_main(&d, keep);
}
