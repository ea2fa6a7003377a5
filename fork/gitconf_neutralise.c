/*
 * Neutralising a fork's .git after a run (see gitconf.h): its config
 * filtered (gitconf.c), its hooks and what a user's git would run moved
 * aside, in the submodules' and nested repositories' .git as well.
 */
#include "fork/gitconf.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork/gitconf_priv.h"
#include "util/buf.h"

/* ------------------------------------------------------------------------ */
/* The fork's .git                                                           */
/* ------------------------------------------------------------------------ */

typedef struct gc_run {
    fork_gitconf_tell_fn tell;
    void *ctx;
    int count;
    unsigned modules;
    rg_error *err;
} gc_run;

static void gc_told(gc_run *r, const char *where, const char *what)
{
    r->count++;
    if (r->tell != NULL)
        r->tell(r->ctx, where, what);
}

/* Read a small regular file at dirfd/name without following a link: 0 and
 * *out (malloc'd) on success, -ENOENT when absent, -EINVAL when not a
 * regular file, -EFBIG when larger than `max`. */
static int gc_read(char **out, size_t *len, int dirfd, const char *name, size_t max)
{
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    ssize_t n;
    int fd, rc = 0;

    *out = NULL;
    *len = 0;
    fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ELOOP ? -EINVAL : -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        goto done;
    }
    if ((size_t)st.st_size > max) {
        rc = -EFBIG;
        goto done;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        rc = -ENOMEM;
        goto done;
    }
    /* Bounded: at most st_size bytes are read. */
    while (got < (size_t)st.st_size) {
        n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            goto done;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    buf = NULL;
done:
    free(buf);
    close(fd);
    return rc;
}

/* Rename dirfd/name to the first free "<name><suffix>[.N]". */
int fork_gitconf_move_aside(int dirfd, const char *name, const char *suffix)
{
    char to[512];
    unsigned i;

    for (i = 0; i < 100; i++) {
        if (i == 0)
            snprintf(to, sizeof(to), "%s%s", name, suffix);
        else
            snprintf(to, sizeof(to), "%s%s.%u", name, suffix, i);
        if (renameat2(dirfd, name, dirfd, to, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Whether dirfd/name and basefd/name are both regular files with the same
 * bytes (a small file such as a gitfile or commondir). */
static int gc_same_file(int dirfd, int basefd, const char *name)
{
    char *a = NULL, *b = NULL;
    size_t la, lb;
    int same;

    same = basefd >= 0 && gc_read(&a, &la, dirfd, name, 65536) == 0 &&
           gc_read(&b, &lb, basefd, name, 65536) == 0 && la == lb && memcmp(a, b, la) == 0;
    free(a);
    free(b);
    return same;
}

/* Write `text` as gitfd/config by a new file renamed into place. */
static int gc_write_config(int gitfd, const char *text, const struct stat *was)
{
    static const char tmp[] = "config.refgate-run-tmp";
    size_t len = strlen(text), off = 0;
    ssize_t n;
    int fd, rc = 0;

    if (unlinkat(gitfd, tmp, 0) < 0 && errno != ENOENT)
        (void)fork_gitconf_move_aside(gitfd, tmp, ".old");
    fd = openat(gitfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    /* Bounded: each turn writes at least one byte. */
    while (off < len) {
        n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)n;
    }
    if (rc == 0 && was != NULL && geteuid() == 0 && fchown(fd, was->st_uid, was->st_gid) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(gitfd, tmp, gitfd, "config") < 0)
        rc = -errno;
    if (rc < 0)
        (void)unlinkat(gitfd, tmp, 0);
    return rc;
}

static int gc_config(gc_run *r, int gitfd, int basegit, const char *where)
{
    char *text = NULL, *base = NULL, *out = NULL;
    size_t len = 0, blen = 0;
    struct stat st;
    int rc, have;

    have = fstatat(gitfd, "config", &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!have)
        return errno == ENOENT
                   ? 0
                   : rg_error_set(r->err, -errno, "%s/config: %s", where, strerror(errno));
    rc = gc_read(&text, &len, gitfd, "config", GC_FILE_MAX);
    if (rc == -EINVAL || rc == -EFBIG) {
        gc_told(r, where, rc == -EINVAL ? "config (not a regular file)" : "config (too large)");
        rc = RG_E_CONFIG;
        out = strdup("");
        if (out == NULL)
            rc = -ENOMEM;
    } else if (rc < 0) {
        rg_error_set(r->err, rc, "%s/config: %s", where, strerror(-rc));
        goto done;
    } else {
        if (basegit >= 0)
            (void)gc_read(&base, &blen, basegit, "config", GC_FILE_MAX);
        rc = gc_filter_at(&out, text, len, base, blen, where, r->tell, r->ctx);
        if (rc == 1 || rc == RG_E_CONFIG)
            r->count++;
    }
    if (rc == -ENOMEM || rc == RG_E_TOO_BIG) {
        rc = rg_error_set(r->err, rc, "%s/config: out of memory", where);
        goto done;
    }
    if (rc == 0)
        goto done; /* nothing to remove: left as it is */
    /* Keep the run's version for the user to read; git never reads it. */
    /* The run may have put anything at that name (a directory, a link):
     * it goes aside itself rather than block this. */
    if (unlinkat(gitfd, "config.refgate-run-orig", 0) < 0 && errno != ENOENT)
        (void)fork_gitconf_move_aside(gitfd, "config.refgate-run-orig", ".old");
    if (renameat(gitfd, "config", gitfd, "config.refgate-run-orig") < 0) {
        rc = rg_error_set(r->err, -errno, "%s/config: %s", where, strerror(errno));
        goto done;
    }
    /* Never through a link: a config that was a symlink stays one. */
    (void)fchmodat(gitfd, "config.refgate-run-orig", 0600, AT_SYMLINK_NOFOLLOW);
    rc = gc_write_config(gitfd, out, &st);
    if (rc < 0)
        rg_error_set(r->err, rc, "%s/config: writing: %s", where, strerror(-rc));
done:
    free(text);
    free(base);
    free(out);
    return rc < 0 ? rc : 0;
}

/* Move the hooks directory aside when it holds anything git would run. */
static int gc_hooks(gc_run *r, int gitfd, const char *where)
{
    struct dirent *de;
    char what[300];
    unsigned told = 0, live = 0;
    struct stat st;
    DIR *d;
    int fd, rc;

    if (fstatat(gitfd, "hooks", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        fd = openat(gitfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        d = fd < 0 ? NULL : fdopendir(fd);
        if (d == NULL) {
            if (fd >= 0)
                close(fd);
            live = 1; /* unreadable: moved aside all the same */
        }
        /* Bounded: one directory's entries. */
        while (d != NULL && (de = readdir(d)) != NULL) {
            size_t n = strlen(de->d_name);
            if (de->d_name[0] == '.' || (n > 7 && strcmp(de->d_name + n - 7, ".sample") == 0))
                continue; /* git runs hooks by exact name only */
            live++;
            if (told++ < GC_HOOKS_TOLD) {
                snprintf(what, sizeof(what), "hooks/%.250s", de->d_name);
                gc_told(r, where, what);
            }
        }
        if (d != NULL)
            closedir(d);
        if (live == 0)
            return 0;
    } else {
        gc_told(r, where, "hooks (not a directory)");
    }
    rc = fork_gitconf_move_aside(gitfd, "hooks", ".refgate-disabled");
    if (rc < 0)
        return rg_error_set(r->err, rc, "%s/hooks: moving aside: %s", where, strerror(-rc));
    return 0;
}

static int gc_gitdir(gc_run *r, int gitfd, int basegit, const char *where, unsigned depth);

/*
 * The entries of a .git/modules directory (`listfd`, whose path is
 * `where`): a directory with a HEAD is a submodule repository; one without
 * is part of a name with slashes ("a/b" is modules/a/b).
 */
static int gc_modules_list(gc_run *r, int listfd, int baselist, const char *where, unsigned depth)
{
    struct dirent *de;
    char sub[1024];
    struct stat st;
    DIR *d;
    int fd, sfd, bfd, rc = 0;

    if (depth >= GC_DEPTH_MAX)
        return 0;
    fd = openat(listfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    /* Bounded: GC_MODULES_MAX directories in all, GC_DEPTH_MAX deep. */
    while (rc == 0 && (de = readdir(d)) != NULL && r->modules < GC_MODULES_MAX) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        sfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
            continue;
        r->modules++;
        snprintf(sub, sizeof(sub), "%s/%s", where, de->d_name);
        bfd = baselist < 0
                  ? -1
                  : openat(baselist, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fstatat(sfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0)
            rc = gc_gitdir(r, sfd, bfd, sub, depth + 1);
        else
            rc = gc_modules_list(r, sfd, bfd, sub, depth + 1);
        if (bfd >= 0)
            close(bfd);
        close(sfd);
    }
    closedir(d);
    return rc;
}

/* A git directory's modules/, where the submodules' repositories live. */
static int gc_modules(gc_run *r, int gitfd, int basegit, const char *where, unsigned depth)
{
    char sub[1024];
    int fd, bfd, rc;

    fd = openat(gitfd, "modules", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    bfd = basegit < 0 ? -1
                      : openat(basegit, "modules", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    snprintf(sub, sizeof(sub), "%s/modules", where);
    rc = gc_modules_list(r, fd, bfd, sub, depth);
    if (bfd >= 0)
        close(bfd);
    close(fd);
    return rc;
}

/* The run may have taken its own write permission away from a directory
 * (chmod 555 .git): the runner owns it, so it gives it back. */
static void gc_writable(int fd)
{
    struct stat st;

    if (fstat(fd, &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
        (void)fchmod(fd, (st.st_mode & 07777) | S_IRWXU);
}

/* One git directory: its config, hooks, commondir, config.worktree. */
static int gc_gitdir(gc_run *r, int gitfd, int basegit, const char *where, unsigned depth)
{
    static const char *const redirect[] = {"commondir", "config.worktree", NULL};
    char what[64];
    struct stat st;
    size_t i;
    int rc;

    gc_writable(gitfd);
    rc = gc_config(r, gitfd, basegit, where);
    if (rc == 0)
        rc = gc_hooks(r, gitfd, where);
    /* Either would point git at a configuration not rewritten here. */
    for (i = 0; rc == 0 && redirect[i] != NULL; i++) {
        if (fstatat(gitfd, redirect[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (gc_same_file(gitfd, basegit, redirect[i]) && strcmp(redirect[i], "commondir") == 0)
            continue;
        snprintf(what, sizeof(what), "%s", redirect[i]);
        gc_told(r, where, what);
        rc = fork_gitconf_move_aside(gitfd, redirect[i], ".refgate-disabled");
        if (rc < 0)
            rg_error_set(r->err, rc, "%s/%s: moving aside: %s", where, redirect[i], strerror(-rc));
    }
    if (rc == 0)
        rc = gc_modules(r, gitfd, basegit, where, depth);
    return rc;
}

/* A .git below the top of the fork (`name` in `dirfd`, whose path is
 * `rel`): a repository of its own, or a gitfile the base did not have. */
static int gc_nested(gc_run *r, int dirfd, int basedir, const char *rel)
{
    char where[4096], what[4200];
    struct stat st;
    int fd, bfd, rc;

    snprintf(where, sizeof(where), "%s%s.git", rel, rel[0] ? "/" : "");
    if (fstatat(dirfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        fd = openat(dirfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return rg_error_set(r->err, -errno, "%s: %s", where, strerror(errno));
        bfd = basedir < 0
                  ? -1
                  : openat(basedir, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rc = gc_gitdir(r, fd, bfd, where, 1);
        if (bfd >= 0)
            close(bfd);
        close(fd);
        return rc;
    }
    if (S_ISREG(st.st_mode) && gc_same_file(dirfd, basedir, ".git"))
        return 0;
    snprintf(what, sizeof(what), "%s (%s)", where,
             S_ISLNK(st.st_mode)   ? "a symlink"
             : S_ISREG(st.st_mode) ? "a new gitfile"
                                   : "odd");
    gc_told(r, "", what);
    rc = fork_gitconf_move_aside(dirfd, ".git", ".refgate-disabled");
    if (rc < 0)
        rg_error_set(r->err, rc, "%s: moving aside: %s", where, strerror(-rc));
    return rc;
}

/*
 * The fork's working tree, for a .git below the top: `git status` at the
 * top recurses into a submodule (a gitlink in the index, which the run
 * may have written) and reads that repository's config; `cd sub && git
 * status` reads it too. The top .git itself is handled by the caller.
 */
static int gc_worktree(gc_run *r, int wfd, int basedir, const char *rel, unsigned depth)
{
    struct dirent *de;
    char sub[4096];
    struct stat st;
    DIR *d;
    int fd, sfd, bfd, rc = 0, isdir;

    if (depth > 0 && (rc = gc_nested(r, wfd, basedir, rel)) < 0)
        return rc;
    if (depth >= GC_WALK_DEPTH)
        return 0; /* deeper than a fork is copied (tree.c) */
    fd = openat(wfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    /* Bounded: by the fork's tree, GC_WALK_DEPTH deep (one fd per level). */
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, ".git"))
            continue;
        isdir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN)
            isdir =
                fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (!isdir)
            continue;
        sfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
            continue;
        bfd = basedir < 0
                  ? -1
                  : openat(basedir, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        rc = gc_worktree(r, sfd, bfd, sub, depth + 1);
        if (bfd >= 0)
            close(bfd);
        close(sfd);
    }
    closedir(d);
    return rc;
}

int fork_gitconf_neutralise(int *out, const char *fork, const char *base, fork_gitconf_tell_fn tell,
                            void *ctx, rg_error *err)
{
    gc_run r = {tell, ctx, 0, 0, err};
    int forkfd = -1, basefd = -1, gitfd = -1, basegit = -1, rc = 0;
    struct stat st;

    *out = 0;
    forkfd = open(fork, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (forkfd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", fork, strerror(errno));
        goto done;
    }
    gc_writable(forkfd);
    if (base != NULL)
        basefd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* A .git the run created counts as much as one it was given: the
     * user's first git command in the fork would read it either way. */
    if (fstatat(forkfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
        goto done;
    if (!S_ISDIR(st.st_mode)) {
        /* A gitfile (a worktree's, a submodule's) is kept when the base
         * had the same; anything else would send git elsewhere. */
        if (S_ISREG(st.st_mode) && gc_same_file(forkfd, basefd, ".git"))
            goto done;
        gc_told(&r, "", S_ISLNK(st.st_mode) ? ".git (a symlink)" : ".git (not a directory)");
        rc = fork_gitconf_move_aside(forkfd, ".git", ".refgate-disabled");
        if (rc < 0)
            rg_error_set(err, rc, ".git: moving aside: %s", strerror(-rc));
        goto done;
    }
    gitfd = openat(forkfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (gitfd < 0) {
        rc = rg_error_set(err, -errno, "%s/.git: %s", fork, strerror(errno));
        goto done;
    }
    if (basefd >= 0)
        basegit = openat(basefd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    rc = gc_gitdir(&r, gitfd, basegit, ".git", 0);
    if (rc < 0) {
        /* Fail closed: a .git that could not be made safe is no repository
         * for git at all until the user looks at it. */
        close(gitfd);
        gitfd = -1;
        if (fork_gitconf_move_aside(forkfd, ".git", ".refgate-disabled") == 0)
            gc_told(&r, "", ".git (could not be neutralised: moved to .git.refgate-disabled)");
        goto done;
    }
    rc = gc_worktree(&r, forkfd, basefd, "", 0);
done:
    *out = r.count;
    if (rc < 0)
        rg_error_wrap(err, "neutralising %s/.git", fork);
    if (gitfd >= 0)
        close(gitfd);
    if (basegit >= 0)
        close(basegit);
    if (basefd >= 0)
        close(basefd);
    if (forkfd >= 0)
        close(forkfd);
    return rc;
}
