/*
 * Tests for tokens/credentials.c, tokens/github_app.c and tokens/jwt.c.
 *
 * The static and none providers are checked against real files (modes
 * included). The github-app provider is checked against
 * tests/support/github_standin.py, a local stand-in for GitHub's API that
 * verifies what GitHub verifies (the JWT's RS256 signature against the
 * App's public key with the openssl CLI, iss, iat/exp, the repositories
 * and permissions asked for) and reports through /_state what it issued
 * and revoked. Each test makes its own RSA key and its own stand-in; a
 * test that needs python3 or openssl skips, saying so, when either is
 * missing. Every error message is checked for the secrets it must not
 * hold: the tokens issued (read from the stand-in's --tokens-file), the
 * JWT and the key.
 */
#include <criterion/criterion.h>

#include <curl/curl.h>
#include <pthread.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tokens/credentials.h"
#include "tokens/token.h"
#include "util/fs.h"
#include "util/proc.h"

extern char **environ;

#define APP_ID 42

static char tmpdir[PATH_MAX];
static rg_proc *standin;
static char api_url[64];

/* ---------------------------------------------------------------------------
 * Fixture
 * ------------------------------------------------------------------------- */

static void setup(void)
{
    char tmpl[] = "/tmp/rg-test-cred-XXXXXX";

    cr_assert_not_null(mkdtemp(tmpl));
    snprintf(tmpdir, sizeof(tmpdir), "%s", tmpl);
}

static void teardown(void)
{
    rg_proc_free(standin);
    standin = NULL;
    if (tmpdir[0] != '\0')
        rg_fs_remove_tree(tmpdir, 0, NULL);
}

TestSuite(credentials, .init = setup, .fini = teardown);

static const char *in_tmp(const char *name)
{
    static char bufs[8][PATH_MAX];
    static int next;
    char *p = bufs[next++ % 8];

    cr_assert_lt(snprintf(p, PATH_MAX, "%s/%s", tmpdir, name), PATH_MAX);
    return p;
}

static void write_file(const char *name, const char *text, mode_t mode)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(rg_fs_write_atomic(in_tmp(name), text, strlen(text), mode, &err), 0, "%s",
                 err.msg);
}

/* Run a command to completion; its exit status, or -1 when it could not start. */
static int run(const char *const *argv)
{
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_error err = RG_ERROR_INIT;
    int status = -1;

    s.argv = argv;
    s.envp = (const char *const *)environ;
    if (rg_proc_run(&status, NULL, &s, rg_proc_deadline(120), &err) < 0)
        return -1;
    return status;
}

/* Skip, saying why, when the stand-in cannot run here. */
static void need_tools(void)
{
    const char *py[] = {"python3", "-c", "pass", NULL};
    const char *ossl[] = {"openssl", "version", NULL};

    if (run(py) != 0)
        cr_skip_test("python3 is not available: the GitHub stand-in cannot run");
    if (run(ossl) != 0)
        cr_skip_test("the openssl CLI is not available: cannot make keys or verify JWTs");
}

/* An RSA key <name>.pem with `mode` and its public half <name>.pub. */
static void make_key(const char *name, mode_t mode)
{
    char pem[PATH_MAX], pub[PATH_MAX];
    const char *gen[] = {"openssl", "genrsa", "-out", pem, "2048", NULL};
    const char *expo[] = {"openssl", "rsa", "-in", pem, "-pubout", "-out", pub, NULL};

    snprintf(pem, sizeof(pem), "%s/%s.pem", tmpdir, name);
    snprintf(pub, sizeof(pub), "%s/%s.pub", tmpdir, name);
    cr_assert_eq(run(gen), 0, "openssl genrsa");
    cr_assert_eq(run(expo), 0, "openssl rsa -pubout");
    cr_assert_eq(chmod(pem, mode), 0);
}

static const char *standin_script(void)
{
    static char path[PATH_MAX];
    const char *src = getenv("REFGATE_SRC");

    if (src != NULL)
        snprintf(path, sizeof(path), "%s/tests/support/github_standin.py", src);
    else /* __FILE__ is absolute in CMake builds */
        snprintf(path, sizeof(path), "%.*s/../support/github_standin.py",
                 (int)(strrchr(__FILE__, '/') - __FILE__), __FILE__);
    return path;
}

/*
 * Start the stand-in trusting <pubkey>.pub, with installation 7 covering
 * acme/app and acme/lib and installation 8 covering other/x, plus `extra`
 * arguments (NULL-terminated, may be NULL). Sets api_url.
 */
static void standin_start(const char *pubkey, const char *const *extra)
{
    const char *argv[32];
    char pub[PATH_MAX], port[16] = "";
    rg_proc_spec spec = RG_PROC_SPEC_INIT;
    rg_error err = RG_ERROR_INIT;
    const char *portfile = in_tmp("port");
    size_t n = 0;
    FILE *f;
    int i;

    snprintf(pub, sizeof(pub), "%s/%s.pub", tmpdir, pubkey);
    argv[n++] = "python3";
    argv[n++] = standin_script();
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    argv[n++] = "--app-id";
    argv[n++] = "42";
    argv[n++] = "--public-key";
    argv[n++] = pub;
    argv[n++] = "--installation";
    argv[n++] = "7=acme/app,acme/lib";
    argv[n++] = "--installation";
    argv[n++] = "8=other/x";
    argv[n++] = "--tokens-file";
    argv[n++] = in_tmp("issued");
    for (i = 0; extra != NULL && extra[i] != NULL; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    spec.argv = argv;
    spec.envp = (const char *const *)environ;
    spec.flags = RG_PROC_GROUP;
    cr_assert_eq(rg_proc_start(&standin, &spec, &err), 0, "%s", err.msg);
    for (i = 0; i < 200; i++) {
        f = fopen(portfile, "r");
        if (f != NULL) {
            cr_assert_not_null(fgets(port, sizeof(port), f));
            fclose(f);
            break;
        }
        usleep(50 * 1000);
    }
    cr_assert_neq(port[0], '\0', "the stand-in did not start within 10 s");
    port[strcspn(port, "\n")] = '\0';
    snprintf(api_url, sizeof(api_url), "http://127.0.0.1:%s", port);
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    return rg_buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

/* The stand-in's /_state: what it issued, revoked and was asked. */
static json_t *standin_state(void)
{
    rg_buf body = RG_BUF_INIT(16u * 1024 * 1024);
    char url[128];
    json_t *root;
    CURL *c = curl_easy_init();

    cr_assert_not_null(c);
    snprintf(url, sizeof(url), "%s/_state", api_url);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    cr_assert_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_cleanup(c);
    root = json_loadb(body.data, body.len, 0, NULL);
    rg_buf_free(&body);
    cr_assert_not_null(root);
    return root;
}

/* How many logged requests had this method and path (and status, unless 0). */
static size_t log_count(json_t *state, const char *method, const char *path, int status)
{
    json_t *e;
    size_t i, n = 0;

    json_array_foreach(json_object_get(state, "log"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "method")), method) ||
            strcmp(json_string_value(json_object_get(e, "path")), path))
            continue;
        if (status == 0 || json_integer_value(json_object_get(e, "status")) == status)
            n++;
    }
    return n;
}

/* The issued token whose SHA-256 starts with `hash`, or NULL. */
static json_t *state_token(json_t *state, const char *hash)
{
    json_t *t;
    size_t i;

    json_array_foreach(json_object_get(state, "tokens"), i, t)
    {
        if (!strncmp(json_string_value(json_object_get(t, "sha256")), hash, strlen(hash)))
            return t;
    }
    return NULL;
}

/* The message holds no issued token, no JWT and nothing of a PEM key. */
static void expect_no_secret(const char *msg)
{
    char line[16384];
    FILE *f = fopen(in_tmp("issued"), "r");

    cr_expect(strstr(msg, "eyJ") == NULL, "a JWT in \"%s\"", msg);
    cr_expect(strstr(msg, "PRIVATE KEY") == NULL && strstr(msg, "MII") == NULL,
              "key material in \"%s\"", msg);
    cr_expect(strstr(msg, "ghs_") == NULL, "a token in \"%s\"", msg);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        cr_expect(line[0] == '\0' || strstr(msg, line) == NULL, "an issued token in \"%s\"", msg);
    }
    if (f != NULL)
        fclose(f);
}

static config_credentials app_config(const char *key, long long installation)
{
    static char keypath[PATH_MAX];
    config_credentials c = {0};

    snprintf(keypath, sizeof(keypath), "%s/%s.pem", tmpdir, key);
    c.type = CONFIG_CRED_GITHUB_APP;
    c.app_id = APP_ID;
    c.private_key_file = keypath;
    c.api_url = api_url;
    c.installation_id = installation;
    return c;
}

/* A github-app provider against a fresh stand-in with `extra` options. */
static tokens_provider *app_provider(const char *const *extra, long long installation)
{
    tokens_provider *p = NULL;
    rg_error err = RG_ERROR_INIT;
    config_credentials c;

    need_tools();
    make_key("app", 0600);
    standin_start("app", extra);
    c = app_config("app", installation);
    cr_assert_eq(tokens_provider_new(&p, &c, NULL, &err), 0, "%s", err.msg);
    return p;
}

/* ---------------------------------------------------------------------------
 * none and static
 * ------------------------------------------------------------------------- */

Test(credentials, none_gives_a_credential_with_nothing_to_send)
{
    config_credentials c = {.type = CONFIG_CRED_NONE};
    tokens_provider *p = NULL;
    tokens_credential *cred = NULL;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(tokens_provider_new(&p, &c, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(tokens_provider_acquire(&cred, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0,
                 "%s", err.msg);
    cr_expect_null(cred->username);
    cr_expect_null(cred->password);
    cr_expect_eq(tokens_provider_release_checked(p, cred, &err), 0);
    tokens_provider_release(p, NULL);
    tokens_provider_free(p);
    tokens_provider_free(NULL);
}

Test(credentials, static_reads_the_file_once_and_strips_one_newline)
{
    config_credentials c = {.type = CONFIG_CRED_STATIC, .username = (char *)"bot"};
    tokens_provider *p = NULL;
    tokens_credential *a = NULL, *b = NULL;
    rg_error err = RG_ERROR_INIT;
    char hash[13];

    write_file("tok", "glpat-abc.DEF_123\n", 0600);
    c.token_file = (char *)in_tmp("tok");
    cr_assert_eq(tokens_provider_new(&p, &c, NULL, &err), 0, "%s", err.msg);
    /* Changing the file afterwards changes nothing: it was read at startup. */
    write_file("tok", "other\n", 0600);
    cr_assert_eq(tokens_provider_acquire(&a, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(tokens_provider_acquire(&b, p, "acme/app", TOKENS_ACCESS_READ, 0, &err), 0, "%s",
                 err.msg);
    cr_expect_str_eq(a->username, "bot");
    cr_expect_str_eq(a->password, "glpat-abc.DEF_123");
    cr_expect_neq(a->password, b->password, "each acquire gets its own copy");
    tokens_hash_prefix(hash, "glpat-abc.DEF_123");
    cr_expect_str_eq(a->hash, hash);
    tokens_provider_release(p, a);
    tokens_provider_release(p, b);
    tokens_provider_free(p);
}

Test(credentials, static_default_user_and_crlf_file)
{
    config_credentials c = {.type = CONFIG_CRED_STATIC};
    tokens_provider *p = NULL;
    tokens_credential *a = NULL;
    rg_error err = RG_ERROR_INIT;

    write_file("tok", "t0ken\r\n", 0400);
    c.token_file = (char *)in_tmp("tok");
    cr_assert_eq(tokens_provider_new(&p, &c, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(tokens_provider_acquire(&a, p, "x/y", TOKENS_ACCESS_READ, 0, &err), 0);
    cr_expect_str_eq(a->username, "x-access-token");
    cr_expect_str_eq(a->password, "t0ken");
    tokens_provider_release(p, a);
    tokens_provider_free(p);
}

Test(credentials, static_file_readable_by_others_is_refused_naming_its_mode)
{
    config_credentials c = {.type = CONFIG_CRED_STATIC, .username = (char *)"u"};
    tokens_provider *p = (tokens_provider *)1;
    rg_error err = RG_ERROR_INIT;

    write_file("tok", "s3cr3t-token\n", 0644);
    c.token_file = (char *)in_tmp("tok");
    cr_expect_eq(tokens_provider_new(&p, &c, NULL, &err), RG_E_CONFIG);
    cr_expect_null(p);
    cr_expect(strstr(err.msg, "is readable by group/others (mode 0644): chmod 600 it") != NULL,
              "%s", err.msg);
    cr_expect(strstr(err.msg, c.token_file) != NULL, "names the file: %s", err.msg);
    cr_expect(strstr(err.msg, "s3cr3t") == NULL, "%s", err.msg);

    write_file("tok", "s3cr3t-token\n", 0620);
    cr_expect_eq(tokens_provider_new(&p, &c, NULL, &err), RG_E_CONFIG);
    cr_expect(strstr(err.msg, "is writable by group/others (mode 0620)") != NULL, "%s", err.msg);
}

Test(credentials, static_missing_or_odd_files_are_refused_without_the_secret)
{
    config_credentials c = {.type = CONFIG_CRED_STATIC, .username = (char *)"u"};
    tokens_provider *p = NULL;
    rg_error err = RG_ERROR_INIT;

    c.token_file = (char *)in_tmp("absent");
    cr_expect_eq(tokens_provider_new(&p, &c, NULL, &err), -ENOENT);
    cr_expect(strstr(err.msg, c.token_file) != NULL, "%s", err.msg);

    write_file("two", "line-one-secret\nline-two\n", 0600);
    c.token_file = (char *)in_tmp("two");
    cr_expect_eq(tokens_provider_new(&p, &c, NULL, &err), RG_E_CONFIG);
    cr_expect(strstr(err.msg, "one line") != NULL, "%s", err.msg);
    cr_expect(strstr(err.msg, "secret") == NULL, "%s", err.msg);

    write_file("empty", "\n", 0600);
    c.token_file = (char *)in_tmp("empty");
    cr_expect_eq(tokens_provider_new(&p, &c, NULL, &err), RG_E_CONFIG);
    cr_expect(strstr(err.msg, "holds no token") != NULL, "%s", err.msg);

    c.token_file = tmpdir;
    cr_expect_eq(tokens_provider_new(&p, &c, NULL, &err), RG_E_CONFIG);
    cr_expect(strstr(err.msg, "not a regular file") != NULL, "%s", err.msg);
    cr_expect_null(p);
}

/* ---------------------------------------------------------------------------
 * github-app
 * ------------------------------------------------------------------------- */

Test(credentials, app_write_token_covers_one_repo_and_release_revokes_it)
{
    tokens_provider *p = app_provider(NULL, 0);
    tokens_credential *cred = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *state, *t, *perms;
    char hash[13];

    cr_assert_eq(tokens_provider_acquire(&cred, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0,
                 "%s", err.msg);
    cr_expect_str_eq(cred->username, "x-access-token");
    cr_assert_not_null(cred->password);
    cr_expect_eq(strncmp(cred->password, "ghs_", 4), 0);
    tokens_hash_prefix(hash, cred->password);
    cr_expect_str_eq(cred->hash, hash);

    state = standin_state();
    t = state_token(state, cred->hash);
    cr_assert_not_null(t, "the stand-in issued this token");
    cr_expect_eq(json_array_size(json_object_get(t, "repos")), 1);
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(t, "repos"), 0)), "acme/app");
    perms = json_object_get(t, "permissions");
    cr_expect_eq(json_object_size(perms), 1, "only contents");
    cr_expect_str_eq(json_string_value(json_object_get(perms, "contents")), "write");
    cr_expect(json_is_false(json_object_get(t, "revoked")));
    cr_expect_eq(json_integer_value(json_object_get(t, "installation")), 7);
    json_decref(state);

    cr_expect_eq(tokens_provider_release_checked(p, cred, &err), 0, "%s", err.msg);
    state = standin_state();
    cr_expect(json_is_true(json_object_get(state_token(state, hash), "revoked")),
              "release revoked it");
    cr_expect_eq(log_count(state, "DELETE", "/installation/token", 204), 1);
    json_decref(state);
    tokens_provider_free(p);
}

Test(credentials, app_workflows_flag_adds_workflows_write_to_write_tokens_only)
{
    tokens_provider *p = app_provider(NULL, 0);
    tokens_credential *w = NULL, *r = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *state, *perms;

    cr_assert_eq(tokens_provider_acquire(&w, p, "acme/app", TOKENS_ACCESS_WRITE,
                                         TOKENS_CRED_WORKFLOWS, &err),
                 0, "%s", err.msg);
    cr_assert_eq(
        tokens_provider_acquire(&r, p, "acme/app", TOKENS_ACCESS_READ, TOKENS_CRED_WORKFLOWS, &err),
        0, "%s", err.msg);
    state = standin_state();
    perms = json_object_get(state_token(state, w->hash), "permissions");
    cr_expect_str_eq(json_string_value(json_object_get(perms, "contents")), "write");
    cr_expect_str_eq(json_string_value(json_object_get(perms, "workflows")), "write");
    perms = json_object_get(state_token(state, r->hash), "permissions");
    cr_expect_str_eq(json_string_value(json_object_get(perms, "contents")), "read");
    cr_expect_null(json_object_get(perms, "workflows"), "a read token never writes workflows");
    json_decref(state);
    tokens_provider_release(p, w);
    tokens_provider_release(p, r);
    tokens_provider_free(p);
}

Test(credentials, app_read_access_asks_for_contents_read)
{
    tokens_provider *p = app_provider(NULL, 0);
    tokens_credential *r = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *state, *perms;

    cr_assert_eq(tokens_provider_acquire(&r, p, "acme/lib", TOKENS_ACCESS_READ, 0, &err), 0, "%s",
                 err.msg);
    state = standin_state();
    perms = json_object_get(state_token(state, r->hash), "permissions");
    cr_expect_eq(json_object_size(perms), 1);
    cr_expect_str_eq(json_string_value(json_object_get(perms, "contents")), "read");
    cr_expect_str_eq(
        json_string_value(json_array_get(json_object_get(state_token(state, r->hash), "repos"), 0)),
        "acme/lib");
    json_decref(state);
    tokens_provider_release(p, r);
    tokens_provider_free(p);
}

Test(credentials, app_installation_lookup_is_cached_per_repository)
{
    tokens_provider *p = app_provider(NULL, 0);
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *state;
    int i;

    for (i = 0; i < 3; i++) {
        cr_assert_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0,
                     "%s", err.msg);
        tokens_provider_release(p, c);
    }
    cr_assert_eq(tokens_provider_acquire(&c, p, "other/x", TOKENS_ACCESS_READ, 0, &err), 0, "%s",
                 err.msg);
    tokens_provider_release(p, c);
    state = standin_state();
    cr_expect_eq(log_count(state, "GET", "/repos/acme/app/installation", 0), 1);
    cr_expect_eq(log_count(state, "GET", "/repos/other/x/installation", 0), 1);
    cr_expect_eq(log_count(state, "POST", "/app/installations/7/access_tokens", 201), 3);
    cr_expect_eq(log_count(state, "POST", "/app/installations/8/access_tokens", 201), 1);
    cr_expect_eq(log_count(state, "DELETE", "/installation/token", 204), 4);
    json_decref(state);
    tokens_provider_free(p);
}

struct worker {
    tokens_provider *p;
    int failures;
    char hashes[4][13];
};

static void *acquire_four(void *arg)
{
    struct worker *w = arg;
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;
    int i;

    for (i = 0; i < 4; i++) {
        if (tokens_provider_acquire(&c, w->p, i % 2 ? "acme/lib" : "acme/app", TOKENS_ACCESS_WRITE,
                                    0, &err) < 0) {
            w->failures++;
            continue;
        }
        memcpy(w->hashes[i], c->hash, 13);
        if (tokens_provider_release_checked(w->p, c, &err) < 0)
            w->failures++;
    }
    return NULL;
}

Test(credentials, app_provider_is_shared_safely_by_threads, .timeout = 60)
{
    tokens_provider *p = app_provider(NULL, 0);
    struct worker w[4];
    pthread_t th[4];
    json_t *state;
    int i, j;

    for (i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].p = p;
        cr_assert_eq(pthread_create(&th[i], NULL, acquire_four, &w[i]), 0);
    }
    for (i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    state = standin_state();
    for (i = 0; i < 4; i++) {
        cr_expect_eq(w[i].failures, 0, "thread %d", i);
        for (j = 0; j < 4; j++)
            cr_expect(json_is_true(json_object_get(state_token(state, w[i].hashes[j]), "revoked")),
                      "thread %d token %d revoked", i, j);
    }
    cr_expect_eq(json_array_size(json_object_get(state, "tokens")), 16);
    json_decref(state);
    tokens_provider_free(p);
}

Test(credentials, app_configured_installation_needs_no_lookup)
{
    tokens_provider *p = app_provider(NULL, 7);
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *state;

    cr_assert_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0, "%s",
                 err.msg);
    tokens_provider_release(p, c);
    state = standin_state();
    cr_expect_eq(log_count(state, "GET", "/repos/acme/app/installation", 0), 0);
    json_decref(state);
    tokens_provider_free(p);
}

Test(credentials, app_repository_outside_the_installations_is_a_clear_error)
{
    const char *extra[] = {NULL};
    tokens_provider *p = app_provider(extra, 0);
    tokens_credential *c = (tokens_credential *)1;
    rg_error err = RG_ERROR_INIT;

    cr_expect_eq(tokens_provider_acquire(&c, p, "acme/secret", TOKENS_ACCESS_WRITE, 0, &err),
                 RG_E_UPSTREAM);
    cr_expect_null(c);
    cr_expect(strstr(err.msg, "HTTP 404") != NULL, "%s", err.msg);
    cr_expect(strstr(err.msg, "installed on this repository") != NULL, "%s", err.msg);
    expect_no_secret(err.msg);

    /* The configured installation does not cover other/x: GitHub says 422. */
    tokens_provider_free(p);
    p = NULL;
    {
        config_credentials cfg = app_config("app", 7);
        cr_assert_eq(tokens_provider_new(&p, &cfg, NULL, &err), 0, "%s", err.msg);
    }
    cr_expect_eq(tokens_provider_acquire(&c, p, "other/x", TOKENS_ACCESS_READ, 0, &err),
                 RG_E_UPSTREAM);
    cr_expect(strstr(err.msg, "HTTP 422") != NULL, "%s", err.msg);
    cr_expect(strstr(err.msg, "not accessible to the parent installation") != NULL, "%s", err.msg);
    expect_no_secret(err.msg);

    cr_expect_eq(tokens_provider_acquire(&c, p, "acme/app/../x", TOKENS_ACCESS_READ, 0, &err),
                 -EINVAL, "not a GitHub owner/name");
    tokens_provider_free(p);
}

/*
 * A clock that never sleeps: a wait only moves it forward. It starts at the
 * real time, which the stand-in's x-ratelimit-reset is computed from.
 */
typedef struct fake_clock {
    int64_t offset; /* seconds waited so far */
    int sleeps;
} fake_clock;

static int64_t fake_now(void *ctx)
{
    return (int64_t)time(NULL) + ((fake_clock *)ctx)->offset;
}

static void fake_sleep(void *ctx, int64_t seconds)
{
    fake_clock *f = ctx;

    f->offset += seconds;
    f->sleeps++;
}

Test(credentials, app_rate_limit_reset_is_waited_out_once, .timeout = 30)
{
    const char *extra[] = {"--rate-limit-once", NULL};
    tokens_provider *p = app_provider(extra, 0);
    fake_clock f = {0, 0};
    tokens_clock clock = {fake_now, fake_sleep, &f};
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;
    time_t t0 = time(NULL);
    json_t *state;

    tokens_provider_set_clock(p, &clock);
    cr_assert_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0, "%s",
                 err.msg);
    /* The stand-in resets 2 s after its answer; one more second covers
     * the rounding of x-ratelimit-reset to whole seconds. */
    cr_expect_eq(f.sleeps, 1, "waited once for x-ratelimit-reset");
    cr_expect(f.offset >= 2 && f.offset <= 3, "waited %lld s, want 2..3", (long long)f.offset);
    cr_expect_lt(time(NULL) - t0, 2, "the injected clock waited, not the test");
    state = standin_state();
    cr_expect_eq(log_count(state, "POST", "/app/installations/7/access_tokens", 403), 1);
    cr_expect_eq(log_count(state, "POST", "/app/installations/7/access_tokens", 201), 1);
    json_decref(state);
    tokens_provider_release(p, c);
    tokens_provider_free(p);
}

Test(credentials, app_long_rate_limit_fails_at_once_saying_when_to_retry, .timeout = 30)
{
    const char *extra[] = {"--rate-limit-once", "--rate-limit-seconds", "600", NULL};
    tokens_provider *p = app_provider(extra, 0);
    fake_clock f = {0, 0};
    tokens_clock clock = {fake_now, fake_sleep, &f};
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;

    tokens_provider_set_clock(p, &clock);
    cr_expect_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err),
                 RG_E_UPSTREAM);
    cr_expect_eq(f.sleeps, 0, "no ten-minute wait");
    cr_expect(strstr(err.msg, "rate limited by GitHub (HTTP 403); retry after") != NULL, "%s",
              err.msg);
    cr_expect(strstr(err.msg, " UTC (in ") != NULL, "%s", err.msg);
    expect_no_secret(err.msg);
    tokens_provider_free(p);
}

Test(credentials, app_api_failure_names_the_status_and_githubs_message)
{
    const char *extra[] = {"--fail-tokens", "500", NULL};
    tokens_provider *p = app_provider(extra, 0);
    tokens_credential *c = (tokens_credential *)1;
    rg_error err = RG_ERROR_INIT;

    cr_expect_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err),
                 RG_E_UPSTREAM);
    cr_expect_null(c);
    cr_expect(strstr(err.msg, "POST http://127.0.0.1:") != NULL, "%s", err.msg);
    cr_expect(strstr(err.msg, "/app/installations/7/access_tokens: HTTP 500: Stand-in failure on "
                              "purpose") != NULL,
              "%s", err.msg);
    expect_no_secret(err.msg);
    tokens_provider_free(p);
}

Test(credentials, app_key_the_api_does_not_know_is_a_clear_401)
{
    tokens_provider *p = NULL;
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;
    config_credentials cfg;

    need_tools();
    make_key("app", 0600);
    make_key("other", 0600);
    standin_start("other", NULL); /* it trusts another key */
    cfg = app_config("app", 7);
    cr_assert_eq(tokens_provider_new(&p, &cfg, NULL, &err), 0, "%s", err.msg);
    cr_expect_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err),
                 RG_E_AUTH);
    cr_expect(strstr(err.msg, "HTTP 401: A JSON web token could not be decoded") != NULL, "%s",
              err.msg);
    cr_expect(strstr(err.msg, "does the private key belong to this App id?") != NULL, "%s",
              err.msg);
    expect_no_secret(err.msg);
    tokens_provider_free(p);
}

Test(credentials, app_tokens_far_longer_than_520_characters_with_dots_work)
{
    const char *extra[] = {"--token-length", "5000", NULL};
    tokens_provider *p = app_provider(extra, 0);
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;
    json_t *state;

    cr_assert_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0, "%s",
                 err.msg);
    cr_expect_gt(strlen(c->password), 4900);
    cr_expect_not_null(strchr(c->password, '.'));
    state = standin_state();
    cr_expect_not_null(state_token(state, c->hash));
    json_decref(state);
    cr_expect_eq(tokens_provider_release_checked(p, c, &err), 0, "%s", err.msg);
    tokens_provider_free(p);
}

Test(credentials, app_failed_revocation_is_reported_by_hash_only)
{
    tokens_provider *p = app_provider(NULL, 0);
    tokens_credential *c = NULL, *copy;
    rg_error err = RG_ERROR_INIT;
    char hash[13];

    cr_assert_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err), 0, "%s",
                 err.msg);
    /* Release a second credential holding the same token: GitHub says 401. */
    copy = calloc(1, sizeof(*copy));
    copy->username = strdup(c->username);
    copy->password = strdup(c->password);
    memcpy(copy->hash, c->hash, sizeof(hash));
    memcpy(hash, c->hash, sizeof(hash));
    cr_expect_eq(tokens_provider_release_checked(p, c, &err), 0, "%s", err.msg);
    cr_expect_eq(tokens_provider_release_checked(p, copy, &err), RG_E_AUTH);
    cr_expect(strstr(err.msg, hash) != NULL, "names the token by hash: %s", err.msg);
    cr_expect(strstr(err.msg, "HTTP 401") != NULL, "%s", err.msg);
    expect_no_secret(err.msg);
    tokens_provider_free(p);
}

Test(credentials, app_key_readable_by_others_is_refused)
{
    tokens_provider *p = NULL;
    rg_error err = RG_ERROR_INIT;
    config_credentials cfg;

    need_tools();
    make_key("app", 0644);
    snprintf(api_url, sizeof(api_url), "http://127.0.0.1:9");
    cfg = app_config("app", 0);
    cr_expect_eq(tokens_provider_new(&p, &cfg, NULL, &err), RG_E_CONFIG);
    cr_expect(strstr(err.msg, "is readable by group/others (mode 0644): chmod 600 it") != NULL,
              "%s", err.msg);
    expect_no_secret(err.msg);

    write_file("junk.pem", "-----BEGIN NOTHING-----\nMIIjunk\n", 0600);
    cfg.private_key_file = (char *)in_tmp("junk.pem");
    cr_expect_eq(tokens_provider_new(&p, &cfg, NULL, &err), RG_E_CONFIG);
    cr_expect(strstr(err.msg, "not a PEM RSA private key") != NULL, "%s", err.msg);
    expect_no_secret(err.msg);
    cr_expect_null(p);
}

Test(credentials, app_unreachable_api_is_an_upstream_error)
{
    tokens_provider *p = NULL;
    tokens_credential *c = NULL;
    rg_error err = RG_ERROR_INIT;
    config_credentials cfg;

    need_tools();
    make_key("app", 0600);
    /* Port 9 (discard) on loopback: nothing listens there in a test box. */
    snprintf(api_url, sizeof(api_url), "http://127.0.0.1:9");
    cfg = app_config("app", 7);
    cr_assert_eq(tokens_provider_new(&p, &cfg, NULL, &err), 0, "%s", err.msg);
    cr_expect_eq(tokens_provider_acquire(&c, p, "acme/app", TOKENS_ACCESS_WRITE, 0, &err),
                 RG_E_UPSTREAM);
    cr_expect(strstr(err.msg, "github-app: POST http://127.0.0.1:9/app/installations/7/") != NULL,
              "%s", err.msg);
    expect_no_secret(err.msg);
    tokens_provider_free(p);
}
