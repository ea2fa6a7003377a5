/*
 * `refgate db migrate [--config FILE]`: create or bring up to date the
 * schema of the PostgreSQL database the config's "state" names (db/db.h).
 * Safe to run again, and from several hosts at once (the migration holds
 * an advisory lock). Gateways refuse to start on a schema they do not
 * speak, so this runs before the first `refgate serve` and after upgrades.
 *
 * `refgate db import [--config FILE]`: move what the config's state_dir
 * keeps in files into the database, one step per store (run tokens: keys
 * and revocations). Safe to repeat.
 *
 * Exit status: 0 done, 1 failed, 2 usage.
 */
#include "cli/cli.h"
#include "config/config.h"
#include "db/db.h"
#include "tokens/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2
#define PROG        "refgate db"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: refgate db migrate [--config FILE]\n"
            "       refgate db import [--config FILE]\n"
            "\n"
            "  migrate        create the schema of the database config \"state.postgres\"\n"
            "                 names, or bring it up to this refgate's version (%d);\n"
            "                 safe to repeat and to run from several hosts at once\n"
            "  import         copy what state_dir keeps in files into that database:\n"
            "                 run-token keys and revocations; safe to repeat\n"
            "\n"
            "  --config FILE  the gateway's configuration (default $REFGATE_CONFIG, else\n"
            "                 /etc/refgate/refgate.json)\n",
            DB_SCHEMA_VERSION);
}

/* The config, or NULL after saying why (and that it needs "state"). */
static config_model *load(const char *path)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg;

    if (config_load(&cfg, path, &err) < 0) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return NULL;
    }
    if (cfg->state.postgres == NULL) {
        fprintf(stderr,
                PROG ": %s keeps its state in files under %s; set \"state\": {\"postgres\": "
                     "\"CONNINFO\"} to use a database\n",
                cfg->path, cfg->state_dir);
        config_free(cfg);
        return NULL;
    }
    return cfg;
}

static int migrate(const char *path)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = load(path);
    db_pool *pool = NULL;
    int from = 0, to = 0, status = EXIT_FAILED;

    if (cfg == NULL)
        return EXIT_FAILED;
    if (db_pool_open(&pool, &cfg->state, &err) < 0 || db_migrate(pool, &from, &to, &err) < 0) {
        fprintf(stderr, PROG " migrate: %s\n", err.msg);
        goto done;
    }
    if (from == to)
        printf("schema is at version %d: nothing to do\n", to);
    else
        printf("schema migrated from version %d to %d\n", from, to);
    status = 0;
done:
    db_pool_close(pool);
    config_free(cfg);
    return status;
}

/* ------------------------------------------------------------------------
 * import: one step per store, each copying this state_dir's files into
 * the database and saying how much it copied.
 * ------------------------------------------------------------------------ */

/* Run tokens: the published public keys (retirements too) and the revocations. */
static int import_tokens(db_pool *pool, const config_model *cfg)
{
    rg_error err = RG_ERROR_INIT;
    tokens_store *store = NULL;
    size_t nkeys = 0, nrevoked = 0;
    int rc;

    rc = tokens_store_pg_open(&store, pool, &err);
    if (rc == 0)
        rc = tokens_store_import_files(store, cfg->state_dir, &nkeys, &nrevoked, &err);
    tokens_store_free(store);
    if (rc < 0) {
        fprintf(stderr, PROG " import: run tokens: %s\n", err.msg);
        return rc;
    }
    printf("run tokens: %zu key events and %zu revocations imported from %s\n", nkeys, nrevoked,
           cfg->state_dir);
    return 0;
}

static int import(const char *path)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = load(path);
    db_pool *pool = NULL;
    PGconn *c = NULL;
    int status = EXIT_FAILED;

    if (cfg == NULL)
        return EXIT_FAILED;
    if (db_pool_open(&pool, &cfg->state, &err) < 0 || db_acquire(pool, &c, &err) < 0 ||
        db_schema_check(c, &err) < 0) {
        fprintf(stderr, PROG " import: %s\n", err.msg);
        goto done;
    }
    db_release(pool, c);
    c = NULL;
    if (import_tokens(pool, cfg) < 0)
        goto done;
    status = 0;
done:
    if (c != NULL)
        db_release(pool, c);
    db_pool_close(pool);
    config_free(cfg);
    return status;
}

int cli_db(int argc, char **argv)
{
    const char *config = getenv("REFGATE_CONFIG"), *value;
    int m;

    if (config == NULL || *config == '\0')
        config = "/etc/refgate/refgate.json";
    if (argc >= 2 && cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || (strcmp(argv[1], "migrate") != 0 && strcmp(argv[1], "import") != 0)) {
        usage(stderr);
        return EXIT_USAGE;
    }
    for (int i = 2; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        if ((m = cli_opt_value(&value, argc, argv, &i, "--config", PROG)) != 0) {
            if (m < 0)
                return EXIT_USAGE;
            config = value;
        } else {
            fprintf(stderr, PROG ": unexpected argument '%s'\n\n", argv[i]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    return !strcmp(argv[1], "import") ? import(config) : migrate(config);
}
