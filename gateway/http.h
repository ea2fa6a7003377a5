/*
 * The HTTP edge every listener of the gateway process shares: the push
 * listener (server.c), the admin listener (admin.c) and the review console
 * (console/console.c). One way to answer a request, whether its body is a
 * buffer or a stream read as the client takes it, so every answer carries
 * the same headers; and one way to set up a listener: bind a configured
 * numeric host:port, serve it with libmicrohttpd, and keep its base URL in
 * a file for as long as it serves.
 */
#ifndef RG_GATEWAY_HTTP_H
#define RG_GATEWAY_HTTP_H

#include <microhttpd.h>
#include <stddef.h>

#include "util/error.h"

/* Accepts queued by the kernel while the accept thread catches up. */
#define GATEWAY_HTTP_BACKLOG 1024

/* What every answer says of itself, whichever listener gives it. */
#define GATEWAY_HTTP_CACHE_CONTROL "no-store"
#define GATEWAY_HTTP_NOSNIFF       "nosniff"

/* A header of one answer, beyond those every answer carries. */
typedef struct gateway_http_header {
    const char *name;
    const char *value;
} gateway_http_header;

/*
 * Answer `c` with `status` and the `len` bytes of `body` (copied). Every
 * answer carries Content-Type `ctype`, Cache-Control: no-store (each is
 * made for one request: refs, metrics, a reviewer's page) and
 * X-Content-Type-Options: nosniff, then the `nheaders` of `headers` (NULL
 * when 0). MHD_NO when the answer cannot be made: the connection is closed.
 */
enum MHD_Result gateway_http_respond(struct MHD_Connection *c, unsigned status, const char *ctype,
                                     const void *body, size_t len,
                                     const gateway_http_header *headers, size_t nheaders);

/*
 * As gateway_http_respond, with a body of unknown length that `reader`
 * produces as the client takes it, up to `block` bytes a call. `free_cls`
 * (may be NULL) is called with `cls` once the answer is done with it, and
 * at once when the answer cannot be made.
 */
enum MHD_Result gateway_http_stream(struct MHD_Connection *c, unsigned status, const char *ctype,
                                    size_t block, MHD_ContentReaderCallback reader, void *cls,
                                    MHD_ContentReaderFreeCallback free_cls,
                                    const gateway_http_header *headers, size_t nheaders);

typedef struct gateway_http_listener gateway_http_listener;

/* How a listener is bound and served; strings are copied or used at once. */
typedef struct gateway_http_options {
    const char *what; /* the config key of the address, named in errors ("admin.listen") */
    const char *host; /* numeric */
    unsigned port;    /* 0: the kernel picks one, and the URL names it */
    /* Written with the base URL once serving, removed when stopped; NULL: none. */
    const char *url_file;
    /* 1: a thread per connection, so a handler may block (on upstream, on
     * a held push) without stalling others; 0: one polling thread for all,
     * for answers computed in microseconds. */
    int thread_per_connection;
    unsigned connections;  /* open at once, at most */
    unsigned idle_seconds; /* between bytes, before a connection is cut */
    size_t memory_limit;   /* per connection: its headers and buffers */
    size_t stack_bytes;    /* per connection thread; 0: the default */
    MHD_AccessHandlerCallback handle;
    MHD_RequestCompletedCallback completed; /* NULL: none */
    MHD_NotifyConnectionCallback notify;    /* accepted and closed connections; NULL: none */
    void *arg;                              /* the closure of all three */
} gateway_http_options;

#define GATEWAY_HTTP_OPTIONS_INIT                                                                  \
    {                                                                                              \
        NULL, NULL, 0, NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL                                 \
    }

/*
 * Bind and listen on o->host:o->port (SO_REUSEADDR, close-on-exec), so the
 * URL is known before anything is served; nothing is accepted until
 * gateway_http_serve. The listener is the caller's (gateway_http_stop).
 */
int gateway_http_listen(gateway_http_listener **out, const gateway_http_options *o, rg_error *err);

/* The base URL: "http://HOST:PORT" ("http://[V6]:PORT"), the port the bound one. */
const char *gateway_http_url(const gateway_http_listener *l);

/* Start serving with the options given to gateway_http_listen, then write the URL file. */
int gateway_http_serve(gateway_http_listener *l, rg_error *err);

/* Whether gateway_http_serve started serving (quiesced or not). */
int gateway_http_serving(const gateway_http_listener *l);

/* Stop accepting connections; those open go on until they end. */
void gateway_http_quiesce(gateway_http_listener *l);

/*
 * Remove the URL file, stop serving (the connections' threads are joined),
 * close the socket, and free. NULL is ignored.
 */
void gateway_http_stop(gateway_http_listener *l);

#endif
