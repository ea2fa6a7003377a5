/*
 * libFuzzer target for request routing (gateway/route.h), the code that
 * turns a client's URL into a directory name. Input: a method selector
 * byte, then the URL, then optionally NUL and the `service` argument.
 * Besides "no crash, no leak, no UB" it checks what makes the path safe to
 * put on disk: an accepted route names a host and a path of plain
 * segments (no empty, `.` or `..` segment, no leading dot, no control
 * character), repo is exactly "<host>/<path>", the method fits the
 * endpoint, and every refusal is one of the documented codes with a
 * message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "gateway/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const methods[] = {"GET", "POST", "PUT", "HEAD", "get", ""};

/* A plain segment: what an accepted host or path component must be. */
static void check_segment(const char *s, size_t len)
{
    size_t i;

    FUZZ_CHECK(len > 0);
    FUZZ_CHECK(s[0] != '.');
    FUZZ_CHECK(!(len == 2 && s[0] == '.' && s[1] == '.'));
    for (i = 0; i < len; i++)
        FUZZ_CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f && s[i] != '/' && s[i] != '\\');
}

static void check_route(const gateway_route *r, const char *method)
{
    const char *p = r->path, *slash;
    char repo[sizeof(r->repo)];

    check_segment(r->host, strlen(r->host));
    /* Bounded: every turn moves p past one '/'. */
    for (;;) {
        slash = strchr(p, '/');
        check_segment(p, slash ? (size_t)(slash - p) : strlen(p));
        if (slash == NULL)
            break;
        p = slash + 1;
    }
    snprintf(repo, sizeof(repo), "%s/%s", r->host, r->path);
    FUZZ_CHECK(strcmp(repo, r->repo) == 0);
    FUZZ_CHECK(strcmp(method, r->advertise ? "GET" : "POST") == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *method;
    char *url, *service = NULL, *nul;
    gateway_route route;
    rg_error err = RG_ERROR_INIT;
    int rc;

    if (size < 1)
        return 0;
    method = methods[data[0] % (sizeof(methods) / sizeof(methods[0]))];
    url = malloc(size);
    FUZZ_CHECK(url != NULL);
    memcpy(url, data + 1, size - 1);
    url[size - 1] = '\0';
    /* The URL ends at the first NUL; what follows it is the service. */
    nul = memchr(data + 1, '\0', size - 1) ? url + strlen(url) : NULL;
    if (nul != NULL && nul + 1 < url + size - 1)
        service = nul + 1;

    rc = gateway_route_parse(&route, method, url, service, &err);
    if (rc == 0) {
        check_route(&route, method);
    } else {
        FUZZ_CHECK(rc == -ENOENT || rc == -EINVAL || rc == -EPERM || rc == -EOPNOTSUPP);
        FUZZ_CHECK(err.code == rc && err.msg[0] != '\0');
    }
    free(url);
    return 0;
}
