/*
 * The git child environment (util/gitenv.c): exactly the listed variables,
 * nothing of the parent's, settings through GIT_CONFIG_COUNT/KEY/VALUE.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/gitenv.h"

static size_t env_len(const char *const *envp)
{
    size_t n = 0;

    while (envp[n] != NULL)
        n++;
    return n;
}

/* The value of `name` in envp, or NULL; fails when it appears twice. */
static const char *env_get(const char *const *envp, const char *name)
{
    size_t len = strlen(name);
    const char *found = NULL;

    for (size_t i = 0; envp[i] != NULL; i++) {
        if (!strncmp(envp[i], name, len) && envp[i][len] == '=') {
            cr_assert_null(found, "%s appears twice", name);
            found = envp[i] + len + 1;
        }
    }
    return found;
}

/* The parent's variables that must never reach a git child. */
static const char *const hostile[] = {
    "GIT_DIR=/tmp/evil",
    "GIT_WORK_TREE=/tmp/evil",
    "GIT_OBJECT_DIRECTORY=/tmp/evil",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES=/tmp/evil",
    "GIT_CONFIG=/tmp/evil",
    "GIT_CONFIG_PARAMETERS='core.fsmonitor'='touch /tmp/pwned'",
    "GIT_CONFIG_COUNT=1",
    "GIT_CONFIG_KEY_0=core.sshCommand",
    "GIT_CONFIG_VALUE_0=touch /tmp/pwned",
    "GIT_EXEC_PATH=/tmp/evil",
    "GIT_SSH_COMMAND=touch /tmp/pwned",
    "GIT_ASKPASS=/tmp/evil",
    "GIT_PROTOCOL=version=2",
    "XDG_CONFIG_HOME=/tmp/evil",
    "HOME=/root",
    "LD_PRELOAD=/tmp/evil.so",
    "REFGATE_TOKEN=secret",
};

typedef struct gitenv_case {
    const char *name;
    rg_gitenv_opts opts;
    const char *settings[3][2]; /* key, value; {NULL} ends */
    /* Every variable the child gets, in any order; {NULL} ends. */
    const char *want[20];
} gitenv_case;

#define FIXED                                                                                      \
    "LANG=C", "HOME=/nonexistent", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",         \
        "GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1"

static gitenv_case cases[] = {
    {"plain (receive-pack, upload-pack advertisement)",
     {NULL, NULL, NULL, NULL},
     {{NULL}},
     {FIXED, "GIT_CONFIG_COUNT=0", NULL}},
    {"fetch with the client's protocol",
     {NULL, NULL, "version=2", NULL},
     {{NULL}},
     {FIXED, "GIT_PROTOCOL=version=2", "GIT_CONFIG_COUNT=0", NULL}},
    {"index-pack into a quarantine",
     {"/q/objects", "/up/objects", NULL, NULL},
     {{NULL}},
     {FIXED, "GIT_OBJECT_DIRECTORY=/q/objects", "GIT_ALTERNATE_OBJECT_DIRECTORIES=/up/objects",
      "GIT_CONFIG_COUNT=0", NULL}},
    {"reader over a quarantine",
     {NULL, "/q/objects", NULL, NULL},
     {{NULL}},
     {FIXED, "GIT_ALTERNATE_OBJECT_DIRECTORIES=/q/objects", "GIT_CONFIG_COUNT=0", NULL}},
    {"signature check with a private keyring",
     {NULL, "/q/objects", NULL, "/q/gnupg"},
     {{NULL}},
     {FIXED, "GIT_ALTERNATE_OBJECT_DIRECTORIES=/q/objects", "GNUPGHOME=/q/gnupg",
      "GIT_CONFIG_COUNT=0", NULL}},
    {"mirror fetch with a read credential",
     {NULL, NULL, NULL, NULL},
     {{"http.followRedirects", "false"},
      {"http.extraHeader", "Authorization: Basic c2VjcmV0"},
      {NULL}},
     {FIXED, "GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=http.followRedirects",
      "GIT_CONFIG_VALUE_0=false", "GIT_CONFIG_KEY_1=http.extraHeader",
      "GIT_CONFIG_VALUE_1=Authorization: Basic c2VjcmV0", NULL}},
};

/* Criterion hands parameters to a fresh process, where the strings the
 * table points to are at other addresses: pass indices into the table. */
static size_t case_index[sizeof(cases) / sizeof(cases[0])];

ParameterizedTestParameters(gitenv, produces_exactly_the_listed_variables)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        case_index[i] = i;
    return cr_make_param_array(size_t, case_index, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(size_t *ci, gitenv, produces_exactly_the_listed_variables)
{
    const gitenv_case *c = &cases[*ci];
    rg_error err = RG_ERROR_INIT;
    rg_gitenv *e = NULL;
    const char *const *envp;
    size_t nwant = 0;

    for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
        cr_assert_eq(putenv((char *)hostile[i]), 0);
    setenv("PATH", "/opt/git/bin:/usr/bin", 1);
    cr_assert_eq(rg_gitenv_new(&e, &c->opts, &err), 0, "%s", err.msg);
    for (size_t i = 0; c->settings[i][0] != NULL; i++)
        cr_assert_eq(rg_gitenv_config(e, c->settings[i][0], c->settings[i][1], &err), 0, "%s",
                     err.msg);
    envp = rg_gitenv_envp(e);
    /* PATH is the gateway's, so git finds what it runs as the administrator set it. */
    cr_expect_str_eq(env_get(envp, "PATH"), "/opt/git/bin:/usr/bin", "%s", c->name);
    for (nwant = 0; c->want[nwant] != NULL; nwant++) {
        char name[64];
        const char *eq = strchr(c->want[nwant], '=');

        snprintf(name, sizeof(name), "%.*s", (int)(eq - c->want[nwant]), c->want[nwant]);
        cr_expect_str_eq(env_get(envp, name) ? env_get(envp, name) : "(unset)", eq + 1, "%s: %s",
                         c->name, name);
    }
    /* Nothing else: none of the parent's variables passed. */
    cr_expect_eq(env_len(envp), nwant + 1, "%s: %zu variables, want %zu", c->name, env_len(envp),
                 nwant + 1);
    rg_gitenv_free(e);
}

Test(gitenv, settings_past_the_maximum_are_refused)
{
    rg_error err = RG_ERROR_INIT;
    rg_gitenv *e = NULL;

    cr_assert_eq(rg_gitenv_new(&e, NULL, &err), 0, "%s", err.msg);
    for (int i = 0; i < RG_GITENV_CONFIG_MAX; i++)
        cr_assert_eq(rg_gitenv_config(e, "a.b", "c", &err), 0, "%s", err.msg);
    cr_expect_eq(rg_gitenv_config(e, "a.b", "c", &err), -E2BIG);
    rg_gitenv_free(e);
}
