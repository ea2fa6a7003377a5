/*
 * `refgate db migrate [--config FILE]`: create or bring up to date the
 * schema of the PostgreSQL database the config's "state" names (db/pool.h).
 * Safe to run again, and from several hosts at once (the migration holds
 * an advisory lock). Gateways refuse to start on a schema they do not
 * speak, so this runs before the first `refgate serve` and after upgrades.
 *
 * `refgate db import [--config FILE]`: move what a gateway on files kept
 * under state_dir into the database, one step per kind of state (each its
 * own transaction, each saying what it moved), stopping at the first that
 * fails. A step refuses rather than merge into state the database already
 * has (the run tokens' keys and revocations are safe to import again).
 *
 * Exit status: 0 done, 1 failed, 2 usage.
 */
#include "approvals/approvals.h"
#include "audit/audit.h"
#include "cli/cli.h"
#include "config/config.h"
#include "db/pool.h"
#include "tokens/store.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2
#define PROG        "refgate db"

/* refgate db migrate's and import's options (refgate(1) says what they do). */
typedef struct db_opts {
    const char *config, *only;
} db_opts;

static const cli_opt migrate_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(db_opts, config), "FILE"},
};
static const cli_opt import_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(db_opts, config), "FILE"},
    {"--only", CLI_OPT_VALUE, offsetof(db_opts, only), "STEPS"},
};
const cli_cmd cli_cmd_db_migrate = {"db migrate", CLI_OPTS(migrate_opts), 0, NULL};
const cli_cmd cli_cmd_db_import = {"db import", CLI_OPTS(import_opts), 0, NULL};

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

/* Copy a pending approval's kept pack along; one that cannot be is only said. */
static void import_pack(approvals_store *from, approvals_store *to, const approvals_entry *e,
                        int64_t now)
{
    rg_error err = RG_ERROR_INIT;
    int fd = -1;

    if (e->pack_bytes == 0 || e->state != APPROVALS_PENDING)
        return;
    if (approvals_open_pack(&fd, from, e->id, now, &err) < 0 ||
        approvals_keep_pack(to, e->id, fd, e->pack_bytes, now, &err) < 0)
        fprintf(stderr, PROG " import: approval %s: its kept pack stays behind: %s\n", e->id,
                err.msg);
    if (fd >= 0)
        close(fd);
}

/*
 * Every live approval of <state_dir>/approvals into the database, as it
 * is (id, state, times); one the database has already (its id, or a live
 * approval of the same update) is refused and named, and the rest go in.
 * 0; -EEXIST when some were refused; another negative code when the step
 * failed.
 */
static int import_approvals(const config_model *cfg, db_pool *pool, rg_error *err)
{
    approvals_store *from = NULL, *to = NULL;
    approvals_entry *list = NULL;
    char dir[PATH_MAX];
    int64_t now = (int64_t)time(NULL);
    size_t n = 0, imported = 0, refused = 0;
    struct stat st;
    int rc;

    if ((size_t)snprintf(dir, sizeof(dir), "%s/approvals", cfg->state_dir) >= sizeof(dir))
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", cfg->state_dir);
    if (stat(dir, &st) < 0 && errno == ENOENT) {
        printf("approvals: none (no %s)\n", dir);
        return 0;
    }
    /* The file store's lock: a gateway still serving on it refuses this. */
    if ((rc = approvals_file_open(&from, dir, cfg->approvals.expire, err)) < 0 ||
        (rc = approvals_list(from, &list, &n, now, err)) < 0 ||
        (rc = approvals_pg_open(&to, pool, cfg->approvals.expire, err)) < 0) {
        if (rc == -EBUSY)
            rg_error_wrap(err, "stop the gateway first");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if ((rc = approvals_pg_import(to, &list[i], err)) == 0) {
            import_pack(from, to, &list[i], now);
            imported++;
        } else if (rc == -EEXIST) {
            fprintf(stderr, PROG " import: refused: %s\n", err->msg);
            refused++;
        } else {
            goto done;
        }
    }
    printf("approvals: %zu imported, %zu refused (already in the database)\n", imported, refused);
    rc = refused ? rg_error_set(err, -EEXIST, "%zu refused (already in the database)", refused) : 0;
done:
    free(list);
    approvals_close(to);
    approvals_close(from);
    return rc;
}

/* Run tokens: the published public keys (retirements too) and the revocations. */
static int import_tokens(const config_model *cfg, db_pool *pool, rg_error *err)
{
    tokens_store *store = NULL;
    size_t nkeys = 0, nrevoked = 0;
    int rc;

    rc = tokens_store_pg_open(&store, pool, err);
    if (rc == 0)
        rc = tokens_store_import_files(store, cfg->state_dir, &nkeys, &nrevoked, err);
    tokens_store_free(store);
    if (rc < 0)
        return rc;
    printf("run tokens: %zu key events and %zu revocations imported from %s\n", nkeys, nrevoked,
           cfg->state_dir);
    return 0;
}

/* A step prints what it moved; on failure it says what it could not move. */
typedef struct import_step {
    const char *name;
    int (*run)(const config_model *cfg, db_pool *pool, rg_error *err);
} import_step;

static const import_step import_steps[] = {
    {"audit", import_audit},
    {"approvals", import_approvals},
    {"tokens", import_tokens},
};

/* Whether step `name` is in the comma-separated `only` (NULL: every step). */
static int step_wanted(const char *only, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = only; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return only == NULL;
}

/* Whether every name in `only` is a step; says which is not. */
static int steps_known(const char *only)
{
    for (const char *p = only; p != NULL; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t len = strcspn(p, ","), i;

        for (i = 0; i < sizeof(import_steps) / sizeof(import_steps[0]); i++)
            if (strlen(import_steps[i].name) == len && !strncmp(p, import_steps[i].name, len))
                break;
        if (i == sizeof(import_steps) / sizeof(import_steps[0])) {
            fprintf(stderr, PROG " import: --only: no step '%.*s'\n\n", (int)len, p);
            return 0;
        }
    }
    return 1;
}

static int import(const char *path, const char *only)
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
        if (!step_wanted(only, import_steps[i].name))
            continue;
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
    const char *config = getenv("REFGATE_CONFIG");
    const cli_cmd *cmd;
    db_opts o = {0};
    cli_args args;
    int rc;

    if (config == NULL || *config == '\0')
        config = "/etc/refgate/refgate.json";
    if (argc >= 2 && cli_is_help(argv[1])) {
        cli_help_print(stdout, "db");
        return 0;
    }
    if (argc < 2 || (strcmp(argv[1], "migrate") != 0 && strcmp(argv[1], "import") != 0)) {
        fprintf(stderr, PROG ": expected migrate or import (see refgate db --help)\n");
        return EXIT_USAGE;
    }
    cmd = strcmp(argv[1], "import") == 0 ? &cli_cmd_db_import : &cli_cmd_db_migrate;
    rc = cli_opts_parse(cmd, &o, &args, argc - 1, argv + 1);
    if (rc != 0)
        return cli_opts_exit(rc);
    if (args.n > 0)
        return cli_usage_error(cmd, "unexpected argument '%s'", args.v[0]);
    if (o.only != NULL && !steps_known(o.only))
        return EXIT_USAGE;
    if (o.config != NULL)
        config = o.config;
    return cmd == &cli_cmd_db_import ? import(config, o.only) : migrate(config);
}
