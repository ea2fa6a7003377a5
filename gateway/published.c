/* Following the published policy; see published.h. */
#include "gateway/published.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/policies.h"
#include "util/log.h"

struct gateway_published {
    db_pool *db;
    gateway_published_fn fn;
    void *arg;
    long long seen; /* the last version handed over or passed over; -1: none yet */
    atomic_int recheck;
    int failing; /* the last poll failed: said once, and said again when it recovers */
    pthread_t thread;
    int running;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

int gateway_published_new(gateway_published **out, db_pool *db, gateway_published_fn fn, void *arg,
                          rg_error *err)
{
    gateway_published *f;
    pthread_condattr_t attr;
    int rc;

    *out = NULL;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    f->db = db;
    f->fn = fn;
    f->arg = arg;
    f->seen = -1;
    atomic_init(&f->recheck, 0);
    if (pthread_condattr_init(&attr) != 0) {
        free(f);
        return rg_error_set(err, -ENOMEM, "cannot create a condition variable");
    }
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&f->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0) {
        free(f);
        return rg_error_set(err, -ENOMEM, "cannot create a condition variable");
    }
    pthread_mutex_init(&f->mu, NULL);
    *out = f;
    return 0;
}

/* A version whose body is not the policy its digest names (db_policy_load). */
static int bad_version(int rc)
{
    return rc == RG_E_TAMPER || rc == RG_E_CONFIG;
}

int gateway_published_poll(gateway_published *f, rg_error *err)
{
    db_policy_info info;
    json_t *policy = NULL;
    PGconn *c;
    int rc;

    if ((rc = db_acquire(f->db, &c, err)) < 0)
        return rc;
    rc = db_policy_current(c, &info, err);
    if (rc == 0 && atomic_exchange(&f->recheck, 0))
        f->seen = -1;
    if (rc < 0 || info.version == f->seen) {
        db_release(f->db, c);
        return rc;
    }
    if (info.version > 0)
        rc = db_policy_load(c, &info, &policy, err);
    db_release(f->db, c);
    /* Passed over or handed over, a version is looked at once; one the
     * database failed to give is asked for again. */
    if (rc == 0 || bad_version(rc))
        f->seen = info.version;
    if (rc < 0)
        return rc;
    f->fn(f->arg, info.version, info.digest, policy);
    json_decref(policy);
    return 1;
}

static void poll_logged(gateway_published *f)
{
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    int rc = gateway_published_poll(f, &e);

    if (rc >= 0 || bad_version(rc)) {
        if (f->failing)
            rg_log(RG_LOG_NOTICE, "policy_poll_recovered", "database=reachable");
        f->failing = 0;
    }
    /* A bad version is said once (it is passed over); an unreachable
     * database when it starts to fail. */
    if (rc >= 0 || (!bad_version(rc) && f->failing))
        return;
    f->failing = !bad_version(rc);
    rg_log(RG_LOG_ERR, "policy_poll_failed", "kept=current error=%s",
           rg_log_quote(q, sizeof(q), e.msg));
}

static void *follow_main(void *arg)
{
    gateway_published *f = arg;
    struct timespec until;

    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)GATEWAY_PUBLISHED_POLL_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        /* Bounded: wakes at the deadline or when free asks it to end. */
        while (!f->stop && pthread_cond_timedwait(&f->cv, &f->mu, &until) != ETIMEDOUT)
            ;
        if (f->stop)
            break;
        pthread_mutex_unlock(&f->mu);
        poll_logged(f);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

int gateway_published_run(gateway_published *f, rg_error *err)
{
    int rc = pthread_create(&f->thread, NULL, follow_main, f);

    if (rc != 0)
        return rg_error_set(err, -rc, "cannot start the policy thread: %s", strerror(rc));
    f->running = 1;
    return 0;
}

void gateway_published_recheck(gateway_published *f)
{
    if (f != NULL)
        atomic_store(&f->recheck, 1);
}

void gateway_published_free(gateway_published *f)
{
    if (f == NULL)
        return;
    if (f->running) {
        pthread_mutex_lock(&f->mu);
        f->stop = 1;
        pthread_cond_signal(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
    }
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}
