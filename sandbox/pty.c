/*
 * The run's own terminal; see pty.h.
 */
#include "sandbox/pty.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Bytes moved per relay step each way. */
#define PTY_CHUNK 4096

int sandbox_pty_open(int *out, char *name, size_t len, int size_from, rg_error *err)
{
    int fd;

    *out = -1;
    fd = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "opening the run's pty: %s", strerror(errno));
    if (unlockpt(fd) < 0 || ptsname_r(fd, name, len) != 0) {
        int e = errno;

        close(fd);
        return rg_error_set(err, -e, "setting up the run's pty: %s", strerror(e));
    }
    sandbox_pty_copy_size(size_from, fd);
    *out = fd;
    return 0;
}

int sandbox_pty_attach(const char *name, rg_error *err)
{
    int fd, i;

    fd = open(name, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", name, strerror(errno));
    if (ioctl(fd, TIOCSCTTY, 0) < 0) {
        int e = errno;

        close(fd);
        return rg_error_set(err, -e, "making %s the controlling terminal: %s", name, strerror(e));
    }
    for (i = 0; i <= 2; i++) {
        if (isatty(i) && dup2(fd, i) < 0) {
            int e = errno;

            close(fd);
            return rg_error_set(err, -e, "dup2: %s", strerror(e));
        }
    }
    close(fd);
    return 0;
}

void sandbox_pty_copy_size(int from, int to)
{
    struct winsize ws;

    if (ioctl(from, TIOCGWINSZ, &ws) == 0)
        ioctl(to, TIOCSWINSZ, &ws);
}

int sandbox_pty_raw(int fd, struct termios *saved, rg_error *err)
{
    struct termios raw;

    if (tcgetattr(fd, saved) < 0)
        return rg_error_set(err, -errno, "reading the terminal's modes: %s", strerror(errno));
    raw = *saved;
    cfmakeraw(&raw);
    if (tcsetattr(fd, TCSADRAIN, &raw) < 0)
        return rg_error_set(err, -errno, "setting the terminal raw: %s", strerror(errno));
    return 0;
}

void sandbox_pty_restore(int fd, const struct termios *saved)
{
    tcsetattr(fd, TCSADRAIN, saved);
}

/* Write all of buf to fd; 0, or -1 when fd is gone. */
static int pty_write_all(int fd, const char *buf, size_t n)
{
    ssize_t w;

    /* Bounded: each round writes at least one byte or gives up. */
    while (n > 0) {
        w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

int sandbox_pty_relay(int *in, int out, int *master, int wake)
{
    struct pollfd p[3];
    char buf[PTY_CHUNK];
    ssize_t n;
    int rc;

    p[0].fd = *in;
    p[0].events = POLLIN;
    p[0].revents = 0;
    p[1].fd = *master;
    p[1].events = POLLIN;
    p[1].revents = 0;
    p[2].fd = wake;
    p[2].events = POLLIN;
    p[2].revents = 0;
    rc = poll(p, 3, -1);
    if (rc < 0)
        return errno == EINTR ? 0 : -errno;
    if (*master >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        n = read(*master, buf, sizeof(buf));
        if (n > 0)
            pty_write_all(out, buf, (size_t)n);
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
            *master = -1; /* EIO: every slave descriptor is closed */
    }
    if (*in >= 0 && *master >= 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        n = read(*in, buf, sizeof(buf));
        if (n > 0) {
            if (pty_write_all(*master, buf, (size_t)n) < 0)
                *master = -1;
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            *in = -1;
        }
    }
    return 0;
}

void sandbox_pty_drain(int master, int out)
{
    char buf[PTY_CHUNK];
    ssize_t n;
    int i;

    if (master < 0 || fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK) < 0)
        return;
    /* Bounded: what a pty buffers is a few pages; 256 reads is past it. */
    for (i = 0; i < 256; i++) {
        n = read(master, buf, sizeof(buf));
        if (n <= 0 || pty_write_all(out, buf, (size_t)n) < 0)
            break;
    }
}
