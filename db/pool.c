/*
 * The connection pool (db/pool.h). Slots hold a connection or NULL; a slot
 * is connected when it is taken, so a database that was down costs the
 * first caller after its return one connect, and nobody a thread of its
 * own. The password file is read at every connect (rotation needs no
 * restart) and wiped right after.
 */
#include "db/pool.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "util/buf.h"
#include "util/fs.h"
#include "util/text.h"

typedef struct slot {
    PGconn *conn; /* NULL: not connected */
    int busy;
} slot;

struct db_pool {
    char *conninfo;
    char *password_file; /* NULL: libpq's own PGPASSWORD / PGPASSFILE */
    unsigned n;
    slot *slots;
    pthread_mutex_t mu;
    pthread_cond_t freed;
    char down[300]; /* why the last connect failed or a connection was lost; "" when up */
};

int db_pool_open(db_pool **out, const config_state *st, rg_error *err)
{
    db_pool *p;

    *out = NULL;
    if (st->postgres == NULL)
        return rg_error_set(err, -EINVAL, "no PostgreSQL database is configured (state.postgres)");
    if ((p = calloc(1, sizeof(*p))) == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    p->n = st->connections ? st->connections : CONFIG_STATE_CONNECTIONS_DEFAULT;
    p->conninfo = strdup(st->postgres);
    p->password_file = st->password_file ? strdup(st->password_file) : NULL;
    p->slots = calloc(p->n, sizeof(*p->slots));
    if (p->conninfo == NULL || p->slots == NULL ||
        (st->password_file != NULL && p->password_file == NULL)) {
        db_pool_close(p);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->freed, NULL);
    *out = p;
    return 0;
}

void db_pool_close(db_pool *p)
{
    if (p == NULL)
        return;
    if (p->slots != NULL) {
        for (unsigned i = 0; i < p->n; i++)
            if (p->slots[i].conn != NULL)
                PQfinish(p->slots[i].conn);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->freed);
    }
    free(p->slots);
    free(p->conninfo);
    free(p->password_file);
    free(p);
}

/* The password file's first line, in *out (wiped by the caller). */
static int read_password(rg_buf *out, const char *path, rg_error *err)
{
    if (rg_fs_read_file(out, path, err) < 0)
        return rg_error_wrap(err, "state.password_file");
    if (out->data == NULL && rg_buf_append(out, "", 0) < 0)
        return rg_error_set(err, -ENOMEM, "out of memory");
    rg_buf_truncate(out, strcspn(out->data, "\r\n"));
    return 0;
}

/* libpq's message, first line only, without its trailing newline. */
static void conn_message(char *out, size_t outsz, const char *msg)
{
    snprintf(out, outsz, "%s", msg && *msg ? msg : "unknown error");
    out[strcspn(out, "\n")] = '\0';
}

static int connect_slot(db_pool *p, PGconn **out, rg_error *err)
{
    const char *keys[5], *vals[5];
    rg_buf pw;
    char msg[300];
    int k = 0, rc = 0;
    PGconn *c;

    *out = NULL;
    rg_buf_init(&pw, 4096);
    if (p->password_file != NULL && (rc = read_password(&pw, p->password_file, err)) < 0) {
        rg_buf_wipe_free(&pw);
        return rg_error_set(err, RG_E_STATE, "cannot connect to the database: %s", err->msg);
    }
    /* Later keywords win over the ones the expanded string holds. */
    keys[k] = "connect_timeout", vals[k++] = "5";
    keys[k] = "fallback_application_name", vals[k++] = "refgate";
    keys[k] = "dbname", vals[k++] = p->conninfo;
    if (p->password_file != NULL)
        keys[k] = "password", vals[k++] = pw.data;
    keys[k] = NULL, vals[k] = NULL;
    c = PQconnectdbParams(keys, vals, 1);
    rg_buf_wipe_free(&pw);
    if (c == NULL)
        return rg_error_set(err, RG_E_STATE, "cannot connect to the database: out of memory");
    if (PQstatus(c) != CONNECTION_OK) {
        conn_message(msg, sizeof(msg), PQerrorMessage(c));
        PQfinish(c);
        return rg_error_set(err, RG_E_STATE, "cannot connect to the database: %s", msg);
    }
    *out = c;
    return 0;
}

/*
 * Whether an idle connection is no longer usable. A server that went away
 * (a restart, an idle timeout) leaves libpq saying CONNECTION_OK until the
 * connection is used; but its socket then reads the server's goodbye or
 * EOF, so a connection whose socket is readable while idle is asked, and
 * one that broke is replaced before any statement is sent on it.
 */
static int stale(PGconn *c)
{
    struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};

    if (PQstatus(c) != CONNECTION_OK || pfd.fd < 0)
        return 1;
    /* Twice at most: the server's goodbye, then its end of file. */
    for (int i = 0; i < 2 && poll(&pfd, 1, 0) > 0; i++)
        if (!PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)
            return 1;
    return 0;
}

int db_acquire(db_pool *p, PGconn **out, rg_error *err)
{
    struct timespec until;
    slot *s = NULL;
    int rc;

    *out = NULL;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += DB_WAIT_SECONDS;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* Prefer a connected slot, so connections are reused before new ones open. */
        for (unsigned i = 0; i < p->n; i++)
            if (!p->slots[i].busy && (s == NULL || (s->conn == NULL && p->slots[i].conn)))
                s = &p->slots[i];
        if (s != NULL)
            break;
        if (pthread_cond_timedwait(&p->freed, &p->mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&p->mu);
            return rg_error_set(err, RG_E_STATE,
                                "all %u database connections stayed busy for %d s "
                                "(state.connections)",
                                p->n, DB_WAIT_SECONDS);
        }
    }
    s->busy = 1;
    pthread_mutex_unlock(&p->mu);

    if (s->conn != NULL && stale(s->conn)) {
        PQfinish(s->conn);
        s->conn = NULL;
    }
    if (s->conn == NULL && (rc = connect_slot(p, &s->conn, err)) < 0) {
        pthread_mutex_lock(&p->mu);
        snprintf(p->down, sizeof(p->down), "%s", err ? err->msg : "cannot connect");
        s->busy = 0;
        pthread_cond_signal(&p->freed);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    *out = s->conn;
    return 0;
}

int db_health(db_pool *p, rg_error *err)
{
    int rc = 0;

    pthread_mutex_lock(&p->mu);
    if (p->down[0] != '\0')
        rc = rg_error_set(err, RG_E_STATE, "%s", p->down);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void db_release(db_pool *p, PGconn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->n; i++) {
        slot *s = &p->slots[i];

        if (s->conn != c)
            continue;
        if (PQstatus(c) != CONNECTION_OK) {
            snprintf(p->down, sizeof(p->down), "the database connection was lost");
        } else {
            p->down[0] = '\0';
        }
        if (PQstatus(c) != CONNECTION_OK || PQtransactionStatus(c) != PQTRANS_IDLE) {
            PQfinish(c);
            s->conn = NULL;
        }
        s->busy = 0;
        pthread_cond_signal(&p->freed);
        break;
    }
    pthread_mutex_unlock(&p->mu);
}

int db_gateway_id_new(char out[DB_GATEWAY_ID_HEX + 1], rg_error *err)
{
    unsigned char rnd[DB_GATEWAY_ID_HEX / 2];

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return rg_error_set(err, -errno, "cannot draw a gateway id: %s", strerror(errno));
    rg_hex_encode(out, rnd, sizeof(rnd));
    out[DB_GATEWAY_ID_HEX] = '\0';
    return 0;
}
