/*
 * The config's rules: the names of actions and effects, and each rule's
 * selectors (repo, ref and run globs, actions), effect, reason, mode and
 * hold; the content conditions are config/conditions.c's.
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

int cfg_effect_from_name(config_effect *out, const char *s)
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
            cfg_keypath_key(sub, kp, key);
            return cfg_fail(ctx, sub, "unknown key (expected %s)", RULE_KEYS_TEXT);
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

    if (!cfg_is_one_line(pat))
        return cfg_fail(ctx, kp, "pattern contains a control character");
    if (strstr(pat, "***") != NULL)
        return cfg_fail(ctx, kp,
                        "\"%s\": *** is not a pattern (use * within a segment, ** across segments)",
                        pat);
    if (strpbrk(pat, "[\\") != NULL)
        return cfg_fail(ctx, kp, "\"%s\": character classes and escapes are not supported", pat);
    /* Run names are printable ASCII without spaces (tokens/token.h). */
    for (p = pat; kind == PATTERN_RUN && *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return cfg_fail(
                ctx, kp, "\"%s\" never matches: run names are printable ASCII without spaces", pat);
    for (p = pat;; p += len + 1) {
        seg = p;
        len = strcspn(p, "/");
        if (len == 0)
            return cfg_fail(ctx, kp, "\"%s\" has an empty path segment", pat);
        if (len != 2 && memmem(seg, len, "**", 2) != NULL)
            return cfg_fail(ctx, kp, "\"%s\": ** must be a whole segment, as in refs/heads/**",
                            pat);
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
            return cfg_fail(
                ctx, kp, "\"%s\" never matches: refs are full names such as refs/heads/main", pat);
        return 0;
    }
    len = strlen(pat);
    if (len >= 4 && !strcmp(pat + len - 4, ".git"))
        return cfg_fail(ctx, kp, "\"%s\" never matches: repos are named <host>/<path> without .git",
                        pat);
    if (strchr(pat, '/') == NULL && strcmp(pat, "**") != 0)
        return cfg_fail(ctx, kp, "\"%s\" never matches: repos are named <host>/<path>", pat);
    /* Only a literal host can be checked; a wildcard may match hosts added later. */
    if (strpbrk(first, "*?") == NULL) {
        for (i = 0; i < cfg->nupstreams; i++)
            if (!strcmp(cfg->upstreams[i].host, first))
                return 0;
        return cfg_fail(ctx, kp, "\"%s\" never matches: no upstream has host \"%s\"", pat, first);
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

    cfg_keypath_key(kp, parent, key);
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return cfg_fail_type(ctx, kp, "an array of patterns", arr);
    n = json_array_size(arr);
    if (n == 0)
        return cfg_fail(ctx, kp, "empty list matches nothing (omit the key to match any %s)",
                        pattern_what[kind]);
    *out = calloc(n, sizeof(**out));
    *ends = calloc(n, sizeof(**ends));
    if (*out == NULL || *ends == NULL) {
        free(*out);
        free(*ends);
        *out = NULL;
        *ends = NULL;
        return cfg_fail_oom(ctx);
    }
    *nout = n;
    for (i = 0; i < n; i++) {
        v = json_array_get(arr, i);
        cfg_keypath_index(ekp, kp, i);
        if (!json_is_string(v))
            return cfg_fail_type(ctx, ekp, "a string", v);
        if (json_string_length(v) == 0)
            return cfg_fail(ctx, ekp, "empty pattern");
        rc = check_pattern(cfg, ctx, ekp, kind, json_string_value(v));
        if (rc == 0)
            rc = cfg_dup_string(&(*out)[i], ctx, json_string_value(v));
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
    cfg_keypath_key(kp, parent, "actions");
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return cfg_fail_type(ctx, kp, "an array of actions", arr);
    if (json_array_size(arr) == 0)
        return cfg_fail(ctx, kp, "empty list matches nothing (omit the key to match every action)");
    *out = 0;
    json_array_foreach(arr, i, v)
    {
        cfg_keypath_index(ekp, kp, i);
        if (!json_is_string(v))
            return cfg_fail_type(ctx, ekp, "a string", v);
        for (j = 0; j < sizeof(actions) / sizeof(actions[0]); j++)
            if (!strcmp(json_string_value(v), actions[j].name))
                break;
        if (j == sizeof(actions) / sizeof(actions[0]))
            return cfg_fail(ctx, ekp,
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

    cfg_keypath_key(sub, kp, "hold");
    if (r->effect != CONFIG_ASK)
        return cfg_fail(ctx, sub, "only a rule with \"effect\": \"ask\" can hold a push");
    if (json_is_integer(v))
        secs = json_integer_value(v);
    else if (json_is_string(v))
        secs = rg_duration_parse(json_string_value(v));
    else
        return cfg_fail_type(ctx, sub, "a duration (60, \"90s\", \"10m\")", v);
    if (secs < 1 || secs > HOLD_MAX_SECONDS)
        return cfg_fail(ctx, sub, "expected 1 second to 1 hour (e.g. 60, \"90s\", \"10m\")");
    r->hold = (unsigned)secs;
    return 0;
}

static int parse_rule(config_rule *r, const config_model *cfg, const parse_ctx *ctx,
                      const json_t *obj, size_t index)
{
    char kp[KEYPATH_MAX], sub[KEYPATH_MAX];
    const char *name = NULL, *effect = NULL, *reason = NULL, *mode = NULL;
    int rc;

    cfg_keypath_index(kp, "rules", index);
    if (!json_is_object(obj))
        return cfg_fail_type(ctx, kp, "an object", obj);
    rc = check_rule_keys(ctx, obj, kp);
    if (rc == 0)
        rc = cfg_get_string(&name, ctx, obj, kp, "name", 0, NULL);
    if (rc == 0 && name != NULL)
        rc = cfg_check_text(ctx, kp, "name", name, NAME_MAX_LEN);
    if (rc == 0 && name != NULL && !strcmp(name, "default")) {
        cfg_keypath_key(sub, kp, "name");
        rc = cfg_fail(ctx, sub, "\"default\" is reserved for the configured default");
    }
    if (rc == 0)
        rc = name ? cfg_dup_string(&r->name, ctx, name) : cfg_dup_string(&r->name, ctx, kp);
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
        rc = cfg_get_string(&effect, ctx, obj, kp, "effect", 1, "(expected allow, deny or ask)");
    if (rc == 0) {
        cfg_keypath_key(sub, kp, "effect");
        rc = cfg_parse_effect(&r->effect, ctx, sub, effect);
    }
    if (rc == 0)
        rc = cfg_get_string(&reason, ctx, obj, kp, "reason", 0, NULL);
    if (rc == 0 && reason != NULL)
        rc = cfg_check_text(ctx, kp, "reason", reason, REASON_MAX_LEN);
    if (rc == 0 && reason != NULL)
        rc = cfg_dup_string(&r->reason, ctx, reason);
    if (rc == 0)
        rc = cfg_get_string(&mode, ctx, obj, kp, "mode", 0, NULL);
    if (rc == 0 && mode != NULL) {
        cfg_keypath_key(sub, kp, "mode");
        if (!strcmp(mode, "evaluate"))
            r->evaluate_only = 1;
        else if (strcmp(mode, "enforce"))
            rc = cfg_fail(ctx, sub, "unknown mode \"%s\" (expected enforce or evaluate)", mode);
    }
    if (rc == 0)
        rc = config_conditions_parse(&r->cond, obj, ctx->file, kp, ctx->err);
    if (rc == 0 && json_object_get(obj, "hold") != NULL)
        rc = parse_hold(r, ctx, json_object_get(obj, "hold"), kp);
    return rc;
}

int cfg_parse_rules(config_model *cfg, const parse_ctx *ctx, const json_t *arr)
{
    char kp[KEYPATH_MAX];
    size_t i, j;
    int rc;

    if (!json_is_array(arr))
        return cfg_fail_type(ctx, "rules", "an array", arr);
    if (json_array_size(arr) == 0)
        return 0;
    cfg->rules = calloc(json_array_size(arr), sizeof(*cfg->rules));
    if (cfg->rules == NULL)
        return cfg_fail_oom(ctx);
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
            return cfg_fail(ctx, kp, "duplicate rule name \"%s\" (also rules[%zu])",
                            cfg->rules[i].name, j);
        }
    }
    return 0;
}
