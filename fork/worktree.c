/*
 * A fork of a work tree with a gitfile made a repository of its own; see
 * worktree.h.
 */
#include "fork/worktree.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork/tree.h"

/* A gitfile or commondir file is one line; more is not one. */
#define WT_LINK_MAX (PATH_MAX + 16)

/* A git config larger than this is not edited (git's own are a few KiB). */
#define WT_CONFIG_MAX (1024 * 1024)

/* The staging name of the new .git, beside the gitfile it replaces. */
#define WT_STAGING ".git.refgate-run-new"

/* The first line of `dirfd`/`name` into buf (without its newline). */
static int wt_read_line(char *buf, size_t cap, int dirfd, const char *name)
{
    ssize_t n;
    int fd;

    fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -EIO;
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return 0;
}

/* `rel` resolved against directory `dir` when relative, canonical, into out. */
static int wt_resolve(char *out, const char *dir, const char *rel)
{
    char joined[2 * PATH_MAX + 2];

    if (rel[0] == '/')
        snprintf(joined, sizeof(joined), "%s", rel);
    else
        snprintf(joined, sizeof(joined), "%s/%s", dir, rel);
    return realpath(joined, out) == NULL ? -errno : 0;
}

int fork_worktree_find(fork_worktree *out, const char *top, rg_error *err)
{
    char line[WT_LINK_MAX], gitdir[PATH_MAX], common[PATH_MAX];
    struct stat st;
    int topfd, gfd = -1, rc;

    memset(out, 0, sizeof(*out));
    topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (topfd < 0)
        return rg_error_set(err, -errno, "%s: %s", top, strerror(errno));
    if (fstatat(topfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
        close(topfd);
        return 0;
    }
    rc = wt_read_line(line, sizeof(line), topfd, ".git");
    close(topfd);
    if (rc < 0 || strncmp(line, "gitdir: ", 8) != 0 || wt_resolve(gitdir, top, line + 8) < 0)
        return rg_error_set(err, -EINVAL,
                            "%s/.git is a gitfile that names no git directory; refusing to fork "
                            "a work tree whose repository cannot be found",
                            top);
    gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (gfd < 0)
        return rg_error_set(err, -errno, "%s (named by %s/.git): %s", gitdir, top, strerror(errno));
    /* A linked worktree names its common directory; a submodule's is its own. */
    rc = wt_read_line(line, sizeof(line), gfd, "commondir");
    close(gfd);
    if (rc == 0 ? wt_resolve(common, gitdir, line) < 0 : rc != -ENOENT)
        return rg_error_set(err, -EINVAL, "%s/commondir names no directory", gitdir);
    if (rc == -ENOENT)
        snprintf(common, sizeof(common), "%s", gitdir);
    out->gitdir = strdup(gitdir);
    out->common = strdup(common);
    if (asprintf(&out->objects, "%s/objects", common) < 0)
        out->objects = NULL;
    if (out->gitdir == NULL || out->common == NULL || out->objects == NULL) {
        fork_worktree_free(out);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    return 1;
}

void fork_worktree_free(fork_worktree *wt)
{
    if (wt == NULL)
        return;
    free(wt->gitdir);
    free(wt->common);
    free(wt->objects);
    memset(wt, 0, sizeof(*wt));
}

/* Copy regular file `from` to `dfd`/`name`; a missing optional one is skipped. */
static int wt_copy_file(int dfd, const char *name, const char *from, int optional, rg_error *err)
{
    char buf[65536];
    struct stat st;
    int in, out = -1, rc = 0;
    ssize_t n;

    in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0) {
        if (optional && errno == ENOENT)
            return 0;
        return rg_error_set(err, -errno, "%s: %s", from, strerror(errno));
    }
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, -EINVAL, "%s: not a regular file", from);
        goto done;
    }
    out =
        openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777);
    if (out < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", name, strerror(errno));
        goto done;
    }
    /* Bounded: ends at the end of the file. */
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = rg_error_set(err, -EIO, "copying %s: %s", from, strerror(errno));
            goto done;
        }
    if (n < 0)
        rc = rg_error_set(err, -errno, "%s: %s", from, strerror(errno));
done:
    close(in);
    if (out >= 0)
        close(out);
    return rc;
}

/* Copy directory `from` to `dfd`/`name`; a missing optional one is skipped. */
static int wt_copy_dir(int dfd, const char *name, const char *from, int optional, rg_error *err)
{
    fork_tree_opts to = FORK_TREE_OPTS_INIT;
    fork_tree_stats stats;
    int sfd, nfd = -1, rc;

    sfd = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0) {
        if (optional && errno == ENOENT)
            return 0;
        return rg_error_set(err, -errno, "%s: %s", from, strerror(errno));
    }
    if (mkdirat(dfd, name, 0755) < 0 ||
        (nfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        rc = rg_error_set(err, -errno, "%s: %s", name, strerror(errno));
    else
        rc = fork_tree_copy(&stats, sfd, nfd, &to, err);
    close(sfd);
    if (nfd >= 0)
        close(nfd);
    return rc;
}

/*
 * Drop core.worktree from the copied config `dfd`/config: a submodule's
 * names its work tree relative to .git/modules/<name>, which from the
 * fork's own .git leads elsewhere (the fork is its work tree). A key line
 * is `worktree` then spaces or '=', in any case; other sections have no
 * such key in git's own config. The config is small; read whole, bounded.
 */
static int wt_drop_worktree_key(int dfd, rg_error *err)
{
    char *buf = malloc(WT_CONFIG_MAX + 1), *line, *next, *p;
    size_t len = 0, w = 0;
    ssize_t n;
    int fd, rc = 0;

    fd = openat(dfd, "config", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || buf == NULL) {
        rc = rg_error_set(err, fd < 0 ? -errno : -ENOMEM, "config: %s",
                          fd < 0 ? strerror(errno) : "out of memory");
        goto done;
    }
    /* Bounded: WT_CONFIG_MAX bytes; a larger config is left as it is. */
    while (len < WT_CONFIG_MAX && (n = read(fd, buf + len, WT_CONFIG_MAX - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    if (len == WT_CONFIG_MAX || strlen(buf) != len)
        goto done;
    for (line = buf; *line; line = next) {
        next = strchrnul(line, '\n');
        next += *next == '\n';
        for (p = line; *p == ' ' || *p == '\t'; p++)
            ;
        if (strncasecmp(p, "worktree", 8) == 0 && strspn(p + 8, " \t") + p + 8 < next &&
            p[8 + strspn(p + 8, " \t")] == '=')
            continue;
        memmove(buf + w, line, (size_t)(next - line));
        w += (size_t)(next - line);
    }
    if (w != len && (ftruncate(fd, 0) < 0 || pwrite(fd, buf, w, 0) != (ssize_t)w))
        rc = rg_error_set(err, -errno, "config: %s", strerror(errno));
done:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

int fork_worktree_standalone(const char *dir, const fork_worktree *wt, rg_error *err)
{
    char from[PATH_MAX + 32], alt[PATH_MAX + 2];
    int dirfd, gfd = -1, rc = 0;
    size_t i;
    static const struct {
        int common, dir, optional;
        const char *name;
    } parts[] = {
        {0, 0, 0, "HEAD"},    {0, 0, 1, "index"}, {1, 0, 0, "config"}, {1, 0, 1, "packed-refs"},
        {1, 0, 1, "shallow"}, {1, 1, 1, "info"},  {1, 1, 0, "refs"},
    };

    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return rg_error_set(err, -errno, "%s: %s", dir, strerror(errno));
    if (mkdirat(dirfd, WT_STAGING, 0755) < 0 ||
        (gfd = openat(dirfd, WT_STAGING, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        rc = rg_error_set(err, -errno, "%s/%s: %s", dir, WT_STAGING, strerror(errno));
        goto done;
    }
    for (i = 0; rc == 0 && i < sizeof(parts) / sizeof(parts[0]); i++) {
        snprintf(from, sizeof(from), "%s/%s", parts[i].common ? wt->common : wt->gitdir,
                 parts[i].name);
        rc = parts[i].dir ? wt_copy_dir(gfd, parts[i].name, from, parts[i].optional, err)
                          : wt_copy_file(gfd, parts[i].name, from, parts[i].optional, err);
    }
    if (rc == 0)
        rc = wt_drop_worktree_key(gfd, err);
    /* The objects: the fork's own (empty) store, the original's as an alternate. */
    if (rc == 0 && (mkdirat(gfd, "objects", 0755) < 0 || mkdirat(gfd, "objects/info", 0755) < 0 ||
                    mkdirat(gfd, "objects/pack", 0755) < 0))
        rc = rg_error_set(err, -errno, "%s/%s/objects: %s", dir, WT_STAGING, strerror(errno));
    if (rc == 0) {
        int fd = openat(gfd, "objects/info/alternates",
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        int len = snprintf(alt, sizeof(alt), "%s\n", wt->objects);

        if (fd < 0 || len < 0 || (size_t)len >= sizeof(alt) || write(fd, alt, (size_t)len) != len)
            rc = rg_error_set(err, -EIO, "%s/objects/info/alternates: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    /* The gitfile goes only once its replacement is complete. */
    if (rc == 0 &&
        (unlinkat(dirfd, ".git", 0) < 0 || renameat(dirfd, WT_STAGING, dirfd, ".git") < 0))
        rc = rg_error_set(err, -errno, "%s/.git: %s", dir, strerror(errno));
    if (rc < 0)
        rg_error_wrap(err, "making the fork %s a repository of its own", dir);
done:
    if (gfd >= 0)
        close(gfd);
    if (rc < 0) {
        rg_error ignored = RG_ERROR_INIT;
        char staging[PATH_MAX + 32];

        snprintf(staging, sizeof(staging), "%s/%s", dir, WT_STAGING);
        fork_tree_remove(staging, &ignored);
    }
    close(dirfd);
    return rc;
}
