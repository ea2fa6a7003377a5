/*
 * Copying and removing directory trees without ever following a symlink,
 * for the fork (source -> base -> fork) and for cleaning up after a run.
 *
 * Regular files are cloned with the FICLONE ioctl, which shares extents on
 * btrfs, XFS with reflink and bcachefs so a clone costs no data, and copied
 * with copy_file_range() where the filesystem cannot clone (the first
 * refusal switches the rest of the tree to copying). Modes, owners (when
 * running as root), access and modification times, symlinks as links,
 * FIFOs and empty directories are kept. Each hard-linked name becomes an
 * independent file, so no inode is ever shared between a fork and anything
 * else. Sockets and device nodes are skipped: a device node in a writable
 * tree would be a way around the sandbox. The copy never crosses a mount
 * point: an entry on another mount than the top's (a file or directory
 * bind-mounted into the tree from elsewhere, a secret say) is skipped and
 * told to opts->mounted. Mounts are told apart by statx()'s mount id, which
 * also separates two mounts of one filesystem (same st_dev); kernels older
 * than 5.8 give no mount id and only st_dev is compared.
 *
 * Everything is done relative to directory descriptors opened with
 * O_NOFOLLOW, so a tree that changes underneath (a symlink swapped in for a
 * directory by a process still running) cannot redirect a copy or a removal
 * outside it.
 */
#ifndef RG_FORK_TREE_H
#define RG_FORK_TREE_H

#include <sys/stat.h>

#include "util/error.h"

typedef struct fork_tree_stats {
    unsigned long files;    /* regular files */
    unsigned long cloned;   /* ... of which cloned with FICLONE */
    unsigned long copied;   /* ... of which copied */
    unsigned long dirs;     /* directories below the top */
    unsigned long symlinks; /* kept as links */
    unsigned long fifos;
    unsigned long skipped;   /* sockets and device nodes */
    unsigned long mounts;    /* entries on another mount, skipped */
    unsigned long hardlinks; /* names of files with more than one link */
    unsigned long long bytes;
    unsigned long excluded;            /* entries left out (opts->exclude) */
    unsigned long excluded_files;      /* regular files in or at them */
    unsigned long long excluded_bytes; /* ... and their size */
    int clone_errno;                   /* why FICLONE was refused (0: never refused) */
} fork_tree_stats;

typedef struct fork_tree_opts {
    int try_clone;  /* start with FICLONE (else copy from the start) */
    int keep_owner; /* chown to the source's owner (needs CAP_CHOWN) */
    /*
     * When set, called for every directory and every file with more than
     * one link; a nonzero return aborts the copy with RG_E_DENIED. The
     * runner uses it to refuse a hard link or bind mount of a secret.
     */
    int (*refuse)(void *ctx, const struct stat *st);
    void *ctx;
    /* When set, told each entry skipped for being on another mount (its
     * path relative to the top), so the caller can say so. */
    void (*mounted)(void *ctx, const char *path);
    /*
     * When set, asked for every directory and regular file (its path
     * relative to the top, after the refuse and mount checks): 1 leaves it
     * out, an empty placeholder (directory or file, same mode, owner and
     * times) standing in for it; 0 copies it; negative aborts the copy. What
     * is left out is still walked (stat only) with `refuse`, and a mount
     * inside it refuses the copy: the caller shows the original inside the
     * run, so it must hold no secret either.
     */
    int (*exclude)(void *ctx, const char *path, const struct stat *st);
    void *exclude_ctx;
} fork_tree_opts;

#define FORK_TREE_OPTS_INIT                                                                        \
    {                                                                                              \
        1, 0, NULL, NULL, NULL, NULL, NULL                                                         \
    }

/*
 * Copy the contents of directory `srcfd` into the empty directory `dstfd`
 * (neither consumed), then give `dstfd` the mode, owner and times of
 * `srcfd`. Counts go to *out (zeroed first). On failure the partial copy is
 * left for the caller to remove; the message names the failing path
 * relative to the top.
 */
int fork_tree_copy(fork_tree_stats *out, int srcfd, int dstfd, const fork_tree_opts *opts,
                   rg_error *err);

/*
 * Remove `path` and everything below it, like `rm -rf`, never following a
 * symlink, and without crossing into other filesystems (a mount point
 * below is left alone and reported). -ENOENT counts as success.
 */
int fork_tree_remove(const char *path, rg_error *err);

#endif
