/*
 * Descriptors over a unix socket; see fdpass.h.
 */
#include "sandbox/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef union fdpass_control {
    char buf[CMSG_SPACE(SANDBOX_FDPASS_MAX * sizeof(int))];
    struct cmsghdr align;
} fdpass_control;

ssize_t sandbox_fdpass_send(int sock, const void *data, size_t len, const int *fds, size_t nfds)
{
    fdpass_control u;
    struct iovec iov = {(void *)data, len};
    struct msghdr msg;
    struct cmsghdr *cm;
    ssize_t n;

    if (len == 0 || nfds > SANDBOX_FDPASS_MAX)
        return -EINVAL;
    memset(&msg, 0, sizeof(msg));
    memset(&u, 0, sizeof(u));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
    }
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

ssize_t sandbox_fdpass_recv(int sock, void *data, size_t cap, int *fds, size_t maxfds, size_t *nfds)
{
    fdpass_control u;
    struct iovec iov = {data, cap};
    struct msghdr msg;
    struct cmsghdr *cm;
    size_t i, got;
    ssize_t n;
    int fd;

    *nfds = 0;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof(u.buf);
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    for (cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        got = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < got; i++) {
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (*nfds < maxfds)
                fds[(*nfds)++] = fd;
            else
                close(fd);
        }
    }
    return n;
}
