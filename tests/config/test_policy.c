/*
 * Tests for config/policy.c and config_with_policy: which keys are the
 * policy, its canonical form and digest (the same for a config's own
 * policy and a published one), and a published policy merged over a
 * host's config, loaded and checked as a file would be.
 */
#include <criterion/criterion.h>

#include <ftw.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "config/policy.h"
#include "util/text.h"

static char tmpdir[PATH_MAX];
static char cfgpath[PATH_MAX + 32];

static void setup(void)
{
    char tmpl[] = "/tmp/rg-test-policy-XXXXXX", repos[PATH_MAX + 8];

    cr_assert_not_null(mkdtemp(tmpl));
    cr_assert_not_null(realpath(tmpl, tmpdir));
    snprintf(repos, sizeof(repos), "%s/repos", tmpdir);
    cr_assert_eq(mkdir(repos, 0700), 0);
    snprintf(cfgpath, sizeof(cfgpath), "%s/refgate.json", tmpdir);
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

TestSuite(policy, .init = setup, .fini = teardown);

static config_model *parse(const char *json)
{
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = NULL;

    cr_assert_eq(config_parse(&cfg, json, strlen(json), cfgpath, &err), 0, "%s", err.msg);
    return cfg;
}

/* "sha256:" and the hex SHA-256 of s, computed here independently. */
static void expect_digest(char out[CONFIG_POLICY_DIGEST_SIZE], const char *s)
{
    unsigned char md[32];
    unsigned int n = 0;

    cr_assert_eq(EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL), 1);
    memcpy(out, "sha256:", 7);
    rg_hex_encode(out + 7, md, 32);
}

#define HOST_A                                                                                     \
    "\"state_dir\": \"state\", \"upstreams\": [{\"host\": \"local\", \"url\": \"repos\"}]"
#define HOST_B                                                                                     \
    "\"listen\": \"127.0.0.1:9999\", \"state_dir\": \"other\", \"limits\": {\"per_token\": 2},"    \
    " \"upstreams\": [{\"host\": \"local\", \"url\": \"repos\"}]"

Test(policy, the_digest_is_of_the_compact_sorted_policy_part_and_host_keys_do_not_count)
{
    /* Keys out of order and spaced: the canonical form sorts and compacts. */
    config_model *a = parse("{" HOST_A ", \"rules\": [{\"effect\": \"allow\", \"name\": \"x\","
                            " \"refs\": [\"refs/heads/*\"]}], \"default\": \"ask\"}");
    config_model *b = parse("{\"default\":\"ask\",\"rules\":[{\"refs\":[\"refs/heads/*\"],"
                            "\"name\":\"x\",\"effect\":\"allow\"}], " HOST_B "}");
    char want[CONFIG_POLICY_DIGEST_SIZE];

    expect_digest(want,
                  "{\"default\":\"ask\",\"rules\":[{\"effect\":\"allow\",\"name\":\"x\",\"refs\":"
                  "[\"refs/heads/*\"]}]}");
    cr_assert_str_eq(a->policy_digest, want);
    cr_assert_str_eq(b->policy_digest, want, "listen, state_dir, limits are the host's");
    cr_assert_eq(a->policy_version, 0, "a file's own policy has no published version");
    config_free(a);
    config_free(b);
}

Test(policy, a_config_without_policy_keys_has_the_digest_of_an_empty_object)
{
    config_model *cfg = parse("{" HOST_A ", \"signing\": {}}");

    cr_assert_str_eq(cfg->policy_digest,
                     "sha256:"
                     "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f6"
                     "1caaff8a",
                     "signing is the host's: its paths name this host's files");
    config_free(cfg);
}

Test(policy, a_published_policy_replaces_the_hosts_rules_and_keeps_its_setup)
{
    config_model *local = parse("{" HOST_B ", \"rules\": [{\"name\": \"mine\", \"effect\": "
                                "\"allow\"}], \"default\": \"allow\"}");
    static const char text[] =
        "{\"rules\": [{\"name\": \"team\", \"repos\": [\"local/**\"], \"effect\": \"deny\"}]}";
    char want[CONFIG_POLICY_DIGEST_SIZE];
    rg_error err = RG_ERROR_INIT;
    config_model *merged = NULL;
    json_t *policy = NULL;

    cr_assert_eq(config_policy_parse(&policy, text, strlen(text), "p.json", &err), 0, "%s",
                 err.msg);
    cr_assert_eq(config_with_policy(&merged, local, policy, "published policy v7", 7, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(merged->nrules, 1);
    cr_assert_str_eq(merged->rules[0].name, "team");
    cr_assert_eq(merged->default_effect, CONFIG_DENY, "the host's default is not the team's");
    cr_assert_eq(merged->listen_port, 9999);
    cr_assert_eq(merged->limits.per_token, 2);
    cr_assert_str_eq(merged->path, local->path);
    cr_assert_eq(merged->policy_version, 7);
    expect_digest(want, "{\"rules\":[{\"effect\":\"deny\",\"name\":\"team\",\"repos\":"
                        "[\"local/**\"]}]}");
    cr_assert_str_eq(merged->policy_digest, want);
    json_decref(policy);
    config_free(merged);
    config_free(local);
}

Test(policy, a_published_policy_is_checked_against_the_hosts_upstreams)
{
    config_model *local = parse("{" HOST_A "}");
    static const char text[] =
        "{\"rules\": [{\"repos\": [\"elsewhere/x\"], \"effect\": \"deny\"}]}";
    rg_error err = RG_ERROR_INIT;
    config_model *merged = NULL;
    json_t *policy = NULL;

    cr_assert_eq(config_policy_parse(&policy, text, strlen(text), "p.json", &err), 0);
    cr_assert_eq(config_with_policy(&merged, local, policy, "published policy v2", 2, &err),
                 RG_E_CONFIG);
    cr_assert_null(merged);
    cr_assert_not_null(strstr(err.msg, "published policy v2: rules[0].repos[0]"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "no upstream has host \"elsewhere\""), "%s", err.msg);
    json_decref(policy);
    config_free(local);
}

Test(policy, a_policy_file_holds_only_policy_keys_once_each)
{
    static const char *const bad[] = {
        "{\"rules\": [], \"upstreams\": []}",
        "{\"signing\": {}}",
        "{\"rules\": [], \"rules\": []}",
        "[]",
        "{\"rules\": ",
    };
    static const char *const why[] = {
        "unknown key \"upstreams\"",
        "unknown key \"signing\"",
        "invalid JSON",
        "expected a JSON object",
        "invalid JSON",
    };
    rg_error err = RG_ERROR_INIT;
    json_t *policy = NULL;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(config_policy_parse(&policy, bad[i], strlen(bad[i]), "p.json", &err),
                     RG_E_CONFIG, "%s", bad[i]);
        cr_assert_null(policy);
        cr_assert_not_null(strstr(err.msg, why[i]), "%s: %s", bad[i], err.msg);
        cr_assert_eq(strncmp(err.msg, "p.json", 6), 0, "%s", err.msg);
    }
}

Test(policy, merging_never_sets_a_hosts_key)
{
    config_model *local = parse("{" HOST_A "}");
    json_t *policy = json_pack("{s:[], s:s}", "rules", "listen", "127.0.0.1:1");
    rg_error err = RG_ERROR_INIT;
    config_model *merged = NULL;

    cr_assert_eq(config_with_policy(&merged, local, policy, "p", 1, &err), RG_E_CONFIG);
    cr_assert_null(merged);
    cr_assert_not_null(strstr(err.msg, "\"listen\" is not a policy key"), "%s", err.msg);
    json_decref(policy);
    config_free(local);
}
