/*
 * Small filesystem helpers the libraries share: reading a whole file under
 * a cap, replacing a file atomically (write a temporary, fsync, rename), and
 * creating a directory path.
 */
#ifndef RG_UTIL_FS_H
#define RG_UTIL_FS_H

#include <stddef.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/error.h"

/* Append the contents of `path` to `out`; fails when it would pass out->max. */
int rg_fs_read_file(rg_buf *out, const char *path, rg_error *err);

/*
 * Write `len` bytes to `path` through a temporary file in the same directory
 * that is fsynced and renamed over it, so readers see the old or the new
 * file, never a part. The file gets `mode` exactly (umask does not apply).
 */
int rg_fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode, rg_error *err);

/* mkdir -p with `mode` for the directories it creates. */
int rg_fs_mkdir_p(const char *path, mode_t mode, rg_error *err);

/* Read up to `len` bytes, stopping early only at end of file; returns the
 * bytes read or -errno. */
ssize_t rg_fs_read_full(int fd, void *buf, size_t len);

/* Write all of `len` bytes to `fd`, retrying short writes and EINTR. */
int rg_fs_write_all(int fd, const void *data, size_t len);

#endif
