/*
 * The control socket (gateway/control.c) in process: what it does with the
 * path it is given (a stale socket replaced, a live one or a file that is
 * not a socket left alone), and a mint and revoke by our own uid whose
 * events land in the audit log without the token. The wire behaviour with
 * real gateways and other users is tests/integration/test_control*.sh.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "config/config.h"
#include "gateway/control.h"
#include "support/gwctx.h"
#include "tokens/token.h"
#include "util/buf.h"
#include "util/fs.h"

static char dir[PATH_MAX];
static config_model *cfg;
static gateway_ctx ctx;

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/rg-control-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cfg = test_gw_config(&ctx, dir, NULL);
    test_gw_tokens(&ctx);
    test_gw_audit(&ctx);
}

static void teardown(void)
{
    test_gw_free(&ctx, cfg, dir);
}

TestSuite(control, .init = setup, .fini = teardown);

/* Send `line` on a new connection and parse the one answer line. */
static json_t *ask(const char *line)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char buf[8192];
    size_t len = 0;
    ssize_t n;
    int fd;

    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", cfg->control.socket);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0, "connect: %s",
                 strerror(errno));
    cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    while (len < sizeof(buf) - 1 && memchr(buf, '\n', len) == NULL &&
           (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = '\0';
    return json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
}

Test(control, a_mint_and_revoke_by_our_uid_are_audited_without_the_token)
{
    rg_error err = RG_ERROR_INIT;
    gateway_control *c = NULL;
    rg_buf log = RG_BUF_INIT(1 << 20);
    char path[PATH_MAX + 32], line[4096], *token;
    tokens_status status;
    tokens_claims *claims = NULL;
    json_t *ans;

    cr_assert_eq(gateway_control_start(&c, &ctx, "http://127.0.0.1:1", &err), 0, "%s", err.msg);
    ans = ask(
        "{\"op\": \"mint\", \"repos\": [\"local/acme/app\"], \"ttl\": 60, \"run\": \"unit\"}\n");
    cr_assert(json_is_true(json_object_get(ans, "ok")), "%s", json_dumps(ans, 0));
    cr_expect_str_eq(json_string_value(json_object_get(ans, "url")), "http://127.0.0.1:1");
    token = strdup(json_string_value(json_object_get(ans, "token")));
    json_decref(ans);
    cr_assert_eq(tokens_verify(&claims, &status, ctx.tokens, token, time(NULL), &err), 0, "%s",
                 err.msg);
    cr_expect_eq(status, TOKENS_OK);
    cr_expect_str_eq(claims->run, "unit");
    cr_expect_eq(claims->nrepos, 1);
    tokens_claims_free(claims);

    snprintf(line, sizeof(line), "{\"op\": \"revoke\", \"token\": \"%s\"}\n", token);
    ans = ask(line);
    cr_expect(json_is_true(json_object_get(ans, "ok")));
    json_decref(ans);
    claims = NULL;
    tokens_verify(&claims, &status, ctx.tokens, token, time(NULL), &err);
    cr_expect_eq(status, TOKENS_REVOKED);
    tokens_claims_free(claims);
    gateway_control_stop(c);
    cr_expect_eq(access(cfg->control.socket, F_OK), -1, "the socket is removed at stop");

    snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
    cr_assert_eq(rg_fs_read_file(&log, path, &err), 0, "%s", err.msg);
    cr_expect_not_null(memmem(log.data, log.len, "\"event\":\"token-mint\"", 20));
    cr_expect_not_null(memmem(log.data, log.len, "\"event\":\"token-revoke\"", 22));
    cr_expect_null(memmem(log.data, log.len, token, strlen(token)), "the token is in the log");
    rg_buf_free(&log);
    free(token);
}

/* Mint over the socket; the token, for the caller to free. */
static char *mint_over_socket(void)
{
    json_t *ans = ask("{\"op\": \"mint\", \"repos\": [\"local/acme/app\"], \"ttl\": 60}\n");
    char *token;

    cr_assert(json_is_true(json_object_get(ans, "ok")), "%s", json_dumps(ans, 0));
    token = strdup(json_string_value(json_object_get(ans, "token")));
    json_decref(ans);
    return token;
}

static tokens_status check(const char *token, char kid[TOKENS_KID_SIZE])
{
    rg_error err = RG_ERROR_INIT;
    tokens_claims *claims = NULL;
    tokens_status status;

    cr_assert_eq(tokens_verify(&claims, &status, ctx.tokens, token, time(NULL), &err), 0, "%s",
                 err.msg);
    if (claims != NULL)
        memcpy(kid, claims->kid, TOKENS_KID_SIZE);
    tokens_claims_free(claims);
    return status;
}

Test(control, key_rotate_signs_new_tokens_with_a_new_kid_and_old_ones_still_verify)
{
    rg_error err = RG_ERROR_INIT;
    gateway_control *c = NULL;
    rg_buf log = RG_BUF_INIT(1 << 20);
    char path[PATH_MAX + 32], kid_old[TOKENS_KID_SIZE], kid_new[TOKENS_KID_SIZE];
    char *before, *after;
    json_t *ans;

    cr_assert_eq(gateway_control_start(&c, &ctx, "http://127.0.0.1:1", &err), 0, "%s", err.msg);
    before = mint_over_socket();
    cr_assert_eq(check(before, kid_old), TOKENS_OK);
    ans = ask("{\"op\": \"key-rotate\"}\n");
    cr_assert(json_is_true(json_object_get(ans, "ok")), "%s", json_dumps(ans, 0));
    cr_expect_str_eq(json_string_value(json_object_get(ans, "retired")), kid_old);
    after = mint_over_socket();
    cr_assert_eq(check(after, kid_new), TOKENS_OK);
    cr_expect_str_eq(json_string_value(json_object_get(ans, "kid")), kid_new);
    cr_expect_str_neq(kid_new, kid_old);
    cr_expect_eq(check(before, kid_old), TOKENS_OK, "a token of the retired key still verifies");
    json_decref(ans);
    gateway_control_stop(c);

    snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
    cr_assert_eq(rg_fs_read_file(&log, path, &err), 0, "%s", err.msg);
    cr_expect_not_null(memmem(log.data, log.len, "\"event\":\"token-key-rotate\"", 26));
    cr_expect_not_null(memmem(log.data, log.len, kid_new, TOKENS_KID_HEX));
    rg_buf_free(&log);
    free(before);
    free(after);
}

Test(control, a_stale_socket_is_replaced_a_live_one_and_a_plain_file_are_not)
{
    rg_error err = RG_ERROR_INIT;
    gateway_control *c = NULL, *second = NULL;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    json_t *ans;
    int fd;

    /* A socket nobody listens on, as a crashed gateway leaves it. */
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", cfg->control.socket);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    close(fd);
    cr_assert_eq(gateway_control_start(&c, &ctx, "http://127.0.0.1:1", &err), 0, "%s", err.msg);
    ans = ask("{\"op\": \"nothing\"}\n");
    cr_expect_str_eq(json_string_value(json_object_get(ans, "error")),
                     "op: expected \"mint\", \"revoke\", \"approvals\", \"approval\", "
                     "\"approve\", \"deny\", \"console-user-add\" or \"key-rotate\"");
    json_decref(ans);

    /* Live: a second start refuses and leaves the first one serving. */
    cr_expect_eq(gateway_control_start(&second, &ctx, "http://127.0.0.1:1", &err), -EADDRINUSE);
    cr_expect_null(second);
    cr_expect(strstr(err.msg, "another gateway answers on it") != NULL, "%s", err.msg);
    ans = ask("{\"op\": \"nothing\"}\n");
    cr_expect_not_null(json_object_get(ans, "error"), "the first still answers");
    json_decref(ans);
    gateway_control_stop(c);

    /* Not a socket: never removed. */
    cr_assert_eq(rg_fs_write_atomic(cfg->control.socket, "x", 1, 0600, &err), 0, "%s", err.msg);
    cr_expect_eq(gateway_control_start(&c, &ctx, "http://127.0.0.1:1", &err), -EEXIST);
    cr_expect(strstr(err.msg, "exists and is not a socket") != NULL, "%s", err.msg);
    cr_expect_eq(access(cfg->control.socket, F_OK), 0, "the file is still there");
}
