/*
 * `refgate audit verify` and `refgate audit head`: recompute the log's
 * hash chain and say whether it is intact or where it first breaks
 * (against a head kept apart, with --head), and print the log's head as
 * SEQ:HASH to keep apart. See audit.c for where the log is read from.
 */
#include "audit/audit.h"
#include "cli/audit_int.h"
#include "cli/cli.h"
#include "config/config.h"
#include "db/pool.h"
#include "util/text.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * verify
 * ------------------------------------------------------------------------ */

/* SEQ:HASH as `refgate audit head` prints it and the gateway logs it. */
static int parse_head(uint64_t *seq, char hash[65], const char *s)
{
    unsigned long long v;
    const char *colon = strchr(s, ':');
    char *end;
    size_t i;

    if (colon == NULL || colon == s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end != colon || strlen(colon + 1) != 64)
        return -1;
    for (i = 0; i < 64; i++) {
        char c = colon[1 + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return -1;
        hash[i] = (char)(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    }
    hash[64] = '\0';
    *seq = v;
    return 0;
}

typedef struct sub_opts {
    const char *config, *head;
} sub_opts;

static const cli_opt verify_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(sub_opts, config), "FILE"},
    {"--head", CLI_OPT_VALUE, offsetof(sub_opts, head), "SEQ:HASH"},
};
static const cli_opt head_opts[] = {
    {"--config", CLI_OPT_VALUE, offsetof(sub_opts, config), "FILE"},
};
const cli_cmd cli_cmd_audit_verify = {"audit verify", CLI_OPTS(verify_opts), 0, NULL};
const cli_cmd cli_cmd_audit_head = {"audit head", CLI_OPTS(head_opts), 0, NULL};

/*
 * Parse `--config FILE` (and `--head SEQ:HASH` when head is not NULL) for
 * verify or head. Returns -1 to go on, or the exit status when done (help,
 * usage).
 */
static int sub_args(const char **config_path, const char **head, int argc, char **argv)
{
    const cli_cmd *cmd = head != NULL ? &cli_cmd_audit_verify : &cli_cmd_audit_head;
    sub_opts o = {0};
    cli_args args;
    int rc = cli_opts_parse(cmd, &o, &args, argc, argv);

    if (rc != 0)
        return cli_opts_exit(rc);
    if (args.n > 0)
        return cli_usage_error(cmd, "unexpected argument '%s'", args.v[0]);
    if (o.config == NULL)
        return cli_usage_error(cmd, "--config is required");
    *config_path = o.config;
    if (head != NULL)
        *head = o.head;
    return -1;
}

/* verify of the log at src, against the head head_seq:head_hash when head is set. */
static int verify_log(const audit_source *src, const char *head, uint64_t head_seq,
                      const char *head_hash, const char *cmd)
{
    audit_verify_result res;
    rg_error err = RG_ERROR_INIT;
    int rc, exists;

    exists = cli_audit_log_exists(src, cmd);
    if (exists < 0)
        return 1;
    if (exists == 0) {
        if (head != NULL && head_seq > 0) {
            printf("audit log missing, but the head names seq %llu: it was removed\n",
                   (unsigned long long)head_seq);
            fflush(stdout);
            return 1;
        }
        printf("no audit log yet\n");
        return 0;
    }
    rc = head != NULL ? audit_verify_head(&res, src, head_seq, head_hash, &err)
                      : audit_verify(&res, src, &err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        return 1;
    }
    if (res.bad_line != 0) {
        printf("audit log broken at line %llu: %s\n", (unsigned long long)res.bad_line, res.why);
        fflush(stdout);
        return 1;
    }
    if (res.head_bad) {
        printf("audit log does not match head %llu: %s\n", (unsigned long long)head_seq, res.why);
        fflush(stdout);
        return 1;
    }
    if (res.db_head_bad) {
        printf("audit log does not match the database's head: %s\n", res.why);
        fflush(stdout);
        return 1;
    }
    printf("audit log intact: %llu records", (unsigned long long)res.lines);
    if (head != NULL)
        printf(", reaching head %llu", (unsigned long long)head_seq);
    printf("\n");
    return fflush(stdout) != 0 ? 1 : 0;
}

int cli_audit_verify_cmd(int argc, char **argv)
{
    const char *config_path = NULL, *head = NULL, *cmd = "refgate audit verify";
    char path[PATH_MAX], head_hash[65];
    audit_source src;
    db_pool *pool = NULL;
    uint64_t head_seq = 0;
    int rc;

    rc = sub_args(&config_path, &head, argc, argv);
    if (rc >= 0)
        return rc;
    if (head != NULL && parse_head(&head_seq, head_hash, head) < 0) {
        fprintf(stderr, "%s: --head %s: expected SEQ:HASH (a number, a colon, 64 hex digits)\n",
                cmd, head);
        return EXIT_USAGE;
    }
    rc = cli_audit_load_source(&src, &pool, path, config_path, cmd) < 0
             ? 1
             : verify_log(&src, head, head_seq, head_hash, cmd);
    db_pool_close(pool);
    return rc;
}

int cli_audit_head_cmd(int argc, char **argv)
{
    const char *config_path = NULL, *cmd = "refgate audit head";
    rg_error err = RG_ERROR_INIT;
    char path[PATH_MAX], hash[65];
    audit_source src;
    db_pool *pool = NULL;
    uint64_t seq;
    int rc;

    rc = sub_args(&config_path, NULL, argc, argv);
    if (rc >= 0)
        return rc;
    rc = 1;
    if (cli_audit_load_source(&src, &pool, path, config_path, cmd) < 0)
        goto done;
    if (audit_read_head(&seq, hash, &src, &err) < 0) {
        fprintf(stderr, "%s: %s\n", cmd, err.msg);
        goto done;
    }
    printf("%llu:%s\n", (unsigned long long)seq, hash);
    rc = fflush(stdout) != 0 ? 1 : 0;
done:
    db_pool_close(pool);
    return rc;
}
