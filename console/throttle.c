/* The login throttle (throttle.h): a small table of names and their failures. */
#include "console/throttle.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/reviewers.h"

typedef struct entry {
    char name[GATEWAY_REVIEWER_NAME_MAX + 1]; /* "" when free */
    unsigned failures;
    long long first; /* when the window's first failure was */
} entry;

struct console_throttle {
    pthread_mutex_t mu;
    entry table[CONSOLE_THROTTLE_NAMES];
};

int console_throttle_new(console_throttle **out)
{
    console_throttle *t = calloc(1, sizeof(*t));

    *out = t;
    if (t == NULL)
        return -ENOMEM;
    pthread_mutex_init(&t->mu, NULL);
    return 0;
}

void console_throttle_free(console_throttle *t)
{
    if (t == NULL)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* The live entry for `name` (lock held), or NULL; a lapsed window frees it. */
static entry *find(console_throttle *t, const char *name, long long now)
{
    for (size_t i = 0; i < CONSOLE_THROTTLE_NAMES; i++) {
        entry *e = &t->table[i];

        if (e->name[0] && now - e->first >= CONSOLE_THROTTLE_WINDOW)
            memset(e, 0, sizeof(*e));
        if (e->name[0] && !strcmp(e->name, name))
            return e;
    }
    return NULL;
}

int console_throttle_allows(console_throttle *t, const char *name, long long now)
{
    entry *e;
    int ok;

    pthread_mutex_lock(&t->mu);
    e = find(t, name, now);
    ok = e == NULL || e->failures < CONSOLE_THROTTLE_FAILURES;
    pthread_mutex_unlock(&t->mu);
    return ok;
}

void console_throttle_failed(console_throttle *t, const char *name, long long now)
{
    entry *e;

    pthread_mutex_lock(&t->mu);
    e = find(t, name, now);
    if (e == NULL) {
        /* A free entry, else the one whose window started first. */
        e = &t->table[0];
        for (size_t i = 0; i < CONSOLE_THROTTLE_NAMES && e->name[0]; i++)
            if (!t->table[i].name[0] || t->table[i].first < e->first)
                e = &t->table[i];
        memset(e, 0, sizeof(*e));
        snprintf(e->name, sizeof(e->name), "%s", name);
        e->first = now;
    }
    e->failures++;
    pthread_mutex_unlock(&t->mu);
}

void console_throttle_clear(console_throttle *t, const char *name)
{
    if (name[0] == '\0')
        return;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < CONSOLE_THROTTLE_NAMES; i++)
        if (!strcmp(t->table[i].name, name))
            memset(&t->table[i], 0, sizeof(t->table[i]));
    pthread_mutex_unlock(&t->mu);
}
