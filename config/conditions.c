/*
 * Parsing content conditions and the top-level "secrets" object; see
 * conditions.h. As everywhere in config/, what cannot mean what its author
 * meant is an error: an empty list, a false flag (omit the key), a path
 * pattern that can never match a changed path, a regex that does not
 * compile.
 */
#include "config/conditions.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KP_MAX 200
/* A path, as git stores it, is at most this long on every platform it runs on. */
#define PATH_LENGTH_MAX 4096
/* Regexes are one line of a config, not programs. */
#define REGEX_MAX_LEN 1024
/* Extra patterns and allowed fingerprints a config may list. */
#define SECRETS_LIST_MAX 1024

const char *const config_condition_keys[] = {
    "paths",       "max_file_bytes",   "max_path_length",
    "secrets",     "author_email_not", "committer_email_not",
    "message_not", "merge_commits",    "unsigned",
    NULL,
};

const char *config_condition_name(config_condition c)
{
    for (unsigned i = 0; i < CONFIG_COND_COUNT; i++)
        if ((unsigned)c == 1u << i)
            return config_condition_keys[i];
    return "unknown";
}

static int fail(rg_error *err, const char *file, const char *kp, const char *key, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static int fail(rg_error *err, const char *file, const char *kp, const char *key, const char *fmt,
                ...)
{
    char problem[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(problem, sizeof(problem), fmt, ap);
    va_end(ap);
    return rg_error_set(err, RG_E_CONFIG, "%s: %s%s%s: %s", file, kp, key ? "." : "",
                        key ? key : "", problem);
}

/* A changed path is relative, made of non-empty segments: anything else never matches. */
static int check_path_pattern(const char *pat)
{
    size_t len;

    if (pat[0] == '\0' || pat[0] == '/' || strpbrk(pat, "[\\") != NULL || strstr(pat, "***"))
        return -1;
    for (const char *p = pat; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return -1;
    for (const char *seg = pat;; seg += len + 1) {
        len = strcspn(seg, "/");
        if (len == 0 || (len != 2 && memmem(seg, len, "**", 2) != NULL))
            return -1;
        if (seg[len] == '\0')
            return 0;
    }
}

static int parse_paths(config_conditions *out, const json_t *v, const char *file, const char *kp,
                       rg_error *err)
{
    size_t n = json_is_array(v) ? json_array_size(v) : 0;

    if (!json_is_array(v))
        return fail(err, file, kp, "paths", "expected an array of path patterns");
    if (n == 0)
        return fail(err, file, kp, "paths", "empty list matches nothing (omit the key)");
    out->paths = calloc(n, sizeof(*out->paths));
    if (out->paths == NULL)
        return rg_error_set(err, -ENOMEM, "%s: out of memory", file);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);

        if (!json_is_string(e) || check_path_pattern(json_string_value(e)) < 0)
            return fail(err, file, kp, "paths",
                        "[%zu] is not a pattern a changed path can match (relative, no empty "
                        "segment, ** a whole segment, no [ or \\)",
                        i);
        out->paths[i] = strdup(json_string_value(e));
        if (out->paths[i] == NULL)
            return rg_error_set(err, -ENOMEM, "%s: out of memory", file);
        out->npaths = i + 1;
    }
    return 0;
}

static int parse_count(uint64_t *out, const json_t *v, uint64_t max, const char *file,
                       const char *kp, const char *key, rg_error *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
        return fail(err, file, kp, key, "expected an integer from 0 to %llu",
                    (unsigned long long)max);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_regex(regex_t *out, const json_t *v, const char *file, const char *kp,
                       const char *key, rg_error *err)
{
    char why[200];
    int rc;

    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > REGEX_MAX_LEN ||
        strlen(json_string_value(v)) != json_string_length(v))
        return fail(err, file, kp, key, "expected a regular expression of 1 to %d characters",
                    REGEX_MAX_LEN);
    /* REG_NEWLINE: ^ and $ anchor at every line of a message. */
    rc = regcomp(out, json_string_value(v), REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
    if (rc != 0) {
        regerror(rc, out, why, sizeof(why));
        return fail(err, file, kp, key, "not a POSIX extended regular expression: %s", why);
    }
    return 0;
}

static int parse_flag(const json_t *v, const char *file, const char *kp, const char *key,
                      rg_error *err)
{
    if (!json_is_true(v))
        return fail(err, file, kp, key, "only true is meaningful (omit the key otherwise)");
    return 0;
}

int config_conditions_parse(config_conditions *out, const json_t *rule, const char *file,
                            const char *kp, rg_error *err)
{
    const json_t *v;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if ((v = json_object_get(rule, "paths")) != NULL) {
        rc = parse_paths(out, v, file, kp, err);
        out->set |= CONFIG_COND_PATHS;
    }
    if (rc == 0 && (v = json_object_get(rule, "max_file_bytes")) != NULL &&
        (rc = parse_count(&out->max_file_bytes, v, INT64_MAX, file, kp, "max_file_bytes", err)) ==
            0)
        out->set |= CONFIG_COND_MAX_FILE_BYTES;
    if (rc == 0 && (v = json_object_get(rule, "max_path_length")) != NULL &&
        (rc = parse_count(&out->max_path_length, v, PATH_LENGTH_MAX, file, kp, "max_path_length",
                          err)) == 0)
        out->set |= CONFIG_COND_MAX_PATH_LENGTH;
    if (rc == 0 && (v = json_object_get(rule, "secrets")) != NULL &&
        (rc = parse_flag(v, file, kp, "secrets", err)) == 0)
        out->set |= CONFIG_COND_SECRETS;
    if (rc == 0 && (v = json_object_get(rule, "merge_commits")) != NULL &&
        (rc = parse_flag(v, file, kp, "merge_commits", err)) == 0)
        out->set |= CONFIG_COND_MERGE_COMMITS;
    if (rc == 0 && (v = json_object_get(rule, "unsigned")) != NULL &&
        (rc = parse_flag(v, file, kp, "unsigned", err)) == 0)
        out->set |= CONFIG_COND_UNSIGNED;
    if (rc == 0 && (v = json_object_get(rule, "author_email_not")) != NULL &&
        (rc = parse_regex(&out->author_email_not, v, file, kp, "author_email_not", err)) == 0)
        out->set |= CONFIG_COND_AUTHOR_EMAIL_NOT;
    if (rc == 0 && (v = json_object_get(rule, "committer_email_not")) != NULL &&
        (rc = parse_regex(&out->committer_email_not, v, file, kp, "committer_email_not", err)) == 0)
        out->set |= CONFIG_COND_COMMITTER_EMAIL_NOT;
    if (rc == 0 && (v = json_object_get(rule, "message_not")) != NULL &&
        (rc = parse_regex(&out->message_not, v, file, kp, "message_not", err)) == 0)
        out->set |= CONFIG_COND_MESSAGE_NOT;
    return rc;
}

void config_conditions_free(config_conditions *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->npaths; i++)
        free(c->paths[i]);
    free(c->paths);
    if (c->set & CONFIG_COND_AUTHOR_EMAIL_NOT)
        regfree(&c->author_email_not);
    if (c->set & CONFIG_COND_COMMITTER_EMAIL_NOT)
        regfree(&c->committer_email_not);
    if (c->set & CONFIG_COND_MESSAGE_NOT)
        regfree(&c->message_not);
    memset(c, 0, sizeof(*c));
}

/* ------------------------------------------------------------ secrets */

static int parse_patterns(content_secret_pattern **out, size_t *n, const json_t *arr,
                          const char *file, rg_error *err)
{
    char kp[KP_MAX];

    *out = NULL;
    *n = 0;
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > SECRETS_LIST_MAX)
        return fail(err, file, "secrets", "patterns", "expected an array of at most %d objects",
                    SECRETS_LIST_MAX);
    *out = calloc(json_array_size(arr) + 1, sizeof(**out));
    if (*out == NULL)
        return rg_error_set(err, -ENOMEM, "%s: out of memory", file);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *p = json_array_get(arr, i), *name, *regex;

        snprintf(kp, sizeof(kp), "secrets.patterns[%zu]", i);
        name = json_object_get(p, "name");
        regex = json_object_get(p, "regex");
        if (!json_is_object(p) || json_object_size(p) != 2 || !json_is_string(name) ||
            !json_is_string(regex))
            return fail(err, file, kp, NULL,
                        "expected {\"name\": \"...\", \"regex\": \"...\"} and nothing else");
        (*out)[i].name = json_string_value(name);
        (*out)[i].regex = json_string_value(regex);
        *n = i + 1;
    }
    return 0;
}

static int parse_allow(const char ***out, size_t *n, const json_t *arr, const char *file,
                       rg_error *err)
{
    *out = NULL;
    *n = 0;
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > SECRETS_LIST_MAX)
        return fail(err, file, "secrets", "allow", "expected an array of at most %d fingerprints",
                    SECRETS_LIST_MAX);
    *out = calloc(json_array_size(arr) + 1, sizeof(**out));
    if (*out == NULL)
        return rg_error_set(err, -ENOMEM, "%s: out of memory", file);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *f = json_array_get(arr, i);

        if (!json_is_string(f))
            return fail(err, file, "secrets", "allow", "[%zu] is not a string", i);
        (*out)[i] = json_string_value(f);
        *n = i + 1;
    }
    return 0;
}

int config_secrets_parse(config_secrets *out, const json_t *v, int needed, const char *file,
                         rg_error *err)
{
    content_secret_pattern *pats = NULL;
    const char **allow = NULL;
    size_t npats = 0, nallow = 0;
    const char *key;
    json_t *val;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (v != NULL && !json_is_object(v))
        return fail(err, file, "secrets", NULL, "expected an object");
    json_object_foreach((json_t *)v, key, val)
    {
        if (strcmp(key, "patterns") && strcmp(key, "allow"))
            return fail(err, file, "secrets", key, "unknown key (expected patterns or allow)");
    }
    if (v == NULL && !needed)
        return 0;
    rc = parse_patterns(&pats, &npats, v ? json_object_get(v, "patterns") : NULL, file, err);
    if (rc == 0)
        rc = parse_allow(&allow, &nallow, v ? json_object_get(v, "allow") : NULL, file, err);
    if (rc == 0) {
        rc = content_secrets_new(&out->scanner, pats, npats, allow, nallow, err);
        if (rc < 0)
            rg_error_wrap(err, "%s: secrets", file);
    }
    free(pats);
    free(allow);
    return rc;
}

void config_secrets_free(config_secrets *s)
{
    if (s == NULL)
        return;
    content_secrets_free(s->scanner);
    s->scanner = NULL;
}

/* ------------------------------------------------------------ signing */

static int signing_file(char **out, const json_t *v, const char *file, const char *dir,
                        const char *key, rg_error *err)
{
    struct stat st;
    const char *rel;

    if (v == NULL)
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return fail(err, file, "signing", key, "expected a file name");
    rel = json_string_value(v);
    if ((rel[0] == '/' ? asprintf(out, "%s", rel) : asprintf(out, "%s/%s", dir, rel)) < 0) {
        *out = NULL;
        return rg_error_set(err, -ENOMEM, "%s: out of memory", file);
    }
    if (stat(*out, &st) < 0 || !S_ISREG(st.st_mode) || access(*out, R_OK) < 0)
        return fail(err, file, "signing", key, "%s is not a readable file", *out);
    return 0;
}

int config_signing_parse(config_signing *out, const json_t *v, const char *file, const char *dir,
                         rg_error *err)
{
    const char *key;
    json_t *val;
    int rc;

    memset(out, 0, sizeof(*out));
    if (v == NULL)
        return 0;
    if (!json_is_object(v))
        return fail(err, file, "signing", NULL, "expected an object");
    json_object_foreach((json_t *)v, key, val)
    {
        if (strcmp(key, "allowed_signers") && strcmp(key, "gpg_keyring"))
            return fail(err, file, "signing", key,
                        "unknown key (expected allowed_signers or gpg_keyring)");
    }
    rc = signing_file(&out->allowed_signers, json_object_get(v, "allowed_signers"), file, dir,
                      "allowed_signers", err);
    if (rc == 0)
        rc = signing_file(&out->gpg_keyring, json_object_get(v, "gpg_keyring"), file, dir,
                          "gpg_keyring", err);
    return rc;
}

void config_signing_free(config_signing *s)
{
    if (s == NULL)
        return;
    free(s->allowed_signers);
    free(s->gpg_keyring);
    memset(s, 0, sizeof(*s));
}
