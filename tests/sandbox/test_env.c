/*
 * sandbox/env.c: the allow-list filter. A table of names and the verdict
 * each must get, then the environment built from a fixed input: what
 * passes, what is dropped, what --env overrides.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/env.h"

/* Inline strings: Criterion copies parameters into a fresh process, where
 * a pointer into this one's data would not be valid. */
typedef struct env_case {
    char name[40];
    sandbox_env_verdict want;
} env_case;

ParameterizedTestParameters(env, classify_names_by_the_allow_and_deny_lists)
{
    static env_case cases[] = {
        /* The allow-list. */
        {"PATH", SANDBOX_ENV_PASS},
        {"HOME", SANDBOX_ENV_PASS},
        {"USER", SANDBOX_ENV_PASS},
        {"LOGNAME", SANDBOX_ENV_PASS},
        {"LANG", SANDBOX_ENV_PASS},
        {"LC_ALL", SANDBOX_ENV_PASS},
        {"LC_CTYPE", SANDBOX_ENV_PASS},
        {"TERM", SANDBOX_ENV_PASS},
        {"TZ", SANDBOX_ENV_PASS},
        {"TMPDIR", SANDBOX_ENV_PASS},
        {"SHELL", SANDBOX_ENV_PASS},
        {"SSL_CERT_FILE", SANDBOX_ENV_PASS},
        {"SSL_CERT_DIR", SANDBOX_ENV_PASS},
        /* Everyday tool choices. */
        {"EDITOR", SANDBOX_ENV_PASS},
        {"VISUAL", SANDBOX_ENV_PASS},
        {"GIT_EDITOR", SANDBOX_ENV_PASS},
        {"PAGER", SANDBOX_ENV_PASS},
        {"CC", SANDBOX_ENV_PASS},
        {"CFLAGS", SANDBOX_ENV_PASS},
        {"MAKEFLAGS", SANDBOX_ENV_PASS},
        {"GOFLAGS", SANDBOX_ENV_PASS},
        {"CARGO_HOME", SANDBOX_ENV_PASS},
        {"RUSTUP_TOOLCHAIN", SANDBOX_ENV_PASS},
        {"VIRTUAL_ENV", SANDBOX_ENV_PASS},
        {"CI", SANDBOX_ENV_PASS},
        {"HTTPS_PROXY", SANDBOX_ENV_PASS},
        {"no_proxy", SANDBOX_ENV_PASS},
        {"GOPROXY", SANDBOX_ENV_PASS},
        /* Unlisted: dropped, but not for a reason worth a word. */
        {"FOO", SANDBOX_ENV_UNLISTED},
        {"PATHX", SANDBOX_ENV_UNLISTED},
        {"XPATH", SANDBOX_ENV_UNLISTED},
        {"LC", SANDBOX_ENV_UNLISTED},
        {"CCC", SANDBOX_ENV_UNLISTED},
        {"SSH_AUTH_SOCK", SANDBOX_ENV_UNLISTED},
        {"", SANDBOX_ENV_UNLISTED},
        /* Startup hooks, including where an allow pattern would match. */
        {"LD_PRELOAD", SANDBOX_ENV_HOOK},
        {"LD_LIBRARY_PATH", SANDBOX_ENV_HOOK},
        {"LD_AUDIT", SANDBOX_ENV_HOOK},
        {"DYLD_INSERT_LIBRARIES", SANDBOX_ENV_HOOK},
        {"NODE_OPTIONS", SANDBOX_ENV_HOOK},
        {"BASH_ENV", SANDBOX_ENV_HOOK},
        {"ENV", SANDBOX_ENV_HOOK},
        {"BASH_FUNC_ls%%", SANDBOX_ENV_HOOK},
        {"PYTHONSTARTUP", SANDBOX_ENV_HOOK},
        {"PERL5OPT", SANDBOX_ENV_HOOK},
        {"RUBYOPT", SANDBOX_ENV_HOOK},
        {"JAVA_TOOL_OPTIONS", SANDBOX_ENV_HOOK},
        {"GIT_SSH_COMMAND", SANDBOX_ENV_HOOK},
        {"GIT_CONFIG_COUNT", SANDBOX_ENV_HOOK},
        {"GIT_CONFIG_KEY_0", SANDBOX_ENV_HOOK},
        {"GIT_CONFIG_VALUE_0", SANDBOX_ENV_HOOK},
        {"GIT_CONFIG_PARAMETERS", SANDBOX_ENV_HOOK},
        {"GIT_CONFIG", SANDBOX_ENV_HOOK},
        {"PYTHONPATH", SANDBOX_ENV_HOOK},
        /* Credentials, in any case, even under an allowed prefix. */
        {"MY_API_TOKEN", SANDBOX_ENV_CREDENTIAL},
        {"GITHUB_TOKEN", SANDBOX_ENV_CREDENTIAL},
        {"github_token", SANDBOX_ENV_CREDENTIAL},
        {"TOKENIZER", SANDBOX_ENV_CREDENTIAL},
        {"AWS_SECRET_ACCESS_KEY", SANDBOX_ENV_CREDENTIAL},
        {"CLIENT_SECRET", SANDBOX_ENV_CREDENTIAL},
        {"DB_PASSWORD", SANDBOX_ENV_CREDENTIAL},
        {"PGPASSWORD", SANDBOX_ENV_CREDENTIAL},
        {"MYSQL_PASSWD", SANDBOX_ENV_CREDENTIAL},
        {"GOOGLE_APPLICATION_CREDENTIALS", SANDBOX_ENV_CREDENTIAL},
        {"OPENAI_API_KEY", SANDBOX_ENV_CREDENTIAL},
        {"stripe_key", SANDBOX_ENV_CREDENTIAL},
        {"LC_SECRET", SANDBOX_ENV_CREDENTIAL},
        {"SSL_CERT_KEY", SANDBOX_ENV_CREDENTIAL},
        /* "_KEY" only as a suffix. */
        {"KEYBOARD", SANDBOX_ENV_UNLISTED},
        {"AWS_ACCESS_KEY_ID", SANDBOX_ENV_UNLISTED},
    };

    return cr_make_param_array(env_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(env_case *c, env, classify_names_by_the_allow_and_deny_lists)
{
    sandbox_env_verdict got = sandbox_env_classify(c->name, strlen(c->name));

    cr_assert_eq(got, c->want, "%s: got %s, want %s", c->name, sandbox_env_verdict_str(got),
                 sandbox_env_verdict_str(c->want));
}

Test(env, classify_reads_only_the_name_before_the_value)
{
    const char *entry = "PATH=/usr/bin:MY_TOKEN";

    cr_assert_eq(sandbox_env_classify(entry, 4), SANDBOX_ENV_PASS);
}

Test(env, a_proxy_with_credentials_in_its_url_does_not_pass)
{
    cr_assert_eq(sandbox_env_check("HTTPS_PROXY=http://proxy.corp:3128"), SANDBOX_ENV_PASS);
    cr_assert_eq(sandbox_env_check("NO_PROXY=localhost,.corp,user@x"), SANDBOX_ENV_CREDENTIAL);
    cr_assert_eq(sandbox_env_check("no_proxy=localhost,.corp"), SANDBOX_ENV_PASS);
    cr_assert_eq(sandbox_env_check("https_proxy=http://me:pw@proxy:3128"), SANDBOX_ENV_CREDENTIAL);
    cr_assert_eq(sandbox_env_check("HTTP_PROXY=http://token@proxy:3128/"), SANDBOX_ENV_CREDENTIAL);
    cr_assert_eq(sandbox_env_check("ALL_PROXY=me:pw@proxy:1080"), SANDBOX_ENV_CREDENTIAL);
    /* An @ in a path is not userinfo; other variables are not looked into. */
    cr_assert_eq(sandbox_env_check("HTTP_PROXY=http://proxy:3128/a@b"), SANDBOX_ENV_PASS);
    cr_assert_eq(sandbox_env_check("EDITOR=vim://x:y@z"), SANDBOX_ENV_PASS);
    cr_assert_eq(sandbox_env_check("GOPROXY=https://u:pw@goproxy.corp"), SANDBOX_ENV_CREDENTIAL);
    cr_assert_eq(sandbox_env_check("GOPROXY=off"), SANDBOX_ENV_PASS);
}

static const char *const outer_src[] = {
    "PATH=/usr/bin:/bin", "HOME=/home/u",           "LANG=C.UTF-8",
    "LC_ALL=C",           "LD_PRELOAD=/evil.so",    "NODE_OPTIONS=--require=/evil.js",
    "GIT_CONFIG_COUNT=1", "MY_API_TOKEN=SECRET",    "FOO=bar",
    "TMPDIR=/var/tmp",    "PATH=/second/duplicate", "NOEQUALS",
};
static char *outer[sizeof(outer_src) / sizeof(outer_src[0]) + 1];

/* An environ-like array (char *const *) from the const table above. */
static void env_setup(void)
{
    size_t i;

    for (i = 0; i < sizeof(outer_src) / sizeof(outer_src[0]); i++)
        outer[i] = strdup(outer_src[i]);
}

static void env_teardown(void)
{
    size_t i;

    for (i = 0; outer[i]; i++) {
        free(outer[i]);
        outer[i] = NULL;
    }
}

TestSuite(env, .init = env_setup, .fini = env_teardown);

Test(env, build_keeps_only_the_allow_list_and_sets_tmpdir)
{
    sandbox_env_opts o = SANDBOX_ENV_OPTS_INIT;
    char **env = NULL;
    size_t n = 0;

    o.home = "/passwd/home";
    o.tmpdir = "/tmp/refgate-run.abc";
    cr_assert_eq(sandbox_env_build(&env, outer, &o, NULL), 0);
    while (env[n])
        n++;
    cr_assert_eq(n, 5, "got %zu entries", n);
    cr_assert_str_eq(sandbox_env_get(env, "PATH"), "/usr/bin:/bin", "the first PATH wins");
    cr_assert_str_eq(sandbox_env_get(env, "HOME"), "/home/u", "the caller's HOME is kept");
    cr_assert_str_eq(sandbox_env_get(env, "LANG"), "C.UTF-8");
    cr_assert_str_eq(sandbox_env_get(env, "LC_ALL"), "C");
    cr_assert_str_eq(sandbox_env_get(env, "TMPDIR"), "/tmp/refgate-run.abc");
    cr_assert_null(sandbox_env_get(env, "LD_PRELOAD"));
    cr_assert_null(sandbox_env_get(env, "NODE_OPTIONS"));
    cr_assert_null(sandbox_env_get(env, "GIT_CONFIG_COUNT"));
    cr_assert_null(sandbox_env_get(env, "MY_API_TOKEN"));
    cr_assert_null(sandbox_env_get(env, "FOO"));
    sandbox_env_free(env);
}

Test(env, build_sets_home_when_the_caller_has_none)
{
    char path[] = "PATH=/bin";
    char *in[] = {path, NULL};
    sandbox_env_opts o = SANDBOX_ENV_OPTS_INIT;
    char **env = NULL;

    o.home = "/passwd/home";
    cr_assert_eq(sandbox_env_build(&env, in, &o, NULL), 0);
    cr_assert_str_eq(sandbox_env_get(env, "HOME"), "/passwd/home");
    cr_assert_null(sandbox_env_get(env, "TMPDIR"), "no TMPDIR unless given");
    sandbox_env_free(env);
}

Test(env, named_variables_pass_even_when_denied)
{
    const char *named[] = {"MY_API_TOKEN", "LD_PRELOAD",    "FOO",         "NEW=value",
                           "LANG=fr_FR",   "UNSET_OUTSIDE", "TMPDIR=/mine"};
    sandbox_env_opts o = SANDBOX_ENV_OPTS_INIT;
    char **env = NULL;

    o.named = named;
    o.nnamed = sizeof(named) / sizeof(named[0]);
    o.tmpdir = "/tmp/refgate-run.abc";
    cr_assert_eq(sandbox_env_build(&env, outer, &o, NULL), 0);
    cr_assert_str_eq(sandbox_env_get(env, "MY_API_TOKEN"), "SECRET");
    cr_assert_str_eq(sandbox_env_get(env, "LD_PRELOAD"), "/evil.so");
    cr_assert_str_eq(sandbox_env_get(env, "FOO"), "bar");
    cr_assert_str_eq(sandbox_env_get(env, "NEW"), "value");
    cr_assert_str_eq(sandbox_env_get(env, "LANG"), "fr_FR", "NAME=VALUE overrides");
    cr_assert_str_eq(sandbox_env_get(env, "TMPDIR"), "/mine", "an explicit TMPDIR wins");
    cr_assert_null(sandbox_env_get(env, "UNSET_OUTSIDE"));
    cr_assert_null(sandbox_env_get(env, "NODE_OPTIONS"), "only what is named passes");
    sandbox_env_free(env);
}

Test(env, malformed_env_arguments_are_refused)
{
    const char *bad[] = {"=value"};
    const char *empty[] = {""};
    sandbox_env_opts o = SANDBOX_ENV_OPTS_INIT;
    rg_error err = RG_ERROR_INIT;
    char **env = NULL;

    o.named = bad;
    o.nnamed = 1;
    cr_assert_eq(sandbox_env_build(&env, outer, &o, &err), -EINVAL);
    cr_assert(strstr(err.msg, "NAME=VALUE") != NULL, "%s", err.msg);
    o.named = empty;
    cr_assert_eq(sandbox_env_build(&env, outer, &o, NULL), -EINVAL);
}

Test(env, an_empty_environment_builds_an_empty_array)
{
    char *in[] = {NULL};
    sandbox_env_opts o = SANDBOX_ENV_OPTS_INIT;
    char **env = NULL;

    cr_assert_eq(sandbox_env_build(&env, in, &o, NULL), 0);
    cr_assert_not_null(env);
    cr_assert_null(env[0]);
    sandbox_env_free(env);
    sandbox_env_free(NULL);
}

Test(env, dropped_names_are_listed_without_values_or_shell_bookkeeping)
{
    char a[] = "PATH=/bin", b[] = "FOO=SECRET-VALUE", c[] = "PWD=/x", d[] = "MY_TOKEN=t",
         e[] = "SHLVL=1", f[] = "NOEQUALS";
    char *envp[] = {a, b, c, d, e, f, NULL};
    char k0[] = "PATH=/bin";
    char *built[] = {k0, NULL};
    char *out = NULL;

    cr_assert_eq(sandbox_env_dropped(&out, envp, built, 4096), 0);
    cr_assert_str_eq(out, "FOO, MY_TOKEN");
    free(out);
    cr_assert_eq(sandbox_env_dropped(&out, envp, built, 10), 0);
    cr_assert_str_eq(out, "FOO, ...");
    free(out);
    built[0] = NULL;
    envp[1] = NULL;
    cr_assert_eq(sandbox_env_dropped(&out, envp, built, 4096), 0);
    cr_assert_str_eq(out, "PATH");
    free(out);
}
