/*
 * The libmicrohttpd server: routing, validation and the request lifecycle.
 * Per-request state lives in *con_cls and is freed in the completed
 * callback, which also aborts a push whose client went away.
 *
 * Strangers on the loopback are held to config's limits: connections wait
 * for their headers under gateway_conns (a deadline trickling cannot
 * extend, eviction of the oldest waiting connection, a per-token request
 * limit), every spooled byte is charged to one gateway_spool budget, and
 * gzip bodies may expand only so far (rg_inflate).
 *
 * Pushes go through gateway_receive. Fetches (upload-pack) are relayed:
 * authorised like pushes (the token must name the repository), their
 * request body spooled to a file (so upstream can answer while the client
 * is still sending without either side blocking), then upstream's answer
 * streamed back through a callback response as the client reads it.
 */
#include "gateway/server_int.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/auth.h"
#include "gateway/conns.h"
#include "gateway/context.h"
#include "gateway/http.h"
#include "util/inflate.h"
#include "gateway/receive.h"
#include "gateway/route.h"
#include "gateway/snapshot.h"
#include "gateway/spool.h"
#include "upstream/upstream.h"
#include "git/advert.h"
#include "util/fs.h"
#include "util/log.h"

/* What a client may send beyond max_body_bytes before the connection is
 * cut instead of answered, so an endless body cannot hold a thread. */
#define DISCARD_AFTER_ERROR_MAX (64u * 1024 * 1024)

/* What a fetch's answer is relayed in: one read from upstream at a time. */
#define FETCH_BLOCK (64 * 1024)

/* The longest Git-Protocol value relayed; git's own are a few dozen bytes. */
#define GIT_PROTOCOL_MAX 255

typedef struct request {
    /* The config snapshot the request began under, and the context made of
     * it and the server's shared parts: a reload never changes either. */
    gateway_snapshot *snap;
    gateway_ctx ctx;
    gateway_receive *push;
    /* A fetch (POST git-upload-pack): where it goes and its spooled body. */
    int fetch;
    gateway_route route;
    char *repo_dir;
    upstream_target target; /* points into route and repo_dir */
    char git_protocol[GIT_PROTOCOL_MAX + 1];
    int gzip;
    int spool_fd;
    rg_inflate *z;
    gateway_spool_lease lease; /* what this request's spool holds of the budget */
    uint64_t body_bytes;
    unsigned fail_status;
    rg_error fail_err;
    uint64_t discarded;
    int failed;
    int counted;
    /* A push whose token cannot be checked now: its body is read and
     * dropped, and the answer names why (refuse_push_body). "" otherwise. */
    char refusal[sizeof(((gateway_auth *)0)->message)];
} request;

/* Capabilities the gateway cannot relay faithfully: push certificates sign
 * the command list the gateway may rewrite, and report-status-v2's option
 * lines are not merged. The client never asks for what is not advertised. */
static const char *const dropped_caps[] = {"push-cert", "report-status-v2", NULL};

/* ------------------------------------------------------------ responses */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                               const char *body, size_t len)
{
    /* How to authenticate, so git asks its credential helper for the token. */
    static const gateway_http_header basic = {MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                              "Basic realm=\"refgate\""};

    return gateway_http_respond(c, status, ctype, body, len, status == 401 ? &basic : NULL,
                                status == 401);
}

/* A plain-text error; git prints its lines as `remote: ...`. */
static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char body[700];
    int n = snprintf(body, sizeof(body), "refgate: %s\n", msg);

    return respond(c, status, "text/plain; charset=utf-8", body,
                   n < (int)sizeof(body) ? (size_t)n : sizeof(body) - 1);
}

/*
 * A Git LFS API call, refused in LFS's own error format
 * (`application/vnd.git-lfs+json` with a `message`), which git-lfs prints;
 * 501 rather than 403 because nothing the client holds would change it.
 */
static enum MHD_Result respond_lfs_refusal(struct MHD_Connection *c)
{
    static const char body[] = "{\"message\": \"" GATEWAY_ROUTE_LFS_REFUSAL "\"}\n";

    return respond(c, 501, "application/vnd.git-lfs+json", body, sizeof(body) - 1);
}

/* ------------------------------------------------------------- requests */

static void client_address(char *out, size_t outsz, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    out[0] = '\0';
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)outsz);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)outsz);
}

static enum MHD_Result advertise(struct MHD_Connection *c, const upstream_target *t)
{
    rg_buf raw = RG_BUF_INIT(UPSTREAM_ADVERT_MAX), out = RG_BUF_INIT(UPSTREAM_ADVERT_MAX + 4096);
    rg_error e = RG_ERROR_INIT;
    enum MHD_Result ret;

    if (upstream_advertise(&raw, t, &e) < 0 ||
        rgit_advert_filter(&out, raw.data, raw.len, dropped_caps, "git-receive-pack", &e) < 0) {
        char msg[600];

        rg_log(RG_LOG_WARNING, "advertisement_failed", "repo=%s/%s error=%s", t->up->host,
               t->repo_path, rg_log_quote(msg, sizeof(msg), e.msg));
        /* The message names what upstream did and holds nothing secret. */
        snprintf(msg, sizeof(msg), "the upstream repository could not be read: %s", e.msg);
        ret = respond_text(c, 502, msg);
    } else {
        ret = respond(c, 200, "application/x-git-receive-pack-advertisement", out.data, out.len);
    }
    rg_buf_free(&raw);
    rg_buf_free(&out);
    return ret;
}

/* --------------------------------------------------------------- fetches */

/* Git-Protocol values are relayed only when they look like git's own
 * (`version=2`, `version=2:object-format=sha256`): no spaces, no controls. */
static int git_protocol_ok(const char *v)
{
    size_t n = v ? strlen(v) : 0;

    if (n == 0 || n > GIT_PROTOCOL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '=' || ch == ':' || ch == '.' || ch == '_' || ch == '-' || ch == ','))
            return 0;
    }
    return 1;
}

static ssize_t fetch_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    upstream_fetch *f = cls;
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    ssize_t n;

    (void)pos;
    n = upstream_fetch_read(f, buf, max, &e);
    if (n > 0)
        return n;
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    /* Part of the answer is out: all that is left is to cut it short, which
     * git reports as an error rather than a short success. */
    rg_log(RG_LOG_WARNING, "fetch_failed_midway", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

static void fetch_reader_free(void *cls)
{
    upstream_fetch_free(cls);
}

/* Start upstream's answer and stream it to the client. */
static enum MHD_Result fetch_respond(struct MHD_Connection *c, const upstream_target *t,
                                     const upstream_fetch_request *freq)
{
    upstream_fetch *f = NULL;
    rg_error e = RG_ERROR_INIT;
    char msg[600];

    if (upstream_fetch_start(&f, t, freq, &e) < 0) {
        rg_log(RG_LOG_WARNING, "fetch_failed", "repo=%s/%s error=%s", t->up->host, t->repo_path,
               rg_log_quote(msg, sizeof(msg), e.msg));
        snprintf(msg, sizeof(msg), "the upstream repository could not be read: %s", e.msg);
        return respond_text(c, 502, msg);
    }
    return gateway_http_stream(c, 200,
                               freq->advertise ? "application/x-git-upload-pack-advertisement"
                                               : "application/x-git-upload-pack-result",
                               FETCH_BLOCK, fetch_reader, f, fetch_reader_free, NULL, 0);
}

/* A held push's answer, read as it comes (keepalives, then the report). */
static ssize_t held_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    size_t n = gateway_receive_read(cls, buf, max);

    (void)pos;
    return n > 0 ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

/* The push waits for an approval: stream its answer. The push is freed
 * with the request, after the response. */
static enum MHD_Result respond_held(struct MHD_Connection *c, gateway_receive *push,
                                    const char *ctype)
{
    return gateway_http_stream(c, 200, ctype, 4096, held_reader, push, NULL, NULL, 0);
}

static int fetch_fail(request *req, unsigned status, int code, const char *msg)
{
    if (!req->failed) {
        req->failed = 1;
        req->fail_status = status;
        rg_error_set(&req->fail_err, code, "%s", msg);
    }
    return code;
}

static int fetch_spool(void *arg, const char *data, size_t len)
{
    request *req = arg;
    int rc;

    if (gateway_spool_take(&req->lease, len) < 0)
        return fetch_fail(req, 503, -ENOSPC, GATEWAY_SPOOL_FULL);
    rc = rg_fs_write_all(req->spool_fd, data, len);
    return rc < 0 ? fetch_fail(req, 500, rc, "cannot spool the request") : 0;
}

/* The next bytes of a fetch request: decoded for a local upstream (as
 * http-backend does for upload-pack), kept as they are for a remote one. */
static int fetch_body(request *req, const char *data, size_t len, uint64_t max)
{
    rg_error e = RG_ERROR_INIT;
    int rc;

    req->body_bytes += len;
    if (req->body_bytes > max)
        return fetch_fail(req, 413, RG_E_TOO_BIG, "request larger than max_body_bytes");
    if (req->z == NULL)
        return fetch_spool(req, data, len);
    rc = rg_inflate_feed(req->z, data, len, &e);
    if (rc < 0 && !req->failed)
        return fetch_fail(req, rc == RG_E_TOO_BIG ? 413 : 400, rc, e.msg);
    return rc;
}

static enum MHD_Result fetch_end(struct MHD_Connection *c, request *req)
{
    upstream_fetch_request freq = UPSTREAM_FETCH_REQUEST_INIT;
    rg_error e = RG_ERROR_INIT;

    if (!req->failed && req->z && rg_inflate_finish(req->z, &e) < 0)
        fetch_fail(req, 400, RG_E_PROTOCOL, e.msg);
    if (!req->failed && lseek(req->spool_fd, 0, SEEK_SET) < 0)
        fetch_fail(req, 500, -errno, "cannot read the spooled request");
    if (req->failed)
        return respond_text(c, req->fail_status, req->fail_err.msg);
    freq.advertise = 0;
    freq.git_protocol = req->git_protocol[0] ? req->git_protocol : NULL;
    freq.body_fd = req->spool_fd;
    freq.body_gzip = req->gzip && req->z == NULL;
    return fetch_respond(c, &req->target, &freq);
}

static void request_free(request *req)
{
    if (req == NULL)
        return;
    gateway_receive_free(req->push);
    rg_inflate_free(req->z);
    if (req->spool_fd >= 0)
        close(req->spool_fd);
    /* The spool file is gone with its descriptor: its bytes are free again. */
    gateway_spool_lease_release(&req->lease);
    free(req->repo_dir);
    /* Last: the push, the fetch and the response used its config. */
    gateway_snapshot_unref(req->snap);
    free(req);
}

/*
 * Every request gets its state at once, holding the current snapshot until
 * it is freed in the completed callback, after its response is sent.
 */
static request *request_new(gateway_server *s)
{
    request *req = calloc(1, sizeof(*req));

    if (req == NULL)
        return NULL;
    req->spool_fd = -1;
    gateway_spool_lease_init(&req->lease, s->spool);
    pthread_mutex_lock(&s->lock);
    req->snap = gateway_snapshot_ref(s->current);
    pthread_mutex_unlock(&s->lock);
    req->ctx = s->ctx;
    req->ctx.cfg = req->snap->cfg;
    req->ctx.read_creds = req->snap->read_creds;
    req->ctx.write_creds = req->snap->write_creds;
    return req;
}

/* A POST git-upload-pack that passed every check: set up its spool. */
static enum MHD_Result fetch_begin(gateway_server *s, struct MHD_Connection *c, request *req,
                                   const gateway_route *route, const upstream_target *target,
                                   const char *proto, int gzip)
{
    req->route = *route;
    req->target = *target;
    req->target.repo_path = req->route.path;
    if (target->repo_dir && (req->repo_dir = strdup(target->repo_dir)) == NULL)
        goto oom;
    req->target.repo_dir = req->repo_dir;
    snprintf(req->git_protocol, sizeof(req->git_protocol), "%s", proto ? proto : "");
    req->gzip = gzip;
    req->spool_fd = open(s->ctx.tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (req->spool_fd < 0)
        return respond_text(c, 500, "cannot spool the request");
    if (gzip && target->repo_dir &&
        rg_inflate_new(&req->z, req->ctx.cfg->max_body_bytes, req->ctx.cfg->limits.inflate_ratio,
                       fetch_spool, req) < 0)
        goto oom;
    /* A fetch in progress from here; before, only answered (the completed
     * callback frees what was made). */
    req->fetch = 1;
    pthread_mutex_lock(&s->lock);
    s->active++;
    req->counted = 1;
    pthread_mutex_unlock(&s->lock);
    return MHD_YES;
oom:
    return respond_text(c, 500, "out of memory");
}

/* The connection's entry in s->conns (NULL if it has none). */
static gateway_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci ? ci->socket_context : NULL;
}

/* The first call for a request: everything is checked before any work. */
static enum MHD_Result begin(gateway_server *s, struct MHD_Connection *c, const char *url,
                             const char *method, void **con_cls)
{
    const char *service, *ctype, *cenc, *clen, *proto;
    upstream_fetch_request freq = UPSTREAM_FETCH_REQUEST_INIT;
    gateway_receive_info info;
    upstream_target target;
    const config_upstream *up;
    gateway_route route;
    gateway_auth auth;
    rg_error e = RG_ERROR_INIT;
    char *repo_dir = NULL, remote[64];
    const config_model *cfg;
    int rc, fetch, gzip;
    request *req;
    enum MHD_Result ret;
    size_t idx;

    req = request_new(s);
    if (req == NULL)
        return respond_text(c, 500, "out of memory");
    /* From here the completed callback frees it, however the request ends. */
    *con_cls = req;
    cfg = req->ctx.cfg;
    service = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "service");
    rc = gateway_route_parse(&route, method, url, service, &e);
    if (rc == -EOPNOTSUPP)
        return respond_lfs_refusal(c);
    if (rc < 0)
        return respond_text(c, rc == -EPERM ? 405 : rc == -EINVAL ? 400 : 404, e.msg);
    up = config_find_upstream(cfg, route.host);
    if (up == NULL)
        return respond_text(c, 404, "unknown upstream host in the path");
    fetch = route.service == GATEWAY_UPLOAD_PACK;
    proto = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Git-Protocol");
    /* A value git would never send is dropped, as http-backend would
     * ignore what it cannot parse: the client then gets protocol v0. */
    if (proto && !git_protocol_ok(proto))
        proto = NULL;

    /* Fetches are authorised like pushes: the token must name the repo. */
    gateway_auth_check(&auth, &req->ctx,
                       MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                       route.repo);
    if (auth.status == 503 && !route.advertise && !fetch) {
        /* Git prints no body of a failed POST: the push is refused in its
         * own answer instead, once the body is read (see gateway_server_handle()). */
        snprintf(req->refusal, sizeof(req->refusal), "%s", auth.message);
        ret = MHD_YES;
        goto done;
    }
    if (auth.status) {
        ret = respond_text(c, auth.status, auth.message);
        goto done;
    }
    /* Authorised: the connection leaves the waiting ones, and the request
     * counts against its token, so one run cannot take every connection. */
    rc = gateway_conns_authorised(s->conns, conn_of(c), auth.token_hash);
    if (rc < 0) {
        char msg[200];

        snprintf(msg, sizeof(msg),
                 rc == -EBUSY ? "too many concurrent requests for this run token "
                                "(limits.per_token is %u): try again when one has finished"
                              : "out of memory",
                 cfg->limits.per_token);
        ret = respond_text(c, rc == -EBUSY ? 429 : 500, msg);
        goto done;
    }
    idx = (size_t)(up - cfg->upstreams);
    if (up->root != NULL && gateway_route_local_dir(&repo_dir, up, &route, &e) < 0) {
        ret = respond_text(c, 404, e.msg);
        goto done;
    }
    target = (upstream_target){
        .up = up,
        .repo_path = route.path,
        .repo_dir = repo_dir,
        .read = up->root ? NULL : req->ctx.read_creds[idx],
        .write = up->root ? NULL : req->ctx.write_creds[idx],
    };
    if (route.advertise && fetch) {
        freq.advertise = 1;
        freq.git_protocol = proto;
        ret = fetch_respond(c, &target, &freq);
        goto done;
    }
    if (route.advertise) {
        ret = advertise(c, &target);
        goto done;
    }

    ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ctype == NULL || strcasecmp(ctype, fetch ? "application/x-git-upload-pack-request"
                                                 : "application/x-git-receive-pack-request")) {
        ret = respond_text(c, 415,
                           fetch ? "expected Content-Type application/x-git-upload-pack-request"
                                 : "expected Content-Type application/x-git-receive-pack-request");
        goto done;
    }
    cenc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (cenc && strcasecmp(cenc, "gzip") != 0 && strcasecmp(cenc, "identity") != 0) {
        ret = respond_text(c, 415, "unsupported Content-Encoding (gzip or identity)");
        goto done;
    }
    gzip = cenc && strcasecmp(cenc, "gzip") == 0;
    clen = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (clen && strtoull(clen, NULL, 10) > cfg->max_body_bytes) {
        ret = respond_text(c, 413, "request body larger than the configured max_body_bytes");
        goto done;
    }
    if (fetch) {
        ret = fetch_begin(s, c, req, &route, &target, proto, gzip);
        goto done;
    }

    client_address(remote, sizeof(remote), c);
    info = (gateway_receive_info){
        .ctx = &req->ctx,
        .route = &route,
        .target = &target,
        .claims = auth.claims,
        .token_hash = auth.token_hash,
        .remote = remote,
        .gzip = gzip,
    };
    info.lease = &req->lease;
    if (gateway_receive_new(&req->push, &info, &e) < 0) {
        ret = respond_text(c, 500, "out of memory");
        goto done;
    }
    pthread_mutex_lock(&s->lock);
    s->active++;
    req->counted = 1;
    pthread_mutex_unlock(&s->lock);
    ret = MHD_YES;
done:
    tokens_claims_free(auth.claims);
    free(repo_dir);
    return ret;
}

/*
 * A push (POST git-receive-pack) refused before its body: the token could
 * not be checked. Its body is read and dropped (up to a bound), then it is
 * answered as receive-pack would fail, on side-band channel 3, which git
 * prints as `remote: <why>` before giving up. A 503 here would show only
 * "RPC failed" (git prints no body of a failed POST), and the advertisement
 * that came before it may well have been answered while the database was
 * there. Nothing is forwarded or recorded: the push never reached a decision.
 */
static enum MHD_Result refuse_push_body(struct MHD_Connection *c, request *req,
                                        size_t *upload_data_size)
{
    char line[sizeof(req->refusal) + 16], body[sizeof(line) + 4];
    int n;

    if (*upload_data_size > 0) {
        req->discarded += *upload_data_size;
        *upload_data_size = 0;
        return req->discarded > DISCARD_AFTER_ERROR_MAX ? MHD_NO : MHD_YES;
    }
    /* One pkt-line: its length (4 hex digits, counting themselves), band 3, the text. */
    n = snprintf(line, sizeof(line), "\003refgate: %s\n", req->refusal);
    n = snprintf(body, sizeof(body), "%04x%s", (unsigned)n + 4, line);
    return respond(c, 200, "application/x-git-receive-pack-result", body, (size_t)n);
}

enum MHD_Result gateway_server_handle(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    gateway_server *s = cls;
    request *req = *con_cls;
    rg_buf response = RG_BUF_INIT(UPSTREAM_REPORT_MAX * 2 + UPSTREAM_PROGRESS_MAX * 2);
    const char *ctype = NULL;
    unsigned status = 500;
    enum MHD_Result ret;

    (void)version;
    if (req == NULL)
        return begin(s, c, url, method, con_cls);
    if (req->refusal[0] != '\0')
        return refuse_push_body(c, req, upload_data_size);
    /* Answered in begin(): libmicrohttpd sends that answer and calls no more. */
    if (req->push == NULL && !req->fetch)
        return MHD_NO;
    if (*upload_data_size > 0) {
        /* After a failure the rest is read and dropped, up to a bound, so
         * the client still gets its answer; past the bound it is cut off. */
        if (req->failed) {
            req->discarded += *upload_data_size;
            *upload_data_size = 0;
            return req->discarded > DISCARD_AFTER_ERROR_MAX ? MHD_NO : MHD_YES;
        }
        if (req->fetch) {
            fetch_body(req, upload_data, *upload_data_size, req->ctx.cfg->max_body_bytes);
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (gateway_receive_body(req->push, upload_data, *upload_data_size) < 0)
            req->failed = 1;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (req->fetch)
        return fetch_end(c, req);
    gateway_receive_end(req->push, &response, &status, &ctype);
    if (gateway_receive_held(req->push)) {
        rg_buf_free(&response);
        return respond_held(c, req->push, ctype);
    }
    ret = respond(c, status, ctype, response.data ? response.data : "", response.len);
    rg_buf_free(&response);
    return ret;
}

void gateway_server_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    gateway_server *s = cls;
    request *req = *con_cls;
    int counted;

    (void)toe;
    /* Every request, answered in begin() or not, frees its token slot and
     * puts the connection back to waiting for its next headers. */
    gateway_conns_request_done(s->conns, conn_of(c));
    if (req == NULL)
        return;
    counted = req->counted;
    /* Freeing kills an upstream receive-pack still waiting for a pack that
     * will never come, so a broken push updates nothing. */
    request_free(req);
    if (counted) {
        pthread_mutex_lock(&s->lock);
        s->active--;
        pthread_mutex_unlock(&s->lock);
    }
    *con_cls = NULL;
}

/* Accepted and closed connections, for gateway_conns. */
void gateway_server_connection_event(void *cls, struct MHD_Connection *c, void **socket_context,
                                     enum MHD_ConnectionNotificationCode code)
{
    gateway_server *s = cls;
    const union MHD_ConnectionInfo *ci;
    gateway_conn *conn = NULL;

    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        gateway_conns_closed(s->conns, *socket_context);
        *socket_context = NULL;
        return;
    }
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL)
        return;
    /* A connection that cannot be tracked cannot be held to the deadline:
     * it is cut at once rather than let in unbounded. */
    if (gateway_conns_opened(&conn, s->conns, ci->connect_fd) < 0)
        shutdown(ci->connect_fd, SHUT_RDWR);
    *socket_context = conn;
}
