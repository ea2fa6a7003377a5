/*
 * The gateway's local control socket: a unix stream socket (config
 * `control.socket`, default <state_dir>/control.sock) through which a
 * developer who cannot read state_dir gets run tokens minted and revoked by
 * the running gateway — `refgate run` uses it — and through which
 * `refgate approvals`, `approve` and `deny` reach the approvals.
 *
 * Authorisation is by the peer's credentials (SO_PEERCRED), never by the
 * socket file's mode (0666): the gateway's own uid, a user in
 * `control.users` (name or uid), or a member (primary or supplementary) of a
 * group in `control.groups`. Anyone else gets one error line and is logged.
 *
 * Protocol: one JSON object per line each way.
 *   {"op": "mint", "repos": ["HOST/PATH", ...], "ttl": "2h" | 7200, "run": "NAME"}
 *     -> {"ok": true, "token": "...", "run": "...", "expires": UNIX, "url": "http://..."}
 *   {"op": "revoke", "token": "..."}  -> {"ok": true}
 *   {"op": "key-rotate"}              -> {"ok": true, "kid": NEW, "retired": OLD}
 *       a new signing key (tokens/key.h), audited (token-key-rotate)
 *   {"op": "approvals" | "approval" | "approve" | "deny", ...}: see approve.h
 *   {"op": "console-user-add", "name": NAME, "password": TEXT}
 *                                     -> {"ok": true, "name": NAME, "replaced": BOOL}
 *       a review console account (reviewers.h), audited (console-user-add)
 *   anything else                     -> {"ok": false, "error": "..."}
 * A request line is at most GATEWAY_CONTROL_REQUEST_MAX bytes, a connection
 * silent for GATEWAY_CONTROL_IDLE_SECONDS is closed, and at most
 * GATEWAY_CONTROL_CONNECTIONS are served at once. Every mint and revoke is
 * an audit event (token-mint, token-revoke) naming the peer, the run, the
 * repositories, the ttl and the token's hash prefix, never the token.
 */
#ifndef RG_GATEWAY_CONTROL_H
#define RG_GATEWAY_CONTROL_H

#include "gateway/context.h"
#include "util/error.h"

#define GATEWAY_CONTROL_REQUEST_MAX  (64 * 1024)
#define GATEWAY_CONTROL_IDLE_SECONDS 10
#define GATEWAY_CONTROL_CONNECTIONS  16

typedef struct gateway_control gateway_control;

/*
 * Bind ctx->cfg->control.socket (replacing a stale socket left by a crash,
 * refusing with -EADDRINUSE when another gateway answers on it) and start
 * serving it on a thread of its own. `ctx` (its audit log open) and `url`
 * (the gateway's base URL, told to minting clients) must outlive the
 * control socket.
 */
int gateway_control_start(gateway_control **out, const gateway_ctx *ctx, const char *url,
                          rg_error *err);

/* Stop the thread, close every connection and remove the socket file. Accepts NULL. */
void gateway_control_stop(gateway_control *c);

#endif
