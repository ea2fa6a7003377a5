/*
 * The command's environment; see env.h. The three tables below are the
 * policy: what passes, what never passes unless named, and what a
 * credential's name looks like.
 */
#include "sandbox/env.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Policy tables                                                             */
/* ------------------------------------------------------------------------ */

typedef struct env_rule {
    const char *name;
    int prefix; /* match names that start with `name` */
} env_rule;

/*
 * What a command needs to find programs, speak the user's language and
 * verify TLS, and the everyday choices of editor, pager, compiler and
 * toolchain that builds expect to find (they run inside the sandbox like
 * everything else, so passing them grants nothing). Not the interpreters'
 * startup hooks below: PYTHONPATH stays out (a sitecustomize.py on it runs
 * in every python), a virtualenv is found through PATH and VIRTUAL_ENV.
 */
static const env_rule env_allow[] = {
    {"PATH", 0},        {"HOME", 0},        {"USER", 0},
    {"LOGNAME", 0},     {"LANG", 0},        {"LC_", 1},
    {"TERM", 0},        {"TZ", 0},          {"TMPDIR", 0},
    {"SHELL", 0},       {"SSL_CERT_", 1},   {"EDITOR", 0},
    {"VISUAL", 0},      {"GIT_EDITOR", 0},  {"PAGER", 0},
    {"CC", 0},          {"CXX", 0},         {"CFLAGS", 0},
    {"CXXFLAGS", 0},    {"CPPFLAGS", 0},    {"LDFLAGS", 0},
    {"MAKEFLAGS", 0},   {"GOFLAGS", 0},     {"GOPATH", 0},
    {"CARGO_HOME", 0},  {"RUSTUP_HOME", 0}, {"RUSTUP_TOOLCHAIN", 0},
    {"VIRTUAL_ENV", 0}, {"CI", 0},
};

/*
 * Proxy and module-proxy settings pass, but only without credentials in
 * them: a URL may carry `user:password@`, and then the whole variable stays
 * out. GOPROXY=off (offline) and the GOPRIVATE family are everyday go
 * settings.
 */
static const env_rule env_urls[] = {
    {"http_proxy", 0}, {"HTTP_PROXY", 0}, {"https_proxy", 0}, {"HTTPS_PROXY", 0}, {"no_proxy", 0},
    {"NO_PROXY", 0},   {"all_proxy", 0},  {"ALL_PROXY", 0},   {"ftp_proxy", 0},   {"FTP_PROXY", 0},
    {"GOPROXY", 0},    {"GOPRIVATE", 0},  {"GONOPROXY", 0},   {"GONOSUMDB", 0},   {"GOSUMDB", 0},
};

/*
 * Variables that make a program load or run something at start: the
 * dynamic loaders' (LD_*, DYLD_*), interpreters' startup hooks, bash's
 * exported functions and startup file, and git's ways to inject
 * configuration or an ssh command. Denied even where a pattern of the
 * allow-list would match.
 */
static const env_rule env_hooks[] = {
    {"LD_", 1},
    {"DYLD_", 1},
    {"NODE_OPTIONS", 0},
    {"NODE_PATH", 0},
    {"BASH_ENV", 0},
    {"BASH_FUNC_", 1},
    {"ENV", 0},
    {"SHELLOPTS", 0},
    {"BASHOPTS", 0},
    {"PROMPT_COMMAND", 0},
    {"PYTHONSTARTUP", 0},
    {"PYTHONPATH", 0},
    {"PERL5OPT", 0},
    {"PERL5LIB", 0},
    {"RUBYOPT", 0},
    {"RUBYLIB", 0},
    {"JAVA_TOOL_OPTIONS", 0},
    {"_JAVA_OPTIONS", 0},
    {"JDK_JAVA_OPTIONS", 0},
    {"GIT_SSH_COMMAND", 0},
    {"GIT_SSH", 0},
    {"GIT_ASKPASS", 0},
    {"SSH_ASKPASS", 0},
    {"GIT_PROXY_COMMAND", 0},
    {"GIT_EXEC_PATH", 0},
    {"GIT_CONFIG", 1}, /* GIT_CONFIG, GIT_CONFIG_COUNT/KEY_n/VALUE_n, _PARAMETERS */
};

/* Substrings (any case) that mark a credential, and the suffix "_KEY". */
static const char *const env_credential_words[] = {
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL",
};

/* ------------------------------------------------------------------------ */
/* Classification                                                            */
/* ------------------------------------------------------------------------ */

static int env_rule_match(const env_rule *rules, size_t n, const char *name, size_t len)
{
    size_t i, rl;

    for (i = 0; i < n; i++) {
        rl = strlen(rules[i].name);
        if (rules[i].prefix ? (len >= rl && memcmp(name, rules[i].name, rl) == 0)
                            : (len == rl && memcmp(name, rules[i].name, rl) == 0))
            return 1;
    }
    return 0;
}

static int env_contains_nocase(const char *s, size_t len, const char *word)
{
    size_t wl = strlen(word), i, j;

    for (i = 0; i + wl <= len; i++) {
        for (j = 0; j < wl; j++)
            if (toupper((unsigned char)s[i + j]) != word[j])
                break;
        if (j == wl)
            return 1;
    }
    return 0;
}

sandbox_env_verdict sandbox_env_classify(const char *name, size_t len)
{
    size_t i;

    if (env_rule_match(env_hooks, sizeof(env_hooks) / sizeof(env_hooks[0]), name, len))
        return SANDBOX_ENV_HOOK;
    for (i = 0; i < sizeof(env_credential_words) / sizeof(env_credential_words[0]); i++)
        if (env_contains_nocase(name, len, env_credential_words[i]))
            return SANDBOX_ENV_CREDENTIAL;
    if (len >= 4 && env_contains_nocase(name + len - 4, 4, "_KEY"))
        return SANDBOX_ENV_CREDENTIAL;
    if (env_rule_match(env_allow, sizeof(env_allow) / sizeof(env_allow[0]), name, len) ||
        env_rule_match(env_urls, sizeof(env_urls) / sizeof(env_urls[0]), name, len))
        return SANDBOX_ENV_PASS;
    return SANDBOX_ENV_UNLISTED;
}

/* Whether a URL (or a list of them) has a user or password in it. */
static int env_has_userinfo(const char *v)
{
    const char *p, *q;

    for (p = v; (p = strstr(p, "://")) != NULL; p += 3)
        for (q = p + 3; *q && *q != '/' && *q != ',' && *q != ' '; q++)
            if (*q == '@')
                return 1;
    /* A bare "user:pass@host:port" (curl accepts it) has no scheme. */
    if (strstr(v, "://") == NULL && strchr(v, '@') != NULL)
        return 1;
    return 0;
}

sandbox_env_verdict sandbox_env_check(const char *entry)
{
    size_t len = strcspn(entry, "=");
    sandbox_env_verdict v = sandbox_env_classify(entry, len);

    if (v == SANDBOX_ENV_PASS && entry[len] == '=' &&
        env_rule_match(env_urls, sizeof(env_urls) / sizeof(env_urls[0]), entry, len) &&
        env_has_userinfo(entry + len + 1))
        return SANDBOX_ENV_CREDENTIAL;
    return v;
}

const char *sandbox_env_verdict_str(sandbox_env_verdict v)
{
    switch (v) {
    case SANDBOX_ENV_PASS:
        return "on the allow-list";
    case SANDBOX_ENV_UNLISTED:
        return "not on the allow-list";
    case SANDBOX_ENV_HOOK:
        return "changes what programs load or run";
    case SANDBOX_ENV_CREDENTIAL:
        return "looks like a credential";
    }
    return "?";
}

/* ------------------------------------------------------------------------ */
/* Building                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct env_list {
    char **v;
    size_t n, cap;
} env_list;

static size_t env_name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');

    return eq ? (size_t)(eq - entry) : strlen(entry);
}

static ssize_t env_list_find(const env_list *l, const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < l->n; i++)
        if (env_name_len(l->v[i]) == len && memcmp(l->v[i], name, len) == 0)
            return (ssize_t)i;
    return -1;
}

/* Set NAME=VALUE, replacing an entry of the same name; consumes `entry`. */
static int env_list_set(env_list *l, char *entry)
{
    ssize_t at;
    char **grown;

    if (entry == NULL)
        return -ENOMEM;
    at = env_list_find(l, entry, env_name_len(entry));
    if (at >= 0) {
        free(l->v[at]);
        l->v[at] = entry;
        return 0;
    }
    if (l->n + 2 > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;

        grown = realloc(l->v, cap * sizeof(*grown));
        if (grown == NULL) {
            free(entry);
            return -ENOMEM;
        }
        l->v = grown;
        l->cap = cap;
    }
    l->v[l->n++] = entry;
    l->v[l->n] = NULL;
    return 0;
}

static char *env_entry(const char *name, const char *value)
{
    size_t ln = strlen(name), lv = strlen(value);
    char *e = malloc(ln + lv + 2);

    if (e == NULL)
        return NULL;
    memcpy(e, name, ln);
    e[ln] = '=';
    memcpy(e + ln + 1, value, lv + 1);
    return e;
}

const char *sandbox_env_get(char *const *env, const char *name)
{
    size_t len = strlen(name), i;

    for (i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, len) == 0 && env[i][len] == '=')
            return env[i] + len + 1;
    return NULL;
}

int sandbox_env_build(char ***out, char *const *envp, const sandbox_env_opts *opts, rg_error *err)
{
    env_list l = {NULL, 0, 0};
    size_t i, len;
    int rc = 0;

    for (i = 0; i < opts->nnamed; i++) {
        const char *a = opts->named[i];

        if (a[0] == '\0' || a[0] == '=') {
            rc = rg_error_set(err, -EINVAL, "--env '%s': expected NAME or NAME=VALUE", a);
            goto done;
        }
    }
    for (i = 0; rc == 0 && envp && envp[i]; i++) {
        if (strchr(envp[i], '=') == NULL)
            continue;
        len = env_name_len(envp[i]);
        /* The first of duplicate entries is the one getenv() sees. */
        if (env_list_find(&l, envp[i], len) >= 0)
            continue;
        if (sandbox_env_check(envp[i]) != SANDBOX_ENV_PASS)
            continue;
        rc = env_list_set(&l, strdup(envp[i]));
    }
    if (rc == 0 && opts->tmpdir)
        rc = env_list_set(&l, env_entry("TMPDIR", opts->tmpdir));
    if (rc == 0 && opts->home && env_list_find(&l, "HOME", 4) < 0)
        rc = env_list_set(&l, env_entry("HOME", opts->home));
    for (i = 0; rc == 0 && i < opts->nnamed; i++) {
        const char *a = opts->named[i], *v;

        if (strchr(a, '=') != NULL) {
            rc = env_list_set(&l, strdup(a));
            continue;
        }
        v = sandbox_env_get(envp, a);
        if (v != NULL)
            rc = env_list_set(&l, env_entry(a, v));
    }
    if (rc == 0 && l.v == NULL) {
        /* An empty environment is still an array. */
        l.v = calloc(1, sizeof(*l.v));
        rc = l.v ? 0 : -ENOMEM;
    }
    if (rc < 0)
        rg_error_set(err, rc, "building the environment: %s", strerror(-rc));
done:
    if (rc < 0) {
        sandbox_env_free(l.v);
        return rc;
    }
    *out = l.v;
    return 0;
}

int sandbox_env_setdefault(char ***env, const char *name, const char *value, rg_error *err)
{
    char **grown;
    size_t n = 0;

    if (sandbox_env_get(*env, name) != NULL)
        return 0;
    while ((*env)[n] != NULL)
        n++;
    grown = realloc(*env, (n + 2) * sizeof(*grown));
    if (grown == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    *env = grown;
    grown[n] = env_entry(name, value);
    if (grown[n] == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    grown[n + 1] = NULL;
    return 0;
}

int sandbox_env_dropped(char **out, char *const *envp, char *const *built, size_t max)
{
    static const char *const shell[] = {"_", "PWD", "OLDPWD", "SHLVL"};
    char *list = NULL, *grown;
    size_t have = 0, i, j, len;

    *out = NULL;
    for (i = 0; envp && envp[i]; i++) {
        if (strchr(envp[i], '=') == NULL)
            continue;
        len = env_name_len(envp[i]);
        for (j = 0; built[j]; j++)
            if (env_name_len(built[j]) == len && memcmp(built[j], envp[i], len) == 0)
                break;
        if (built[j] != NULL)
            continue;
        for (j = 0; j < sizeof(shell) / sizeof(shell[0]); j++)
            if (strlen(shell[j]) == len && memcmp(shell[j], envp[i], len) == 0)
                break;
        if (j < sizeof(shell) / sizeof(shell[0]))
            continue;
        if (have + len + 6 > max) {
            /* Room was kept for ", ..." when the list was growing. */
            if (list != NULL)
                memcpy(list + have, ", ...", 6);
            break;
        }
        grown = realloc(list, have + len + 8);
        if (grown == NULL) {
            free(list);
            return -ENOMEM;
        }
        list = grown;
        if (have > 0) {
            memcpy(list + have, ", ", 2);
            have += 2;
        }
        memcpy(list + have, envp[i], len);
        have += len;
        list[have] = '\0';
    }
    *out = list;
    return 0;
}

int sandbox_env_put(char ***env, const char *name, const char *value, rg_error *err)
{
    size_t len = strlen(name), i;

    for (i = 0; (*env)[i] != NULL; i++) {
        if (strncmp((*env)[i], name, len) == 0 && (*env)[i][len] == '=') {
            char *e = env_entry(name, value);

            if (e == NULL)
                return rg_error_set(err, -ENOMEM, "out of memory");
            explicit_bzero((*env)[i], strlen((*env)[i]));
            free((*env)[i]);
            (*env)[i] = e;
            return 0;
        }
    }
    return sandbox_env_setdefault(env, name, value, err);
}

void sandbox_env_free(char **env)
{
    size_t i;

    if (env == NULL)
        return;
    for (i = 0; env[i]; i++) {
        /* --env may have carried a token the user chose to pass. */
        explicit_bzero(env[i], strlen(env[i]));
        free(env[i]);
    }
    free(env);
}
