/*
 * Directory diff with libgit2; see dirdiff.h for what is trusted and why.
 *
 * Both directories are walked together, name by name, holding a directory
 * fd per level so that every open is relative to a directory already
 * checked (openat with O_NOFOLLOW): nothing the fork does with symlinks can
 * make the walk leave it. Entries identical on both sides (same type, same
 * executable bit, same bytes) are dropped there and then; the rest are
 * hashed into blob ids and written as tree objects into a private,
 * in-memory object database (a custom odb backend). libgit2 reads blob
 * contents back from the directories through that backend, which checks
 * each one against its id, so the patch always shows what was hashed.
 *
 * libgit2's ignore machinery needs a repository with a working directory:
 * a temporary bare repository is made under $TMPDIR and pointed at the base
 * with git_repository_set_workdir (which writes nothing into the base), and
 * given a config that holds only what is set here, so neither the user's
 * global config nor anything in the base or fork decides how it behaves.
 */
#include "review/dirdiff.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <git2.h>
#include <git2/sys/odb_backend.h>
#include <git2/sys/repository.h>

#include "util/fs.h"

#define DD_DEFAULT_DEPTH 256
#define DD_PATH_MAX      (64 * 1024)  /* longest relative path walked */
#define DD_CHUNK         (256 * 1024) /* compare buffer, per side */
#define DD_READ_MAX      (8u << 20)   /* larger files are mapped to hash them */

#define DD_MODE_FILE 0100644u
#define DD_MODE_EXEC 0100755u
#define DD_MODE_LINK 0120000u
#define DD_MODE_TREE 0040000u

enum { DD_BASE = 0, DD_FORK = 1 };

/* What a directory entry is, as far as a diff cares. */
enum { DD_NONE, DD_REG, DD_LNK, DD_DIR };

/* ------------------------------------------------------------------------ */
/* The private object database                                              */
/* ------------------------------------------------------------------------ */

/*
 * Trees live in memory; a blob is a reference to the file or symlink it was
 * hashed from (side + relative path), read again only when libgit2 needs
 * its content -- for a changed path, never for the thousands that are not.
 */
typedef struct dd_obj {
    git_oid id;
    git_object_t type;
    size_t size;
    int side; /* DD_BASE or DD_FORK for blobs, -1 for in-memory data */
    bool link;
    char *path;
    char *data;
} dd_obj;

typedef struct dd_store {
    git_odb_backend parent; /* first: libgit2 hands back this pointer */
    dd_obj *objs;
    size_t nobjs, capobjs;
    size_t *slots; /* open addressing: index + 1, 0 when empty */
    size_t nslots;
    int rootfd[2]; /* borrowed from the review_dirdiff */
} dd_store;

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
static int dd_store_add(dd_store *s, const git_oid *id, git_object_t type, size_t size, int side,
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
static int dd_open_parent(int rootfd, const char *rel, const char **name, bool create)
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
static int dd_open_reg(int dirfd, const char *name, struct stat *st)
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

/* Reusable buffers so that 50,000 small files do not mean 50,000 mallocs. */
typedef struct dd_scratch {
    char *a, *b; /* DD_CHUNK each, for comparing */
    char *file;  /* whole small files, for hashing */
    size_t filecap;
} dd_scratch;

static void dd_scratch_free(dd_scratch *sc)
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
static int dd_hash_fd(git_oid *out, int fd, size_t size, bool may_map, dd_scratch *sc)
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
static int dd_same_bytes(bool *same, int fa, int fb, size_t size, dd_scratch *sc)
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
static int dd_readlink(char **out, size_t *len, int dirfd, const char *name)
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

    pfd = dd_open_parent(s->rootfd[o->side], o->path, &name, false);
    if (pfd < 0)
        return pfd;
    if (o->link) {
        char *target = NULL;
        size_t len;
        rc = dd_readlink(&target, &len, pfd, name);
        if (rc == 0 && len != o->size)
            rc = -ESTALE;
        if (rc == 0)
            memcpy(buf, target, len);
        free(target);
    } else {
        fd = dd_open_reg(pfd, name, &st);
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
    if (dd_store_add((dd_store *)b, id, type, len, -1, false, NULL, copy) < 0) {
        git_error_set_oom();
        return -1;
    }
    return 0;
}

static void dd_backend_free(git_odb_backend *b)
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

static int dd_store_new(dd_store **out)
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
    s->parent.free = dd_backend_free;
    s->rootfd[0] = s->rootfd[1] = -1;
    *out = s;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The diff object                                                          */
/* ------------------------------------------------------------------------ */

/* A file left out for its size (review_dirdiff_skipped, owning its path). */
typedef struct dd_skip {
    char *path;
    long long size[2]; /* -1: absent on that side */
} dd_skip;

struct review_dirdiff {
    dd_skip *skips; /* bounded by the files walked */
    size_t nskips, capskips;
    char *tmpdir;         /* the private repository; removed by free */
    git_repository *repo; /* owns the odb, which owns the store */
    dd_store *store;
    git_index *index; /* the base's .git/index, when it has one */
    git_diff *diff;
    int rootfd[2];
    bool inited;
};

static const char *dd_git_msg(void)
{
    const git_error *e = git_error_last();

    return e && e->message ? e->message : "unknown libgit2 error";
}

void review_dirdiff_free(review_dirdiff *d)
{
    size_t i;

    if (d == NULL)
        return;
    for (i = 0; i < d->nskips; i++)
        free(d->skips[i].path);
    free(d->skips);
    git_diff_free(d->diff);
    git_index_free(d->index);
    git_repository_free(d->repo);
    if (d->tmpdir != NULL) {
        rg_fs_remove_tree(d->tmpdir, 0, NULL);
        free(d->tmpdir);
    }
    if (d->rootfd[0] >= 0)
        close(d->rootfd[0]);
    if (d->rootfd[1] >= 0)
        close(d->rootfd[1]);
    if (d->inited)
        git_libgit2_shutdown();
    free(d);
}

/*
 * git refuses to track `.git` in any case and the names NTFS resolves to it
 * (".git ", ".git.", "git~1", ".git:stream"), and `git apply` refuses
 * patches that touch them; they are skipped like .git itself. This mirrors
 * git's is_ntfs_dotgit().
 */
static bool dd_is_dotgit(const char *name)
{
    const char *p;

    if (name[0] == '.' && strncasecmp(name + 1, "git", 3) == 0)
        p = name + 4;
    else if (strncasecmp(name, "git~1", 5) == 0)
        p = name + 5;
    else
        return false;
    for (;; p++) {
        if (*p == '\0' || *p == '\\' || *p == ':')
            return true;
        if (*p != '.' && *p != ' ')
            return false;
    }
}

/*
 * The temporary repository that answers ignore questions about the base. Its
 * config is only what is set here: the excludes file is the base's
 * .git/info/exclude (or an empty file), the attributes file is empty, so
 * nothing falls back to ~/.config/git; the user's global and system config
 * never join in.
 */
static int dd_repo_open(review_dirdiff *d, const char *base, const char *tmp_parent, rg_error *err)
{
    git_repository_init_options io;
    rg_buf path = RG_BUF_INIT(PATH_MAX), cfgpath = RG_BUF_INIT(PATH_MAX);
    git_config *cfg = NULL;
    git_odb *odb = NULL;
    dd_store *store = NULL;
    char *abs_base = NULL;
    struct stat st;
    int rc, fd;

    /* Config values and libgit2's workdir want one absolute spelling. */
    abs_base = realpath(base, NULL);
    if (abs_base == NULL) {
        rc = rg_error_set(err, -errno, "base %s: %s", base, strerror(errno));
        goto done;
    }
    base = abs_base;
    if (tmp_parent == NULL)
        tmp_parent = getenv("TMPDIR");
    if (tmp_parent == NULL || *tmp_parent == '\0')
        tmp_parent = "/tmp";
    rc = rg_buf_printf(&path, "%s/refgate-diff.XXXXXX", tmp_parent);
    if (rc < 0) {
        rg_error_set(err, rc, "%s: temporary directory path too long", tmp_parent);
        goto done;
    }
    if (mkdtemp(path.data) == NULL) {
        rc = rg_error_set(err, -errno, "%s: %s", path.data, strerror(errno));
        goto done;
    }
    d->tmpdir = rg_buf_detach(&path);

    git_repository_init_options_init(&io, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
    io.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_NO_REINIT;
    if (git_repository_init_ext(&d->repo, d->tmpdir, &io) < 0) {
        rc = rg_error_set(err, -EIO, "temporary repository: %s", dd_git_msg());
        goto done;
    }

    /* An empty file for the settings that must not fall back to ~. */
    rc = rg_buf_printf(&path, "%s/empty", d->tmpdir);
    if (rc == 0)
        rc = rg_buf_printf(&cfgpath, "%s/config", d->tmpdir);
    if (rc < 0) {
        rg_error_set(err, rc, "%s: path too long", d->tmpdir);
        goto done;
    }
    fd = open(path.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path.data, strerror(errno));
        goto done;
    }
    close(fd);

    if (git_config_open_ondisk(&cfg, cfgpath.data) < 0 ||
        git_config_set_string(cfg, "core.attributesfile", path.data) < 0 ||
        git_config_set_bool(cfg, "core.ignorecase", 0) < 0) {
        rc = rg_error_set(err, -EIO, "temporary repository config: %s", dd_git_msg());
        goto done;
    }
    rg_buf_reset(&path);
    rc = rg_buf_printf(&path, "%s/.git/info/exclude", base);
    if (rc < 0) {
        rg_error_set(err, rc, "%s: path too long", base);
        goto done;
    }
    if (lstat(path.data, &st) < 0 || !S_ISREG(st.st_mode)) {
        rg_buf_reset(&path);
        rg_buf_printf(&path, "%s/empty", d->tmpdir);
    }
    if (git_config_set_string(cfg, "core.excludesfile", path.data) < 0 ||
        git_repository_set_config(d->repo, cfg) < 0) {
        rc = rg_error_set(err, -EIO, "temporary repository config: %s", dd_git_msg());
        goto done;
    }

    rc = dd_store_new(&store);
    if (rc < 0) {
        rg_error_set(err, rc, "out of memory");
        goto done;
    }
    store->rootfd[0] = d->rootfd[0];
    store->rootfd[1] = d->rootfd[1];
    if (git_odb_new(&odb) < 0) {
        rc = rg_error_set(err, -ENOMEM, "object database: %s", dd_git_msg());
        goto done;
    }
    if (git_odb_add_backend(odb, &store->parent, 1) < 0) {
        rc = rg_error_set(err, -ENOMEM, "object database: %s", dd_git_msg());
        goto done;
    }
    d->store = store;
    store = NULL; /* the odb owns it now */
    if (git_repository_set_odb(d->repo, odb) < 0 ||
        git_repository_set_workdir(d->repo, base, 0) < 0) {
        rc = rg_error_set(err, -EIO, "temporary repository: %s", dd_git_msg());
        goto done;
    }

    /* Tracked files stay visible even when an ignore rule matches them,
     * as in git. An index libgit2 cannot read only loses that exception. */
    rg_buf_reset(&path);
    rc = rg_buf_printf(&path, "%s/.git/index", base);
    if (rc < 0) {
        rg_error_set(err, rc, "%s: path too long", base);
        goto done;
    }
    if (lstat(path.data, &st) == 0 && S_ISREG(st.st_mode) &&
        git_index_open(&d->index, path.data) < 0) {
        git_index_free(d->index);
        d->index = NULL;
    }
    rc = 0;
done:
    free(abs_base);
    if (store != NULL)
        dd_backend_free(&store->parent);
    git_odb_free(odb);
    git_config_free(cfg);
    rg_buf_free(&path);
    rg_buf_free(&cfgpath);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Walking both directories                                                 */
/* ------------------------------------------------------------------------ */

typedef struct dd_walk {
    review_dirdiff *d;
    dd_scratch sc;
    rg_buf query; /* the ignore question being asked */
    unsigned int max_depth;
    unsigned long long max_size; /* larger files are skipped, not read */
    const char **excluded;       /* sorted; left out of both sides */
    size_t nexcluded;
    rg_error *err;
} dd_walk;

typedef struct dd_tent {
    unsigned int mode;
    const char *name;
    git_oid id;
} dd_tent;

typedef struct dd_tvec {
    dd_tent *v;
    size_t n, cap;
} dd_tvec;

/* A directory's entries: names, and what readdir says each one is. */
typedef struct dd_name {
    char *name;
    unsigned char type; /* DT_* */
} dd_name;

typedef struct dd_names {
    dd_name *v;
    size_t n, cap;
} dd_names;

static void dd_names_free(dd_names *l)
{
    size_t i;

    for (i = 0; i < l->n; i++)
        free(l->v[i].name);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static int dd_name_cmp(const void *a, const void *b)
{
    return strcmp(((const dd_name *)a)->name, ((const dd_name *)b)->name);
}

/* The sorted entries of a directory, without ., .. and the .git family. */
static int dd_list(dd_names *out, int dirfd)
{
    struct dirent *de;
    DIR *dir;
    int fd, rc = 0;

    memset(out, 0, sizeof(*out));
    if (dirfd < 0)
        return 0;
    fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    dir = fdopendir(fd);
    if (dir == NULL) {
        rc = -errno;
        close(fd);
        return rc;
    }
    for (;;) {
        errno = 0;
        de = readdir(dir);
        if (de == NULL) {
            rc = -errno;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || dd_is_dotgit(de->d_name))
            continue;
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 32;
            dd_name *v = realloc(out->v, cap * sizeof(*v));
            if (v == NULL) {
                rc = -ENOMEM;
                break;
            }
            out->v = v;
            out->cap = cap;
        }
        if ((out->v[out->n].name = strdup(de->d_name)) == NULL) {
            rc = -ENOMEM;
            break;
        }
        out->v[out->n].type = de->d_type;
        out->n++;
    }
    closedir(dir);
    if (rc < 0) {
        dd_names_free(out);
        return rc;
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(*out->v), dd_name_cmp);
    return 0;
}

static int dd_tvec_push(dd_tvec *t, unsigned int mode, const char *name, const git_oid *id)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        dd_tent *v = realloc(t->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n].mode = mode;
    t->v[t->n].name = name;
    git_oid_cpy(&t->v[t->n].id, id);
    t->n++;
    return 0;
}

/* git's tree order: byte order, as if every directory name ended in '/'. */
static int dd_tent_cmp(const void *a, const void *b)
{
    const dd_tent *x = a, *y = b;
    size_t lx = strlen(x->name), ly = strlen(y->name), n = lx < ly ? lx : ly;
    int c = memcmp(x->name, y->name, n);
    unsigned char cx, cy;

    if (c != 0)
        return c;
    cx = n < lx ? (unsigned char)x->name[n] : x->mode == DD_MODE_TREE ? '/' : '\0';
    cy = n < ly ? (unsigned char)y->name[n] : y->mode == DD_MODE_TREE ? '/' : '\0';
    return (int)cx - (int)cy;
}

/* Serialise a tree object into the store. */
static int dd_tree_write(git_oid *out, dd_store *s, dd_tvec *t)
{
    rg_buf b = RG_BUF_INIT(SIZE_MAX / 2);
    size_t i;
    int rc = 0;

    if (t->n > 1)
        qsort(t->v, t->n, sizeof(*t->v), dd_tent_cmp);
    for (i = 0; i < t->n && rc == 0; i++) {
        rc = rg_buf_printf(&b, "%o %s", t->v[i].mode, t->v[i].name);
        if (rc == 0)
            rc = rg_buf_append(&b, "", 1); /* the NUL before the raw id */
        if (rc == 0)
            rc = rg_buf_append(&b, t->v[i].id.id, GIT_OID_RAWSZ);
    }
    if (rc == 0 && b.data == NULL)
        rc = rg_buf_append(&b, "", 0);
    if (rc < 0)
        goto done;
    if (git_odb_hash(out, b.data, b.len, GIT_OBJECT_TREE) < 0) {
        rc = -EIO;
        goto done;
    }
    i = b.len;
    rc = dd_store_add(s, out, GIT_OBJECT_TREE, i, -1, false, NULL, rg_buf_detach(&b));
done:
    rg_buf_free(&b);
    return rc;
}

static const char *const dd_side_name[2] = {"base", "fork"};

static int dd_fail(dd_walk *w, int rc, int side, const char *rel)
{
    return rg_error_set(w->err, rc, "%s%s%s: %s", dd_side_name[side], *rel ? "/" : "", rel,
                        rc == -ESTALE ? "changed while being read" : strerror(-rc));
}

/*
 * Whether `rel` is hidden by the base's rules. An ignored path stays
 * visible when the base's index tracks it (or, for a directory, anything
 * under it), as git does; files inside an ignored directory are still
 * ignored because libgit2 also checks the parents.
 */
static int dd_hidden(bool *out, dd_walk *w, const char *rel, bool is_dir)
{
    int ignored = 0, rc;
    size_t pos;

    rg_buf_reset(&w->query);
    rc = rg_buf_printf(&w->query, "%s%s", rel, is_dir ? "/" : "");
    if (rc < 0)
        return rg_error_set(w->err, rc, "%s: path too long", rel);
    if (git_ignore_path_is_ignored(&ignored, w->d->repo, w->query.data) < 0)
        return rg_error_set(w->err, -EIO, "%s: ignore rules: %s", rel, dd_git_msg());
    if (ignored && w->d->index != NULL) {
        if (is_dir)
            ignored = git_index_find_prefix(&pos, w->d->index, w->query.data) != 0;
        else
            ignored = git_index_get_bypath(w->d->index, rel, 0) == NULL;
    }
    *out = ignored != 0;
    return 0;
}

static unsigned int dd_file_mode(const struct stat *st)
{
    /* git records only the owner's execute bit. */
    return (st->st_mode & S_IXUSR) ? DD_MODE_EXEC : DD_MODE_FILE;
}

/*
 * What an entry is. readdir's d_type saves an lstat per entry; where the
 * filesystem does not fill it in, lstat. FIFOs, sockets and devices are not
 * content and count as absent; they are never opened.
 */
static int dd_kind(int *out, int dirfd, const dd_name *e)
{
    struct stat st;
    unsigned char type = e->type;

    if (type == DT_UNKNOWN) {
        if (fstatat(dirfd, e->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        type = S_ISREG(st.st_mode)   ? DT_REG
               : S_ISLNK(st.st_mode) ? DT_LNK
               : S_ISDIR(st.st_mode) ? DT_DIR
                                     : DT_FIFO;
    }
    *out = type == DT_REG ? DD_REG : type == DT_LNK ? DD_LNK : type == DT_DIR ? DD_DIR : DD_NONE;
    return 0;
}

/* Record a file too large to read; `size` per side, -1 where absent. */
static int dd_skip_add(dd_walk *w, const char *rel, long long base_size, long long fork_size)
{
    review_dirdiff *d = w->d;
    dd_skip *v;

    if (d->nskips == d->capskips) {
        size_t cap = d->capskips ? d->capskips * 2 : 8;
        v = realloc(d->skips, cap * sizeof(*v));
        if (v == NULL)
            return rg_error_set(w->err, -ENOMEM, "out of memory");
        d->skips = v;
        d->capskips = cap;
    }
    v = &d->skips[d->nskips];
    v->path = strdup(rel);
    if (v->path == NULL)
        return rg_error_set(w->err, -ENOMEM, "out of memory");
    v->size[DD_BASE] = base_size;
    v->size[DD_FORK] = fork_size;
    d->nskips++;
    return 0;
}

/* Record a blob and its tree entry on one side. */
static int dd_record(dd_walk *w, int side, const char *name, const char *rel, unsigned int mode,
                     const git_oid *id, size_t size, dd_tvec *t)
{
    int rc =
        dd_store_add(w->d->store, id, GIT_OBJECT_BLOB, size, side, mode == DD_MODE_LINK, rel, NULL);

    if (rc == 0)
        rc = dd_tvec_push(t, mode, name, id);
    return rc < 0 ? dd_fail(w, rc, side, rel) : 0;
}

static int dd_add_link(dd_walk *w, int side, int dirfd, const char *name, const char *rel,
                       dd_tvec *t)
{
    char *target = NULL;
    size_t len;
    git_oid id;
    int rc;

    rc = dd_readlink(&target, &len, dirfd, name);
    if (rc == 0)
        rc = git_odb_hash(&id, target, len, GIT_OBJECT_BLOB) < 0 ? -EIO : 0;
    free(target);
    if (rc < 0)
        return dd_fail(w, rc, side, rel);
    return dd_record(w, side, name, rel, DD_MODE_LINK, &id, len, t);
}

/* Hash an open regular file (from its start) and record it. */
static int dd_add_fd(dd_walk *w, int side, int fd, const struct stat *st, const char *name,
                     const char *rel, dd_tvec *t)
{
    git_oid id;
    int rc;

    if (lseek(fd, 0, SEEK_SET) < 0)
        return dd_fail(w, -errno, side, rel);
    rc = dd_hash_fd(&id, fd, (size_t)st->st_size, true, &w->sc);
    if (rc < 0)
        return dd_fail(w, rc, side, rel);
    return dd_record(w, side, name, rel, dd_file_mode(st), &id, (size_t)st->st_size, t);
}

static int dd_add_reg(dd_walk *w, int side, int dirfd, const char *name, const char *rel,
                      dd_tvec *t)
{
    struct stat st;
    int fd, rc;

    fd = dd_open_reg(dirfd, name, &st);
    if (fd < 0)
        return dd_fail(w, fd, side, rel);
    /* The apparent size: a sparse file is as large as it claims. */
    if ((unsigned long long)st.st_size > w->max_size)
        rc = dd_skip_add(w, rel, side == DD_BASE ? (long long)st.st_size : -1,
                         side == DD_FORK ? (long long)st.st_size : -1);
    else
        rc = dd_add_fd(w, side, fd, &st, name, rel, t);
    close(fd);
    return rc;
}

/* Files compared before the ignore rules are asked; larger ones after. */
#define DD_COMPARE_FIRST (64 * 1024)

/*
 * A regular file on both sides: dropped when mode and bytes match;
 * otherwise, unless the base's rules hide it, both are recorded. Bytes are
 * compared before anything is hashed, because comparing is an order of
 * magnitude faster than SHA-1 and nearly every file in a fork is unchanged.
 * For small files the comparison also comes before the ignore question,
 * which costs more than reading them and only matters for changed paths.
 */
static int dd_pair_reg(dd_walk *w, int dirfd[2], const char *name, const char *rel, dd_tvec t[2])
{
    struct stat st[2];
    int fd[2] = {-1, -1}, rc = 0, s;
    bool same = false, hidden = false, asked = false;
    size_t size;

    for (s = 0; s < 2; s++) {
        fd[s] = dd_open_reg(dirfd[s], name, &st[s]);
        if (fd[s] < 0) {
            rc = dd_fail(w, fd[s], s, rel);
            goto done;
        }
    }
    size = (size_t)st[0].st_size;
    /* Never read, not even to compare: listed whether or not it changed. */
    if ((unsigned long long)st[0].st_size > w->max_size ||
        (unsigned long long)st[1].st_size > w->max_size) {
        rc = dd_hidden(&hidden, w, rel, false);
        if (rc == 0 && !hidden)
            rc = dd_skip_add(w, rel, (long long)st[0].st_size, (long long)st[1].st_size);
        goto done;
    }
    if (st[0].st_size != st[1].st_size || size > DD_COMPARE_FIRST) {
        rc = dd_hidden(&hidden, w, rel, false);
        if (rc < 0 || hidden)
            goto done;
        asked = true;
    }
    if (st[0].st_size == st[1].st_size) {
        /* Start reading the fork's copy while the base's is read: on a
         * cold cache, two reads in flight instead of one. */
        posix_fadvise(fd[1], 0, 0, POSIX_FADV_WILLNEED);
        rc = dd_same_bytes(&same, fd[0], fd[1], size, &w->sc);
        if (rc < 0) {
            rc = dd_fail(w, rc, DD_FORK, rel);
            goto done;
        }
    }
    if (same && dd_file_mode(&st[0]) == dd_file_mode(&st[1]))
        goto done;
    if (!asked && ((rc = dd_hidden(&hidden, w, rel, false)) < 0 || hidden))
        goto done;
    for (s = 0; s < 2 && rc == 0; s++)
        rc = dd_add_fd(w, s, fd[s], &st[s], name, rel, &t[s]);
done:
    for (s = 0; s < 2; s++)
        if (fd[s] >= 0)
            close(fd[s]);
    return rc;
}

/* A symlink on both sides: dropped when the targets match. */
static int dd_pair_link(dd_walk *w, int dirfd[2], const char *name, const char *rel, dd_tvec t[2])
{
    char *target[2] = {NULL, NULL};
    size_t len[2];
    bool hidden = false;
    int rc = 0, s;

    for (s = 0; s < 2; s++) {
        rc = dd_readlink(&target[s], &len[s], dirfd[s], name);
        if (rc < 0) {
            rc = dd_fail(w, rc, s, rel);
            goto done;
        }
    }
    if (len[0] == len[1] && memcmp(target[0], target[1], len[0]) == 0)
        goto done;
    rc = dd_hidden(&hidden, w, rel, false);
    for (s = 0; s < 2 && rc == 0 && !hidden; s++)
        rc = dd_add_link(w, s, dirfd[s], name, rel, &t[s]);
done:
    free(target[0]);
    free(target[1]);
    return rc;
}

static int dd_walk_dir(dd_walk *w, int dirfd[2], rg_buf *rel, unsigned int depth, git_oid tree[2],
                       bool have[2]);

/* Descend into `name` on the sides where it is a directory. */
static int dd_descend(dd_walk *w, int dirfd[2], const bool isdir[2], const char *name, rg_buf *rel,
                      unsigned int depth, dd_tvec t[2])
{
    int sub[2] = {-1, -1}, rc = 0, s;
    git_oid tree[2];
    bool have[2] = {false, false};

    for (s = 0; s < 2; s++) {
        if (!isdir[s])
            continue;
        sub[s] = openat(dirfd[s], name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub[s] < 0) {
            rc = dd_fail(w, -errno, s, rel->data);
            goto done;
        }
    }
    rc = dd_walk_dir(w, sub, rel, depth + 1, tree, have);
    for (s = 0; s < 2 && rc == 0; s++)
        if (have[s] && (rc = dd_tvec_push(&t[s], DD_MODE_TREE, name, &tree[s])) < 0)
            rc = rg_error_set(w->err, rc, "out of memory");
done:
    for (s = 0; s < 2; s++)
        if (sub[s] >= 0)
            close(sub[s]);
    return rc;
}

static int dd_str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether `rel` is a path refgate-run left out of the fork. Nothing below
 * one is reached: the walk stops at it. */
static bool dd_excluded(const dd_walk *w, const char *rel)
{
    return w->nexcluded > 0 &&
           bsearch(&rel, w->excluded, w->nexcluded, sizeof(*w->excluded), dd_str_cmp) != NULL;
}

/* Look at one name present on one side or both (e[s] NULL where absent). */
static int dd_walk_entry(dd_walk *w, int dirfd[2], const dd_name *e[2], rg_buf *rel,
                         unsigned int depth, dd_tvec t[2])
{
    const char *name = e[0] ? e[0]->name : e[1]->name;
    int kind[2] = {DD_NONE, DD_NONE}, rc, s;
    bool hidden[2] = {false, false}, asked[2] = {false, false}, isdir[2];

    /* Excluded: a placeholder on both sides, the original's content
     * elsewhere; whatever is there, it is neither shown nor applied. */
    if (dd_excluded(w, rel->data))
        return 0;

    for (s = 0; s < 2; s++)
        if (e[s] != NULL && (rc = dd_kind(&kind[s], dirfd[s], e[s])) < 0)
            return dd_fail(w, rc, s, rel->data);
    if (kind[0] == DD_REG && kind[1] == DD_REG)
        return dd_pair_reg(w, dirfd, name, rel->data, t);
    if (kind[0] == DD_LNK && kind[1] == DD_LNK)
        return dd_pair_link(w, dirfd, name, rel->data, t);

    /* Different on each side: ask the rules once per kind (file or
     * directory), then record each side's leaf or walk its directory. */
    for (s = 0; s < 2; s++) {
        int dir = kind[s] == DD_DIR;
        if (kind[s] == DD_NONE)
            continue;
        if (!asked[dir]) {
            rc = dd_hidden(&hidden[dir], w, rel->data, dir);
            if (rc < 0)
                return rc;
            asked[dir] = true;
        }
        if (hidden[dir])
            kind[s] = DD_NONE;
    }
    for (s = 0; s < 2; s++) {
        isdir[s] = kind[s] == DD_DIR;
        rc = kind[s] == DD_REG   ? dd_add_reg(w, s, dirfd[s], name, rel->data, &t[s])
             : kind[s] == DD_LNK ? dd_add_link(w, s, dirfd[s], name, rel->data, &t[s])
                                 : 0;
        if (rc < 0)
            return rc;
    }
    if (isdir[0] || isdir[1])
        return dd_descend(w, dirfd, isdir, name, rel, depth, t);
    return 0;
}

/*
 * Compare one directory of the base and the fork (dirfd -1 where a side
 * has no such directory). `rel` holds its path relative to the roots ("" at
 * the top). Sets tree[s] and have[s] for each side with anything to show.
 */
static int dd_walk_dir(dd_walk *w, int dirfd[2], rg_buf *rel, unsigned int depth, git_oid tree[2],
                       bool have[2])
{
    dd_names names[2];
    dd_tvec t[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
    size_t i[2] = {0, 0}, mark = rel->len;
    int rc = 0, s;

    memset(names, 0, sizeof(names));
    if (depth > w->max_depth) {
        rc = rg_error_set(w->err, -ELOOP, "%s: nested deeper than %u directories", rel->data,
                          w->max_depth);
        goto done;
    }
    for (s = 0; s < 2; s++) {
        rc = dd_list(&names[s], dirfd[s]);
        if (rc < 0) {
            rc = dd_fail(w, rc, s, rel->data);
            goto done;
        }
    }
    while (i[0] < names[0].n || i[1] < names[1].n) {
        const dd_name *e[2] = {NULL, NULL};
        int c;

        if (i[0] == names[0].n)
            c = 1;
        else if (i[1] == names[1].n)
            c = -1;
        else
            c = strcmp(names[0].v[i[0]].name, names[1].v[i[1]].name);
        if (c <= 0)
            e[0] = &names[0].v[i[0]++];
        if (c >= 0)
            e[1] = &names[1].v[i[1]++];

        rc = rg_buf_printf(rel, "%s%s", mark ? "/" : "", e[0] ? e[0]->name : e[1]->name);
        if (rc < 0) {
            /* A capped buffer frees itself when it would pass the cap. */
            rc = rg_error_set(w->err, rc, "a path longer than %d bytes", DD_PATH_MAX);
            goto done;
        }
        rc = dd_walk_entry(w, dirfd, e, rel, depth, t);
        if (rel->data == NULL) {
            rc = rc < 0 ? rc : -ENOMEM;
            goto done;
        }
        rel->len = mark;
        rel->data[mark] = '\0';
        if (rc < 0)
            goto done;
    }
    for (s = 0; s < 2; s++) {
        have[s] = t[s].n > 0;
        if (have[s] && (rc = dd_tree_write(&tree[s], w->d->store, &t[s])) < 0) {
            rc = rg_error_set(w->err, rc, "%s: writing a tree: %s", rel->data, strerror(-rc));
            goto done;
        }
    }
done:
    /* Tree entries point at the names, so they go first. */
    free(t[0].v);
    free(t[1].v);
    dd_names_free(&names[0]);
    dd_names_free(&names[1]);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Building the diff                                                        */
/* ------------------------------------------------------------------------ */

/* Pointers to the NUL-terminated paths of `list`, sorted for bsearch. */
static int dd_excluded_list(const char ***out, size_t *n, const char *list, size_t len)
{
    const char **v;
    size_t off, k = 0;

    for (off = 0; off < len; off += strnlen(list + off, len - off) + 1)
        k++;
    v = calloc(k ? k : 1, sizeof(*v));
    if (v == NULL)
        return -ENOMEM;
    k = 0;
    /* An unterminated last path is left out rather than read past. */
    for (off = 0; off < len; off += strlen(list + off) + 1)
        if (strnlen(list + off, len - off) < len - off && list[off] != '\0')
            v[k++] = list + off;
        else
            break;
    qsort(v, k, sizeof(*v), dd_str_cmp);
    *out = v;
    *n = k;
    return 0;
}

static int dd_open_root(int *out, const char *path, const char *what, rg_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0)
        return rg_error_set(err, -errno, "%s %s: %s", what, path, strerror(errno));
    *out = fd;
    return 0;
}

int review_dirdiff_new(review_dirdiff **out, const char *base, const char *fork,
                       const review_dirdiff_opts *opts, rg_error *err)
{
    git_diff_options dopts;
    git_tree *tree[2] = {NULL, NULL};
    git_oid id[2];
    bool have[2] = {false, false};
    dd_walk w;
    rg_buf rel = RG_BUF_INIT(DD_PATH_MAX);
    struct stat st[2];
    review_dirdiff *d;
    dd_tvec empty = {NULL, 0, 0};
    int rc, s;

    memset(&w, 0, sizeof(w));
    rg_buf_init(&w.query, DD_PATH_MAX + 1);
    *out = NULL;
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    d->rootfd[0] = d->rootfd[1] = -1;
    if (git_libgit2_init() < 0) {
        rc = rg_error_set(err, -EIO, "libgit2: %s", dd_git_msg());
        goto done;
    }
    d->inited = true;

    if ((rc = dd_open_root(&d->rootfd[DD_BASE], base, "base", err)) < 0 ||
        (rc = dd_open_root(&d->rootfd[DD_FORK], fork, "fork", err)) < 0)
        goto done;
    if (fstat(d->rootfd[0], &st[0]) < 0 || fstat(d->rootfd[1], &st[1]) < 0) {
        rc = rg_error_set(err, -errno, "fstat: %s", strerror(errno));
        goto done;
    }
    if (st[0].st_dev == st[1].st_dev && st[0].st_ino == st[1].st_ino) {
        rc = rg_error_set(err, -EINVAL, "base %s and fork %s are the same directory", base, fork);
        goto done;
    }
    rc = dd_repo_open(d, base, opts ? opts->tmp_parent : NULL, err);
    if (rc < 0)
        goto done;

    w.d = d;
    w.err = err;
    w.max_depth = opts && opts->max_depth ? opts->max_depth : DD_DEFAULT_DEPTH;
    w.max_size = opts && opts->max_file_size ? opts->max_file_size : REVIEW_DIRDIFF_MAX_FILE_SIZE;
    if (opts && opts->excluded_len > 0) {
        rc = dd_excluded_list(&w.excluded, &w.nexcluded, opts->excluded, opts->excluded_len);
        if (rc < 0) {
            rc = rg_error_set(err, rc, "out of memory");
            goto done;
        }
    }
    rc = rg_buf_append(&rel, "", 0);
    if (rc == 0)
        rc = dd_walk_dir(&w, d->rootfd, &rel, 0, id, have);
    if (rc < 0)
        goto done;
    for (s = 0; s < 2; s++) {
        if (!have[s] && (rc = dd_tree_write(&id[s], d->store, &empty)) < 0) {
            rc = rg_error_set(err, rc, "writing the empty tree: %s", strerror(-rc));
            goto done;
        }
        if (git_tree_lookup(&tree[s], d->repo, &id[s]) < 0) {
            rc = rg_error_set(err, -EIO, "tree: %s", dd_git_msg());
            goto done;
        }
    }

    /* No rename or type-change detection: plain deletions and additions
     * are what every git apply understands. Binary files are shown as
     * binary patches so that they apply too. */
    git_diff_options_init(&dopts, GIT_DIFF_OPTIONS_VERSION);
    dopts.flags = GIT_DIFF_SHOW_BINARY;
    dopts.context_lines = 3;
    dopts.interhunk_lines = 0;
    dopts.old_prefix = "a";
    dopts.new_prefix = "b";
    if (git_diff_tree_to_tree(&d->diff, d->repo, tree[0], tree[1], &dopts) < 0) {
        rc = rg_error_set(err, -EIO, "diff: %s", dd_git_msg());
        goto done;
    }
    *out = d;
    d = NULL;
    rc = 0;
done:
    git_tree_free(tree[0]);
    git_tree_free(tree[1]);
    dd_scratch_free(&w.sc);
    rg_buf_free(&w.query);
    free(w.excluded);
    rg_buf_free(&rel);
    review_dirdiff_free(d);
    return rc;
}

size_t review_dirdiff_count(const review_dirdiff *d)
{
    return git_diff_num_deltas(d->diff);
}

int review_dirdiff_get(review_dirdiff_change *out, const review_dirdiff *d, size_t i)
{
    const git_diff_delta *delta;

    if (i >= git_diff_num_deltas(d->diff))
        return -ERANGE;
    delta = git_diff_get_delta(d->diff, i);
    out->path = delta->old_file.path ? delta->old_file.path : delta->new_file.path;
    out->status = delta->status == GIT_DELTA_ADDED     ? REVIEW_DIRDIFF_ADDED
                  : delta->status == GIT_DELTA_DELETED ? REVIEW_DIRDIFF_DELETED
                                                       : REVIEW_DIRDIFF_MODIFIED;
    out->old_mode = delta->status == GIT_DELTA_ADDED ? 0 : delta->old_file.mode;
    out->new_mode = delta->status == GIT_DELTA_DELETED ? 0 : delta->new_file.mode;
    return 0;
}

size_t review_dirdiff_skipped_count(const review_dirdiff *d)
{
    return d->nskips;
}

int review_dirdiff_skipped_get(review_dirdiff_skipped *out, const review_dirdiff *d, size_t i)
{
    if (i >= d->nskips)
        return -ERANGE;
    out->path = d->skips[i].path;
    out->base_size = d->skips[i].size[DD_BASE];
    out->fork_size = d->skips[i].size[DD_FORK];
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Printing                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct dd_print {
    review_dirdiff_write_fn write;
    void *payload;
    int rc;          /* what the writer returned, or ours */
    const char *bad; /* a path whose binary patch could not be made */
} dd_print;

static int dd_print_line(const git_diff_delta *delta, const git_diff_hunk *hunk,
                         const git_diff_line *line, void *payload)
{
    dd_print *p = payload;
    char origin = line->origin;

    (void)hunk;
    /* libgit2 says "Binary files differ" for a binary file whose mode
     * alone changed, where git prints nothing after the mode lines (and
     * git apply would reject the line): drop it. Anywhere else it means a
     * binary patch could not be encoded; that patch would not apply, so
     * fail instead. */
    if (line->origin == GIT_DIFF_LINE_BINARY && line->content_len >= 13 &&
        memcmp(line->content, "Binary files ", 13) == 0) {
        if (git_oid_equal(&delta->old_file.id, &delta->new_file.id))
            return 0;
        p->bad = delta->new_file.path;
        p->rc = -EFBIG;
        return -1;
    }
    if (origin == GIT_DIFF_LINE_CONTEXT || origin == GIT_DIFF_LINE_ADDITION ||
        origin == GIT_DIFF_LINE_DELETION) {
        p->rc = p->write(&origin, 1, p->payload);
        if (p->rc != 0)
            return -1;
    }
    p->rc = p->write(line->content, line->content_len, p->payload);
    return p->rc != 0 ? -1 : 0;
}

int review_dirdiff_print(review_dirdiff *d, review_dirdiff_write_fn write, void *payload,
                         rg_error *err)
{
    dd_print p = {write, payload, 0, NULL};

    if (git_diff_print(d->diff, GIT_DIFF_FORMAT_PATCH, dd_print_line, &p) == 0)
        return 0;
    if (p.bad != NULL)
        return rg_error_set(err, p.rc, "%s: cannot encode a binary patch", p.bad);
    if (p.rc != 0)
        return rg_error_set(err, p.rc < 0 ? p.rc : -EIO, "writing the patch failed");
    return rg_error_set(err, -EIO, "diff: %s", dd_git_msg());
}

typedef struct dd_hashing {
    EVP_MD_CTX *md;
    review_dirdiff_write_fn write; /* NULL: hash only */
    void *payload;
} dd_hashing;

static int dd_hash_write(const void *data, size_t len, void *payload)
{
    dd_hashing *h = payload;

    if (EVP_DigestUpdate(h->md, data, len) != 1)
        return -EIO;
    return h->write != NULL ? h->write(data, len, h->payload) : 0;
}

int review_dirdiff_print_digest(review_dirdiff *d, review_dirdiff_write_fn write, void *payload,
                                char digest[REVIEW_DIRDIFF_DIGEST_SIZE], rg_error *err)
{
    static const char hex[] = "0123456789abcdef";
    dd_hashing h = {NULL, write, payload};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0, i;
    char line[64];
    size_t k;
    int rc, n;

    digest[0] = '\0';
    h.md = EVP_MD_CTX_new();
    if (h.md == NULL || EVP_DigestInit_ex(h.md, EVP_sha256(), NULL) != 1) {
        rc = rg_error_set(err, -ENOMEM, "sha256: cannot start");
        goto done;
    }
    rc = review_dirdiff_print(d, dd_hash_write, &h, err);
    if (rc < 0)
        goto done;
    /* The skipped files are part of what was shown: a file growing past
     * the limit, or shrinking under it, changes the digest. NUL-separated,
     * since a path may hold any other byte. */
    for (k = 0; k < d->nskips; k++) {
        n = snprintf(line, sizeof(line), "%lld %lld", d->skips[k].size[DD_BASE],
                     d->skips[k].size[DD_FORK]);
        if (EVP_DigestUpdate(h.md, "skipped", 8) != 1 ||
            EVP_DigestUpdate(h.md, d->skips[k].path, strlen(d->skips[k].path) + 1) != 1 ||
            EVP_DigestUpdate(h.md, line, (size_t)n + 1) != 1) {
            rc = rg_error_set(err, -EIO, "sha256 failed");
            goto done;
        }
    }
    if (EVP_DigestFinal_ex(h.md, md, &mdlen) != 1 || mdlen != 32) {
        rc = rg_error_set(err, -EIO, "sha256 failed");
        goto done;
    }
    memcpy(digest, "sha256:", 7);
    for (i = 0; i < mdlen; i++) {
        digest[7 + 2 * i] = hex[md[i] >> 4];
        digest[8 + 2 * i] = hex[md[i] & 15];
    }
    digest[7 + 2 * mdlen] = '\0';
done:
    EVP_MD_CTX_free(h.md);
    return rc;
}

static int dd_buf_write(const void *data, size_t len, void *payload)
{
    return rg_buf_append(payload, data, len);
}

int review_dirdiff_patch(rg_buf *out, review_dirdiff *d, rg_error *err)
{
    int rc = review_dirdiff_print(d, dd_buf_write, out, err);

    if (rc == RG_E_TOO_BIG)
        rg_error_set(err, rc, "the patch is larger than %zu bytes", out->max);
    return rc;
}

int review_dirdiff_stat(rg_buf *out, review_dirdiff *d, size_t width, rg_error *err)
{
    git_diff_stats *stats = NULL;
    git_buf b = {NULL, 0, 0};
    int rc = 0;

    if (git_diff_num_deltas(d->diff) == 0)
        return 0;
    if (git_diff_get_stats(&stats, d->diff) < 0 ||
        git_diff_stats_to_buf(&b, stats, GIT_DIFF_STATS_FULL | GIT_DIFF_STATS_INCLUDE_SUMMARY,
                              width ? width : 80) < 0) {
        rc = rg_error_set(err, -EIO, "diff stat: %s", dd_git_msg());
        goto done;
    }
    rc = rg_buf_append(out, b.ptr, b.size);
    if (rc < 0)
        rg_error_set(err, rc, "the summary is larger than %zu bytes", out->max);
done:
    git_buf_dispose(&b);
    git_diff_stats_free(stats);
    return rc;
}

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
        rc = dd_readlink(&target, &len, pfd, name);
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
    fd = dd_open_reg(pfd, name, &st);
    if (fd < 0)
        return fd;
    rc = dd_hash_fd(&out->id, fd, (size_t)st.st_size, false, sc);
    close(fd);
    out->mode = dd_file_mode(&st);
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
        pfd = dd_open_parent(rootfd, buf, &name, false);
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
    rc = dd_list(&names, fd);
    for (i = 0; rc == 0 && i < names.n; i++) {
        int kind;
        /* dd_list leaves out the .git family; a directory holding one is
         * not empty, so the rmdir below fails and it stays. */
        rc = dd_kind(&kind, fd, &names.v[i]);
        if (rc == 0)
            rc = kind == DD_DIR ? dd_rmdir_empty(fd, names.v[i].name, depth + 1) : -ENOTEMPTY;
    }
    dd_names_free(&names);
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

    pfd = dd_open_parent(origfd, path, &name, false);
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
            pfd = dd_open_parent(origfd, path, &name, true);
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
            rc = rg_error_set(err, -EIO, "fork/%s: %s", path, dd_git_msg());
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
    rc = dd_open_root(&origfd, original, "original", err);
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
                              dd_side_name[s]);
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
    dd_scratch_free(&sc);
    close(origfd);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* refgate-run's names                                                      */
/* ------------------------------------------------------------------------ */

/* Length of `fork` without trailing slashes (but "/" stays "/"). */
static size_t dd_trimmed_len(const char *fork)
{
    size_t n = strlen(fork);

    while (n > 1 && fork[n - 1] == '/')
        n--;
    return n;
}

int review_dirdiff_default_base(rg_buf *out, const char *fork, rg_error *err)
{
    size_t n = dd_trimmed_len(fork), slash = n;
    int rc;

    while (slash > 0 && fork[slash - 1] != '/')
        slash--;
    if (slash == n || (n - slash == 1 && fork[slash] == '.') ||
        (n - slash == 2 && fork[slash] == '.' && fork[slash + 1] == '.'))
        return rg_error_set(err, -EINVAL, "%s: not a fork directory name", fork);
    rc = rg_buf_append(out, fork, slash);
    if (rc == 0)
        rc = rg_buf_printf(out, ".%.*s.base", (int)(n - slash), fork + slash);
    if (rc < 0)
        return rg_error_set(err, rc, "%s: path too long", fork);
    return 0;
}

int review_dirdiff_default_original(rg_buf *out, const char *fork, rg_error *err)
{
    size_t n = dd_trimmed_len(fork), dot = n;
    int rc;

    while (dot > 0 && fork[dot - 1] >= '0' && fork[dot - 1] <= '9')
        dot--;
    if (dot == n || dot < 2 || fork[dot - 1] != '.' || fork[dot - 2] == '/')
        return rg_error_set(err, -EINVAL, "%s: does not end in .<N>, so the original is unknown",
                            fork);
    rc = rg_buf_append(out, fork, dot - 1);
    if (rc < 0)
        return rg_error_set(err, rc, "%s: path too long", fork);
    return 0;
}

/* The record is at most FORK_EXCLUDE_MAX (1024) paths of PATH_MAX. */
#define DD_EXCLUDED_MAX (1024 * 4096 + 4096)

int review_dirdiff_default_excluded(rg_buf *out, const char *fork, rg_error *err)
{
    static const char head[] = "# refgate-run: ";
    rg_buf path = RG_BUF_INIT(DD_PATH_MAX), body = RG_BUF_INIT(DD_EXCLUDED_MAX);
    size_t n = dd_trimmed_len(fork), slash = n;
    const char *nl;
    char chunk[65536];
    ssize_t got;
    int fd = -1, rc;

    while (slash > 0 && fork[slash - 1] != '/')
        slash--;
    rc = rg_buf_append(&path, fork, slash);
    if (rc == 0)
        rc = rg_buf_printf(&path, ".%.*s.excluded", (int)(n - slash), fork + slash);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "%s: path too long", fork);
        goto done;
    }
    fd = open(path.data, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = errno == ENOENT ? 0 : rg_error_set(err, -errno, "%s: %s", path.data, strerror(errno));
        goto done;
    }
    /* Bounded: DD_EXCLUDED_MAX bytes. */
    while ((got = read(fd, chunk, sizeof(chunk))) > 0)
        if ((rc = rg_buf_append(&body, chunk, (size_t)got)) < 0) {
            rc = rg_error_set(err, RG_E_TAMPER, "%s: larger than a record can be", path.data);
            goto done;
        }
    if (got < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path.data, strerror(errno));
        goto done;
    }
    nl = body.data ? memchr(body.data, '\n', body.len) : NULL;
    if (nl == NULL || strncmp(body.data, head, sizeof(head) - 1) != 0) {
        rc = rg_error_set(err, RG_E_TAMPER, "%s: not a refgate-run record", path.data);
        goto done;
    }
    nl++;
    rc = rg_buf_append(out, nl, body.len - (size_t)(nl - body.data));
    if (rc < 0)
        rc = rg_error_set(err, rc, "%s: too large", path.data);
done:
    if (fd >= 0)
        close(fd);
    rg_buf_free(&path);
    rg_buf_free(&body);
    return rc;
}

int review_dirdiff_check_run(const char *fork, rg_error *err)
{
    rg_buf path = RG_BUF_INIT(DD_PATH_MAX);
    size_t n = dd_trimmed_len(fork), slash = n;
    int fd = -1, rc;

    while (slash > 0 && fork[slash - 1] != '/')
        slash--;
    rc = rg_buf_append(&path, fork, slash);
    if (rc == 0)
        rc = rg_buf_printf(&path, ".%.*s.run", (int)(n - slash), fork + slash);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "%s: path too long", fork);
        goto done;
    }
    /* Read-only is enough to ask for a shared lock; O_NONBLOCK so a FIFO
     * put there cannot hang the check. */
    fd = open(path.data, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = errno == ENOENT ? 0
                             : rg_error_set(err, RG_E_DENIED, "%s: %s", path.data, strerror(errno));
        goto done;
    }
    if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK
                 ? rg_error_set(err, RG_E_DENIED,
                                "the run that made %s is still running (%s is locked): a "
                                "process of it could still change the fork; wait for it to end",
                                fork, path.data)
                 : rg_error_set(err, RG_E_DENIED, "%s: flock: %s", path.data, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    rg_buf_free(&path);
    return rc;
}
