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
#include "gateway/server.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway/admin.h"
#include "gateway/auth.h"
#include "gateway/conns.h"
#include "gateway/control.h"
#include "gateway/context.h"
#include "util/inflate.h"
#include "gateway/lease.h"
#include "gateway/listen.h"
#include "gateway/published.h"
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

/* How long shutdown waits for in-flight pushes. */
#define DRAIN_SECONDS 120

/* What a fetch's answer is relayed in: one read from upstream at a time. */
#define FETCH_BLOCK (64 * 1024)

/* The longest Git-Protocol value relayed; git's own are a few dozen bytes. */
#define GIT_PROTOCOL_MAX 255

/* How often the audit log's head is logged between start and stop. */
#define AUDIT_HEAD_SECONDS 3600

/*
 * The stack of each connection's thread. A thread per connection lets a
 * push block on upstream and index-pack without stalling others, and an
 * idle connection costs only the stack pages it touched (a few KiB of RSS),
 * but the default 8 MiB of address space each would make thousands of
 * parked connections reserve tens of GiB. Measured: every integration
 * test (TLS upstreams, GitHub App JWTs, gzip bodies) passes under ASan
 * with 256 KiB, and 64 KiB is too little (inflate's 64 KiB buffer); this
 * is four times what was seen to be enough.
 */
#define CONNECTION_STACK_BYTES ((size_t)1024 * 1024)

struct gateway_server {
    gateway_ctx ctx;
    struct MHD_Daemon *daemon;
    gateway_conns *conns;
    gateway_spool *spool;
    gateway_control *control; /* the local control socket (refgate run) */
    gateway_admin *admin;     /* /healthz and /metrics, when config has "admin" */
    /* The config at start (the caller's; what control and the admin
     * listener read), and the one new requests begin under (under lock). */
    gateway_snapshot *base;
    gateway_snapshot *current;
    /*
     * With a database: the published policy merged over the host's own
     * config is what requests begin under (gateway/published.h). Under
     * policy_mu, which a reload and a new policy both hold throughout, so
     * neither installs a snapshot made of what the other replaced.
     */
    gateway_published *published;
    pthread_mutex_t policy_mu;
    const config_model *local; /* the host's config: the one at start or the last reload */
    config_model *local_owned; /* the last reload's, freed with the server */
    json_t *policy;            /* the policy in force; NULL: none yet, every push refused */
    long long policy_version;
    char policy_digest[CONFIG_POLICY_DIGEST_SIZE];
    const char *refusal; /* while there is none: why, for every push's ng */
    atomic_int stopping; /* ctx.stopping points here */
    int listen_fd;
    char url[128];
    pthread_mutex_t lock;
    unsigned active;   /* requests with a body in flight */
    int curl_ready;    /* curl_global_init succeeded */
    int url_written;   /* <state_dir>/url is ours to remove */
    int audit_started; /* the start event is in the log: a stop event follows */

    gateway_lease *lease; /* this gateway's lease in the database (ctx.db set) */
    int dir_lock_fd;      /* the state_dir lock when the audit log is in the database */
    /* The thread that logs the audit head every AUDIT_HEAD_SECONDS. */
    pthread_t head_thread;
    int head_thread_running;
    int head_stop;
    pthread_mutex_t head_mu;
    pthread_cond_t head_cv;
};

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
    struct MHD_Response *resp;
    enum MHD_Result ret;

    resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"refgate\"");
    ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
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
    struct MHD_Response *resp;
    upstream_fetch *f = NULL;
    rg_error e = RG_ERROR_INIT;
    enum MHD_Result ret;
    char msg[600];

    if (upstream_fetch_start(&f, t, freq, &e) < 0) {
        rg_log(RG_LOG_WARNING, "fetch_failed", "repo=%s/%s error=%s", t->up->host, t->repo_path,
               rg_log_quote(msg, sizeof(msg), e.msg));
        snprintf(msg, sizeof(msg), "the upstream repository could not be read: %s", e.msg);
        return respond_text(c, 502, msg);
    }
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, FETCH_BLOCK, fetch_reader, f,
                                             fetch_reader_free);
    if (resp == NULL) {
        upstream_fetch_free(f);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            freq->advertise ? "application/x-git-upload-pack-advertisement"
                                            : "application/x-git-upload-pack-result");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
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
    struct MHD_Response *resp;
    enum MHD_Result ret;

    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, held_reader, push, NULL);
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ret;
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
         * own answer instead, once the body is read (see handle()). */
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

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
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

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
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
static void connection_event(void *cls, struct MHD_Connection *c, void **socket_context,
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

/*
 * Each connection is a descriptor: raise the soft limit to the hard one so
 * the connection limit, not RLIMIT_NOFILE, is what holds.
 */
static void raise_fd_limit(const config_limits *lim)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Beyond its own socket, a connection may hold a spool, a pipe pair
     * to a local git and an upstream socket. */
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)lim->connections + 64)
        rg_log(RG_LOG_WARNING, "fd_limit_low",
               "nofile=%llu connections=%u (raise LimitNOFILE= or limits.connections)",
               (unsigned long long)rl.rlim_cur, lim->connections);
}

/* --------------------------------------------------------------- server */

/* Spool files and quarantines a crashed gateway left behind: the directory
 * stays (it may be a mount or have its own permissions), its contents go. */
static void clear_tmp(const char *dir)
{
    rg_fs_remove_tree(dir, RG_FS_KEEP_TOP, NULL);
}

/*
 * The file audit log's flock made its gateway the only one on state_dir
 * (clear_tmp and the approvals file rely on it). With the audit log in the
 * database, gateways share the chain, so state_dir gets a lock of its own.
 */
static int lock_state_dir(int *fd, const char *state_dir, rg_error *err)
{
    char path[4200];

    snprintf(path, sizeof(path), "%s/gateway.lock", state_dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    return errno == EWOULDBLOCK
               ? rg_error_set(err, -EBUSY, "%s: in use by another gateway process", state_dir)
               : rg_error_set(err, -errno, "%s: lock: %s", path, strerror(errno));
}

/* ------------------------------------------------------------------------
 * The audit log's head
 * ------------------------------------------------------------------------ */

/*
 * Log where the audit chain stands. A chain cannot tell that records were
 * cut from its end; the heads logged here (journald, kept off this host)
 * can: `refgate audit verify --head SEQ:HASH` checks the log against one.
 */
static void log_audit_head(gateway_server *s)
{
    rg_error e = RG_ERROR_INIT;
    char hash[65], q[RG_LOG_VALUE_MAX];
    uint64_t seq;

    if (audit_head(s->ctx.audit, &seq, hash, &e) < 0)
        rg_log(RG_LOG_ERR, "audit_head_failed", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
    else
        rg_log(RG_LOG_NOTICE, "audit_head", "seq=%llu hash=%s", (unsigned long long)seq, hash);
}

static int audit_event(gateway_server *s, const char *event, const char *detail)
{
    audit_record rec = {.kind = AUDIT_EVENT, .event = event, .detail = detail};
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    int rc;

    rc = audit_append(s->ctx.audit, &rec, &e);
    if (rc < 0)
        rg_log(RG_LOG_ERR, "audit_append_failed", "event=%s error=%s", event,
               rg_log_quote(q, sizeof(q), e.msg));
    return rc;
}

/* Every AUDIT_HEAD_SECONDS: log the audit head, and expire approvals. */
static void *head_thread_main(void *arg)
{
    gateway_server *s = arg;
    struct timespec until;

    pthread_mutex_lock(&s->head_mu);
    while (!s->head_stop) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += AUDIT_HEAD_SECONDS;
        /* Bounded: wakes at the deadline or when stop asks it to end. */
        while (!s->head_stop &&
               pthread_cond_timedwait(&s->head_cv, &s->head_mu, &until) != ETIMEDOUT)
            ;
        if (s->head_stop)
            break;
        pthread_mutex_unlock(&s->head_mu);
        log_audit_head(s);
        /* Expired approvals go when a push or a reviewer looks; at the
         * latest here, so their kept packs leave the spool budget. */
        approvals_expire(s->ctx.approvals, NULL, (int64_t)time(NULL), NULL);
        pthread_mutex_lock(&s->head_mu);
    }
    pthread_mutex_unlock(&s->head_mu);
    return NULL;
}

static int head_thread_start(gateway_server *s, rg_error *err)
{
    pthread_condattr_t attr;
    int rc;

    if (pthread_condattr_init(&attr) != 0)
        return rg_error_set(err, -ENOMEM, "cannot create a condition variable");
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&s->head_cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return rg_error_set(err, -ENOMEM, "cannot create a condition variable");
    pthread_mutex_init(&s->head_mu, NULL);
    rc = pthread_create(&s->head_thread, NULL, head_thread_main, s);
    if (rc != 0) {
        pthread_cond_destroy(&s->head_cv);
        pthread_mutex_destroy(&s->head_mu);
        return rg_error_set(err, -rc, "cannot start the audit head thread: %s", strerror(rc));
    }
    s->head_thread_running = 1;
    return 0;
}

static void head_thread_stop(gateway_server *s)
{
    if (!s->head_thread_running)
        return;
    pthread_mutex_lock(&s->head_mu);
    s->head_stop = 1;
    pthread_cond_signal(&s->head_cv);
    pthread_mutex_unlock(&s->head_mu);
    pthread_join(s->head_thread, NULL);
    pthread_cond_destroy(&s->head_cv);
    pthread_mutex_destroy(&s->head_mu);
    s->head_thread_running = 0;
}

/* ------------------------------------------------------------------------
 * The published policy (with a database)
 * ------------------------------------------------------------------------ */

/* The rule that refuses every push while no published policy is in force. */
#define NO_POLICY_RULE      "no-policy"
#define NO_POLICY_PUBLISHED "no policy has been published: run refgate policy publish"
#define NO_POLICY_READ                                                                             \
    "the published policy could not be read from the database yet (it is unreachable)"

/*
 * The host's config `local` under a policy of one rule that denies every
 * push with `reason` (fail closed): no policy decided, so its records name
 * no digest.
 */
static int refusal_config(config_model **out, const config_model *local, const char *reason,
                          rg_error *err)
{
    json_t *policy = json_pack("{s:s, s:[{s:s, s:s, s:s}]}", "default", "deny", "rules", "name",
                               NO_POLICY_RULE, "effect", "deny", "reason", reason);
    int rc;

    if (policy == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    rc = config_with_policy(out, local, policy, "the refusal policy", 0, err);
    if (rc == 0)
        (*out)->policy_digest[0] = '\0';
    json_decref(policy);
    return rc;
}

/* `local` under the policy in force, or the refusal while there is none. */
static int enforced_config(config_model **out, const gateway_server *s, const config_model *local,
                           rg_error *err)
{
    char label[64];

    if (s->policy == NULL)
        return refusal_config(out, local, s->refusal, err);
    snprintf(label, sizeof(label), "published policy v%lld", s->policy_version);
    return config_with_policy(out, local, s->policy, label, s->policy_version, err);
}

/* Make `snap` the snapshot new requests begin under. */
static void install(gateway_server *s, gateway_snapshot *snap)
{
    gateway_snapshot *old;

    pthread_mutex_lock(&s->lock);
    old = s->current;
    s->current = snap;
    pthread_mutex_unlock(&s->lock);
    /* Requests that began under the old snapshot keep it until they end. */
    gateway_snapshot_unref(old);
}

/* Still none published: the refusal says so rather than "unreachable". */
static void policy_none(gateway_server *s)
{
    gateway_snapshot *snap = NULL;
    config_model *cfg = NULL;
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];

    if (s->policy != NULL || !strcmp(s->refusal, NO_POLICY_PUBLISHED))
        return;
    s->refusal = NO_POLICY_PUBLISHED;
    if (refusal_config(&cfg, s->local, s->refusal, &e) < 0 ||
        gateway_snapshot_new(&snap, cfg, 1, &e) < 0) {
        rg_log(RG_LOG_ERR, "policy_refusal_failed", "error=%s", rg_log_quote(q, sizeof(q), e.msg));
        return;
    }
    install(s, snap);
    rg_log(RG_LOG_WARNING, "policy_none", "reason=%s",
           rg_log_quote(q, sizeof(q), NO_POLICY_PUBLISHED));
}

/*
 * A new current policy from the follower: merged over the host's config
 * and swapped in as a reload would, after a "policy" audit event, so every
 * decision it makes follows the event that names it. One that does not
 * load on this host changes nothing, and the log says why.
 */
static void policy_arrived(void *arg, long long version, const char *digest, const json_t *policy)
{
    gateway_server *s = arg;
    gateway_snapshot *snap = NULL;
    config_model *cfg = NULL;
    rg_error e = RG_ERROR_INIT;
    char label[64], q[RG_LOG_VALUE_MAX], detail[300];
    json_t *copy = NULL;

    pthread_mutex_lock(&s->policy_mu);
    if (version == 0) {
        policy_none(s);
        goto done;
    }
    snprintf(label, sizeof(label), "published policy v%lld", version);
    if (config_with_policy(&cfg, s->local, policy, label, version, &e) < 0 ||
        gateway_snapshot_new(&snap, cfg, 1, &e) < 0 || (copy = json_deep_copy(policy)) == NULL) {
        if (e.msg[0] == '\0')
            rg_error_set(&e, -ENOMEM, "out of memory");
        rg_log(RG_LOG_ERR, "policy_load_failed", "version=%lld digest=%s kept=%s error=%s", version,
               digest, s->policy ? s->policy_digest : "none", rg_log_quote(q, sizeof(q), e.msg));
        gateway_snapshot_unref(snap);
        goto done;
    }
    if (s->policy != NULL)
        snprintf(detail, sizeof(detail), "version %lld %s (was version %lld %s)", version, digest,
                 s->policy_version, s->policy_digest);
    else
        snprintf(detail, sizeof(detail), "version %lld %s (was none)", version, digest);
    /* The pushes it decides are refused anyway when the log cannot take
     * records, so a failed event (logged) does not keep the old rules. */
    audit_event(s, "policy", detail);
    install(s, snap);
    json_decref(s->policy);
    s->policy = copy;
    s->policy_version = version;
    snprintf(s->policy_digest, sizeof(s->policy_digest), "%s", digest);
    rg_log(RG_LOG_NOTICE, "policy_loaded", "version=%lld digest=%s rules=%zu", version, digest,
           snap->cfg->nrules);
done:
    pthread_mutex_unlock(&s->policy_mu);
}

/*
 * Read the current policy before serving, so a gateway whose database
 * answers enforces it from its first push, then follow it from a thread.
 * A database that does not answer now is not an error: pushes are
 * refused until it does.
 */
static int follow_start(gateway_server *s, rg_error *err)
{
    rg_error e = RG_ERROR_INIT;
    char q[RG_LOG_VALUE_MAX];
    int rc;

    rc = gateway_published_new(&s->published, s->ctx.db, policy_arrived, s, err);
    if (rc < 0)
        return rc;
    if (gateway_published_poll(s->published, &e) < 0)
        rg_log(RG_LOG_WARNING, "policy_unavailable",
               "reason=%s until it is read, pushes are refused", rg_log_quote(q, sizeof(q), e.msg));
    return gateway_published_run(s->published, err);
}

/* ------------------------------------------------------------------------
 * Starting and stopping
 * ------------------------------------------------------------------------ */

/* What a scrape of /metrics copies in: connections and the spool. */
static void admin_state(void *arg, gateway_metrics_state *out)
{
    gateway_server *s = arg;
    gateway_conns_stats st;

    gateway_conns_get_stats(&st, s->conns);
    out->connections_open = st.open;
    out->connections_waiting = st.waiting;
    out->cut_header_deadline = st.cut_deadline;
    out->cut_unauthenticated = st.cut_evicted;
    out->refused_per_token = st.per_token_refused;
    out->spool_bytes = gateway_spool_used(s->spool);
    out->spool_cap = s->ctx.cfg->limits.spool_bytes;
}

/* Every audit append is timed, whoever makes it. */
static void audit_timed(void *arg, double seconds, int ok)
{
    gateway_metrics_audit_append(arg, seconds, ok);
}

/* The approvals store removed kept packs: their bytes are free again. */
static void give_back(void *arg, uint64_t bytes)
{
    gateway_spool_give_back(arg, bytes);
}

int gateway_server_start(gateway_server **out, const config_model *cfg, rg_error *err)
{
    gateway_server *s;
    char path[4200], line[160], detail[200];
    size_t recovered = 0;
    int rc;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    s->ctx.cfg = cfg;
    s->ctx.stopping = &s->stopping;
    s->listen_fd = -1;
    s->dir_lock_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->policy_mu, NULL);
    s->local = cfg;
    s->refusal = NO_POLICY_READ;
    /* Before any thread: libcurl's global state is set up once, here. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        rc = rg_error_set(err, -EIO, "cannot initialise libcurl");
        goto done;
    }
    s->curl_ready = 1;
    rc = gateway_metrics_new(&s->ctx.metrics, err);
    if (rc < 0)
        goto done;
    rc = db_gateway_id_new(s->ctx.gateway_id, err);
    if (rc < 0)
        goto done;
    if (cfg->state.postgres != NULL) {
        char q[sizeof(err->msg) * 2];
        int reachable;

        rc = db_pool_open(&s->ctx.db, &cfg->state, err);
        if (rc == 0)
            rc = db_startup_check(s->ctx.db, &reachable, err);
        if (rc < 0)
            goto done;
        if (!reachable)
            rg_log(RG_LOG_WARNING, "db_unreachable",
                   "reason=%s until the database answers, pushes are refused",
                   rg_log_quote(q, sizeof(q), err->msg));
    }
    snprintf(s->ctx.tmp_dir, sizeof(s->ctx.tmp_dir), "%s/tmp", cfg->state_dir);
    rc = rg_fs_mkdir_p(s->ctx.tmp_dir, 0700, err);
    if (rc < 0)
        goto done;
    rc = tokens_key_load(&s->ctx.key, cfg->state_dir, err);
    if (rc == 0)
        rc = tokens_store_open(&s->ctx.tokens, cfg->state_dir, s->ctx.db, err);
    if (rc < 0)
        goto done;
    snprintf(path, sizeof(path), "%s/token.key", cfg->state_dir);
    if (access(path, F_OK) == 0)
        rg_log(RG_LOG_WARNING, "token_key_obsolete",
               "path=%s reason=\"run tokens are Ed25519 now: rg1 tokens no longer verify and "
               "this HMAC key is unused; delete it\"",
               path);
    /* Every gateway on the store verifies this one's tokens from here on.
     * A database away now only delays it: each mint publishes first. */
    rc = tokens_key_publish(s->ctx.key, s->ctx.tokens, s->ctx.gateway_id, err);
    if (rc == RG_E_STATE) {
        char q[sizeof(err->msg) * 2];
        rg_log(RG_LOG_WARNING, "token_key_unpublished", "reason=%s",
               rg_log_quote(q, sizeof(q), err->msg));
        rc = 0;
    }
    if (rc < 0)
        goto done;
    /* The providers are made now, so a bad key or token file refuses
     * startup rather than a push. */
    rc = gateway_snapshot_new(&s->base, cfg, 0, err);
    if (rc < 0)
        goto done;
    s->ctx.read_creds = s->base->read_creds;
    s->ctx.write_creds = s->base->write_creds;
    if (s->ctx.db != NULL) {
        config_model *refusal = NULL;

        /* On a database only a published policy decides: none until read. */
        rc = refusal_config(&refusal, cfg, s->refusal, err);
        if (rc == 0)
            rc = gateway_snapshot_new(&s->current, refusal, 1, err);
        if (rc < 0)
            goto done;
    } else {
        s->current = gateway_snapshot_ref(s->base);
    }
    raise_fd_limit(&cfg->limits);
    rc = gateway_conns_new(&s->conns, &cfg->limits, err);
    if (rc < 0)
        goto done;
    if (gateway_spool_new(&s->spool, cfg->limits.spool_bytes) < 0) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    if (s->ctx.db != NULL) {
        rc = lock_state_dir(&s->dir_lock_fd, cfg->state_dir, err);
        if (rc == 0)
            rc = audit_pg_open(&s->ctx.audit, s->ctx.db, s->ctx.gateway_id, err);
    } else {
        snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
        rc = audit_open(&s->ctx.audit, path, err);
    }
    if (rc < 0)
        goto done;
    audit_on_append(s->ctx.audit, audit_timed, s->ctx.metrics);
    rc = gateway_outbox_new(&s->ctx.outbox, s->ctx.audit, GATEWAY_OUTBOX_MAX,
                            GATEWAY_OUTBOX_MAX_BYTES, err);
    if (rc < 0)
        goto done;
    /* Before serving, and before the start event: a push the last gateway
     * forwarded without learning its outcome gets one ("unknown"), so
     * every start event closes what came before it. In the database, the
     * lease says which gateways are dead, and its thread sweeps again. */
    if (s->ctx.db != NULL)
        rc = gateway_lease_start(&s->lease, s->ctx.db, s->ctx.gateway_id, s->ctx.audit,
                                 s->ctx.outbox, &recovered, err);
    else
        rc = audit_complete_pending(s->ctx.audit, &recovered, err);
    if (rc < 0)
        goto done;
    if (recovered > 0)
        rg_log(RG_LOG_WARNING, "audit_recovered", "completed=%zu", recovered);
    if (s->ctx.db != NULL) {
        /* Shared with every gateway on the database; kept packs live there. */
        rc = approvals_pg_open(&s->ctx.approvals, s->ctx.db, cfg->approvals.expire, err);
        if (rc < 0)
            goto done;
    } else {
        /* Behind the audit log's (or state_dir's) lock, as the only writer of the approvals. */
        snprintf(path, sizeof(path), "%s/approvals", cfg->state_dir);
        rc = approvals_file_open(&s->ctx.approvals, path, cfg->approvals.expire, err);
        if (rc < 0)
            goto done;
        /* Kept packs count against the spool budget for as long as they are kept. */
        gateway_spool_hold(s->spool, approvals_pack_total(s->ctx.approvals));
        approvals_on_release(s->ctx.approvals, give_back, s->spool);
    }
    approvals_expire(s->ctx.approvals, NULL, (int64_t)time(NULL), NULL);
    /* The audit log's lock (state_dir's, with the database) makes this the
     * only gateway on state_dir, so whatever tmp/ holds is left from a
     * crash: quarantines, half-made mirror clones. Spools are O_TMPFILE
     * and never have names. */
    clear_tmp(s->ctx.tmp_dir);
    rc = gateway_listen_bind(&s->listen_fd, s->url, sizeof(s->url), "listen", cfg->listen_host,
                             cfg->listen_port, err);
    if (rc < 0)
        goto done;
    snprintf(detail, sizeof(detail), "%s%s%spid %ld, listening on %s", s->ctx.db ? "gateway " : "",
             s->ctx.db ? s->ctx.gateway_id : "", s->ctx.db ? ", " : "", (long)getpid(), s->url);
    rc = audit_event(s, "start", detail);
    /* A database that cannot be reached at start is no reason not to
     * serve: pushes are refused until it answers (audit_ready). */
    if (rc < 0 && s->ctx.db == NULL) {
        rg_error_set(err, rc, "cannot append the start event to the audit log");
        goto done;
    }
    rc = 0;
    s->audit_started = 1;
    log_audit_head(s);
    /* After the start event, so the policy event that names it follows. */
    if (s->ctx.db != NULL && (rc = follow_start(s, err)) < 0)
        goto done;
    rc = head_thread_start(s, err);
    if (rc < 0)
        goto done;
    /* After the start event, so every token-mint event follows it. */
    if (cfg->control.socket != NULL) {
        rc = gateway_control_start(&s->control, &s->ctx, s->url, err);
        if (rc < 0)
            goto done;
    } else {
        rg_log(RG_LOG_WARNING, "control_disabled",
               "reason=\"<state_dir>/control.sock is too long for a unix socket; set "
               "control.socket\"");
    }

    /*
     * A thread per connection (a push blocks in its handler on upstream and
     * index-pack) polled with poll(2): select(2) would refuse every
     * descriptor past FD_SETSIZE (1024), so a thousand idle sockets would
     * lock every pusher out. The connection timeout is the idle time
     * allowed between bytes; the header deadline is gateway_conns's.
     */
    s->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ITC,
        0, NULL, NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
        MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION, connection_event,
        s, MHD_OPTION_CONNECTION_LIMIT, cfg->limits.connections, MHD_OPTION_THREAD_STACK_SIZE,
        CONNECTION_STACK_BYTES, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
        MHD_OPTION_CONNECTION_TIMEOUT, cfg->limits.idle_seconds, MHD_OPTION_END);
    if (s->daemon == NULL) {
        rc = rg_error_set(err, -EIO, "cannot start the HTTP server");
        goto done;
    }
    snprintf(path, sizeof(path), "%s/url", cfg->state_dir);
    snprintf(line, sizeof(line), "%s\n", s->url);
    rc = rg_fs_write_atomic(path, line, strlen(line), 0644, err);
    s->url_written = rc == 0;
    if (rc == 0 && cfg->admin.listen_host != NULL)
        rc = gateway_admin_start(&s->admin, &s->ctx, s->ctx.metrics, admin_state, s, err);
done:
    if (rc < 0) {
        gateway_server_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}

const gateway_ctx *gateway_server_ctx(const gateway_server *s)
{
    return &s->ctx;
}

const char *gateway_server_url(const gateway_server *s)
{
    return s->url;
}

int gateway_server_reload(gateway_server *s, config_model *cfg, rg_error *err)
{
    gateway_snapshot *snap = NULL;
    config_model *merged = NULL;
    char keys[200], q[RG_LOG_VALUE_MAX];
    int rc;

    pthread_mutex_lock(&s->policy_mu);
    /* Revocations, the audit log, the key and spools live there: another
     * directory would be another gateway. */
    if (strcmp(cfg->state_dir, s->ctx.cfg->state_dir) != 0) {
        rc =
            rg_error_set(err, RG_E_CONFIG, "state_dir cannot change without a restart (%s, now %s)",
                         s->ctx.cfg->state_dir, cfg->state_dir);
        config_free(cfg);
    } else if (s->published != NULL) {
        /* On a database the host's file changes, the policy in force stays. */
        rc = enforced_config(&merged, s, cfg, err);
        if (rc == 0)
            rc = gateway_snapshot_new(&snap, merged, 1, err);
        if (rc == 0) {
            config_free(s->local_owned);
            s->local = s->local_owned = cfg;
        } else {
            config_free(cfg);
        }
    } else {
        rc = gateway_snapshot_new(&snap, cfg, 1, err);
    }
    if (rc < 0) {
        pthread_mutex_unlock(&s->policy_mu);
        rg_log(RG_LOG_ERR, "reload_failed", "config=%s error=%s", s->ctx.cfg->path,
               rg_log_quote(q, sizeof(q), err->msg));
        return rc;
    }
    /* What only a restart applies is said, and the rest applies now. */
    gateway_snapshot_restart_keys(keys, sizeof(keys), s->ctx.cfg, snap->cfg);
    if (keys[0])
        rg_log(RG_LOG_WARNING, "reload_needs_restart", "keys=%s", keys);
    /* Said before the swap: once it is in, a new policy may replace it. */
    rg_log(RG_LOG_NOTICE, "reloaded", "config=%s rules=%zu upstreams=%zu", snap->cfg->path,
           snap->cfg->nrules, snap->cfg->nupstreams);
    install(s, snap);
    pthread_mutex_unlock(&s->policy_mu);
    /* A published version this host could not load may load now. */
    gateway_published_recheck(s->published);
    return 0;
}

void gateway_server_stop(gateway_server *s)
{
    unsigned active;
    int fd = -1;

    if (s == NULL)
        return;
    if (s->daemon) {
        /* Held pushes stop waiting and are answered. */
        atomic_store(&s->stopping, 1);
        fd = MHD_quiesce_daemon(s->daemon);
        for (int i = 0; i < DRAIN_SECONDS * 20; i++) {
            pthread_mutex_lock(&s->lock);
            active = s->active;
            pthread_mutex_unlock(&s->lock);
            if (active == 0)
                break;
            usleep(50 * 1000);
        }
        MHD_stop_daemon(s->daemon);
    }
    /* After the drain, during which /healthz says the gateway is stopping. */
    gateway_admin_stop(s->admin);
    /* After the daemon: every connection is closed and untracked by now. */
    gateway_conns_free(s->conns);
    if (fd >= 0)
        close(fd);
    else if (s->listen_fd >= 0 && s->daemon == NULL)
        close(s->listen_fd);
    /* A url file must never point scripts at a gateway that is gone. */
    if (s->url_written) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/url", s->ctx.cfg->state_dir);
        unlink(path);
    }
    head_thread_stop(s);
    /* Before the stop event: a policy event in progress is appended first. */
    gateway_published_free(s->published);
    /* Before the stop event and audit_close: a mint or revoke in progress
     * finishes its record first. */
    gateway_control_stop(s->control);
    /* Every request has ended: nothing forwarded is left without an
     * outcome once the outbox is empty. When it cannot be emptied there is
     * no stop event, which would say so: the file store's next start then
     * completes those decisions, and with the database another gateway
     * does once this one's lease is stopped. */
    if (gateway_outbox_flush(s->ctx.outbox, NULL, NULL, NULL) < 0)
        s->audit_started = 0;
    if (s->audit_started) {
        char detail[96];
        snprintf(detail, sizeof(detail), "%s%s%spid %ld", s->ctx.db ? "gateway " : "",
                 s->ctx.db ? s->ctx.gateway_id : "", s->ctx.db ? ", " : "", (long)getpid());
        audit_event(s, "stop", detail);
        log_audit_head(s);
    }
    /* After the stop event: from now on what this gateway forwarded all
     * has its outcome, so it may be taken for dead. */
    gateway_lease_stop(s->lease);
    approvals_close(s->ctx.approvals);
    /* After the control thread and the approvals: a denial gives kept bytes back. */
    gateway_spool_free(s->spool);
    /* Before audit_close: it logs what it could not retry. */
    gateway_outbox_free(s->ctx.outbox);
    audit_close(s->ctx.audit);
    gateway_metrics_free(s->ctx.metrics);
    tokens_store_free(s->ctx.tokens);
    tokens_key_free(s->ctx.key);
    /* After every store that holds its connections. */
    db_pool_close(s->ctx.db);
    if (s->dir_lock_fd >= 0)
        close(s->dir_lock_fd);
    /* Every request has ended: these are the last references. */
    gateway_snapshot_unref(s->current);
    gateway_snapshot_unref(s->base);
    json_decref(s->policy);
    config_free(s->local_owned);
    pthread_mutex_destroy(&s->policy_mu);
    if (s->curl_ready)
        curl_global_cleanup();
    pthread_mutex_destroy(&s->lock);
    free(s);
}
