/*
 * A real PostgreSQL for Criterion tests (tests/support/pg.h).
 */
#include "support/pg.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int owned; /* started here, so stopped here */

int test_pg_sh(const char *cmd)
{
    char line[2048];
    int rc;

    snprintf(line, sizeof(line), "bash -c '. \"$REFGATE_SRC/tests/support/pg.sh\"; %s'", cmd);
    rc = system(line);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void test_pg_start(void)
{
    static const char *const names[3] = {"PG_URL", "PG_DIR", "PG_BIN"};
    char line[3][1024];
    FILE *p;
    int n = 0;

    if (getenv("PG_URL") != NULL)
        return;
    if (getenv("REFGATE_SRC") == NULL) {
        setenv("RG_PG_SKIP", "REFGATE_SRC is not set, so PostgreSQL cannot be started", 1);
        return;
    }
    p = popen("bash -c '. \"$REFGATE_SRC/tests/support/pg.sh\"; pg_start >&2 || exit 0; "
              "printf \"%s\\n%s\\n%s\\n\" \"$PG_URL\" \"$PG_DIR\" \"$PG_BIN\"'",
              "r");
    while (p != NULL && n < 3 && fgets(line[n], sizeof(line[n]), p) != NULL) {
        line[n][strcspn(line[n], "\n")] = '\0';
        n++;
    }
    if (p != NULL)
        pclose(p);
    if (n < 3) {
        setenv("RG_PG_SKIP", "PostgreSQL could not be started here (pg_start said why above)", 1);
        return;
    }
    for (int i = 0; i < 3; i++)
        setenv(names[i], line[i], 1);
    owned = 1;
}

void test_pg_stop(void)
{
    if (owned && test_pg_sh("pg_stop") != 0)
        fprintf(stderr, "could not stop the PostgreSQL in %s\n", getenv("PG_DIR"));
    owned = 0;
}

void test_pg_exec(const char *url, const char *stmt)
{
    PGconn *c = PQconnectdb(url ? url : getenv("PG_URL"));
    PGresult *r;

    cr_assert_eq(PQstatus(c), CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    r = PQexec(c, stmt);
    cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
              "%s: %s", stmt, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

void test_pg_new_database(char name[64], char url[2048], const char *prefix)
{
    const char *base = getenv("PG_URL"), *skip = getenv("RG_PG_SKIP"), *at;
    char stmt[128];
    static int n;

    if (base == NULL)
        cr_skip_test("no PostgreSQL: %s", skip ? skip : "PG_URL is not set");
    /* pg.sh's URL names the database "refgate": the test's own goes there instead. */
    at = strstr(base, "/refgate?");
    cr_assert_not_null(at, "PG_URL %s does not name the database refgate", base);
    snprintf(name, 64, "%s_%ld_%d", prefix, (long)getpid(), n++);
    snprintf(url, 2048, "%.*s/%s%s", (int)(at - base), base, name, at + strlen("/refgate"));
    snprintf(stmt, sizeof(stmt), "CREATE DATABASE %s", name);
    test_pg_exec(NULL, stmt);
}
