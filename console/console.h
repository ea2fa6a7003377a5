/*
 * The review console: a small web UI for people who review what runs
 * pushed — the pushes in the audit log, pending approvals (approve, or deny
 * with a reason), the log's integrity. It is served by the gateway process
 * on a listener of its own (config "console"; never the push port, so a
 * run's token and network reach only the gateway), with libmicrohttpd.
 *
 * Security invariants:
 *  - The only credential is a server-side session (session.h) made by a
 *    reviewer's login (gateway/reviewers.h accounts, throttle.h limiting
 *    guesses); an Authorization header (a run token) is refused, never
 *    looked at.
 *  - A request whose Host is not the console's own address is refused
 *    (DNS rebinding); a POST must carry an Origin equal to the console's
 *    own origin (scheme, host and port) and the session's CSRF token.
 *    State changes happen only in POSTs.
 *  - Every page has a strict Content-Security-Policy (default-src 'self',
 *    no script at all), and every attacker-chosen string is HTML-escaped.
 *  - Approvals are decided through gateway_approval_control, the control
 *    socket's own code path, audited with the reviewer's name "via console".
 */
#ifndef RG_CONSOLE_CONSOLE_H
#define RG_CONSOLE_CONSOLE_H

#include "gateway/context.h"
#include "util/error.h"

typedef struct console console;

/*
 * Bind ctx->cfg->console's listen address, start serving and write the URL
 * to <state_dir>/console.url. `ctx` must outlive the console.
 */
int console_start(console **out, const gateway_ctx *ctx, rg_error *err);

/* The console's URL, e.g. "http://127.0.0.1:41235". */
const char *console_url(const console *c);

/* Stop serving, remove console.url and free. Accepts NULL. */
void console_stop(console *c);

#endif
