/*
 * Every refgate subcommand's option table in one list, so that tests can
 * hold each one against its refgate(1) entry (tests/cli/test_opts.c).
 */
#include <stddef.h>

#include "cli/cli.h"

const cli_cmd *const cli_cmds[] = {
    &cli_cmd_approvals,
    &cli_cmd_approvals_show,
    &cli_cmd_approve,
    &cli_cmd_audit,
    &cli_cmd_audit_head,
    &cli_cmd_audit_verify,
    &cli_cmd_console_user_add,
    &cli_cmd_db_import,
    &cli_cmd_db_migrate,
    &cli_cmd_demo,
    &cli_cmd_deny,
    &cli_cmd_diff,
    &cli_cmd_policy_check,
    &cli_cmd_policy_current,
    &cli_cmd_policy_lint,
    &cli_cmd_policy_publish,
    &cli_cmd_run,
    &cli_cmd_serve,
    &cli_cmd_token_key_rotate,
    &cli_cmd_token_mint,
    &cli_cmd_token_revoke,
    NULL,
};
