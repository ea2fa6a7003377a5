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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

static void usage(FILE *f)
{
    fprintf(f,
            "usage: refgate token mint --config FILE --repo HOST/PATH [--repo HOST/PATH ...]\n"
            "                          [--ttl DURATION] [--run NAME]\n"
            "       refgate token revoke --config FILE TOKEN|-\n"
            "       refgate token key rotate [--config FILE]\n"
            "\n"
            "mint     print a new run token (and nothing else) on stdout\n"
            "  --config FILE     the gateway's configuration (its state_dir holds the key)\n"
            "  --repo HOST/PATH  a repository the token may push to, e.g. local/acme/widgets;\n"
            "                    HOST must be a configured upstream; a trailing .git is dropped;\n"
            "                    repeat for more (at most %d)\n"
            "  --ttl DURATION    lifetime in seconds, or with a unit: 90s, 30m, 2h, 7d\n"
            "                    (default 3600, at most 7 days)\n"
            "  --run NAME        the run's name in the audit log (default: run-<random>)\n"
            "\n"
            "revoke   revoke a token so that no gateway sharing this token store accepts it\n"
            "         (through the running gateway's control socket, else in the store)\n"
            "  TOKEN             the token, or - to read it from stdin (keeps it out of ps)\n"
            "\n"
            "key rotate   the running gateway makes a new signing key and publishes it;\n"
            "             tokens signed with the old one verify until they expire\n"
            "  --config FILE     default $REFGATE_CONFIG, else /etc/refgate/refgate.json\n",
            TOKENS_REPOS_MAX);
}

/*
 * An argument as it may be echoed in an error: a mistyped command line
 * often holds a token in the wrong place, and a token is never printed.
 */
static const char *safe_arg(const char *arg)
{
    /* Tokens start with rg2. (rg1. before Ed25519) and, being base64url, hold no '/'. */
    if (!strncmp(arg, "rg2.", 4) || !strncmp(arg, "rg1.", 4) ||
        (strlen(arg) > 64 && strchr(arg, '/') == NULL))
        return "(not shown: it may be a token)";
    return arg;
}

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
                safe_arg(arg));
        return -1;
    }
    slash = memchr(arg, '/', len);
    if (slash == NULL || slash + 1 == arg + len) {
        fprintf(stderr,
                "refgate token mint: --repo %s: expected HOST/PATH, e.g. local/acme/widgets\n",
                safe_arg(arg));
        return -1;
    }
    for (i = 0; i + 1 < len; i++) {
        if (arg[i] == '.' && arg[i + 1] == '.' && (i == 0 || arg[i - 1] == '/') &&
            (i + 2 == len || arg[i + 2] == '/')) {
            fprintf(stderr, "refgate token mint: --repo %s: '..' is not allowed in a path\n",
                    safe_arg(arg));
            return -1;
        }
    }
    if ((size_t)(slash - arg) >= sizeof(host)) {
        fprintf(stderr, "refgate token mint: --repo %s: host name is too long\n", safe_arg(arg));
        return -1;
    }
    memcpy(host, arg, (size_t)(slash - arg));
    host[slash - arg] = '\0';
    if (config_find_upstream(cfg, host) == NULL) {
        fprintf(stderr, "refgate token mint: --repo %s: '%s' is not an upstream host in %s (",
                safe_arg(arg), host, cfg->path);
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
    const char *config_path = NULL, *ttl_arg = NULL, *run = NULL, *value = NULL;
    char *repos[TOKENS_REPOS_MAX], *token = NULL, gen_run[32];
    config_model *cfg = NULL;
    tokens_key *key = NULL;
    tokens_store *store = NULL;
    db_pool *pool = NULL;
    rg_error err = RG_ERROR_INIT;
    const char *repo_args[TOKENS_REPOS_MAX];
    size_t nrepo_args = 0, nrepos = 0, i, j;
    long long ttl = 3600;
    int status = 1, m, argi;
    unsigned char rnd[4];

    for (argi = 1; argi < argc; argi++) {
        if (cli_is_help(argv[argi])) {
            usage(stdout);
            return 0;
        }
        if ((m = cli_opt_value(&value, argc, argv, &argi, "--config", "refgate token")) != 0) {
            config_path = value;
        } else if ((m = cli_opt_value(&value, argc, argv, &argi, "--repo", "refgate token")) != 0) {
            if (m > 0 && nrepo_args == TOKENS_REPOS_MAX) {
                fprintf(stderr, "refgate token: at most %d --repo options\n", TOKENS_REPOS_MAX);
                return EXIT_USAGE;
            }
            if (m > 0)
                repo_args[nrepo_args++] = value;
        } else if ((m = cli_opt_value(&value, argc, argv, &argi, "--ttl", "refgate token")) != 0) {
            ttl_arg = value;
        } else if ((m = cli_opt_value(&value, argc, argv, &argi, "--run", "refgate token")) != 0) {
            run = value;
        } else {
            fprintf(stderr, "refgate token mint: unexpected argument '%s'\n\n",
                    safe_arg(argv[argi]));
            usage(stderr);
            return EXIT_USAGE;
        }
        if (m < 0)
            return EXIT_USAGE;
    }
    if (config_path == NULL || nrepo_args == 0) {
        fprintf(stderr, "refgate token mint: --config and at least one --repo are required\n\n");
        usage(stderr);
        return EXIT_USAGE;
    }
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
    const char *config_path = NULL, *token_arg = NULL, *value = NULL;
    char buf[TOKENS_MAX_LEN + 2], prefix[TOKENS_HASH_PREFIX_SIZE];
    config_model *cfg = NULL;
    tokens_store *store = NULL;
    db_pool *pool = NULL;
    rg_error err = RG_ERROR_INIT;
    int status = 1, m, argi, rc;
    const char *token;

    for (argi = 1; argi < argc; argi++) {
        if (cli_is_help(argv[argi])) {
            usage(stdout);
            return 0;
        }
        if ((m = cli_opt_value(&value, argc, argv, &argi, "--config", "refgate token")) != 0) {
            if (m < 0)
                return EXIT_USAGE;
            config_path = value;
        } else if (argv[argi][0] == '-' && strcmp(argv[argi], "-") != 0) {
            fprintf(stderr, "refgate token revoke: unknown option '%s'\n\n", safe_arg(argv[argi]));
            usage(stderr);
            return EXIT_USAGE;
        } else if (token_arg != NULL) {
            /* Do not echo it: the extra argument may well be a token. */
            fprintf(stderr, "refgate token revoke: one token at a time\n");
            return EXIT_USAGE;
        } else {
            token_arg = argv[argi];
        }
    }
    if (config_path == NULL || token_arg == NULL) {
        fprintf(stderr, "refgate token revoke: --config and a TOKEN (or -) are required\n\n");
        usage(stderr);
        return EXIT_USAGE;
    }
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
    const char *config_path = getenv("REFGATE_CONFIG"), *value = NULL;
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *req = NULL, *ans = NULL;
    int status = 1, m, argi;

    if (config_path == NULL || *config_path == '\0')
        config_path = "/etc/refgate/refgate.json";
    if (argc >= 2 && cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "rotate") != 0) {
        fprintf(stderr, "refgate token key: expected 'rotate'\n\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    for (argi = 2; argi < argc; argi++) {
        if (cli_is_help(argv[argi])) {
            usage(stdout);
            return 0;
        }
        if ((m = cli_opt_value(&value, argc, argv, &argi, "--config", "refgate token")) != 0) {
            if (m < 0)
                return EXIT_USAGE;
            config_path = value;
        } else {
            fprintf(stderr, "refgate token key rotate: unexpected argument '%s'\n\n",
                    safe_arg(argv[argi]));
            usage(stderr);
            return EXIT_USAGE;
        }
    }
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
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "mint"))
        return token_mint(argc - 1, argv + 1);
    if (!strcmp(argv[1], "revoke"))
        return token_revoke(argc - 1, argv + 1);
    if (!strcmp(argv[1], "key"))
        return token_key(argc - 1, argv + 1);
    fprintf(stderr, "refgate token: unknown subcommand '%s'\n\n", safe_arg(argv[1]));
    usage(stderr);
    return EXIT_USAGE;
}
