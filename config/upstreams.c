/*
 * The config's upstreams: where each host's repositories live (a remote
 * URL or a local directory), and the credentials the gateway reads and
 * writes them with (none, a static token file, a GitHub App).
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
/* Upstreams                                                                */
/* ------------------------------------------------------------------------ */

static const char *const upstream_keys[] = {
    "host",         "url", "credentials", "read_credentials", "ca_file", "connect_timeout",
    "idle_timeout", NULL,
};
#define UPSTREAM_KEYS_TEXT                                                                         \
    "host, url, credentials, read_credentials, ca_file, connect_timeout or idle_timeout"

/*
 * Keys only a forwarding (http/https) upstream can use; a local upstream
 * that carries one is refused rather than silently ignoring it.
 */
static const char *const remote_only_keys[] = {
    "credentials", "read_credentials", "ca_file", "connect_timeout", "idle_timeout", NULL,
};

#define DEFAULT_CONNECT_TIMEOUT 10
#define DEFAULT_IDLE_TIMEOUT    60
/* A timeout past an hour is a typo (milliseconds meant) rather than a wish. */
#define TIMEOUT_MAX 3600

#define DEFAULT_API_URL   "https://api.github.com"
#define DEFAULT_CRED_USER "x-access-token"
#define CRED_USER_MAX_LEN 100
#define URL_MAX_LEN       2048

/*
 * The host is the first URL path segment and becomes part of rule and
 * token names, so it is one plain segment. A leading dot is refused as the
 * router refuses it.
 */
static int check_host(const parse_ctx *ctx, const char *kp, const char *host)
{
    const char *p;

    if (strlen(host) > HOST_MAX_LEN)
        return cfg_fail(ctx, kp, "longer than %d characters", HOST_MAX_LEN);
    if (host[0] == '.')
        return cfg_fail(ctx, kp, "\"%s\" must not start with a dot", host);
    for (p = host; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '.' || *p == '_' || *p == '-')
            continue;
        return cfg_fail(
            ctx, kp, "\"%s\" must be one path segment of letters, digits, '.', '_' or '-'", host);
    }
    return 0;
}

/* Decode %XX escapes of a file URL path into a malloc'd string. */
static int url_decode_path(char **out, const parse_ctx *ctx, const char *kp, const char *s)
{
    char *d = malloc(strlen(s) + 1), *w = d;
    int hi, lo;

    *out = NULL;
    if (d == NULL)
        return cfg_fail_oom(ctx);
    for (; *s; s++) {
        if (*s != '%') {
            *w++ = *s;
            continue;
        }
        hi = rg_hex_digit(s[1]);
        lo = hi < 0 ? -1 : rg_hex_digit(s[2]);
        if (lo < 0 || (hi == 0 && lo == 0)) {
            free(d);
            return cfg_fail(ctx, kp, "bad %%-escape in file URL");
        }
        *w++ = (char)(hi * 16 + lo);
        s += 2;
    }
    *w = '\0';
    *out = d;
    return 0;
}

/*
 * A local upstream must exist now: discovering at the first push that the
 * root is missing would turn a config mistake into confusing push errors.
 */
static int resolve_local_root(config_upstream *up, const parse_ctx *ctx, const char *kp,
                              const char *path)
{
    char *joined = cfg_path_join(ctx->dir, path);
    struct stat st;
    int rc = 0;

    if (joined == NULL)
        return cfg_fail_oom(ctx);
    up->root = realpath(joined, NULL);
    if (up->root == NULL) {
        cfg_path_normalize(joined);
        if (errno == ENOENT)
            rc = cfg_fail(ctx, kp, "upstream directory %s does not exist", joined);
        else if (errno == ENOMEM)
            rc = cfg_fail_oom(ctx);
        else
            rc = cfg_fail(ctx, kp, "upstream directory %s: %s", joined, strerror(errno));
        goto done;
    }
    if (stat(up->root, &st) < 0) {
        rc = cfg_fail(ctx, kp, "upstream directory %s: %s", up->root, strerror(errno));
        goto done;
    }
    if (!S_ISDIR(st.st_mode))
        rc = cfg_fail(ctx, kp, "upstream %s is not a directory", up->root);
done:
    free(joined);
    return rc;
}

/*
 * Accepted forms: `file:///abs/dir`, a plain directory path (relative to
 * the config file), and `http://` or `https://` URLs, which are forwarded to.
 * Sets *remote to 1 for the latter.
 */
static int parse_upstream_url(config_upstream *up, int *remote, const parse_ctx *ctx,
                              const char *kp, const char *url)
{
    const char *sep = strstr(url, "://");
    char *path = NULL;
    int rc;

    *remote = 0;
    if (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8)) {
        if (sep[3] == '\0' || sep[3] == '/')
            return cfg_fail(ctx, kp, "\"%s\" has no host name", url);
        *remote = 1;
        return 0;
    }
    if (!strncasecmp(url, "file://", 7)) {
        if (url[7] != '/')
            return cfg_fail(ctx, kp,
                            "\"%s\": a file URL needs an absolute path (file:///srv/git); write a "
                            "relative directory without file://",
                            url);
        rc = url_decode_path(&path, ctx, kp, url + 7);
        if (rc == 0)
            rc = resolve_local_root(up, ctx, kp, path);
        free(path);
        return rc;
    }
    if (sep != NULL)
        return cfg_fail(ctx, kp,
                        "unsupported URL scheme \"%.*s\" (expected file://, http://, https:// or a "
                        "directory path)",
                        (int)(sep - url), url);
    /* "git@host:path" would otherwise be read as a relative directory. */
    if (strchr(url, ':') != NULL && strchr(url, ':') < strchrnul(url, '/'))
        return cfg_fail(ctx, kp,
                        "\"%s\" looks like an scp-style address; only directories, file://, "
                        "http:// and https:// URLs are supported",
                        url);
    return resolve_local_root(up, ctx, kp, url);
}

/* ------------------------------------------------------------------------ */
/* Credentials                                                              */
/* ------------------------------------------------------------------------ */

static const char *const cred_none_keys[] = {"type", NULL};
static const char *const cred_static_keys[] = {"type", "username", "token_file", NULL};
static const char *const cred_app_keys[] = {
    "type", "app_id", "private_key_file", "api_url", "installation_id", NULL,
};

/*
 * A secret file's absolute path. Unlike directories it is not resolved
 * through symlinks: secret stores (Kubernetes, systemd credentials) rotate
 * a file by swapping a symlink, and the provider should follow the swap.
 */
static int secret_path(char **out, const parse_ctx *ctx, const char *rel)
{
    *out = cfg_path_join(ctx->dir, rel);
    if (*out == NULL)
        return cfg_fail_oom(ctx);
    cfg_path_normalize(*out);
    return 0;
}

/* A positive integer at obj[key]; *out stays 0 when absent and optional. */
static int get_positive_id(long long *out, const parse_ctx *ctx, const json_t *obj,
                           const char *parent, const char *key, int required, const char *hint)
{
    char kp[KEYPATH_MAX];
    json_t *v = json_object_get(obj, key);

    *out = 0;
    cfg_keypath_key(kp, parent, key);
    if (v == NULL)
        return required ? cfg_fail(ctx, kp, "required key is missing %s", hint) : 0;
    if (!json_is_integer(v))
        return cfg_fail_type(ctx, kp, "a positive integer", v);
    if (json_integer_value(v) <= 0)
        return cfg_fail(ctx, kp, "must be a positive integer, got %lld",
                        (long long)json_integer_value(v));
    *out = (long long)json_integer_value(v);
    return 0;
}

/*
 * An http(s) URL with a host and nothing a secret or a surprise could hide
 * in: no user info (credentials go in "credentials"), no query, no
 * fragment. Trailing slashes are dropped so paths can be appended.
 */
static int parse_http_url(char **out, const parse_ctx *ctx, const char *kp, const char *url)
{
    const char *sep = strstr(url, "://"), *host;
    size_t len, hostlen;

    *out = NULL;
    if (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8))
        return cfg_fail(ctx, kp, "\"%s\" is not an http:// or https:// URL", url);
    if (strlen(url) > URL_MAX_LEN)
        return cfg_fail(ctx, kp, "longer than %d characters", URL_MAX_LEN);
    if (!cfg_is_one_line(url) || strchr(url, ' ') != NULL)
        return cfg_fail(ctx, kp, "must not contain spaces or control characters");
    host = sep + 3;
    hostlen = strcspn(host, "/");
    if (hostlen == 0)
        return cfg_fail(ctx, kp, "\"%s\" has no host name", url);
    if (memchr(host, '@', hostlen) != NULL)
        return cfg_fail(
            ctx, kp, "a URL must not carry a user name or password (put them in \"credentials\")");
    if (strpbrk(host, "?#") != NULL)
        return cfg_fail(ctx, kp, "\"%s\": a query or fragment has no place here", url);
    len = strlen(url);
    while (len > (size_t)(host - url) + hostlen && url[len - 1] == '/')
        len--;
    *out = strndup(url, len);
    return *out ? 0 : cfg_fail_oom(ctx);
}

static int parse_cred_static(config_credentials *c, const parse_ctx *ctx, const json_t *obj,
                             const char *kp)
{
    char sub[KEYPATH_MAX];
    const char *user = NULL, *file = NULL;
    int rc;

    c->type = CONFIG_CRED_STATIC;
    rc = cfg_check_keys(ctx, obj, kp, cred_static_keys, "type, username or token_file");
    if (rc == 0)
        rc = cfg_get_string(&user, ctx, obj, kp, "username", 0, NULL);
    if (rc == 0 && user != NULL) {
        rc = cfg_check_text(ctx, kp, "username", user, CRED_USER_MAX_LEN);
        /* HTTP Basic splits user from password at the first colon. */
        if (rc == 0 && strchr(user, ':') != NULL) {
            cfg_keypath_key(sub, kp, "username");
            rc = cfg_fail(ctx, sub, "must not contain ':' (HTTP Basic cannot carry it)");
        }
    }
    if (rc == 0)
        rc = cfg_dup_string(&c->username, ctx, user ? user : DEFAULT_CRED_USER);
    if (rc == 0)
        rc = cfg_get_string(&file, ctx, obj, kp, "token_file", 1,
                            "(the file holding the token; keep it chmod 600)");
    if (rc == 0)
        rc = secret_path(&c->token_file, ctx, file);
    return rc;
}

static int parse_cred_github_app(config_credentials *c, const parse_ctx *ctx, const json_t *obj,
                                 const char *kp)
{
    char sub[KEYPATH_MAX];
    const char *file = NULL, *api = NULL;
    int rc;

    c->type = CONFIG_CRED_GITHUB_APP;
    rc = cfg_check_keys(ctx, obj, kp, cred_app_keys,
                        "type, app_id, private_key_file, api_url or installation_id");
    if (rc == 0)
        rc = get_positive_id(&c->app_id, ctx, obj, kp, "app_id", 1,
                             "(the GitHub App's numeric id, from its settings page)");
    if (rc == 0)
        rc = cfg_get_string(&file, ctx, obj, kp, "private_key_file", 1,
                            "(the App's PEM private key; keep it chmod 600)");
    if (rc == 0)
        rc = secret_path(&c->private_key_file, ctx, file);
    if (rc == 0)
        rc = cfg_get_string(&api, ctx, obj, kp, "api_url", 0, NULL);
    if (rc == 0) {
        cfg_keypath_key(sub, kp, "api_url");
        rc = parse_http_url(&c->api_url, ctx, sub, api ? api : DEFAULT_API_URL);
    }
    if (rc == 0)
        rc = get_positive_id(&c->installation_id, ctx, obj, kp, "installation_id", 0, NULL);
    return rc;
}

/*
 * One credentials object. The string "none" is accepted as shorthand; any
 * other string is refused with a pointer to the object form, because a
 * string there is most likely a token pasted into the config.
 */
static int parse_credentials(config_credentials *c, const parse_ctx *ctx, const json_t *v,
                             const char *kp)
{
    char sub[KEYPATH_MAX];
    const char *type = NULL;
    int rc;

    memset(c, 0, sizeof(*c));
    if (json_is_string(v)) {
        if (!strcmp(json_string_value(v), "none"))
            return 0;
        return cfg_fail(ctx, kp,
                        "a string here can only be \"none\"; write an object such as "
                        "{\"type\": \"static\", \"token_file\": \"...\"} (secrets belong in files, "
                        "not in the config)");
    }
    if (!json_is_object(v))
        return cfg_fail_type(ctx, kp, "an object or a string", v);
    rc = cfg_get_string(&type, ctx, v, kp, "type", 1, "(expected none, static or github-app)");
    if (rc < 0)
        return rc;
    if (!strcmp(type, "none")) {
        c->type = CONFIG_CRED_NONE;
        return cfg_check_keys(ctx, v, kp, cred_none_keys, "only type");
    }
    if (!strcmp(type, "static"))
        return parse_cred_static(c, ctx, v, kp);
    if (!strcmp(type, "github-app"))
        return parse_cred_github_app(c, ctx, v, kp);
    cfg_keypath_key(sub, kp, "type");
    return cfg_fail(ctx, sub, "unknown type \"%s\" (expected none, static or github-app)", type);
}

void cfg_free_credentials(config_credentials *c)
{
    free(c->username);
    free(c->token_file);
    free(c->private_key_file);
    free(c->api_url);
    memset(c, 0, sizeof(*c));
}

/* A deep copy, so each field has exactly one owner and frees once. */
static int copy_credentials(config_credentials *dst, const parse_ctx *ctx,
                            const config_credentials *src)
{
    *dst = *src;
    dst->username = NULL;
    dst->token_file = NULL;
    dst->private_key_file = NULL;
    dst->api_url = NULL;
    if ((src->username && !(dst->username = strdup(src->username))) ||
        (src->token_file && !(dst->token_file = strdup(src->token_file))) ||
        (src->private_key_file && !(dst->private_key_file = strdup(src->private_key_file))) ||
        (src->api_url && !(dst->api_url = strdup(src->api_url))))
        return cfg_fail_oom(ctx);
    return 0;
}

static int get_seconds(long *out, const parse_ctx *ctx, const json_t *obj, const char *parent,
                       const char *key, long dflt)
{
    char kp[KEYPATH_MAX];
    json_t *v = json_object_get(obj, key);

    *out = dflt;
    if (v == NULL)
        return 0;
    cfg_keypath_key(kp, parent, key);
    if (!json_is_integer(v))
        return cfg_fail_type(ctx, kp, "a whole number of seconds", v);
    if (json_integer_value(v) <= 0)
        return cfg_fail(ctx, kp, "must be a positive number of seconds");
    if (json_integer_value(v) > TIMEOUT_MAX)
        return cfg_fail(ctx, kp, "at most %d seconds", TIMEOUT_MAX);
    *out = (long)json_integer_value(v);
    return 0;
}

/* The keys of a forwarding upstream: credentials, CA file and timeouts. */
static int parse_remote(config_upstream *up, const parse_ctx *ctx, const json_t *obj,
                        const char *parent)
{
    char kp[KEYPATH_MAX];
    const char *ca = NULL;
    json_t *v;
    int rc = 0;

    v = json_object_get(obj, "credentials");
    if (v != NULL) {
        cfg_keypath_key(kp, parent, "credentials");
        rc = parse_credentials(&up->credentials, ctx, v, kp);
    }
    if (rc < 0)
        return rc;
    v = json_object_get(obj, "read_credentials");
    if (v != NULL) {
        cfg_keypath_key(kp, parent, "read_credentials");
        up->has_read_credentials = 1;
        rc = parse_credentials(&up->read_credentials, ctx, v, kp);
    } else {
        rc = copy_credentials(&up->read_credentials, ctx, &up->credentials);
    }
    if (rc == 0)
        rc = cfg_get_string(&ca, ctx, obj, parent, "ca_file", 0, NULL);
    if (rc == 0 && ca != NULL && cfg_path_absolute(&up->ca_file, ctx->dir, ca) < 0)
        rc = cfg_fail_oom(ctx);
    if (rc == 0)
        rc = get_seconds(&up->connect_timeout, ctx, obj, parent, "connect_timeout",
                         DEFAULT_CONNECT_TIMEOUT);
    if (rc == 0)
        rc = get_seconds(&up->idle_timeout, ctx, obj, parent, "idle_timeout", DEFAULT_IDLE_TIMEOUT);
    return rc;
}

static int parse_upstream(config_upstream *up, const parse_ctx *ctx, const json_t *obj,
                          const char *kp)
{
    char sub[KEYPATH_MAX];
    const char *host = NULL, *url = NULL;
    size_t i;
    int rc, remote;

    if (!json_is_object(obj))
        return cfg_fail_type(ctx, kp, "an object with host and url", obj);
    rc = cfg_check_keys(ctx, obj, kp, upstream_keys, UPSTREAM_KEYS_TEXT);
    if (rc == 0)
        rc = cfg_get_string(&host, ctx, obj, kp, "host", 1, NULL);
    if (rc == 0)
        rc = cfg_get_string(&url, ctx, obj, kp, "url", 1, NULL);
    if (rc < 0)
        return rc;
    cfg_keypath_key(sub, kp, "host");
    rc = check_host(ctx, sub, host);
    if (rc == 0)
        rc = cfg_dup_string(&up->host, ctx, host);
    if (rc < 0)
        return rc;
    cfg_keypath_key(sub, kp, "url");
    rc = parse_upstream_url(up, &remote, ctx, sub, url);
    if (rc < 0)
        return rc;
    if (remote) {
        rc = parse_http_url(&up->url, ctx, sub, url);
        if (rc == 0)
            rc = parse_remote(up, ctx, obj, kp);
        return rc;
    }
    for (i = 0; remote_only_keys[i] != NULL; i++) {
        if (json_object_get(obj, remote_only_keys[i]) == NULL)
            continue;
        cfg_keypath_key(sub, kp, remote_only_keys[i]);
        return cfg_fail(ctx, sub, "only http(s) upstreams take this key");
    }
    return cfg_dup_string(&up->url, ctx, url);
}

int cfg_parse_upstreams(config_model *cfg, const parse_ctx *ctx, const json_t *arr)
{
    char kp[KEYPATH_MAX];
    size_t i, j;
    int rc;

    if (!json_is_array(arr))
        return cfg_fail_type(ctx, "upstreams", "an array", arr);
    if (json_array_size(arr) == 0)
        return 0;
    cfg->upstreams = calloc(json_array_size(arr), sizeof(*cfg->upstreams));
    if (cfg->upstreams == NULL)
        return cfg_fail_oom(ctx);
    /* Counted before filling, so a half-built config frees cleanly. */
    cfg->nupstreams = json_array_size(arr);
    for (i = 0; i < cfg->nupstreams; i++) {
        cfg_keypath_index(kp, "upstreams", i);
        rc = parse_upstream(&cfg->upstreams[i], ctx, json_array_get(arr, i), kp);
        if (rc < 0)
            return rc;
        for (j = 0; j < i; j++) {
            if (strcmp(cfg->upstreams[j].host, cfg->upstreams[i].host))
                continue;
            snprintf(kp, sizeof(kp), "upstreams[%zu].host", i);
            return cfg_fail(ctx, kp, "duplicate host \"%s\" (also upstreams[%zu])",
                            cfg->upstreams[i].host, j);
        }
    }
    return 0;
}
