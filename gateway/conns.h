/*
 * The connections the gateway holds, and the limits a stranger on the
 * loopback must not be able to pass to lock pushers out:
 *
 * - a connection is "waiting" from its accept (or from the end of its
 *   previous request) until the headers of a request are complete and that
 *   request is authorised. A waiting connection whose headers are not
 *   complete `header_seconds` after it started waiting is cut, however
 *   steadily it trickles bytes (libmicrohttpd's own timeout resets on every
 *   byte, so it cannot do this);
 * - at most `unauthenticated` connections wait at once: a new one past that
 *   cuts the OLDEST waiting connection rather than being refused, so an
 *   attacker holding the waiting slots is pushed out by every newcomer and a
 *   pusher always gets its turn;
 * - at most `per_token` authorised requests run per run token (every client
 *   is 127.0.0.1, so addresses tell nobody apart).
 *
 * Cutting is shutdown(2) on the connection's socket, which wakes the
 * connection's thread to close it the ordinary way; the entry, and so the
 * descriptor, stays registered until libmicrohttpd reports the close, so a
 * cut never reaches a descriptor that was closed and reused.
 */
#ifndef RG_GATEWAY_CONNS_H
#define RG_GATEWAY_CONNS_H

#include "config/config.h"
#include "util/error.h"

typedef struct gateway_conns gateway_conns;
typedef struct gateway_conn gateway_conn;

/* A tracker for `lim` (copied), with its reaper thread running. */
int gateway_conns_new(gateway_conns **out, const config_limits *lim, rg_error *err);

/* Stop the reaper and free; every connection must have been closed. */
void gateway_conns_free(gateway_conns *t);

/*
 * A connection on socket `fd` was accepted: it waits for its headers from
 * now. When that makes too many wait, the oldest waiting one is cut.
 * *out is the connection's entry until gateway_conns_closed; -ENOMEM.
 */
int gateway_conns_opened(gateway_conn **out, gateway_conns *t, int fd);

/* The connection is gone (NULL is ignored): its entry is freed. */
void gateway_conns_closed(gateway_conns *t, gateway_conn *c);

/*
 * A request's headers are complete and authorised for the token whose
 * hash is `token_hash`: the connection stops waiting and the request takes
 * one of the token's slots. -EBUSY (nothing taken, the connection keeps
 * waiting) when the token already runs per_token requests.
 */
int gateway_conns_authorised(gateway_conns *t, gateway_conn *c, const char *token_hash);

/* A request ended: its token slot is freed and the connection waits for
 * the headers of the next one from now. NULL is ignored. */
void gateway_conns_request_done(gateway_conns *t, gateway_conn *c);

/* Connections now, and what the limits refused so far (for metrics). */
typedef struct gateway_conns_stats {
    unsigned open;                   /* tracked: opened and not yet closed */
    unsigned waiting;                /* open, request not yet authorised */
    unsigned long cut;               /* cut so far, for either reason below */
    unsigned long cut_deadline;      /* past header_seconds */
    unsigned long cut_evicted;       /* the oldest waiting one past `unauthenticated` */
    unsigned long per_token_refused; /* requests refused at per_token (429) */
} gateway_conns_stats;

void gateway_conns_get_stats(gateway_conns_stats *out, gateway_conns *t);

#endif
