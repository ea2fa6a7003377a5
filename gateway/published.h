/*
 * Following the published policy (db/policies.h): a thread asks the shared
 * database for the current policy version about once a second and hands
 * each new one over, its body checked against its digest and parsed as a
 * policy (config/policy.h). What to do with it (merge it over the host's
 * config, swap the snapshot) is the caller's.
 *
 * Polling rather than LISTEN/NOTIFY: a transaction-mode pooler
 * (pgbouncer) between the gateways and the database hands each
 * transaction to any server connection, so a LISTEN would be registered
 * on a connection the gateway no longer holds and its notifications
 * would never arrive; db/pool.h keeps no session state for that reason. One
 * indexed one-row query a second per gateway costs the database nothing
 * next to a push, and a missed notification can never leave a gateway on
 * an old policy.
 *
 * When the database cannot be reached the caller is told nothing and
 * keeps what it has; the failure is logged when it starts and when it
 * ends, not every second.
 */
#ifndef RG_GATEWAY_PUBLISHED_H
#define RG_GATEWAY_PUBLISHED_H

#include <jansson.h>

#include "config/policy.h"
#include "db/pool.h"
#include "util/error.h"

/* How often the current version is asked for. */
#define GATEWAY_PUBLISHED_POLL_MS 1000

/*
 * A new current policy: version (0: none has been published, said once),
 * its digest and the policy object (borrowed for the call). Called from
 * gateway_published_poll's caller: the follower's thread, or the caller
 * of a synchronous poll.
 */
typedef void (*gateway_published_fn)(void *arg, long long version, const char *digest,
                                     const json_t *policy);

typedef struct gateway_published gateway_published;

/* A follower of `db`'s policies that tells `fn`; nothing is read yet. */
int gateway_published_new(gateway_published **out, db_pool *db, gateway_published_fn fn, void *arg,
                          rg_error *err);

/*
 * Ask once, now: 1 when fn was told of a new version, 0 when nothing is
 * new, negative when the database could not be read (asked again at the
 * next poll) or the version's body is not the policy its digest names
 * (RG_E_TAMPER, RG_E_CONFIG: db_policy_load; the version is then passed
 * over until gateway_published_recheck). Not while the thread runs.
 */
int gateway_published_poll(gateway_published *f, rg_error *err);

/* Poll from a thread of its own every GATEWAY_PUBLISHED_POLL_MS until freed. */
int gateway_published_run(gateway_published *f, rg_error *err);

/*
 * Hand the current version over again at the next poll, though it was
 * seen: after the host's config changed, a version that did not load on
 * the old one may load now.
 */
void gateway_published_recheck(gateway_published *f);

/* Stop the thread (waits for a poll in progress) and free. NULL is ignored. */
void gateway_published_free(gateway_published *f);

#endif
