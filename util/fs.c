/* Filesystem helpers; see fs.h. */
#include "util/fs.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rg_fs_read_file(rg_buf *out, const char *path, rg_error *err)
{
    char chunk[8192];
    int fd, rc = 0;
    ssize_t n;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    for (;;) {
        n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        rc = rg_buf_append(out, chunk, (size_t)n);
        if (rc < 0) {
            rg_error_set(err, rc, "%s: larger than %zu bytes", path, out->max);
            goto done;
        }
    }
    if (out->data == NULL)
        rc = rg_buf_append(out, "", 0);
done:
    close(fd);
    return rc;
}

ssize_t rg_fs_read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    ssize_t n;

    while (got < len) {
        n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int rg_fs_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    ssize_t n;

    while (len > 0) {
        n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int rg_fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode, rg_error *err)
{
    char tmp[PATH_MAX];
    int fd, rc;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", tmp, strerror(errno));
    rc = fchmod(fd, mode) < 0 ? -errno : 0;
    if (rc == 0)
        rc = rg_fs_write_all(fd, data, len);
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        return rg_error_set(err, rc, "%s: %s", path, strerror(-rc));
    }
    return 0;
}

int rg_fs_mkdir_p(const char *path, mode_t mode, rg_error *err)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    char *p;

    if (len == 0 || len >= sizeof(buf))
        return rg_error_set(err, -EINVAL, "bad directory path");
    memcpy(buf, path, len + 1);
    for (p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return rg_error_set(err, -errno, "%s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return rg_error_set(err, -errno, "%s: %s", buf, strerror(errno));
    return 0;
}
