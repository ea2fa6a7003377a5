/*
 * Dispatch of the upstream contract (upstream.h) to its implementation
 * through the ops table (ops.h): a target with a repository directory is
 * local, any other is remote HTTP(S); a push or fetch, once started, goes
 * back to the ops that made it.
 * Kept apart so that neither implementation knows of the other and the
 * request lifecycle (receive.c, server.c) knows of neither.
 */
#include "upstream/upstream.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/fs.h"

#include "upstream/ops.h"

/* The implementation that serves `t`. */
static const upstream_ops *ops_for(const upstream_target *t)
{
    return t->repo_dir != NULL ? &upstream_local_ops : &upstream_http_ops;
}

int upstream_protocol_is_v2(const char *git_protocol)
{
    const char *p = git_protocol;
    size_t n;

    /* Bounded by the string: each turn moves past one key. */
    while (p != NULL && *p) {
        n = strcspn(p, ":");
        if (n == strlen("version=2") && !strncmp(p, "version=2", n))
            return 1;
        p += n;
        if (*p == ':')
            p++;
    }
    return 0;
}

int upstream_advertise(rg_buf *out, const upstream_target *t, rg_error *err)
{
    return ops_for(t)->advertise(out, t, err);
}

int upstream_push_start(upstream_push **out, const upstream_target *t, rgit_sideband_mode mode,
                        unsigned cred_flags, rg_error *err)
{
    *out = NULL;
    return ops_for(t)->push_start(out, t, mode, cred_flags, err);
}

int upstream_push_write(upstream_push *u, const void *data, size_t len, rg_error *err)
{
    return u->ops->push_write(u, data, len, err);
}

int upstream_push_finish(upstream_push *u, rgit_report *report, rg_buf *progress, rg_error *err)
{
    return u->ops->push_finish(u, report, progress, err);
}

void upstream_push_free(upstream_push *u)
{
    if (u != NULL)
        u->ops->push_free(u);
}

int upstream_fetch_start(upstream_fetch **out, const upstream_target *t,
                         const upstream_fetch_request *req, rg_error *err)
{
    *out = NULL;
    return ops_for(t)->fetch_start(out, t, req, err);
}

ssize_t upstream_fetch_read(upstream_fetch *f, char *buf, size_t max, rg_error *err)
{
    return f->ops->fetch_read(f, buf, max, err);
}

void upstream_fetch_free(upstream_fetch *f)
{
    if (f != NULL)
        f->ops->fetch_free(f);
}

/* Ask a remote upstream's upload-pack (v2) which of the refs are symbolic. */
static int remote_symrefs(rgit_symrefs **out, const upstream_target *t, const char *const *refnames,
                          size_t n, size_t oid_hexlen, rg_error *err)
{
    upstream_fetch_request req = UPSTREAM_FETCH_REQUEST_INIT;
    rg_buf body = RG_BUF_INIT(UPSTREAM_LSREFS_MAX), answer = RG_BUF_INIT(UPSTREAM_LSREFS_MAX);
    upstream_fetch *f = NULL;
    char chunk[65536];
    ssize_t got;
    int fd = -1, rc;

    rc = rgit_symrefs_lsrefs_request(&body, refnames, n, oid_hexlen);
    if (rc < 0) {
        rc = rg_error_set(err, rc, "cannot build the ls-refs request");
        goto done;
    }
    fd = memfd_create("refgate-ls-refs", MFD_CLOEXEC);
    if (fd < 0 || (rc = rg_fs_write_all(fd, body.data, body.len)) < 0 ||
        lseek(fd, 0, SEEK_SET) < 0) {
        rc = rg_error_set(err, -errno, "cannot stage the ls-refs request");
        goto done;
    }
    req.git_protocol = "version=2";
    req.body_fd = fd;
    rc = upstream_fetch_start(&f, t, &req, err);
    if (rc < 0)
        goto done;
    /* Bounded: the answer buffer is capped. */
    while ((got = upstream_fetch_read(f, chunk, sizeof(chunk), err)) > 0) {
        rc = rg_buf_append(&answer, chunk, (size_t)got);
        if (rc < 0) {
            rc = rg_error_set(err, rc, "upstream's ls-refs answer is too large");
            goto done;
        }
    }
    if (got < 0) {
        rc = (int)got;
        goto done;
    }
    rc = rgit_symrefs_from_lsrefs(out, answer.data ? answer.data : "", answer.len, err);
done:
    upstream_fetch_free(f);
    if (fd >= 0)
        close(fd);
    rg_buf_free(&body);
    rg_buf_free(&answer);
    return rc;
}

int upstream_symrefs(rgit_symrefs **out, const upstream_target *t, const char *const *refnames,
                     size_t n, size_t oid_hexlen, rg_error *err)
{
    *out = NULL;
    if (t->repo_dir != NULL)
        return rgit_symrefs_open(out, t->repo_dir, err);
    return remote_symrefs(out, t, refnames, n, oid_hexlen, err);
}
