/*
 * `refgate db migrate [--config FILE]`: create or bring up to date the
 * schema of the PostgreSQL database the config's "state" names (db/db.h).
 * Safe to run again, and from several hosts at once (the migration holds
 * an advisory lock). Gateways refuse to start on a schema they do not
 * speak, so this runs before the first `refgate serve` and after upgrades.
 *
 * `refgate db import [--config FILE]`: move what a gateway on files kept
 * under state_dir into the database, one step per kind of state (each its
 * own transaction, each saying what it moved), stopping at the first that
 * fails. A step refuses rather than merge into state the database already
 * has.
 *
 * Exit status: 0 done, 1 failed, 2 usage.
 */
#include "audit/audit.h"
#include "cli/cli.h"
#include "config/config.h"
#include "db/db.h"

#include <errno.h>
#include <inttypes.h>
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
            "  import         copy the state a gateway on files kept under state_dir\n"
            "                 (the audit log, its chain intact) into that database,\n"
            "                 which must not hold any yet; stop the gateway first\n"
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
 * Import: one step per kind of state
 * ------------------------------------------------------------------------ */

/* <state_dir>/audit.jsonl into the database's (empty) chain. */
static int import_audit(const config_model *cfg, db_pool *pool, rg_error *err)
{
    audit_import_result res;
    char path[4200];
    int rc;

    snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
    if ((rc = audit_pg_import(&res, pool, path, err)) < 0) {
        if (rc != -ENOENT)
            return rc;
        printf("audit: no log at %s, nothing to import\n", path);
        return 0;
    }
    printf("audit: imported %" PRIu64 " records from %s (%" PRIu64
           " forwarded without an outcome, left pending); head %" PRIu64 ":%s\n",
           res.records, path, res.pending, res.records, res.head_hash);
    return 0;
}

/* A step prints what it moved; on failure it has moved nothing. */
typedef struct import_step {
    const char *name;
    int (*run)(const config_model *cfg, db_pool *pool, rg_error *err);
} import_step;

static const import_step import_steps[] = {
    {"audit", import_audit},
};

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
    for (size_t i = 0; i < sizeof(import_steps) / sizeof(import_steps[0]); i++) {
        if (import_steps[i].run(cfg, pool, &err) < 0) {
            fprintf(stderr, PROG " import: %s: %s%s\n", import_steps[i].name, err.msg,
                    i > 0 ? " (the steps above were imported; the rest were not run)" : "");
            goto done;
        }
    }
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
    return strcmp(argv[1], "import") == 0 ? import(config) : migrate(config);
}
