/*
 * Local upstreams: `git receive-pack --stateless-rpc` on a bare repository.
 * A reader thread drains the child's stdout and stderr while the request is
 * written, so neither side can block on a full pipe, and demultiplexes the
 * side-band as it arrives so memory stays capped however chatty upstream is.
 * Fetches run `git upload-pack --stateless-rpc` the way `git http-backend`
 * does, pumped by the caller: its reads drive the child's stdin, stdout and
 * stderr together, so the answer streams out without being held here.
 */
#include "gateway/upstream_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "git/pktline.h"
#include "util/fs.h"
#include "util/proc.h"

struct upstream_local_push {
    rg_proc proc;
    pthread_t reader;
    int reader_started;
    rgit_sideband_demux *demux;
    rg_buf err_text; /* the child's stderr, capped */
    int demux_failed;
    rg_error demux_err;
};

/* The child's environment: nothing of the gateway's own but PATH, so no
 * GIT_* variable of whoever started the gateway can redirect receive-pack. */
static void child_env(const char **envp, char *path_var, size_t pathsz)
{
    const char *path = getenv("PATH");

    snprintf(path_var, pathsz, "PATH=%s", path ? path : "/usr/bin:/bin");
    envp[0] = path_var;
    envp[1] = "LANG=C";
    envp[2] = "HOME=/nonexistent";
    envp[3] = NULL;
}

/* The last non-empty line of what the child said on stderr, for messages. */
static void last_line(char *out, size_t outsz, const rg_buf *b)
{
    const char *end, *start;
    size_t n, i;

    out[0] = '\0';
    if (b->data == NULL)
        return;
    end = b->data + b->len;
    while (end > b->data && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    start = end;
    while (start > b->data && start[-1] != '\n')
        start--;
    n = (size_t)(end - start) < outsz - 1 ? (size_t)(end - start) : outsz - 1;
    for (i = 0; i < n; i++)
        out[i] = (start[i] >= 0x20 && start[i] < 0x7f) ? start[i] : '?';
    out[n] = '\0';
}

int upstream_local_advertise(rg_buf *out, const upstream_target *t, rg_error *err)
{
    const char *argv[] = {"git", "receive-pack", "--stateless-rpc", "--advertise-refs", t->repo_dir,
                          NULL};
    const char *envp[4];
    char pathv[4096], why[256];
    rg_buf errb = RG_BUF_INIT(64 * 1024);
    int rc, status = 0;

    child_env(envp, pathv, sizeof(pathv));
    rc = rg_proc_run(&status, out, &errb, argv, envp, NULL, err);
    if (rc == 0 && status != 0) {
        last_line(why, sizeof(why), &errb);
        rc = rg_error_set(err, RG_E_UPSTREAM, "upstream receive-pack exited with status %d%s%s",
                          status, why[0] ? ": " : "", why);
    }
    rg_buf_free(&errb);
    return rc;
}

static void *reader_main(void *arg)
{
    upstream_local_push *u = arg;
    char chunk[65536];
    struct pollfd pf[2];
    ssize_t n;

    while (u->proc.out_fd >= 0 || u->proc.err_fd >= 0) {
        pf[0] = (struct pollfd){.fd = u->proc.out_fd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = u->proc.err_fd, .events = POLLIN};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            int *fd = i == 0 ? &u->proc.out_fd : &u->proc.err_fd;
            if (!pf[i].revents)
                continue;
            n = read(*fd, chunk, sizeof(chunk));
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) {
                close(*fd);
                *fd = -1;
                continue;
            }
            if (i == 1) {
                if (u->err_text.len + (size_t)n <= u->err_text.max)
                    rg_buf_append(&u->err_text, chunk, (size_t)n);
            } else if (!u->demux_failed &&
                       rgit_sideband_demux_feed(u->demux, chunk, (size_t)n, &u->demux_err) < 0) {
                /* Keep draining so the child never blocks, but keep nothing. */
                u->demux_failed = 1;
            }
        }
    }
    return NULL;
}

int upstream_local_push_start(upstream_local_push **out, const upstream_target *t,
                              rgit_sideband_mode mode, rg_error *err)
{
    const char *argv[] = {"git", "receive-pack", "--stateless-rpc", t->repo_dir, NULL};
    const char *envp[4];
    char pathv[4096];
    upstream_local_push *u = NULL;
    int rc;

    *out = NULL;
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    u->proc = (rg_proc)RG_PROC_INIT;
    rg_buf_init(&u->err_text, 64 * 1024);
    rc = rgit_sideband_demux_new(&u->demux, mode, UPSTREAM_REPORT_MAX, UPSTREAM_PROGRESS_MAX);
    if (rc < 0) {
        rg_error_set(err, rc, "out of memory");
        goto done;
    }
    child_env(envp, pathv, sizeof(pathv));
    /* Its own process group: index-pack, unpack-objects and hooks hold the
     * pipes too, and an aborted push must end all of them. */
    rc = rg_proc_spawn(&u->proc, argv, envp, NULL,
                       RG_PROC_STDIN | RG_PROC_STDOUT | RG_PROC_STDERR | RG_PROC_GROUP, err);
    if (rc < 0)
        goto done;
    rc = pthread_create(&u->reader, NULL, reader_main, u);
    if (rc != 0) {
        rc = rg_error_set(err, -rc, "cannot start reader thread");
        goto done;
    }
    u->reader_started = 1;
    *out = u;
    u = NULL;
done:
    upstream_local_push_free(u);
    return rc;
}

int upstream_local_push_write(upstream_local_push *u, const void *data, size_t len, rg_error *err)
{
    int rc;

    if (u->proc.in_fd < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream stopped reading the push");
    rc = rg_fs_write_all(u->proc.in_fd, data, len);
    if (rc < 0) {
        close(u->proc.in_fd);
        u->proc.in_fd = -1;
        return rg_error_set(err, RG_E_UPSTREAM, "upstream stopped reading the push (%s)",
                            strerror(-rc));
    }
    return 0;
}

int upstream_local_push_finish(upstream_local_push *u, rgit_report *report, rg_buf *progress,
                               rg_error *err)
{
    const rg_buf *rep, *prog;
    char why[256];
    int status = 0, rc = 0;

    memset(report, 0, sizeof(*report));
    if (u->proc.in_fd >= 0) {
        close(u->proc.in_fd);
        u->proc.in_fd = -1;
    }
    if (u->reader_started) {
        pthread_join(u->reader, NULL);
        u->reader_started = 0;
    }
    rg_proc_wait(&u->proc, &status);
    last_line(why, sizeof(why), &u->err_text);
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

void upstream_local_push_free(upstream_local_push *u)
{
    if (u == NULL)
        return;
    /* Kill the group first so the pipes reach EOF; the reader closes its
     * own ends. */
    rg_proc_signal(&u->proc, SIGKILL);
    if (u->reader_started)
        pthread_join(u->reader, NULL);
    rg_proc_kill(&u->proc);
    rgit_sideband_demux_free(u->demux);
    rg_buf_free(&u->err_text);
    free(u);
}

/* --------------------------------------------------------------- fetches */

/* A local fetch that shows no sign of life for this long is given up. Git's
 * upload-pack sends keepalives while it prepares a pack (every 5 seconds by
 * default), so only a stuck one stays silent. */
#define FETCH_IDLE_MS (600 * 1000)

struct upstream_local_fetch {
    rg_proc proc;
    int body_fd; /* borrowed: the decoded request body, or -1 */
    char in[65536];
    size_t in_len, in_off;
    char pre[64]; /* the smart-HTTP preamble still to send */
    size_t pre_len, pre_off;
    char first[65536]; /* answer bytes read while waiting for the first */
    size_t first_len, first_off;
    rg_buf err_text;
    int ended; /* stdout reached EOF and the child was reaped */
    int status;
};

/* Feed the child's stdin from the body while it takes it; close it at the
 * body's end so upload-pack sees the request is complete. */
static void fetch_send(upstream_local_fetch *f)
{
    ssize_t n;

    while (f->proc.in_fd >= 0) {
        if (f->in_off == f->in_len) {
            n = read(f->body_fd, f->in, sizeof(f->in));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                close(f->proc.in_fd);
                f->proc.in_fd = -1;
                return;
            }
            f->in_len = (size_t)n;
            f->in_off = 0;
        }
        n = write(f->proc.in_fd, f->in + f->in_off, f->in_len - f->in_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            /* upload-pack stopped reading: its answer and status tell why. */
            close(f->proc.in_fd);
            f->proc.in_fd = -1;
            return;
        }
        f->in_off += (size_t)n;
    }
}

/*
 * Move the child along until it says something on stdout: returns the
 * bytes read into buf, 0 at its end (the child then reaped), or a negative
 * errno.
 */
static ssize_t fetch_pump(upstream_local_fetch *f, char *buf, size_t max)
{
    struct pollfd pf[3];
    char chunk[4096];
    ssize_t n;
    int rc;

    for (;;) {
        if (f->proc.out_fd < 0 && f->proc.err_fd < 0)
            break;
        pf[0] = (struct pollfd){.fd = f->proc.in_fd, .events = POLLOUT};
        pf[1] = (struct pollfd){.fd = f->proc.out_fd, .events = POLLIN};
        pf[2] = (struct pollfd){.fd = f->proc.err_fd, .events = POLLIN};
        rc = poll(pf, 3, FETCH_IDLE_MS);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return -errno;
        if (rc == 0)
            return -ETIMEDOUT;
        if (pf[0].revents)
            fetch_send(f);
        if (pf[2].revents) {
            n = read(f->proc.err_fd, chunk, sizeof(chunk));
            if (n > 0 && f->err_text.len + (size_t)n <= f->err_text.max)
                rg_buf_append(&f->err_text, chunk, (size_t)n);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                close(f->proc.err_fd);
                f->proc.err_fd = -1;
            }
        }
        if (pf[1].revents) {
            n = read(f->proc.out_fd, buf, max);
            if (n > 0)
                return n;
            if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(f->proc.out_fd);
                f->proc.out_fd = -1;
            }
        }
    }
    rg_proc_wait(&f->proc, &f->status);
    f->ended = 1;
    return 0;
}

int upstream_local_fetch_start(upstream_local_fetch **out, const upstream_target *t,
                               const upstream_fetch_request *req, rg_error *err)
{
    const char *argv[6] = {"git", "upload-pack", "--stateless-rpc"};
    const char *envp[5];
    char pathv[4096], proto[300], why[256];
    upstream_local_fetch *f;
    ssize_t n;
    int rc, i = 3;

    *out = NULL;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    f->proc = (rg_proc)RG_PROC_INIT;
    f->body_fd = req->body_fd;
    rg_buf_init(&f->err_text, 64 * 1024);
    if (req->advertise)
        argv[i++] = "--advertise-refs";
    argv[i++] = t->repo_dir;
    argv[i] = NULL;
    child_env(envp, pathv, sizeof(pathv));
    /* The client's protocol request reaches upload-pack as http-backend
     * passes it: through GIT_PROTOCOL (the server checked its characters). */
    if (req->git_protocol) {
        snprintf(proto, sizeof(proto), "GIT_PROTOCOL=%s", req->git_protocol);
        envp[3] = proto;
        envp[4] = NULL;
    }
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
    rc = rg_proc_spawn(&f->proc, argv, envp, NULL,
                       (req->body_fd >= 0 ? RG_PROC_STDIN : 0) | RG_PROC_STDOUT | RG_PROC_STDERR |
                           RG_PROC_GROUP,
                       err);
    if (rc < 0)
        goto done;
    if (f->proc.in_fd >= 0)
        fcntl(f->proc.in_fd, F_SETFL, fcntl(f->proc.in_fd, F_GETFL) | O_NONBLOCK);
    /* Wait for the first answer bytes: a failure before them can still be
     * an HTTP error rather than a cut-off stream. */
    n = fetch_pump(f, f->first, sizeof(f->first));
    if (n < 0) {
        rc = rg_error_set(err, RG_E_UPSTREAM, "upstream upload-pack did not answer: %s",
                          strerror((int)-n));
        goto done;
    }
    f->first_len = (size_t)n;
    if (n == 0 && f->status != 0) {
        last_line(why, sizeof(why), &f->err_text);
        rc = rg_error_set(err, RG_E_UPSTREAM, "upstream upload-pack exited with status %d%s%s",
                          f->status, why[0] ? ": " : "", why);
        goto done;
    }
    *out = f;
    f = NULL;
    rc = 0;
done:
    upstream_local_fetch_free(f);
    return rc;
}

ssize_t upstream_local_fetch_read(upstream_local_fetch *f, char *buf, size_t max, rg_error *err)
{
    char why[256];
    size_t n;
    ssize_t got;

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
    if (f->ended)
        got = 0;
    else
        got = fetch_pump(f, buf, max);
    if (got < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream upload-pack stalled: %s",
                            strerror((int)-got));
    if (got == 0 && f->status != 0) {
        last_line(why, sizeof(why), &f->err_text);
        return rg_error_set(err, RG_E_UPSTREAM, "upstream upload-pack exited with status %d%s%s",
                            f->status, why[0] ? ": " : "", why);
    }
    return got;
}

void upstream_local_fetch_free(upstream_local_fetch *f)
{
    if (f == NULL)
        return;
    /* A client that went away leaves upload-pack (and its pack-objects)
     * running: end the whole group. */
    rg_proc_kill(&f->proc);
    rg_buf_free(&f->err_text);
    free(f);
}
