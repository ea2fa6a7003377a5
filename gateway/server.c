/*
 * The libmicrohttpd server: routing, validation and the request lifecycle.
 * Per-request state lives in *con_cls and is freed in the completed
 * callback, which also aborts a push whose client went away.
 */
#include "gateway/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gateway/auth.h"
#include "gateway/context.h"
#include "gateway/receive.h"
#include "gateway/route.h"
#include "gateway/upstream.h"
#include "git/advert.h"
#include "util/fs.h"

/* What a client may send beyond max_body_bytes before the connection is
 * cut instead of answered, so an endless body cannot hold a thread. */
#define DISCARD_AFTER_ERROR_MAX (64u * 1024 * 1024)

/* How long shutdown waits for in-flight pushes. */
#define DRAIN_SECONDS 120

struct gateway_server {
    gateway_ctx ctx;
    struct MHD_Daemon *daemon;
    int listen_fd;
    char url[128];
    pthread_mutex_t lock;
    unsigned active; /* requests with a body in flight */
};

typedef struct request {
    gateway_receive *push;
    uint64_t discarded;
    int failed;
    int counted;
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
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Basic realm=\"refgate\"");
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
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
                  (socklen_t)outsz);
}

static enum MHD_Result advertise(struct MHD_Connection *c, const upstream_target *t)
{
    rg_buf raw = RG_BUF_INIT(UPSTREAM_ADVERT_MAX), out = RG_BUF_INIT(UPSTREAM_ADVERT_MAX + 4096);
    rg_error e = RG_ERROR_INIT;
    enum MHD_Result ret;

    if (upstream_advertise(&raw, t, &e) < 0 ||
        git_advert_filter(&out, raw.data, raw.len, dropped_caps, "git-receive-pack", &e) < 0) {
        fprintf(stderr, "refgate: advertisement for %s/%s failed: %s\n", t->up->host,
                t->repo_path, e.msg);
        ret = respond_text(c, 502, "the upstream repository could not be read");
    } else {
        ret = respond(c, 200, "application/x-git-receive-pack-advertisement", out.data, out.len);
    }
    rg_buf_free(&raw);
    rg_buf_free(&out);
    return ret;
}

/* The first call for a request: everything is checked before any work. */
static enum MHD_Result begin(gateway_server *s, struct MHD_Connection *c, const char *url,
                             const char *method, void **con_cls)
{
    const char *service, *ctype, *cenc, *clen;
    gateway_receive_info info;
    upstream_target target;
    const policy_upstream *up;
    gateway_route route;
    gateway_auth auth;
    rg_error e = RG_ERROR_INIT;
    char *repo_dir = NULL, remote[64];
    request *req = NULL;
    enum MHD_Result ret;
    int rc;

    service = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "service");
    rc = gateway_route_parse(&route, method, url, service, &e);
    if (rc < 0)
        return respond_text(c, rc == -EPERM ? 405 : rc == -EINVAL ? 400 : 404, e.msg);
    up = policy_config_upstream(s->ctx.cfg, route.host);
    if (up == NULL)
        return respond_text(c, 404, "unknown upstream host in the path");
    if (route.service == GATEWAY_UPLOAD_PACK)
        return respond_text(c, 403, "fetching through refgate is not supported yet: fetch from "
                                    "the upstream directly");

    gateway_auth_check(&auth, &s->ctx,
                       MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                       route.repo);
    if (auth.status) {
        ret = respond_text(c, auth.status, auth.message);
        goto done;
    }
    if (gateway_route_local_dir(&repo_dir, up, &route, &e) < 0) {
        ret = respond_text(c, 404, e.msg);
        goto done;
    }
    target = (upstream_target){.up = up, .repo_path = route.path, .repo_dir = repo_dir};
    if (route.advertise) {
        ret = advertise(c, &target);
        goto done;
    }

    ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ctype == NULL || strcasecmp(ctype, "application/x-git-receive-pack-request") != 0) {
        ret = respond_text(c, 415, "expected Content-Type application/x-git-receive-pack-request");
        goto done;
    }
    cenc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (cenc && strcasecmp(cenc, "gzip") != 0 && strcasecmp(cenc, "identity") != 0) {
        ret = respond_text(c, 415, "unsupported Content-Encoding (gzip or identity)");
        goto done;
    }
    clen = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (clen && strtoull(clen, NULL, 10) > s->ctx.cfg->max_body_bytes) {
        ret = respond_text(c, 413, "push body larger than the configured max_body_bytes");
        goto done;
    }

    client_address(remote, sizeof(remote), c);
    info = (gateway_receive_info){
        .ctx = &s->ctx,
        .route = &route,
        .target = &target,
        .claims = auth.claims,
        .token_hash = auth.token_hash,
        .remote = remote,
        .gzip = cenc && strcasecmp(cenc, "gzip") == 0,
    };
    req = calloc(1, sizeof(*req));
    if (req == NULL || gateway_receive_new(&req->push, &info, &e) < 0) {
        free(req);
        ret = respond_text(c, 500, "out of memory");
        goto done;
    }
    pthread_mutex_lock(&s->lock);
    s->active++;
    req->counted = 1;
    pthread_mutex_unlock(&s->lock);
    *con_cls = req;
    ret = MHD_YES;
done:
    tokens_claims_free(auth.claims);
    free(repo_dir);
    return ret;
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
    if (*upload_data_size > 0) {
        /* After a failure the rest is read and dropped, up to a bound, so
         * the client still gets its answer; past the bound it is cut off. */
        if (req->failed) {
            req->discarded += *upload_data_size;
            *upload_data_size = 0;
            return req->discarded > DISCARD_AFTER_ERROR_MAX ? MHD_NO : MHD_YES;
        }
        if (gateway_receive_body(req->push, upload_data, *upload_data_size) < 0)
            req->failed = 1;
        *upload_data_size = 0;
        return MHD_YES;
    }
    gateway_receive_end(req->push, &response, &status, &ctype);
    ret = respond(c, status, ctype, response.data ? response.data : "", response.len);
    rg_buf_free(&response);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    gateway_server *s = cls;
    request *req = *con_cls;

    (void)c;
    (void)toe;
    if (req == NULL)
        return;
    /* Freeing kills an upstream receive-pack still waiting for a pack that
     * will never come, so a broken push updates nothing. */
    gateway_receive_free(req->push);
    if (req->counted) {
        pthread_mutex_lock(&s->lock);
        s->active--;
        pthread_mutex_unlock(&s->lock);
    }
    free(req);
    *con_cls = NULL;
}

/* --------------------------------------------------------------- server */

static int bind_listen(gateway_server *s, rg_error *err)
{
    const policy_config *cfg = s->ctx.cfg;
    struct addrinfo hints = {0}, *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char port[16], host[INET6_ADDRSTRLEN];
    int fd = -1, one = 1, rc;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%u", cfg->listen_port);
    rc = getaddrinfo(cfg->listen_host, port, &hints, &ai);
    if (rc != 0)
        return rg_error_set(err, -EINVAL, "listen %s: %s", cfg->listen_host, gai_strerror(rc));
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        rc = rg_error_set(err, -errno, "listen %s:%u: %s", cfg->listen_host, cfg->listen_port,
                          strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return rc;
    }
    freeaddrinfo(ai);
    if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
        snprintf(s->url, sizeof(s->url), "http://[%s]:%u", host,
                 ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
        snprintf(s->url, sizeof(s->url), "http://%s:%u", host,
                 ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
    s->listen_fd = fd;
    return 0;
}

int gateway_server_start(gateway_server **out, const policy_config *cfg, rg_error *err)
{
    gateway_server *s;
    char path[4200], line[160];
    int rc;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    s->ctx.cfg = cfg;
    s->listen_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    snprintf(s->ctx.tmp_dir, sizeof(s->ctx.tmp_dir), "%s/tmp", cfg->state_dir);
    rc = rg_fs_mkdir_p(s->ctx.tmp_dir, 0700, err);
    if (rc < 0)
        goto done;
    rc = tokens_key_load(&s->ctx.key, cfg->state_dir, err);
    if (rc < 0)
        goto done;
    snprintf(path, sizeof(path), "%s/audit.jsonl", cfg->state_dir);
    rc = audit_open(&s->ctx.audit, path, err);
    if (rc < 0)
        goto done;
    rc = bind_listen(s, err);
    if (rc < 0)
        goto done;
    s->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, NULL,
        NULL, handle, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd, MHD_OPTION_NOTIFY_COMPLETED,
        completed, s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
    if (s->daemon == NULL) {
        rc = rg_error_set(err, -EIO, "cannot start the HTTP server");
        goto done;
    }
    snprintf(path, sizeof(path), "%s/url", cfg->state_dir);
    snprintf(line, sizeof(line), "%s\n", s->url);
    rc = rg_fs_write_atomic(path, line, strlen(line), 0644, err);
done:
    if (rc < 0) {
        gateway_server_stop(s);
        return rc;
    }
    *out = s;
    return 0;
}

const char *gateway_server_url(const gateway_server *s)
{
    return s->url;
}

void gateway_server_stop(gateway_server *s)
{
    unsigned active;
    int fd = -1;

    if (s == NULL)
        return;
    if (s->daemon) {
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
    if (fd >= 0)
        close(fd);
    else if (s->listen_fd >= 0 && s->daemon == NULL)
        close(s->listen_fd);
    audit_close(s->ctx.audit);
    tokens_key_free(s->ctx.key);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
