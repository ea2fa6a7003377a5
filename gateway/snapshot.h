/*
 * A configuration snapshot: one loaded config and the upstream credential
 * providers made from it, shared by every request that started under it.
 * A request takes a reference when it begins and drops it when it is
 * freed, so a reload (SIGHUP) swaps the server's current snapshot while
 * in-flight pushes finish under the rules they started with; the last
 * reference frees the snapshot (and the config, when it owns it).
 */
#ifndef RG_GATEWAY_SNAPSHOT_H
#define RG_GATEWAY_SNAPSHOT_H

#include <stdatomic.h>

#include "config/config.h"
#include "tokens/credentials.h"
#include "util/error.h"

typedef struct gateway_snapshot {
    const config_model *cfg;
    /* Per upstream, indexed like cfg->upstreams; NULL entries for local ones. */
    tokens_provider **read_creds;
    tokens_provider **write_creds;
    atomic_uint refs;
    config_model *owned; /* freed with the snapshot; NULL when the caller owns cfg */
} gateway_snapshot;

/*
 * A snapshot of `cfg` with one reference, its providers made now (so a bad
 * key or token file is refused here, not at a push). With `own` set the
 * snapshot takes cfg, also on failure.
 */
int gateway_snapshot_new(gateway_snapshot **out, const config_model *cfg, int own, rg_error *err);

/* Take another reference; returns s. */
gateway_snapshot *gateway_snapshot_ref(gateway_snapshot *s);

/* Drop a reference; the last frees. NULL is ignored. */
void gateway_snapshot_unref(gateway_snapshot *s);

/*
 * The keys that differ between a and b but are applied only at start
 * (listen, admin, the connection and spool limits, control, approvals;
 * state_dir may not change at all), comma-separated
 * into out ("" when none).
 */
void gateway_snapshot_restart_keys(char *out, size_t outsz, const config_model *a,
                                   const config_model *b);

#endif
