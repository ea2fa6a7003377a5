/*
 * Copying and removing directory trees; see tree.h. Both recurse with one
 * open directory per level, so the depth is bounded to stay well inside the
 * default limit of 1024 descriptors.
 */
#include "fork/tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define TREE_DEPTH_MAX 200

typedef struct tree_ctx {
    fork_tree_stats *stats;
    const fork_tree_opts *opts;
    int clone;     /* still trying FICLONE */
    dev_t top_dev; /* the top's device and mount: nothing else is copied */
    unsigned long long top_mnt;
    int have_mnt;        /* the kernel gives mount ids */
    char path[PATH_MAX]; /* path relative to the top, for messages */
    size_t len;
    rg_error *err;
} tree_ctx;

/* ------------------------------------------------------------------------ */
/* Copying                                                                   */
/* ------------------------------------------------------------------------ */

/* Append /name to the message path; returns the length to restore. */
static size_t tree_path_push(tree_ctx *c, const char *name)
{
    size_t saved = c->len;
    int n;

    n = snprintf(c->path + c->len, sizeof(c->path) - c->len, "%s%s", c->len ? "/" : "", name);
    if (n > 0)
        c->len += (size_t)n < sizeof(c->path) - c->len ? (size_t)n : sizeof(c->path) - c->len - 1;
    return saved;
}

static void tree_path_pop(tree_ctx *c, size_t saved)
{
    c->len = saved;
    c->path[saved] = '\0';
}

static int tree_fail(tree_ctx *c, int code, const char *what)
{
    return rg_error_set(c->err, code, "%s %s: %s", what, c->len ? c->path : ".",
                        code > -1000 ? strerror(-code) : "refused");
}

/* Give `fd` the owner, mode and times of `st`, owner first since chown
 * clears set-id bits. */
static int tree_meta_fd(int fd, const struct stat *st, int keep_owner)
{
    struct timespec times[2] = {st->st_atim, st->st_mtim};

    if (keep_owner && fchown(fd, st->st_uid, st->st_gid) < 0)
        return -errno;
    if (fchmod(fd, st->st_mode & 07777) < 0)
        return -errno;
    if (futimens(fd, times) < 0)
        return -errno;
    return 0;
}

/* Whether errno from FICLONE means "this filesystem (pair) cannot clone". */
static int tree_clone_unsupported(int e)
{
    return e == EOPNOTSUPP || e == ENOTTY || e == EXDEV || e == EINVAL || e == ENOSYS ||
           e == EPERM || e == ETXTBSY;
}

static int tree_copy_data(tree_ctx *c, int sfd, int dfd, const struct stat *st)
{
    char buf[65536];
    ssize_t n, w;
    int use_cfr = 1;

    if (c->clone) {
        if (ioctl(dfd, FICLONE, sfd) == 0) {
            c->stats->cloned++;
            c->stats->bytes += (unsigned long long)st->st_size;
            return 0;
        }
        if (!tree_clone_unsupported(errno))
            return -errno;
        /* One refusal is the filesystem's answer for the whole tree. */
        c->clone = 0;
        c->stats->clone_errno = errno;
    }
    for (;;) {
        if (use_cfr) {
            n = copy_file_range(sfd, NULL, dfd, NULL, 1 << 30, 0);
            if (n < 0 &&
                (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
                /* Older kernels refuse across filesystems; read and write. */
                use_cfr = 0;
                continue;
            }
        } else {
            n = read(sfd, buf, sizeof(buf));
            for (w = 0; n > 0 && w < n;) {
                ssize_t k = write(dfd, buf + w, (size_t)(n - w));

                if (k < 0 && errno == EINTR)
                    continue;
                if (k < 0)
                    return -errno;
                w += k;
            }
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        c->stats->bytes += (unsigned long long)n;
    }
    c->stats->copied++;
    return 0;
}

static int tree_copy_file(tree_ctx *c, int sdir, int ddir, const char *name, const struct stat *st)
{
    int sfd = -1, dfd = -1, rc = 0;

    sfd = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (sfd < 0) {
        rc = tree_fail(c, -errno, "opening");
        goto done;
    }
    dfd = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (dfd < 0) {
        rc = tree_fail(c, -errno, "creating");
        goto done;
    }
    rc = tree_copy_data(c, sfd, dfd, st);
    if (rc == 0)
        rc = tree_meta_fd(dfd, st, c->opts->keep_owner);
    if (rc < 0) {
        rc = tree_fail(c, rc, "copying");
        goto done;
    }
    c->stats->files++;
done:
    if (sfd >= 0)
        close(sfd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

static int tree_copy_symlink(tree_ctx *c, int sdir, int ddir, const char *name,
                             const struct stat *st)
{
    struct timespec times[2] = {st->st_atim, st->st_mtim};
    char target[PATH_MAX];
    ssize_t n;

    n = readlinkat(sdir, name, target, sizeof(target) - 1);
    if (n < 0)
        return tree_fail(c, -errno, "reading link");
    target[n] = '\0';
    if (symlinkat(target, ddir, name) < 0)
        return tree_fail(c, -errno, "creating link");
    if (c->opts->keep_owner &&
        fchownat(ddir, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
        return tree_fail(c, -errno, "chown");
    if (utimensat(ddir, name, times, AT_SYMLINK_NOFOLLOW) < 0)
        return tree_fail(c, -errno, "setting times of");
    c->stats->symlinks++;
    return 0;
}

static int tree_copy_fifo(tree_ctx *c, int sdir, int ddir, const char *name, const struct stat *st)
{
    struct timespec times[2] = {st->st_atim, st->st_mtim};

    (void)sdir;
    /* Opening a FIFO would block, so it is handled by name; the new name is
     * in a directory nothing else writes while the fork is made. */
    if (mkfifoat(ddir, name, 0600) < 0)
        return tree_fail(c, -errno, "creating FIFO");
    if (c->opts->keep_owner && fchownat(ddir, name, st->st_uid, st->st_gid, 0) < 0)
        return tree_fail(c, -errno, "chown");
    if (fchmodat(ddir, name, st->st_mode & 07777, 0) < 0)
        return tree_fail(c, -errno, "chmod");
    if (utimensat(ddir, name, times, 0) < 0)
        return tree_fail(c, -errno, "setting times of");
    c->stats->fifos++;
    return 0;
}

/*
 * lstat() by statx(), which also says which mount `name` is on: one system
 * call per entry gives both. *mnt is 0 when the kernel gives no mount id.
 */
static int tree_statat(struct stat *st, unsigned long long *mnt, int dirfd, const char *name,
                       int flags)
{
    struct statx x;

    if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | flags,
              STATX_BASIC_STATS | STATX_MNT_ID, &x) < 0)
        return -errno;
    memset(st, 0, sizeof(*st));
    st->st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
    st->st_ino = x.stx_ino;
    st->st_mode = x.stx_mode;
    st->st_nlink = x.stx_nlink;
    st->st_uid = x.stx_uid;
    st->st_gid = x.stx_gid;
    st->st_size = (off_t)x.stx_size;
    st->st_atim.tv_sec = x.stx_atime.tv_sec;
    st->st_atim.tv_nsec = x.stx_atime.tv_nsec;
    st->st_mtim.tv_sec = x.stx_mtime.tv_sec;
    st->st_mtim.tv_nsec = x.stx_mtime.tv_nsec;
    *mnt = (x.stx_mask & STATX_MNT_ID) ? x.stx_mnt_id : 0;
    return 0;
}

/* Whether an entry lies on another mount than the top (a bind mount of a
 * file or directory from elsewhere, or a filesystem mounted inside). */
static int tree_other_mount(const tree_ctx *c, const struct stat *st, unsigned long long mnt)
{
    return st->st_dev != c->top_dev || (c->have_mnt && mnt != 0 && mnt != c->top_mnt);
}

static int tree_refused(tree_ctx *c, const struct stat *st)
{
    return c->opts->refuse != NULL && c->opts->refuse(c->opts->ctx, st);
}

/*
 * Walk an excluded directory `fd` (consumed) without copying it: count its
 * files and bytes, refuse a secret linked or mounted inside, and refuse any
 * other mount inside (the run would see it through the view).
 */
static int tree_scan_dir(tree_ctx *c, int fd, int depth)
{
    struct dirent *de;
    struct stat st;
    unsigned long long mnt;
    size_t saved;
    DIR *d;
    int rc = 0, sub;

    d = fdopendir(fd);
    if (d == NULL) {
        rc = tree_fail(c, -errno, "reading");
        close(fd);
        return rc;
    }
    while (rc == 0) {
        errno = 0;
        de = readdir(d);
        if (de == NULL) {
            if (errno != 0)
                rc = tree_fail(c, -errno, "reading");
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        saved = tree_path_push(c, de->d_name);
        if ((rc = tree_statat(&st, &mnt, dirfd(d), de->d_name, 0)) < 0) {
            rc = tree_fail(c, rc, "stat");
        } else if ((S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink > 1)) &&
                   tree_refused(c, &st)) {
            rc = tree_fail(c, RG_E_DENIED, "secret mounted or linked in an excluded directory at");
        } else if (tree_other_mount(c, &st, mnt)) {
            rc = tree_fail(c, RG_E_DENIED,
                           "another mount inside an excluded directory (it would be visible "
                           "in the run) at");
        } else if (S_ISREG(st.st_mode)) {
            c->stats->excluded_files++;
            c->stats->excluded_bytes += (unsigned long long)st.st_size;
        } else if (S_ISDIR(st.st_mode)) {
            if (depth >= TREE_DEPTH_MAX) {
                rc = tree_fail(c, -ELOOP, "more than 200 levels deep at");
            } else {
                sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                rc = sub < 0 ? tree_fail(c, -errno, "opening") : tree_scan_dir(c, sub, depth + 1);
            }
        }
        tree_path_pop(c, saved);
    }
    closedir(d);
    return rc;
}

/*
 * Leave `name` (a directory or regular file, `st`) out of the copy: an
 * empty placeholder with its metadata in `ddir`, after scanning it.
 */
static int tree_exclude(tree_ctx *c, int sdir, int ddir, const char *name, const struct stat *st,
                        int depth)
{
    int fd, rc;

    if (S_ISDIR(st->st_mode)) {
        fd = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = fd < 0 ? tree_fail(c, -errno, "opening") : tree_scan_dir(c, fd, depth + 1);
        if (rc < 0)
            return rc;
        if (mkdirat(ddir, name, 0700) < 0)
            return tree_fail(c, -errno, "creating");
        fd = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    } else {
        if (st->st_nlink > 1 && tree_refused(c, st))
            return tree_fail(c, RG_E_DENIED, "hard link to a secret at");
        c->stats->excluded_files++;
        c->stats->excluded_bytes += (unsigned long long)st->st_size;
        fd = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    if (fd < 0)
        return tree_fail(c, -errno, "creating");
    rc = tree_meta_fd(fd, st, c->opts->keep_owner);
    close(fd);
    if (rc < 0)
        return tree_fail(c, rc, "setting metadata of");
    c->stats->excluded++;
    return 0;
}

/* Whether opts->exclude leaves this entry out: 1 yes, 0 no, or an error. */
static int tree_excluded(tree_ctx *c, const struct stat *st)
{
    int rc;

    if (c->opts->exclude == NULL || !(S_ISDIR(st->st_mode) || S_ISREG(st->st_mode)))
        return 0;
    rc = c->opts->exclude(c->opts->exclude_ctx, c->path, st);
    return rc < 0 ? tree_fail(c, rc, "excluding") : rc;
}

/* Copy the entries of `sfd` (consumed) into `dfd` (not consumed). */
static int tree_copy_dir(tree_ctx *c, int sfd, int dfd, int depth)
{
    struct dirent *de;
    struct stat st;
    unsigned long long mnt;
    size_t saved;
    DIR *d;
    int rc = 0, sub_s, sub_d;

    d = fdopendir(sfd);
    if (d == NULL) {
        rc = tree_fail(c, -errno, "reading");
        close(sfd);
        return rc;
    }
    while (rc == 0) {
        errno = 0;
        de = readdir(d);
        if (de == NULL) {
            if (errno != 0)
                rc = tree_fail(c, -errno, "reading");
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        saved = tree_path_push(c, de->d_name);
        if ((rc = tree_statat(&st, &mnt, dirfd(d), de->d_name, 0)) < 0) {
            rc = tree_fail(c, rc, "stat");
        } else if (S_ISDIR(st.st_mode) && tree_refused(c, &st)) {
            /* Refused before skipped: a secret mounted inside is said loudly. */
            rc = tree_fail(c, RG_E_DENIED, "secret directory mounted or linked at");
        } else if (tree_other_mount(c, &st, mnt)) {
            c->stats->mounts++;
            if (c->opts->mounted != NULL)
                c->opts->mounted(c->opts->ctx, c->path);
        } else if ((rc = tree_excluded(c, &st)) != 0) {
            if (rc > 0)
                rc = tree_exclude(c, dirfd(d), dfd, de->d_name, &st, depth);
        } else if (S_ISDIR(st.st_mode)) {
            if (depth >= TREE_DEPTH_MAX) {
                rc = tree_fail(c, -ELOOP, "more than 200 levels deep at");
            } else if (mkdirat(dfd, de->d_name, 0700) < 0) {
                rc = tree_fail(c, -errno, "creating");
            } else {
                c->stats->dirs++;
                sub_d = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                sub_s = sub_d < 0 ? -1
                                  : openat(dirfd(d), de->d_name,
                                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub_s < 0)
                    rc = tree_fail(c, -errno, "opening");
                else
                    rc = tree_copy_dir(c, sub_s, sub_d, depth + 1); /* consumes sub_s */
                /* Times last: filling the directory changed them. */
                if (rc == 0 && (rc = tree_meta_fd(sub_d, &st, c->opts->keep_owner)) < 0)
                    rc = tree_fail(c, rc, "setting metadata of");
                if (sub_d >= 0)
                    close(sub_d);
            }
        } else if (S_ISREG(st.st_mode)) {
            if (st.st_nlink > 1) {
                c->stats->hardlinks++;
                if (tree_refused(c, &st))
                    rc = tree_fail(c, RG_E_DENIED, "hard link to a secret at");
            }
            if (rc == 0)
                rc = tree_copy_file(c, dirfd(d), dfd, de->d_name, &st);
        } else if (S_ISLNK(st.st_mode)) {
            rc = tree_copy_symlink(c, dirfd(d), dfd, de->d_name, &st);
        } else if (S_ISFIFO(st.st_mode)) {
            rc = tree_copy_fifo(c, dirfd(d), dfd, de->d_name, &st);
        } else {
            c->stats->skipped++;
        }
        tree_path_pop(c, saved);
    }
    closedir(d);
    return rc;
}

int fork_tree_copy(fork_tree_stats *out, int srcfd, int dstfd, const fork_tree_opts *opts,
                   rg_error *err)
{
    tree_ctx c;
    struct stat st;
    int fd, rc;

    memset(out, 0, sizeof(*out));
    memset(&c, 0, sizeof(c));
    c.stats = out;
    c.opts = opts;
    c.clone = opts->try_clone;
    c.err = err;
    if ((rc = tree_statat(&st, &c.top_mnt, srcfd, "", AT_EMPTY_PATH)) < 0)
        return tree_fail(&c, rc, "stat");
    c.top_dev = st.st_dev;
    c.have_mnt = c.top_mnt != 0;
    if (tree_refused(&c, &st))
        return tree_fail(&c, RG_E_DENIED, "the source is a secret directory:");
    /* A fresh open file description, so reading it moves no shared offset. */
    fd = openat(srcfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return tree_fail(&c, -errno, "opening");
    rc = tree_copy_dir(&c, fd, dstfd, 0);
    if (rc == 0 && (rc = tree_meta_fd(dstfd, &st, opts->keep_owner)) < 0)
        rc = tree_fail(&c, rc, "setting metadata of");
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Removing                                                                  */
/* ------------------------------------------------------------------------ */

/* Remove the entries of directory `fd` (consumed), which is on device `dev`. */
static int tree_remove_dir(int fd, dev_t dev, int depth, rg_error *err)
{
    struct dirent *de;
    struct stat st;
    DIR *d;
    int rc = 0, sub;

    d = fdopendir(fd);
    if (d == NULL) {
        rc = -errno;
        close(fd);
        return rg_error_set(err, rc, "reading a directory to remove: %s", strerror(-rc));
    }
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                rc = rg_error_set(err, -errno, "%s: %s", de->d_name, strerror(errno));
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
                rc = rg_error_set(err, -errno, "removing %s: %s", de->d_name, strerror(errno));
            continue;
        }
        if (st.st_dev != dev) {
            rc = rg_error_set(err, -EBUSY, "%s is a mount point; left in place", de->d_name);
            break;
        }
        if (depth >= TREE_DEPTH_MAX) {
            rc = rg_error_set(err, -ELOOP, "more than 200 levels deep");
            break;
        }
        sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            rc = rg_error_set(err, -errno, "opening %s: %s", de->d_name, strerror(errno));
            break;
        }
        /* A directory copied read-only must become writable to be emptied. */
        if ((st.st_mode & S_IRWXU) != S_IRWXU)
            (void)fchmod(sub, (st.st_mode & 07777) | S_IRWXU);
        rc = tree_remove_dir(sub, dev, depth + 1, err);
        if (rc == 0 && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
            rc = rg_error_set(err, -errno, "removing %s: %s", de->d_name, strerror(errno));
    }
    closedir(d);
    return rc;
}

int fork_tree_remove(const char *path, rg_error *err)
{
    char parent[PATH_MAX], *slash;
    const char *name;
    struct stat st;
    int pfd = -1, fd, rc = 0, tries;

    if (strlen(path) >= sizeof(parent) || path[0] != '/')
        return rg_error_set(err, -EINVAL, "%s: not an absolute path", path);
    strcpy(parent, path);
    slash = strrchr(parent, '/');
    name = path + (slash - parent) + 1;
    if (*name == '\0')
        return rg_error_set(err, -EINVAL, "%s: refusing to remove", path);
    if (slash == parent)
        strcpy(parent, "/");
    else
        *slash = '\0';
    pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0) {
        rc = errno == ENOENT ? 0 : rg_error_set(err, -errno, "%s: %s", parent, strerror(errno));
        goto done;
    }
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        rc = errno == ENOENT ? 0 : rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(pfd, name, 0) < 0 && errno != ENOENT)
            rc = rg_error_set(err, -errno, "removing %s: %s", path, strerror(errno));
        goto done;
    }
    /* A process left running from the command may still be creating files:
     * empty and retry a few times before giving up. */
    for (tries = 0; tries < 3; tries++) {
        fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            rc = rg_error_set(err, -errno, "opening %s: %s", path, strerror(errno));
            goto done;
        }
        if ((st.st_mode & S_IRWXU) != S_IRWXU)
            (void)fchmod(fd, (st.st_mode & 07777) | S_IRWXU);
        rc = tree_remove_dir(fd, st.st_dev, 0, err);
        if (rc < 0) {
            rg_error_wrap(err, "removing %s", path);
            goto done;
        }
        if (unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            goto done;
        if (errno != ENOTEMPTY) {
            rc = rg_error_set(err, -errno, "removing %s: %s", path, strerror(errno));
            goto done;
        }
    }
    rc = rg_error_set(err, -ENOTEMPTY, "removing %s: something keeps writing to it", path);
done:
    if (pfd >= 0)
        close(pfd);
    return rc;
}
