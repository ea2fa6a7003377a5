/*
 * Request routing: which git service a URL asks for and which repository it
 * names. Paths are `/<host>/<path>[.git]/info/refs` (with `?service=`) and
 * `/<host>/<path>[.git]/git-receive-pack`, where <host> is an upstream's
 * `host` key. Validation is strict because the path becomes a directory on
 * disk: segments are plain names (no `.`/`..`, no leading dot, no control
 * characters), and a local repository must resolve inside its upstream's
 * root even through symlinks.
 */
#ifndef RG_GATEWAY_ROUTE_H
#define RG_GATEWAY_ROUTE_H

#include "config/config.h"
#include "util/error.h"

typedef enum gateway_service {
    GATEWAY_RECEIVE_PACK,
    GATEWAY_UPLOAD_PACK,
} gateway_service;

typedef struct gateway_route {
    gateway_service service;
    int advertise;  /* 1: GET info/refs; 0: POST to the service */
    char host[128]; /* upstream host key */
    char path[512]; /* repository path under the host, without .git */
    char repo[640]; /* "<host>/<path>": what rules and tokens name */
} gateway_route;

/* What a Git LFS API call (`.../info/lfs/...`) is answered: see gateway_route_parse. */
#define GATEWAY_ROUTE_LFS_REFUSAL                                                                  \
    "refgate: Git LFS is not supported through the gateway (objects are not forwarded); push "     \
    "LFS objects outside the sandbox"

/*
 * Parse `method` and the decoded URL path `url` (plus the `service` query
 * argument, NULL when absent). Returns 0, or -ENOENT for a URL that is no
 * git endpoint, -EINVAL for an invalid repository path, -EPERM for a method
 * the endpoint does not take, -EOPNOTSUPP for a Git LFS API call (any
 * method, any path with an `/info/lfs/` segment: GATEWAY_ROUTE_LFS_REFUSAL,
 * to answer in LFS's own error format); each with a message fit for the
 * client.
 */
int gateway_route_parse(gateway_route *out, const char *method, const char *url,
                        const char *service, rg_error *err);

/*
 * The bare repository directory for a route on a local upstream:
 * `<root>/<path>.git` (or `<root>/<path>` when that is a repository and the
 * first is not), resolved and checked to lie inside the root. Returns
 * -ENOENT with a message when there is no such repository. *out is freed by
 * the caller.
 */
int gateway_route_local_dir(char **out, const config_upstream *up, const gateway_route *route,
                            rg_error *err);

#endif
