/*
 * Where a gateway keeps its shared state: the top-level "state" object.
 * Without it (the embedded default) everything lives in files under
 * state_dir. With "postgres", the audit chain, approvals, run-token
 * revocations and verification keys and the published policy live in one
 * PostgreSQL database that every gateway of a team shares (db/pool.h); the
 * mirrors, the spools and each gateway's private signing key stay local.
 *
 *   "state": {
 *     "postgres": "postgresql:///refgate?host=/run/postgresql",
 *     "password_file": "/etc/refgate/pgpass",   optional
 *     "connections": 4                          optional, 1..64
 *   }
 *
 * postgres: a libpq connection string (URI or key=value). It may not hold
 *   a password: a config file is read by too many people and tools. The
 *   password comes from "password_file" (the file's first line, read at
 *   every connect so it can be rotated) or from libpq's own PGPASSWORD /
 *   PGPASSFILE environment.
 * connections: how many connections a gateway opens at most; requests wait
 *   for a free one.
 */
#ifndef RG_CONFIG_STATE_H
#define RG_CONFIG_STATE_H

#include <jansson.h>

#include "util/error.h"

#define CONFIG_STATE_CONNECTIONS_DEFAULT 4
#define CONFIG_STATE_CONNECTIONS_MAX     64

typedef struct config_state {
    char *postgres;      /* NULL: the file stores under state_dir */
    char *password_file; /* absolute, or NULL */
    unsigned connections;
} config_state;

/*
 * Parse the top-level "state" object (`v`, may be NULL: file stores);
 * relative paths are relative to `dir`. Errors name `file` and the key.
 */
int config_state_parse(config_state *out, const json_t *v, const char *file, const char *dir,
                       rg_error *err);
void config_state_free(config_state *s);

#endif
