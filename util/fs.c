/* Filesystem helpers; see fs.h. */
#include "util/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
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

/* ---------------------------------------------------------------------------
 * Removing a tree
 * ------------------------------------------------------------------------- */

/* The mount an entry is on: its mount id where the kernel tells (bind
 * mounts share a device number), else its device. */
static int fs_mount_of(uint64_t *out, int dirfd, const char *name, mode_t *mode)
{
    struct statx stx;

    if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE | STATX_MNT_ID, &stx) <
        0)
        return -errno;
    *mode = stx.stx_mode;
    if (stx.stx_mask & STATX_MNT_ID)
        *out = stx.stx_mnt_id;
    else
        *out = ((uint64_t)stx.stx_dev_major << 32) | stx.stx_dev_minor;
    return 0;
}

/* Remove what directory `fd` (consumed) holds; the first failure is kept in *first. */
static void fs_empty_dir(int fd, uint64_t mount, int depth, int *first)
{
    struct dirent *de;
    uint64_t m;
    mode_t mode;
    DIR *d;
    int sub, rc;

    d = fdopendir(fd);
    if (d == NULL) {
        if (*first == 0)
            *first = -errno;
        close(fd);
        return;
    }
    /* Bounded: each entry is read once; removal does not add entries. */
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        rc = fs_mount_of(&m, dirfd(d), de->d_name, &mode);
        if (rc == 0 && S_ISDIR(mode)) {
            if (m != mount) {
                rc = -EXDEV; /* a mount point: neither it nor anything under it */
            } else if (depth >= RG_FS_REMOVE_DEPTH_MAX) {
                rc = -ELOOP;
            } else {
                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0) {
                    rc = -errno;
                } else {
                    fs_empty_dir(sub, mount, depth + 1, first);
                    if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
                        rc = -errno;
                }
            }
        } else if (rc == 0 && unlinkat(dirfd(d), de->d_name, 0) < 0) {
            rc = -errno;
        }
        if (rc < 0 && *first == 0)
            *first = rc;
    }
    closedir(d);
}

int rg_fs_remove_tree(const char *path, unsigned flags, rg_error *err)
{
    uint64_t mount;
    mode_t mode;
    int fd, first = 0;

    first = fs_mount_of(&mount, AT_FDCWD, path, &mode);
    if (first == -ENOENT)
        return 0;
    if (first < 0)
        return rg_error_set(err, first, "%s: %s", path, strerror(-first));
    if (!S_ISDIR(mode)) {
        /* A link or a file where a directory was expected: only the name goes. */
        if (!(flags & RG_FS_KEEP_TOP) && unlink(path) < 0)
            return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        return 0;
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    fs_empty_dir(fd, mount, 1, &first);
    if (first == 0 && !(flags & RG_FS_KEEP_TOP) && rmdir(path) < 0)
        first = -errno;
    if (first < 0)
        return rg_error_set(err, first, "removing %s: %s", path, strerror(-first));
    return 0;
}

int rg_fs_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0)
        rc = -errno;
    close(fd);
    return rc;
}
