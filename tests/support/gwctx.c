/* The gateway the in-process gateway tests share; see gwctx.h. */
#include "support/gwctx.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/key.h"
#include "util/fs.h"

config_model *test_gw_config(gateway_ctx *ctx, const char *dir, const char *rules_json)
{
    char *json = NULL, path[PATH_MAX + 32];
    config_model *cfg = NULL;
    rg_error err = RG_ERROR_INIT;

    cr_assert_geq(asprintf(&json,
                           "{\"state_dir\": \"%s/state\", \"upstreams\": [{\"host\": \"local\", "
                           "\"url\": \"file://%s\"}]%s%s}",
                           dir, dir, rules_json ? ", \"rules\": " : "",
                           rules_json ? rules_json : ""),
                  0);
    snprintf(path, sizeof(path), "%s/refgate.json", dir);
    cr_assert_eq(config_parse(&cfg, json, strlen(json), path, &err), 0, "%s", err.msg);
    free(json);
    cr_assert_eq(rg_fs_mkdir_p(cfg->state_dir, 0700, &err), 0, "%s", err.msg);
    ctx->cfg = cfg;
    snprintf(ctx->gateway_id, sizeof(ctx->gateway_id), "0123456789abcdef");
    return cfg;
}

void test_gw_audit(gateway_ctx *ctx)
{
    char path[PATH_MAX + 32];
    rg_error err = RG_ERROR_INIT;

    snprintf(path, sizeof(path), "%s/audit.jsonl", ctx->cfg->state_dir);
    cr_assert_eq(audit_open(&ctx->audit, path, &err), 0, "%s", err.msg);
}

void test_gw_tokens(gateway_ctx *ctx)
{
    rg_error err = RG_ERROR_INIT;

    cr_assert_eq(tokens_key_load(&ctx->key, ctx->cfg->state_dir, &err), 0, "%s", err.msg);
    cr_assert_eq(tokens_store_file_open(&ctx->tokens, ctx->cfg->state_dir, &err), 0, "%s", err.msg);
    cr_assert_eq(tokens_key_publish(ctx->key, ctx->tokens, ctx->gateway_id, &err), 0, "%s",
                 err.msg);
}

void test_gw_free(gateway_ctx *ctx, config_model *cfg, const char *dir)
{
    char *cmd = NULL;

    audit_close(ctx->audit);
    approvals_close(ctx->approvals);
    tokens_store_free(ctx->tokens);
    tokens_key_free(ctx->key);
    config_free(cfg);
    memset(ctx, 0, sizeof(*ctx));
    cr_assert_geq(asprintf(&cmd, "rm -rf '%s'", dir), 0);
    cr_expect_eq(system(cmd), 0);
    free(cmd);
}
