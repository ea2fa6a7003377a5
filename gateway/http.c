/* Binding a listener; see http.h. */
#include "gateway/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int gateway_http_bind(int *fd_out, char *url, size_t urlsz, const char *what, const char *host,
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
