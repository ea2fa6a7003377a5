/*
 * The audit log's front: argument checks shared by every store, then the
 * store's ops table. Stores differ in where lines are kept (a file today);
 * what a line holds, and which records may be appended, is decided here
 * and in record.c so every store writes the same chain.
 */
#include "audit/store_ops.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int audit_open(audit_log **out, const char *path, rg_error *err)
{
    if (out == NULL || path == NULL)
        return rg_error_set(err, -EINVAL, "audit_open: missing argument");
    return audit_file_open(out, path, err);
}

/* Tell the observer how long an append that reached the store took. */
static void observed(audit_log *log, const struct timespec *t0, int rc)
{
    struct timespec t1;

    if (log->on_append == NULL)
        return;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    log->on_append(log->on_append_arg,
                   (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9,
                   rc == 0);
}

int audit_append_many(audit_log *log, const audit_record *recs, size_t n, uint64_t *first_seq,
                      rg_error *err)
{
    struct timespec t0;
    size_t i;
    int rc;

    if (first_seq != NULL)
        *first_seq = 0;
    if (log == NULL || (recs == NULL && n > 0))
        return rg_error_set(err, -EINVAL, "audit_append: missing argument");
    if (n == 0)
        return 0;
    /* Outcome records may name decisions of the same batch, so the seq
     * each record will get is checked in the store, under its lock; the
     * kind-level checks need no seq and fail the batch before any I/O. */
    for (i = 0; i < n; i++) {
        rc = audit_record_check(&recs[i], UINT64_MAX, err);
        if (rc < 0)
            return err ? rg_error_wrap(err, "record %zu", i + 1) : rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = log->ops->append_many(log, recs, n, first_seq, err);
    observed(log, &t0, rc);
    return rc;
}

void audit_on_append(audit_log *log, audit_append_observer fn, void *arg)
{
    if (log == NULL)
        return;
    log->on_append = fn;
    log->on_append_arg = arg;
}

int audit_append(audit_log *log, const audit_record *rec, rg_error *err)
{
    return audit_append_many(log, rec, 1, NULL, err);
}

int audit_append_outcomes(audit_log *log, const audit_record *recs, size_t n, size_t *appended,
                          rg_error *err)
{
    struct timespec t0;
    size_t dummy;
    int rc;

    if (appended == NULL)
        appended = &dummy;
    *appended = 0;
    if (log == NULL || (recs == NULL && n > 0))
        return rg_error_set(err, -EINVAL, "audit_append_outcomes: missing argument");
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (recs[i].kind != AUDIT_OUTCOME || recs[i].decision_seq == 0)
            return rg_error_set(err, -EINVAL, "record %zu: not an outcome naming its decision",
                                i + 1);
        rc = audit_record_check(&recs[i], UINT64_MAX, err);
        if (rc < 0)
            return err ? rg_error_wrap(err, "record %zu", i + 1) : rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = log->ops->append_outcomes(log, recs, n, appended, err);
    observed(log, &t0, rc);
    return rc;
}

int audit_ready(audit_log *log, size_t nbytes, rg_error *err)
{
    if (log == NULL)
        return rg_error_set(err, -EINVAL, "audit_ready: no log");
    return log->ops->ready(log, nbytes, err);
}

int audit_head(audit_log *log, uint64_t *seq, char hash_hex[65], rg_error *err)
{
    if (log == NULL || seq == NULL || hash_hex == NULL)
        return rg_error_set(err, -EINVAL, "audit_head: missing argument");
    return log->ops->head(log, seq, hash_hex, err);
}

int audit_complete_pending(audit_log *log, size_t *completed, rg_error *err)
{
    size_t dummy;

    if (log == NULL)
        return rg_error_set(err, -EINVAL, "audit_complete_pending: no log");
    return log->ops->complete_pending(log, completed ? completed : &dummy, err);
}

void audit_close(audit_log *log)
{
    if (log != NULL)
        log->ops->close(log);
}
