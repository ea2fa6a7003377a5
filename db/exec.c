/*
 * Statements and transactions (db/pool.h): PQexecParams with text or binary
 * parameters, the result checked, and a failure turned into one line that
 * says what was being done and what the server (or libpq, when the
 * connection broke) answered.
 */
#include "db/pool.h"

#include <stdio.h>
#include <string.h>

static int failed(PGconn *c, PGresult *r, const char *what, rg_error *err)
{
    const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char msg[300];

    snprintf(msg, sizeof(msg), "%s", m && *m ? m : PQerrorMessage(c));
    msg[strcspn(msg, "\n")] = '\0';
    if (PQstatus(c) != CONNECTION_OK)
        return rg_error_set(err, RG_E_STATE, "%s: the database connection was lost: %s", what,
                            msg[0] ? msg : "no answer");
    return rg_error_set(err, RG_E_STATE, "%s: %s", what, msg[0] ? msg : "the database failed");
}

static int exec_params(PGconn *c, PGresult **out, const char *what, const char *sql, int nparams,
                       const char *const *params, const int *lengths, const int *formats,
                       int result_format, rg_error *err)
{
    PGresult *r;
    int rc = 0;

    if (out != NULL)
        *out = NULL;
    r = PQexecParams(c, sql, nparams, NULL, params, lengths, formats, result_format);
    if (r == NULL ||
        (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)) {
        rc = failed(c, r, what, err);
        if (out != NULL && r != NULL) {
            *out = r; /* for db_sqlstate */
            return rc;
        }
        PQclear(r);
        return rc;
    }
    if (out != NULL)
        *out = r;
    else
        PQclear(r);
    return 0;
}

int db_exec_bin(PGconn *c, PGresult **out, const char *what, const char *sql, int nparams,
                const char *const *params, const int *lengths, const int *formats, rg_error *err)
{
    return exec_params(c, out, what, sql, nparams, params, lengths, formats, 0, err);
}

int db_query_bin(PGconn *c, PGresult **out, const char *what, const char *sql, int nparams,
                 const char *const *params, const int *lengths, const int *formats, rg_error *err)
{
    return exec_params(c, out, what, sql, nparams, params, lengths, formats, 1, err);
}

int db_exec(PGconn *c, PGresult **out, const char *what, const char *sql, int nparams,
            const char *const *params, rg_error *err)
{
    return db_exec_bin(c, out, what, sql, nparams, params, NULL, NULL, err);
}

const char *db_sqlstate(const PGresult *r)
{
    const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

    return s ? s : "";
}

int db_begin(PGconn *c, rg_error *err)
{
    return db_exec(c, NULL, "starting a transaction", "BEGIN", 0, NULL, err);
}

int db_commit(PGconn *c, rg_error *err)
{
    return db_exec(c, NULL, "committing", "COMMIT", 0, NULL, err);
}

void db_rollback(PGconn *c)
{
    if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE)
        PQclear(PQexec(c, "ROLLBACK"));
}
