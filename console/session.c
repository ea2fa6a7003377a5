/*
 * The session table (session.h). Ids are compared in constant time, and a
 * lookup walks the whole table whatever it finds, so timing tells nothing
 * about which ids exist.
 */
#include "console/session.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct session {
    int used;
    char id[CONSOLE_SESSION_ID_LEN + 1];
    char csrf[CONSOLE_SESSION_ID_LEN + 1];
    char user[GATEWAY_REVIEWER_NAME_MAX + 1];
    time_t created, last;
} session;

struct console_sessions {
    pthread_mutex_t mu;
    session table[CONSOLE_SESSIONS_MAX];
};

int console_sessions_new(console_sessions **out)
{
    console_sessions *s = calloc(1, sizeof(*s));

    *out = s;
    if (s == NULL)
        return -ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    return 0;
}

void console_sessions_free(console_sessions *s)
{
    if (s == NULL)
        return;
    pthread_mutex_destroy(&s->mu);
    explicit_bzero(s->table, sizeof(s->table));
    free(s);
}

static int random_hex(char out[CONSOLE_SESSION_ID_LEN + 1])
{
    unsigned char raw[CONSOLE_SESSION_ID_LEN / 2];

    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return -EIO;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof(raw));
    return 0;
}

static int expired(const session *e, time_t now)
{
    return now - e->last > CONSOLE_SESSION_IDLE || now - e->created > CONSOLE_SESSION_LIFETIME;
}

int console_session_create(console_sessions *s, char id[CONSOLE_SESSION_ID_LEN + 1],
                           char csrf[CONSOLE_SESSION_ID_LEN + 1], const char *user)
{
    time_t now = time(NULL);
    session *slot = NULL;

    if (random_hex(id) < 0 || random_hex(csrf) < 0)
        return -EIO;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
        session *e = &s->table[i];

        if (!e->used || expired(e, now)) {
            slot = e;
            break;
        }
        /* Full: the least recently used goes, a login form's first. */
        if (slot == NULL || (slot->user[0] && !e->user[0]) ||
            (!slot->user[0] == !e->user[0] && e->last < slot->last))
            slot = e;
    }
    memset(slot, 0, sizeof(*slot));
    slot->used = 1;
    memcpy(slot->id, id, CONSOLE_SESSION_ID_LEN + 1);
    memcpy(slot->csrf, csrf, CONSOLE_SESSION_ID_LEN + 1);
    snprintf(slot->user, sizeof(slot->user), "%s", user);
    slot->created = slot->last = now;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* The live entry for `id` (the lock held), or NULL. */
static session *find(console_sessions *s, const char *id, time_t now)
{
    session *hit = NULL;

    if (id == NULL || strlen(id) != CONSOLE_SESSION_ID_LEN)
        return NULL;
    for (size_t i = 0; i < CONSOLE_SESSIONS_MAX; i++) {
        session *e = &s->table[i];
        int same = CRYPTO_memcmp(e->id, id, CONSOLE_SESSION_ID_LEN) == 0;

        if (e->used && same && !expired(e, now))
            hit = e;
    }
    return hit;
}

int console_session_get(console_sessions *s, const char *id,
                        char user[GATEWAY_REVIEWER_NAME_MAX + 1],
                        char csrf[CONSOLE_SESSION_ID_LEN + 1])
{
    time_t now = time(NULL);
    session *e;

    pthread_mutex_lock(&s->mu);
    e = find(s, id, now);
    if (e != NULL) {
        e->last = now;
        memcpy(user, e->user, sizeof(e->user));
        memcpy(csrf, e->csrf, sizeof(e->csrf));
    }
    pthread_mutex_unlock(&s->mu);
    return e != NULL;
}

void console_session_drop(console_sessions *s, const char *id)
{
    session *e;

    pthread_mutex_lock(&s->mu);
    e = find(s, id, time(NULL));
    if (e != NULL)
        memset(e, 0, sizeof(*e));
    pthread_mutex_unlock(&s->mu);
}
