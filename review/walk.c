/*
 * Walking the base and the fork of `refgate diff` together, name by name.
 *
 * A directory fd is held per level so that every open is relative to a
 * directory already checked (openat with O_NOFOLLOW): nothing the fork does
 * with symlinks can make the walk leave it. Entries identical on both sides
 * (same type, same executable bit, same bytes) are dropped there and then;
 * the rest are hashed into blob ids and written as tree objects into the
 * private object database (objects.c).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "review/review_int.h"

/* ------------------------------------------------------------------------ */
/* Walking both directories                                                 */
/* ------------------------------------------------------------------------ */

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

void review_names_free(dd_names *l)
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
int review_list(dd_names *out, int dirfd)
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
        review_names_free(out);
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
int review_tree_write(git_oid *out, dd_store *s, dd_tvec *t)
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
    rc = review_store_add(s, out, GIT_OBJECT_TREE, i, -1, false, NULL, rg_buf_detach(&b));
done:
    rg_buf_free(&b);
    return rc;
}

const char *const review_side_name[2] = {"base", "fork"};

static int dd_fail(dd_walk *w, int rc, int side, const char *rel)
{
    return rg_error_set(w->err, rc, "%s%s%s: %s", review_side_name[side], *rel ? "/" : "", rel,
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
        return rg_error_set(w->err, -EIO, "%s: ignore rules: %s", rel, review_git_msg());
    if (ignored && w->d->index != NULL) {
        if (is_dir)
            ignored = git_index_find_prefix(&pos, w->d->index, w->query.data) != 0;
        else
            ignored = git_index_get_bypath(w->d->index, rel, 0) == NULL;
    }
    *out = ignored != 0;
    return 0;
}

unsigned int review_file_mode(const struct stat *st)
{
    /* git records only the owner's execute bit. */
    return (st->st_mode & S_IXUSR) ? DD_MODE_EXEC : DD_MODE_FILE;
}

/*
 * What an entry is. readdir's d_type saves an lstat per entry; where the
 * filesystem does not fill it in, lstat. FIFOs, sockets and devices are not
 * content and count as absent; they are never opened.
 */
int review_kind(int *out, int dirfd, const dd_name *e)
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
    int rc = review_store_add(w->d->store, id, GIT_OBJECT_BLOB, size, side, mode == DD_MODE_LINK,
                              rel, NULL);

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

    rc = review_readlink(&target, &len, dirfd, name);
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
    rc = review_hash_fd(&id, fd, (size_t)st->st_size, true, &w->sc);
    if (rc < 0)
        return dd_fail(w, rc, side, rel);
    return dd_record(w, side, name, rel, review_file_mode(st), &id, (size_t)st->st_size, t);
}

static int dd_add_reg(dd_walk *w, int side, int dirfd, const char *name, const char *rel,
                      dd_tvec *t)
{
    struct stat st;
    int fd, rc;

    fd = review_open_reg(dirfd, name, &st);
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
        fd[s] = review_open_reg(dirfd[s], name, &st[s]);
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
        rc = review_same_bytes(&same, fd[0], fd[1], size, &w->sc);
        if (rc < 0) {
            rc = dd_fail(w, rc, DD_FORK, rel);
            goto done;
        }
    }
    if (same && review_file_mode(&st[0]) == review_file_mode(&st[1]))
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
        rc = review_readlink(&target[s], &len[s], dirfd[s], name);
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
    rc = review_walk_dir(w, sub, rel, depth + 1, tree, have);
    for (s = 0; s < 2 && rc == 0; s++)
        if (have[s] && (rc = dd_tvec_push(&t[s], DD_MODE_TREE, name, &tree[s])) < 0)
            rc = rg_error_set(w->err, rc, "out of memory");
done:
    for (s = 0; s < 2; s++)
        if (sub[s] >= 0)
            close(sub[s]);
    return rc;
}

int review_str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether `rel` is a path refgate-run left out of the fork. Nothing below
 * one is reached: the walk stops at it. */
static bool dd_excluded(const dd_walk *w, const char *rel)
{
    return w->nexcluded > 0 &&
           bsearch(&rel, w->excluded, w->nexcluded, sizeof(*w->excluded), review_str_cmp) != NULL;
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
        if (e[s] != NULL && (rc = review_kind(&kind[s], dirfd[s], e[s])) < 0)
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
int review_walk_dir(dd_walk *w, int dirfd[2], rg_buf *rel, unsigned int depth, git_oid tree[2],
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
        rc = review_list(&names[s], dirfd[s]);
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
        rg_buf_truncate(rel, mark);
        if (rc < 0)
            goto done;
    }
    for (s = 0; s < 2; s++) {
        have[s] = t[s].n > 0;
        if (have[s] && (rc = review_tree_write(&tree[s], w->d->store, &t[s])) < 0) {
            rc = rg_error_set(w->err, rc, "%s: writing a tree: %s", rel->data, strerror(-rc));
            goto done;
        }
    }
done:
    /* Tree entries point at the names, so they go first. */
    free(t[0].v);
    free(t[1].v);
    review_names_free(&names[0]);
    review_names_free(&names[1]);
    return rc;
}
