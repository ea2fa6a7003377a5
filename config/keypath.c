/*
 * The helpers every section of the config loader shares: the error
 * messages that name the file and the key path (`rules[2].actions[1]`),
 * typed getters that check a value's kind and text, and paths resolved
 * against the config file's directory.
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
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* Record "<file>: <key>: <problem>" (no key for whole-file problems). */
int cfg_fail(const parse_ctx *ctx, const char *key, const char *fmt, ...)
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

int cfg_fail_oom(const parse_ctx *ctx)
{
    return rg_error_set(ctx->err, -ENOMEM, "%s: out of memory", ctx->file);
}

const char *cfg_json_kind(const json_t *v)
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

int cfg_fail_type(const parse_ctx *ctx, const char *key, const char *want, const json_t *v)
{
    return cfg_fail(ctx, key, "expected %s, got %s", want, cfg_json_kind(v));
}

/* Key paths are for messages: one too long to hold is cut short, visibly. */
static void keypath_finish(char *out, int n)
{
    if (n < 0 || n >= KEYPATH_MAX)
        memcpy(out + KEYPATH_MAX - 4, "...", 4);
}

void cfg_keypath_key(char *out, const char *parent, const char *key)
{
    if (parent == NULL || *parent == '\0')
        keypath_finish(out, snprintf(out, KEYPATH_MAX, "%s", key));
    else
        keypath_finish(out, snprintf(out, KEYPATH_MAX, "%s.%s", parent, key));
}

void cfg_keypath_index(char *out, const char *parent, size_t i)
{
    keypath_finish(out, snprintf(out, KEYPATH_MAX, "%s[%zu]", parent, i));
}

/*
 * Refuse keys not in `allowed` (NULL-terminated), so that a misspelt
 * selector is an error rather than a rule that matches more than meant.
 */
int cfg_check_keys(const parse_ctx *ctx, const json_t *obj, const char *parent,
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
            cfg_keypath_key(kp, parent, key);
            return cfg_fail(ctx, kp, "unknown key (expected %s)", expected);
        }
    }
    return 0;
}

/* 1 when s has no control characters: it may be shown on one line. */
int cfg_is_one_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

int cfg_check_text(const parse_ctx *ctx, const char *parent, const char *key, const char *s,
                   size_t max)
{
    char kp[KEYPATH_MAX];

    cfg_keypath_key(kp, parent, key);
    if (strlen(s) > max)
        return cfg_fail(ctx, kp, "longer than %zu characters", max);
    if (!cfg_is_one_line(s))
        return cfg_fail(ctx, kp, "must be one line of text without control characters");
    return 0;
}

/*
 * The string at obj[key] in *out (borrowed from obj), or NULL when absent
 * and not required. Empty strings are refused: every string key names
 * something, and "" is always a mistake.
 */
int cfg_get_string(const char **out, const parse_ctx *ctx, const json_t *obj, const char *parent,
                   const char *key, int required, const char *hint)
{
    char kp[KEYPATH_MAX];
    json_t *v = json_object_get(obj, key);

    *out = NULL;
    cfg_keypath_key(kp, parent, key);
    if (v == NULL) {
        if (required)
            return cfg_fail(ctx, kp, "required key is missing%s%s", hint ? " " : "",
                            hint ? hint : "");
        return 0;
    }
    if (!json_is_string(v))
        return cfg_fail_type(ctx, kp, "a string", v);
    if (json_string_length(v) == 0)
        return cfg_fail(ctx, kp, "must not be empty");
    *out = json_string_value(v);
    return 0;
}

int cfg_dup_string(char **out, const parse_ctx *ctx, const char *s)
{
    *out = strdup(s);
    return *out ? 0 : cfg_fail_oom(ctx);
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Remove `.`, `..` and empty segments from absolute path p, in place. The
 * output never passes the input: each segment is written with its leading
 * slash over bytes already read.
 */
void cfg_path_normalize(char *p)
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
char *cfg_path_join(const char *base, const char *rel)
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
int cfg_path_absolute(char **out, const char *base, const char *rel)
{
    char *joined = cfg_path_join(base, rel);
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
    cfg_path_normalize(joined);
    *out = joined;
    return 0;
}

/*
 * Work out the absolute file name and its directory. The directory is
 * resolved, the file name is not, so a config that is a symlink still
 * takes its relative paths from where the user put it.
 */
int config_locate(char **out_path, char **out_dir, const char *path, rg_error *err)
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
    if (dirpart == NULL || cfg_path_absolute(&dir, cwd, dirpart) < 0)
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
