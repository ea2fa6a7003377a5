/* Configuration snapshots; see snapshot.h. */
#include "gateway/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_providers(gateway_snapshot *s)
{
    for (size_t i = 0; s->cfg && i < s->cfg->nupstreams; i++) {
        if (s->read_creds)
            tokens_provider_free(s->read_creds[i]);
        if (s->write_creds)
            tokens_provider_free(s->write_creds[i]);
    }
    free(s->read_creds);
    free(s->write_creds);
}

static void snapshot_free(gateway_snapshot *s)
{
    free_providers(s);
    config_free(s->owned);
    free(s);
}

/* One read and one write credential provider per remote upstream. */
static int make_providers(gateway_snapshot *s, rg_error *err)
{
    const config_model *cfg = s->cfg;
    size_t n = cfg->nupstreams ? cfg->nupstreams : 1;
    int rc;

    s->read_creds = calloc(n, sizeof(*s->read_creds));
    s->write_creds = calloc(n, sizeof(*s->write_creds));
    if (s->read_creds == NULL || s->write_creds == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        const config_upstream *up = &cfg->upstreams[i];

        if (up->root != NULL)
            continue;
        rc = tokens_provider_new(&s->write_creds[i], &up->credentials, up->ca_file, err);
        if (rc == 0)
            rc = tokens_provider_new(&s->read_creds[i], &up->read_credentials, up->ca_file, err);
        if (rc < 0)
            return rg_error_wrap(err, "upstream %s", up->host);
    }
    return 0;
}

int gateway_snapshot_new(gateway_snapshot **out, const config_model *cfg, int own, rg_error *err)
{
    gateway_snapshot *s;
    int rc;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        if (own)
            config_free((config_model *)cfg);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    s->cfg = cfg;
    /* Owned, the config is the snapshot's to free: const only to readers. */
    s->owned = own ? (config_model *)cfg : NULL;
    atomic_init(&s->refs, 1);
    rc = make_providers(s, err);
    if (rc < 0) {
        snapshot_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

gateway_snapshot *gateway_snapshot_ref(gateway_snapshot *s)
{
    atomic_fetch_add(&s->refs, 1);
    return s;
}

void gateway_snapshot_unref(gateway_snapshot *s)
{
    if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1)
        snapshot_free(s);
}

/* ------------------------------------------------------ restart-only keys */

static int str_differ(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b));
}

static int list_differ(char *const *a, size_t na, char *const *b, size_t nb)
{
    if (na != nb)
        return 1;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]))
            return 1;
    return 0;
}

static void add_key(char *out, size_t outsz, const char *key)
{
    size_t len = strlen(out);

    snprintf(out + len, outsz - len, "%s%s", len ? "," : "", key);
}

void gateway_snapshot_restart_keys(char *out, size_t outsz, const config_model *a,
                                   const config_model *b)
{
    const config_control *ca = &a->control, *cb = &b->control;

    out[0] = '\0';
    if (str_differ(a->listen_host, b->listen_host) || a->listen_port != b->listen_port)
        add_key(out, outsz, "listen");
    if (str_differ(a->admin.listen_host, b->admin.listen_host) ||
        a->admin.listen_port != b->admin.listen_port)
        add_key(out, outsz, "admin");
    /* The limits the connection tracker, the spool budget and the HTTP
     * daemon took at start; inflate_ratio and inspect_* are read per push. */
    if (a->limits.connections != b->limits.connections ||
        a->limits.unauthenticated != b->limits.unauthenticated ||
        a->limits.per_token != b->limits.per_token ||
        a->limits.header_seconds != b->limits.header_seconds ||
        a->limits.idle_seconds != b->limits.idle_seconds ||
        a->limits.spool_bytes != b->limits.spool_bytes)
        add_key(out, outsz, "limits");
    if (str_differ(ca->socket, cb->socket) || str_differ(ca->url, cb->url) ||
        ca->max_ttl != cb->max_ttl || list_differ(ca->users, ca->nusers, cb->users, cb->nusers) ||
        list_differ(ca->groups, ca->ngroups, cb->groups, cb->ngroups))
        add_key(out, outsz, "control");
    if (a->approvals.expire != b->approvals.expire)
        add_key(out, outsz, "approvals");
}
