/*
 * The admin listener: the operator's own address (config "admin"), never
 * the push port every sandbox reaches, serving
 *
 *   GET /healthz   JSON {"live": true, "ready": BOOL, "checks": {...}}:
 *                  200 when every readiness check passes (the config is
 *                  loaded, the state directory takes a new file, the audit
 *                  log can be appended to, with a shared database: its
 *                  last use found it up), else 503 naming what failed
 *   GET /metrics   the Prometheus text exposition of gateway_metrics
 *
 * and nothing else (404; methods other than GET and HEAD: 405). One
 * libmicrohttpd daemon of its own with a single polling thread: every
 * answer is computed in microseconds, and a slow scraper cannot hold a
 * push's thread. Its base URL is written to <state_dir>/admin.url while
 * it serves.
 */
#ifndef RG_GATEWAY_ADMIN_H
#define RG_GATEWAY_ADMIN_H

#include "gateway/context.h"
#include "gateway/metrics.h"
#include "util/error.h"

typedef struct gateway_admin gateway_admin;

/* What a scrape copies in from the server (connections, spool). */
typedef void (*gateway_admin_state_fn)(void *arg, gateway_metrics_state *out);

/*
 * Bind cfg->admin (which must be set), start serving and write
 * <state_dir>/admin.url. `ctx` (its cfg, audit log) and `metrics` must
 * outlive the listener; `state` is called from the listener's thread.
 */
int gateway_admin_start(gateway_admin **out, const gateway_ctx *ctx, gateway_metrics *metrics,
                        gateway_admin_state_fn state, void *state_arg, rg_error *err);

const char *gateway_admin_url(const gateway_admin *a);

/* Stop serving, remove admin.url, free. NULL is ignored. */
void gateway_admin_stop(gateway_admin *a);

#endif
