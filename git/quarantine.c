/*
 * Pack quarantine; see quarantine.h.
 *
 * The pushed pack is indexed by git's own `git index-pack --stdin
 * --fix-thin`, streamed into a child process as it arrives, writing only
 * into a private directory created with mkdtemp (GIT_OBJECT_DIRECTORY),
 * with the upstream's objects visible read-only as an alternate so thin
 * deltas resolve. A child process, not libgit2's indexer, because libgit2
 * 1.5.1's indexer spins forever, leaking memory, on a crafted pack that
 * holds one object twice (see the duplicate-object test) — and the pusher
 * chooses the pack. git index-pack rejects it at once, is the parser the
 * upstream itself will run, and can be killed.
 *
 * The questions are then answered with libgit2 over an object database in
 * which the upstream and the quarantined pack appear only as alternates, so
 * nothing can be written anywhere. libgit2 1.5 reads only SHA-1 objects, so
 * for SHA-256 repositories ancestry is asked of `git merge-base` instead,
 * with the same read-only arrangement of object directories.
 */
#include "git/quarantine.h"
#include "util/fs.h"
#include "util/gitenv.h"
#include "util/proc.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2.h>
#include <git2/sys/odb_backend.h>

/* libgit2 1.5 reads only SHA-1 repositories. */
#define QUARANTINE_SHA1_HEXLEN   40
#define QUARANTINE_SHA256_HEXLEN 64

/* How long index-pack may take, once the pack is in, before it is killed
 * and the pack refused; and how long it may refuse a chunk of the pack. */
#define QUARANTINE_INDEX_SECONDS 600

/* How long one read-only question to git (cat-file, merge-base) may take. */
#define QUARANTINE_QUERY_SECONDS 300

/* What the child may say on stdout before the run fails. */
#define QUARANTINE_CHILD_OUTPUT_MAX (64 * 1024)

/* The upstream's backends come first, so an object present in both is always read from there. */
#define QUARANTINE_PACK_PRIORITY 0

enum quarantine_state {
    QUARANTINE_OPEN,     /* accepting pack bytes */
    QUARANTINE_FINISHED, /* the pack is indexed; questions may be asked */
    QUARANTINE_FAILED,   /* an earlier step failed; everything else fails too */
};

struct rgit_quarantine {
    enum quarantine_state state;
    int libgit2_ready;    /* git_libgit2_init() succeeded and needs its shutdown */
    size_t hexlen;        /* 40 or 64 */
    char *dir;            /* the quarantine directory, NULL until it exists */
    char *objects;        /* <dir>/objects, where index-pack writes */
    char *upstream;       /* the upstream git directory */
    rg_proc *indexer;     /* git index-pack, while the pack streams in */
    rg_buf index_out;     /* what it says on stdout: the pack's name */
    git_odb *odb;         /* SHA-1: upstream objects and the pack, as alternates */
    git_repository *repo; /* path-less, over odb, once finished */
    char *pack_idx;       /* the quarantined pack's .idx, once finished */
};

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------- */

/*
 * Record the message of the libgit2 call that just failed. Allocation and
 * I/O failures keep an errno-style code so callers can tell them from a bad
 * pack; everything else gets `code`.
 */
static int quarantine_git_error(rg_error *err, int code, const char *what)
{
    const git_error *e = git_error_last();
    const char *msg = e != NULL && e->message != NULL ? e->message : "unknown libgit2 error";

    if (e != NULL && e->klass == GIT_ERROR_NOMEMORY)
        code = -ENOMEM;
    else if (e != NULL && e->klass == GIT_ERROR_OS)
        code = -EIO;
    return rg_error_set(err, code, "%s: %s", what, msg);
}

/* ---------------------------------------------------------------------------
 * Setup
 * ------------------------------------------------------------------------- */

/*
 * A SHA-256 upstream cannot be read by libgit2 1.5 even when the client
 * claims SHA-1 ids, so look at its object format before trusting anything
 * read from it.
 */
static int quarantine_check_format(const char *upstream_gitdir, rg_error *err)
{
    git_config *cfg = NULL;
    git_buf fmt = GIT_BUF_INIT;
    char path[PATH_MAX];
    int rc = 0, grc;

    if (snprintf(path, sizeof(path), "%s/config", upstream_gitdir) >= (int)sizeof(path))
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", upstream_gitdir);
    if (git_config_open_ondisk(&cfg, path) < 0) {
        rc = quarantine_git_error(err, RG_E_UPSTREAM, "reading the upstream configuration");
        goto done;
    }
    grc = git_config_get_string_buf(&fmt, cfg, "extensions.objectformat");
    if (grc == GIT_ENOTFOUND)
        goto done;
    if (grc < 0) {
        rc = quarantine_git_error(err, RG_E_UPSTREAM, "reading extensions.objectformat");
        goto done;
    }
    if (strcasecmp(fmt.ptr, "sha1") != 0)
        rc = rg_error_set(err, RG_E_PROTOCOL,
                          "%s uses object format %s; libgit2 1.5 cannot read SHA-256 objects",
                          upstream_gitdir, fmt.ptr);
done:
    git_buf_dispose(&fmt);
    git_config_free(cfg);
    return rc;
}

/*
 * The environment of every git child: the gateway's git environment
 * (util/gitenv) with, for index-pack, the quarantine as the only writable
 * object directory and the upstream's objects as an alternate so thin-pack
 * bases resolve; for readers, the quarantine as an alternate after the
 * upstream's own objects.
 */
static int quarantine_env(rg_gitenv **out, const rgit_quarantine *q, int for_index, rg_error *err)
{
    rg_gitenv_opts o = RG_GITENV_OPTS_INIT;
    char alt[PATH_MAX + 16];
    int rc;

    if (for_index) {
        snprintf(alt, sizeof(alt), "%s/objects", q->upstream);
        o.object_dir = q->objects;
        o.alternates = alt;
    } else {
        o.alternates = q->objects;
    }
    rc = rg_gitenv_new(out, &o, err);
    return rc;
}

/* index-pack's stdout, kept under its cap. */
static int quarantine_index_sink(void *ctx, const char *data, size_t len, rg_error *err)
{
    rg_buf *b = ctx;

    if (b->len + len > b->max || rg_buf_append(b, data, len) < 0)
        return rg_error_set(err, RG_E_PROTOCOL, "bad pack: index-pack said too much");
    return 0;
}

static int quarantine_start_indexer(rgit_quarantine *q, rg_error *err)
{
    char gitdir[PATH_MAX + 16];
    const char *argv[] = {"git", gitdir, "index-pack", "--stdin", "--fix-thin", NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_gitenv *env = NULL;
    int rc;

    snprintf(gitdir, sizeof(gitdir), "--git-dir=%s", q->upstream);
    rc = quarantine_env(&env, q, 1, err);
    if (rc < 0)
        return rc;
    s.argv = argv;
    s.envp = rg_gitenv_envp(env);
    s.flags = RG_PROC_STDIN | RG_PROC_STDOUT | RG_PROC_STDERR | RG_PROC_GROUP;
    s.on_stdout = quarantine_index_sink;
    s.ctx = &q->index_out;
    rc = rg_proc_start(&q->indexer, &s, err);
    rg_gitenv_free(env);
    return rc;
}

int rgit_quarantine_new(rgit_quarantine **out, const char *upstream_gitdir, const char *tmp_parent,
                        size_t oid_hexlen, rg_error *err)
{
    rgit_quarantine *q = NULL;
    char objects[PATH_MAX];
    struct stat st;
    int rc = 0;

    *out = NULL;
    if (oid_hexlen != QUARANTINE_SHA1_HEXLEN && oid_hexlen != QUARANTINE_SHA256_HEXLEN)
        return rg_error_set(err, -EINVAL, "object ids of %zu hex digits are not SHA-1 or SHA-256",
                            oid_hexlen);
    if (snprintf(objects, sizeof(objects), "%s/objects", upstream_gitdir) >= (int)sizeof(objects))
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", upstream_gitdir);
    /* An alternate that does not exist is silently skipped; a typo must not look empty. */
    if (stat(objects, &st) < 0)
        return rg_error_set(err, -errno, "%s: %s", objects, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return rg_error_set(err, -ENOTDIR, "%s: not a directory", objects);

    q = calloc(1, sizeof(*q));
    if (q == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    q->state = QUARANTINE_FAILED;
    q->hexlen = oid_hexlen;
    rg_buf_init(&q->index_out, QUARANTINE_CHILD_OUTPUT_MAX);

    /* libgit2 counts its initialisations; rgit_quarantine_free() balances this one. */
    if (git_libgit2_init() < 0) {
        rc = quarantine_git_error(err, -ENOMEM, "initialising libgit2");
        goto done;
    }
    q->libgit2_ready = 1;
    /* git_error_last() is per thread; a stale message must not be reported as ours. */
    git_error_clear();

    /* The repository's own format decides, whatever ids the client sent. */
    if (oid_hexlen == QUARANTINE_SHA1_HEXLEN) {
        rc = quarantine_check_format(upstream_gitdir, err);
        if (rc < 0)
            goto done;
    }
    q->upstream = strdup(upstream_gitdir);
    if (q->upstream == NULL || asprintf(&q->dir, "%s/rg-quarantine-XXXXXX", tmp_parent) < 0) {
        q->dir = NULL;
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    /* mkdtemp creates the directory 0700, so no other user can read or plant files in it. */
    if (mkdtemp(q->dir) == NULL) {
        rc = rg_error_set(err, -errno, "%s: %s", q->dir, strerror(errno));
        free(q->dir);
        q->dir = NULL;
        goto done;
    }
    if (asprintf(&q->objects, "%s/objects", q->dir) < 0) {
        q->objects = NULL;
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    snprintf(objects, sizeof(objects), "%s/pack", q->objects);
    rc = rg_fs_mkdir_p(objects, 0700, err);
    if (rc < 0)
        goto done;
    rc = quarantine_start_indexer(q, err);
    if (rc < 0)
        goto done;
    q->state = QUARANTINE_OPEN;
    *out = q;
    q = NULL;
done:
    rgit_quarantine_free(q);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Receiving the pack
 * ------------------------------------------------------------------------- */

static int quarantine_check_open(rgit_quarantine *q, rg_error *err)
{
    if (q->state == QUARANTINE_FAILED)
        return rg_error_set(err, RG_E_PROTOCOL, "the pack was already rejected");
    if (q->state == QUARANTINE_FINISHED)
        return rg_error_set(err, -EINVAL, "the pack is already complete");
    return 0;
}

int rgit_quarantine_write(rgit_quarantine *q, const void *data, size_t len, rg_error *err)
{
    int rc;

    rc = quarantine_check_open(q, err);
    if (rc < 0)
        return rc;
    /* A write fails (EPIPE) only when index-pack has already given up on
     * the pack; finish reports why. */
    rc = rg_proc_write(q->indexer, data, len, rg_proc_deadline(QUARANTINE_INDEX_SECONDS), err);
    if (rc < 0) {
        q->state = QUARANTINE_FAILED;
        rg_error_wrap(err, "bad pack");
        if (err != NULL)
            err->code = RG_E_PROTOCOL;
        return RG_E_PROTOCOL;
    }
    return 0;
}

int rgit_quarantine_finish(rgit_quarantine *q, rg_error *err)
{
    git_odb_backend *pack = NULL;
    char idx[PATH_MAX], why[RG_PROC_WHY_MAX], name[80];
    int rc, status = -1;

    rc = quarantine_check_open(q, err);
    if (rc < 0)
        return rc;
    q->state = QUARANTINE_FAILED;
    git_error_clear();

    /* End of input: index-pack resolves every delta, copying thin-pack
     * bases from the upstream into the quarantined pack. */
    rc = rg_proc_finish(q->indexer, &status, rg_proc_deadline(QUARANTINE_INDEX_SECONDS), err);
    if (rc == -ETIMEDOUT) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "bad pack: indexing took over %d s",
                          QUARANTINE_INDEX_SECONDS);
        goto done;
    }
    rg_proc_why(q->indexer, why, sizeof(why));
    if (rc < 0 || status != 0 || q->index_out.data == NULL ||
        sscanf(q->index_out.data, "pack\t%70[0-9a-f]", name) != 1) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "bad pack: %s", why[0] ? why : "index-pack failed");
        goto done;
    }
    if (q->hexlen == QUARANTINE_SHA1_HEXLEN) {
        snprintf(idx, sizeof(idx), "%s/objects", q->upstream);
        /* Both as alternates: no backend here can ever be written to. */
        if (git_odb_new(&q->odb) < 0 || git_odb_add_disk_alternate(q->odb, idx) < 0) {
            rc = quarantine_git_error(err, RG_E_UPSTREAM, "opening the upstream objects");
            goto done;
        }
        snprintf(idx, sizeof(idx), "%s/pack/pack-%s.idx", q->objects, name);
        q->pack_idx = strdup(idx);
        if (q->pack_idx == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
        if (git_odb_backend_one_pack(&pack, idx) < 0) {
            rc = quarantine_git_error(err, -EIO, "opening the quarantined pack");
            goto done;
        }
        if (git_odb_add_alternate(q->odb, pack, QUARANTINE_PACK_PRIORITY) < 0) {
            pack->free(pack);
            rc = quarantine_git_error(err, -ENOMEM, "opening the quarantined pack");
            goto done;
        }
        if (git_repository_wrap_odb(&q->repo, q->odb) < 0) {
            rc = quarantine_git_error(err, -ENOMEM, "opening the quarantined objects");
            goto done;
        }
    }
    q->state = QUARANTINE_FINISHED;
    rc = 0;
done:
    return rc;
}

/* ---------------------------------------------------------------------------
 * Ancestry
 * ------------------------------------------------------------------------- */

/* Parse a full-length id: libgit2 would read a prefix of a longer string without complaint. */
static int quarantine_parse_oid(git_oid *out, const char *hex, rg_error *err)
{
    size_t i;

    for (i = 0; hex[i] != '\0' && i <= QUARANTINE_SHA1_HEXLEN; i++) {
        if (!isxdigit((unsigned char)hex[i]))
            return rg_error_set(err, RG_E_PROTOCOL, "object id \"%.*s\" is not hexadecimal",
                                QUARANTINE_SHA1_HEXLEN, hex);
    }
    if (i != QUARANTINE_SHA1_HEXLEN)
        return rg_error_set(err, RG_E_PROTOCOL, "object id \"%.*s\" is not %d hex digits",
                            QUARANTINE_SHA1_HEXLEN, hex, QUARANTINE_SHA1_HEXLEN);
    if (git_oid_fromstr(out, hex) < 0)
        return quarantine_git_error(err, RG_E_PROTOCOL, "parsing an object id");
    return 0;
}

/* Fails unless `id` names a commit in the upstream or the pack; a tag is not peeled. */
static int quarantine_require_commit(rgit_quarantine *q, const git_oid *id, const char *hex,
                                     rg_error *err)
{
    git_object_t type;
    size_t len;
    int grc;

    grc = git_odb_read_header(&len, &type, q->odb, id);
    if (grc == GIT_ENOTFOUND)
        return rg_error_set(err, RG_E_PROTOCOL,
                            "object %s is neither in the upstream nor in the pushed pack", hex);
    if (grc < 0)
        return quarantine_git_error(err, RG_E_PROTOCOL, "reading an object");
    if (type != GIT_OBJECT_COMMIT)
        return rg_error_set(err, RG_E_PROTOCOL, "object %s is a %s, not a commit", hex,
                            git_object_type2string(type));
    return 0;
}

int rgit_quarantine_run_git(int *status, rg_buf *out, rgit_quarantine *q, const char *const *args,
                            const char *const *config, const char *gnupg_home, int64_t deadline,
                            rg_error *err)
{
    char gitdir[PATH_MAX + 16];
    const char *argv[16] = {"git", gitdir};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_gitenv_opts o = RG_GITENV_OPTS_INIT;
    rg_gitenv *env = NULL;
    size_t n = 2;
    int rc;

    for (; *args && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    snprintf(gitdir, sizeof(gitdir), "--git-dir=%s", q->upstream);
    o.alternates = q->objects;
    o.gnupg_home = gnupg_home;
    rc = rg_gitenv_new(&env, &o, err);
    for (; rc == 0 && config && config[0]; config += 2)
        rc = rg_gitenv_config(env, config[0], config[1], err);
    if (rc < 0)
        goto done;
    s.argv = argv;
    s.envp = rg_gitenv_envp(env);
    s.flags = RG_PROC_GROUP;
    rc = rg_proc_run(status, out, &s, deadline, err);
done:
    rg_gitenv_free(env);
    return rc;
}

int rgit_quarantine_stream_object(rgit_quarantine *q, const char *type, const char *id_hex,
                                  int (*sink)(void *ctx, const char *data, size_t len,
                                              rg_error *err),
                                  void *ctx, int64_t deadline, rg_error *err)
{
    char gitdir[PATH_MAX + 16];
    const char *argv[] = {"git", gitdir, "cat-file", type, id_hex, NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_gitenv_opts o = RG_GITENV_OPTS_INIT;
    rg_gitenv *env = NULL;
    rg_proc *p = NULL;
    int rc, status = -1;

    snprintf(gitdir, sizeof(gitdir), "--git-dir=%s", q->upstream);
    o.alternates = q->objects;
    rc = rg_gitenv_new(&env, &o, err);
    if (rc < 0)
        return rc;
    s.argv = argv;
    s.envp = rg_gitenv_envp(env);
    s.flags = RG_PROC_STDOUT | RG_PROC_STDERR | RG_PROC_GROUP;
    s.on_stdout = sink;
    s.ctx = ctx;
    rc = rg_proc_start(&p, &s, err);
    if (rc == 0)
        rc = rg_proc_finish(p, &status, deadline, err);
    if (rc == 0 && status != 0)
        rc = rg_proc_check(p, RG_E_PROTOCOL, err);
    rg_proc_free(p);
    rg_gitenv_free(env);
    return rc;
}

/* Run a read-only git command over the upstream and the quarantine. */
static int quarantine_git(int *status, rg_buf *out, rgit_quarantine *q, const char *const *args,
                          rg_error *err)
{
    return rgit_quarantine_run_git(status, out, q, args, NULL, NULL,
                                   rg_proc_deadline(QUARANTINE_QUERY_SECONDS), err);
}

/* SHA-256: fails unless `hex` is a full id naming a commit in the upstream or the pack. */
static int quarantine_git_require_commit(rgit_quarantine *q, const char *hex, rg_error *err)
{
    const char *args[] = {"cat-file", "-t", hex, NULL};
    rg_buf type = RG_BUF_INIT(64);
    size_t len = strlen(hex);
    int status = -1, rc;

    for (size_t j = 0; j < len; j++)
        if (!isxdigit((unsigned char)hex[j]))
            len = 0;
    if (len != q->hexlen)
        return rg_error_set(err, RG_E_PROTOCOL, "object id \"%.64s\" is not %zu hex digits", hex,
                            q->hexlen);
    rc = quarantine_git(&status, &type, q, args, err);
    if (rc == 0 && (status != 0 || type.data == NULL))
        rc = rg_error_set(err, RG_E_PROTOCOL,
                          "object %s is neither in the upstream nor in the pushed pack", hex);
    else if (rc == 0 && strcmp(type.data, "commit\n") != 0)
        rc = rg_error_set(err, RG_E_PROTOCOL, "object %s is a %.*s, not a commit", hex,
                          (int)strcspn(type.data, "\n"), type.data);
    rg_buf_free(&type);
    return rc;
}

/* SHA-256: the same questions, asked of git (libgit2 1.5 cannot read the objects). */
static int quarantine_is_ancestor_git(int *out, rgit_quarantine *q, const char *ancestor_hex,
                                      const char *descendant_hex, rg_error *err)
{
    int status = -1, rc;

    if ((rc = quarantine_git_require_commit(q, ancestor_hex, err)) < 0 ||
        (rc = quarantine_git_require_commit(q, descendant_hex, err)) < 0)
        return rc;
    if (!strcmp(ancestor_hex, descendant_hex)) {
        *out = 1;
        return 0;
    }
    {
        const char *args[] = {"merge-base", "--is-ancestor", ancestor_hex, descendant_hex, NULL};
        rc = quarantine_git(&status, NULL, q, args, err);
    }
    if (rc < 0)
        return rc;
    /* 0: ancestor, 1: not; anything else (a broken history) fails closed. */
    if (status != 0 && status != 1)
        return rg_error_set(err, RG_E_PROTOCOL, "walking the history failed (git status %d)",
                            status);
    *out = status == 0;
    return 0;
}

int rgit_quarantine_is_ancestor(int *out, rgit_quarantine *q, const char *ancestor_hex,
                                const char *descendant_hex, rg_error *err)
{
    git_oid ancestor, descendant;
    int rc, grc;

    *out = 0;
    if (q->state != QUARANTINE_FINISHED)
        return rg_error_set(err, -EINVAL, "the pack is not complete");
    if (q->hexlen == QUARANTINE_SHA256_HEXLEN)
        return quarantine_is_ancestor_git(out, q, ancestor_hex, descendant_hex, err);
    git_error_clear();
    if ((rc = quarantine_parse_oid(&ancestor, ancestor_hex, err)) < 0 ||
        (rc = quarantine_parse_oid(&descendant, descendant_hex, err)) < 0 ||
        (rc = quarantine_require_commit(q, &ancestor, ancestor_hex, err)) < 0 ||
        (rc = quarantine_require_commit(q, &descendant, descendant_hex, err)) < 0)
        return rc;

    /* git_graph_descendant_of() answers 0 for a commit and itself. */
    if (git_oid_equal(&ancestor, &descendant)) {
        *out = 1;
        return 0;
    }
    /* A history with a missing parent fails here rather than answering "not an ancestor". */
    grc = git_graph_descendant_of(q->repo, &descendant, &ancestor);
    if (grc < 0)
        return quarantine_git_error(err, RG_E_PROTOCOL, "walking the history");
    *out = grc > 0;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Changed paths
 * ------------------------------------------------------------------------- */

/*
 * `prefix` without its trailing slashes into `out`; it must be a relative
 * path of plain segments, since it names a place in a tree, not a pattern.
 */
static int quarantine_prefix_path(char *out, size_t outsz, const char *prefix, rg_error *err)
{
    size_t len = strlen(prefix);
    const char *seg;

    while (len > 0 && prefix[len - 1] == '/')
        len--;
    if (len == 0 || len >= outsz || prefix[0] == '/')
        goto bad;
    memcpy(out, prefix, len);
    out[len] = '\0';
    for (seg = out;;) {
        size_t n = strcspn(seg, "/");

        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            goto bad;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)seg[i] < 0x20 || seg[i] == 0x7f)
                goto bad;
        if (seg[n] == '\0')
            return 0;
        seg += n + 1;
    }
bad:
    return rg_error_set(err, -EINVAL, "\"%.200s\" is not a relative directory path", prefix);
}

/* SHA-1: the entry at `path` in the tree of commit `id`; *out NULL when there is none. */
static int quarantine_entry_at(git_tree_entry **out, rgit_quarantine *q, const git_oid *id,
                               const char *path, rg_error *err)
{
    git_commit *commit = NULL;
    git_tree *tree = NULL;
    int rc = 0, grc;

    *out = NULL;
    if (git_commit_lookup(&commit, q->repo, id) < 0 || git_commit_tree(&tree, commit) < 0) {
        rc = quarantine_git_error(err, RG_E_PROTOCOL, "reading a commit's tree");
        goto done;
    }
    grc = git_tree_entry_bypath(out, tree, path);
    if (grc == GIT_ENOTFOUND) {
        *out = NULL;
        git_error_clear();
    } else if (grc < 0) {
        rc = quarantine_git_error(err, RG_E_PROTOCOL, "reading a tree");
    }
done:
    git_tree_free(tree);
    git_commit_free(commit);
    return rc;
}

/* SHA-1: *out = the upstream's HEAD commit; *found 0 when HEAD is unborn. */
static int quarantine_upstream_head(git_oid *out, int *found, rgit_quarantine *q, rg_error *err)
{
    git_repository *up = NULL;
    int rc = 0, grc;

    *found = 0;
    /* Opened only to resolve one reference; nothing is written. */
    if (git_repository_open_bare(&up, q->upstream) < 0)
        return quarantine_git_error(err, RG_E_UPSTREAM, "opening the upstream repository");
    grc = git_reference_name_to_id(out, up, "HEAD");
    if (grc == GIT_ENOTFOUND || grc == GIT_EUNBORNBRANCH) {
        git_error_clear();
    } else if (grc < 0) {
        rc = quarantine_git_error(err, RG_E_UPSTREAM, "resolving the upstream's HEAD");
    } else {
        *found = 1;
    }
    git_repository_free(up);
    return rc;
}

static int quarantine_changes_prefix_libgit2(int *out, rgit_quarantine *q, const char *old_hex,
                                             const char *new_hex, const char *path, rg_error *err)
{
    git_tree_entry *old_entry = NULL, *new_entry = NULL;
    git_oid old_id, new_id;
    int rc, have_old = 1;

    if ((rc = quarantine_parse_oid(&new_id, new_hex, err)) < 0 ||
        (rc = quarantine_require_commit(q, &new_id, new_hex, err)) < 0)
        goto done;
    if (old_hex != NULL)
        rc = quarantine_parse_oid(&old_id, old_hex, err);
    else
        rc = quarantine_upstream_head(&old_id, &have_old, q, err);
    if (rc < 0)
        goto done;
    if (have_old) {
        char hex[GIT_OID_HEXSZ + 1];

        git_oid_tostr(hex, sizeof(hex), &old_id);
        if ((rc = quarantine_require_commit(q, &old_id, hex, err)) < 0 ||
            (rc = quarantine_entry_at(&old_entry, q, &old_id, path, err)) < 0)
            goto done;
    }
    rc = quarantine_entry_at(&new_entry, q, &new_id, path, err);
    if (rc < 0)
        goto done;
    /* Ids name content, so equal ids (and modes) mean an identical subtree. */
    if (old_entry == NULL || new_entry == NULL)
        *out = old_entry != new_entry;
    else
        *out = !git_oid_equal(git_tree_entry_id(old_entry), git_tree_entry_id(new_entry)) ||
               git_tree_entry_filemode(old_entry) != git_tree_entry_filemode(new_entry);
done:
    git_tree_entry_free(old_entry);
    git_tree_entry_free(new_entry);
    return rc;
}

/* SHA-256: `git ls-tree <commit> -- <path>` names the entry (mode, type, id), or nothing. */
static int quarantine_git_entry_at(rg_buf *out, rgit_quarantine *q, const char *commit_hex,
                                   const char *path, rg_error *err)
{
    const char *args[] = {"--literal-pathspecs", "ls-tree", commit_hex, "--", path, NULL};
    int status = -1, rc;

    rc = quarantine_git(&status, out, q, args, err);
    if (rc == 0 && status != 0)
        rc = rg_error_set(err, RG_E_PROTOCOL, "reading the tree of %s failed (git status %d)",
                          commit_hex, status);
    return rc;
}

static int quarantine_changes_prefix_git(int *out, rgit_quarantine *q, const char *old_hex,
                                         const char *new_hex, const char *path, rg_error *err)
{
    rg_buf head = RG_BUF_INIT(256);
    rg_buf old_entry = RG_BUF_INIT(QUARANTINE_CHILD_OUTPUT_MAX);
    rg_buf new_entry = RG_BUF_INIT(QUARANTINE_CHILD_OUTPUT_MAX);
    int rc, status = -1;

    if ((rc = quarantine_git_require_commit(q, new_hex, err)) < 0)
        goto done;
    if (old_hex == NULL) {
        const char *args[] = {"rev-parse", "--verify", "-q", "HEAD^{commit}", NULL};

        rc = quarantine_git(&status, &head, q, args, err);
        if (rc < 0)
            goto done;
        /* Anything but one id means an unborn HEAD: compare against nothing. */
        if (status == 0 && head.data != NULL && head.len == q->hexlen + 1) {
            head.data[q->hexlen] = '\0';
            old_hex = head.data;
        }
    }
    if (old_hex != NULL && ((rc = quarantine_git_require_commit(q, old_hex, err)) < 0 ||
                            (rc = quarantine_git_entry_at(&old_entry, q, old_hex, path, err)) < 0))
        goto done;
    rc = quarantine_git_entry_at(&new_entry, q, new_hex, path, err);
    if (rc < 0)
        goto done;
    *out = old_entry.len != new_entry.len ||
           (new_entry.len > 0 && memcmp(old_entry.data, new_entry.data, new_entry.len) != 0);
done:
    rg_buf_free(&head);
    rg_buf_free(&old_entry);
    rg_buf_free(&new_entry);
    return rc;
}

int rgit_quarantine_changes_prefix(int *out, rgit_quarantine *q, const char *old_hex,
                                   const char *new_hex, const char *prefix, rg_error *err)
{
    char path[PATH_MAX];
    int rc;

    *out = 0;
    if (q->state != QUARANTINE_FINISHED)
        return rg_error_set(err, -EINVAL, "the pack is not complete");
    rc = quarantine_prefix_path(path, sizeof(path), prefix, err);
    if (rc < 0)
        return rc;
    if (q->hexlen == QUARANTINE_SHA256_HEXLEN)
        return quarantine_changes_prefix_git(out, q, old_hex, new_hex, path, err);
    git_error_clear();
    return quarantine_changes_prefix_libgit2(out, q, old_hex, new_hex, path, err);
}

/* ---------------------------------------------------------------------------
 * For inspection
 * ------------------------------------------------------------------------- */

struct git_repository *rgit_quarantine_repository(const rgit_quarantine *q)
{
    return q->state == QUARANTINE_FINISHED ? q->repo : NULL;
}

const char *rgit_quarantine_pack_index(const rgit_quarantine *q)
{
    return q->state == QUARANTINE_FINISHED ? q->pack_idx : NULL;
}

const char *rgit_quarantine_upstream(const rgit_quarantine *q)
{
    return q->upstream;
}

const char *rgit_quarantine_dir(const rgit_quarantine *q)
{
    return q->dir;
}

/* ---------------------------------------------------------------------------
 * Teardown
 * ------------------------------------------------------------------------- */

void rgit_quarantine_free(rgit_quarantine *q)
{
    if (q == NULL)
        return;
    /* Close every descriptor and mapping into the directory before removing it. */
    rg_proc_free(q->indexer);
    rg_buf_free(&q->index_out);
    git_repository_free(q->repo);
    git_odb_free(q->odb);
    if (q->dir != NULL) {
        /* Whatever is left is this push's own; links are not followed. */
        rg_fs_remove_tree(q->dir, 0, NULL);
        free(q->dir);
    }
    free(q->objects);
    free(q->upstream);
    free(q->pack_idx);
    if (q->libgit2_ready)
        git_libgit2_shutdown();
    free(q);
}

int rgit_quarantine_log(rg_buf *out, rgit_quarantine *q, const char *old_hex, const char *new_hex,
                        unsigned max, rg_error *err)
{
    char count[24];
    const char *args[] = {"log",
                          "--format=%H%x09%aI%x09%<(80,trunc)%an%x09%<(200,trunc)%s",
                          "-n",
                          count,
                          new_hex,
                          "--not",
                          old_hex ? old_hex : "--all",
                          NULL};
    int status = -1, rc;

    if (q->state != QUARANTINE_FINISHED)
        return rg_error_set(err, -EINVAL, "the quarantine is not finished");
    if ((rc = quarantine_git_require_commit(q, new_hex, err)) < 0 ||
        (old_hex && (rc = quarantine_git_require_commit(q, old_hex, err)) < 0))
        return rc;
    snprintf(count, sizeof(count), "%u", max);
    rc = quarantine_git(&status, out, q, args, err);
    if (rc == 0 && status != 0)
        rc = rg_error_set(err, RG_E_PROTOCOL, "git log failed (status %d)", status);
    return rc;
}
