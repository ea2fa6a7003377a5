/*
 * Private to refgate audit (cli/audit.c, cli/audit_verify.c): where the log
 * is read from, shared by listing and verifying.
 */
#ifndef RG_CLI_AUDIT_INT_H
#define RG_CLI_AUDIT_INT_H

#include <limits.h>

#include "audit/audit.h"
#include "db/pool.h"

#define EXIT_USAGE 2

/* audit.c */
int cli_audit_digits(const char **p, int n, int *out);
int cli_audit_load_source(audit_source *src, db_pool **pool, char path[PATH_MAX],
                          const char *config_path, const char *cmd);
int cli_audit_log_exists(const audit_source *src, const char *cmd);

/* audit_verify.c */
int cli_audit_verify_cmd(int argc, char **argv);
int cli_audit_head_cmd(int argc, char **argv);

#endif
