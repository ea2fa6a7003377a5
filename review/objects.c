/*
 * The private object database of `refgate diff`, and reading files without
 * following symlinks.
 *
 * Trees are written into an in-memory store; a blob is only a reference to
 * the file or symlink it was hashed from. libgit2 reads blob contents back
 * from the directories through a custom odb backend, which checks each one
 * against its id, so the patch always shows what was hashed. Every open is
 * relative to a directory already checked (openat with O_NOFOLLOW).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "review/review_int.h"
#include "util/fs.h"

/* ------------------------------------------------------------------------ */
/* The private object database                                              */
/* ------------------------------------------------------------------------ */

static size_t dd_oid_hash(const git_oid *id)
{
    uint64_t h;

    /* Object ids are uniformly distributed already. */
    memcpy(&h, id->id, sizeof(h));
    return (size_t)h;
}

static dd_obj *dd_store_find(dd_store *s, const git_oid *id)
{
    size_t i, mask;

    if (s->nslots == 0)
        return NULL;
    mask = s->nslots - 1;
    for (i = dd_oid_hash(id) & mask; s->slots[i] != 0; i = (i + 1) & mask) {
        dd_obj *o = &s->objs[s->slots[i] - 1];
        if (git_oid_equal(&o->id, id))
            return o;
    }
    return NULL;
}

static int dd_store_rehash(dd_store *s, size_t nslots)
{
    size_t *slots, i, j, mask = nslots - 1;

    slots = calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return -ENOMEM;
    for (i = 0; i < s->nobjs; i++) {
        for (j = dd_oid_hash(&s->objs[i].id) & mask; slots[j] != 0; j = (j + 1) & mask)
            ;
        slots[j] = i + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
    return 0;
}

/*
 * Add an object unless one with the same id is there (any copy of the same
 * bytes serves). `path` is copied; `data` is consumed in every case.
 */
int review_store_add(dd_store *s, const git_oid *id, git_object_t type, size_t size, int side,
                     bool link, const char *path, char *data)
{
    dd_obj *o;
    size_t i;
    int rc = 0;

    if (dd_store_find(s, id) != NULL)
        goto done;
    if ((s->nobjs + 1) * 2 > s->nslots) {
        rc = dd_store_rehash(s, s->nslots ? s->nslots * 2 : 1024);
        if (rc < 0)
            goto done;
    }
    if (s->nobjs == s->capobjs) {
        size_t cap = s->capobjs ? s->capobjs * 2 : 512;
        dd_obj *v = realloc(s->objs, cap * sizeof(*v));
        if (v == NULL) {
            rc = -ENOMEM;
            goto done;
        }
        s->objs = v;
        s->capobjs = cap;
    }
    o = &s->objs[s->nobjs];
    memset(o, 0, sizeof(*o));
    git_oid_cpy(&o->id, id);
    o->type = type;
    o->size = size;
    o->side = side;
    o->link = link;
    if (path != NULL && (o->path = strdup(path)) == NULL) {
        rc = -ENOMEM;
        goto done;
    }
    o->data = data;
    data = NULL;
    s->nobjs++;
    for (i = dd_oid_hash(id) & (s->nslots - 1); s->slots[i] != 0; i = (i + 1) & (s->nslots - 1))
        ;
    s->slots[i] = s->nobjs;
done:
    free(data);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Reading files without following symlinks                                 */
/* ------------------------------------------------------------------------ */

/*
 * Open the directory holding `rel` (relative to rootfd), one component at a
 * time with O_NOFOLLOW, so a symlink anywhere on the way fails (-ELOOP or
 * -ENOTDIR) instead of leading elsewhere. *name points at the last
 * component inside `rel`. A missing component is -ENOENT, or is created
 * when `create` is set. Returns a new fd or a negative errno.
 */
int review_open_parent(int rootfd, const char *rel, const char **name, bool create)
{
    const char *p = rel, *slash;
    char comp[NAME_MAX + 1];
    int fd, next;

    fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    while ((slash = strchr(p, '/')) != NULL) {
        size_t n = (size_t)(slash - p);
        if (n == 0 || n > NAME_MAX) {
            close(fd);
            return -EINVAL;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, comp, 0777) < 0 && errno != EEXIST) {
                int e = -errno;
                close(fd);
                return e;
            }
            next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0) {
            int e = errno == ELOOP ? -ENOTDIR : -errno;
            close(fd);
            return e;
        }
        close(fd);
        fd = next;
        p = slash + 1;
    }
    *name = p;
    return fd;
}

/*
 * Open a regular file for reading. O_NONBLOCK keeps a FIFO swapped in after
 * readdir or lstat looked from blocking the open; the fstat rejects it.
 */
int review_open_reg(int dirfd, const char *name, struct stat *st)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0)
        return -errno;
    if (fstat(fd, st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return -ESTALE;
    }
    return fd;
}

/* Exactly `size` bytes and then end of file, or -ESTALE: it changed. */
static int dd_read_exact(int fd, char *buf, size_t size)
{
    char extra;
    ssize_t n = rg_fs_read_full(fd, buf, size);

    if (n < 0)
        return (int)n;
    if ((size_t)n != size)
        return -ESTALE;
    n = rg_fs_read_full(fd, &extra, 1);
    if (n < 0)
        return (int)n;
    return n == 0 ? 0 : -ESTALE;
}

void review_scratch_free(dd_scratch *sc)
{
    free(sc->a);
    free(sc->b);
    free(sc->file);
    memset(sc, 0, sizeof(*sc));
}

/*
 * The blob id of the `size` bytes of an open regular file. Large files are
 * mapped rather than copied (libgit2 has no streaming hash) when `may_map`:
 * only for the base and the fork, which nothing writes to any more. A file
 * in the original may be truncated by an editor at any time, which would
 * turn a mapping into SIGBUS, so those are read.
 */
int review_hash_fd(git_oid *out, int fd, size_t size, bool may_map, dd_scratch *sc)
{
    void *map;
    int rc;

    if (size <= DD_READ_MAX || !may_map) {
        if (sc->filecap < size + 1) {
            char *p = realloc(sc->file, size + 1);
            if (p == NULL)
                return -ENOMEM;
            sc->file = p;
            sc->filecap = size + 1;
        }
        rc = dd_read_exact(fd, sc->file, size);
        if (rc < 0)
            return rc;
        return git_odb_hash(out, sc->file, size, GIT_OBJECT_BLOB) < 0 ? -EIO : 0;
    }
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
        return -errno;
    rc = git_odb_hash(out, map, size, GIT_OBJECT_BLOB) < 0 ? -EIO : 0;
    munmap(map, size);
    return rc;
}

/* *same = whether two open files of `size` bytes hold the same bytes. */
int review_same_bytes(bool *same, int fa, int fb, size_t size, dd_scratch *sc)
{
    size_t left = size;

    if (sc->a == NULL && (sc->a = malloc(DD_CHUNK)) == NULL)
        return -ENOMEM;
    if (sc->b == NULL && (sc->b = malloc(DD_CHUNK)) == NULL)
        return -ENOMEM;
    *same = false;
    while (left > 0) {
        size_t want = left < DD_CHUNK ? left : DD_CHUNK;
        ssize_t na = rg_fs_read_full(fa, sc->a, want), nb;
        if (na < 0)
            return (int)na;
        nb = rg_fs_read_full(fb, sc->b, want);
        if (nb < 0)
            return (int)nb;
        if ((size_t)na != want || (size_t)nb != want || memcmp(sc->a, sc->b, want) != 0)
            return 0;
        left -= want;
    }
    *same = true;
    return 0;
}

/* A symlink's target, as git stores it: the bytes readlink returns. */
int review_readlink(char **out, size_t *len, int dirfd, const char *name)
{
    size_t cap = 256;
    char *buf = NULL, *p;
    ssize_t n;

    for (;;) {
        p = realloc(buf, cap);
        if (p == NULL) {
            free(buf);
            return -ENOMEM;
        }
        buf = p;
        n = readlinkat(dirfd, name, buf, cap);
        if (n < 0) {
            int e = -errno;
            free(buf);
            return e;
        }
        if ((size_t)n < cap)
            break;
        if (cap >= 1u << 20) {
            free(buf);
            return -ENAMETOOLONG;
        }
        cap *= 2;
    }
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The odb backend                                                          */
/* ------------------------------------------------------------------------ */

static int dd_backend_fail(const char *path, int rc)
{
    char msg[600];

    snprintf(msg, sizeof(msg), "%s: %s", path,
             rc == -ESTALE ? "changed while being read" : strerror(-rc));
    git_error_set_str(GIT_ERROR_OS, msg);
    return -1;
}

/* Read blob `o` back from its directory into buf (o->size bytes). */
static int dd_backend_load(dd_store *s, const dd_obj *o, char *buf)
{
    const char *name;
    struct stat st;
    int pfd, fd, rc;

    pfd = review_open_parent(s->rootfd[o->side], o->path, &name, false);
    if (pfd < 0)
        return pfd;
    if (o->link) {
        char *target = NULL;
        size_t len;
        rc = review_readlink(&target, &len, pfd, name);
        if (rc == 0 && len != o->size)
            rc = -ESTALE;
        if (rc == 0)
            memcpy(buf, target, len);
        free(target);
    } else {
        fd = review_open_reg(pfd, name, &st);
        rc = fd < 0 ? fd : dd_read_exact(fd, buf, o->size);
        if (fd >= 0)
            close(fd);
    }
    close(pfd);
    return rc;
}

static int dd_backend_read(void **data, size_t *len, git_object_t *type, git_odb_backend *b,
                           const git_oid *id)
{
    dd_store *s = (dd_store *)b;
    dd_obj *o = dd_store_find(s, id);
    git_oid check;
    char *buf;
    int rc;

    if (o == NULL)
        return GIT_ENOTFOUND;
    buf = git_odb_backend_data_alloc(b, o->size + 1);
    if (buf == NULL)
        return -1;
    if (o->data != NULL) {
        memcpy(buf, o->data, o->size);
    } else {
        rc = dd_backend_load(s, o, buf);
        /* The id is what the patch shows: content that no longer matches
         * it must fail, whatever the process-wide verification setting. */
        if (rc == 0 &&
            (git_odb_hash(&check, buf, o->size, o->type) < 0 || !git_oid_equal(&check, id)))
            rc = -ESTALE;
        if (rc < 0) {
            git_odb_backend_data_free(b, buf);
            return dd_backend_fail(o->path, rc);
        }
    }
    *data = buf;
    *len = o->size;
    *type = o->type;
    return 0;
}

static int dd_backend_read_header(size_t *len, git_object_t *type, git_odb_backend *b,
                                  const git_oid *id)
{
    dd_obj *o = dd_store_find((dd_store *)b, id);

    if (o == NULL)
        return GIT_ENOTFOUND;
    *len = o->size;
    *type = o->type;
    return 0;
}

static int dd_backend_exists(git_odb_backend *b, const git_oid *id)
{
    return dd_store_find((dd_store *)b, id) != NULL;
}

static int dd_backend_write(git_odb_backend *b, const git_oid *id, const void *data, size_t len,
                            git_object_t type)
{
    char *copy = malloc(len + 1);

    if (copy == NULL) {
        git_error_set_oom();
        return -1;
    }
    memcpy(copy, data, len);
    if (review_store_add((dd_store *)b, id, type, len, -1, false, NULL, copy) < 0) {
        git_error_set_oom();
        return -1;
    }
    return 0;
}

void review_backend_free(git_odb_backend *b)
{
    dd_store *s = (dd_store *)b;
    size_t i;

    for (i = 0; i < s->nobjs; i++) {
        free(s->objs[i].path);
        free(s->objs[i].data);
    }
    free(s->objs);
    free(s->slots);
    free(s);
}

int review_store_new(dd_store **out)
{
    dd_store *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return -ENOMEM;
    if (git_odb_init_backend(&s->parent, GIT_ODB_BACKEND_VERSION) < 0) {
        free(s);
        return -EINVAL;
    }
    s->parent.read = dd_backend_read;
    s->parent.read_header = dd_backend_read_header;
    s->parent.exists = dd_backend_exists;
    s->parent.write = dd_backend_write;
    s->parent.free = review_backend_free;
    s->rootfd[0] = s->rootfd[1] = -1;
    *out = s;
    return 0;
}
