/*
 * One audited ref update read back from upstream (refgit.h): a revwalk
 * with the old commit (or every other ref) hidden, stopped one commit past
 * the cap, and a tree-to-tree diff whose deltas are kept up to the cap.
 */
#include "console/refgit.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gateway/route.h"

int console_refgit_dir(char **out, int *mirror, const config_model *cfg, const char *repo,
                       rg_error *err)
{
    gateway_route route;
    const config_upstream *up;
    char url[1024];
    struct stat st;

    *out = NULL;
    *mirror = 0;
    /* The audit record's name is checked as a request's would be: it becomes a path. */
    if ((size_t)snprintf(url, sizeof(url), "/%s/info/refs", repo) >= sizeof(url) ||
        gateway_route_parse(&route, "GET", url, "git-receive-pack", err) < 0)
        return rg_error_set(err, -ENOENT, "the record names no valid repository");
    up = config_find_upstream(cfg, route.host);
    if (up == NULL)
        return rg_error_set(err, -ENOENT, "%s is no longer an upstream of this gateway",
                            route.host);
    if (up->root != NULL)
        return gateway_route_local_dir(out, up, &route, err);
    if (asprintf(out, "%s/mirrors/%s/%s.git", cfg->state_dir, route.host, route.path) < 0) {
        *out = NULL;
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    if (stat(*out, &st) < 0 || !S_ISDIR(st.st_mode)) {
        free(*out);
        *out = NULL;
        return rg_error_set(err, -ENOENT, "there is no mirror of %s here", route.repo);
    }
    *mirror = 1;
    return 0;
}

static int is_zero(const char *id)
{
    return id[0] != '\0' && strspn(id, "0") == strlen(id);
}

/* Drop an incomplete UTF-8 sequence at the end of `s` (left there by a cut). */
static void drop_partial_utf8(char *s)
{
    size_t len = strlen(s), i = len, need;
    unsigned char lead;

    while (i > 0 && len - i < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i == 0)
        return;
    lead = (unsigned char)s[i - 1];
    need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (len - (i - 1) < need)
        s[i - 1] = '\0';
}

static int git_fail(rg_error *err, const char *what)
{
    const git_error *e = git_error_last();

    return rg_error_set(err, -EIO, "%s: %s", what, e && e->message ? e->message : "libgit2 error");
}

/*
 * The commit `hex` names (a tag is peeled), into *out; 1 when the
 * repository has no such object, -1 (err set) when it cannot be read.
 */
static int lookup_commit(git_commit **out, git_repository *repo, const char *hex, rg_error *err)
{
    git_object *obj = NULL;
    git_oid id;
    int grc;

    *out = NULL;
    if (strlen(hex) != GIT_OID_HEXSZ || git_oid_fromstr(&id, hex) < 0)
        return 1;
    grc = git_object_lookup(&obj, repo, &id, GIT_OBJECT_ANY);
    if (grc == GIT_ENOTFOUND)
        return 1;
    if (grc < 0)
        return git_fail(err, "the object cannot be read");
    grc = git_object_peel((git_object **)out, obj, GIT_OBJECT_COMMIT);
    git_object_free(obj);
    if (grc == GIT_ENOTFOUND || grc == GIT_EINVALIDSPEC || grc == GIT_EPEEL)
        return 1;
    return grc < 0 ? git_fail(err, "the object cannot be peeled") : 0;
}

/* Hide every direct ref but `refname`: what a created ref brings is what no other ref has. */
static int hide_other_refs(git_revwalk *w, git_repository *repo, const char *refname, rg_error *err)
{
    git_reference_iterator *it = NULL;
    git_reference *ref = NULL;
    git_object *peeled = NULL;
    int grc, rc = 0;

    if (git_reference_iterator_new(&it, repo) < 0)
        return git_fail(err, "the refs cannot be listed");
    while (rc == 0 && (grc = git_reference_next(&ref, it)) == 0) {
        /* A symbolic ref points at a direct one, which the loop meets too. */
        if (git_reference_type(ref) == GIT_REFERENCE_DIRECT &&
            strcmp(git_reference_name(ref), refname) != 0 &&
            git_reference_peel(&peeled, ref, GIT_OBJECT_COMMIT) == 0) {
            if (git_revwalk_hide(w, git_object_id(peeled)) < 0)
                rc = git_fail(err, "a ref cannot be hidden");
            git_object_free(peeled);
        }
        git_reference_free(ref);
    }
    if (rc == 0 && grc != GIT_ITEROVER)
        rc = git_fail(err, "the refs cannot be listed");
    git_reference_iterator_free(it);
    return rc;
}

/* The commits new brings, newest first, capped; *last: the oldest one kept (owned). */
static int walk(console_refgit *out, git_commit **last, git_repository *repo, const char *refname,
                const git_commit *old, const git_commit *new, rg_error *err)
{
    git_revwalk *w = NULL;
    git_commit *c = NULL;
    git_oid id;
    int grc, rc = 0;

    *last = NULL;
    out->commits = calloc(CONSOLE_REFGIT_COMMITS_MAX, sizeof(*out->commits));
    if (out->commits == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (git_revwalk_new(&w, repo) < 0 ||
        git_revwalk_sorting(w, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME) < 0 ||
        git_revwalk_push(w, git_commit_id(new)) < 0) {
        rc = git_fail(err, "the commits cannot be walked");
        goto done;
    }
    if (old != NULL && git_revwalk_hide(w, git_commit_id(old)) < 0) {
        rc = git_fail(err, "the old commit cannot be hidden");
        goto done;
    }
    if (old == NULL && (rc = hide_other_refs(w, repo, refname, err)) < 0)
        goto done;
    while ((grc = git_revwalk_next(&id, w)) == 0) {
        const git_signature *a;
        console_commit *cc;

        if (out->ncommits == CONSOLE_REFGIT_COMMITS_MAX) {
            out->commits_cut = 1;
            break;
        }
        if (git_commit_lookup(&c, repo, &id) < 0) {
            rc = git_fail(err, "a commit cannot be read");
            goto done;
        }
        cc = &out->commits[out->ncommits++];
        git_oid_tostr(cc->id, sizeof(cc->id), &id);
        a = git_commit_author(c);
        snprintf(cc->author, sizeof(cc->author), "%s <%s>", a && a->name ? a->name : "",
                 a && a->email ? a->email : "");
        drop_partial_utf8(cc->author);
        snprintf(cc->subject, sizeof(cc->subject), "%s",
                 git_commit_summary(c) ? git_commit_summary(c) : "");
        drop_partial_utf8(cc->subject);
        git_commit_free(*last);
        *last = c;
        c = NULL;
    }
    if (grc < 0 && grc != GIT_ITEROVER)
        rc = git_fail(err, "the commits cannot be walked");
done:
    git_revwalk_free(w);
    return rc;
}

static char status_char(git_delta_t s)
{
    switch (s) {
    case GIT_DELTA_ADDED:
        return 'A';
    case GIT_DELTA_DELETED:
        return 'D';
    case GIT_DELTA_RENAMED:
        return 'R';
    case GIT_DELTA_TYPECHANGE:
        return 'T';
    default:
        return 'M';
    }
}

typedef struct paths_acc {
    console_refgit *out;
    int oom;
} paths_acc;

/*
 * Each delta as the diff finds it (in path order): kept here, skipped by
 * the diff itself, and the diff stopped one past the cap, so its cost
 * ends with the cap however many paths changed.
 */
static int on_delta(const git_diff *so_far, const git_diff_delta *d, const char *pathspec,
                    void *payload)
{
    paths_acc *acc = payload;
    console_refgit *out = acc->out;
    const char *p = d->status == GIT_DELTA_DELETED ? d->old_file.path : d->new_file.path;

    (void)so_far;
    (void)pathspec;
    if (out->npaths == CONSOLE_REFGIT_PATHS_MAX) {
        out->paths_cut = 1;
        return GIT_EUSER;
    }
    out->paths[out->npaths].status = status_char(d->status);
    out->paths[out->npaths].path = strdup(p ? p : "");
    if (out->paths[out->npaths].path == NULL) {
        acc->oom = 1;
        return GIT_EUSER;
    }
    out->npaths++;
    return 1;
}

/* The paths that differ between base's tree (NULL: empty) and new's, capped. */
static int changed_paths(console_refgit *out, git_repository *repo, const git_commit *base,
                         const git_commit *new, rg_error *err)
{
    git_diff_options o;
    paths_acc acc = {.out = out};
    git_tree *from = NULL, *to = NULL;
    git_diff *diff = NULL;
    int grc, rc = 0;

    out->paths = calloc(CONSOLE_REFGIT_PATHS_MAX, sizeof(*out->paths));
    if (out->paths == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    git_diff_options_init(&o, GIT_DIFF_OPTIONS_VERSION);
    o.notify_cb = on_delta;
    o.payload = &acc;
    if ((base != NULL && git_commit_tree(&from, base) < 0) || git_commit_tree(&to, new) < 0) {
        rc = git_fail(err, "the trees cannot be read");
        goto done;
    }
    grc = git_diff_tree_to_tree(&diff, repo, from, to, &o);
    if (acc.oom)
        rc = rg_error_set(err, -ENOMEM, "out of memory");
    else if (grc < 0 && !(grc == GIT_EUSER && out->paths_cut))
        rc = git_fail(err, "the trees cannot be compared");
done:
    git_diff_free(diff);
    git_tree_free(from);
    git_tree_free(to);
    return rc;
}

int console_refgit_read(console_refgit *out, const char *gitdir, const char *refname,
                        const char *old_id, const char *new_id, rg_error *err)
{
    git_repository *repo = NULL;
    git_commit *old = NULL, *new = NULL, *last = NULL, *base = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if (is_zero(new_id)) {
        out->available = out->deleted = 1;
        return 0;
    }
    if (git_repository_open_ext(&repo, gitdir,
                                GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE, NULL) < 0)
        return git_fail(err, "the upstream repository cannot be opened");
    if ((rc = lookup_commit(&new, repo, new_id, err)) != 0) {
        if (rc == 1) {
            snprintf(out->why, sizeof(out->why), "%s", CONSOLE_REFGIT_UNAVAILABLE);
            rc = 0;
        }
        goto done;
    }
    if (!is_zero(old_id) && (rc = lookup_commit(&old, repo, old_id, err)) != 0) {
        if (rc == 1)
            rc = rg_error_set(err, -ENOENT, "the old commit is not in the upstream repository");
        goto done;
    }
    out->available = 1;
    if ((rc = walk(out, &last, repo, refname, old, new, err)) < 0)
        goto done;
    /* A created ref: the base is what its oldest new commit was made on. */
    if (old == NULL && last != NULL && !out->commits_cut && git_commit_parentcount(last) > 0 &&
        git_commit_parent(&base, last, 0) < 0) {
        rc = git_fail(err, "a parent cannot be read");
        goto done;
    }
    if (old == NULL && out->ncommits == 0)
        goto done; /* new is on another ref already: no path changed */
    out->empty_base = old == NULL && base == NULL;
    rc = changed_paths(out, repo, old ? old : base, new, err);
done:
    git_commit_free(base);
    git_commit_free(last);
    git_commit_free(old);
    git_commit_free(new);
    git_repository_free(repo);
    if (rc < 0)
        console_refgit_clear(out);
    return rc;
}

void console_refgit_clear(console_refgit *g)
{
    for (size_t i = 0; i < g->npaths; i++)
        free(g->paths[i].path);
    free(g->paths);
    free(g->commits);
    memset(g, 0, sizeof(*g));
}
