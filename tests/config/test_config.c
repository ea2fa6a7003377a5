/*
 * Tests for config/config.c. Each test gets a fresh temporary directory
 * holding upstream directories, so relative paths, file:// roots and
 * missing directories are checked against a real filesystem. Bad configs
 * are one table: every row must fail with a message that names the file,
 * the key path and the problem, because that message is all an operator
 * sees when the gateway refuses to start.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "util/fs.h"

static char tmpdir[PATH_MAX];

/* ---------------------------------------------------------------------------
 * Fixture
 * ------------------------------------------------------------------------- */

static void mkdir_in(const char *rel)
{
    char p[PATH_MAX];

    cr_assert_lt(snprintf(p, sizeof(p), "%s/%s", tmpdir, rel), (int)sizeof(p));
    cr_assert_eq(mkdir(p, 0700), 0, "mkdir %s", p);
}

static void setup(void)
{
    char tmpl[] = "/tmp/rg-test-config-XXXXXX";

    cr_assert_not_null(mkdtemp(tmpl));
    /* Resolved, because the loader reports resolved directories. */
    cr_assert_not_null(realpath(tmpl, tmpdir));
    mkdir_in("repos");
    mkdir_in("my repos");
    mkdir_in("sub");
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void teardown(void)
{
    if (tmpdir[0] != '\0')
        nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(config, .init = setup, .fini = teardown);

/* Turn single quotes into double ones so JSON can be written readably. */
static void dequote(char *s)
{
    for (; *s; s++)
        if (*s == '\'')
            *s = '"';
}

/* Write `json` (single-quoted) to <tmpdir>/<rel>; returns the full path. */
static const char *write_config(const char *rel, const char *json)
{
    static char path[PATH_MAX];
    char text[8192];
    rg_error err = RG_ERROR_INIT;

    cr_assert_lt(snprintf(path, sizeof(path), "%s/%s", tmpdir, rel), (int)sizeof(path));
    cr_assert_lt(snprintf(text, sizeof(text), "%s", json), (int)sizeof(text));
    dequote(text);
    cr_assert_eq(rg_fs_write_atomic(path, text, strlen(text), 0600, &err), 0, "%s", err.msg);
    return path;
}

static char *join(const char *a, const char *b)
{
    static char bufs[4][PATH_MAX];
    static int next;
    char *p = bufs[next++ % 4];

    cr_assert_lt(snprintf(p, PATH_MAX, "%s/%s", a, b), PATH_MAX);
    return p;
}

/* ---------------------------------------------------------------------------
 * Valid configs
 * ------------------------------------------------------------------------- */

Test(config, a_full_config_loads_every_field)
{
    char json[8192];
    const char *path;
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    const config_rule *r;
    int n;

    n = snprintf(json, sizeof(json),
                 "{'listen': '[::1]:0', 'state_dir': 'state', 'default': 'allow',"
                 " 'max_body_bytes': 1048576,"
                 " 'upstreams': ["
                 "  {'host': 'local', 'url': 'repos'},"
                 "  {'host': 'abs', 'url': 'file://%s/my%%20repos'},"
                 "  {'host': 'plain-abs', 'url': '%s/sub/../repos'},"
                 "  {'host': 'github.com', 'url': 'https://github.com/',"
                 "   'credentials': {'type': 'static', 'token_file': 't'},"
                 "   'read_credentials': 'none', 'ca_file': 'ca.pem',"
                 "   'connect_timeout': 5, 'idle_timeout': 30}],"
                 " 'rules': ["
                 "  {'name': 'protect-main', 'repos': ['local/acme/*'],"
                 "   'refs': ['refs/heads/main', 'refs/heads/release/**'],"
                 "   'actions': ['update', 'force', 'delete'], 'effect': 'deny',"
                 "   'reason': 'main is protected'},"
                 "  {'repos': ['github.com/**'], 'effect': 'ask', 'mode': 'evaluate'},"
                 "  {'name': 'tags', 'refs': ['refs/tags/*'], 'actions': ['create'],"
                 "   'runs': ['release-*', 'ci/**'], 'effect': 'allow', 'mode': 'enforce'}]}",
                 tmpdir, tmpdir);
    cr_assert_lt(n, (int)sizeof(json));
    path = write_config("refgate.json", json);
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);

    cr_expect_str_eq(cfg->path, path);
    cr_expect_str_eq(cfg->listen_host, "::1");
    cr_expect_eq(cfg->listen_port, 0);
    cr_expect_str_eq(cfg->state_dir, join(tmpdir, "state"));
    cr_expect_eq(cfg->default_effect, CONFIG_ALLOW);
    cr_expect_eq(cfg->max_body_bytes, 1048576);

    cr_assert_eq(cfg->nupstreams, 4);
    cr_expect_str_eq(cfg->upstreams[0].host, "local");
    cr_expect_str_eq(cfg->upstreams[0].url, "repos");
    cr_expect_str_eq(cfg->upstreams[0].root, join(tmpdir, "repos"));
    cr_expect_str_eq(cfg->upstreams[1].host, "abs");
    cr_expect_str_eq(cfg->upstreams[1].root, join(tmpdir, "my repos"), "%%20 is decoded");
    cr_expect_str_eq(cfg->upstreams[2].root, join(tmpdir, "repos"));
    cr_expect_str_eq(cfg->upstreams[3].host, "github.com");
    cr_expect_str_eq(cfg->upstreams[3].url, "https://github.com", "no trailing slash");
    cr_expect_null(cfg->upstreams[3].root);
    cr_expect_eq(cfg->upstreams[3].credentials.type, CONFIG_CRED_STATIC);
    cr_expect_str_eq(cfg->upstreams[3].credentials.username, "x-access-token");
    cr_expect_str_eq(cfg->upstreams[3].credentials.token_file, join(tmpdir, "t"));
    cr_expect_eq(cfg->upstreams[3].read_credentials.type, CONFIG_CRED_NONE);
    cr_expect_eq(cfg->upstreams[3].has_read_credentials, 1);
    cr_expect_str_eq(cfg->upstreams[3].ca_file, join(tmpdir, "ca.pem"));
    cr_expect_eq(cfg->upstreams[3].connect_timeout, 5);
    cr_expect_eq(cfg->upstreams[3].idle_timeout, 30);
    cr_expect_eq(config_find_upstream(cfg, "github.com"), &cfg->upstreams[3]);
    cr_expect_eq(config_find_upstream(cfg, "local"), &cfg->upstreams[0]);
    cr_expect_null(config_find_upstream(cfg, "nope"));

    cr_assert_eq(cfg->nrules, 3);
    r = &cfg->rules[0];
    cr_expect_str_eq(r->name, "protect-main");
    cr_assert_eq(r->nrepos, 1);
    cr_expect_str_eq(r->repos[0], "local/acme/*");
    cr_assert_eq(r->nrefs, 2);
    cr_expect_str_eq(r->refs[0], "refs/heads/main");
    cr_expect_str_eq(r->refs[1], "refs/heads/release/**");
    cr_expect_eq(r->actions, CONFIG_ACTION_UPDATE | CONFIG_ACTION_FORCE | CONFIG_ACTION_DELETE);
    cr_expect_eq(r->effect, CONFIG_DENY);
    cr_expect_str_eq(r->reason, "main is protected");
    cr_expect_eq(r->evaluate_only, 0);

    r = &cfg->rules[1];
    cr_expect_str_eq(r->name, "rules[1]", "an unnamed rule is named by its index");
    cr_expect_null(r->refs, "an absent selector matches anything");
    cr_expect_eq(r->nrefs, 0);
    cr_expect_eq(r->actions, CONFIG_ACTION_ALL);
    cr_expect_eq(r->effect, CONFIG_ASK);
    cr_expect_null(r->reason);
    cr_expect_eq(r->evaluate_only, 1);

    cr_expect_null(r->runs, "an absent runs matches any run");
    cr_expect_eq(r->nruns, 0);

    r = &cfg->rules[2];
    cr_expect_null(r->repos);
    cr_assert_eq(r->nruns, 2);
    cr_expect_str_eq(r->runs[0], "release-*");
    cr_expect_str_eq(r->runs[1], "ci/**");
    cr_expect_eq(r->actions, CONFIG_ACTION_CREATE);
    cr_expect_eq(r->evaluate_only, 0);
    config_free(cfg);
}

Test(config, a_minimal_config_gets_the_documented_defaults)
{
    const char *path = write_config("min.json", "{'state_dir': '/var/lib/refgate'}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg->listen_host, "127.0.0.1");
    cr_expect_eq(cfg->listen_port, 8470);
    cr_expect_eq(cfg->default_effect, CONFIG_DENY, "fail closed without a default");
    cr_expect_eq(cfg->max_body_bytes, (uint64_t)2 * 1024 * 1024 * 1024);
    cr_expect_eq(cfg->limits.connections, 4096);
    cr_expect_eq(cfg->limits.unauthenticated, 3072);
    cr_expect_eq(cfg->limits.per_token, 16);
    cr_expect_eq(cfg->limits.header_seconds, 10);
    cr_expect_eq(cfg->limits.idle_seconds, 60);
    cr_expect_eq(cfg->limits.spool_bytes, (uint64_t)8 * 1024 * 1024 * 1024);
    cr_expect_eq(cfg->limits.inflate_ratio, 100);
    cr_expect_eq(cfg->nupstreams, 0);
    cr_expect_null(cfg->upstreams);
    cr_expect_eq(cfg->nrules, 0);
    cr_expect_null(cfg->rules);
    config_free(cfg);
}

Test(config, limits_load_and_a_small_connection_limit_keeps_headroom_for_pushers)
{
    const char *path = write_config(
        "limits.json", "{'state_dir': 's', 'limits': {'connections': 64, 'unauthenticated': 8, "
                       "'per_token': 2, 'header_seconds': 3, 'idle_seconds': 5, "
                       "'spool_bytes': 1048576, 'inflate_ratio': 20}}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg->limits.connections, 64);
    cr_expect_eq(cfg->limits.unauthenticated, 8);
    cr_expect_eq(cfg->limits.per_token, 2);
    cr_expect_eq(cfg->limits.header_seconds, 3);
    cr_expect_eq(cfg->limits.idle_seconds, 5);
    cr_expect_eq(cfg->limits.spool_bytes, 1048576);
    cr_expect_eq(cfg->limits.inflate_ratio, 20);
    config_free(cfg);

    /* Only connections given: the unauthenticated default leaves a quarter. */
    path = write_config("limits2.json", "{'state_dir': 's', 'limits': {'connections': 100}}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg->limits.unauthenticated, 75);
    config_free(cfg);
}

Test(config, control_defaults_to_a_socket_in_state_dir_and_loads_its_keys)
{
    const char *path = write_config("ctl.json", "{'state_dir': '/var/lib/refgate'}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg->control.socket, "/var/lib/refgate/control.sock");
    cr_expect_eq(cfg->control.nusers, 0);
    cr_expect_eq(cfg->control.ngroups, 0);
    cr_expect_eq(cfg->control.max_ttl, 12 * 3600);
    cr_expect_null(cfg->control.url);
    config_free(cfg);

    path = write_config("ctl2.json",
                        "{'state_dir': 's', 'control': {'socket': 'run/ctl.sock', "
                        "'users': ['alice', '1001'], 'groups': ['devs'], 'max_ttl': '30m', "
                        "'url': 'http://127.0.0.1:8470/'}}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect(strstr(cfg->control.socket, "/run/ctl.sock") != NULL && cfg->control.socket[0] == '/',
              "relative to the file: %s", cfg->control.socket);
    cr_assert_eq(cfg->control.nusers, 2);
    cr_expect_str_eq(cfg->control.users[0], "alice");
    cr_expect_str_eq(cfg->control.users[1], "1001");
    cr_assert_eq(cfg->control.ngroups, 1);
    cr_expect_str_eq(cfg->control.groups[0], "devs");
    cr_expect_eq(cfg->control.max_ttl, 1800);
    cr_expect_str_eq(cfg->control.url, "http://127.0.0.1:8470", "without the trailing slash");
    config_free(cfg);

    /* A state_dir too deep for a socket path: no socket, but the config loads. */
    path = write_config("ctl4.json",
                        "{'state_dir': "
                        "'/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_null(cfg->control.socket);
    config_free(cfg);

    path = write_config("ctl3.json", "{'state_dir': 's', 'control': {'max_ttl': 600}}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg->control.max_ttl, 600);
    config_free(cfg);
}

Test(config, the_console_is_off_unless_it_has_a_listen_address)
{
    const char *path = write_config("con.json", "{'state_dir': 's'}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_null(cfg->console.listen_host);
    config_free(cfg);
    path = write_config("con2.json", "{'state_dir': 's', 'console': {'listen': '[::1]:0'}}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg->console.listen_host, "::1");
    cr_expect_eq(cfg->console.listen_port, 0);
    config_free(cfg);
}

Test(config, an_ask_rule_may_hold_the_push)
{
    const char *path = write_config(
        "hold.json", "{'state_dir': 's', 'rules': [{'name': 'a', 'effect': 'ask', 'hold': '5m'}, "
                     "{'name': 'b', 'effect': 'ask'}, {'name': 'c', 'effect': 'ask', 'hold': 9}]}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg->rules[0].hold, 300);
    cr_expect_eq(cfg->rules[1].hold, 0);
    cr_expect_eq(cfg->rules[2].hold, 9);
    config_free(cfg);
}

Test(config, approvals_expire_after_a_day_unless_configured)
{
    const char *path = write_config("appr.json", "{'state_dir': 's'}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg->approvals.expire, 24 * 3600);
    config_free(cfg);
    path = write_config("appr2.json", "{'state_dir': 's', 'approvals': {'expire': '30m'}}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg->approvals.expire, 1800);
    config_free(cfg);
    path = write_config("appr3.json", "{'state_dir': 's', 'approvals': {'expire': 5}}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_eq(cfg->approvals.expire, 5);
    config_free(cfg);
}

Test(config, the_admin_listener_is_off_unless_configured)
{
    const char *path = write_config("admin.json", "{'state_dir': 's'}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_null(cfg->admin.listen_host);
    config_free(cfg);
    path = write_config("admin2.json", "{'state_dir': 's', 'admin': {'listen': '[::1]:0'}}");
    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg->admin.listen_host, "::1");
    cr_expect_eq(cfg->admin.listen_port, 0);
    config_free(cfg);
}

Test(config, relative_paths_are_relative_to_the_file_not_the_working_directory)
{
    const char *path =
        write_config("sub/refgate.json", "{'state_dir': '../state',"
                                         " 'upstreams': [{'host': 'local', 'url': '../repos'},"
                                         "               {'host': 'dot', 'url': './'}]}");
    char expect_path[PATH_MAX], repos_dir[PATH_MAX];
    const char *from[] = {expect_path, "sub/refgate.json", "../sub/refgate.json"};
    const char *cwd[] = {"/", tmpdir, repos_dir};
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    size_t i;

    snprintf(expect_path, sizeof(expect_path), "%s", path);
    cr_assert_lt(snprintf(repos_dir, sizeof(repos_dir), "%s/repos", tmpdir),
                 (int)sizeof(repos_dir));
    for (i = 0; i < 3; i++) {
        cr_assert_eq(chdir(cwd[i]), 0);
        cr_assert_eq(config_load(&cfg, from[i], &err), 0, "%s", err.msg);
        cr_expect_str_eq(cfg->path, expect_path, "loaded as %s from %s", from[i], cwd[i]);
        cr_expect_str_eq(cfg->state_dir, join(tmpdir, "state"), "loaded as %s", from[i]);
        cr_expect_str_eq(cfg->upstreams[0].root, join(tmpdir, "repos"), "loaded as %s", from[i]);
        cr_expect_str_eq(cfg->upstreams[1].root, join(tmpdir, "sub"), "loaded as %s", from[i]);
        config_free(cfg);
    }
}

Test(config, an_absolute_state_dir_is_kept_and_tidied)
{
    const char *path = write_config("abs.json", "{'state_dir': '/nonexistent/./a//b/../state/'}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg->state_dir, "/nonexistent/a/state");
    config_free(cfg);
}

Test(config, parse_from_memory_anchors_paths_at_the_named_file)
{
    char path[PATH_MAX];
    const char json[] = "{\"state_dir\": \"s\", \"upstreams\": [{\"host\": \"h\", \"url\": "
                        "\"repos\"}]}";
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_lt(snprintf(path, sizeof(path), "%s/never-written.json", tmpdir), (int)sizeof(path));
    cr_assert_eq(config_parse(&cfg, json, strlen(json), path, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg->path, path);
    cr_expect_str_eq(cfg->state_dir, join(tmpdir, "s"));
    cr_expect_str_eq(cfg->upstreams[0].root, join(tmpdir, "repos"));
    config_free(cfg);
}

Test(config, remote_credentials_get_their_defaults_and_read_copies_write)
{
    const char *path = write_config(
        "remote.json", "{'state_dir': 's', 'upstreams': ["
                       " {'host': 'gh', 'url': 'https://github.com///',"
                       "  'credentials': {'type': 'github-app', 'app_id': 42,"
                       "                  'private_key_file': 'keys/../app.pem'}},"
                       " {'host': 'gl', 'url': 'http://gitlab.example:8080/group',"
                       "  'credentials': {'type': 'static', 'username': 'oauth2',"
                       "                  'token_file': '/run/secrets/gl'},"
                       "  'read_credentials': {'type': 'github-app', 'app_id': 7,"
                       "   'private_key_file': '/k.pem', 'api_url': 'https://ghe.example/api/v3/',"
                       "   'installation_id': 99}},"
                       " {'host': 'anon', 'url': 'https://anon.example'}]}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    const config_upstream *up;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    up = &cfg->upstreams[0];
    cr_expect_str_eq(up->url, "https://github.com");
    cr_expect_eq(up->credentials.type, CONFIG_CRED_GITHUB_APP);
    cr_expect_eq(up->credentials.app_id, 42);
    cr_expect_str_eq(up->credentials.private_key_file, join(tmpdir, "app.pem"));
    cr_expect_str_eq(up->credentials.api_url, "https://api.github.com");
    cr_expect_eq(up->credentials.installation_id, 0, "looked up per repository");
    cr_expect_null(up->credentials.username);
    cr_expect_eq(up->has_read_credentials, 0);
    cr_expect_eq(up->read_credentials.type, CONFIG_CRED_GITHUB_APP, "read copies write");
    cr_expect_eq(up->read_credentials.app_id, 42);
    cr_expect_str_eq(up->read_credentials.private_key_file, join(tmpdir, "app.pem"));
    cr_expect_neq(up->read_credentials.private_key_file, up->credentials.private_key_file,
                  "a deep copy: each string has one owner");
    cr_expect_null(up->ca_file);
    cr_expect_eq(up->connect_timeout, 10);
    cr_expect_eq(up->idle_timeout, 60);

    up = &cfg->upstreams[1];
    cr_expect_str_eq(up->url, "http://gitlab.example:8080/group");
    cr_expect_eq(up->credentials.type, CONFIG_CRED_STATIC);
    cr_expect_str_eq(up->credentials.username, "oauth2");
    cr_expect_str_eq(up->credentials.token_file, "/run/secrets/gl");
    cr_expect_eq(up->has_read_credentials, 1);
    cr_expect_eq(up->read_credentials.type, CONFIG_CRED_GITHUB_APP);
    cr_expect_eq(up->read_credentials.app_id, 7);
    cr_expect_str_eq(up->read_credentials.api_url, "https://ghe.example/api/v3");
    cr_expect_eq(up->read_credentials.installation_id, 99);

    up = &cfg->upstreams[2];
    cr_expect_eq(up->credentials.type, CONFIG_CRED_NONE, "no credentials: none");
    cr_expect_eq(up->read_credentials.type, CONFIG_CRED_NONE);
    cr_expect_eq(up->has_read_credentials, 0);
    config_free(cfg);
}

Test(config, local_upstreams_have_no_remote_fields)
{
    const char *path = write_config(
        "local.json", "{'state_dir': 's', 'upstreams': [{'host': 'l', 'url': "
                      "'repos/'}, {'host': 'n', 'url': 'https://x', "
                      "'credentials': 'none', 'read_credentials': {'type': 'none'}}]}");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_load(&cfg, path, &err), 0, "%s", err.msg);
    cr_expect_str_eq(cfg->upstreams[0].url, "repos/", "local URLs are kept as written");
    cr_expect_eq(cfg->upstreams[0].credentials.type, CONFIG_CRED_NONE);
    cr_expect_null(cfg->upstreams[0].credentials.username);
    cr_expect_eq(cfg->upstreams[0].connect_timeout, 0);
    cr_expect_eq(cfg->upstreams[1].credentials.type, CONFIG_CRED_NONE);
    cr_expect_eq(cfg->upstreams[1].has_read_credentials, 1);
    config_free(cfg);
}

/*
 * Parameters are copied into the test process, where pointers into this
 * one would be meaningless (the binary is position-independent), so the
 * strings are held inline.
 */
struct listen_case {
    char listen[32];
    char host[32];
    unsigned port;
};

static struct listen_case listen_cases[] = {
    {"127.0.0.1:8470", "127.0.0.1", 8470},
    {"0.0.0.0:0", "0.0.0.0", 0},
    {"10.1.2.3:65535", "10.1.2.3", 65535},
    {"127.0.0.1:00080", "127.0.0.1", 80},
    {"[::1]:0", "::1", 0},
    {"[::]:9000", "::", 9000},
    {"[fe80::1:2]:1", "fe80::1:2", 1},
};

ParameterizedTestParameters(config, listen_forms_that_load)
{
    return cr_make_param_array(struct listen_case, listen_cases,
                               sizeof(listen_cases) / sizeof(listen_cases[0]));
}

ParameterizedTest(struct listen_case *c, config, listen_forms_that_load)
{
    char json[256];
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    snprintf(json, sizeof(json), "{\"state_dir\": \"s\", \"listen\": \"%s\"}", c->listen);
    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/listen.json", &err), 0, "%s: %s",
                 c->listen, err.msg);
    cr_expect_str_eq(cfg->listen_host, c->host, "%s", c->listen);
    cr_expect_eq(cfg->listen_port, c->port, "%s", c->listen);
    config_free(cfg);
}

/* ---------------------------------------------------------------------------
 * Bad configs
 * ------------------------------------------------------------------------- */

/* Inline strings, as for listen_case. */
struct bad_case {
    char what[64];
    char json[320];    /* single-quoted; @DIR@ stands for the fixture directory */
    char key[64];      /* the key path the message must name, or "" */
    int line;          /* for syntax errors: the line the message must name */
    char problem[160]; /* what the message must say is wrong */
};

#define UP_CRED(c) "'upstreams': [{'host': 'h', 'url': 'https://x', 'credentials': " c "}]"
#define UP_LOCAL   "'upstreams': [{'host': 'local', 'url': 'https://git.example.com'}]"

static struct bad_case bad_cases[] = {
    /* Unknown keys, anywhere. */
    {"unknown top-level key", "{'state_dir': 's', 'colour': 'red'}", "colour", 0,
     "unknown key (expected listen, state_dir, default, max_body_bytes, limits, control, "
     "approvals, admin, console, upstreams, rules, secrets, signing or state)"},
    /* Shared state: a libpq connection string without a password. */
    {"state not an object", "{'state_dir': 's', 'state': 'pg'}", "state", 0, "expected an object"},
    {"state without postgres", "{'state_dir': 's', 'state': {}}", "state.postgres", 0, "required"},
    {"state unknown key", "{'state_dir': 's', 'state': {'postgres': 'dbname=x', 'pool': 2}}",
     "state.pool", 0, "unknown key"},
    {"state password in the string",
     "{'state_dir': 's', 'state': {'postgres': 'dbname=x password=hunter2'}}", "state.postgres", 0,
     "holds a password"},
    {"state password in a URI",
     "{'state_dir': 's', 'state': {'postgres': 'postgresql://u:hunter2@h/x'}}", "state.postgres", 0,
     "holds a password"},
    {"state bad conninfo", "{'state_dir': 's', 'state': {'postgres': 'dbname'}}", "state.postgres",
     0, "not a libpq connection string"},
    {"state connections", "{'state_dir': 's', 'state': {'postgres': 'dbname=x', 'connections': 0}}",
     "state.connections", 0, "from 1 to 64"},
    /* The admin listener. */
    {"admin not an object", "{'state_dir': 's', 'admin': '127.0.0.1:1'}", "admin", 0,
     "expected an object"},
    {"admin key unknown", "{'state_dir': 's', 'admin': {'port': 1}}", "admin.port", 0,
     "unknown key (expected listen)"},
    {"admin without listen", "{'state_dir': 's', 'admin': {}}", "admin.listen", 0, "required"},
    {"admin listen a name", "{'state_dir': 's', 'admin': {'listen': 'localhost:9'}}",
     "admin.listen", 0, "is not an IPv4 address"},
    {"admin listen is the push port",
     "{'state_dir': 's', 'listen': '127.0.0.1:8470', 'admin': {'listen': '127.0.0.1:8470'}}",
     "admin.listen", 0, "needs a port of its own"},
    /* The review console: its own listener, never the push port. */
    {"console not an object", "{'state_dir': 's', 'console': true}", "console", 0,
     "expected an object"},
    {"console without listen", "{'state_dir': 's', 'console': {}}", "console.listen", 0,
     "required"},
    {"console unknown key", "{'state_dir': 's', 'console': {'listen': '127.0.0.1:0', 'tls': 1}}",
     "console.tls", 0, "unknown key (expected listen)"},
    {"console listen a name", "{'state_dir': 's', 'console': {'listen': 'localhost:8471'}}",
     "console.listen", 0, "is not an IPv4 address"},
    {"console on the push port",
     "{'state_dir': 's', 'listen': '127.0.0.1:8470', 'console': {'listen': '127.0.0.1:8470'}}",
     "console.listen", 0, "the console needs a port of its own, not the gateway's (8470)"},
    /* Content conditions (config/conditions.c) and the secrets they use. */
    {"condition key unknown", "{'state_dir': 's', 'rules': [{'effect': 'deny', 'signed': true}]}",
     "rules[0].signed", 0, "unknown key (expected name, repos, refs, runs, actions, effect"},
    {"paths empty", "{'state_dir': 's', 'rules': [{'effect': 'deny', 'paths': []}]}",
     "rules[0].paths", 0, "empty list matches nothing"},
    {"paths absolute", "{'state_dir': 's', 'rules': [{'effect': 'deny', 'paths': ['/etc']}]}",
     "rules[0].paths", 0, "[0] is not a pattern a changed path can match"},
    {"paths ** inside a segment",
     "{'state_dir': 's', 'rules': [{'effect': 'deny', 'paths': ['a/**.pem']}]}", "rules[0].paths",
     0, "[0] is not a pattern a changed path can match"},
    {"max_file_bytes negative",
     "{'state_dir': 's', 'rules': [{'effect': 'deny', 'max_file_bytes': -1}]}",
     "rules[0].max_file_bytes", 0, "expected an integer from 0 to"},
    {"max_path_length a string",
     "{'state_dir': 's', 'rules': [{'effect': 'deny', 'max_path_length': '9'}]}",
     "rules[0].max_path_length", 0, "expected an integer from 0 to 4096"},
    {"secrets false", "{'state_dir': 's', 'rules': [{'effect': 'deny', 'secrets': false}]}",
     "rules[0].secrets", 0, "only true is meaningful"},
    {"merge_commits a string",
     "{'state_dir': 's', 'rules': [{'effect': 'deny', 'merge_commits': 'yes'}]}",
     "rules[0].merge_commits", 0, "only true is meaningful"},
    {"message_not does not compile",
     "{'state_dir': 's', 'rules': [{'name': 'dco', 'effect': 'deny', 'message_not': '(a'}]}",
     "rules[0].message_not", 0, "not a POSIX extended regular expression"},
    {"author_email_not empty",
     "{'state_dir': 's', 'rules': [{'effect': 'deny', 'author_email_not': ''}]}",
     "rules[0].author_email_not", 0, "expected a regular expression"},
    {"secrets unknown key", "{'state_dir': 's', 'secrets': {'allowed': []}}", "secrets.allowed", 0,
     "unknown key (expected patterns or allow)"},
    {"secrets pattern without a regex",
     "{'state_dir': 's', 'secrets': {'patterns': [{'name': 'acme'}]}}", "secrets.patterns[0]", 0,
     "expected {\"name\": \"...\", \"regex\": \"...\"}"},
    {"secrets pattern that does not compile",
     "{'state_dir': 's', 'secrets': {'patterns': [{'name': 'acme', 'regex': 'acme_('}]}}",
     "secrets", 0, "acme"},
    {"secrets allow not a fingerprint", "{'state_dir': 's', 'secrets': {'allow': ['nope']}}",
     "secrets", 0, "fingerprint 1 is not"},
    {"unsigned without a key",
     "{'state_dir': 's', 'rules': [{'effect': 'deny', 'unsigned': true}]}", "rules[0].unsigned", 0,
     "no key to verify signatures against"},
    {"signing unknown key", "{'state_dir': 's', 'signing': {'ssh': 'x'}}", "signing.ssh", 0,
     "unknown key (expected allowed_signers or gpg_keyring)"},
    {"signing file missing", "{'state_dir': 's', 'signing': {'gpg_keyring': 'nope.gpg'}}",
     "signing.gpg_keyring", 0, "@DIR@/nope.gpg is not a readable file"},
    {"inspect_seconds zero", "{'state_dir': 's', 'limits': {'inspect_seconds': 0}}",
     "limits.inspect_seconds", 0, "must be from 1 to 3600"},
    {"inspect_bytes below a MiB", "{'state_dir': 's', 'limits': {'inspect_bytes': 1000}}",
     "limits.inspect_bytes", 0, "must be from 1048576"},
    /* Approvals. */
    {"approvals not an object", "{'state_dir': 's', 'approvals': 3}", "approvals", 0,
     "expected an object, got an integer"},
    {"unknown approvals key", "{'state_dir': 's', 'approvals': {'expires': '1h'}}",
     "approvals.expires", 0, "unknown key (expected expire)"},
    {"approvals expire too long", "{'state_dir': 's', 'approvals': {'expire': '31d'}}",
     "approvals.expire", 0, "expected 1 second to 30 days"},
    {"approvals expire zero", "{'state_dir': 's', 'approvals': {'expire': 0}}", "approvals.expire",
     0, "expected 1 second to 30 days"},
    {"approvals expire not a duration", "{'state_dir': 's', 'approvals': {'expire': true}}",
     "approvals.expire", 0, "expected a duration"},
    /* The control socket. */
    {"control not an object", "{'state_dir': 's', 'control': []}", "control", 0,
     "expected an object, got an array"},
    {"unknown control key", "{'state_dir': 's', 'control': {'user': ['a']}}", "control.user", 0,
     "unknown key (expected socket, users, groups, max_ttl or url)"},
    {"control users not an array", "{'state_dir': 's', 'control': {'users': 'alice'}}",
     "control.users", 0, "expected an array of names or ids, got a string"},
    {"control user not a name", "{'state_dir': 's', 'control': {'users': ['a b']}}",
     "control.users[0]", 0, "\"a b\" is not a user or group name or a numeric id"},
    {"control group an integer", "{'state_dir': 's', 'control': {'groups': [12]}}",
     "control.groups[0]", 0, "expected a string (a name or a numeric id), got an integer"},
    {"control max_ttl too long", "{'state_dir': 's', 'control': {'max_ttl': '8d'}}",
     "control.max_ttl", 0, "expected 1 second to 7 days"},
    {"control max_ttl not a duration", "{'state_dir': 's', 'control': {'max_ttl': '2 hours'}}",
     "control.max_ttl", 0, "expected 1 second to 7 days"},
    {"control url not http", "{'state_dir': 's', 'control': {'url': 'https://127.0.0.1:1'}}",
     "control.url", 0, "expected the gateway's http:// URL"},
    {"control url with a user", "{'state_dir': 's', 'control': {'url': 'http://u:p@127.0.0.1:1'}}",
     "control.url", 0, "expected the gateway's http:// URL"},
    {"control socket path too long",
     "{'state_dir': 's', 'control': {'socket': "
     "'/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaa.sock'}}",
     "control.socket", 0, "longer than a unix socket path may be (107)"},
    /* Limits. */
    {"limits not an object", "{'state_dir': 's', 'limits': 5}", "limits", 0,
     "expected an object, got an integer"},
    {"unknown limits key", "{'state_dir': 's', 'limits': {'conns': 5}}", "limits.conns", 0,
     "unknown key (expected connections, unauthenticated"},
    {"limit not an integer", "{'state_dir': 's', 'limits': {'per_token': '4'}}", "limits.per_token",
     0, "expected an integer, got a string"},
    {"limit zero", "{'state_dir': 's', 'limits': {'per_token': 0}}", "limits.per_token", 0,
     "must be from 1 to 1048576, got 0"},
    {"limit negative", "{'state_dir': 's', 'limits': {'idle_seconds': -1}}", "limits.idle_seconds",
     0, "must be from 1 to 3600, got -1"},
    {"header deadline too long", "{'state_dir': 's', 'limits': {'header_seconds': 86400}}",
     "limits.header_seconds", 0, "must be from 1 to 3600"},
    {"no headroom for pushers",
     "{'state_dir': 's', 'limits': {'connections': 10, 'unauthenticated': 10}}",
     "limits.unauthenticated", 0, "must be below limits.connections (10)"},
    {"tiny spool budget", "{'state_dir': 's', 'limits': {'spool_bytes': 1000}}",
     "limits.spool_bytes", 0, "must be from 1048576"},
    {"inflate ratio 1", "{'state_dir': 's', 'limits': {'inflate_ratio': 1}}",
     "limits.inflate_ratio", 0, "must be from 2 to 100000, got 1"},
    {"unknown rule key", "{'state_dir': 's', 'rules': [{'effect': 'deny'}, {'efect': 'deny'}]}",
     "rules[1].efect", 0, "unknown key (expected name, repos, refs, runs, actions, effect"},
    {"unknown upstream key",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x', 'token': 't'}]}",
     "upstreams[0].token", 0, "unknown key"},
    /* Wrong types. */
    {"state_dir not a string", "{'state_dir': 5}", "state_dir", 0,
     "expected a string, got an integer"},
    {"rules not an array", "{'state_dir': 's', 'rules': {}}", "rules", 0,
     "expected an array, got an object"},
    {"rule not an object", "{'state_dir': 's', 'rules': ['deny']}", "rules[0]", 0,
     "expected an object, got a string"},
    {"upstreams not an array", "{'state_dir': 's', 'upstreams': 'local'}", "upstreams", 0,
     "expected an array, got a string"},
    {"actions not an array",
     "{'state_dir': 's', 'rules': [{'actions': 'force', 'effect': 'deny'}]}", "rules[0].actions", 0,
     "expected an array of actions, got a string"},
    {"action not a string", "{'state_dir': 's', 'rules': [{'actions': [1], 'effect': 'deny'}]}",
     "rules[0].actions[0]", 0, "expected a string, got an integer"},
    {"refs not an array",
     "{'state_dir': 's', 'rules': [{'refs': 'refs/heads/main', 'effect': 'deny'}]}",
     "rules[0].refs", 0, "expected an array of patterns, got a string"},
    {"ref pattern not a string",
     "{'state_dir': 's', 'rules': [{'refs': ['refs/heads/a', null], 'effect': 'deny'}]}",
     "rules[0].refs[1]", 0, "expected a string, got null"},
    {"runs not an array", "{'state_dir': 's', 'rules': [{'runs': 'release', 'effect': 'allow'}]}",
     "rules[0].runs", 0, "expected an array of patterns, got a string"},
    {"run pattern not a string", "{'state_dir': 's', 'rules': [{'runs': [7], 'effect': 'allow'}]}",
     "rules[0].runs[0]", 0, "expected a string, got an integer"},
    {"empty runs list", "{'state_dir': 's', 'rules': [{'runs': [], 'effect': 'allow'}]}",
     "rules[0].runs", 0, "empty list matches nothing (omit the key to match any run)"},
    {"empty run pattern", "{'state_dir': 's', 'rules': [{'runs': [''], 'effect': 'allow'}]}",
     "rules[0].runs[0]", 0, "empty pattern"},
    {"run pattern with a space",
     "{'state_dir': 's', 'rules': [{'runs': ['release agent'], 'effect': 'allow'}]}",
     "rules[0].runs[0]", 0,
     "\"release agent\" never matches: run names are printable ASCII without spaces"},
    {"run pattern beyond ASCII",
     "{'state_dir': 's', 'rules': [{'runs': ['r\u00e9lease'], 'effect': 'allow'}]}",
     "rules[0].runs[0]", 0, "run names are printable ASCII without spaces"},
    {"run pattern with ***", "{'state_dir': 's', 'rules': [{'runs': ['a***'], 'effect': 'deny'}]}",
     "rules[0].runs[0]", 0, "*** is not a pattern"},
    {"run pattern with a class",
     "{'state_dir': 's', 'rules': [{'runs': ['agent-[12]'], 'effect': 'deny'}]}",
     "rules[0].runs[0]", 0, "character classes and escapes are not supported"},
    {"run pattern with a partial **",
     "{'state_dir': 's', 'rules': [{'runs': ['ci/a**'], 'effect': 'deny'}]}", "rules[0].runs[0]", 0,
     "** must be a whole segment"},
    {"effect not a string", "{'state_dir': 's', 'rules': [{'effect': true}]}", "rules[0].effect", 0,
     "expected a string, got a boolean"},
    {"max_body_bytes not an integer", "{'state_dir': 's', 'max_body_bytes': '2G'}",
     "max_body_bytes", 0, "expected an integer (bytes), got a string"},
    {"max_body_bytes not positive", "{'state_dir': 's', 'max_body_bytes': 0}", "max_body_bytes", 0,
     "must be a positive number of bytes"},
    {"top level not an object", "['state_dir']", "", 0,
     "expected a JSON object at the top level, got an array"},
    /* Bad values. */
    {"bad action",
     "{'state_dir': 's', 'rules': [{'effect': 'deny'}, {'effect': 'deny'},"
     " {'actions': ['update', 'push'], 'effect': 'deny'}]}",
     "rules[2].actions[1]", 0,
     "unknown action \"push\" (expected create, update, force or delete)"},
    {"empty action list", "{'state_dir': 's', 'rules': [{'actions': [], 'effect': 'deny'}]}",
     "rules[0].actions", 0, "empty list matches nothing"},
    {"bad effect", "{'state_dir': 's', 'rules': [{'effect': 'block'}]}", "rules[0].effect", 0,
     "unknown effect \"block\" (expected allow, deny or ask)"},
    {"missing effect", "{'state_dir': 's', 'rules': [{'name': 'x'}]}", "rules[0].effect", 0,
     "required key is missing"},
    {"bad default", "{'state_dir': 's', 'default': 'maybe'}", "default", 0,
     "unknown effect \"maybe\""},
    {"bad mode", "{'state_dir': 's', 'rules': [{'effect': 'deny', 'mode': 'dry-run'}]}",
     "rules[0].mode", 0, "unknown mode \"dry-run\" (expected enforce or evaluate)"},
    {"hold on an allow rule", "{'state_dir': 's', 'rules': [{'effect': 'allow', 'hold': 60}]}",
     "rules[0].hold", 0, "only a rule with \"effect\": \"ask\" can hold a push"},
    {"hold too long", "{'state_dir': 's', 'rules': [{'effect': 'ask', 'hold': '2h'}]}",
     "rules[0].hold", 0, "expected 1 second to 1 hour"},
    {"hold zero", "{'state_dir': 's', 'rules': [{'effect': 'ask', 'hold': 0}]}", "rules[0].hold", 0,
     "expected 1 second to 1 hour"},
    {"hold not a duration", "{'state_dir': 's', 'rules': [{'effect': 'ask', 'hold': []}]}",
     "rules[0].hold", 0, "expected a duration"},
    {"duplicate rule name",
     "{'state_dir': 's', 'rules': [{'name': 'a', 'effect': 'deny'}, {'name': 'a', 'effect': "
     "'allow'}]}",
     "rules[1].name", 0, "duplicate rule name \"a\" (also rules[0])"},
    {"explicit name colliding with a generated one",
     "{'state_dir': 's', 'rules': [{'effect': 'deny'}, {'name': 'rules[0]', 'effect': 'allow'}]}",
     "rules[1].name", 0, "duplicate rule name \"rules[0]\""},
    {"rule named default", "{'state_dir': 's', 'rules': [{'name': 'default', 'effect': 'deny'}]}",
     "rules[0].name", 0, "reserved"},
    {"empty rule name", "{'state_dir': 's', 'rules': [{'name': '', 'effect': 'deny'}]}",
     "rules[0].name", 0, "must not be empty"},
    {"reason with a newline",
     "{'state_dir': 's', 'rules': [{'effect': 'deny', 'reason': 'a\\nb'}]}", "rules[0].reason", 0,
     "one line"},
    {"missing state_dir", "{'listen': '127.0.0.1:1'}", "state_dir", 0, "required key is missing"},
    {"empty state_dir", "{'state_dir': ''}", "state_dir", 0, "must not be empty"},
    /* listen. */
    {"listen on a name", "{'state_dir': 's', 'listen': 'localhost:8470'}", "listen", 0,
     "\"localhost\" is not an IPv4 address"},
    {"listen without a port", "{'state_dir': 's', 'listen': '127.0.0.1'}", "listen", 0,
     "is not host:port"},
    {"listen with an empty port", "{'state_dir': 's', 'listen': '127.0.0.1:'}", "listen", 0,
     "port must be a number from 0 to 65535"},
    {"listen port too large", "{'state_dir': 's', 'listen': '127.0.0.1:65536'}", "listen", 0,
     "port must be a number from 0 to 65535"},
    {"listen port signed", "{'state_dir': 's', 'listen': '127.0.0.1:-1'}", "listen", 0,
     "port must be a number"},
    {"listen IPv6 without brackets", "{'state_dir': 's', 'listen': '::1:8470'}", "listen", 0,
     "brackets"},
    {"listen bad IPv6", "{'state_dir': 's', 'listen': '[::g]:80'}", "listen", 0,
     "not an IPv6 address"},
    {"listen unclosed bracket", "{'state_dir': 's', 'listen': '[::1:80'}", "listen", 0,
     "is not host:port"},
    /* Upstreams. */
    {"duplicate host",
     "{'state_dir': 's', 'upstreams': [{'host': 'local', 'url': 'repos'},"
     " {'host': 'local', 'url': 'https://x'}]}",
     "upstreams[1].host", 0, "duplicate host \"local\" (also upstreams[0])"},
    {"host with a slash", "{'state_dir': 's', 'upstreams': [{'host': 'a/b', 'url': 'repos'}]}",
     "upstreams[0].host", 0, "must be one path segment"},
    {"host ..", "{'state_dir': 's', 'upstreams': [{'host': '..', 'url': 'repos'}]}",
     "upstreams[0].host", 0, "must not start with a dot"},
    {"missing host", "{'state_dir': 's', 'upstreams': [{'url': 'repos'}]}", "upstreams[0].host", 0,
     "required key is missing"},
    {"missing url", "{'state_dir': 's', 'upstreams': [{'host': 'h'}]}", "upstreams[0].url", 0,
     "required key is missing"},
    {"missing upstream directory",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'repos'},"
     " {'host': 'g', 'url': 'missing'}]}",
     "upstreams[1].url", 0, "@DIR@/missing does not exist"},
    {"missing file:// directory",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'file://@DIR@/gone/../missing'}]}",
     "upstreams[0].url", 0, "upstream directory @DIR@/missing does not exist"},
    {"upstream that is a file",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'bad.json'}]}", "upstreams[0].url", 0,
     "is not a directory"},
    {"relative file URL", "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'file://repos'}]}",
     "upstreams[0].url", 0, "a file URL needs an absolute path"},
    {"bad escape in a file URL",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'file:///srv/a%zz'}]}",
     "upstreams[0].url", 0, "bad %-escape"},
    {"unsupported scheme", "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'ssh://x/y'}]}",
     "upstreams[0].url", 0, "unsupported URL scheme \"ssh\""},
    {"scp-style address",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'git@github.com:acme'}]}",
     "upstreams[0].url", 0, "scp-style"},
    {"http URL without a host",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://'}]}", "upstreams[0].url", 0,
     "has no host name"},
    {"credentials on a file upstream",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'repos', 'credentials': {}}]}",
     "upstreams[0].credentials", 0, "only http(s) upstreams take this key"},
    {"credentials of the wrong type",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x', 'credentials': 1}]}",
     "upstreams[0].credentials", 0, "expected an object or a string, got an integer"},
    {"timeout of the wrong type",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x', 'connect_timeout': "
     "'10s'}]}",
     "upstreams[0].connect_timeout", 0, "expected a whole number of seconds, got a string"},
    {"fractional timeout",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x', 'idle_timeout': 2.5}]}",
     "upstreams[0].idle_timeout", 0, "expected a whole number of seconds, got a number"},
    {"huge timeout",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x', 'idle_timeout': 60000}]}",
     "upstreams[0].idle_timeout", 0, "at most 3600 seconds"},
    {"timeout on a file upstream",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'repos', 'connect_timeout': 5}]}",
     "upstreams[0].connect_timeout", 0, "only http(s) upstreams take this key"},
    {"URL with a password",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://u:ghp_x@github.com/'}]}",
     "upstreams[0].url", 0, "must not carry a user name or password"},
    {"URL with a query", "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x/?a'}]}",
     "upstreams[0].url", 0, "a query or fragment"},
    /* Credentials. */
    {"credential string that is not none", "{'state_dir': 's', " UP_CRED("'ghp_secret'") "}",
     "upstreams[0].credentials", 0, "a string here can only be \"none\""},
    {"credentials without a type", "{'state_dir': 's', " UP_CRED("{'token_file': 't'}") "}",
     "upstreams[0].credentials.type", 0, "required key is missing (expected none, static or"},
    {"unknown credential type", "{'state_dir': 's', " UP_CRED("{'type': 'oauth'}") "}",
     "upstreams[0].credentials.type", 0,
     "unknown type \"oauth\" (expected none, static or github-app)"},
    {"none with another key",
     "{'state_dir': 's', " UP_CRED("{'type': 'none', 'token_file': 't'}") "}",
     "upstreams[0].credentials.token_file", 0, "unknown key (expected only type)"},
    {"static without token_file", "{'state_dir': 's', " UP_CRED("{'type': 'static'}") "}",
     "upstreams[0].credentials.token_file", 0, "required key is missing"},
    {"static with a token in the config",
     "{'state_dir': 's', " UP_CRED("{'type': 'static', 'token_file': 't', 'token': 'x'}") "}",
     "upstreams[0].credentials.token", 0, "unknown key (expected type, username or token_file)"},
    {"static user name with a colon",
     "{'state_dir': 's', " UP_CRED("{'type': 'static', 'token_file': 't', 'username': 'a:b'}") "}",
     "upstreams[0].credentials.username", 0, "must not contain ':'"},
    {"github-app without app_id",
     "{'state_dir': 's', " UP_CRED("{'type': 'github-app', 'private_key_file': 'k'}") "}",
     "upstreams[0].credentials.app_id", 0, "required key is missing"},
    {"github-app with a string app_id",
     "{'state_dir': 's', " UP_CRED("{'type': 'github-app', 'app_id': '12', "
                                   "'private_key_file': 'k'}") "}",
     "upstreams[0].credentials.app_id", 0, "expected a positive integer, got a string"},
    {"github-app with app_id 0",
     "{'state_dir': 's', " UP_CRED("{'type': 'github-app', 'app_id': 0, "
                                   "'private_key_file': 'k'}") "}",
     "upstreams[0].credentials.app_id", 0, "must be a positive integer, got 0"},
    {"github-app without a key",
     "{'state_dir': 's', " UP_CRED("{'type': 'github-app', 'app_id': 1}") "}",
     "upstreams[0].credentials.private_key_file", 0, "required key is missing"},
    {"github-app with a bad api_url",
     "{'state_dir': 's', " UP_CRED("{'type': 'github-app', 'app_id': 1, "
                                   "'private_key_file': 'k', 'api_url': 'ftp://x'}") "}",
     "upstreams[0].credentials.api_url", 0, "is not an http:// or https:// URL"},
    {"github-app with a negative installation",
     "{'state_dir': 's', " UP_CRED("{'type': 'github-app', 'app_id': 1, "
                                   "'private_key_file': 'k', 'installation_id': -4}") "}",
     "upstreams[0].credentials.installation_id", 0, "must be a positive integer"},
    {"github-app with a static key",
     "{'state_dir': 's', " UP_CRED("{'type': 'github-app', 'app_id': 1, "
                                   "'private_key_file': 'k', 'username': 'u'}") "}",
     "upstreams[0].credentials.username", 0,
     "unknown key (expected type, app_id, private_key_file, api_url or installation_id)"},
    {"bad read_credentials",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x', "
     "'read_credentials': {'type': 'static', 'file': 't'}}]}",
     "upstreams[0].read_credentials.file", 0, "unknown key"},
    {"negative timeout",
     "{'state_dir': 's', 'upstreams': [{'host': 'h', 'url': 'https://x', 'idle_timeout': -1}]}",
     "upstreams[0].idle_timeout", 0, "must be a positive number of seconds"},
    /* Patterns. */
    {"empty pattern", "{'state_dir': 's', 'rules': [{'refs': [''], 'effect': 'deny'}]}",
     "rules[0].refs[0]", 0, "empty pattern"},
    {"empty pattern list", "{'state_dir': 's', 'rules': [{'repos': [], 'effect': 'deny'}]}",
     "rules[0].repos", 0, "empty list matches nothing"},
    {"triple star", "{'state_dir': 's', 'rules': [{'refs': ['refs/***'], 'effect': 'deny'}]}",
     "rules[0].refs[0]", 0, "*** is not a pattern"},
    {"** inside a segment",
     "{'state_dir': 's', 'rules': [{'refs': ['refs/heads/a**'], 'effect': "
     "'deny'}]}",
     "rules[0].refs[0]", 0, "** must be a whole segment"},
    {"empty segment", "{'state_dir': 's', 'rules': [{'refs': ['refs//main'], 'effect': 'deny'}]}",
     "rules[0].refs[0]", 0, "has an empty path segment"},
    {"trailing slash", "{'state_dir': 's', 'rules': [{'refs': ['refs/heads/'], 'effect': 'deny'}]}",
     "rules[0].refs[0]", 0, "has an empty path segment"},
    {"character class",
     "{'state_dir': 's', 'rules': [{'refs': ['refs/heads/[ab]'], 'effect': "
     "'deny'}]}",
     "rules[0].refs[0]", 0, "character classes"},
    {"short ref name",
     "{'state_dir': 's', 'rules': [{'refs': ['refs/heads/*', 'main'], 'effect': 'deny'}]}",
     "rules[0].refs[1]", 0, "\"main\" never matches: refs are full names"},
    {"repo with .git",
     "{'state_dir': 's', " UP_LOCAL
     ", 'rules': [{'repos': ['local/acme/app.git'], 'effect': 'deny'}]}",
     "rules[0].repos[0]", 0, "without .git"},
    {"repo on no configured host",
     "{'state_dir': 's', " UP_LOCAL
     ", 'rules': [{'repos': ['github/acme/app'], 'effect': 'deny'}]}",
     "rules[0].repos[0]", 0, "no upstream has host \"github\""},
    {"repo without a host",
     "{'state_dir': 's', " UP_LOCAL ", 'rules': [{'repos': ['app'], 'effect': 'deny'}]}",
     "rules[0].repos[0]", 0, "repos are named <host>/<path>"},
    /* Syntax. */
    {"syntax error names the line", "{\n  'state_dir': 's',\n  'rules': [,]\n}", "", 3,
     "invalid JSON"},
    {"duplicate key", "{'state_dir': 'a',\n 'state_dir': 'b'}", "", 2, "duplicate"},
    {"trailing garbage", "{'state_dir': 'a'} x", "", 1, "invalid JSON"},
    {"empty file", "", "", 1, "invalid JSON"},
    {"NUL escape", "{'state_dir': 'a\\u0000b'}", "", 1, "invalid JSON"},
};

/* Copy `in` to `out`, with every @DIR@ replaced by the fixture directory. */
static void expand(char *out, size_t size, const char *in)
{
    size_t len = 0, dlen = strlen(tmpdir);

    while (*in && len + 1 < size) {
        if (!strncmp(in, "@DIR@", 5) && len + dlen + 1 < size) {
            memcpy(out + len, tmpdir, dlen);
            len += dlen;
            in += 5;
        } else {
            out[len++] = *in++;
        }
    }
    out[len] = '\0';
}

ParameterizedTestParameters(config, rejects_bad_configs_naming_file_key_and_problem)
{
    return cr_make_param_array(struct bad_case, bad_cases,
                               sizeof(bad_cases) / sizeof(bad_cases[0]));
}

ParameterizedTest(struct bad_case *c, config, rejects_bad_configs_naming_file_key_and_problem)
{
    char path[PATH_MAX], json[4096], problem[1024], prefix[PATH_MAX + 64];
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = (config_model *)1;
    int rc;

    /* The file exists (so "is not a directory" has something to find). */
    cr_assert_lt(snprintf(path, sizeof(path), "%s/bad.json", tmpdir), (int)sizeof(path));
    cr_assert_eq(rg_fs_write_atomic(path, "{}", 2, 0600, &err), 0, "%s", err.msg);
    expand(json, sizeof(json), c->json);
    dequote(json);
    expand(problem, sizeof(problem), c->problem);

    rc = config_parse(&cfg, json, strlen(json), path, &err);
    cr_expect_eq(rc, RG_E_CONFIG, "%s: rc %d (%s)", c->what, rc, err.msg);
    cr_expect_null(cfg, "%s: no config on failure", c->what);
    if (c->line > 0)
        snprintf(prefix, sizeof(prefix), "%s:%d:", path, c->line);
    else if (c->key[0] != '\0')
        snprintf(prefix, sizeof(prefix), "%s: %s: ", path, c->key);
    else
        snprintf(prefix, sizeof(prefix), "%s: ", path);
    cr_expect(!strncmp(err.msg, prefix, strlen(prefix)), "%s: \"%s\" should start \"%s\"", c->what,
              err.msg, prefix);
    cr_expect(strstr(err.msg, "hunter2") == NULL, "%s: a password reached the message", c->what);
    cr_expect(strstr(err.msg, problem) != NULL, "%s: \"%s\" should say \"%s\"", c->what, err.msg,
              problem);
}

Test(config, conditions_load_onto_their_rule_and_secrets_compile_only_when_asked_for)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    const config_conditions *c;

    cr_assert_eq(config_load(&cfg,
                             write_config("c.json",
                                          "{'state_dir': 's', 'limits': {'inspect_bytes': 2097152, "
                                          "'inspect_seconds': 9}, 'rules': ["
                                          "{'name': 'plain', 'effect': 'allow'},"
                                          "{'name': 'all', 'effect': 'deny', 'paths': "
                                          "['.github/workflows/**', '**/*.pem'], "
                                          "'max_file_bytes': 10, 'max_path_length': 20, "
                                          "'secrets': true, 'author_email_not': '@a\\\\.com$', "
                                          "'committer_email_not': 'x', 'message_not': "
                                          "'^Signed-off-by: ', 'merge_commits': true}],"
                                          "'secrets': {'patterns': [{'name': 'acme', 'regex': "
                                          "'acme_[0-9]{8}'}]}}"),
                             &err),
                 0, "%s", err.msg);
    cr_assert_eq(cfg->rules[0].cond.set, 0u);
    c = &cfg->rules[1].cond;
    cr_assert_eq(c->set, (unsigned)(CONFIG_COND_PATHS | CONFIG_COND_MAX_FILE_BYTES |
                                    CONFIG_COND_MAX_PATH_LENGTH | CONFIG_COND_SECRETS |
                                    CONFIG_COND_AUTHOR_EMAIL_NOT | CONFIG_COND_COMMITTER_EMAIL_NOT |
                                    CONFIG_COND_MESSAGE_NOT | CONFIG_COND_MERGE_COMMITS));
    cr_assert_eq(c->npaths, 2u);
    cr_assert_str_eq(c->paths[1], "**/*.pem");
    cr_assert_eq(c->max_file_bytes, 10u);
    cr_assert_eq(c->max_path_length, 20u);
    cr_assert_eq(regexec(&c->author_email_not, "me@a.com", 0, NULL, 0), 0);
    cr_assert_neq(regexec(&c->author_email_not, "me@axcom", 0, NULL, 0), 0);
    cr_assert_eq(regexec(&c->message_not, "fix\n\nSigned-off-by: A <a@b>\n", 0, NULL, 0), 0);
    cr_assert_not_null(cfg->secrets.scanner);
    cr_assert_eq(cfg->limits.inspect_bytes, 2097152u);
    cr_assert_eq(cfg->limits.inspect_seconds, 9u);
    config_free(cfg);

    /* No rule asks for secrets and none are configured: nothing is compiled. */
    cr_assert_eq(config_load(&cfg, write_config("d.json", "{'state_dir': 's'}"), &err), 0, "%s",
                 err.msg);
    cr_assert_null(cfg->secrets.scanner);
    cr_assert_eq(cfg->limits.inspect_bytes, (uint64_t)4 * 1024 * 1024 * 1024);
    cr_assert_eq(cfg->limits.inspect_seconds, 300u);
    config_free(cfg);
}

Test(config, a_syntax_error_in_a_file_names_the_file_line_and_column)
{
    const char *path = write_config("syntax.json", "{\n  'state_dir': 's'\n  'rules': []\n}\n");
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;
    char prefix[PATH_MAX + 16];

    cr_expect_eq(config_load(&cfg, path, &err), RG_E_CONFIG);
    cr_expect_null(cfg);
    snprintf(prefix, sizeof(prefix), "%s:3:", path);
    cr_expect(!strncmp(err.msg, prefix, strlen(prefix)), "\"%s\" should start \"%s\"", err.msg,
              prefix);
    /* Then a column: "<file>:3:<n>: invalid JSON: ..." */
    cr_expect(strchr("0123456789", err.msg[strlen(prefix)]) != NULL, "%s", err.msg);
}

Test(config, errors_name_the_file_as_the_caller_gave_it)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    write_config("sub/rel.json", "{'state_dir': 's', 'rules': [{'effect': 'nope'}]}");
    cr_assert_eq(chdir(tmpdir), 0);
    cr_expect_eq(config_load(&cfg, "sub/rel.json", &err), RG_E_CONFIG);
    cr_expect_str_eq(err.msg,
                     "sub/rel.json: rules[0].effect: unknown effect \"nope\" (expected allow, "
                     "deny or ask)");
}

Test(config, a_missing_file_is_an_errno_naming_it)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = (config_model *)1;
    const char *path = join(tmpdir, "absent.json");

    cr_expect_eq(config_load(&cfg, path, &err), -ENOENT);
    cr_expect_null(cfg);
    cr_expect(strstr(err.msg, path) != NULL, "%s", err.msg);
}

Test(config, names_and_null_handling)
{
    cr_expect_str_eq(config_action_name(CONFIG_ACTION_CREATE), "create");
    cr_expect_str_eq(config_action_name(CONFIG_ACTION_UPDATE), "update");
    cr_expect_str_eq(config_action_name(CONFIG_ACTION_FORCE), "force");
    cr_expect_str_eq(config_action_name(CONFIG_ACTION_DELETE), "delete");
    cr_expect_str_eq(config_action_name((config_action)0), "unknown");
    cr_expect_str_eq(config_effect_name(CONFIG_ALLOW), "allow");
    cr_expect_str_eq(config_effect_name(CONFIG_ASK), "ask");
    cr_expect_str_eq(config_effect_name(CONFIG_DENY), "deny");
    cr_expect_null(config_find_upstream(NULL, "local"));
    config_free(NULL);
}
