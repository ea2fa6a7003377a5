/*
 * The gateway the in-process gateway tests share (auth, control, approve,
 * receive): a configuration over a local upstream, its state directory, and
 * the parts of a gateway_ctx a test asks for, on files in that directory.
 */
#ifndef RG_TESTS_SUPPORT_GWCTX_H
#define RG_TESTS_SUPPORT_GWCTX_H

#include "gateway/context.h"

/*
 * The configuration of a gateway whose one upstream, host "local", is the
 * directory `dir` (file://dir), its state_dir dir/state (made, 0700), with
 * "rules": rules_json when that is not NULL. Sets ctx->cfg and a fixed
 * gateway id. The test fails when a step does.
 */
config_model *test_gw_config(gateway_ctx *ctx, const char *dir, const char *rules_json);

/* The audit log <state_dir>/audit.jsonl, as ctx->audit. */
void test_gw_audit(gateway_ctx *ctx);

/* The token signing key and the file token store of state_dir, its key
 * published, as ctx->key and ctx->tokens. */
void test_gw_tokens(gateway_ctx *ctx);

/* Close what the three above opened, free cfg (test_gw_config's), clear ctx and
 * remove `dir`. */
void test_gw_free(gateway_ctx *ctx, config_model *cfg, const char *dir);

#endif
