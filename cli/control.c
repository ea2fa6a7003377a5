/*
 * The CLI's side of the gateway's control socket (gateway/control.h): one
 * request line out, one answer line back. `refgate run` mints and revokes
 * its token through it; `refgate approvals`, `approve` and `deny` reach the
 * approvals through it.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

/* How long the gateway may take to answer (an fsynced audit append) before we give up. */
#define CONTROL_TIMEOUT_SECONDS 30

int cli_control_call(json_t **out, const char *path, const json_t *req, rg_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    struct timeval tv = {.tv_sec = CONTROL_TIMEOUT_SECONDS};
    char *text = NULL, *nl = NULL, *buf;
    size_t len = 0, tlen = 0, off = 0;
    json_error_t jerr;
    ssize_t n;
    int fd, rc = 0;

    *out = NULL;
    if (strlen(path) >= sizeof(addr.sun_path))
        return rg_error_set(err, -ENAMETOOLONG, "control socket %s: path too long", path);
    memcpy(addr.sun_path, path, strlen(path) + 1);
    buf = malloc(CLI_CONTROL_ANSWER_MAX + 1);
    if (buf == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        free(buf);
        return rg_error_set(err, -errno, "socket: %s", strerror(errno));
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (const struct sockaddr *)&addr, sizeof(addr)) < 0) {
        rc = rg_error_set(err, -errno, "control socket %s: %s", path, strerror(errno));
        goto done;
    }
    text = json_dumps(req, JSON_COMPACT);
    if (text == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    tlen = strlen(text);
    text[tlen] = '\n';
    /* Bounded: each round sends at least one byte or fails. */
    while (off < tlen + 1) {
        n = send(fd, text + off, tlen + 1 - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = rg_error_set(err, -EIO, "control socket %s: sending: %s", path,
                              n < 0 ? strerror(errno) : "closed");
            goto done;
        }
        off += (size_t)n;
    }
    /* Bounded: at most CLI_CONTROL_ANSWER_MAX bytes are read. */
    while (nl == NULL && len < CLI_CONTROL_ANSWER_MAX) {
        n = recv(fd, buf + len, CLI_CONTROL_ANSWER_MAX - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = rg_error_set(err, -EIO, "control socket %s: %s", path,
                              n < 0 ? strerror(errno) : "the gateway closed the connection");
            goto done;
        }
        len += (size_t)n;
        nl = memchr(buf, '\n', len);
    }
    if (nl == NULL) {
        rc = rg_error_set(err, -EIO, "control socket %s: answer over %d bytes", path,
                          CLI_CONTROL_ANSWER_MAX);
        goto done;
    }
    *out = json_loadb(buf, (size_t)(nl - buf), 0, &jerr);
    if (*out == NULL || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        rc = rg_error_set(err, -EIO, "control socket %s: the answer is not a JSON object", path);
    }
done:
    if (text != NULL) {
        explicit_bzero(text, tlen + 1); /* its NUL became the newline */
        free(text);
    }
    /* A mint's answer holds a token. */
    explicit_bzero(buf, len);
    free(buf);
    close(fd);
    return rc;
}
