/*
 * The HTTP side of the gateway: a libmicrohttpd daemon (a thread per
 * connection, so a push may block on upstream without stalling others) on
 * a socket the server binds itself, request validation with early returns,
 * and graceful shutdown that lets in-flight pushes finish.
 */
#ifndef RG_GATEWAY_SERVER_H
#define RG_GATEWAY_SERVER_H

#include "config/config.h"
#include "gateway/context.h"
#include "util/error.h"

typedef struct gateway_server gateway_server;

/*
 * Load the token key, open the audit log and complete what a previous
 * gateway left pending in it, bind cfg's listen address, append a start
 * event and log the audit head (then hourly), start serving and write the
 * base URL to <state_dir>/url. `cfg` must outlive the server.
 */
int gateway_server_start(gateway_server **out, const config_model *cfg, rg_error *err);

/*
 * What the gateway's requests share (configuration, audit log, approvals),
 * for the review console (console/), which serves beside it. Valid until
 * gateway_server_stop.
 */
const gateway_ctx *gateway_server_ctx(const gateway_server *s);

/* The base URL, e.g. "http://127.0.0.1:41234". */
const char *gateway_server_url(const gateway_server *s);

/*
 * Make `cfg` (consumed, also on failure) the config new requests begin
 * under: its credential providers are made first, and when that fails,
 * or when its state_dir differs, the current config stays and the error
 * is logged and returned. Requests
 * in flight finish under the config they began with. Keys applied only at
 * start (listen, state_dir, admin, the connection and spool limits,
 * control, approvals) keep their start values; those that differ are
 * named in a `reload_needs_restart` log line. Thread-safe.
 */
int gateway_server_reload(gateway_server *s, config_model *cfg, rg_error *err);

/*
 * Stop accepting, let in-flight requests finish (bounded), stop, append a
 * stop event, log the audit head, and free.
 */
void gateway_server_stop(gateway_server *s);

#endif
