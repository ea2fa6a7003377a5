/*
 * Small filesystem helpers the libraries share: reading a whole file under
 * a cap, replacing a file atomically (write a temporary, fsync, rename),
 * creating a directory path, and removing a tree.
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

/*
 * fsync directory `dir`, so a file just created or renamed in it survives a
 * crash; 0 or -errno.
 */
int rg_fs_fsync_dir(const char *dir);

enum {
    RG_FS_KEEP_TOP = 1 << 0, /* empty the directory, keep it */
};

/* How deep rg_fs_remove_tree descends (one descriptor per level). */
#define RG_FS_REMOVE_DEPTH_MAX 256

/*
 * rm -rf that stays inside: a symbolic link is removed, never followed
 * (`path` itself included), and a directory on another mount (another
 * filesystem or a bind mount) is left alone with everything under it.
 * Everything else is removed, deepest first, through descriptors, so a
 * directory swapped for a link meanwhile cannot redirect it. A missing
 * `path` is not an error. Returns 0, or the first failure (what was left
 * stays; the rest is still removed).
 */
int rg_fs_remove_tree(const char *path, unsigned flags, rg_error *err);

#endif
