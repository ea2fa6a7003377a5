/*
 * Creating and removing forks; see fork.h.
 */
#include "fork/fork.h"

#include "fork/exclude.h"
#include "fork/layout.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int fork_paths(char **out_fork, char **out_base, const char *src, unsigned n, rg_error *err)
{
    const char *slash = strrchr(src, '/');
    char *fork = NULL, *base = NULL;
    int rc = 0;

    if (src[0] != '/' || slash == NULL || slash[1] == '\0') {
        rc = rg_error_set(err, -EINVAL, "cannot fork %s: a fork lives beside its directory", src);
        goto done;
    }
    rc = fork_layout_fork(&fork, src, n, err);
    if (rc == 0)
        rc = fork_layout_side_path(&base, fork, FORK_LAYOUT_BASE, err);
done:
    if (rc < 0) {
        free(fork);
        free(base);
        return rc;
    }
    *out_fork = fork;
    *out_base = base;
    return 0;
}

/* "/a/b.3" -> "/a/.b.3.run": beside the fork, named after it. */
static int fork_lock_path(fork_ws *f, rg_error *err)
{
    return fork_layout_side_path(&f->lock, f->path, FORK_LAYOUT_RUN, err);
}

/* Take the marker: held until the runner exits (or fork_free). A
 * stale file from a fork removed by hand is reused; one somebody holds
 * means a run still uses the name. */
static int fork_lock(fork_ws *f, rg_error *err)
{
    int rc = fork_lock_path(f, err);

    if (rc < 0)
        return rc;
    f->lock_fd = open(f->lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (f->lock_fd < 0)
        return rg_error_set(err, -errno, "%s: %s", f->lock, strerror(errno));
    if (flock(f->lock_fd, LOCK_EX | LOCK_NB) < 0)
        return rg_error_set(err, errno == EWOULDBLOCK ? -EBUSY : -errno, "%s: %s", f->lock,
                            errno == EWOULDBLOCK ? "locked by a run still alive" : strerror(errno));
    return 0;
}

/* Claim N: both directories are created, so the first free N is ours. */
static int fork_claim(fork_ws *f, rg_error *err)
{
    unsigned n;
    int rc;

    for (n = 1; n <= FORK_FORK_MAX; n++) {
        rc = fork_paths(&f->path, &f->base, f->src, n, err);
        if (rc < 0)
            return rc;
        if (mkdir(f->path, 0700) == 0) {
            if (mkdir(f->base, 0700) == 0) {
                f->n = n;
                return 0;
            }
            rc = -errno;
            rmdir(f->path);
        } else {
            rc = -errno;
        }
        if (rc != -EEXIST)
            return rg_error_set(err, rc, "creating the fork of %s: %s", f->src, strerror(-rc));
        free(f->path);
        free(f->base);
        f->path = f->base = NULL;
    }
    return rg_error_set(err, -EEXIST, "%s.1 to %s.%d all exist; remove old forks", f->src, f->src,
                        FORK_FORK_MAX);
}

static int fork_copy(fork_tree_stats *stats, const char *from, const char *to,
                     const fork_tree_opts *opts, rg_error *err)
{
    int sfd = -1, dfd = -1, rc = 0;

    sfd = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", from, strerror(errno));
        goto done;
    }
    dfd = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", to, strerror(errno));
        goto done;
    }
    rc = fork_tree_copy(stats, sfd, dfd, opts, err);
    if (rc < 0)
        rg_error_wrap(err, "copying %s to %s", from, to);
done:
    if (sfd >= 0)
        close(sfd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

int fork_create(fork_ws *out, const char *src, const fork_tree_opts *opts, rg_error *err)
{
    fork_ws f = FORK_FORK_INIT;
    fork_tree_opts second;
    struct timespec t0, t1;
    rg_error ignored = RG_ERROR_INIT;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    f.src = strdup(src);
    if (f.src == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    rc = fork_claim(&f, err);
    if (rc < 0)
        goto done;
    rc = fork_lock(&f, err);
    if (rc < 0) {
        fork_remove(&f, &ignored);
        goto done;
    }
    rc = fork_copy(&f.base_stats, f.src, f.base, opts, err);
    /* What the first copy left out is a placeholder in the base already:
     * the second copies the placeholders and is not asked again. */
    second = *opts;
    second.exclude = NULL;
    if (rc == 0)
        rc = fork_copy(&f.fork_stats, f.base, f.path, &second, err);
    if (rc < 0) {
        fork_remove(&f, &ignored);
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    f.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
done:
    if (rc < 0) {
        fork_free(&f);
        return rc;
    }
    *out = f;
    return 0;
}

int fork_parse(char **out_src, unsigned *out_n, const char *path)
{
    size_t len = strlen(path);
    int rc;

    *out_src = NULL;
    /* Canonical: absolute, no trailing slash (which layout would forgive). */
    if (path[0] != '/' || path[len - 1] == '/')
        return -EINVAL;
    rc = fork_layout_parse(out_src, out_n, path, NULL);
    if (rc == 0 && *out_n == 0)
        rc = -EINVAL; /* DIR.N in form, but no N refgate-run makes */
    if (rc < 0) {
        free(*out_src);
        *out_src = NULL;
    }
    return rc;
}

int fork_is_fork(const char *path)
{
    char *src = NULL, *fork = NULL, *base = NULL;
    struct stat st;
    unsigned n;
    int yes = 0;

    if (fork_parse(&src, &n, path) == 0 && fork_paths(&fork, &base, src, n, NULL) == 0)
        yes = strcmp(fork, path) == 0 && lstat(base, &st) == 0 && S_ISDIR(st.st_mode);
    free(src);
    free(fork);
    free(base);
    return yes;
}

int fork_open(fork_ws *out, const char *path, rg_error *err)
{
    fork_ws f = FORK_FORK_INIT;
    struct stat st;
    int rc;

    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || !fork_is_fork(path)) {
        rc = rg_error_set(err, -EINVAL,
                          "%s is not a fork made by refgate-run (a directory <dir>.<N> with "
                          ".<dir>.<N>.base beside it)",
                          path);
        goto done;
    }
    rc = fork_parse(&f.src, &f.n, path);
    if (rc == 0)
        rc = fork_paths(&f.path, &f.base, f.src, f.n, err);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "out of memory");
        goto done;
    }
    rc = fork_lock(&f, err);
    if (rc == -EBUSY)
        rg_error_wrap(err, "refusing to continue %s: its run is still alive", path);
    f.continued = 1;
done:
    if (rc < 0) {
        fork_free(&f);
        return rc;
    }
    *out = f;
    return 0;
}

int fork_remove(const fork_ws *f, rg_error *err)
{
    char *record;
    int rc = 0, rc2 = 0;

    if (f->path != NULL)
        rc = fork_tree_remove(f->path, err);
    if (f->base != NULL)
        rc2 = fork_tree_remove(f->base, rc < 0 ? NULL : err);
    /* The marker goes last, so nothing is applied from a half-removed fork. */
    if (f->path != NULL && fork_exclude_record_path(&record, f->path, NULL) == 0) {
        (void)unlink(record);
        free(record);
    }
    if (f->lock != NULL)
        (void)unlink(f->lock);
    return rc < 0 ? rc : rc2;
}

void fork_free(fork_ws *f)
{
    if (f == NULL)
        return;
    free(f->src);
    free(f->path);
    free(f->base);
    /* A zeroed struct has lock_fd 0 but no lock path: stdin stays open. */
    if (f->lock != NULL && f->lock_fd >= 0)
        close(f->lock_fd);
    free(f->lock);
    memset(f, 0, sizeof(*f));
    f->lock_fd = -1;
}
