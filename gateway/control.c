/*
 * The control socket (see control.h): one thread polls the listening socket
 * and at most GATEWAY_CONTROL_CONNECTIONS clients, each with a capped line
 * buffer and an idle deadline. Requests are small and quick (a signature
 * and an fsynced audit append), so one thread serves them all in turn; nothing a
 * client sends can make it wait on that client, since every client socket
 * is non-blocking and a client that does not take its answer is dropped.
 */
#include "gateway/control.h"
#include "gateway/approve.h"
#include "gateway/reviewers.h"

#include "util/log.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A TTL asked for without one: a working session, as `refgate run` uses. */
#define DEFAULT_TTL_SECONDS (2 * 3600)
/* Groups of one user looked at, at most: past that the rest are not seen. */
#define PEER_GROUPS_MAX 1024
/* Room for getpwuid_r/getgrnam_r's strings. */
#define NSS_BUF_BYTES 16384

typedef struct control_client {
    int fd;
    struct ucred cred;
    char user[64]; /* the peer's user name, or its uid in decimal */
    char *buf;     /* GATEWAY_CONTROL_REQUEST_MAX + 1 bytes: a line and its newline */
    size_t len;
    struct timespec last; /* CLOCK_MONOTONIC of the last byte received */
} control_client;

struct gateway_control {
    const gateway_ctx *ctx;
    const char *url;
    int listen_fd;
    int wake[2]; /* a byte on wake[1] ends the thread */
    pthread_t thread;
    int running;
    int bound; /* the socket file is ours to remove */
    control_client clients[GATEWAY_CONTROL_CONNECTIONS];
    size_t nclients;
};

/* ------------------------------------------------------------------------ */
/* Answers                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Send one JSON answer line; consumes `answer`. The text is wiped (a mint's
 * answer holds the token). A client whose socket cannot take the whole line
 * now is not waited for: -1 tells the caller to drop it.
 */
static int control_send(int fd, json_t *answer)
{
    char *text = json_dumps(answer, JSON_COMPACT);
    const json_t *tok = json_object_get(answer, "token");
    size_t len, off = 0;
    ssize_t n;
    int rc = -1;

    /* jansson frees its copy of the token without wiping it. */
    if (json_is_string(tok))
        explicit_bzero((char *)json_string_value(tok), json_string_length(tok));
    json_decref(answer);
    if (text == NULL)
        return -1;
    len = strlen(text);
    text[len] = '\n'; /* the NUL's place; the length below counts it as the newline */
    /* Bounded: each round sends at least one byte or stops. */
    while (off < len + 1) {
        n = send(fd, text + off, len + 1 - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto done;
        off += (size_t)n;
    }
    rc = 0;
done:
    explicit_bzero(text, len + 1);
    free(text);
    return rc;
}

static int control_send_error(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int control_send_error(int fd, const char *fmt, ...)
{
    char msg[600];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return control_send(fd, json_pack("{s:b, s:s}", "ok", 0, "error", msg));
}

/* ------------------------------------------------------------------------ */
/* Who may ask                                                              */
/* ------------------------------------------------------------------------ */

static int control_is_number(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The gid a control.groups entry names; -1 when no such group. */
static long control_group_gid(const char *entry)
{
    struct group gr, *found = NULL;
    char buf[NSS_BUF_BYTES];

    if (control_is_number(entry))
        return strtol(entry, NULL, 10);
    if (getgrnam_r(entry, &gr, buf, sizeof(buf), &found) != 0 || found == NULL)
        return -1;
    return (long)found->gr_gid;
}

/*
 * Whether the peer may use the socket: the gateway's own uid, a user in
 * control.users, or a member of a group in control.groups (its primary
 * gid as the kernel reports it and as passwd says, and its supplementary
 * groups from getgrouplist). Fills cl->user with the name for the logs.
 */
static int control_peer_allowed(const config_control *cc, control_client *cl)
{
    struct passwd pw, *found = NULL;
    char buf[NSS_BUF_BYTES];
    gid_t groups[PEER_GROUPS_MAX];
    int ngroups = PEER_GROUPS_MAX;
    size_t i;
    int j;

    snprintf(cl->user, sizeof(cl->user), "%lu", (unsigned long)cl->cred.uid);
    if (getpwuid_r(cl->cred.uid, &pw, buf, sizeof(buf), &found) == 0 && found != NULL)
        snprintf(cl->user, sizeof(cl->user), "%s", found->pw_name);
    if (cl->cred.uid == geteuid())
        return 1;
    for (i = 0; i < cc->nusers; i++) {
        if (control_is_number(cc->users[i])
                ? strtoul(cc->users[i], NULL, 10) == (unsigned long)cl->cred.uid
                : (found != NULL && !strcmp(cc->users[i], found->pw_name)))
            return 1;
    }
    if (cc->ngroups == 0)
        return 0;
    if (found == NULL || getgrouplist(found->pw_name, found->pw_gid, groups, &ngroups) < 0)
        ngroups = 0; /* only the kernel's gid below; a huge list is cut, not trusted */
    for (i = 0; i < cc->ngroups; i++) {
        long gid = control_group_gid(cc->groups[i]);

        if (gid < 0)
            continue;
        if ((gid_t)gid == cl->cred.gid || (found != NULL && (gid_t)gid == found->pw_gid))
            return 1;
        for (j = 0; j < ngroups; j++)
            if (groups[j] == (gid_t)gid)
                return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */

static void control_audit_failed(const char *event, const rg_error *e)
{
    char q[RG_LOG_VALUE_MAX];

    rg_log(RG_LOG_ERR, "audit_append_failed", "event=%s error=%s", event,
           rg_log_quote(q, sizeof(q), e->msg));
}

/*
 * One repos[] entry as the token will carry it: HOST/PATH without .git,
 * HOST a configured upstream. tokens_mint checks each segment's shape.
 */
static int control_repo(char **out, const config_model *cfg, const json_t *v, size_t i,
                        rg_error *err)
{
    const char *s, *slash;
    size_t len;
    char host[128];

    *out = NULL;
    if (!json_is_string(v))
        return rg_error_set(err, -EINVAL, "repos[%zu]: expected a string HOST/PATH", i);
    s = json_string_value(v);
    len = strlen(s);
    if (len >= 4 && !strcmp(s + len - 4, ".git"))
        len -= 4;
    slash = memchr(s, '/', len);
    if (slash == NULL || slash == s || slash + 1 == s + len || (size_t)(slash - s) >= sizeof(host))
        return rg_error_set(err, -EINVAL, "repos[%zu]: expected HOST/PATH, e.g. local/acme/app", i);
    memcpy(host, s, (size_t)(slash - s));
    host[slash - s] = '\0';
    if (config_find_upstream(cfg, host) == NULL)
        return rg_error_set(err, -EINVAL,
                            "repos[%zu]: '%s' is not an upstream host of this gateway", i, host);
    *out = strndup(s, len);
    return *out ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
}

/* The requested ttl in seconds, within 1..control.max_ttl. */
static int control_ttl(long long *out, const config_control *cc, const json_t *v, rg_error *err)
{
    long long ttl = -1;

    *out = DEFAULT_TTL_SECONDS < cc->max_ttl ? DEFAULT_TTL_SECONDS : cc->max_ttl;
    if (v == NULL)
        return 0;
    if (json_is_integer(v))
        ttl = json_integer_value(v);
    else if (json_is_string(v))
        ttl = rg_duration_parse(json_string_value(v));
    if (ttl < 1)
        return rg_error_set(err, -EINVAL, "ttl: expected seconds or a duration such as \"2h\"");
    /* Refused, not cut: a caller that asked for more should know it got less. */
    if (ttl > cc->max_ttl)
        return rg_error_set(err, -EINVAL,
                            "ttl: %lld s is over this gateway's control.max_ttl (%lld s)", ttl,
                            cc->max_ttl);
    *out = ttl;
    return 0;
}

static int control_mint(json_t **out, gateway_control *c, const control_client *cl,
                        const json_t *req, rg_error *err)
{
    const config_model *cfg = c->ctx->cfg;
    const json_t *repos = json_object_get(req, "repos"), *runv = json_object_get(req, "run");
    char *names[TOKENS_REPOS_MAX] = {0}, *token = NULL, run_buf[32],
         prefix[TOKENS_HASH_PREFIX_SIZE];
    char detail[3072];
    const char *run;
    size_t n = 0, i, off;
    long long ttl;
    int64_t now = (int64_t)time(NULL);
    unsigned char rnd[4];
    audit_record rec = {.kind = AUDIT_EVENT, .event = "token-mint"};
    json_t *answer = NULL;

    if (!json_is_array(repos) || json_array_size(repos) == 0 ||
        json_array_size(repos) > TOKENS_REPOS_MAX) {
        rg_error_set(err, -EINVAL, "repos: expected an array of 1 to %d HOST/PATH names",
                     TOKENS_REPOS_MAX);
        goto done;
    }
    for (n = 0; n < json_array_size(repos); n++)
        if (control_repo(&names[n], cfg, json_array_get(repos, n), n, err) < 0)
            goto done;
    if (control_ttl(&ttl, &cfg->control, json_object_get(req, "ttl"), err) < 0)
        goto done;
    if (runv != NULL && !json_is_string(runv)) {
        rg_error_set(err, -EINVAL, "run: expected a string");
        goto done;
    }
    run = json_string_value(runv);
    if (run == NULL) {
        if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
            rg_error_set(err, -EIO, "no randomness for a run name");
            goto done;
        }
        snprintf(run_buf, sizeof(run_buf), "run-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
        run = run_buf;
    }
    /* Idempotent, and never a token before its key is published: a
     * gateway that started while the database was away publishes here. */
    if (tokens_key_publish(c->ctx->key, c->ctx->tokens, c->ctx->gateway_id, err) < 0) {
        rg_error_wrap(err, "no token was minted: its signing key cannot be published");
        goto done;
    }
    if (tokens_mint(&token, c->ctx->key, run, (const char *const *)names, n, (int64_t)ttl, now,
                    err) < 0)
        goto done;
    tokens_hash_prefix(prefix, token);
    off = (size_t)snprintf(
        detail, sizeof(detail), "peer uid %lu (%s) pid %ld, run %s, ttl %llds, token %s, repos",
        (unsigned long)cl->cred.uid, cl->user, (long)cl->cred.pid, run, ttl, prefix);
    for (i = 0; i < n && off < sizeof(detail); i++)
        off += (size_t)snprintf(detail + off, sizeof(detail) - off, " %s", names[i]);
    /* The record is durable before the token exists for anyone: a token the
     * log does not know of is never handed out. */
    rec.run = run;
    rec.token_hash = prefix;
    rec.detail = detail;
    if (audit_append(c->ctx->audit, &rec, err) < 0) {
        control_audit_failed("token-mint", err);
        rg_error_set(err, -EIO, "the audit log cannot be written; no token was minted");
        goto done;
    }
    rg_log(RG_LOG_NOTICE, "control_mint", "uid=%lu run=%s token=%s ttl=%lld",
           (unsigned long)cl->cred.uid, run, prefix, ttl);
    answer = json_pack("{s:b, s:s, s:s, s:I, s:s}", "ok", 1, "token", token, "run", run, "expires",
                       (json_int_t)(now + ttl), "url", c->url);
    if (answer == NULL)
        rg_error_set(err, -ENOMEM, "out of memory");
done:
    tokens_secret_free(token);
    for (i = 0; i < TOKENS_REPOS_MAX; i++)
        free(names[i]);
    *out = answer;
    return answer != NULL ? 0 : (err->code < 0 ? err->code : -EIO);
}

static int control_revoke(json_t **out, gateway_control *c, const control_client *cl,
                          const json_t *req, rg_error *err)
{
    const json_t *tv = json_object_get(req, "token");
    const char *token = json_string_value(tv);
    char prefix[TOKENS_HASH_PREFIX_SIZE], detail[3072];
    tokens_claims *claims = NULL;
    size_t off, i;
    tokens_status status;
    audit_record rec = {.kind = AUDIT_EVENT, .event = "token-revoke"};
    json_t *answer = NULL;

    if (token == NULL || json_string_length(tv) > TOKENS_MAX_LEN) {
        rg_error_set(err, -EINVAL, "token: expected the token to revoke");
        goto done;
    }
    tokens_hash_prefix(prefix, token);
    /* For the record only, so before revoking: the run and repositories the
     * token names, when it still verifies (not expired, not yet revoked). */
    if (tokens_verify(&claims, &status, c->ctx->tokens, token, (int64_t)time(NULL), NULL) < 0 ||
        status != TOKENS_OK) {
        tokens_claims_free(claims);
        claims = NULL;
    }
    if (tokens_revoke(c->ctx->tokens, token, err) < 0)
        goto done;
    off = (size_t)snprintf(detail, sizeof(detail), "peer uid %lu (%s) pid %ld, run %s, token %s",
                           (unsigned long)cl->cred.uid, cl->user, (long)cl->cred.pid,
                           claims ? claims->run : "(expired or revoked)", prefix);
    if (claims != NULL && off < sizeof(detail))
        off += (size_t)snprintf(detail + off, sizeof(detail) - off, ", repos");
    for (i = 0; claims != NULL && i < claims->nrepos && off < sizeof(detail); i++)
        off += (size_t)snprintf(detail + off, sizeof(detail) - off, " %s", claims->repos[i]);
    rec.run = claims ? claims->run : NULL;
    rec.token_hash = prefix;
    rec.detail = detail;
    if (audit_append(c->ctx->audit, &rec, err) < 0) {
        control_audit_failed("token-revoke", err);
        rg_error_set(err, -EIO, "the token is revoked, but the audit log cannot be written");
        goto done;
    }
    rg_log(RG_LOG_NOTICE, "control_revoke", "uid=%lu token=%s", (unsigned long)cl->cred.uid,
           prefix);
    answer = json_pack("{s:b}", "ok", 1);
done:
    tokens_claims_free(claims);
    *out = answer;
    return answer != NULL ? 0 : (err->code < 0 ? err->code : -EIO);
}

/*
 * key-rotate: a new signing key, published; the old one retired (its
 * tokens verify until they expire). Audited after the fact: the rotation
 * cannot be undone, and it hands out nothing.
 */
static int control_key_rotate(json_t **out, gateway_control *c, const control_client *cl,
                              rg_error *err)
{
    audit_record rec = {.kind = AUDIT_EVENT, .event = "token-key-rotate"};
    char old_kid[TOKENS_KID_SIZE] = "", new_kid[TOKENS_KID_SIZE] = "", detail[256];
    rg_error aerr = RG_ERROR_INIT;
    int rc;

    rc = tokens_key_rotate(c->ctx->key, c->ctx->tokens, c->ctx->cfg->state_dir, c->ctx->gateway_id,
                           old_kid, new_kid, err);
    if (new_kid[0] == '\0')
        return rc; /* nothing changed */
    snprintf(detail, sizeof(detail), "peer uid %lu (%s) pid %ld, key %s retired, key %s signs",
             (unsigned long)cl->cred.uid, cl->user, (long)cl->cred.pid, old_kid, new_kid);
    rec.detail = detail;
    if (audit_append(c->ctx->audit, &rec, &aerr) < 0) {
        control_audit_failed("token-key-rotate", &aerr);
        if (rc == 0)
            rc = rg_error_set(err, -EIO,
                              "the key was rotated (key %s signs), but the audit log "
                              "cannot be written",
                              new_kid);
    }
    rg_log(RG_LOG_NOTICE, "control_key_rotate", "uid=%lu old=%s new=%s",
           (unsigned long)cl->cred.uid, old_kid, new_kid);
    if (rc < 0)
        return rc;
    *out = json_pack("{s:b, s:s, s:s}", "ok", 1, "kid", new_kid, "retired", old_kid);
    return *out ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
}

/*
 * console-user-add: make a reviewer account for the console (or set its
 * password), audited with the peer; the password reaches neither the log
 * nor the audit record.
 */
static int control_console_user(json_t **out, gateway_control *c, const control_client *cl,
                                const json_t *req, rg_error *err)
{
    audit_record rec = {.kind = AUDIT_EVENT, .event = "console-user-add"};
    const char *name = json_string_value(json_object_get(req, "name"));
    const char *password = json_string_value(json_object_get(req, "password"));
    char detail[512];
    int replaced = 0, rc;

    if (name == NULL || password == NULL)
        return rg_error_set(err, -EINVAL, "console-user-add: expected \"name\" and \"password\"");
    if (!gateway_reviewer_name_ok(name))
        return rg_error_set(err, -EINVAL, "name: 1 to %d of A-Z a-z 0-9 . _ -",
                            GATEWAY_REVIEWER_NAME_MAX);
    snprintf(detail, sizeof(detail), "console user %s set by peer uid %lu (%s) pid %ld", name,
             (unsigned long)cl->cred.uid, cl->user, (long)cl->cred.pid);
    rec.detail = detail;
    /* Recorded before it is made: an account the log does not know of never exists. */
    if ((rc = audit_append(c->ctx->audit, &rec, err)) < 0) {
        control_audit_failed("console-user-add", err);
        return rg_error_set(err, -EIO, "the audit log cannot be written; no account was changed");
    }
    if ((rc = gateway_reviewer_set(&replaced, c->ctx->cfg->state_dir, name, password, err)) < 0)
        return rc;
    rg_log(RG_LOG_NOTICE, "console_user_set", "name=%s uid=%lu", name, (unsigned long)cl->cred.uid);
    *out = json_pack("{s:b, s:s, s:b}", "ok", 1, "name", name, "replaced", replaced);
    return *out ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
}

/* Answer one request line; -1 when the client is to be dropped. */
static int control_handle_line(gateway_control *c, control_client *cl, const char *line, size_t len)
{
    json_error_t jerr;
    json_t *req, *answer = NULL;
    rg_error err = RG_ERROR_INIT;
    gateway_approval_peer peer;
    const char *op;

    req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (req == NULL || !json_is_object(req)) {
        json_decref(req);
        return control_send_error(cl->fd, "expected one JSON object per line: %s",
                                  req ? "not an object" : jerr.text);
    }
    op = json_string_value(json_object_get(req, "op"));
    peer = (gateway_approval_peer){cl->cred.uid, cl->user, (long)cl->cred.pid, NULL};
    if (op != NULL && !strcmp(op, "mint")) {
        if (control_mint(&answer, c, cl, req, &err) < 0)
            gateway_metrics_token_failure(c->ctx->metrics, "mint");
    } else if (op != NULL && !strcmp(op, "revoke")) {
        if (control_revoke(&answer, c, cl, req, &err) < 0)
            gateway_metrics_token_failure(c->ctx->metrics, "revoke");
    } else if (op != NULL && !strcmp(op, "key-rotate")) {
        if (control_key_rotate(&answer, c, cl, &err) < 0)
            gateway_metrics_token_failure(c->ctx->metrics, "key-rotate");
    } else if (op != NULL && !strcmp(op, "console-user-add")) {
        control_console_user(&answer, c, cl, req, &err);
    } else if (op == NULL || !gateway_approval_control(&answer, c->ctx, &peer, op, req, &err))
        rg_error_set(&err, -EINVAL,
                     "op: expected \"mint\", \"revoke\", \"approvals\", \"approval\", "
                     "\"approve\", \"deny\", \"console-user-add\" or \"key-rotate\"");
    json_decref(req);
    if (answer == NULL)
        return control_send_error(cl->fd, "%s", err.msg);
    return control_send(cl->fd, answer);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

static void control_drop(gateway_control *c, size_t i)
{
    control_client *cl = &c->clients[i];

    close(cl->fd);
    /* A revoke request carried a token. */
    explicit_bzero(cl->buf, cl->len);
    free(cl->buf);
    c->clients[i] = c->clients[--c->nclients];
}

static void control_accept(gateway_control *c)
{
    control_client cl = {.fd = -1};
    socklen_t credlen = sizeof(cl.cred);

    cl.fd = accept4(c->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cl.fd < 0)
        return;
    if (getsockopt(cl.fd, SOL_SOCKET, SO_PEERCRED, &cl.cred, &credlen) < 0) {
        close(cl.fd);
        return;
    }
    if (!control_peer_allowed(&c->ctx->cfg->control, &cl)) {
        rg_log(RG_LOG_WARNING, "control_refused", "uid=%lu user=%s pid=%ld",
               (unsigned long)cl.cred.uid, cl.user, (long)cl.cred.pid);
        control_send_error(cl.fd,
                           "refused: user %s (uid %lu) may not use this gateway's control socket "
                           "(allowed: the gateway's own user, control.users and control.groups "
                           "in %s)",
                           cl.user, (unsigned long)cl.cred.uid, c->ctx->cfg->path);
        close(cl.fd);
        return;
    }
    if (c->nclients == GATEWAY_CONTROL_CONNECTIONS) {
        rg_log(RG_LOG_WARNING, "control_busy", "uid=%lu", (unsigned long)cl.cred.uid);
        control_send_error(cl.fd, "busy: %d control connections are open; try again",
                           GATEWAY_CONTROL_CONNECTIONS);
        close(cl.fd);
        return;
    }
    cl.buf = malloc(GATEWAY_CONTROL_REQUEST_MAX + 1);
    if (cl.buf == NULL) {
        close(cl.fd);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &cl.last);
    c->clients[c->nclients++] = cl;
}

/* Read what client i sent and answer each complete line; -1 to drop it. */
static int control_read(gateway_control *c, size_t i)
{
    control_client *cl = &c->clients[i];
    char *nl;
    ssize_t n;
    size_t used;

    n = recv(cl->fd, cl->buf + cl->len, GATEWAY_CONTROL_REQUEST_MAX + 1 - cl->len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return -1;
    cl->len += (size_t)n;
    clock_gettime(CLOCK_MONOTONIC, &cl->last);
    /* Bounded: each round consumes one line of the capped buffer. */
    while ((nl = memchr(cl->buf, '\n', cl->len)) != NULL) {
        used = (size_t)(nl - cl->buf) + 1;
        if (control_handle_line(c, cl, cl->buf, used - 1) < 0)
            return -1;
        explicit_bzero(cl->buf, used);
        memmove(cl->buf, cl->buf + used, cl->len - used);
        cl->len -= used;
    }
    if (cl->len > GATEWAY_CONTROL_REQUEST_MAX) {
        control_send_error(cl->fd, "request over %d bytes", GATEWAY_CONTROL_REQUEST_MAX);
        return -1;
    }
    return 0;
}

static long control_ms_since(const struct timespec *t, const struct timespec *now)
{
    return (now->tv_sec - t->tv_sec) * 1000 + (now->tv_nsec - t->tv_nsec) / 1000000;
}

static void *control_main(void *arg)
{
    gateway_control *c = arg;
    struct pollfd fds[2 + GATEWAY_CONTROL_CONNECTIONS];
    struct timespec now;
    long idle_ms = GATEWAY_CONTROL_IDLE_SECONDS * 1000L, wait_ms, left;
    size_t i, n;

    /* Bounded: ends when gateway_control_stop writes to the wake pipe. */
    for (;;) {
        fds[0] = (struct pollfd){.fd = c->wake[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = c->listen_fd, .events = POLLIN};
        clock_gettime(CLOCK_MONOTONIC, &now);
        wait_ms = -1;
        for (i = 0; i < c->nclients; i++) {
            fds[2 + i] = (struct pollfd){.fd = c->clients[i].fd, .events = POLLIN};
            left = idle_ms - control_ms_since(&c->clients[i].last, &now);
            if (left < 0)
                left = 0;
            if (wait_ms < 0 || left < wait_ms)
                wait_ms = left;
        }
        n = c->nclients;
        if (poll(fds, 2 + n, (int)wait_ms) < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* Backwards, so that dropping client i (the last moves into its
         * place) leaves the ones still to visit where they were. */
        for (i = n; i-- > 0;) {
            if (fds[2 + i].revents && control_read(c, i) < 0)
                control_drop(c, i);
            else if (control_ms_since(&c->clients[i].last, &now) >= idle_ms)
                control_drop(c, i);
        }
        if (fds[1].revents & POLLIN)
            control_accept(c);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Starting and stopping                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Make the path free for bind: nothing there, or a socket nobody answers on
 * (left by a gateway that crashed). A socket a live gateway answers on is
 * never taken over, and anything that is not a socket is not removed.
 */
static int control_clear_stale(const struct sockaddr_un *addr, rg_error *err)
{
    struct stat st;
    int fd, rc;

    if (lstat(addr->sun_path, &st) < 0)
        return errno == ENOENT ? 0
                               : rg_error_set(err, -errno, "control socket %s: %s", addr->sun_path,
                                              strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return rg_error_set(err, -EEXIST, "control socket %s: exists and is not a socket",
                            addr->sun_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return rg_error_set(err, -errno, "socket: %s", strerror(errno));
    rc = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
    close(fd);
    if (rc == 0)
        return rg_error_set(err, -EADDRINUSE,
                            "control socket %s: another gateway answers on it (stop it first, "
                            "or set control.socket)",
                            addr->sun_path);
    if (unlink(addr->sun_path) < 0 && errno != ENOENT)
        return rg_error_set(err, -errno, "control socket %s: cannot remove the stale socket: %s",
                            addr->sun_path, strerror(errno));
    rg_log(RG_LOG_NOTICE, "control_stale_removed", "path=%s", addr->sun_path);
    return 0;
}

int gateway_control_start(gateway_control **out, const gateway_ctx *ctx, const char *url,
                          rg_error *err)
{
    const char *path = ctx->cfg->control.socket;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    gateway_control *c;
    int rc;

    *out = NULL;
    if (strlen(path) >= sizeof(addr.sun_path))
        return rg_error_set(err, -ENAMETOOLONG, "control socket %s: path too long", path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    c->ctx = ctx;
    c->url = url;
    c->listen_fd = c->wake[0] = c->wake[1] = -1;
    rc = control_clear_stale(&addr, err);
    if (rc < 0)
        goto done;
    c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->listen_fd < 0) {
        rc = rg_error_set(err, -errno, "socket: %s", strerror(errno));
        goto done;
    }
    if (bind(c->listen_fd, (const struct sockaddr *)&addr, sizeof(addr)) < 0) {
        rc = rg_error_set(err, -errno, "control socket %s: bind: %s", path, strerror(errno));
        goto done;
    }
    c->bound = 1;
    /* Who may connect is decided by SO_PEERCRED; the mode only lets them try. */
    if (chmod(path, 0666) < 0 || listen(c->listen_fd, 64) < 0) {
        rc = rg_error_set(err, -errno, "control socket %s: %s", path, strerror(errno));
        goto done;
    }
    if (pipe2(c->wake, O_CLOEXEC) < 0) {
        rc = rg_error_set(err, -errno, "pipe: %s", strerror(errno));
        goto done;
    }
    rc = pthread_create(&c->thread, NULL, control_main, c);
    if (rc != 0) {
        rc = rg_error_set(err, -rc, "cannot start the control thread: %s", strerror(rc));
        goto done;
    }
    c->running = 1;
    rg_log(RG_LOG_NOTICE, "control_listening", "path=%s", path);
done:
    if (rc < 0) {
        gateway_control_stop(c);
        return rc;
    }
    *out = c;
    return 0;
}

void gateway_control_stop(gateway_control *c)
{
    if (c == NULL)
        return;
    if (c->running) {
        (void)!write(c->wake[1], "", 1);
        pthread_join(c->thread, NULL);
    }
    while (c->nclients > 0)
        control_drop(c, c->nclients - 1);
    if (c->listen_fd >= 0)
        close(c->listen_fd);
    if (c->bound)
        unlink(c->ctx->cfg->control.socket);
    if (c->wake[0] >= 0)
        close(c->wake[0]);
    if (c->wake[1] >= 0)
        close(c->wake[1]);
    free(c);
}
