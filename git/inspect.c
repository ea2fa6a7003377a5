/*
 * Content inspection over a quarantine; see inspect.h. Objects are listed
 * from the pack's own index file, so nothing the pack holds is missed,
 * referenced or not; they are read, in pack order, through the
 * quarantine's repository. Commit ranges are libgit2 revision walks, and
 * changed paths tree-to-tree diffs without content (no rename detection,
 * no blob is read), so a range costs what its trees cost.
 */
#include "git/inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <git2.h>

#include "util/buf.h"
#include "util/fs.h"
#include "util/proc.h"

/* What `git log` may print for a range: a line of 43 bytes per commit. */
#define SIGNATURES_OUTPUT_MAX ((size_t)256 << 20)

void rgit_inspect_budget_init(rgit_inspect_budget *out, uint64_t bytes, unsigned seconds)
{
    out->bytes_left = bytes;
    out->bytes_max = bytes;
    out->seconds = seconds;
    clock_gettime(CLOCK_MONOTONIC, &out->deadline);
    out->deadline.tv_sec += seconds;
}

/* The budget's deadline as rg_proc takes it. */
static int64_t deadline_ns(const rgit_inspect_budget *b)
{
    return (int64_t)b->deadline.tv_sec * 1000000000 + b->deadline.tv_nsec;
}

static int over_time(const rgit_inspect_budget *b, rg_error *err)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > b->deadline.tv_sec ||
        (now.tv_sec == b->deadline.tv_sec && now.tv_nsec >= b->deadline.tv_nsec))
        return rg_error_set(err, RG_E_TOO_BIG,
                            "inspection budget exceeded (limits.inspect_seconds: %u s)",
                            b->seconds);
    return 0;
}

static int charge(rgit_inspect_budget *b, uint64_t size, rg_error *err)
{
    if (size > b->bytes_left)
        return rg_error_set(
            err, RG_E_TOO_BIG,
            "inspection budget exceeded (limits.inspect_bytes: %llu inflated bytes)",
            (unsigned long long)b->bytes_max);
    b->bytes_left -= size;
    return 0;
}

static int git_fail(rg_error *err, const char *what)
{
    const git_error *e = git_error_last();

    return rg_error_set(err, RG_E_PROTOCOL, "%s: %s", what,
                        e && e->message ? e->message : "unknown libgit2 error");
}

static git_repository *repo_of(rgit_quarantine *q, rg_error *err)
{
    git_repository *repo = rgit_quarantine_repository(q);

    if (repo == NULL)
        rg_error_set(err, RG_E_PROTOCOL,
                     "content conditions read SHA-1 repositories only (libgit2 1.5)");
    return repo;
}

/* ---------------------------------------------------------------- objects */

/* One entry of the pack's index. */
typedef struct pack_entry {
    git_oid id;
    uint64_t offset;
} pack_entry;

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int by_offset(const void *a, const void *b)
{
    uint64_t x = ((const pack_entry *)a)->offset, y = ((const pack_entry *)b)->offset;

    return x < y ? -1 : x > y;
}

/*
 * Every object in the pack's index (version 2, what index-pack writes),
 * sorted by where it sits in the pack. Read in that order, a delta's base
 * was read just before it and is still in libgit2's delta base cache; in
 * id order each read would rebuild its chain from far away, and the cost
 * of a large pack would grow faster than its size.
 */
static int pack_entries(pack_entry **out, size_t *n, rgit_quarantine *q, rg_error *err)
{
    rg_buf idx = RG_BUF_INIT((size_t)1 << 34);
    const unsigned char *d, *ids, *offs, *large;
    size_t count, nlarge, len;
    int rc;

    *out = NULL;
    *n = 0;
    rc = rg_fs_read_file(&idx, rgit_quarantine_pack_index(q), err);
    if (rc < 0)
        return rc;
    d = (const unsigned char *)idx.data;
    len = idx.len;
    /* Bounded: every size below is checked against the file's length. */
    if (len < 8 + 1024 + 40 || memcmp(d, "\377tOc", 4) != 0 || be32(d + 4) != 2) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "the pushed pack's index is not version 2");
        goto done;
    }
    count = be32(d + 8 + 255 * 4);
    if (count > (len - 1072) / 28) {
        rc = rg_error_set(err, RG_E_PROTOCOL, "the pushed pack's index is truncated");
        goto done;
    }
    ids = d + 8 + 1024;
    offs = ids + count * 24;
    large = offs + count * 4;
    nlarge = (len - 1072 - count * 28) / 8;
    *out = calloc(count ? count : 1, sizeof(**out));
    if (*out == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t o = be32(offs + 4 * i);

        git_oid_fromraw(&(*out)[i].id, ids + 20 * i);
        if (o & 0x80000000u) {
            o &= 0x7fffffffu;
            if (o >= nlarge) {
                rc = rg_error_set(err, RG_E_PROTOCOL, "the pushed pack's index is truncated");
                goto done;
            }
            (*out)[i].offset = (uint64_t)be32(large + 8 * o) << 32 | be32(large + 8 * o + 4);
        } else {
            (*out)[i].offset = o;
        }
    }
    qsort(*out, count, sizeof(**out), by_offset);
    *n = count;
done:
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    rg_buf_free(&idx);
    return rc;
}

static rgit_inspect_type type_of(git_object_t t)
{
    switch (t) {
    case GIT_OBJECT_COMMIT:
        return RGIT_INSPECT_COMMIT;
    case GIT_OBJECT_BLOB:
        return RGIT_INSPECT_BLOB;
    case GIT_OBJECT_TAG:
        return RGIT_INSPECT_TAG;
    default:
        return RGIT_INSPECT_TREE;
    }
}

/* A large object's content, streamed from git to the caller. */
typedef struct stream_ctx {
    const rgit_inspect_object_fns *fns;
    const rgit_inspect_object *o;
    uint64_t seen;
} stream_ctx;

static int stream_sink(void *ctx, const char *data, size_t len, rg_error *err)
{
    stream_ctx *c = ctx;

    /* git says what the header said; more would be a lie the budget did not cover. */
    c->seen += len;
    if (c->seen > c->o->size)
        return rg_error_set(err, RG_E_PROTOCOL, "object %s is larger than its header says",
                            c->o->id);
    return c->fns->data(c->o, data, len, c->fns->arg, err);
}

/* Hand one object's content to fns->data and fns->end. */
static int object_data(rgit_quarantine *q, git_odb *odb, const git_oid *id,
                       const rgit_inspect_object *o, const rgit_inspect_object_fns *fns,
                       const rgit_inspect_budget *b, rg_error *err)
{
    git_odb_object *obj = NULL;
    int rc;

    if (o->size > RGIT_INSPECT_INLINE_MAX) {
        stream_ctx c = {fns, o, 0};

        rc = rgit_quarantine_stream_object(q,
                                           o->type == RGIT_INSPECT_BLOB     ? "blob"
                                           : o->type == RGIT_INSPECT_COMMIT ? "commit"
                                                                            : "tag",
                                           o->id, stream_sink, &c, deadline_ns(b), err);
        if (rc == -ETIMEDOUT)
            rc = rg_error_set(err, RG_E_TOO_BIG,
                              "inspection budget exceeded (limits.inspect_seconds: %u s)",
                              b->seconds);
    } else if (git_odb_read(&obj, odb, id) < 0) {
        rc = git_fail(err, "reading an object");
    } else {
        rc = fns->data(o, git_odb_object_data(obj), git_odb_object_size(obj), fns->arg, err);
    }
    git_odb_object_free(obj);
    if (rc >= 0)
        rc = fns->end(o, fns->arg, err);
    return rc;
}

int rgit_inspect_objects(rgit_quarantine *q, const rgit_inspect_object_fns *fns,
                         rgit_inspect_budget *b, rg_error *err)
{
    git_repository *repo = repo_of(q, err);
    git_odb *odb = NULL, *up = NULL;
    pack_entry *ids = NULL;
    size_t n = 0;
    char path[4096];
    int rc = 0;

    if (repo == NULL)
        return RG_E_PROTOCOL;
    git_error_clear();
    snprintf(path, sizeof(path), "%s/objects", rgit_quarantine_upstream(q));
    if (git_repository_odb(&odb, repo) < 0 || git_odb_open(&up, path) < 0) {
        rc = git_fail(err, "opening the objects");
        goto done;
    }
    if ((rc = pack_entries(&ids, &n, q, err)) < 0)
        goto done;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rgit_inspect_object o;
        git_object_t type;
        size_t size;

        if ((i & 63) == 0 && (rc = over_time(b, err)) < 0)
            break;
        /* A thin pack's bases are completed from upstream: nothing new.
         * Not refreshed: a miss would rescan upstream's packs per object. */
        if (git_odb_exists_ext(up, &ids[i].id, GIT_ODB_LOOKUP_NO_REFRESH))
            continue;
        if (git_odb_read_header(&size, &type, odb, &ids[i].id) < 0) {
            rc = git_fail(err, "reading an object's header");
            break;
        }
        git_oid_tostr(o.id, sizeof(o.id), &ids[i].id);
        o.type = type_of(type);
        o.size = size;
        if (fns->object(&o, fns->arg) != 0)
            break;
        if (fns->data == NULL || o.type == RGIT_INSPECT_TREE)
            continue;
        if ((rc = charge(b, size, err)) < 0)
            break;
        rc = object_data(q, odb, &ids[i].id, &o, fns, b, err);
    }
done:
    free(ids);
    git_odb_free(up);
    git_odb_free(odb);
    return rc;
}

/* ------------------------------------------------------------------ range */

/* Hide every commit an upstream ref points to (a create's range starts there). */
static int hide_upstream_refs(git_revwalk *w, rgit_quarantine *q, rg_error *err)
{
    git_repository *up = NULL;
    git_reference_iterator *it = NULL;
    git_reference *ref;
    int rc = 0;

    if (git_repository_open_bare(&up, rgit_quarantine_upstream(q)) < 0 ||
        git_reference_iterator_new(&it, up) < 0) {
        rc = git_fail(err, "listing the upstream's refs");
        goto done;
    }
    /* Bounded: the upstream's refs. */
    while (git_reference_next(&ref, it) == 0) {
        git_object *peeled = NULL;

        /* Refs to other objects (a tag of a blob) hide no commit. */
        if (git_reference_peel(&peeled, ref, GIT_OBJECT_COMMIT) == 0 &&
            git_revwalk_hide(w, git_object_id(peeled)) < 0)
            rc = git_fail(err, "walking the history");
        git_object_free(peeled);
        git_reference_free(ref);
        if (rc < 0)
            break;
    }
    git_error_clear();
done:
    git_reference_iterator_free(it);
    git_repository_free(up);
    return rc;
}

/* `hex` peeled to a commit in *out; 1 when it is no commit, <0 on error. */
static int peel_commit(git_oid *out, git_repository *repo, const char *hex, rg_error *err)
{
    git_object *obj = NULL, *peeled = NULL;
    git_oid id;
    int rc = 0;

    if (strlen(hex) != GIT_OID_HEXSZ || git_oid_fromstr(&id, hex) < 0)
        return rg_error_set(err, RG_E_PROTOCOL, "\"%.64s\" is not a SHA-1 object id", hex);
    if (git_object_lookup(&obj, repo, &id, GIT_OBJECT_ANY) < 0)
        return git_fail(err, "reading a pushed id");
    if (git_object_peel(&peeled, obj, GIT_OBJECT_COMMIT) < 0) {
        git_error_clear();
        rc = 1;
    } else {
        *out = *git_object_id(peeled);
    }
    git_object_free(peeled);
    git_object_free(obj);
    return rc;
}

/* One commit's changed paths against each parent (a root commit: all it adds). */
static int commit_paths(git_repository *repo, git_commit *c, const rgit_inspect_commit *info,
                        const rgit_inspect_range_fns *fns, rg_error *err)
{
    git_diff_options opts;
    git_tree *tree = NULL;
    unsigned n = git_commit_parentcount(c);
    int rc = 0;

    git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
    opts.flags = GIT_DIFF_SKIP_BINARY_CHECK;
    if (git_commit_tree(&tree, c) < 0)
        return git_fail(err, "reading a commit's tree");
    for (unsigned p = 0; p < (n ? n : 1) && rc == 0; p++) {
        git_commit *parent = NULL;
        git_tree *ptree = NULL;
        git_diff *diff = NULL;

        if (n > 0 && (git_commit_parent(&parent, c, p) < 0 || git_commit_tree(&ptree, parent) < 0))
            rc = git_fail(err, "reading a parent's tree");
        else if (git_diff_tree_to_tree(&diff, repo, ptree, tree, &opts) < 0)
            rc = git_fail(err, "comparing trees");
        for (size_t d = 0; rc == 0 && d < git_diff_num_deltas(diff); d++) {
            const git_diff_delta *delta = git_diff_get_delta(diff, d);
            rgit_inspect_path path = {.blob = ""};

            if (delta->status == GIT_DELTA_DELETED) {
                path.path = delta->old_file.path;
            } else {
                path.path = delta->new_file.path;
                git_oid_tostr(path.blob, sizeof(path.blob), &delta->new_file.id);
            }
            if (fns->path(info, &path, fns->arg) != 0)
                rc = 1;
        }
        git_diff_free(diff);
        git_tree_free(ptree);
        git_commit_free(parent);
    }
    git_tree_free(tree);
    return rc;
}

int rgit_inspect_range(rgit_quarantine *q, const char *old_hex, const char *new_hex,
                       const rgit_inspect_range_fns *fns, rgit_inspect_budget *b, rg_error *err)
{
    git_repository *repo = repo_of(q, err);
    git_revwalk *w = NULL;
    git_oid id, old;
    int rc, grc = 0;

    if (repo == NULL)
        return RG_E_PROTOCOL;
    git_error_clear();
    rc = peel_commit(&id, repo, new_hex, err);
    if (rc != 0)
        return rc > 0 ? 0 : rc;
    if (git_revwalk_new(&w, repo) < 0 || git_revwalk_push(w, &id) < 0) {
        rc = git_fail(err, "walking the history");
        goto done;
    }
    if (old_hex == NULL) {
        rc = hide_upstream_refs(w, q, err);
    } else {
        rc = peel_commit(&old, repo, old_hex, err);
        if (rc == 0 && git_revwalk_hide(w, &old) < 0)
            rc = git_fail(err, "walking the history");
        rc = rc > 0 ? 0 : rc;
    }
    /* Bounded: the walk visits each commit of the range once, against the deadline. */
    while (rc == 0 && (grc = git_revwalk_next(&id, w)) == 0) {
        git_commit *c = NULL;
        rgit_inspect_commit info;

        if ((rc = over_time(b, err)) < 0)
            break;
        if (git_commit_lookup(&c, repo, &id) < 0) {
            rc = git_fail(err, "reading a commit");
            break;
        }
        git_oid_tostr(info.id, sizeof(info.id), &id);
        /* Never NULL for the callbacks, whatever the commit holds. */
        info.author_email = git_commit_author(c)->email ? git_commit_author(c)->email : "";
        info.committer_email = git_commit_committer(c)->email ? git_commit_committer(c)->email : "";
        info.message = git_commit_message(c) ? git_commit_message(c) : "";
        info.nparents = git_commit_parentcount(c);
        if (fns->commit && fns->commit(&info, fns->arg) != 0)
            rc = 1;
        else if (fns->path)
            rc = commit_paths(repo, c, &info, fns, err);
        git_commit_free(c);
    }
    /* A history with a missing commit fails rather than ending the range early. */
    if (rc == 0 && grc < 0 && grc != GIT_ITEROVER)
        rc = git_fail(err, "walking the history");
    if (rc > 0)
        rc = 0;
done:
    git_revwalk_free(w);
    return rc;
}

/* ------------------------------------------------------------- signatures */

/*
 * A private GNUPGHOME in the quarantine holding only the configured
 * keyring, every key in it trusted (the keyring is the trust decision) and
 * no agent started. Made once per quarantine.
 */
static int gnupg_home(char *out, size_t outsz, rgit_quarantine *q, const char *keyring,
                      const rgit_inspect_budget *b, rg_error *err)
{
    static const char conf[] = "trust-model always\nno-autostart\n";
    const char *argv[] = {"gpg",      "--homedir", out, "--batch", "--quiet", "--no-autostart",
                          "--import", keyring,     NULL};
    const char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C", "HOME=/nonexistent", NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    char conf_path[4200];
    struct stat st;
    int status = -1, rc;

    snprintf(out, outsz, "%s/gnupg", rgit_quarantine_dir(q));
    if (stat(out, &st) == 0)
        return 0;
    if (mkdir(out, 0700) < 0)
        return rg_error_set(err, -errno, "%s: %s", out, strerror(errno));
    snprintf(conf_path, sizeof(conf_path), "%s/gpg.conf", out);
    rc = rg_fs_write_atomic(conf_path, conf, sizeof(conf) - 1, 0600, err);
    if (rc < 0)
        return rc;
    s.argv = argv;
    s.envp = envp;
    s.flags = RG_PROC_GROUP | RG_PROC_STDERR;
    rc = rg_proc_run(&status, NULL, &s, deadline_ns(b), err);
    if (rc == 0 && status != 0)
        rc = rg_error_set(err, RG_E_CHILD, "gpg could not import signing.gpg_keyring (status %d)",
                          status);
    return rc;
}

int rgit_inspect_signatures(rgit_quarantine *q, const char *old_hex, const char *new_hex,
                            const rgit_inspect_signing *keys,
                            int (*fn)(const char *id, int verified, char letter, void *arg),
                            void *arg, rgit_inspect_budget *b, rg_error *err)
{
    git_repository *repo = repo_of(q, err);
    rg_buf out = RG_BUF_INIT(SIGNATURES_OUTPUT_MAX);
    char home[4200], new_id[41], old_id[42];
    const char *config[8 + 1], *args[8];
    git_oid id;
    size_t nc = 0, na = 0;
    int rc, status = -1;

    if (repo == NULL)
        return RG_E_PROTOCOL;
    git_error_clear();
    rc = peel_commit(&id, repo, new_hex, err);
    if (rc != 0)
        return rc > 0 ? 0 : rc;
    git_oid_tostr(new_id, sizeof(new_id), &id);
    if (keys->gpg_keyring &&
        (rc = gnupg_home(home, sizeof(home), q, keys->gpg_keyring, b, err)) < 0)
        return rc;
    /* The programs by name: the repository's config must not pick them. */
    config[nc++] = "gpg.program";
    config[nc++] = "gpg";
    config[nc++] = "gpg.ssh.program";
    config[nc++] = "ssh-keygen";
    config[nc++] = "gpg.ssh.allowedSignersFile";
    config[nc++] = keys->allowed_signers ? keys->allowed_signers : "/dev/null";
    config[nc++] = "gpg.ssh.revocationFile";
    config[nc++] = "/dev/null";
    config[nc] = NULL;
    args[na++] = "log";
    args[na++] = "--format=%H %G?";
    args[na++] = new_id;
    if (old_hex != NULL) {
        rc = peel_commit(&id, repo, old_hex, err);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            old_id[0] = '^';
            git_oid_tostr(old_id + 1, sizeof(old_id) - 1, &id);
            args[na++] = old_id;
        }
    } else {
        args[na++] = "--not";
        args[na++] = "--all";
    }
    args[na] = NULL;
    rc = rgit_quarantine_run_git(&status, &out, q, args, config, keys->gpg_keyring ? home : NULL,
                                 deadline_ns(b), err);
    if (rc == -ETIMEDOUT)
        rc = rg_error_set(err, RG_E_TOO_BIG,
                          "inspection budget exceeded (limits.inspect_seconds: %u s)", b->seconds);
    else if (rc == 0 && status != 0)
        rc = rg_error_set(err, RG_E_PROTOCOL, "checking signatures failed (git status %d)", status);
    /* Bounded: the output is capped; each line is "<40 hex> <letter>". */
    for (char *line = out.data; rc == 0 && line && line < out.data + out.len;) {
        char *nl = memchr(line, '\n', (size_t)(out.data + out.len - line));

        if (nl == NULL || nl - line != 42 || line[40] != ' ') {
            rc = rg_error_set(err, RG_E_PROTOCOL, "checking signatures: unexpected output");
            break;
        }
        line[40] = '\0';
        if (fn(line, line[41] == 'G', line[41], arg) != 0)
            break;
        line = nl + 1;
    }
    rg_buf_free(&out);
    return rc;
}
