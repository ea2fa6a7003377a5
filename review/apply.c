/*
 * Applying a `refgate diff` to the original directory.
 *
 * Each change is applied only where the original still holds what the base
 * held at that path (what the fork started from); anything else is refused
 * and reported, never overwritten. New content is read through the object
 * database, so what is written is what was hashed and shown.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "review/review_int.h"
#include "util/fs.h"

/* ------------------------------------------------------------------------ */
/* Applying to the original                                                 */
/* ------------------------------------------------------------------------ */

/*
 * What is at a path: nothing (mode 0), a file or symlink (its git mode and
 * blob id), a directory, or something else (a FIFO, a device).
 */
enum { DD_STATE_DIR = 1, DD_STATE_OTHER = 2 };

typedef struct dd_state {
    unsigned int mode;
    mode_t perm; /* permission bits of a regular file */
    git_oid id;
} dd_state;

static int dd_inspect(dd_state *out, int pfd, const char *name, dd_scratch *sc)
{
    struct stat st;
    char *target;
    size_t len;
    int fd, rc;

    memset(out, 0, sizeof(*out));
    if (pfd < 0)
        return 0;
    if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (S_ISLNK(st.st_mode)) {
        rc = review_readlink(&target, &len, pfd, name);
        if (rc < 0)
            return rc;
        rc = git_odb_hash(&out->id, target, len, GIT_OBJECT_BLOB) < 0 ? -EIO : 0;
        free(target);
        out->mode = DD_MODE_LINK;
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        out->mode = S_ISDIR(st.st_mode) ? DD_STATE_DIR : DD_STATE_OTHER;
        return 0;
    }
    fd = review_open_reg(pfd, name, &st);
    if (fd < 0)
        return fd;
    rc = review_hash_fd(&out->id, fd, (size_t)st.st_size, false, sc);
    close(fd);
    out->mode = review_file_mode(&st);
    out->perm = st.st_mode & 07777;
    return rc;
}

static void dd_state_of(dd_state *out, const git_diff_file *f)
{
    memset(out, 0, sizeof(*out));
    out->mode = f->mode;
    if (f->mode != 0)
        git_oid_cpy(&out->id, &f->id);
}

static bool dd_state_eq(const dd_state *a, const dd_state *b)
{
    if (a->mode != b->mode)
        return false;
    return a->mode == 0 || a->mode == DD_STATE_DIR || git_oid_equal(&a->id, &b->id);
}

/* Remove the directories above `rel` that its deletion left empty. */
static void dd_prune(int rootfd, const char *rel)
{
    char *buf = strdup(rel), *slash;
    const char *name;
    int pfd, rc;

    while (buf != NULL && (slash = strrchr(buf, '/')) != NULL) {
        *slash = '\0';
        pfd = review_open_parent(rootfd, buf, &name, false);
        if (pfd < 0)
            break;
        rc = unlinkat(pfd, name, AT_REMOVEDIR);
        close(pfd);
        if (rc < 0)
            break;
    }
    free(buf);
}

/*
 * Put the fork's version of a file or symlink at pfd/name: written beside it
 * under a temporary name, then renamed over it. `perm` is the permission to
 * keep for a file that existed (-1 for a new one: 0666 or 0777 less umask,
 * as git apply creates them).
 */
static int dd_install(int pfd, const char *name, unsigned int mode, const char *data, size_t len,
                      int perm)
{
    static unsigned int counter;
    char tmp[64];
    int fd, rc = 0;

    snprintf(tmp, sizeof(tmp), ".refgate-apply.%ld.%u", (long)getpid(), counter++);
    if (mode == DD_MODE_LINK) {
        char *target;
        if (memchr(data, '\0', len) != NULL)
            return -EINVAL;
        target = strndup(data, len);
        if (target == NULL)
            return -ENOMEM;
        rc = symlinkat(target, pfd, tmp) < 0 ? -errno : 0;
        free(target);
        if (rc < 0)
            return rc;
    } else {
        fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    mode == DD_MODE_EXEC ? 0777 : 0666);
        if (fd < 0)
            return -errno;
        rc = rg_fs_write_all(fd, data, len);
        if (rc == 0 && perm >= 0 && fchmod(fd, (mode_t)perm) < 0)
            rc = -errno;
        if (close(fd) < 0 && rc == 0)
            rc = -errno;
    }
    if (rc == 0 && renameat(pfd, tmp, pfd, name) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(pfd, tmp, 0);
    return rc;
}

/* The permission bits a modified file gets: its own, with x following git. */
static int dd_new_perm(const dd_state *cur, unsigned int new_mode)
{
    mode_t p = cur->perm;

    if (cur->mode != DD_MODE_FILE && cur->mode != DD_MODE_EXEC)
        return -1;
    if (new_mode == DD_MODE_EXEC && cur->mode != DD_MODE_EXEC)
        p |= (p & 0444) >> 2;
    else if (new_mode == DD_MODE_FILE)
        p &= (mode_t)~0111;
    return (int)p;
}

static const char dd_changed[] = "changed in the original since the fork";
static const char dd_too_large[] =
    "larger than the size limit, so never shown: not applied (see --max-file-size)";
static const char dd_changed_parent[] =
    "changed in the original since the fork (a parent is no longer a directory)";
static const char dd_in_the_way[] =
    "changed in the original since the fork (a directory is in the way)";

/* The fork's additions sorted by path, to tell what replaced a deletion. */
typedef struct dd_added {
    const git_diff_delta **v;
    size_t n;
} dd_added;

static int dd_added_cmp(const void *a, const void *b)
{
    const git_diff_delta *x = *(const git_diff_delta *const *)a;
    const git_diff_delta *y = *(const git_diff_delta *const *)b;

    return strcmp(x->new_file.path, y->new_file.path);
}

/*
 * The fork's state at a path the diff deletes: what an addition at the
 * same path puts there (a type change), a directory when additions go
 * below it, or nothing.
 */
static void dd_fork_state(dd_state *out, const dd_added *added, const char *path)
{
    size_t lo = 0, hi = added->n, len = strlen(path), i;

    memset(out, 0, sizeof(*out));
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(added->v[mid]->new_file.path, path) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Sorted: every path that starts with `path` follows, "a/..." among
     * them (after "a-x" and "a.x", which are skipped). */
    for (i = lo; i < added->n; i++) {
        const char *p = added->v[i]->new_file.path;
        if (strncmp(p, path, len) != 0)
            return;
        if (p[len] == '\0') {
            dd_state_of(out, &added->v[i]->new_file);
            return;
        }
        if (p[len] == '/') {
            out->mode = DD_STATE_DIR;
            return;
        }
    }
}

/*
 * Remove dirfd/name if it holds only directories that hold only
 * directories, and so on; -ENOTEMPTY as soon as anything else turns up
 * (the empty directories removed by then stay removed).
 */
static int dd_rmdir_empty(int dirfd, const char *name, unsigned int depth)
{
    dd_names names;
    size_t i;
    int fd, rc = 0;

    if (depth > DD_DEFAULT_DEPTH)
        return -ELOOP;
    fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    rc = review_list(&names, fd);
    for (i = 0; rc == 0 && i < names.n; i++) {
        int kind;
        /* review_list leaves out the .git family; a directory holding one is
         * not empty, so the rmdir below fails and it stays. */
        rc = review_kind(&kind, fd, &names.v[i]);
        if (rc == 0)
            rc = kind == DD_DIR ? dd_rmdir_empty(fd, names.v[i].name, depth + 1) : -ENOTEMPTY;
    }
    review_names_free(&names);
    close(fd);
    if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
        rc = -errno;
    return rc;
}

static void dd_tell(review_dirdiff_apply_fn report, void *payload, const char *path,
                    review_dirdiff_outcome outcome, const char *reason, size_t *refused)
{
    if (outcome == REVIEW_DIRDIFF_REFUSED)
        (*refused)++;
    if (report != NULL)
        report(path, outcome, reason, payload);
}

static int dd_apply_one(size_t *refused, review_dirdiff *d, int origfd, const git_diff_delta *delta,
                        const dd_added *added, dd_scratch *sc, review_dirdiff_apply_fn report,
                        void *payload, rg_error *err)
{
    const char *path = delta->old_file.path, *name = NULL;
    bool deleting = delta->status == GIT_DELTA_DELETED;
    bool adding = delta->status == GIT_DELTA_ADDED;
    dd_state cur, was, want;
    git_blob *blob = NULL;
    int pfd, rc, perm;

    pfd = review_open_parent(origfd, path, &name, false);
    if (pfd == -ENOTDIR) {
        dd_tell(report, payload, path, REVIEW_DIRDIFF_REFUSED, dd_changed_parent, refused);
        return 0;
    }
    if (pfd < 0 && pfd != -ENOENT)
        return rg_error_set(err, pfd, "original/%s: %s", path, strerror(-pfd));
    rc = dd_inspect(&cur, pfd, name ? name : path, sc);
    if (rc == -ESTALE) {
        /* It changed while being read: someone is editing it right now. */
        dd_tell(report, payload, path, REVIEW_DIRDIFF_REFUSED, dd_changed, refused);
        rc = 0;
        goto done;
    }
    if (rc < 0) {
        rg_error_set(err, rc, "original/%s: %s", path, strerror(-rc));
        goto done;
    }
    /* Deletions run first, so an addition expects nothing in its place. */
    if (adding)
        memset(&was, 0, sizeof(was));
    else
        dd_state_of(&was, &delta->old_file);
    if (deleting)
        dd_fork_state(&want, added, path);
    else
        dd_state_of(&want, &delta->new_file);
    if (dd_state_eq(&cur, &want)) {
        dd_tell(report, payload, path, REVIEW_DIRDIFF_ALREADY, NULL, refused);
        goto done;
    }
    /* A directory holding nothing but empty directories (which no patch
     * can express) may stand where the fork put a file: it goes, as no
     * file is lost. One holding anything else is the user's. */
    if (adding && cur.mode == DD_STATE_DIR && dd_rmdir_empty(pfd, name, 0) == 0)
        cur.mode = 0;
    if (!dd_state_eq(&cur, &was)) {
        dd_tell(report, payload, path, REVIEW_DIRDIFF_REFUSED,
                cur.mode == DD_STATE_DIR ? dd_in_the_way : dd_changed, refused);
        goto done;
    }
    if (deleting) {
        if (unlinkat(pfd, name, 0) < 0) {
            rc = rg_error_set(err, -errno, "original/%s: %s", path, strerror(errno));
            goto done;
        }
        dd_prune(origfd, path);
    } else {
        if (pfd < 0) {
            pfd = review_open_parent(origfd, path, &name, true);
            if (pfd == -ENOTDIR) {
                dd_tell(report, payload, path, REVIEW_DIRDIFF_REFUSED, dd_changed_parent, refused);
                goto done;
            }
            if (pfd < 0) {
                rc = rg_error_set(err, pfd, "original/%s: %s", path, strerror(-pfd));
                goto done;
            }
        }
        /* Read through the object database, so what is written is what
         * was hashed and shown, checked against its id. */
        if (git_blob_lookup(&blob, d->repo, &delta->new_file.id) < 0) {
            rc = rg_error_set(err, -EIO, "fork/%s: %s", path, review_git_msg());
            goto done;
        }
        perm = adding ? -1 : dd_new_perm(&cur, delta->new_file.mode);
        rc = dd_install(pfd, name, delta->new_file.mode, git_blob_rawcontent(blob),
                        (size_t)git_blob_rawsize(blob), perm);
        if (rc < 0) {
            rg_error_set(err, rc, "original/%s: %s", path, strerror(-rc));
            goto done;
        }
    }
    dd_tell(report, payload, path, REVIEW_DIRDIFF_APPLIED, NULL, refused);
done:
    git_blob_free(blob);
    if (pfd >= 0)
        close(pfd);
    return rc;
}

int review_dirdiff_apply(size_t *refused, review_dirdiff *d, const char *original,
                         review_dirdiff_apply_fn report, void *payload, rg_error *err)
{
    dd_scratch sc;
    dd_added added = {NULL, 0};
    struct stat st, other;
    size_t i, n = git_diff_num_deltas(d->diff);
    int origfd = -1, rc, pass, s;

    memset(&sc, 0, sizeof(sc));
    *refused = 0;
    rc = review_open_root(&origfd, original, "original", err);
    if (rc < 0)
        return rc;
    if (fstat(origfd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", original, strerror(errno));
        goto done;
    }
    for (s = 0; s < 2; s++) {
        if (fstat(d->rootfd[s], &other) == 0 && other.st_dev == st.st_dev &&
            other.st_ino == st.st_ino) {
            rc = rg_error_set(err, -EINVAL, "original %s is the %s itself", original,
                              review_side_name[s]);
            goto done;
        }
    }
    added.v = calloc(n ? n : 1, sizeof(*added.v));
    if (added.v == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (i = 0; i < n; i++) {
        const git_diff_delta *delta = git_diff_get_delta(d->diff, i);
        if (delta->status == GIT_DELTA_ADDED)
            added.v[added.n++] = delta;
    }
    qsort(added.v, added.n, sizeof(*added.v), dd_added_cmp);
    /* Fail closed: what could not be shown is not applied. */
    for (i = 0; i < d->nskips; i++)
        dd_tell(report, payload, d->skips[i].path, REVIEW_DIRDIFF_REFUSED, dd_too_large, refused);
    /* Deletions first, so that a path that changed type is free again. */
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < n; i++) {
            const git_diff_delta *delta = git_diff_get_delta(d->diff, i);
            if ((delta->status == GIT_DELTA_DELETED) != (pass == 0))
                continue;
            rc = dd_apply_one(refused, d, origfd, delta, &added, &sc, report, payload, err);
            if (rc < 0)
                goto done;
        }
    }
done:
    free(added.v);
    review_scratch_free(&sc);
    close(origfd);
    return rc;
}
