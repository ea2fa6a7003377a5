/*
 * Local upstreams: `git receive-pack --stateless-rpc` on a bare repository.
 * A reader thread drains the child's stdout and stderr while the request is
 * written, so neither side can block on a full pipe, and demultiplexes the
 * side-band as it arrives so memory stays capped however chatty upstream is.
 */
#include "gateway/upstream.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/proc.h"

struct upstream_push {
    rg_proc proc;
    pthread_t reader;
    int reader_started;
    git_sideband_demux *demux;
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

static int check_local(const upstream_target *t, rg_error *err)
{
    if (t->repo_dir == NULL)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream %s: only local upstreams are supported",
                            t->up->host);
    return 0;
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

int upstream_advertise(rg_buf *out, const upstream_target *t, rg_error *err)
{
    const char *argv[] = {"git", "receive-pack", "--stateless-rpc", "--advertise-refs",
                          t->repo_dir, NULL};
    const char *envp[4];
    char pathv[4096], why[256];
    rg_buf errb = RG_BUF_INIT(64 * 1024);
    int rc, status = 0;

    rc = check_local(t, err);
    if (rc < 0)
        return rc;
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
    upstream_push *u = arg;
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
                       git_sideband_demux_feed(u->demux, chunk, (size_t)n, &u->demux_err) < 0) {
                /* Keep draining so the child never blocks, but keep nothing. */
                u->demux_failed = 1;
            }
        }
    }
    return NULL;
}

int upstream_push_start(upstream_push **out, const upstream_target *t, git_sideband_mode mode,
                        unsigned cred_flags, rg_error *err)
{
    const char *argv[] = {"git", "receive-pack", "--stateless-rpc", t->repo_dir, NULL};
    const char *envp[4];
    char pathv[4096];
    upstream_push *u = NULL;
    int rc;

    (void)cred_flags;
    *out = NULL;
    rc = check_local(t, err);
    if (rc < 0)
        return rc;
    u = calloc(1, sizeof(*u));
    if (u == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    u->proc = (rg_proc)RG_PROC_INIT;
    rg_buf_init(&u->err_text, 64 * 1024);
    rc = git_sideband_demux_new(&u->demux, mode, UPSTREAM_REPORT_MAX, UPSTREAM_PROGRESS_MAX);
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
    upstream_push_free(u);
    return rc;
}

int upstream_push_write(upstream_push *u, const void *data, size_t len, rg_error *err)
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

int upstream_push_finish(upstream_push *u, git_report *report, rg_buf *progress, rg_error *err)
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
    prog = git_sideband_demux_progress(u->demux);
    if (progress && prog && prog->len)
        rg_buf_append(progress, prog->data, prog->len);
    if (u->demux_failed)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream sent a malformed answer: %s",
                            u->demux_err.msg);
    rc = git_sideband_demux_finish(u->demux, err);
    if (rc < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream's answer was cut short (status %d%s%s)",
                            status, why[0] ? ": " : "", why);
    if (git_sideband_demux_fatal(u->demux))
        return rg_error_set(err, RG_E_UPSTREAM, "upstream failed: %s",
                            git_sideband_demux_fatal(u->demux));
    rep = git_sideband_demux_report(u->demux);
    if (rep == NULL || rep->len == 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream gave no report (status %d%s%s)", status,
                            why[0] ? ": " : "", why);
    rc = git_report_parse(report, rep->data, rep->len, err);
    if (rc < 0)
        return rg_error_set(err, RG_E_UPSTREAM, "upstream sent a malformed report");
    return 0;
}

void upstream_push_free(upstream_push *u)
{
    if (u == NULL)
        return;
    /* Kill the group first so the pipes reach EOF; the reader closes its
     * own ends. */
    rg_proc_signal(&u->proc, SIGKILL);
    if (u->reader_started)
        pthread_join(u->reader, NULL);
    rg_proc_kill(&u->proc);
    git_sideband_demux_free(u->demux);
    rg_buf_free(&u->err_text);
    free(u);
}
