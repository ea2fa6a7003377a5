/*
 * Loading the gateway's JSON configuration into the read-only model of
 * config.h. Validation is strict on purpose: an unknown key, a pattern that
 * can never match or an upstream directory that is not there is an error at
 * startup, because a typo that silently drops a deny rule is worse than a
 * gateway that refuses to start. Every message names the file, the key path
 * (`rules[2].actions[1]`) and what is wrong with it.
 */
#include "config/config.h"
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

/* A config is a page of JSON; anything near this size is not one. */
#define CONFIG_MAX_BYTES (16u * 1024 * 1024)

#define DEFAULT_LISTEN_HOST "127.0.0.1"
#define DEFAULT_LISTEN_PORT 8470
#define DEFAULT_MAX_BODY    ((uint64_t)2 * 1024 * 1024 * 1024)

/*
 * Names and reasons end up in ng lines, audit records and terminals, so
 * they are kept to one short line of printable text.
 */
#define NAME_MAX_LEN   100
#define REASON_MAX_LEN 256
#define HOST_MAX_LEN   100

#define KEYPATH_MAX 160

typedef struct parse_ctx {
    const char *file; /* as the caller named it: what the user will recognise */
    const char *dir;  /* absolute directory relative paths start from */
    rg_error *err;
} parse_ctx;

/* ------------------------------------------------------------------------ */
/* Names                                                                    */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    config_action action;
} actions[] = {
    {"create", CONFIG_ACTION_CREATE},
    {"update", CONFIG_ACTION_UPDATE},
    {"force", CONFIG_ACTION_FORCE},
    {"delete", CONFIG_ACTION_DELETE},
};

const char *config_action_name(config_action a)
{
    size_t i;

    for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if (actions[i].action == a)
            return actions[i].name;
    return "unknown";
}

const char *config_effect_name(config_effect e)
{
    switch (e) {
    case CONFIG_ALLOW:
        return "allow";
    case CONFIG_ASK:
        return "ask";
    case CONFIG_DENY:
        return "deny";
    }
    return "unknown";
}

static int effect_from_name(config_effect *out, const char *s)
{
    if (!strcmp(s, "allow"))
        *out = CONFIG_ALLOW;
    else if (!strcmp(s, "ask"))
        *out = CONFIG_ASK;
    else if (!strcmp(s, "deny"))
        *out = CONFIG_DENY;
    else
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* Record "<file>: <key>: <problem>" (no key for whole-file problems). */
static int fail(const parse_ctx *ctx, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(const parse_ctx *ctx, const char *key, const char *fmt, ...)
{
    char problem[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(problem, sizeof(problem), fmt, ap);
    va_end(ap);
    if (key == NULL || *key == '\0')
        return rg_error_set(ctx->err, RG_E_CONFIG, "%s: %s", ctx->file, problem);
    return rg_error_set(ctx->err, RG_E_CONFIG, "%s: %s: %s", ctx->file, key, problem);
}

static int fail_oom(const parse_ctx *ctx)
{
    return rg_error_set(ctx->err, -ENOMEM, "%s: out of memory", ctx->file);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "something else";
}

static int fail_type(const parse_ctx *ctx, const char *key, const char *want, const json_t *v)
{
    return fail(ctx, key, "expected %s, got %s", want, json_kind(v));
}

/* Key paths are for messages: one too long to hold is cut short, visibly. */
static void keypath_finish(char *out, int n)
{
    if (n < 0 || n >= KEYPATH_MAX)
        memcpy(out + KEYPATH_MAX - 4, "...", 4);
}

static void keypath_key(char *out, const char *parent, const char *key)
{
    if (parent == NULL || *parent == '\0')
        keypath_finish(out, snprintf(out, KEYPATH_MAX, "%s", key));
    else
        keypath_finish(out, snprintf(out, KEYPATH_MAX, "%s.%s", parent, key));
}

static void keypath_index(char *out, const char *parent, size_t i)
{
    keypath_finish(out, snprintf(out, KEYPATH_MAX, "%s[%zu]", parent, i));
}

/*
 * Refuse keys not in `allowed` (NULL-terminated), so that a misspelt
 * selector is an error rather than a rule that matches more than meant.
 */
static int check_keys(const parse_ctx *ctx, const json_t *obj, const char *parent,
                      const char *const *allowed, const char *expected)
{
    char kp[KEYPATH_MAX];
    const char *key;
    json_t *v;
    size_t i;

    json_object_foreach((json_t *)obj, key, v)
    {
        for (i = 0; allowed[i] != NULL; i++)
            if (!strcmp(key, allowed[i]))
                break;
        if (allowed[i] == NULL) {
            keypath_key(kp, parent, key);
            return fail(ctx, kp, "unknown key (expected %s)", expected);
        }
    }
    return 0;
}

/* 1 when s has no control characters: it may be shown on one line. */
static int is_one_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

static int check_text(const parse_ctx *ctx, const char *parent, const char *key, const char *s,
                      size_t max)
{
    char kp[KEYPATH_MAX];

    keypath_key(kp, parent, key);
    if (strlen(s) > max)
        return fail(ctx, kp, "longer than %zu characters", max);
    if (!is_one_line(s))
        return fail(ctx, kp, "must be one line of text without control characters");
    return 0;
}

/*
 * The string at obj[key] in *out (borrowed from obj), or NULL when absent
 * and not required. Empty strings are refused: every string key names
 * something, and "" is always a mistake.
 */
static int get_string(const char **out, const parse_ctx *ctx, const json_t *obj, const char *parent,
                      const char *key, int required, const char *hint)
{
    char kp[KEYPATH_MAX];
    json_t *v = json_object_get(obj, key);

    *out = NULL;
    keypath_key(kp, parent, key);
    if (v == NULL) {
        if (required)
            return fail(ctx, kp, "required key is missing%s%s", hint ? " " : "", hint ? hint : "");
        return 0;
    }
    if (!json_is_string(v))
        return fail_type(ctx, kp, "a string", v);
    if (json_string_length(v) == 0)
        return fail(ctx, kp, "must not be empty");
    *out = json_string_value(v);
    return 0;
}

static int dup_string(char **out, const parse_ctx *ctx, const char *s)
{
    *out = strdup(s);
    return *out ? 0 : fail_oom(ctx);
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Remove `.`, `..` and empty segments from absolute path p, in place. The
 * output never passes the input: each segment is written with its leading
 * slash over bytes already read.
 */
static void path_normalize(char *p)
{
    char *out = p; /* end of the output so far: "" or "/a/b" */
    const char *in = p, *seg;
    size_t len;

    while (*in) {
        while (*in == '/')
            in++;
        seg = in;
        len = strcspn(in, "/");
        in += len;
        if (len == 0 || (len == 1 && seg[0] == '.'))
            continue;
        if (len == 2 && seg[0] == '.' && seg[1] == '.') {
            /* Drop the last "/name"; ".." at the root stays at the root. */
            while (out > p && *--out != '/')
                ;
            continue;
        }
        *out++ = '/';
        memmove(out, seg, len);
        out += len;
    }
    if (out == p)
        *out++ = '/';
    *out = '\0';
}

/* `rel` joined onto absolute `base` unless it is absolute itself; malloc'd. */
static char *path_join(const char *base, const char *rel)
{
    size_t blen = strlen(base), rlen = strlen(rel);
    char *p;

    if (rel[0] == '/')
        return strdup(rel);
    p = malloc(blen + rlen + 2);
    if (p == NULL)
        return NULL;
    memcpy(p, base, blen);
    p[blen] = '/';
    memcpy(p + blen + 1, rel, rlen + 1);
    return p;
}

/*
 * The absolute form of `rel` against `base`: resolved through symlinks when
 * it exists (so two spellings of one directory compare equal), tidied
 * lexically when it does not yet (a state directory is created later).
 * *out is malloc'd; returns 0 or -ENOMEM.
 */
static int path_absolute(char **out, const char *base, const char *rel)
{
    char *joined = path_join(base, rel);
    char *real;

    *out = NULL;
    if (joined == NULL)
        return -ENOMEM;
    real = realpath(joined, NULL);
    if (real != NULL) {
        free(joined);
        *out = real;
        return 0;
    }
    path_normalize(joined);
    *out = joined;
    return 0;
}

/*
 * Work out the absolute file name and its directory. The directory is
 * resolved, the file name is not, so a config that is a symlink still
 * takes its relative paths from where the user put it.
 */
static int config_locate(char **out_path, char **out_dir, const char *path, rg_error *err)
{
    char *cwd = NULL, *dir = NULL, *dirpart = NULL, *abs = NULL;
    const char *slash = strrchr(path, '/'), *base;
    int rc = 0;

    *out_path = NULL;
    *out_dir = NULL;
    cwd = getcwd(NULL, 0);
    if (cwd == NULL) {
        rc = rg_error_set(err, -errno, "%s: cannot find the current directory: %s", path,
                          strerror(errno));
        goto done;
    }
    if (slash == NULL) {
        dirpart = strdup(".");
        base = path;
    } else {
        dirpart = strndup(path, slash == path ? 1 : (size_t)(slash - path));
        base = slash + 1;
    }
    if (dirpart == NULL || path_absolute(&dir, cwd, dirpart) < 0)
        goto oom;
    abs = malloc(strlen(dir) + strlen(base) + 2);
    if (abs == NULL)
        goto oom;
    sprintf(abs, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", base);
    *out_path = abs;
    *out_dir = dir;
    abs = NULL;
    dir = NULL;
    goto done;
oom:
    rc = rg_error_set(err, -ENOMEM, "%s: out of memory", path);
done:
    free(cwd);
    free(dirpart);
    free(dir);
    free(abs);
    return rc;
}

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
static int parse_listen(char **out_host, unsigned *out_port, const parse_ctx *ctx, const char *key,
                        const char *s)
{
    const char *colon, *hstart;
    unsigned char addr[16];
    char host[64];
    size_t hlen;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');

        if (close == NULL || close[1] != ':')
            return fail(ctx, key, "\"%s\" is not host:port (write [::1]:8470)", s);
        hstart = s + 1;
        hlen = (size_t)(close - hstart);
        colon = close + 1;
        if (hlen >= sizeof(host))
            return fail(ctx, key, "\"%s\": not an IPv6 address", s);
        memcpy(host, hstart, hlen);
        host[hlen] = '\0';
        if (inet_pton(AF_INET6, host, addr) != 1)
            return fail(ctx, key, "\"%s\": \"%s\" is not an IPv6 address", s, host);
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return fail(ctx, key, "\"%s\" is not host:port (write 127.0.0.1:8470)", s);
        hlen = (size_t)(colon - s);
        if (memchr(s, ':', hlen) != NULL)
            return fail(ctx, key, "\"%s\": put an IPv6 address in brackets, as in [::1]:8470", s);
        if (hlen == 0 || hlen >= sizeof(host))
            return fail(ctx, key, "\"%s\": missing or bad host (write 127.0.0.1:8470)", s);
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        if (inet_pton(AF_INET, host, addr) != 1)
            return fail(ctx, key,
                        "\"%s\": \"%s\" is not an IPv4 address (write 127.0.0.1:8470 or "
                        "[::1]:8470)",
                        s, host);
    }
    if (parse_port(out_port, colon + 1) < 0)
        return fail(ctx, key, "\"%s\": port must be a number from 0 to 65535", s);
    return dup_string(out_host, ctx, host);
}

static int parse_effect(config_effect *out, const parse_ctx *ctx, const char *key, const char *s)
{
    if (effect_from_name(out, s) < 0)
        return fail(ctx, key, "unknown effect \"%s\" (expected allow, deny or ask)", s);
    return 0;
}

static int parse_max_body(config_model *cfg, const parse_ctx *ctx, const json_t *v)
{
    if (!json_is_integer(v))
        return fail_type(ctx, "max_body_bytes", "an integer (bytes)", v);
    if (json_integer_value(v) <= 0)
        return fail(ctx, "max_body_bytes", "must be a positive number of bytes, got %lld",
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
    keypath_key(kp, "limits", key);
    if (!json_is_integer(v))
        return fail_type(ctx, kp, "an integer", v);
    if (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min ||
        (uint64_t)json_integer_value(v) > max)
        return fail(ctx, kp, "must be from %llu to %llu, got %lld", (unsigned long long)min,
                    (unsigned long long)max, (long long)json_integer_value(v));
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_limits(config_limits *out, const parse_ctx *ctx, const json_t *obj)
{
    uint64_t conns, unauth, per_token, header, idle, spool, ratio, ibytes, isecs;
    int rc;

    if (obj != NULL && !json_is_object(obj))
        return fail_type(ctx, "limits", "an object", obj);
    if (obj != NULL && (rc = check_keys(ctx, obj, "limits", limits_keys, LIMITS_KEYS_TEXT)) < 0)
        return rc;
    /* A thread and a descriptor each: past a million the kernel is the limit. */
    rc = get_limit(&conns, ctx, obj, "connections", 2, 1 << 20, DEFAULT_CONNECTIONS);
    if (rc == 0)
        rc = get_limit(&unauth, ctx, obj, "unauthenticated", 1, 1 << 20,
                       conns > DEFAULT_UNAUTHENTICATED ? DEFAULT_UNAUTHENTICATED
                                                       : conns - conns / 4);
    /* Without headroom an authenticated pusher could be locked out. */
    if (rc == 0 && unauth >= conns)
        rc = fail(ctx, "limits.unauthenticated",
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
        return fail(ctx, kp, "longer than %d characters", HOST_MAX_LEN);
    if (host[0] == '.')
        return fail(ctx, kp, "\"%s\" must not start with a dot", host);
    for (p = host; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '.' || *p == '_' || *p == '-')
            continue;
        return fail(ctx, kp, "\"%s\" must be one path segment of letters, digits, '.', '_' or '-'",
                    host);
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
        return fail_oom(ctx);
    for (; *s; s++) {
        if (*s != '%') {
            *w++ = *s;
            continue;
        }
        hi = rg_hex_digit(s[1]);
        lo = hi < 0 ? -1 : rg_hex_digit(s[2]);
        if (lo < 0 || (hi == 0 && lo == 0)) {
            free(d);
            return fail(ctx, kp, "bad %%-escape in file URL");
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
    char *joined = path_join(ctx->dir, path);
    struct stat st;
    int rc = 0;

    if (joined == NULL)
        return fail_oom(ctx);
    up->root = realpath(joined, NULL);
    if (up->root == NULL) {
        path_normalize(joined);
        if (errno == ENOENT)
            rc = fail(ctx, kp, "upstream directory %s does not exist", joined);
        else if (errno == ENOMEM)
            rc = fail_oom(ctx);
        else
            rc = fail(ctx, kp, "upstream directory %s: %s", joined, strerror(errno));
        goto done;
    }
    if (stat(up->root, &st) < 0) {
        rc = fail(ctx, kp, "upstream directory %s: %s", up->root, strerror(errno));
        goto done;
    }
    if (!S_ISDIR(st.st_mode))
        rc = fail(ctx, kp, "upstream %s is not a directory", up->root);
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
            return fail(ctx, kp, "\"%s\" has no host name", url);
        *remote = 1;
        return 0;
    }
    if (!strncasecmp(url, "file://", 7)) {
        if (url[7] != '/')
            return fail(ctx, kp,
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
        return fail(ctx, kp,
                    "unsupported URL scheme \"%.*s\" (expected file://, http://, https:// or a "
                    "directory path)",
                    (int)(sep - url), url);
    /* "git@host:path" would otherwise be read as a relative directory. */
    if (strchr(url, ':') != NULL && strchr(url, ':') < strchrnul(url, '/'))
        return fail(ctx, kp,
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
    *out = path_join(ctx->dir, rel);
    if (*out == NULL)
        return fail_oom(ctx);
    path_normalize(*out);
    return 0;
}

/* A positive integer at obj[key]; *out stays 0 when absent and optional. */
static int get_positive_id(long long *out, const parse_ctx *ctx, const json_t *obj,
                           const char *parent, const char *key, int required, const char *hint)
{
    char kp[KEYPATH_MAX];
    json_t *v = json_object_get(obj, key);

    *out = 0;
    keypath_key(kp, parent, key);
    if (v == NULL)
        return required ? fail(ctx, kp, "required key is missing %s", hint) : 0;
    if (!json_is_integer(v))
        return fail_type(ctx, kp, "a positive integer", v);
    if (json_integer_value(v) <= 0)
        return fail(ctx, kp, "must be a positive integer, got %lld",
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
        return fail(ctx, kp, "\"%s\" is not an http:// or https:// URL", url);
    if (strlen(url) > URL_MAX_LEN)
        return fail(ctx, kp, "longer than %d characters", URL_MAX_LEN);
    if (!is_one_line(url) || strchr(url, ' ') != NULL)
        return fail(ctx, kp, "must not contain spaces or control characters");
    host = sep + 3;
    hostlen = strcspn(host, "/");
    if (hostlen == 0)
        return fail(ctx, kp, "\"%s\" has no host name", url);
    if (memchr(host, '@', hostlen) != NULL)
        return fail(ctx, kp,
                    "a URL must not carry a user name or password (put them in \"credentials\")");
    if (strpbrk(host, "?#") != NULL)
        return fail(ctx, kp, "\"%s\": a query or fragment has no place here", url);
    len = strlen(url);
    while (len > (size_t)(host - url) + hostlen && url[len - 1] == '/')
        len--;
    *out = strndup(url, len);
    return *out ? 0 : fail_oom(ctx);
}

static int parse_cred_static(config_credentials *c, const parse_ctx *ctx, const json_t *obj,
                             const char *kp)
{
    char sub[KEYPATH_MAX];
    const char *user = NULL, *file = NULL;
    int rc;

    c->type = CONFIG_CRED_STATIC;
    rc = check_keys(ctx, obj, kp, cred_static_keys, "type, username or token_file");
    if (rc == 0)
        rc = get_string(&user, ctx, obj, kp, "username", 0, NULL);
    if (rc == 0 && user != NULL) {
        rc = check_text(ctx, kp, "username", user, CRED_USER_MAX_LEN);
        /* HTTP Basic splits user from password at the first colon. */
        if (rc == 0 && strchr(user, ':') != NULL) {
            keypath_key(sub, kp, "username");
            rc = fail(ctx, sub, "must not contain ':' (HTTP Basic cannot carry it)");
        }
    }
    if (rc == 0)
        rc = dup_string(&c->username, ctx, user ? user : DEFAULT_CRED_USER);
    if (rc == 0)
        rc = get_string(&file, ctx, obj, kp, "token_file", 1,
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
    rc = check_keys(ctx, obj, kp, cred_app_keys,
                    "type, app_id, private_key_file, api_url or installation_id");
    if (rc == 0)
        rc = get_positive_id(&c->app_id, ctx, obj, kp, "app_id", 1,
                             "(the GitHub App's numeric id, from its settings page)");
    if (rc == 0)
        rc = get_string(&file, ctx, obj, kp, "private_key_file", 1,
                        "(the App's PEM private key; keep it chmod 600)");
    if (rc == 0)
        rc = secret_path(&c->private_key_file, ctx, file);
    if (rc == 0)
        rc = get_string(&api, ctx, obj, kp, "api_url", 0, NULL);
    if (rc == 0) {
        keypath_key(sub, kp, "api_url");
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
        return fail(ctx, kp,
                    "a string here can only be \"none\"; write an object such as "
                    "{\"type\": \"static\", \"token_file\": \"...\"} (secrets belong in files, "
                    "not in the config)");
    }
    if (!json_is_object(v))
        return fail_type(ctx, kp, "an object or a string", v);
    rc = get_string(&type, ctx, v, kp, "type", 1, "(expected none, static or github-app)");
    if (rc < 0)
        return rc;
    if (!strcmp(type, "none")) {
        c->type = CONFIG_CRED_NONE;
        return check_keys(ctx, v, kp, cred_none_keys, "only type");
    }
    if (!strcmp(type, "static"))
        return parse_cred_static(c, ctx, v, kp);
    if (!strcmp(type, "github-app"))
        return parse_cred_github_app(c, ctx, v, kp);
    keypath_key(sub, kp, "type");
    return fail(ctx, sub, "unknown type \"%s\" (expected none, static or github-app)", type);
}

static void free_credentials(config_credentials *c)
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
        return fail_oom(ctx);
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
    keypath_key(kp, parent, key);
    if (!json_is_integer(v))
        return fail_type(ctx, kp, "a whole number of seconds", v);
    if (json_integer_value(v) <= 0)
        return fail(ctx, kp, "must be a positive number of seconds");
    if (json_integer_value(v) > TIMEOUT_MAX)
        return fail(ctx, kp, "at most %d seconds", TIMEOUT_MAX);
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
        keypath_key(kp, parent, "credentials");
        rc = parse_credentials(&up->credentials, ctx, v, kp);
    }
    if (rc < 0)
        return rc;
    v = json_object_get(obj, "read_credentials");
    if (v != NULL) {
        keypath_key(kp, parent, "read_credentials");
        up->has_read_credentials = 1;
        rc = parse_credentials(&up->read_credentials, ctx, v, kp);
    } else {
        rc = copy_credentials(&up->read_credentials, ctx, &up->credentials);
    }
    if (rc == 0)
        rc = get_string(&ca, ctx, obj, parent, "ca_file", 0, NULL);
    if (rc == 0 && ca != NULL && path_absolute(&up->ca_file, ctx->dir, ca) < 0)
        rc = fail_oom(ctx);
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
        return fail_type(ctx, kp, "an object with host and url", obj);
    rc = check_keys(ctx, obj, kp, upstream_keys, UPSTREAM_KEYS_TEXT);
    if (rc == 0)
        rc = get_string(&host, ctx, obj, kp, "host", 1, NULL);
    if (rc == 0)
        rc = get_string(&url, ctx, obj, kp, "url", 1, NULL);
    if (rc < 0)
        return rc;
    keypath_key(sub, kp, "host");
    rc = check_host(ctx, sub, host);
    if (rc == 0)
        rc = dup_string(&up->host, ctx, host);
    if (rc < 0)
        return rc;
    keypath_key(sub, kp, "url");
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
        keypath_key(sub, kp, remote_only_keys[i]);
        return fail(ctx, sub, "only http(s) upstreams take this key");
    }
    return dup_string(&up->url, ctx, url);
}

static int parse_upstreams(config_model *cfg, const parse_ctx *ctx, const json_t *arr)
{
    char kp[KEYPATH_MAX];
    size_t i, j;
    int rc;

    if (!json_is_array(arr))
        return fail_type(ctx, "upstreams", "an array", arr);
    if (json_array_size(arr) == 0)
        return 0;
    cfg->upstreams = calloc(json_array_size(arr), sizeof(*cfg->upstreams));
    if (cfg->upstreams == NULL)
        return fail_oom(ctx);
    /* Counted before filling, so a half-built config frees cleanly. */
    cfg->nupstreams = json_array_size(arr);
    for (i = 0; i < cfg->nupstreams; i++) {
        keypath_index(kp, "upstreams", i);
        rc = parse_upstream(&cfg->upstreams[i], ctx, json_array_get(arr, i), kp);
        if (rc < 0)
            return rc;
        for (j = 0; j < i; j++) {
            if (strcmp(cfg->upstreams[j].host, cfg->upstreams[i].host))
                continue;
            snprintf(kp, sizeof(kp), "upstreams[%zu].host", i);
            return fail(ctx, kp, "duplicate host \"%s\" (also upstreams[%zu])",
                        cfg->upstreams[i].host, j);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Rules                                                                    */
/* ------------------------------------------------------------------------ */

static const char *const rule_keys[] = {
    "name", "repos", "refs", "runs", "actions", "effect", "reason", "mode", "hold", NULL,
};
#define RULE_KEYS_TEXT                                                                             \
    "name, repos, refs, runs, actions, effect, reason, mode, hold, " CONFIG_CONDITION_KEYS_TEXT

/* Rule keys: the selectors here and the conditions of config/conditions.c. */
static int check_rule_keys(const parse_ctx *ctx, const json_t *obj, const char *kp)
{
    char sub[KEYPATH_MAX];
    const char *key;
    json_t *v;
    size_t i, j;

    json_object_foreach((json_t *)obj, key, v)
    {
        for (i = 0; rule_keys[i] != NULL && strcmp(key, rule_keys[i]); i++)
            ;
        for (j = 0; config_condition_keys[j] != NULL && strcmp(key, config_condition_keys[j]); j++)
            ;
        if (rule_keys[i] == NULL && config_condition_keys[j] == NULL) {
            keypath_key(sub, kp, key);
            return fail(ctx, sub, "unknown key (expected %s)", RULE_KEYS_TEXT);
        }
    }
    return 0;
}

/* The longest an ask rule may keep a push open waiting for its approval. */
#define HOLD_MAX_SECONDS 3600

typedef enum pattern_kind {
    PATTERN_REPO,
    PATTERN_REF,
    PATTERN_RUN,
} pattern_kind;

static const char *const pattern_what[] = {"repo", "ref", "run"};

/*
 * Refuse patterns that cannot mean what their author meant. Each check is a
 * rule that would otherwise never match, and a deny rule that never matches
 * lets through what it was written to stop.
 */
static int check_pattern(const config_model *cfg, const parse_ctx *ctx, const char *kp,
                         pattern_kind kind, const char *pat)
{
    char first[256];
    const char *p, *seg;
    size_t len, flen = strcspn(pat, "/");
    size_t i;

    if (!is_one_line(pat))
        return fail(ctx, kp, "pattern contains a control character");
    if (strstr(pat, "***") != NULL)
        return fail(ctx, kp,
                    "\"%s\": *** is not a pattern (use * within a segment, ** across segments)",
                    pat);
    if (strpbrk(pat, "[\\") != NULL)
        return fail(ctx, kp, "\"%s\": character classes and escapes are not supported", pat);
    /* Run names are printable ASCII without spaces (tokens/token.h). */
    for (p = pat; kind == PATTERN_RUN && *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return fail(ctx, kp,
                        "\"%s\" never matches: run names are printable ASCII without spaces", pat);
    for (p = pat;; p += len + 1) {
        seg = p;
        len = strcspn(p, "/");
        if (len == 0)
            return fail(ctx, kp, "\"%s\" has an empty path segment", pat);
        if (len != 2 && memmem(seg, len, "**", 2) != NULL)
            return fail(ctx, kp, "\"%s\": ** must be a whole segment, as in refs/heads/**", pat);
        if (seg[len] == '\0')
            break;
    }
    if (flen >= sizeof(first))
        flen = sizeof(first) - 1;
    memcpy(first, pat, flen);
    first[flen] = '\0';
    if (kind == PATTERN_RUN)
        return 0;
    if (kind == PATTERN_REF) {
        if (!rg_glob_match(first, "refs"))
            return fail(ctx, kp,
                        "\"%s\" never matches: refs are full names such as refs/heads/main", pat);
        return 0;
    }
    len = strlen(pat);
    if (len >= 4 && !strcmp(pat + len - 4, ".git"))
        return fail(ctx, kp, "\"%s\" never matches: repos are named <host>/<path> without .git",
                    pat);
    if (strchr(pat, '/') == NULL && strcmp(pat, "**") != 0)
        return fail(ctx, kp, "\"%s\" never matches: repos are named <host>/<path>", pat);
    /* Only a literal host can be checked; a wildcard may match hosts added later. */
    if (strpbrk(first, "*?") == NULL) {
        for (i = 0; i < cfg->nupstreams; i++)
            if (!strcmp(cfg->upstreams[i].host, first))
                return 0;
        return fail(ctx, kp, "\"%s\" never matches: no upstream has host \"%s\"", pat, first);
    }
    return 0;
}

static int parse_patterns(char ***out, rg_glob_ends **ends, size_t *nout, const config_model *cfg,
                          const parse_ctx *ctx, const json_t *rule, const char *parent,
                          const char *key, pattern_kind kind)
{
    char kp[KEYPATH_MAX], ekp[KEYPATH_MAX];
    json_t *arr = json_object_get(rule, key), *v;
    size_t i, n;
    int rc;

    keypath_key(kp, parent, key);
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return fail_type(ctx, kp, "an array of patterns", arr);
    n = json_array_size(arr);
    if (n == 0)
        return fail(ctx, kp, "empty list matches nothing (omit the key to match any %s)",
                    pattern_what[kind]);
    *out = calloc(n, sizeof(**out));
    *ends = calloc(n, sizeof(**ends));
    if (*out == NULL || *ends == NULL) {
        free(*out);
        free(*ends);
        *out = NULL;
        *ends = NULL;
        return fail_oom(ctx);
    }
    *nout = n;
    for (i = 0; i < n; i++) {
        v = json_array_get(arr, i);
        keypath_index(ekp, kp, i);
        if (!json_is_string(v))
            return fail_type(ctx, ekp, "a string", v);
        if (json_string_length(v) == 0)
            return fail(ctx, ekp, "empty pattern");
        rc = check_pattern(cfg, ctx, ekp, kind, json_string_value(v));
        if (rc == 0)
            rc = dup_string(&(*out)[i], ctx, json_string_value(v));
        if (rc < 0)
            return rc;
        rg_glob_literal_ends(&(*ends)[i], (*out)[i]);
    }
    return 0;
}

static int parse_actions(unsigned *out, const parse_ctx *ctx, const json_t *rule,
                         const char *parent)
{
    char kp[KEYPATH_MAX], ekp[KEYPATH_MAX];
    json_t *arr = json_object_get(rule, "actions"), *v;
    size_t i, j;

    *out = CONFIG_ACTION_ALL;
    keypath_key(kp, parent, "actions");
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return fail_type(ctx, kp, "an array of actions", arr);
    if (json_array_size(arr) == 0)
        return fail(ctx, kp, "empty list matches nothing (omit the key to match every action)");
    *out = 0;
    json_array_foreach(arr, i, v)
    {
        keypath_index(ekp, kp, i);
        if (!json_is_string(v))
            return fail_type(ctx, ekp, "a string", v);
        for (j = 0; j < sizeof(actions) / sizeof(actions[0]); j++)
            if (!strcmp(json_string_value(v), actions[j].name))
                break;
        if (j == sizeof(actions) / sizeof(actions[0]))
            return fail(ctx, ekp,
                        "unknown action \"%s\" (expected create, update, force or delete)",
                        json_string_value(v));
        *out |= actions[j].action;
    }
    return 0;
}

/* "hold": seconds an ask rule keeps the push open for its approval. */
static int parse_hold(config_rule *r, const parse_ctx *ctx, const json_t *v, const char *kp)
{
    char sub[KEYPATH_MAX];
    long long secs = -1;

    keypath_key(sub, kp, "hold");
    if (r->effect != CONFIG_ASK)
        return fail(ctx, sub, "only a rule with \"effect\": \"ask\" can hold a push");
    if (json_is_integer(v))
        secs = json_integer_value(v);
    else if (json_is_string(v))
        secs = rg_duration_parse(json_string_value(v));
    else
        return fail_type(ctx, sub, "a duration (60, \"90s\", \"10m\")", v);
    if (secs < 1 || secs > HOLD_MAX_SECONDS)
        return fail(ctx, sub, "expected 1 second to 1 hour (e.g. 60, \"90s\", \"10m\")");
    r->hold = (unsigned)secs;
    return 0;
}

static int parse_rule(config_rule *r, const config_model *cfg, const parse_ctx *ctx,
                      const json_t *obj, size_t index)
{
    char kp[KEYPATH_MAX], sub[KEYPATH_MAX];
    const char *name = NULL, *effect = NULL, *reason = NULL, *mode = NULL;
    int rc;

    keypath_index(kp, "rules", index);
    if (!json_is_object(obj))
        return fail_type(ctx, kp, "an object", obj);
    rc = check_rule_keys(ctx, obj, kp);
    if (rc == 0)
        rc = get_string(&name, ctx, obj, kp, "name", 0, NULL);
    if (rc == 0 && name != NULL)
        rc = check_text(ctx, kp, "name", name, NAME_MAX_LEN);
    if (rc == 0 && name != NULL && !strcmp(name, "default")) {
        keypath_key(sub, kp, "name");
        rc = fail(ctx, sub, "\"default\" is reserved for the configured default");
    }
    if (rc == 0)
        rc = name ? dup_string(&r->name, ctx, name) : dup_string(&r->name, ctx, kp);
    if (rc == 0)
        rc = parse_patterns(&r->repos, &r->repos_ends, &r->nrepos, cfg, ctx, obj, kp, "repos",
                            PATTERN_REPO);
    if (rc == 0)
        rc = parse_patterns(&r->refs, &r->refs_ends, &r->nrefs, cfg, ctx, obj, kp, "refs",
                            PATTERN_REF);
    if (rc == 0)
        rc = parse_patterns(&r->runs, &r->runs_ends, &r->nruns, cfg, ctx, obj, kp, "runs",
                            PATTERN_RUN);
    if (rc == 0)
        rc = parse_actions(&r->actions, ctx, obj, kp);
    if (rc == 0)
        rc = get_string(&effect, ctx, obj, kp, "effect", 1, "(expected allow, deny or ask)");
    if (rc == 0) {
        keypath_key(sub, kp, "effect");
        rc = parse_effect(&r->effect, ctx, sub, effect);
    }
    if (rc == 0)
        rc = get_string(&reason, ctx, obj, kp, "reason", 0, NULL);
    if (rc == 0 && reason != NULL)
        rc = check_text(ctx, kp, "reason", reason, REASON_MAX_LEN);
    if (rc == 0 && reason != NULL)
        rc = dup_string(&r->reason, ctx, reason);
    if (rc == 0)
        rc = get_string(&mode, ctx, obj, kp, "mode", 0, NULL);
    if (rc == 0 && mode != NULL) {
        keypath_key(sub, kp, "mode");
        if (!strcmp(mode, "evaluate"))
            r->evaluate_only = 1;
        else if (strcmp(mode, "enforce"))
            rc = fail(ctx, sub, "unknown mode \"%s\" (expected enforce or evaluate)", mode);
    }
    if (rc == 0)
        rc = config_conditions_parse(&r->cond, obj, ctx->file, kp, ctx->err);
    if (rc == 0 && json_object_get(obj, "hold") != NULL)
        rc = parse_hold(r, ctx, json_object_get(obj, "hold"), kp);
    return rc;
}

static int parse_rules(config_model *cfg, const parse_ctx *ctx, const json_t *arr)
{
    char kp[KEYPATH_MAX];
    size_t i, j;
    int rc;

    if (!json_is_array(arr))
        return fail_type(ctx, "rules", "an array", arr);
    if (json_array_size(arr) == 0)
        return 0;
    cfg->rules = calloc(json_array_size(arr), sizeof(*cfg->rules));
    if (cfg->rules == NULL)
        return fail_oom(ctx);
    cfg->nrules = json_array_size(arr);
    for (i = 0; i < cfg->nrules; i++) {
        rc = parse_rule(&cfg->rules[i], cfg, ctx, json_array_get(arr, i), i);
        if (rc < 0)
            return rc;
    }
    /* Names identify rules in decisions and the audit log. */
    for (i = 1; i < cfg->nrules; i++) {
        for (j = 0; j < i; j++) {
            if (strcmp(cfg->rules[i].name, cfg->rules[j].name))
                continue;
            snprintf(kp, sizeof(kp), "rules[%zu].name", i);
            return fail(ctx, kp, "duplicate rule name \"%s\" (also rules[%zu])", cfg->rules[i].name,
                        j);
        }
    }
    return 0;
}

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

static void free_strings(char **v, size_t n);

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
    keypath_key(kp, "control", key);
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return fail_type(ctx, kp, "an array of names or ids", arr);
    n = json_array_size(arr);
    if (n > CONTROL_NAMES_MAX)
        return fail(ctx, kp, "at most %d entries, got %zu", CONTROL_NAMES_MAX, n);
    if (n == 0)
        return 0;
    v = calloc(n, sizeof(*v));
    if (v == NULL)
        return fail_oom(ctx);
    for (i = 0; i < n && rc == 0; i++) {
        json_t *e = json_array_get(arr, i);
        size_t j;

        keypath_index(ikp, kp, i);
        if (!json_is_string(e)) {
            rc = fail_type(ctx, ikp, "a string (a name or a numeric id)", e);
            break;
        }
        s = json_string_value(e);
        if (*s == '\0' || strlen(s) > 64) {
            rc = fail(ctx, ikp, "expected a name or a numeric id of 1 to 64 characters");
            break;
        }
        /* The portable name set (POSIX 3.437) plus '$' for machine accounts. */
        for (j = 0; s[j] != '\0'; j++)
            if (!isalnum((unsigned char)s[j]) && !strchr("._-$", s[j]))
                break;
        if (s[j] != '\0' || s[0] == '-') {
            rc = fail(ctx, ikp, "\"%s\" is not a user or group name or a numeric id", s);
            break;
        }
        rc = dup_string(&v[i], ctx, s);
    }
    if (rc < 0) {
        free_strings(v, n);
        return rc;
    }
    *out = v;
    *nout = n;
    return 0;
}

static const char *const control_keys[] = {"socket", "users", "groups", "max_ttl", "url", NULL};
#define CONTROL_KEYS_TEXT "socket, users, groups, max_ttl or url"

static int parse_control(config_control *out, const config_model *cfg, const parse_ctx *ctx,
                         const json_t *obj)
{
    const char *s = NULL;
    json_t *v;
    int rc = 0;

    out->max_ttl = DEFAULT_CONTROL_MAX_TTL;
    if (obj != NULL && !json_is_object(obj))
        return fail_type(ctx, "control", "an object", obj);
    if (obj != NULL && (rc = check_keys(ctx, obj, "control", control_keys, CONTROL_KEYS_TEXT)) < 0)
        return rc;
    if (obj != NULL && (rc = get_string(&s, ctx, obj, "control", "socket", 0, NULL)) < 0)
        return rc;
    if (s != NULL) {
        if (path_absolute(&out->socket, ctx->dir, s) < 0)
            return fail_oom(ctx);
    } else if (asprintf(&out->socket, "%s/control.sock", cfg->state_dir) < 0) {
        out->socket = NULL;
        return fail_oom(ctx);
    }
    /* bind(2) would cut a longer path silently, or fail far from here. A
     * default that does not fit (a deep state_dir) leaves the socket off
     * rather than refuse a config that loaded before the socket existed. */
    if (strlen(out->socket) >= CONTROL_SOCKET_PATH_MAX && s == NULL) {
        free(out->socket);
        out->socket = NULL;
    } else if (strlen(out->socket) >= CONTROL_SOCKET_PATH_MAX) {
        return fail(ctx, "control.socket",
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
            return fail_type(ctx, "control.max_ttl", "a duration (3600, \"30m\", \"12h\")", v);
        if (ttl < 1 || ttl > CONTROL_MAX_TTL_CAP)
            return fail(ctx, "control.max_ttl",
                        "expected 1 second to 7 days (e.g. 3600, \"30m\", \"12h\", \"7d\")");
        out->max_ttl = ttl;
    }
    rc = get_string(&s, ctx, obj, "control", "url", 0, NULL);
    if (rc == 0 && s != NULL) {
        /* Runs reach the gateway on loopback over plain HTTP; anything else
         * is a typo that would send the run token elsewhere. */
        if (strncmp(s, "http://", 7) != 0 || strlen(s) > 200 || !is_one_line(s) ||
            strchr(s + 7, '@') != NULL)
            return fail(ctx, "control.url",
                        "expected the gateway's http:// URL, e.g. http://127.0.0.1:8470");
        rc = dup_string(&out->url, ctx, s);
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

static int parse_approvals(config_approvals *out, const parse_ctx *ctx, const json_t *obj)
{
    const json_t *v;
    long long secs = -1;
    int rc;

    out->expire = APPROVALS_EXPIRE_DEFAULT;
    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return fail_type(ctx, "approvals", "an object", obj);
    if ((rc = check_keys(ctx, obj, "approvals", approvals_keys, APPROVALS_KEYS_TEXT)) < 0)
        return rc;
    v = json_object_get(obj, "expire");
    if (v == NULL)
        return 0;
    if (json_is_integer(v))
        secs = json_integer_value(v);
    else if (json_is_string(v))
        secs = rg_duration_parse(json_string_value(v));
    else
        return fail_type(ctx, "approvals.expire", "a duration (3600, \"30m\", \"24h\")", v);
    if (secs < 1 || secs > APPROVALS_EXPIRE_CAP)
        return fail(ctx, "approvals.expire",
                    "expected 1 second to 30 days (e.g. 3600, \"30m\", \"24h\", \"7d\")");
    out->expire = secs;
    return 0;
}

static const char *const admin_keys[] = {"listen", NULL};
#define ADMIN_KEYS_TEXT "listen"

/* The admin listener is the operator's: never the port the runs push to. */
static int parse_admin(config_admin *out, const config_model *cfg, const parse_ctx *ctx,
                       const json_t *obj)
{
    const char *s;
    int rc;

    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return fail_type(ctx, "admin", "an object", obj);
    if ((rc = check_keys(ctx, obj, "admin", admin_keys, ADMIN_KEYS_TEXT)) < 0)
        return rc;
    rc = get_string(&s, ctx, obj, "admin", "listen", 1, "(HOST:PORT for /healthz and /metrics)");
    if (rc == 0)
        rc = parse_listen(&out->listen_host, &out->listen_port, ctx, "admin.listen", s);
    if (rc == 0 && out->listen_port != 0 && out->listen_port == cfg->listen_port &&
        !strcmp(out->listen_host, cfg->listen_host))
        rc = fail(ctx, "admin.listen",
                  "is the push address \"listen\": the admin listener needs a port of its own");
    return rc;
}

static const char *const console_keys[] = {"listen", NULL};
#define CONSOLE_KEYS_TEXT "listen"

/* The review console is off unless it has a listen address of its own. */
static int parse_console(config_console *out, const config_model *cfg, const parse_ctx *ctx,
                         const json_t *obj)
{
    const char *s = NULL;
    int rc;

    if (obj == NULL)
        return 0;
    if (!json_is_object(obj))
        return fail_type(ctx, "console", "an object", obj);
    if ((rc = check_keys(ctx, obj, "console", console_keys, CONSOLE_KEYS_TEXT)) < 0 ||
        (rc = get_string(&s, ctx, obj, "console", "listen", 1,
                         "(host:port the console serves on, e.g. 127.0.0.1:8471)")) < 0 ||
        (rc = parse_listen(&out->listen_host, &out->listen_port, ctx, "console.listen", s)) < 0)
        return rc;
    /* Never the push port: a run token's holder must not reach the console. */
    if (out->listen_port != 0 && out->listen_port == cfg->listen_port)
        return fail(ctx, "console.listen",
                    "\"%s\": the console needs a port of its own, not the gateway's (%u)", s,
                    cfg->listen_port);
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
        return fail(ctx, NULL, "expected a JSON object at the top level, got %s", json_kind(root));
    rc = check_keys(ctx, root, NULL, top_keys, TOP_KEYS_TEXT);
    if (rc < 0)
        return rc;

    rc = get_string(&s, ctx, root, NULL, "listen", 0, NULL);
    if (rc == 0 && s != NULL)
        rc = parse_listen(&cfg->listen_host, &cfg->listen_port, ctx, "listen", s);
    if (rc == 0 && s == NULL) {
        cfg->listen_port = DEFAULT_LISTEN_PORT;
        rc = dup_string(&cfg->listen_host, ctx, DEFAULT_LISTEN_HOST);
    }
    if (rc < 0)
        return rc;

    rc = get_string(&s, ctx, root, NULL, "state_dir", 1,
                    "(the directory for keys, the audit log and the url file)");
    if (rc == 0 && path_absolute(&cfg->state_dir, ctx->dir, s) < 0)
        rc = fail_oom(ctx);
    if (rc < 0)
        return rc;

    /* Fail closed: with no default, what no rule allows is refused. */
    cfg->default_effect = CONFIG_DENY;
    rc = get_string(&s, ctx, root, NULL, "default", 0, NULL);
    if (rc == 0 && s != NULL)
        rc = parse_effect(&cfg->default_effect, ctx, "default", s);
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
    if ((rc = parse_control(&cfg->control, cfg, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "approvals");
    if ((rc = parse_approvals(&cfg->approvals, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "admin");
    if ((rc = parse_admin(&cfg->admin, cfg, ctx, v)) < 0)
        return rc;

    v = json_object_get(root, "console");
    if ((rc = parse_console(&cfg->console, cfg, ctx, v)) < 0)
        return rc;

    /* Upstreams first: rules check their repo patterns against the hosts. */
    v = json_object_get(root, "upstreams");
    if (v != NULL && (rc = parse_upstreams(cfg, ctx, v)) < 0)
        return rc;
    v = json_object_get(root, "rules");
    if (v != NULL && (rc = parse_rules(cfg, ctx, v)) < 0)
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
        rc = fail(ctx, kp,
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
        rc = fail_oom(&ctx);
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

static void free_strings(char **v, size_t n)
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
        free_credentials(&cfg->upstreams[i].credentials);
        free_credentials(&cfg->upstreams[i].read_credentials);
        free(cfg->upstreams[i].ca_file);
    }
    free(cfg->upstreams);
    for (i = 0; i < cfg->nrules; i++) {
        free(cfg->rules[i].name);
        free_strings(cfg->rules[i].repos, cfg->rules[i].nrepos);
        free_strings(cfg->rules[i].refs, cfg->rules[i].nrefs);
        free_strings(cfg->rules[i].runs, cfg->rules[i].nruns);
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
    free_strings(cfg->control.users, cfg->control.nusers);
    free_strings(cfg->control.groups, cfg->control.ngroups);
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
