/*
 * Config snapshots (gateway/snapshot.c): the last reference frees an owned
 * config, a bad credential refuses the snapshot (and frees what it was
 * given), and the keys only a restart applies are named when they differ.
 * Reloading a running gateway is tests/integration/test_reload.sh.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gateway/snapshot.h"

static config_model *parse(const char *json)
{
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(config_parse(&cfg, json, strlen(json), "/tmp/rg-test-snapshot.json", &err), 0,
                 "%s", err.msg);
    return cfg;
}

Test(snapshot, an_owned_config_lives_until_the_last_reference)
{
    gateway_snapshot *s = NULL;
    rg_error err = RG_ERROR_INIT;

    /* Under ASan a leak or a use after free here fails the test. */
    cr_assert_eq(gateway_snapshot_new(&s, parse("{\"state_dir\": \"s\"}"), 1, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(gateway_snapshot_ref(s), s);
    gateway_snapshot_unref(s);
    cr_expect_str_eq(s->cfg->state_dir, "/tmp/s", "still held by the second reference");
    gateway_snapshot_unref(s);
    gateway_snapshot_unref(NULL);
}

Test(snapshot, a_borrowed_config_is_left_to_its_owner)
{
    config_model *cfg = parse("{\"state_dir\": \"s\"}");
    gateway_snapshot *s = NULL;
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(gateway_snapshot_new(&s, cfg, 0, &err), 0, "%s", err.msg);
    gateway_snapshot_unref(s);
    cr_expect_str_eq(cfg->state_dir, "/tmp/s");
    config_free(cfg);
}

Test(snapshot, a_credential_that_cannot_be_read_refuses_the_snapshot)
{
    gateway_snapshot *s = (gateway_snapshot *)1;
    rg_error err = RG_ERROR_INIT;
    config_model *cfg = parse("{\"state_dir\": \"s\", \"upstreams\": [{\"host\": \"gh\", \"url\": "
                              "\"https://git.invalid\", \"credentials\": {\"type\": \"static\", "
                              "\"token_file\": \"/nonexistent/rg-token\"}}]}");

    cr_assert_lt(gateway_snapshot_new(&s, cfg, 1, &err), 0);
    cr_expect_null(s);
    cr_expect(strstr(err.msg, "upstream gh: token_file /nonexistent/rg-token") != NULL, "%s",
              err.msg);
}

Test(snapshot, keys_only_a_restart_applies_are_named_when_they_differ)
{
    config_model *a = parse("{\"state_dir\": \"s\", \"listen\": \"127.0.0.1:1\", \"rules\": []}");
    config_model *b = parse("{\"state_dir\": \"s\", \"listen\": \"127.0.0.1:2\", "
                            "\"admin\": {\"listen\": \"127.0.0.1:3\"}, "
                            "\"limits\": {\"per_token\": 2, \"inflate_ratio\": 50}, "
                            "\"control\": {\"max_ttl\": 60}, \"approvals\": {\"expire\": 60}, "
                            "\"default\": \"allow\", \"max_body_bytes\": 1000}");
    config_model *c = parse("{\"state_dir\": \"s\", \"listen\": \"127.0.0.1:1\", "
                            "\"limits\": {\"inflate_ratio\": 50}, \"default\": \"allow\", "
                            "\"rules\": [{\"effect\": \"deny\"}]}");
    char keys[200];

    gateway_snapshot_restart_keys(keys, sizeof(keys), a, b);
    cr_expect_str_eq(keys, "listen,admin,limits,control,approvals");
    /* Rules, the default and per-push limits apply at once: nothing to name. */
    gateway_snapshot_restart_keys(keys, sizeof(keys), a, c);
    cr_expect_str_eq(keys, "");
    config_free(a);
    config_free(b);
    config_free(c);
}
