/*
 * Loading the gateway's JSON configuration into the read-only model of
 * config.h. Validation is strict on purpose: an unknown key, a pattern that
 * can never match or an upstream directory that is not there is an error at
 * startup, because a typo that silently drops a deny rule is worse than a
 * gateway that refuses to start. Every message names the file, the key path
 * (`rules[2].actions[1]`) and what is wrong with it. This file holds the
 * top level (listen, default, limits) and the entry points; the sections
 * live in keypath.c, upstreams.c, rules.c and services.c.
 */
#include "config/config_int.h"

#include "util/glob.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/text.h"
#include "util/buf.h"
#include "util/fs.h"

/* ------------------------------------------------------------------------ */
/* Top-level scalars                                                        */
/* ------------------------------------------------------------------------ */

static int parse_port(unsigned *out, const char *s)
{
    unsigned long v = 0;
    size_t n = 0;

    for (; s[n] >= '0' && s[n] <= '9'; n++) {
        v = v * 10 + (unsigned long)(s[n] - '0');
        if (v > 65535)
            return -1;
    }
    if (n == 0 || s[n] != '\0')
        return -1;
    *out = (unsigned)v;
    return 0;
}

/*
 * "host:port" with a numeric IPv4 host or "[v6]:port". Names such as
 * localhost are refused: they may resolve to several addresses, and which
 * one the gateway binds should not depend on the resolver.
 */
int cfg_parse_listen(char **out_host, unsigned *out_port, const parse_ctx *ctx, const char *key,
                     const char *s)
{
    const char *colon, *hstart;
    unsigned char addr[16];
    char host[64];
    size_t hlen;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');

        if (close == NULL || close[1] != ':')
            return cfg_fail(ctx, key, "\"%s\" is not host:port (write [::1]:8470)", s);
        hstart = s + 1;
        hlen = (size_t)(close - hstart);
        colon = close + 1;
        if (hlen >= sizeof(host))
            return cfg_fail(ctx, key, "\"%s\": not an IPv6 address", s);
        memcpy(host, hstart, hlen);
        host[hlen] = '\0';
        if (inet_pton(AF_INET6, host, addr) != 1)
            return cfg_fail(ctx, key, "\"%s\": \"%s\" is not an IPv6 address", s, host);
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return cfg_fail(ctx, key, "\"%s\" is not host:port (write 127.0.0.1:8470)", s);
        hlen = (size_t)(colon - s);
        if (memchr(s, ':', hlen) != NULL)
            return cfg_fail(ctx, key, "\"%s\": put an IPv6 address in brackets, as in [::1]:8470",
                            s);
        if (hlen == 0 || hlen >= sizeof(host))
            return cfg_fail(ctx, key, "\"%s\": missing or bad host (write 127.0.0.1:8470)", s);
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        if (inet_pton(AF_INET, host, addr) != 1)
            return cfg_fail(ctx, key,
                            "\"%s\": \"%s\" is not an IPv4 address (write 127.0.0.1:8470 or "
                            "[::1]:8470)",
                            s, host);
    }
    if (parse_port(out_port, colon + 1) < 0)
        return cfg_fail(ctx, key, "\"%s\": port must be a number from 0 to 65535", s);
    return cfg_dup_string(out_host, ctx, host);
}

int cfg_parse_effect(config_effect *out, const parse_ctx *ctx, const char *key, const char *s)
{
    if (cfg_effect_from_name(out, s) < 0)
        return cfg_fail(ctx, key, "unknown effect \"%s\" (expected allow, deny or ask)", s);
    return 0;
}

static int parse_max_body(config_model *cfg, const parse_ctx *ctx, const json_t *v)
{
    if (!json_is_integer(v))
        return cfg_fail_type(ctx, "max_body_bytes", "an integer (bytes)", v);
    if (json_integer_value(v) <= 0)
        return cfg_fail(ctx, "max_body_bytes", "must be a positive number of bytes, got %lld",
                        (long long)json_integer_value(v));
    cfg->max_body_bytes = (uint64_t)json_integer_value(v);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Limits                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The defaults hold a few thousand idle strangers on one machine while
 * leaving a quarter of the connections to pushers, and give a push's
 * headers ten seconds, which git (that sends them in one write) never
 * comes near.
 */
#define DEFAULT_CONNECTIONS     4096
#define DEFAULT_UNAUTHENTICATED 3072
#define DEFAULT_PER_TOKEN       16
#define DEFAULT_HEADER_SECONDS  10
#define DEFAULT_IDLE_SECONDS    60
#define DEFAULT_SPOOL_BYTES     ((uint64_t)8 * 1024 * 1024 * 1024)
#define DEFAULT_INFLATE_RATIO   100
#define LIMIT_SECONDS_MAX       3600
#define DEFAULT_INSPECT_BYTES   ((uint64_t)4 * 1024 * 1024 * 1024)
#define DEFAULT_INSPECT_SECONDS 300

static const char *const limits_keys[] = {
    "connections", "unauthenticated", "per_token",     "header_seconds",  "idle_seconds",
    "spool_bytes", "inflate_ratio",   "inspect_bytes", "inspect_seconds", NULL,
};
#define LIMITS_KEYS_TEXT                                                                           \
    "connections, unauthenticated, per_token, header_seconds, idle_seconds, spool_bytes, "         \
    "inflate_ratio, inspect_bytes or inspect_seconds"

/* obj[key] as an integer in [min, max], or dflt when absent. */
static int get_limit(uint64_t *out, const parse_ctx *ctx, const json_t *obj, const char *key,
                     uint64_t min, uint64_t max, uint64_t dflt)
{
    char kp[KEYPATH_MAX];
    json_t *v = obj ? json_object_get(obj, key) : NULL;

    *out = dflt;
    if (v == NULL)
        return 0;
    cfg_keypath_key(kp, "limits", key);
    if (!json_is_integer(v))
        return cfg_fail_type(ctx, kp, "an integer", v);
    if (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min ||
        (uint64_t)json_integer_value(v) > max)
        return cfg_fail(ctx, kp, "must be from %llu to %llu, got %lld", (unsigned long long)min,
                        (unsigned long long)max, (long long)json_integer_value(v));
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_limits(config_limits *out, const parse_ctx *ctx, const json_t *obj)
{
    uint64_t conns, unauth, per_token, header, idle, spool, ratio, ibytes, isecs;
    int rc;

    if (obj != NULL && !json_is_object(obj))
        return cfg_fail_type(ctx, "limits", "an object", obj);
    if (obj != NULL && (rc = cfg_check_keys(ctx, obj, "limits", limits_keys, LIMITS_KEYS_TEXT)) < 0)
        return rc;
    /* A thread and a descriptor each: past a million the kernel is the limit. */
    rc = get_limit(&conns, ctx, obj, "connections", 2, 1 << 20, DEFAULT_CONNECTIONS);
    if (rc == 0)
        rc = get_limit(&unauth, ctx, obj, "unauthenticated", 1, 1 << 20,
                       conns > DEFAULT_UNAUTHENTICATED ? DEFAULT_UNAUTHENTICATED
                                                       : conns - conns / 4);
    /* Without headroom an authenticated pusher could be locked out. */
    if (rc == 0 && unauth >= conns)
        rc = cfg_fail(ctx, "limits.unauthenticated",
                      "must be below limits.connections (%llu) so pushers always get in, got %llu",
                      (unsigned long long)conns, (unsigned long long)unauth);
    if (rc == 0)
        rc = get_limit(&per_token, ctx, obj, "per_token", 1, 1 << 20, DEFAULT_PER_TOKEN);
    if (rc == 0)
        rc = get_limit(&header, ctx, obj, "header_seconds", 1, LIMIT_SECONDS_MAX,
                       DEFAULT_HEADER_SECONDS);
    if (rc == 0)
        rc = get_limit(&idle, ctx, obj, "idle_seconds", 1, LIMIT_SECONDS_MAX, DEFAULT_IDLE_SECONDS);
    /* Below a megabyte not even a small push could be inspected. */
    if (rc == 0)
        rc = get_limit(&spool, ctx, obj, "spool_bytes", 1 << 20, INT64_MAX, DEFAULT_SPOOL_BYTES);
    /* A git request is mostly an already compressed pack, so gzip shrinks it
     * little: only a crafted body needs a ratio near the bound. */
    if (rc == 0)
        rc = get_limit(&ratio, ctx, obj, "inflate_ratio", 2, 100000, DEFAULT_INFLATE_RATIO);
    /* Content conditions read every object of a push: a zlib or delta bomb
     * stops at these, and the push is then denied (fail closed). */
    if (rc == 0)
        rc = get_limit(&ibytes, ctx, obj, "inspect_bytes", 1 << 20, INT64_MAX,
                       DEFAULT_INSPECT_BYTES);
    if (rc == 0)
        rc = get_limit(&isecs, ctx, obj, "inspect_seconds", 1, LIMIT_SECONDS_MAX,
                       DEFAULT_INSPECT_SECONDS);
    if (rc < 0)
        return rc;
    *out = (config_limits){
        .connections = (unsigned)conns,
        .unauthenticated = (unsigned)unauth,
        .per_token = (unsigned)per_token,
        .header_seconds = (unsigned)header,
        .idle_seconds = (unsigned)idle,
        .spool_bytes = spool,
        .inflate_ratio = (unsigned)ratio,
        .inspect_bytes = ibytes,
        .inspect_seconds = (unsigned)isecs,
    };
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

static const char *const top_keys[] = {
    "listen",  "state_dir", "default", "max_body_bytes", "limits",  "control", "approvals", "admin",
    "console", "upstreams", "rules",   "secrets",        "signing", "state",   NULL,
};
#define TOP_KEYS_TEXT                                                                              \
    "listen, state_dir, default, max_body_bytes, limits, control, approvals, admin, console, "     \
    "upstreams, rules, secrets, signing or state"

/* Whether a rule has condition `c`: its scanner is compiled only then. */
static int any_rule_wants(const config_model *cfg, config_condition c)
{
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].cond.set & (unsigned)c)
            return 1;
    return 0;
}

static int parse_root(config_model *cfg, const parse_ctx *ctx, const json_t *root)
{
    const char *s;
    json_t *v;
    int rc;

    if (!json_is_object(root))
        return cfg_fail(ctx, NULL, "expected a JSON object at the top level, got %s",
                        cfg_json_kind(root));
    rc = cfg_check_keys(ctx, root, NULL, top_keys, TOP_KEYS_TEXT);
    if (rc < 0)
        return rc;

    rc = cfg_get_string(&s, ctx, root, NULL, "listen", 0, NULL);
    if (rc == 0 && s != NULL)
        rc = cfg_parse_listen(&cfg->listen_host, &cfg->listen_port, ctx, "listen", s);
    if (rc == 0 && s == NULL) {
        cfg->listen_port = DEFAULT_LISTEN_PORT;
        rc = cfg_dup_string(&cfg->listen_host, ctx, DEFAULT_LISTEN_HOST);
    }
    if (rc < 0)
        return rc;

    rc = cfg_get_string(&s, ctx, root, NULL, "state_dir", 1,
                        "(the directory for keys, the audit log and the url file)");
    if (rc == 0 && cfg_path_absolute(&cfg->state_dir, ctx->dir, s) < 0)
        rc = cfg_fail_oom(ctx);
    if (rc < 0)
        return rc;

    /* Fail closed: with no default, what no rule allows is refused. */
    cfg->default_effect = CONFIG_DENY;
    rc = cfg_get_string(&s, ctx, root, NULL, "default", 0, NULL);
    if (rc == 0 && s != NULL)
        rc = cfg_parse_effect(&cfg->default_effect, ctx, "default", s);
    if (rc < 0)
        return rc;

    cfg->max_body_bytes = DEFAULT_MAX_BODY;
    v = json_object_get(root, "max_body_bytes");
    if (v != NULL && (rc = parse_max_body(cfg, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "limits");
    if ((rc = parse_limits(&cfg->limits, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "control");
    if ((rc = cfg_parse_control(&cfg->control, cfg, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "approvals");
    if ((rc = cfg_parse_approvals(&cfg->approvals, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "admin");
    if ((rc = cfg_parse_admin(&cfg->admin, cfg, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "console");
    if ((rc = cfg_parse_console(&cfg->console, cfg, ctx, v)) < 0)
        return rc;

    /* Upstreams first: rules check their repo patterns against the hosts. */
    v = json_object_get(root, "upstreams");
    if (v != NULL && (rc = cfg_parse_upstreams(cfg, ctx, v)) < 0)
        return rc;
    v = json_object_get(root, "rules");
    if (v != NULL && (rc = cfg_parse_rules(cfg, ctx, v)) < 0)
        return rc;
    rc = config_state_parse(&cfg->state, json_object_get(root, "state"), ctx->file, ctx->dir,
                            ctx->err);
    if (rc == 0)
        rc = config_secrets_parse(&cfg->secrets, json_object_get(root, "secrets"),
                                  any_rule_wants(cfg, CONFIG_COND_SECRETS), ctx->file, ctx->err);
    if (rc == 0)
        rc = config_signing_parse(&cfg->signing, json_object_get(root, "signing"), ctx->file,
                                  ctx->dir, ctx->err);
    /* A rule that no signature could ever satisfy is a mistake, not a policy. */
    for (size_t i = 0; rc == 0 && i < cfg->nrules; i++) {
        char kp[KEYPATH_MAX];

        if (!(cfg->rules[i].cond.set & CONFIG_COND_UNSIGNED) || cfg->signing.allowed_signers ||
            cfg->signing.gpg_keyring)
            continue;
        snprintf(kp, sizeof(kp), "rules[%zu].unsigned", i);
        rc = cfg_fail(ctx, kp,
                      "no key to verify signatures against: set signing.allowed_signers or "
                      "signing.gpg_keyring");
    }
    return rc;
}

/*
 * Load the model from `root` (borrowed; the model keeps a reference): the
 * file is `path`, and messages name `label`.
 */
static int parse_tree(config_model **out, json_t *root, const char *path, const char *label,
                      rg_error *err)
{
    config_model *cfg = NULL;
    json_t *policy = NULL;
    char *dir = NULL;
    parse_ctx ctx;
    int rc;

    *out = NULL;
    ctx.file = label;
    ctx.dir = NULL;
    ctx.err = err;
    cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL) {
        rc = cfg_fail_oom(&ctx);
        goto done;
    }
    rc = config_locate(&cfg->path, &dir, path, err);
    if (rc < 0)
        goto done;
    ctx.dir = dir;
    rc = parse_root(cfg, &ctx, root);
    if (rc < 0)
        goto done;
    rc = config_policy_extract(&policy, root, err);
    if (rc == 0)
        rc = config_policy_digest(cfg->policy_digest, policy, err);
    if (rc < 0)
        goto done;
    cfg->source = json_incref(root);
    *out = cfg;
    cfg = NULL;
done:
    json_decref(policy);
    config_free(cfg);
    free(dir);
    return rc;
}

int config_parse(config_model **out, const char *json, size_t len, const char *path, rg_error *err)
{
    json_t *root;
    json_error_t jerr;
    int rc;

    *out = NULL;
    if (json == NULL || path == NULL)
        return rg_error_set(err, -EINVAL, "config_parse: no %s given", json ? "path" : "text");
    /* A repeated key would otherwise let the later value win unseen. */
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return rg_error_set(err, RG_E_CONFIG, "%s:%d:%d: invalid JSON: %s", path, jerr.line,
                            jerr.column, jerr.text);
    rc = parse_tree(out, root, path, path, err);
    json_decref(root);
    return rc;
}

int config_with_policy(config_model **out, const config_model *local, const json_t *policy,
                       const char *label, long long version, rg_error *err)
{
    json_t *root;
    const char *key;
    json_t *v;
    int rc = 0;

    *out = NULL;
    if (local == NULL || local->source == NULL || !json_is_object(policy))
        return rg_error_set(err, -EINVAL, "config_with_policy: missing argument");
    /* Shallow: the values are shared and never changed, only the keys. */
    root = json_copy(local->source);
    if (root == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; config_policy_keys[i] != NULL; i++)
        json_object_del(root, config_policy_keys[i]);
    json_object_foreach((json_t *)policy, key, v)
    {
        /* A policy never sets what is the host's. */
        if (!config_policy_is_key(key)) {
            rc = rg_error_set(err, RG_E_CONFIG, "%s: \"%s\" is not a policy key", label, key);
            break;
        }
        if (json_object_set(root, key, v) < 0) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            break;
        }
    }
    if (rc == 0)
        rc = parse_tree(out, root, local->path, label, err);
    if (rc == 0)
        (*out)->policy_version = version;
    json_decref(root);
    return rc;
}

int config_load(config_model **out, const char *path, rg_error *err)
{
    rg_buf text = RG_BUF_INIT(CONFIG_MAX_BYTES);
    int rc;

    *out = NULL;
    if (path == NULL)
        return rg_error_set(err, -EINVAL, "config_load: no path given");
    rc = rg_fs_read_file(&text, path, err);
    if (rc == 0)
        rc = config_parse(out, text.data, text.len, path, err);
    rg_buf_free(&text);
    return rc;
}

void cfg_free_strings(char **v, size_t n)
{
    size_t i;

    if (v == NULL)
        return;
    for (i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void config_free(config_model *cfg)
{
    size_t i;

    if (cfg == NULL)
        return;
    for (i = 0; i < cfg->nupstreams; i++) {
        free(cfg->upstreams[i].host);
        free(cfg->upstreams[i].url);
        free(cfg->upstreams[i].root);
        cfg_free_credentials(&cfg->upstreams[i].credentials);
        cfg_free_credentials(&cfg->upstreams[i].read_credentials);
        free(cfg->upstreams[i].ca_file);
    }
    free(cfg->upstreams);
    for (i = 0; i < cfg->nrules; i++) {
        free(cfg->rules[i].name);
        cfg_free_strings(cfg->rules[i].repos, cfg->rules[i].nrepos);
        cfg_free_strings(cfg->rules[i].refs, cfg->rules[i].nrefs);
        cfg_free_strings(cfg->rules[i].runs, cfg->rules[i].nruns);
        free(cfg->rules[i].repos_ends);
        free(cfg->rules[i].refs_ends);
        free(cfg->rules[i].runs_ends);
        free(cfg->rules[i].reason);
        config_conditions_free(&cfg->rules[i].cond);
    }
    free(cfg->rules);
    config_secrets_free(&cfg->secrets);
    config_signing_free(&cfg->signing);
    config_state_free(&cfg->state);
    free(cfg->control.socket);
    cfg_free_strings(cfg->control.users, cfg->control.nusers);
    cfg_free_strings(cfg->control.groups, cfg->control.ngroups);
    free(cfg->control.url);
    free(cfg->console.listen_host);
    free(cfg->path);
    free(cfg->listen_host);
    free(cfg->admin.listen_host);
    free(cfg->state_dir);
    json_decref(cfg->source);
    free(cfg);
}

const config_upstream *config_find_upstream(const config_model *cfg, const char *host)
{
    size_t i;

    if (cfg == NULL || host == NULL)
        return NULL;
    for (i = 0; i < cfg->nupstreams; i++)
        if (!strcmp(cfg->upstreams[i].host, host))
            return &cfg->upstreams[i];
    return NULL;
}
