/*
 * The outbox (gateway/outbox.h): a FIFO list of deep-copied outcome
 * records under a mutex, and a second mutex that lets one retry run at a
 * time. A retry takes a batch off the front, appends it without holding
 * the list (requests keep adding meanwhile), and on failure puts it back
 * in front, so the order never changes and the bound is applied again.
 */
#include "gateway/outbox.h"
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Records appended per retry transaction. */
#define FLUSH_BATCH 256

typedef struct entry {
    struct entry *next;
    size_t size;      /* what it takes, counted against max_bytes */
    audit_record rec; /* its strings point into text */
    char text[];
} entry;

struct gateway_outbox {
    audit_log *log; /* borrowed */
    size_t max, max_bytes;
    pthread_mutex_t mu;       /* head, tail, count, bytes */
    pthread_mutex_t flush_mu; /* one retry at a time: the order holds */
    entry *head, *tail;
    size_t count, bytes;
    int failing; /* the last retry failed: logged once until one works */
};

/* Every string of a record, so a copy owns all it names. */
static const size_t string_fields[] = {
    offsetof(audit_record, push_id),    offsetof(audit_record, run),
    offsetof(audit_record, token_hash), offsetof(audit_record, remote),
    offsetof(audit_record, repo),       offsetof(audit_record, ref),
    offsetof(audit_record, old_id),     offsetof(audit_record, new_id),
    offsetof(audit_record, action),     offsetof(audit_record, decision),
    offsetof(audit_record, rule),       offsetof(audit_record, reason),
    offsetof(audit_record, evaluate),   offsetof(audit_record, policy),
    offsetof(audit_record, outcome),    offsetof(audit_record, event),
    offsetof(audit_record, detail),
};
#define NFIELDS (sizeof(string_fields) / sizeof(string_fields[0]))

static const char **field(audit_record *r, size_t i)
{
    return (const char **)(void *)((char *)r + string_fields[i]);
}

static entry *entry_copy(const audit_record *rec)
{
    audit_record tmp = *rec;
    size_t len = 0, k;
    entry *e;
    char *p;

    for (size_t i = 0; i < NFIELDS; i++)
        if (*field(&tmp, i) != NULL)
            len += strlen(*field(&tmp, i)) + 1;
    e = malloc(sizeof(*e) + len);
    if (e == NULL)
        return NULL;
    e->next = NULL;
    e->size = sizeof(*e) + len;
    e->rec = tmp;
    p = e->text;
    for (size_t i = 0; i < NFIELDS; i++) {
        if (*field(&tmp, i) == NULL)
            continue;
        k = strlen(*field(&tmp, i)) + 1;
        memcpy(p, *field(&tmp, i), k);
        *field(&e->rec, i) = p;
        p += k;
    }
    return e;
}

static void chain_free(entry *e)
{
    entry *next;

    for (; e != NULL; e = next) {
        next = e->next;
        free(e);
    }
}

/* Past the bound, drop the oldest; with ob->mu held. */
static void drop_excess(gateway_outbox *ob)
{
    char q[RG_LOG_VALUE_MAX];
    entry *e;

    /* Bounded: each round removes one of count records. */
    while (ob->count > ob->max || ob->bytes > ob->max_bytes) {
        e = ob->head;
        ob->head = e->next;
        if (ob->head == NULL)
            ob->tail = NULL;
        ob->count--;
        ob->bytes -= e->size;
        rg_log(RG_LOG_ERR, "audit_outbox_full",
               "max=%zu max_bytes=%zu dropped_push=%s decision_seq=%llu note=%s", ob->max,
               ob->max_bytes, e->rec.push_id ? e->rec.push_id : "-",
               (unsigned long long)e->rec.decision_seq,
               rg_log_quote(q, sizeof(q),
                            "its decision stays pending until this gateway is gone, then "
                            "another completes it as unknown"));
        free(e);
    }
}

int gateway_outbox_new(gateway_outbox **out, audit_log *log, size_t max, size_t max_bytes,
                       rg_error *err)
{
    gateway_outbox *ob;

    *out = NULL;
    if (log == NULL || max == 0 || max_bytes == 0)
        return rg_error_set(err, -EINVAL, "gateway_outbox_new: missing argument");
    ob = calloc(1, sizeof(*ob));
    if (ob == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    ob->log = log;
    ob->max = max;
    ob->max_bytes = max_bytes;
    pthread_mutex_init(&ob->mu, NULL);
    pthread_mutex_init(&ob->flush_mu, NULL);
    *out = ob;
    return 0;
}

int gateway_outbox_add(gateway_outbox *ob, const audit_record *recs, size_t n)
{
    entry *first = NULL, *last = NULL, *e;
    size_t bytes = 0;

    if (ob == NULL || (recs == NULL && n > 0))
        return -EINVAL;
    /* What a retry could never write would hold up every record behind it. */
    for (size_t i = 0; i < n; i++)
        if (recs[i].kind != AUDIT_OUTCOME || recs[i].decision_seq == 0 || recs[i].outcome == NULL)
            return -EINVAL;
    /* All or nothing: copied before the list is touched. */
    for (size_t i = 0; i < n; i++) {
        e = entry_copy(&recs[i]);
        if (e == NULL) {
            chain_free(first);
            return -ENOMEM;
        }
        if (last != NULL)
            last->next = e;
        else
            first = e;
        last = e;
        bytes += e->size;
    }
    if (first == NULL)
        return 0;
    pthread_mutex_lock(&ob->mu);
    if (ob->tail != NULL)
        ob->tail->next = first;
    else
        ob->head = first;
    ob->tail = last;
    ob->count += n;
    ob->bytes += bytes;
    drop_excess(ob);
    pthread_mutex_unlock(&ob->mu);
    return 0;
}

size_t gateway_outbox_count(gateway_outbox *ob)
{
    size_t n;

    if (ob == NULL)
        return 0;
    pthread_mutex_lock(&ob->mu);
    n = ob->count;
    pthread_mutex_unlock(&ob->mu);
    return n;
}

/* Take up to FLUSH_BATCH records off the front into recs; their chain into *out. */
static size_t take_batch(gateway_outbox *ob, entry **out, audit_record *recs)
{
    entry *e, *last = NULL;
    size_t k = 0;

    pthread_mutex_lock(&ob->mu);
    *out = ob->head;
    for (e = ob->head; e != NULL && k < FLUSH_BATCH; e = e->next) {
        recs[k++] = e->rec;
        ob->bytes -= e->size;
        last = e;
    }
    if (last != NULL) {
        ob->head = last->next;
        if (ob->head == NULL)
            ob->tail = NULL;
        last->next = NULL;
        ob->count -= k;
    }
    pthread_mutex_unlock(&ob->mu);
    return k;
}

/* Put a batch that could not be written back in front, then apply the bound. */
static void put_back(gateway_outbox *ob, entry *first, size_t k)
{
    entry *last = first;
    size_t bytes = first->size;

    /* Bounded: the k entries of one batch. */
    while (last->next != NULL) {
        last = last->next;
        bytes += last->size;
    }
    pthread_mutex_lock(&ob->mu);
    last->next = ob->head;
    ob->head = first;
    if (ob->tail == NULL)
        ob->tail = last;
    ob->count += k;
    ob->bytes += bytes;
    drop_excess(ob);
    pthread_mutex_unlock(&ob->mu);
}

int gateway_outbox_flush(gateway_outbox *ob, size_t *appended, size_t *skipped, rg_error *err)
{
    size_t k, done, app = 0, skip = 0;
    audit_record *recs;
    char q[RG_LOG_VALUE_MAX];
    entry *batch;
    int rc = 0;

    if (appended != NULL)
        *appended = 0;
    if (skipped != NULL)
        *skipped = 0;
    if (ob == NULL)
        return 0;
    recs = malloc(FLUSH_BATCH * sizeof(*recs));
    if (recs == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_lock(&ob->flush_mu);
    /* Bounded: each round writes or passes over k records for good, or stops. */
    while ((k = take_batch(ob, &batch, recs)) > 0) {
        done = 0;
        rc = audit_append_outcomes(ob->log, recs, k, &done, err);
        if (rc == -EINVAL) {
            /* Refused for what it holds, it would be refused again: dropped
             * rather than hold up what follows (add keeps none such). */
            rg_log(RG_LOG_ERR, "audit_outbox_dropped", "records=%zu error=%s", k,
                   rg_log_quote(q, sizeof(q), err ? err->msg : "-"));
            chain_free(batch);
            rc = 0;
            continue;
        }
        if (rc < 0) {
            put_back(ob, batch, k);
            break;
        }
        chain_free(batch);
        app += done;
        skip += k - done;
    }
    if (rc < 0 && !ob->failing)
        rg_log(RG_LOG_ERR, "audit_outbox_retry_failed", "waiting=%zu error=%s",
               gateway_outbox_count(ob), rg_log_quote(q, sizeof(q), err ? err->msg : "-"));
    if (app + skip > 0)
        rg_log(RG_LOG_NOTICE, "audit_outbox_retried", "appended=%zu skipped=%zu waiting=%zu", app,
               skip, gateway_outbox_count(ob));
    ob->failing = rc < 0;
    pthread_mutex_unlock(&ob->flush_mu);
    free(recs);
    if (appended != NULL)
        *appended = app;
    if (skipped != NULL)
        *skipped = skip;
    return rc;
}

void gateway_outbox_free(gateway_outbox *ob)
{
    if (ob == NULL)
        return;
    if (ob->count > 0)
        rg_log(RG_LOG_ERR, "audit_outbox_lost",
               "records=%zu note=\"their decisions stay pending: the next gateway completes "
               "them as unknown\"",
               ob->count);
    chain_free(ob->head);
    pthread_mutex_destroy(&ob->mu);
    pthread_mutex_destroy(&ob->flush_mu);
    free(ob);
}
