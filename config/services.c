/*
 * The config's services beside the gateway: the control socket (who may
 * mint and revoke tokens over it), approvals, the admin listener and the
 * review console.
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
/* The control socket                                                       */
/* ------------------------------------------------------------------------ */

/* The default cap on a token minted over the control socket: a working day. */
#define DEFAULT_CONTROL_MAX_TTL (12 * 3600)
/* As tokens/token.h's TOKENS_TTL_MAX: config/ does not depend on tokens/. */
#define CONTROL_MAX_TTL_CAP (7 * 24 * 3600)
/* sizeof(sockaddr_un.sun_path) on Linux, its terminating NUL included. */
#define CONTROL_SOCKET_PATH_MAX 108
/* Enough for every user and group a team would name. */
#define CONTROL_NAMES_MAX 256

/*
 * control.users / control.groups: names (as getpwnam would take them) or
 * decimal ids, checked for shape only; whether they exist is the gateway's
 * business at connect time, so a config stays valid on a machine where the
 * account is created later.
 */
static int parse_principals(char ***out, size_t *nout, const parse_ctx *ctx, const json_t *arr,
                            const char *key)
{
    char kp[KEYPATH_MAX], ikp[KEYPATH_MAX];
    const char *s;
    size_t i, n;
    char **v = NULL;
    int rc = 0;

    *out = NULL;
    *nout = 0;
    cfg_keypath_key(kp, "control", key);
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return cfg_fail_type(ctx, kp, "an array of names or ids", arr);
    n = json_array_size(arr);
    if (n > CONTROL_NAMES_MAX)
        return cfg_fail(ctx, kp, "at most %d entries, got %zu", CONTROL_NAMES_MAX, n);
    if (n == 0)
        return 0;
    v = calloc(n, sizeof(*v));
    if (v == NULL)
        return cfg_fail_oom(ctx);
    for (i = 0; i < n && rc == 0; i++) {
        json_t *e = json_array_get(arr, i);
        size_t j;

        cfg_keypath_index(ikp, kp, i);
        if (!json_is_string(e)) {
            rc = cfg_fail_type(ctx, ikp, "a string (a name or a numeric id)", e);
            break;
        }
        s = json_string_value(e);
        if (*s == '\0' || strlen(s) > 64) {
            rc = cfg_fail(ctx, ikp, "expected a name or a numeric id of 1 to 64 characters");
            break;
        }
        /* The portable name set (POSIX 3.437) plus '$' for machine accounts. */
        for (j = 0; s[j] != '\0'; j++)
            if (!isalnum((unsigned char)s[j]) && !strchr("._-$", s[j]))
                break;
        if (s[j] != '\0' || s[0] == '-') {
            rc = cfg_fail(ctx, ikp, "\"%s\" is not a user or group name or a numeric id", s);
            break;
        }
        rc = cfg_dup_string(&v[i], ctx, s);
    }
    if (rc < 0) {
        cfg_free_strings(v, n);
        return rc;
    }
    *out = v;
    *nout = n;
    return 0;
}

static const char *const control_keys[] = {"socket", "users", "groups", "max_ttl", "url", NULL};
#define CONTROL_KEYS_TEXT "socket, users, groups, max_ttl or url"

int cfg_parse_control(config_control *out, const config_model *cfg, const parse_ctx *ctx,
                      const json_t *obj)
{
    const char *s = NULL;
    json_t *v;
    int rc = 0;

    out->max_ttl = DEFAULT_CONTROL_MAX_TTL;
    if (obj != NULL && !json_is_object(obj))
        return cfg_fail_type(ctx, "control", "an object", obj);
    if (obj != NULL &&
        (rc = cfg_check_keys(ctx, obj, "control", control_keys, CONTROL_KEYS_TEXT)) < 0)
        return rc;
    if (obj != NULL && (rc = cfg_get_string(&s, ctx, obj, "control", "socket", 0, NULL)) < 0)
        return rc;
    if (s != NULL) {
        if (cfg_path_absolute(&out->socket, ctx->dir, s) < 0)
            return cfg_fail_oom(ctx);
    } else if (asprintf(&out->socket, "%s/control.sock", cfg->state_dir) < 0) {
        out->socket = NULL;
        return cfg_fail_oom(ctx);
    }
    /* bind(2) would cut a longer path silently, or fail far from here. A
     * default that does not fit (a deep state_dir) leaves the socket off
     * rather than refuse a config that loaded before the socket existed. */
    if (strlen(out->socket) >= CONTROL_SOCKET_PATH_MAX && s == NULL) {
        free(out->socket);
        out->socket = NULL;
    } else if (strlen(out->socket) >= CONTROL_SOCKET_PATH_MAX) {
        return cfg_fail(ctx, "control.socket",
                        "%s is %zu bytes, longer than a unix socket path may be (%d)", out->socket,
                        strlen(out->socket), CONTROL_SOCKET_PATH_MAX - 1);
    }
    if (obj == NULL)
        return 0;
    rc = parse_principals(&out->users, &out->nusers, ctx, json_object_get(obj, "users"), "users");
    if (rc == 0)
        rc = parse_principals(&out->groups, &out->ngroups, ctx, json_object_get(obj, "groups"),
                              "groups");
    if (rc < 0)
        return rc;
    v = json_object_get(obj, "max_ttl");
    if (v != NULL) {
        long long ttl = -1;

        if (json_is_integer(v))
            ttl = json_integer_value(v);
        else if (json_is_string(v))
            ttl = rg_duration_parse(json_string_value(v));
        else
            return cfg_fail_type(ctx, "control.max_ttl", "a duration (3600, \"30m\", \"12h\")", v);
        if (ttl < 1 || ttl > CONTROL_MAX_TTL_CAP)
            return cfg_fail(ctx, "control.max_ttl",
                            "expected 1 second to 7 days (e.g. 3600, \"30m\", \"12h\", \"7d\")");
        out->max_ttl = ttl;
    }
    rc = cfg_get_string(&s, ctx, obj, "control", "url", 0, NULL);
    if (rc == 0 && s != NULL) {
        /* Runs reach the gateway on loopback over plain HTTP; anything else
         * is a typo that would send the run token elsewhere. */
        if (strncmp(s, "http://", 7) != 0 || strlen(s) > 200 || !cfg_is_one_line(s) ||
            strchr(s + 7, '@') != NULL)
            return cfg_fail(ctx, "control.url",
                            "expected the gateway's http:// URL, e.g. http://127.0.0.1:8470");
        rc = cfg_dup_string(&out->url, ctx, s);
        /* Without a trailing '/' so that <url>/<host>/ is one slash. */
        while (rc == 0 && strlen(out->url) > 7 && out->url[strlen(out->url) - 1] == '/')
            out->url[strlen(out->url) - 1] = '\0';
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Approvals                                                                */
/* ------------------------------------------------------------------------ */

/* An approval nobody decides (or nobody uses) goes away after a day. */
#define APPROVALS_EXPIRE_DEFAULT (24 * 3600)
#define APPROVALS_EXPIRE_CAP     (30 * 24 * 3600)

static const char *const approvals_keys[] = {"expire", NULL};
#define APPROVALS_KEYS_TEXT "expire"

int cfg_parse_approvals(config_approvals *out, const parse_ctx *ctx, const json_t *obj)
{
    const json_t *v;
    long long secs = -1;
    int rc;

    out->expire = APPROVALS_EXPIRE_DEFAULT;
    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return cfg_fail_type(ctx, "approvals", "an object", obj);
    if ((rc = cfg_check_keys(ctx, obj, "approvals", approvals_keys, APPROVALS_KEYS_TEXT)) < 0)
        return rc;
    v = json_object_get(obj, "expire");
    if (v == NULL)
        return 0;
    if (json_is_integer(v))
        secs = json_integer_value(v);
    else if (json_is_string(v))
        secs = rg_duration_parse(json_string_value(v));
    else
        return cfg_fail_type(ctx, "approvals.expire", "a duration (3600, \"30m\", \"24h\")", v);
    if (secs < 1 || secs > APPROVALS_EXPIRE_CAP)
        return cfg_fail(ctx, "approvals.expire",
                        "expected 1 second to 30 days (e.g. 3600, \"30m\", \"24h\", \"7d\")");
    out->expire = secs;
    return 0;
}

static const char *const admin_keys[] = {"listen", NULL};
#define ADMIN_KEYS_TEXT "listen"

/* The admin listener is the operator's: never the port the runs push to. */
int cfg_parse_admin(config_admin *out, const config_model *cfg, const parse_ctx *ctx,
                    const json_t *obj)
{
    const char *s;
    int rc;

    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return cfg_fail_type(ctx, "admin", "an object", obj);
    if ((rc = cfg_check_keys(ctx, obj, "admin", admin_keys, ADMIN_KEYS_TEXT)) < 0)
        return rc;
    rc =
        cfg_get_string(&s, ctx, obj, "admin", "listen", 1, "(HOST:PORT for /healthz and /metrics)");
    if (rc == 0)
        rc = cfg_parse_listen(&out->listen_host, &out->listen_port, ctx, "admin.listen", s);
    if (rc == 0 && out->listen_port != 0 && out->listen_port == cfg->listen_port &&
        !strcmp(out->listen_host, cfg->listen_host))
        rc = cfg_fail(ctx, "admin.listen",
                      "is the push address \"listen\": the admin listener needs a port of its own");
    return rc;
}

static const char *const console_keys[] = {"listen", NULL};
#define CONSOLE_KEYS_TEXT "listen"

/* The review console is off unless it has a listen address of its own. */
int cfg_parse_console(config_console *out, const config_model *cfg, const parse_ctx *ctx,
                      const json_t *obj)
{
    const char *s = NULL;
    int rc;

    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return cfg_fail_type(ctx, "console", "an object", obj);
    if ((rc = cfg_check_keys(ctx, obj, "console", console_keys, CONSOLE_KEYS_TEXT)) < 0 ||
        (rc = cfg_get_string(&s, ctx, obj, "console", "listen", 1,
                             "(host:port the console serves on, e.g. 127.0.0.1:8471)")) < 0 ||
        (rc = cfg_parse_listen(&out->listen_host, &out->listen_port, ctx, "console.listen", s)) < 0)
        return rc;
    /* Never the push port: a run token's holder must not reach the console. */
    if (out->listen_port != 0 && out->listen_port == cfg->listen_port)
        return cfg_fail(ctx, "console.listen",
                        "\"%s\": the console needs a port of its own, not the gateway's (%u)", s,
                        cfg->listen_port);
    return 0;
}
