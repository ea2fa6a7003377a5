/* Answers and listeners, the same for every listener; see http.h. */
#include "gateway/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/fs.h"

struct gateway_http_listener {
    gateway_http_options o; /* for gateway_http_serve; what, host, url_file cleared */
    struct MHD_Daemon *daemon;
    int fd;          /* ours until the daemon takes it */
    int quiesced_fd; /* given back by MHD_quiesce_daemon: ours again */
    char url[128];
    char url_file[4200]; /* "": none */
    int url_written;
};

/* ------------------------------------------------------------- answers */

/* The headers every answer carries, then the caller's; queue and let go. */
static enum MHD_Result queue(struct MHD_Connection *c, struct MHD_Response *resp, unsigned status,
                             const char *ctype, const gateway_http_header *headers, size_t nheaders)
{
    enum MHD_Result ret;

    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, GATEWAY_HTTP_CACHE_CONTROL);
    MHD_add_response_header(resp, "X-Content-Type-Options", GATEWAY_HTTP_NOSNIFF);
    for (size_t i = 0; i < nheaders; i++)
        MHD_add_response_header(resp, headers[i].name, headers[i].value);
    ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result gateway_http_respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                                     const void *body, size_t len,
                                     const gateway_http_header *headers, size_t nheaders)
{
    struct MHD_Response *resp;

    resp = MHD_create_response_from_buffer(len, (void *)(len ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (resp == NULL)
        return MHD_NO;
    return queue(c, resp, status, ctype, headers, nheaders);
}

enum MHD_Result gateway_http_stream(struct MHD_Connection *c, unsigned status, const char *ctype,
                                    size_t block, MHD_ContentReaderCallback reader, void *cls,
                                    MHD_ContentReaderFreeCallback free_cls,
                                    const gateway_http_header *headers, size_t nheaders)
{
    struct MHD_Response *resp;

    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block, reader, cls, free_cls);
    if (resp == NULL) {
        if (free_cls != NULL)
            free_cls(cls);
        return MHD_NO;
    }
    return queue(c, resp, status, ctype, headers, nheaders);
}

/* ------------------------------------------------------------ listeners */

/*
 * Bind and listen on host:port; *fd_out is the caller's. url gets
 * "http://HOST:PORT" ("http://[V6]:PORT"). `what` names the address in errors.
 */
static int bind_listen(int *fd_out, char *url, size_t urlsz, const char *what, const char *host,
                       unsigned port, rg_error *err)
{
    struct addrinfo hints = {0}, *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char portstr[16], name[INET6_ADDRSTRLEN];
    int fd = -1, one = 1, rc;

    *fd_out = -1;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%u", port);
    rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0)
        return rg_error_set(err, -EINVAL, "%s %s: %s", what, host, gai_strerror(rc));
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, GATEWAY_HTTP_BACKLOG) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        rc = rg_error_set(err, -errno, "%s %s:%u: %s", what, host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return rc;
    }
    freeaddrinfo(ai);
    if (ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, name, sizeof(name));
        snprintf(url, urlsz, "http://[%s]:%u", name,
                 ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, name, sizeof(name));
        snprintf(url, urlsz, "http://%s:%u", name, ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
    *fd_out = fd;
    return 0;
}

int gateway_http_listen(gateway_http_listener **out, const gateway_http_options *o, rg_error *err)
{
    gateway_http_listener *l;
    int rc;

    *out = NULL;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    l->o = *o;
    /* Used only here: the caller's strings need not outlive the call. */
    l->o.what = l->o.host = l->o.url_file = NULL;
    l->quiesced_fd = -1;
    if (o->url_file != NULL)
        snprintf(l->url_file, sizeof(l->url_file), "%s", o->url_file);
    rc = bind_listen(&l->fd, l->url, sizeof(l->url), o->what, o->host, o->port, err);
    if (rc < 0) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

const char *gateway_http_url(const gateway_http_listener *l)
{
    return l->url;
}

int gateway_http_serve(gateway_http_listener *l, rg_error *err)
{
    const gateway_http_options *o = &l->o;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    char line[160];
    int rc;

    /*
     * Polled with poll(2): select(2) would refuse every descriptor past
     * FD_SETSIZE (1024), so a thousand idle sockets would lock everyone
     * out. The connection timeout is the idle time allowed between bytes.
     */
    if (o->thread_per_connection)
        flags |= MHD_USE_THREAD_PER_CONNECTION;
    l->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, o->handle, o->arg, MHD_OPTION_LISTEN_SOCKET, l->fd,
        MHD_OPTION_NOTIFY_COMPLETED, o->completed, o->arg, MHD_OPTION_NOTIFY_CONNECTION, o->notify,
        o->arg, MHD_OPTION_CONNECTION_LIMIT, o->connections, MHD_OPTION_THREAD_STACK_SIZE,
        o->stack_bytes, MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->memory_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, o->idle_seconds, MHD_OPTION_END);
    if (l->daemon == NULL)
        return rg_error_set(err, -EIO, "cannot start the HTTP server on %s", l->url);
    /* The daemon closes the socket when it stops. */
    l->fd = -1;
    if (l->url_file[0] == '\0')
        return 0;
    snprintf(line, sizeof(line), "%s\n", l->url);
    rc = rg_fs_write_atomic(l->url_file, line, strlen(line), 0644, err);
    l->url_written = rc == 0;
    return rc;
}

int gateway_http_serving(const gateway_http_listener *l)
{
    return l != NULL && l->daemon != NULL;
}

void gateway_http_quiesce(gateway_http_listener *l)
{
    MHD_socket fd;

    if (l == NULL || l->daemon == NULL || l->quiesced_fd >= 0)
        return;
    fd = MHD_quiesce_daemon(l->daemon);
    /* The socket is ours again: the daemon will not close it. */
    if (fd != MHD_INVALID_SOCKET)
        l->quiesced_fd = fd;
}

void gateway_http_stop(gateway_http_listener *l)
{
    if (l == NULL)
        return;
    /* A URL file must never point anyone at a listener that is gone. */
    if (l->url_written)
        unlink(l->url_file);
    if (l->daemon != NULL)
        MHD_stop_daemon(l->daemon);
    if (l->quiesced_fd >= 0)
        close(l->quiesced_fd);
    if (l->fd >= 0)
        close(l->fd);
    free(l);
}
