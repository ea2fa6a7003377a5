/*
 * Binding a listening TCP socket for a configured numeric host:port (the
 * push listener's and the admin listener's), and the base URL it is
 * reached at, with the port the kernel picked when the port is 0.
 */
#ifndef RG_GATEWAY_HTTP_H
#define RG_GATEWAY_HTTP_H

#include <stddef.h>

#include "util/error.h"

/* Accepts queued by the kernel while the accept thread catches up. */
#define GATEWAY_HTTP_BACKLOG 1024

/*
 * Bind and listen (SO_REUSEADDR, close-on-exec) on host:port; *fd_out is
 * the caller's. url gets "http://HOST:PORT" ("http://[V6]:PORT"). `what`
 * names the address in errors ("listen", "admin.listen").
 */
int gateway_http_bind(int *fd_out, char *url, size_t urlsz, const char *what, const char *host,
                      unsigned port, rg_error *err);

#endif
