/*
 * The lease thread (gateway/lease.h). A sweep runs only once this gateway
 * has reached the database for DB_LEASE_DEAD_SECONDS without a break: after
 * an outage every live gateway's lease looks stale, and each needs that
 * long to renew its own before anyone may take it for dead. (The sweep at
 * start cannot wait for that: a gateway started right after an outage may
 * complete a live peer's records; its later outcome then follows.)
 */
#include "gateway/lease.h"
#include "db/lease.h"
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gateway_lease {
    db_pool *db;
    audit_log *audit;
    gateway_outbox *outbox; /* NULL: nothing to retry */
    char id[DB_GATEWAY_ID_HEX + 1];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int failing;          /* the last renewal failed (logged once per outage) */
    time_t healthy_since; /* monotonic seconds of the first renewal after a failure; 0: failing */
    time_t last_sweep;
};

static time_t mono_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void sweep(gateway_lease *l, size_t *completed)
{
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    size_t n = 0;

    if (audit_complete_pending(l->audit, &n, &e) < 0)
        rg_log(RG_LOG_ERR, "audit_recover_failed", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
    else if (n > 0)
        rg_log(RG_LOG_WARNING, "audit_recovered", "completed=%zu by=%s", n, l->id);
    if (completed != NULL)
        *completed = n;
}

static void renew(gateway_lease *l)
{
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    time_t now = mono_now();

    if (db_lease_renew(l->db, l->id, &e) < 0) {
        if (!l->failing)
            rg_log(RG_LOG_ERR, "db_lease_failed", "gateway=%s error=%s", l->id,
                   rg_log_quote(q, sizeof(q), e.msg));
        l->failing = 1;
        l->healthy_since = 0;
        return;
    }
    if (l->failing)
        rg_log(RG_LOG_NOTICE, "db_lease_renewed", "gateway=%s", l->id);
    l->failing = 0;
    if (l->healthy_since == 0)
        l->healthy_since = now;
    /* The database answers: the outcomes it could not take go in now,
     * before anyone may take this gateway for dead (its lease was just
     * renewed) and complete their decisions as unknown. The outbox logs. */
    if (gateway_outbox_count(l->outbox) > 0)
        gateway_outbox_flush(l->outbox, NULL, NULL, &e);
    if (now - l->healthy_since >= DB_LEASE_DEAD_SECONDS &&
        now - l->last_sweep >= GATEWAY_LEASE_SWEEP_SECONDS) {
        l->last_sweep = now;
        sweep(l, NULL);
    }
}

static void *lease_main(void *arg)
{
    gateway_lease *l = arg;
    struct timespec until;

    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += DB_LEASE_RENEW_SECONDS;
        /* Bounded: wakes at the deadline or when stop asks it to end. */
        while (!l->stop && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
            ;
        if (l->stop)
            break;
        pthread_mutex_unlock(&l->mu);
        renew(l);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int gateway_lease_start(gateway_lease **out, db_pool *db, const char *gateway_id, audit_log *audit,
                        gateway_outbox *outbox, size_t *recovered, rg_error *err)
{
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    pthread_condattr_t attr;
    gateway_lease *l;
    int rc;

    *out = NULL;
    *recovered = 0;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    l->db = db;
    l->audit = audit;
    l->outbox = outbox;
    snprintf(l->id, sizeof(l->id), "%s", gateway_id);
    if (db_lease_register(db, l->id, &e) < 0) {
        rg_log(RG_LOG_ERR, "db_lease_failed", "gateway=%s error=%s", l->id,
               rg_log_quote(q, sizeof(q), e.msg));
        l->failing = 1;
    } else {
        l->healthy_since = mono_now();
        sweep(l, recovered);
        l->last_sweep = l->healthy_since;
    }
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&l->mu, NULL);
    rc = pthread_create(&l->thread, NULL, lease_main, l);
    if (rc != 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l);
        return rg_error_set(err, -rc, "cannot start the lease thread: %s", strerror(rc));
    }
    *out = l;
    return 0;
}

void gateway_lease_stop(gateway_lease *l)
{
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];

    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    if (db_lease_stop(l->db, l->id, &e) < 0)
        rg_log(RG_LOG_ERR, "db_lease_failed", "gateway=%s error=%s", l->id,
               rg_log_quote(q, sizeof(q), e.msg));
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
