/*
 * Local upstreams: `git receive-pack --stateless-rpc` on a bare repository.
 * The request is written to the child while its stdout and stderr are
 * drained (util/proc), so neither side can block on a full pipe, and the
 * side-band is demultiplexed as it arrives so memory stays capped however
 * chatty upstream is. Fetches run `git upload-pack --stateless-rpc` the way
 * `git http-backend` does, with the spooled request body as its stdin,
 * pumped by the caller: its reads drive the child, so the answer streams
 * out without being held here. upstream.c reaches it through
 * upstream_local_ops (ops.h), its one export.
 */
#include "upstream/ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "git/pktline.h"
#include "util/gitenv.h"
#include "util/proc.h"

/*
 * How long local git may go without progress: without accepting a chunk of
 * the push, without finishing once the push is in (hooks included), without
 * a byte of a fetch's answer (upload-pack sends keepalives every 5 s while
 * it prepares a pack, so only a stuck one stays silent), or producing an
 * advertisement. Each wait gets this much afresh, so a large push or fetch
 * that keeps moving is never cut off.
 */
#define UPSTREAM_LOCAL_STALL_SECONDS 600

typedef struct upstream_local_push upstream_local_push;
typedef struct upstream_local_fetch upstream_local_fetch;

static void local_push_free(upstream_push *base);
static void local_fetch_free(upstream_fetch *base);

struct upstream_local_push {
    upstream_push base; /* first: upstream.c dispatches on its ops */
    rg_proc *proc;
    rgit_sideband_demux *demux;
    int demux_failed;
    rg_error demux_err;
};

/* Whatever went wrong with local git is the upstream failing, for the caller. */
static int local_error(rg_error *err)
{
    rg_error_wrap(err, "upstream");
    if (err != NULL)
        err->code = RG_E_UPSTREAM;
    return RG_E_UPSTREAM;
}

/* Start git on the repository with the gateway's git environment (the
 * child has its own copy once started). */
static int local_start(rg_proc **out, const char *const *argv, const char *protocol, int stdin_fd,
                       unsigned flags, rg_proc_sink sink, void *ctx, rg_error *err)
{
    rg_gitenv_opts o = RG_GITENV_OPTS_INIT;
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_gitenv *env = NULL;
    int rc;

    o.protocol = protocol;
    rc = rg_gitenv_new(&env, &o, err);
    if (rc < 0)
        return rc;
    s.argv = argv;
    s.envp = rg_gitenv_envp(env);
    /* Its own process group: index-pack, unpack-objects, pack-objects and
     * hooks hold the pipes too, and an aborted request must end all of them. */
    s.flags = flags | RG_PROC_STDOUT | RG_PROC_STDERR | RG_PROC_GROUP;
    s.stdin_fd = stdin_fd;
    s.on_stdout = sink;
    s.ctx = ctx;
    rc = rg_proc_start(out, &s, err);
    rg_gitenv_free(env);
    return rc;
}

static int local_advertise(rg_buf *out, const upstream_target *t, rg_error *err)
{
    const char *argv[] = {"git", "receive-pack", "--stateless-rpc", "--advertise-refs", t->repo_dir,
                          NULL};
    rg_proc_spec s = RG_PROC_SPEC_INIT;
    rg_gitenv *env = NULL;
    int rc;

    rc = rg_gitenv_new(&env, NULL, err);
    if (rc < 0)
        return rc;
    s.argv = argv;
    s.envp = rg_gitenv_envp(env);
    s.flags = RG_PROC_GROUP;
    rc = rg_proc_run(NULL, out, &s, rg_proc_deadline(UPSTREAM_LOCAL_STALL_SECONDS), err);
    if (rc < 0)
        rc = local_error(err);
    rg_gitenv_free(env);
    return rc;
}

/* receive-pack's stdout, as it arrives: demultiplexed, capped. */
static int push_sink(void *ctx, const char *data, size_t len, rg_error *err)
{
    upstream_local_push *u = ctx;

    (void)err;
    if (rgit_sideband_demux_feed(u->demux, data, len, &u->demux_err) < 0) {
        /* rg_proc keeps draining so the child never blocks, but keeps nothing. */
        u->demux_failed = 1;
        return -EIO;
    }
    return 0;
}

static int local_push_start(upstream_push **out, const upstream_target *t, rgit_sideband_mode mode,
                            unsigned cred_flags, rg_error *err)
{
    const char *argv[] = {"git", "receive-pack", "--stateless-rpc", t->repo_dir, NULL};
    upstream_local_push *u = NULL;
    int rc;

    /* The credential flags shape a remote write credential: git on a
     * local repository needs none. */
    (void)cred_flags;
    *out = NULL;
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    rc = rgit_sideband_demux_new(&u->demux, mode, UPSTREAM_REPORT_MAX, UPSTREAM_PROGRESS_MAX);
    if (rc < 0) {
        rg_error_set(err, rc, "out of memory");
        goto done;
    }
    rc = local_start(&u->proc, argv, NULL, -1, RG_PROC_STDIN, push_sink, u, err);
    if (rc < 0)
        goto done;
    u->base.ops = &upstream_local_ops;
    *out = &u->base;
    u = NULL;
done:
    local_push_free((upstream_push *)u);
    return rc;
}

static int local_push_write(upstream_push *base, const void *data, size_t len, rg_error *err)
{
    upstream_local_push *u = (upstream_local_push *)base;
    int rc;

    rc = rg_proc_write(u->proc, data, len, rg_proc_deadline(UPSTREAM_LOCAL_STALL_SECONDS), err);
    if (rc == -EPIPE)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream stopped reading the push");
    if (rc < 0)
        return local_error(err);
    return 0;
}

static int local_push_finish(upstream_push *base, rgit_report *report, rg_buf *progress,
                             rg_error *err)
{
    upstream_local_push *u = (upstream_local_push *)base;
    const rg_buf *rep, *prog;
    rg_error perr = RG_ERROR_INIT;
    char why[RG_PROC_WHY_MAX];
    int status = 0, rc = 0;

    memset(report, 0, sizeof(*report));
    rc = rg_proc_finish(u->proc, &status, rg_proc_deadline(UPSTREAM_LOCAL_STALL_SECONDS), &perr);
    if (rc < 0 && !u->demux_failed)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream: %s", perr.msg);
    rg_proc_why(u->proc, why, sizeof(why));
    prog = rgit_sideband_demux_progress(u->demux);
    if (progress && prog && prog->len)
        rg_buf_append(progress, prog->data, prog->len);
    if (u->demux_failed)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream sent a malformed answer: %s",
                            u->demux_err.msg);
    rc = rgit_sideband_demux_finish(u->demux, err);
    if (rc < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream's answer was cut short (status %d%s%s)",
                            status, why[0] ? ": " : "", why);
    if (rgit_sideband_demux_fatal(u->demux))
        return rg_error_set(err, RG_E_UPSTREAM, "upstream failed: %s",
                            rgit_sideband_demux_fatal(u->demux));
    rep = rgit_sideband_demux_report(u->demux);
    if (rep == NULL || rep->len == 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream gave no report (status %d%s%s)", status,
                            why[0] ? ": " : "", why);
    rc = rgit_report_parse(report, rep->data, rep->len, err);
    if (rc < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream sent a malformed report");
    return 0;
}

static void local_push_free(upstream_push *base)
{
    upstream_local_push *u = (upstream_local_push *)base;

    if (u == NULL)
        return;
    /* Ends receive-pack and everything it started when the push was abandoned. */
    rg_proc_free(u->proc);
    rgit_sideband_demux_free(u->demux);
    free(u);
}

/* --------------------------------------------------------------- fetches */

/* Room for "001e# service=git-upload-pack\n0000". */
#define UPSTREAM_LOCAL_PREAMBLE_MAX 64

/* The first read of a fetch's answer, held until the caller asks for it. */
#define UPSTREAM_LOCAL_FIRST_MAX (64 * 1024)

struct upstream_local_fetch {
    upstream_fetch base; /* first: upstream.c dispatches on its ops */
    rg_proc *proc;
    char pre[UPSTREAM_LOCAL_PREAMBLE_MAX]; /* the smart-HTTP preamble still to send */
    size_t pre_len, pre_off;
    char first[UPSTREAM_LOCAL_FIRST_MAX]; /* answer bytes read while waiting for the first */
    size_t first_len, first_off;
    int ended; /* stdout reached EOF and the child was reaped */
};

/*
 * The child's next stdout bytes into buf: their count, or 0 at its end
 * (the child then reaped and checked), or a negative error.
 */
static ssize_t fetch_next(upstream_local_fetch *f, char *buf, size_t max, rg_error *err)
{
    ssize_t n;
    int rc;

    if (f->ended)
        return 0;
    n = rg_proc_read(f->proc, buf, max, rg_proc_deadline(UPSTREAM_LOCAL_STALL_SECONDS), err);
    if (n != 0)
        return n < 0 ? local_error(err) : n;
    f->ended = 1;
    rc = rg_proc_finish(f->proc, NULL, rg_proc_deadline(UPSTREAM_LOCAL_STALL_SECONDS), err);
    if (rc == 0)
        rc = rg_proc_check(f->proc, RG_E_UPSTREAM, err);
    if (rc < 0)
        return local_error(err);
    return 0;
}

static int local_fetch_start(upstream_fetch **out, const upstream_target *t,
                             const upstream_fetch_request *req, rg_error *err)
{
    const char *argv[6] = {"git", "upload-pack", "--stateless-rpc"};
    upstream_local_fetch *f;
    ssize_t n;
    int rc, i = 3;

    *out = NULL;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (req->advertise)
        argv[i++] = "--advertise-refs";
    argv[i++] = t->repo_dir;
    argv[i] = NULL;
    /* http-backend sends the preamble before v0/v1 advertisements only: a
     * v2 client reads the capability list straight away. */
    if (req->advertise && !upstream_protocol_is_v2(req->git_protocol)) {
        rg_buf pre = RG_BUF_INIT(sizeof(f->pre) - 1);

        if (rgit_pktline_printf(&pre, "# service=git-upload-pack\n") < 0 ||
            rgit_pktline_flush(&pre) < 0) {
            rg_buf_free(&pre);
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            goto done;
        }
        memcpy(f->pre, pre.data, pre.len);
        f->pre_len = pre.len;
        rg_buf_free(&pre);
    }
    /* The client's protocol request reaches upload-pack as http-backend
     * passes it: through GIT_PROTOCOL (the server checked its characters).
     * The body is a spooled file read from its start, so upload-pack reads
     * it directly as its stdin. */
    rc = local_start(&f->proc, argv, req->git_protocol, req->body_fd, 0, NULL, NULL, err);
    if (rc < 0)
        goto done;
    /* Wait for the first answer bytes: a failure before them can still be
     * an HTTP error rather than a cut-off stream. */
    n = fetch_next(f, f->first, sizeof(f->first), err);
    if (n < 0) {
        rc = (int)n;
        goto done;
    }
    f->first_len = (size_t)n;
    f->base.ops = &upstream_local_ops;
    *out = &f->base;
    f = NULL;
    rc = 0;
done:
    local_fetch_free((upstream_fetch *)f);
    return rc;
}

static ssize_t local_fetch_read(upstream_fetch *base, char *buf, size_t max, rg_error *err)
{
    upstream_local_fetch *f = (upstream_local_fetch *)base;
    size_t n;

    if (f->pre_off < f->pre_len) {
        n = f->pre_len - f->pre_off < max ? f->pre_len - f->pre_off : max;
        memcpy(buf, f->pre + f->pre_off, n);
        f->pre_off += n;
        return (ssize_t)n;
    }
    if (f->first_off < f->first_len) {
        n = f->first_len - f->first_off < max ? f->first_len - f->first_off : max;
        memcpy(buf, f->first + f->first_off, n);
        f->first_off += n;
        return (ssize_t)n;
    }
    return fetch_next(f, buf, max, err);
}

static void local_fetch_free(upstream_fetch *base)
{
    upstream_local_fetch *f = (upstream_local_fetch *)base;

    if (f == NULL)
        return;
    /* A client that went away leaves upload-pack (and its pack-objects)
     * running: end the whole group. */
    rg_proc_free(f->proc);
    free(f);
}

const upstream_ops upstream_local_ops = {
    .advertise = local_advertise,
    .push_start = local_push_start,
    .push_write = local_push_write,
    .push_finish = local_push_finish,
    .push_free = local_push_free,
    .fetch_start = local_fetch_start,
    .fetch_read = local_fetch_read,
    .fetch_free = local_fetch_free,
};
