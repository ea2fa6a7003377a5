/*
 * Following symbolic refs (see symref.h): in a local repository with
 * libgit2 (only ref files and packed-refs are read: nothing in the
 * repository's config runs), or in the list a remote's ls-refs gave.
 */
#include "git/symref.h"

#include <git2.h>
#include <stdlib.h>
#include <string.h>

#include "git/pktline.h"

/* git's own limit on symbolic ref chains (refs.c SYMREF_MAXDEPTH). */
#define SYMREF_MAXDEPTH 5

/* The most symbolic refs an ls-refs answer may list before it is refused. */
#define LSREFS_SYMREFS_MAX 100000

struct rgit_symrefs {
    git_repository *repo; /* a local repository, or NULL for a list */
    char **names;         /* the list: names[i] points to targets[i] */
    char **targets;
    size_t n;
};

int rgit_symrefs_open(rgit_symrefs **out, const char *gitdir, rg_error *err)
{
    rgit_symrefs *s;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    git_libgit2_init();
    if (git_repository_open_bare(&s->repo, gitdir) < 0) {
        rg_error_set(err, RG_E_UPSTREAM, "cannot open the upstream repository: %s",
                     git_error_last() ? git_error_last()->message : "unknown error");
        rgit_symrefs_free(s);
        return RG_E_UPSTREAM;
    }
    *out = s;
    return 0;
}

/* ls-refs names the end of the chain, so one look-up answers. */
static int resolve_listed(char **out, const rgit_symrefs *refs, const char *refname, rg_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < refs->n; i++) {
        if (strcmp(refs->names[i], refname) != 0)
            continue;
        *out = strdup(refs->targets[i]);
        return *out ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int rgit_symrefs_resolve(char **out, rgit_symrefs *refs, const char *refname, rg_error *err)
{
    git_reference *ref = NULL;
    char *name;
    int rc = 0, depth;

    if (refs->repo == NULL)
        return resolve_listed(out, refs, refname, err);
    *out = NULL;
    name = strdup(refname);
    if (name == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (depth = 0;; depth++) {
        const char *target;

        git_reference_free(ref);
        ref = NULL;
        if (git_reference_lookup(&ref, refs->repo, name) < 0 ||
            git_reference_type(ref) != GIT_REFERENCE_SYMBOLIC)
            break;
        if (depth == SYMREF_MAXDEPTH) {
            rc = rg_error_set(err, RG_E_UPSTREAM, "%s: symbolic refs nest too deep", refname);
            goto done;
        }
        target = git_reference_symbolic_target(ref);
        free(name);
        name = strdup(target ? target : "");
        if (name == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
    }
    if (depth > 0) {
        *out = name;
        name = NULL;
    }
done:
    git_reference_free(ref);
    free(name);
    return rc;
}

void rgit_symrefs_free(rgit_symrefs *refs)
{
    if (refs == NULL)
        return;
    if (refs->repo) {
        git_repository_free(refs->repo);
        git_libgit2_shutdown();
    }
    for (size_t i = 0; i < refs->n; i++) {
        free(refs->names[i]);
        free(refs->targets[i]);
    }
    free(refs->names);
    free(refs->targets);
    free(refs);
}

int rgit_symrefs_lsrefs_request(rg_buf *out, const char *const *refnames, size_t n,
                                size_t oid_hexlen)
{
    int rc = rgit_pktline_printf(out, "command=ls-refs\n");

    if (rc == 0 && oid_hexlen == 64)
        rc = rgit_pktline_printf(out, "object-format=sha256\n");
    if (rc == 0)
        rc = rg_buf_append(out, "0001", 4);
    if (rc == 0)
        rc = rgit_pktline_printf(out, "symrefs\n");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = rgit_pktline_printf(out, "ref-prefix %s\n", refnames[i]);
    if (rc == 0)
        rc = rgit_pktline_flush(out);
    return rc;
}

/* Keep `name -> target` from one answer line, when it is a symref. */
static int add_listed(rgit_symrefs *s, const char *line, size_t len, rg_error *err)
{
    static const char attr[] = " symref-target:";
    const char *sp, *name, *t, *tend, *end = line + len;
    char **names, **targets;

    if (len > 0 && end[-1] == '\n')
        end--;
    sp = memchr(line, ' ', (size_t)(end - line));
    if (sp == NULL)
        return rg_error_set(err, RG_E_PROTOCOL, "malformed ls-refs line");
    name = sp + 1;
    t = memmem(name, (size_t)(end - name), attr, sizeof(attr) - 1);
    if (t == NULL)
        return 0;
    if (s->n == LSREFS_SYMREFS_MAX)
        return rg_error_set(err, RG_E_TOO_BIG, "too many symbolic refs upstream");
    names = realloc(s->names, (s->n + 1) * sizeof(*names));
    if (names)
        s->names = names;
    targets = realloc(s->targets, (s->n + 1) * sizeof(*targets));
    if (targets)
        s->targets = targets;
    if (names == NULL || targets == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    /* The name ends where the attribute starts; the target at the next
     * attribute or the end of the line. */
    s->names[s->n] = strndup(name, (size_t)(t - name));
    t += sizeof(attr) - 1;
    tend = memchr(t, ' ', (size_t)(end - t));
    s->targets[s->n] = strndup(t, (size_t)((tend ? tend : end) - t));
    s->n++;
    if (s->names[s->n - 1] == NULL || s->targets[s->n - 1] == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    return 0;
}

int rgit_symrefs_from_lsrefs(rgit_symrefs **out, const char *data, size_t len, rg_error *err)
{
    rgit_symrefs *s;
    rgit_pktline pkt;
    size_t off = 0;
    int rc = 0, n;

    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    /* Bounded: each packet takes at least 4 bytes of the capped answer. */
    for (;;) {
        n = rgit_pktline_parse(&pkt, data + off, len - off, err);
        if (n <= 0) {
            rc = n < 0 ? n : rg_error_set(err, RG_E_PROTOCOL, "ls-refs answer cut short");
            goto done;
        }
        off += (size_t)n;
        if (pkt.type == RGIT_PKTLINE_FLUSH)
            break;
        if (pkt.type != RGIT_PKTLINE_DATA) {
            rc = rg_error_set(err, RG_E_PROTOCOL, "unexpected packet in an ls-refs answer");
            goto done;
        }
        rc = add_listed(s, pkt.data, pkt.len, err);
        if (rc < 0)
            goto done;
    }
    *out = s;
    s = NULL;
done:
    rgit_symrefs_free(s);
    return rc;
}
