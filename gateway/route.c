/* Request routing and repository path validation; see route.h. */
#include "gateway/route.h"
#include "util/text.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SEGMENTS 16

static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);

    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

int gateway_route_parse(gateway_route *out, const char *method, const char *url,
                        const char *service, rg_error *err)
{
    const char *p, *slash, *tail;
    size_t len, pathlen, nseg = 0;
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");

    memset(out, 0, sizeof(*out));
    if (url[0] != '/')
        return rg_error_set(err, -ENOENT, "not a git endpoint");
    len = strlen(url);
    /* A run's URL rewrite sends git-lfs's API (objects/batch, locks) here
     * too; a 404 would read as a missing repository, so say what it is. */
    if (strstr(url, "/info/lfs/") != NULL || ends_with(url, len, "/info/lfs"))
        return rg_error_set(err, -EOPNOTSUPP, "%s", GATEWAY_ROUTE_LFS_REFUSAL);
    if (ends_with(url, len, "/info/refs")) {
        tail = url + len - strlen("/info/refs");
        out->advertise = 1;
        if (service == NULL)
            return rg_error_set(err, -ENOENT,
                                "dumb HTTP is not supported: use the smart protocol (?service=)");
        if (!strcmp(service, "git-receive-pack"))
            out->service = GATEWAY_RECEIVE_PACK;
        else if (!strcmp(service, "git-upload-pack"))
            out->service = GATEWAY_UPLOAD_PACK;
        else
            return rg_error_set(err, -ENOENT, "unknown service");
        if (!get)
            return rg_error_set(err, -EPERM, "info/refs takes GET");
    } else if (ends_with(url, len, "/git-receive-pack")) {
        tail = url + len - strlen("/git-receive-pack");
        out->service = GATEWAY_RECEIVE_PACK;
        if (!post)
            return rg_error_set(err, -EPERM, "git-receive-pack takes POST");
    } else if (ends_with(url, len, "/git-upload-pack")) {
        tail = url + len - strlen("/git-upload-pack");
        out->service = GATEWAY_UPLOAD_PACK;
        if (!post)
            return rg_error_set(err, -EPERM, "git-upload-pack takes POST");
    } else {
        return rg_error_set(err, -ENOENT, "not a git endpoint");
    }

    /* url[1..tail) is "<host>/<path>[.git]". */
    p = url + 1;
    slash = tail > p ? memchr(p, '/', (size_t)(tail - p)) : NULL; /* "/info/refs" alone */
    if (slash == NULL || slash == p || (size_t)(slash - p) >= sizeof(out->host))
        return rg_error_set(err, -EINVAL, "invalid repository path: expected /<host>/<repo>");
    memcpy(out->host, p, (size_t)(slash - p));
    if (!rg_name_segment_ok(out->host, strlen(out->host)))
        return rg_error_set(err, -EINVAL, "invalid upstream host in path");
    p = slash + 1;
    pathlen = (size_t)(tail - p);
    if (ends_with(p, pathlen, ".git"))
        pathlen -= 4;
    if (pathlen == 0 || pathlen >= sizeof(out->path))
        return rg_error_set(err, -EINVAL, "invalid repository path");
    memcpy(out->path, p, pathlen);
    for (p = out->path;; p = slash + 1) {
        slash = strchr(p, '/');
        len = slash ? (size_t)(slash - p) : strlen(p);
        if (!rg_name_segment_ok(p, len) || ++nseg > MAX_SEGMENTS)
            return rg_error_set(err, -EINVAL, "invalid repository path");
        if (slash == NULL)
            break;
    }
    snprintf(out->repo, sizeof(out->repo), "%s/%s", out->host, out->path);
    return 0;
}

static int is_bare_repo(const char *dir)
{
    char p[PATH_MAX];
    struct stat st;

    if (snprintf(p, sizeof(p), "%s/objects", dir) >= (int)sizeof(p) || stat(p, &st) < 0 ||
        !S_ISDIR(st.st_mode))
        return 0;
    if (snprintf(p, sizeof(p), "%s/HEAD", dir) >= (int)sizeof(p) || stat(p, &st) < 0)
        return 0;
    return 1;
}

int gateway_route_local_dir(char **out, const config_upstream *up, const gateway_route *route,
                            rg_error *err)
{
    char cand[PATH_MAX], root[PATH_MAX], *real = NULL;
    size_t rootlen;

    *out = NULL;
    if (up->root == NULL || realpath(up->root, root) == NULL)
        return rg_error_set(err, -ENOENT, "upstream %s has no local root", up->host);
    /* A truncated candidate would name another directory: refuse it. */
    if ((size_t)snprintf(cand, sizeof(cand), "%s/%s.git", root, route->path) >= sizeof(cand))
        return rg_error_set(err, -ENOENT, "repository %s not found", route->repo);
    if (!is_bare_repo(cand))
        snprintf(cand, sizeof(cand), "%s/%s", root, route->path);
    if (!is_bare_repo(cand) || (real = realpath(cand, NULL)) == NULL)
        return rg_error_set(err, -ENOENT, "repository %s not found", route->repo);
    rootlen = strlen(root);
    /* A symlink inside the root must not lead out of it. */
    if (strncmp(real, root, rootlen) != 0 || (real[rootlen] != '/' && rootlen != 1)) {
        free(real);
        return rg_error_set(err, -ENOENT, "repository %s not found", route->repo);
    }
    *out = real;
    return 0;
}
