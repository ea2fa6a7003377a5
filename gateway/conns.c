/* Connection tracking, the header deadline and the per-token limit; see conns.h. */
#include "gateway/conns.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/log.h"

/* How often the reaper looks for waiting connections past their deadline:
 * a cut comes at most this late. */
#define REAP_INTERVAL_MS 250

#define TOKEN_BUCKETS 256

struct gateway_conn {
    int fd;
    int waiting;       /* on the waiting list */
    int cut;           /* shut down, waiting for libmicrohttpd to close it */
    uint64_t since_ms; /* when it started waiting */
    struct token_slot *token;
    gateway_conn *prev, *next; /* the waiting list, oldest first */
};

typedef struct token_slot {
    char hash[16];
    unsigned requests;
    struct token_slot *next;
} token_slot;

struct gateway_conns {
    config_limits lim;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t reaper;
    int reaper_running;
    int stopping;
    gateway_conn *head, *tail; /* waiting, in the order they started waiting */
    unsigned nwaiting, nopen;
    unsigned long ncut, ncut_deadline, ncut_evicted, nper_token;
    token_slot *tokens[TOKEN_BUCKETS];
};

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------ waiting list */

static void wait_remove(gateway_conns *t, gateway_conn *c)
{
    if (!c->waiting)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        t->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        t->tail = c->prev;
    c->prev = c->next = NULL;
    c->waiting = 0;
    t->nwaiting--;
}

/* Appending with the current time keeps the list sorted by since_ms. */
static void wait_append(gateway_conns *t, gateway_conn *c)
{
    c->since_ms = now_ms();
    c->prev = t->tail;
    c->next = NULL;
    if (t->tail)
        t->tail->next = c;
    else
        t->head = c;
    t->tail = c;
    c->waiting = 1;
    t->nwaiting++;
}

/* With the lock held. The fd is still open: closed() has not run. */
static void cut(gateway_conns *t, gateway_conn *c, const char *why)
{
    wait_remove(t, c);
    c->cut = 1;
    t->ncut++;
    shutdown(c->fd, SHUT_RDWR);
    if (!strcmp(why, "header_deadline"))
        t->ncut_deadline++;
    else
        t->ncut_evicted++;
}

static void *reaper_main(void *arg)
{
    gateway_conns *t = arg;
    uint64_t deadline_ms = (uint64_t)t->lim.header_seconds * 1000, logged_ms = 0;
    unsigned long logged = 0;
    struct timespec ts;

    pthread_mutex_lock(&t->lock);
    while (!t->stopping) {
        uint64_t now = now_ms();

        /* Bounded: each step removes the head, and the list holds at most
         * `unauthenticated` connections. Oldest first, so the first one
         * still in time ends the walk. */
        while (t->head && now - t->head->since_ms >= deadline_ms)
            cut(t, t->head, "header_deadline");
        /* One line a second at most: a flood must not flood the log too. */
        if (t->ncut != logged && now - logged_ms >= 1000) {
            rg_log(RG_LOG_NOTICE, "connections_cut",
                   "header_deadline=%lu unauthenticated_limit=%lu waiting=%u", t->ncut_deadline,
                   t->ncut_evicted, t->nwaiting);
            logged = t->ncut;
            logged_ms = now;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += REAP_INTERVAL_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&t->wake, &t->lock, &ts);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* -------------------------------------------------------------- tokens */

static token_slot **token_bucket(gateway_conns *t, const char *hash)
{
    uint32_t h = 2166136261u;

    for (const char *p = hash; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return &t->tokens[h % TOKEN_BUCKETS];
}

static void token_release(gateway_conns *t, gateway_conn *c)
{
    token_slot **pp;

    if (c->token == NULL)
        return;
    if (--c->token->requests == 0) {
        for (pp = token_bucket(t, c->token->hash); *pp != c->token; pp = &(*pp)->next)
            ;
        *pp = c->token->next;
        free(c->token);
    }
    c->token = NULL;
}

/* --------------------------------------------------------------- public */

int gateway_conns_new(gateway_conns **out, const config_limits *lim, rg_error *err)
{
    gateway_conns *t;
    pthread_condattr_t ca;
    int rc;

    *out = NULL;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    t->lim = *lim;
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->wake, &ca);
    pthread_condattr_destroy(&ca);
    rc = pthread_create(&t->reaper, NULL, reaper_main, t);
    if (rc != 0) {
        gateway_conns_free(t);
        return rg_error_set(err, -rc, "cannot start the connection reaper: %s", strerror(rc));
    }
    t->reaper_running = 1;
    *out = t;
    return 0;
}

void gateway_conns_free(gateway_conns *t)
{
    if (t == NULL)
        return;
    if (t->reaper_running) {
        pthread_mutex_lock(&t->lock);
        t->stopping = 1;
        pthread_cond_signal(&t->wake);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->reaper, NULL);
    }
    for (size_t i = 0; i < TOKEN_BUCKETS; i++) {
        while (t->tokens[i]) {
            token_slot *n = t->tokens[i]->next;
            free(t->tokens[i]);
            t->tokens[i] = n;
        }
    }
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int gateway_conns_opened(gateway_conn **out, gateway_conns *t, int fd)
{
    gateway_conn *c = calloc(1, sizeof(*c));

    *out = NULL;
    if (c == NULL)
        return -ENOMEM;
    c->fd = fd;
    pthread_mutex_lock(&t->lock);
    t->nopen++;
    wait_append(t, c);
    /* Evict rather than refuse: refusing the newcomer would let whoever
     * holds the waiting slots lock every pusher out. */
    if (t->nwaiting > t->lim.unauthenticated)
        cut(t, t->head, "unauthenticated_limit");
    pthread_mutex_unlock(&t->lock);
    *out = c;
    return 0;
}

void gateway_conns_closed(gateway_conns *t, gateway_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    t->nopen--;
    wait_remove(t, c);
    token_release(t, c);
    pthread_mutex_unlock(&t->lock);
    free(c);
}

int gateway_conns_authorised(gateway_conns *t, gateway_conn *c, const char *token_hash)
{
    token_slot **pp, *slot;
    int rc = 0;

    if (c == NULL)
        return 0;
    pthread_mutex_lock(&t->lock);
    /* One request per connection at a time (HTTP/1.1 without pipelining):
     * a slot still held is the previous request's, given back first. */
    token_release(t, c);
    pp = token_bucket(t, token_hash);
    /* Bounded: a bucket holds at most the tokens with a request running,
     * which is at most the connection limit. */
    for (slot = *pp; slot && strcmp(slot->hash, token_hash); slot = slot->next)
        ;
    if (slot && slot->requests >= t->lim.per_token) {
        t->nper_token++;
        rc = -EBUSY;
        goto done;
    }
    if (slot == NULL) {
        slot = calloc(1, sizeof(*slot));
        if (slot == NULL) {
            rc = -ENOMEM;
            goto done;
        }
        snprintf(slot->hash, sizeof(slot->hash), "%s", token_hash);
        slot->next = *pp;
        *pp = slot;
    }
    slot->requests++;
    c->token = slot;
    wait_remove(t, c);
done:
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void gateway_conns_request_done(gateway_conns *t, gateway_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    token_release(t, c);
    /* A connection already cut stays off the list: it is on its way out. */
    if (!c->cut) {
        wait_remove(t, c);
        wait_append(t, c);
        if (t->nwaiting > t->lim.unauthenticated)
            cut(t, t->head, "unauthenticated_limit");
    }
    pthread_mutex_unlock(&t->lock);
}

void gateway_conns_get_stats(gateway_conns_stats *out, gateway_conns *t)
{
    pthread_mutex_lock(&t->lock);
    *out = (gateway_conns_stats){
        .open = t->nopen,
        .waiting = t->nwaiting,
        .cut = t->ncut,
        .cut_deadline = t->ncut_deadline,
        .cut_evicted = t->ncut_evicted,
        .per_token_refused = t->nper_token,
    };
    pthread_mutex_unlock(&t->lock);
}
