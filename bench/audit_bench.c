/*
 * audit_bench: how many audit records per second the file store takes,
 * each append_many call fsynced before it returns, the way the gateway
 * appends a push's decisions. Three shapes: one record per call from one
 * thread (a push of one ref, pushes in sequence); one record per call from
 * THREADS threads at once (concurrent pushes sharing the log); BATCH
 * records per call from one thread (a push of BATCH refs). The log is a
 * fresh file in DIR (removed at the end), so the figure is that of DIR's
 * filesystem and device.
 *
 * With AUDIT_BENCH_PG set to a libpq connection string, the same three
 * shapes then run on the PostgreSQL store (audit/store_pg.c) in that database,
 * which must hold refgate's schema and an empty chain: each call is one
 * transaction that locks the chain's head row and commits, the figure the
 * database's and the round trips'.
 *
 *   audit_bench DIR [RECORDS] [THREADS] [BATCH]     (defaults 2000, 4, 16)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "db/pool.h"
#include "db/lease.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A decision record shaped like the gateway's for one ref of a push. */
static audit_record decision(void)
{
    audit_record r;

    memset(&r, 0, sizeof(r));
    r.kind = AUDIT_DECISION;
    r.push_id = "0f3c2a9e5b7d4c1a8e6f2b3d9c0a1e4f";
    r.run = "agent-42";
    r.token_hash = "9b74c9897bac770ffc029102a200c5de4b4f8b1a1e0e2b1d0c3a9f8e7d6c5b4a";
    r.remote = "local";
    r.repo = "local/acme/app";
    r.ref = "refs/heads/feature/audit-bench";
    r.old_id = "1f0e8a5c3b2d4e6f708192a3b4c5d6e7f8091a2b";
    r.new_id = "2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b";
    r.action = "update";
    r.decision = "allow";
    r.rule = "features";
    r.reason = "feature branches are the agent's";
    r.outcome = "rejected";
    return r;
}

typedef struct job {
    audit_log *log;
    size_t calls, batch;
    int failed;
} job;

static void *appender(void *arg)
{
    job *j = arg;
    audit_record recs[256];
    rg_error err = RG_ERROR_INIT;
    size_t i;

    for (i = 0; i < j->batch; i++)
        recs[i] = decision();
    for (i = 0; i < j->calls; i++) {
        if (audit_append_many(j->log, recs, j->batch, NULL, &err) < 0) {
            fprintf(stderr, "audit_bench: %s\n", err.msg);
            j->failed = 1;
            return NULL;
        }
    }
    return NULL;
}

/* Append `records` in calls of `batch` from `threads` threads; prints records/s. */
static int measure(audit_log *log, const char *label, size_t records, size_t threads, size_t batch)
{
    pthread_t tid[64];
    job jobs[64];
    size_t t, started;
    double t0, secs;
    int failed = 0;

    t0 = now_s();
    for (started = 0; started < threads; started++) {
        jobs[started] = (job){log, records / threads / batch, batch, 0};
        if (pthread_create(&tid[started], NULL, appender, &jobs[started]) != 0) {
            fprintf(stderr, "audit_bench: cannot start a thread\n");
            failed = 1;
            break;
        }
    }
    for (t = 0; t < started; t++) {
        pthread_join(tid[t], NULL);
        failed |= jobs[t].failed;
    }
    secs = now_s() - t0;
    if (failed)
        return -1;
    records = records / threads / batch * threads * batch;
    /* Each thread's calls follow one another: a call's mean latency. */
    printf("%-44s %7zu records in %6.2f s: %9.0f records/s, %7.3f ms per call\n", label, records,
           secs, (double)records / secs,
           secs * 1000.0 * (double)threads / (double)(records / batch));
    return 0;
}

/* The three shapes on `log`, labels prefixed by `store`. */
static int measure_all(audit_log *log, const char *store, size_t records, size_t threads,
                       size_t batch)
{
    char label[80];

    snprintf(label, sizeof(label), "%s1 record per call, 1 thread", store);
    if (measure(log, label, records, 1, 1) < 0)
        return -1;
    snprintf(label, sizeof(label), "%s1 record per call, %zu threads", store, threads);
    if (measure(log, label, records, threads, 1) < 0)
        return -1;
    snprintf(label, sizeof(label), "%s%zu records per call, 1 thread", store, batch);
    return measure(log, label, records, 1, batch);
}

/* The same on the PostgreSQL store in the database `conninfo` names. */
static int measure_pg(const char *conninfo, size_t records, size_t threads, size_t batch)
{
    config_state st = {.postgres = (char *)conninfo, .connections = (unsigned)threads + 1};
    rg_error err = RG_ERROR_INIT;
    audit_log *log = NULL;
    db_pool *pool = NULL;
    int rc = -1;

    if (db_pool_open(&pool, &st, &err) < 0 || db_lease_register(pool, "audit-bench", &err) < 0 ||
        audit_pg_open(&log, pool, "audit-bench", &err) < 0) {
        fprintf(stderr, "audit_bench: %s\n", err.msg);
        goto done;
    }
    rc = measure_all(log, "postgres: ", records, threads, batch);
done:
    audit_close(log);
    db_pool_close(pool);
    return rc;
}

int main(int argc, char **argv)
{
    size_t records, threads, batch;
    char path[4096];
    const char *pg = getenv("AUDIT_BENCH_PG");
    audit_log *log = NULL;
    rg_error err = RG_ERROR_INIT;
    int rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: audit_bench DIR [RECORDS] [THREADS] [BATCH]\n");
        return 2;
    }
    records = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000;
    threads = argc > 3 ? strtoul(argv[3], NULL, 10) : 4;
    batch = argc > 4 ? strtoul(argv[4], NULL, 10) : 16;
    if (records == 0 || threads == 0 || threads > 64 || batch == 0 || batch > 256 ||
        records < threads * batch) {
        fprintf(stderr, "audit_bench: need 1-64 threads, a batch of 1-256 and RECORDS >= "
                        "THREADS x BATCH\n");
        return 2;
    }
    if ((size_t)snprintf(path, sizeof(path), "%s/audit-bench-%ld.jsonl", argv[1], (long)getpid()) >=
        sizeof(path)) {
        fprintf(stderr, "audit_bench: the directory name is too long\n");
        return 2;
    }
    if (audit_open(&log, path, &err) < 0) {
        fprintf(stderr, "audit_bench: %s\n", err.msg);
        return 1;
    }
    if (measure_all(log, "", records, threads, batch) < 0)
        rc = 1;
    audit_close(log);
    unlink(path);
    if (rc == 0 && pg != NULL && *pg && measure_pg(pg, records, threads, batch) < 0)
        rc = 1;
    return rc;
}
