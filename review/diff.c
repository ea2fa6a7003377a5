/*
 * Directory diff with libgit2; see dirdiff.h for what is trusted and why.
 *
 * The diff object: the base and the fork are walked (walk.c) into trees in
 * a private object database (objects.c), and libgit2 diffs the two trees.
 *
 * libgit2's ignore machinery needs a repository with a working directory:
 * a temporary bare repository is made under $TMPDIR and pointed at the base
 * with git_repository_set_workdir (which writes nothing into the base), and
 * given a config that holds only what is set here, so neither the user's
 * global config nor anything in the base or fork decides how it behaves.
 *
 * Also here: printing the patch, and the names refgate-run gives a fork's
 * base, its record of exclusions and its run marker.
 */
#include "review/dirdiff.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <git2/sys/repository.h>

#include "fork/layout.h"
#include "review/review_int.h"
#include "util/fs.h"

/* ------------------------------------------------------------------------ */
/* The diff object                                                          */
/* ------------------------------------------------------------------------ */

const char *review_git_msg(void)
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
        rc = rg_error_set(err, -EIO, "temporary repository: %s", review_git_msg());
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
        rc = rg_error_set(err, -EIO, "temporary repository config: %s", review_git_msg());
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
        rc = rg_error_set(err, -EIO, "temporary repository config: %s", review_git_msg());
        goto done;
    }

    rc = review_store_new(&store);
    if (rc < 0) {
        rg_error_set(err, rc, "out of memory");
        goto done;
    }
    store->rootfd[0] = d->rootfd[0];
    store->rootfd[1] = d->rootfd[1];
    if (git_odb_new(&odb) < 0) {
        rc = rg_error_set(err, -ENOMEM, "object database: %s", review_git_msg());
        goto done;
    }
    if (git_odb_add_backend(odb, &store->parent, 1) < 0) {
        rc = rg_error_set(err, -ENOMEM, "object database: %s", review_git_msg());
        goto done;
    }
    d->store = store;
    store = NULL; /* the odb owns it now */
    if (git_repository_set_odb(d->repo, odb) < 0 ||
        git_repository_set_workdir(d->repo, base, 0) < 0) {
        rc = rg_error_set(err, -EIO, "temporary repository: %s", review_git_msg());
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
        review_backend_free(&store->parent);
    git_odb_free(odb);
    git_config_free(cfg);
    rg_buf_free(&path);
    rg_buf_free(&cfgpath);
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
    qsort(v, k, sizeof(*v), review_str_cmp);
    *out = v;
    *n = k;
    return 0;
}

int review_open_root(int *out, const char *path, const char *what, rg_error *err)
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
        rc = rg_error_set(err, -EIO, "libgit2: %s", review_git_msg());
        goto done;
    }
    d->inited = true;

    if ((rc = review_open_root(&d->rootfd[DD_BASE], base, "base", err)) < 0 ||
        (rc = review_open_root(&d->rootfd[DD_FORK], fork, "fork", err)) < 0)
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
        rc = review_walk_dir(&w, d->rootfd, &rel, 0, id, have);
    if (rc < 0)
        goto done;
    for (s = 0; s < 2; s++) {
        if (!have[s] && (rc = review_tree_write(&id[s], d->store, &empty)) < 0) {
            rc = rg_error_set(err, rc, "writing the empty tree: %s", strerror(-rc));
            goto done;
        }
        if (git_tree_lookup(&tree[s], d->repo, &id[s]) < 0) {
            rc = rg_error_set(err, -EIO, "tree: %s", review_git_msg());
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
        rc = rg_error_set(err, -EIO, "diff: %s", review_git_msg());
        goto done;
    }
    *out = d;
    d = NULL;
    rc = 0;
done:
    git_tree_free(tree[0]);
    git_tree_free(tree[1]);
    review_scratch_free(&w.sc);
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
    return rg_error_set(err, -EIO, "diff: %s", review_git_msg());
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
        rc = rg_error_set(err, -EIO, "diff stat: %s", review_git_msg());
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
/* refgate-run's names                                                      */
/* ------------------------------------------------------------------------ */

int review_dirdiff_default_base(rg_buf *out, const char *fork, rg_error *err)
{
    char *base = NULL;
    int rc;

    rc = fork_layout_side_path(&base, fork, FORK_LAYOUT_BASE, err);
    if (rc < 0)
        return rc;
    rc = rg_buf_puts(out, base);
    free(base);
    if (rc < 0)
        return rg_error_set(err, rc, "%s: path too long", fork);
    return 0;
}

int review_dirdiff_default_original(rg_buf *out, const char *fork, rg_error *err)
{
    char *dir = NULL;
    unsigned n;
    int rc;

    /* Any N: a fork renamed by hand still names its original. */
    rc = fork_layout_parse(&dir, &n, fork, NULL);
    if (rc == -EINVAL)
        return rg_error_set(err, rc, "%s: does not end in .<N>, so the original is unknown", fork);
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    rc = rg_buf_puts(out, dir);
    free(dir);
    if (rc < 0)
        return rg_error_set(err, rc, "%s: path too long", fork);
    return 0;
}

/*
 * The path of the file `side` beside `fork`, or NULL in *out when `fork`
 * names no fork ("/", ".", ".."): such a path has no side files, so the
 * caller finds none, as it would find none under any other name.
 */
static int dd_side_path(char **out, const char *fork, fork_layout_side side, rg_error *err)
{
    int rc = fork_layout_side_path(out, fork, side, NULL);

    if (rc == -EINVAL)
        return 0;
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    if (strlen(*out) > DD_PATH_MAX) {
        free(*out);
        *out = NULL;
        return rg_error_set(err, RG_E_TOO_BIG, "%s: path too long", fork);
    }
    return 0;
}

/* The record is at most FORK_EXCLUDE_MAX (1024) paths of PATH_MAX. */
#define DD_EXCLUDED_MAX (1024 * 4096 + 4096)

int review_dirdiff_default_excluded(rg_buf *out, const char *fork, rg_error *err)
{
    static const char head[] = "# refgate-run: ";
    rg_buf body = RG_BUF_INIT(DD_EXCLUDED_MAX);
    char *path = NULL;
    const char *nl;
    char chunk[65536];
    ssize_t got;
    int fd = -1, rc;

    rc = dd_side_path(&path, fork, FORK_LAYOUT_EXCLUDED, err);
    if (rc < 0 || path == NULL)
        goto done;
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = errno == ENOENT ? 0 : rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    /* Bounded: DD_EXCLUDED_MAX bytes. */
    while ((got = read(fd, chunk, sizeof(chunk))) > 0)
        if ((rc = rg_buf_append(&body, chunk, (size_t)got)) < 0) {
            rc = rg_error_set(err, RG_E_TAMPER, "%s: larger than a record can be", path);
            goto done;
        }
    if (got < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    nl = body.data ? memchr(body.data, '\n', body.len) : NULL;
    if (nl == NULL || strncmp(body.data, head, sizeof(head) - 1) != 0) {
        rc = rg_error_set(err, RG_E_TAMPER, "%s: not a refgate-run record", path);
        goto done;
    }
    nl++;
    rc = rg_buf_append(out, nl, body.len - (size_t)(nl - body.data));
    if (rc < 0)
        rc = rg_error_set(err, rc, "%s: too large", path);
done:
    if (fd >= 0)
        close(fd);
    free(path);
    rg_buf_free(&body);
    return rc;
}

int review_dirdiff_check_run(const char *fork, rg_error *err)
{
    char *path = NULL, *real;
    int fd = -1, rc;

    /* The marker is named after the fork's own name, which "." or a
     * symlink to the fork does not show: resolve first, or `refgate diff
     * --apply .` inside a live fork would find no marker and go ahead. */
    real = realpath(fork, NULL);
    rc = dd_side_path(&path, real != NULL ? real : fork, FORK_LAYOUT_RUN, err);
    free(real);
    if (rc < 0 || path == NULL)
        goto done;
    /* Read-only is enough to ask for a shared lock; O_NONBLOCK so a FIFO
     * put there cannot hang the check. */
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = errno == ENOENT ? 0 : rg_error_set(err, RG_E_DENIED, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK
                 ? rg_error_set(err, RG_E_DENIED,
                                "the run that made %s is still running (%s is locked): a "
                                "process of it could still change the fork; wait for it to end",
                                fork, path)
                 : rg_error_set(err, RG_E_DENIED, "%s: flock: %s", path, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}
