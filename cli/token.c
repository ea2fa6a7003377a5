/*
 * `refgate token`: mint and revoke run tokens from the command line, and
 * rotate the running gateway's signing key.
 *
 * `mint` prints exactly the token and a newline on stdout, so that
 * `TOKEN=$(refgate token mint ...)` is all a launcher needs; everything else
 * goes to stderr. It signs with the key in state_dir, published first to
 * the token store (files, or the config's database). A token is a
 * credential: it never appears in an error message, only its hash prefix
 * (tokens_hash_prefix) does. `revoke` takes the token as an argument or,
 * better because argv is visible to other users through ps, as `-` to read
 * it from stdin; it asks the running gateway through its control socket
 * (audited there), and records the revocation in the store itself when no
 * gateway answers. `key rotate` asks the running gateway for a new signing
 * key.
 *
 * Exit status: 0 done, 1 failed, 2 usage.
 */
#include "cli/cli.h"
#include "config/config.h"
#include "db/pool.h"
#include "tokens/token.h"
#include "util/text.h"

#include <errno.h>
#include <openssl/rand.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

/* The options of token mint, revoke and key rotate (refgate(1) says what they do). */
typedef struct token_opts {
    const char *config, *ttl, *run;
    cli_opt_list repos;
} token_opts;

static const cli_opt mint_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(token_opts, config), "FILE"},
    {"--repo", CLI_OPT_LIST, offsetof(token_opts, repos), "HOST/PATH"},
    {"--ttl", CLI_OPT_VALUE, offsetof(token_opts, ttl), "DURATION"},
    {"--run", CLI_OPT_VALUE, offsetof(token_opts, run), "NAME"},
};
static const cli_opt config_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(token_opts, config), "FILE"},
};
const cli_cmd cli_cmd_token_mint = {"token mint", CLI_OPTS(mint_opts), 0, NULL};
const cli_cmd cli_cmd_token_revoke = {"token revoke", CLI_OPTS(config_opts), 0, NULL};
const cli_cmd cli_cmd_token_key_rotate = {"token key rotate", CLI_OPTS(config_opts), 0, NULL};

/* The token store the config names: its database when "state" has one. */
static int store_open(tokens_store **out, db_pool **pool, const config_model *cfg, rg_error *err)
{
    *out = NULL;
    *pool = NULL;
    if (cfg->state.postgres != NULL && db_pool_open(pool, &cfg->state, err) < 0)
        return err->code;
    return tokens_store_open(out, cfg->state_dir, *pool, err);
}

static int load(config_model **cfg, tokens_key **key, tokens_store **store, db_pool **pool,
                const char *config_path)
{
    rg_error err = RG_ERROR_INIT;

    if (config_load(cfg, config_path, &err) < 0 ||
        (key != NULL && tokens_key_load(key, (*cfg)->state_dir, &err) < 0) ||
        store_open(store, pool, *cfg, &err) < 0) {
        fprintf(stderr, "refgate token: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/*
 * Check one --repo and write its canonical form (without .git) to `out`.
 * The token library checks the shape again; this adds what only the
 * configuration knows (is HOST an upstream?) and says what is wrong in
 * terms of the option the user typed.
 */
static int repo_arg(char **out, const config_model *cfg, const char *arg)
{
    const char *slash;
    size_t len = strlen(arg), i;
    char *repo, host[128];

    *out = NULL;
    if (len >= 4 && !strcmp(arg + len - 4, ".git"))
        len -= 4;
    if (len == 0 || arg[0] == '/') {
        fprintf(stderr, "refgate token mint: --repo %s: name it HOST/PATH, without a leading '/'\n",
                cli_safe_arg(arg));
        return -1;
    }
    slash = memchr(arg, '/', len);
    if (slash == NULL || slash + 1 == arg + len) {
        fprintf(stderr,
                "refgate token mint: --repo %s: expected HOST/PATH, e.g. local/acme/widgets\n",
                cli_safe_arg(arg));
        return -1;
    }
    for (i = 0; i + 1 < len; i++) {
        if (arg[i] == '.' && arg[i + 1] == '.' && (i == 0 || arg[i - 1] == '/') &&
            (i + 2 == len || arg[i + 2] == '/')) {
            fprintf(stderr, "refgate token mint: --repo %s: '..' is not allowed in a path\n",
                    cli_safe_arg(arg));
            return -1;
        }
    }
    if ((size_t)(slash - arg) >= sizeof(host)) {
        fprintf(stderr, "refgate token mint: --repo %s: host name is too long\n",
                cli_safe_arg(arg));
        return -1;
    }
    memcpy(host, arg, (size_t)(slash - arg));
    host[slash - arg] = '\0';
    if (config_find_upstream(cfg, host) == NULL) {
        fprintf(stderr, "refgate token mint: --repo %s: '%s' is not an upstream host in %s (",
                cli_safe_arg(arg), host, cfg->path);
        for (i = 0; i < cfg->nupstreams; i++)
            fprintf(stderr, "%s%s", i ? ", " : "configured: ", cfg->upstreams[i].host);
        fprintf(stderr, "%s)\n", cfg->nupstreams ? "" : "none configured");
        return -1;
    }
    repo = strndup(arg, len);
    if (repo == NULL) {
        fprintf(stderr, "refgate token: out of memory\n");
        return -1;
    }
    *out = repo;
    return 0;
}

static int token_mint(int argc, char **argv)
{
    const char *config_path = NULL, *ttl_arg = NULL, *run = NULL;
    char *repos[TOKENS_REPOS_MAX], *token = NULL, gen_run[32];
    token_opts o = {0};
    cli_args args;
    config_model *cfg = NULL;
    tokens_key *key = NULL;
    tokens_store *store = NULL;
    db_pool *pool = NULL;
    rg_error err = RG_ERROR_INIT;
    const char *const *repo_args;
    size_t nrepo_args = 0, nrepos = 0, i, j;
    long long ttl = 3600;
    int status = 1, rc;
    unsigned char rnd[4];

    rc = cli_opts_parse(&cli_cmd_token_mint, &o, &args, argc, argv);
    if (rc != 0)
        return cli_opts_exit(rc);
    if (args.n > 0)
        return cli_usage_error(&cli_cmd_token_mint, "unexpected argument '%s'",
                               cli_safe_arg(args.v[0]));
    if (o.repos.n > TOKENS_REPOS_MAX)
        return cli_usage_error(&cli_cmd_token_mint, "at most %d --repo options", TOKENS_REPOS_MAX);
    config_path = o.config;
    ttl_arg = o.ttl;
    run = o.run;
    nrepo_args = o.repos.n;
    repo_args = o.repos.v;
    if (config_path == NULL || nrepo_args == 0)
        return cli_usage_error(&cli_cmd_token_mint,
                               "--config and at least one --repo are required");
    if (ttl_arg != NULL) {
        ttl = rg_duration_parse(ttl_arg);
        if (ttl <= 0 || ttl > TOKENS_TTL_MAX) {
            fprintf(stderr,
                    "refgate token mint: --ttl %s: expected 1 second to 7 days (e.g. 3600, 30m, "
                    "2h, 7d)\n",
                    ttl_arg);
            return EXIT_USAGE;
        }
    }
    if (run == NULL) {
        if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
            fprintf(stderr, "refgate token mint: no randomness for a run name\n");
            return 1;
        }
        snprintf(gen_run, sizeof(gen_run), "run-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
        run = gen_run;
    }

    if (load(&cfg, &key, &store, &pool, config_path) < 0)
        goto done;
    for (i = 0; i < nrepo_args; i++) {
        char *repo;
        if (repo_arg(&repo, cfg, repo_args[i]) < 0) {
            status = EXIT_USAGE;
            goto done;
        }
        /* Naming a repository twice is harmless; keep the token short. */
        for (j = 0; j < nrepos && strcmp(repos[j], repo) != 0; j++)
            ;
        if (j < nrepos)
            free(repo);
        else
            repos[nrepos++] = repo;
    }
    /* Never a token whose key the gateways cannot find. */
    if (tokens_key_publish(key, store, "cli", &err) < 0) {
        fprintf(stderr, "refgate token mint: publishing the signing key: %s\n", err.msg);
        goto done;
    }
    if (tokens_mint(&token, key, run, (const char *const *)repos, nrepos, (int64_t)ttl,
                    (int64_t)time(NULL), &err) < 0) {
        fprintf(stderr, "refgate token mint: %s\n", err.msg);
        status = err.code == -EINVAL ? EXIT_USAGE : 1;
        goto done;
    }
    if (printf("%s\n", token) < 0 || fflush(stdout) != 0) {
        fprintf(stderr, "refgate token mint: cannot write the token to stdout\n");
        goto done;
    }
    status = 0;
done:
    tokens_secret_free(token);
    for (i = 0; i < nrepos; i++)
        free(repos[i]);
    tokens_store_free(store);
    db_pool_close(pool);
    tokens_key_free(key);
    config_free(cfg);
    return status;
}

/* Read a token from stdin into buf (cap bytes); trailing whitespace is dropped. */
static int read_stdin_token(char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t n;

    for (;;) {
        n = read(STDIN_FILENO, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "refgate token revoke: reading stdin: %s\n", strerror(errno));
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap - 1) {
            fprintf(stderr, "refgate token revoke: stdin holds more than a token (%d bytes)\n",
                    TOKENS_MAX_LEN);
            return -1;
        }
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
                       buf[len - 1] == '\t'))
        len--;
    buf[len] = '\0';
    if (len == 0) {
        fprintf(stderr, "refgate token revoke: no token on stdin\n");
        return -1;
    }
    return 0;
}

/*
 * Revoke through the running gateway's control socket, so that it is
 * audited there. -ENOENT / -ECONNREFUSED: no gateway answers.
 */
static int revoke_through_gateway(const config_model *cfg, const char *token, rg_error *err)
{
    json_t *req, *ans = NULL;
    const char *msg;
    int rc;

    req = json_pack("{s:s, s:s}", "op", "revoke", "token", token);
    if (req == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    rc = cli_control_call(&ans, cfg->control.socket, req, err);
    /* jansson frees its copy of the token without wiping it. */
    explicit_bzero((char *)json_string_value(json_object_get(req, "token")), strlen(token));
    json_decref(req);
    if (rc < 0)
        return rc;
    if (!json_is_true(json_object_get(ans, "ok"))) {
        msg = json_string_value(json_object_get(ans, "error"));
        rc = rg_error_set(err, RG_E_AUTH, "the gateway refused: %s", msg ? msg : "no reason");
    }
    json_decref(ans);
    return rc;
}

static int token_revoke(int argc, char **argv)
{
    const char *config_path = NULL, *token_arg = NULL;
    char buf[TOKENS_MAX_LEN + 2], prefix[TOKENS_HASH_PREFIX_SIZE];
    token_opts o = {0};
    cli_args args;
    config_model *cfg = NULL;
    tokens_store *store = NULL;
    db_pool *pool = NULL;
    rg_error err = RG_ERROR_INIT;
    int status = 1, rc;
    const char *token;

    rc = cli_opts_parse(&cli_cmd_token_revoke, &o, &args, argc, argv);
    if (rc != 0)
        return cli_opts_exit(rc);
    if (args.n > 1) {
        /* Do not echo it: the extra argument may well be a token. */
        fprintf(stderr, "refgate token revoke: one token at a time\n");
        return EXIT_USAGE;
    }
    config_path = o.config;
    token_arg = args.n ? args.v[0] : NULL;
    if (config_path == NULL || token_arg == NULL)
        return cli_usage_error(&cli_cmd_token_revoke, "--config and a TOKEN (or -) are required");
    token = token_arg;
    if (!strcmp(token_arg, "-")) {
        if (read_stdin_token(buf, sizeof(buf)) < 0)
            goto done;
        token = buf;
    }
    tokens_hash_prefix(prefix, token);
    if (config_load(&cfg, config_path, &err) < 0) {
        fprintf(stderr, "refgate token: %s\n", err.msg);
        goto done;
    }
    rc = cfg->control.socket != NULL ? revoke_through_gateway(cfg, token, &err) : -ENOENT;
    if (rc == -ENOENT || rc == -ECONNREFUSED) {
        /* No gateway answers: record it in the store, where every gateway looks. */
        rc = store_open(&store, &pool, cfg, &err);
        if (rc == 0)
            rc = tokens_revoke(store, token, &err);
    }
    if (rc < 0) {
        fprintf(stderr, "refgate token revoke: token %s: %s\n", prefix, err.msg);
        goto done;
    }
    printf("revoked %s\n", prefix);
    status = fflush(stdout) == 0 ? 0 : 1;
done:
    explicit_bzero(buf, sizeof(buf));
    tokens_store_free(store);
    db_pool_close(pool);
    config_free(cfg);
    return status;
}

/* `key rotate`: only the running gateway can, since it holds the key in memory. */
static int token_key(int argc, char **argv)
{
    const char *config_path = getenv("REFGATE_CONFIG");
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *req = NULL, *ans = NULL;
    token_opts o = {0};
    cli_args args;
    int status = 1, rc;

    if (config_path == NULL || *config_path == '\0')
        config_path = "/etc/refgate/refgate.json";
    if (argc >= 2 && cli_is_help(argv[1])) {
        cli_help_print(stdout, "token key");
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "rotate") != 0)
        return cli_usage_error(&cli_cmd_token_key_rotate, "expected 'rotate'");
    rc = cli_opts_parse(&cli_cmd_token_key_rotate, &o, &args, argc - 1, argv + 1);
    if (rc != 0)
        return cli_opts_exit(rc);
    if (args.n > 0)
        return cli_usage_error(&cli_cmd_token_key_rotate, "unexpected argument '%s'",
                               cli_safe_arg(args.v[0]));
    if (o.config != NULL)
        config_path = o.config;
    if (config_load(&cfg, config_path, &err) < 0) {
        fprintf(stderr, "refgate token: %s\n", err.msg);
        goto done;
    }
    if (cfg->control.socket == NULL) {
        fprintf(stderr, "refgate token key rotate: %s has no control socket (set control.socket)\n",
                cfg->path);
        goto done;
    }
    req = json_pack("{s:s}", "op", "key-rotate");
    if (req == NULL || cli_control_call(&ans, cfg->control.socket, req, &err) < 0) {
        fprintf(stderr, "refgate token key rotate: %s%s\n", req ? err.msg : "out of memory",
                err.code == -ENOENT || err.code == -ECONNREFUSED
                    ? " (is the gateway running? `refgate serve` rotates its own key)"
                    : "");
        goto done;
    }
    if (!json_is_true(json_object_get(ans, "ok"))) {
        fprintf(stderr, "refgate token key rotate: %s\n",
                json_string_value(json_object_get(ans, "error"))
                    ? json_string_value(json_object_get(ans, "error"))
                    : "the gateway refused");
        goto done;
    }
    printf("key %s signs new tokens; key %s is retired (its tokens verify until they expire)\n",
           json_string_value(json_object_get(ans, "kid")),
           json_string_value(json_object_get(ans, "retired")));
    status = fflush(stdout) == 0 ? 0 : 1;
done:
    json_decref(req);
    json_decref(ans);
    config_free(cfg);
    return status;
}

int cli_token(int argc, char **argv)
{
    if (argc >= 2 && cli_is_help(argv[1])) {
        cli_help_print(stdout, "token");
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "mint"))
        return token_mint(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "revoke"))
        return token_revoke(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "key"))
        return token_key(argc - 1, argv + 1);
    if (argc < 2)
        fprintf(stderr, "refgate token: expected mint, revoke or key rotate (see refgate token "
                        "--help)\n");
    else
        fprintf(stderr, "refgate token: unknown subcommand '%s' (see refgate token --help)\n",
                cli_safe_arg(argv[1]));
    return EXIT_USAGE;
}
