/*
 * The seccomp supervisor; see notify.h. The thread is the only reader of
 * the listener and the only writer of the tally until it is joined, so
 * nothing is locked.
 */
#include "sandbox/notify.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/fdpass.h"
#include "sandbox/seccomp.h"

/* Failed receives in a row before the supervisor gives up (and the
 * kernel answers ENOSYS from then on): a bound against spinning. */
#define NOTIFY_FAILURES_MAX 1000

struct sandbox_notify {
    pthread_t thread;
    int started;
    int stop[2]; /* a byte on stop[1] ends the thread */
    int sock;    /* from the sandbox: the listener */
    sandbox_notify_tally tally;
};

/* ------------------------------------------------------------------------ */
/* The tally                                                                 */
/* ------------------------------------------------------------------------ */

void sandbox_notify_tally_add(sandbox_notify_tally *t, const char *name, pid_t pid,
                              const char *comm)
{
    sandbox_notify_count *c = NULL;
    size_t i;

    t->total++;
    for (i = 0; i < t->n && c == NULL; i++)
        if (strcmp(t->c[i].name, name) == 0)
            c = &t->c[i];
    if (c == NULL) {
        /* Full: counted in the total only. */
        if (t->n == SANDBOX_NOTIFY_NAMES_MAX)
            return;
        c = &t->c[t->n++];
        c->name = name;
        c->pid = pid;
        snprintf(c->comm, sizeof(c->comm), "%s", comm ? comm : "");
    }
    c->n++;
}

/* Whether items i and i + 1 had the same first caller. */
static int notify_same_caller(const sandbox_notify_tally *t, size_t i)
{
    return i + 1 < t->n && t->c[i].pid == t->c[i + 1].pid &&
           strcmp(t->c[i].comm, t->c[i + 1].comm) == 0;
}

void sandbox_notify_tally_format(char *out, size_t outsz, const sandbox_notify_tally *t)
{
    size_t len = 0, i;
    char times[32], by[64];
    int n;

    if (outsz == 0)
        return;
    out[0] = '\0';
    for (i = 0; i < t->n && len < outsz; i++) {
        const sandbox_notify_count *c = &t->c[i];

        times[0] = by[0] = '\0';
        if (c->n > 1)
            snprintf(times, sizeof(times), " x%lu", c->n);
        /* The caller once, after the last of a run of calls it made first. */
        if (!notify_same_caller(t, i))
            snprintf(by, sizeof(by), " (by %s%spid %ld)", c->comm, c->comm[0] ? ", " : "",
                     (long)c->pid);
        n = snprintf(out + len, outsz - len, "%s%s%s%s", i ? ", " : "", c->name, times, by);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

void sandbox_notify_landlock_why(char *out, size_t outsz)
{
    char cmdline[4096];
    ssize_t n = -1;
    int fd;

    /* /proc/PID/loginuid exists only in a kernel built with audit. */
    if (access("/proc/self/loginuid", F_OK) < 0) {
        snprintf(out, outsz,
                 "Landlock denials not counted: this kernel has no audit, so they "
                 "are recorded nowhere");
        return;
    }
    fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, cmdline, sizeof(cmdline) - 1);
        close(fd);
    }
    cmdline[n > 0 ? n : 0] = '\0';
    if (strncmp(cmdline, "audit=0", 7) == 0 || strstr(cmdline, " audit=0") != NULL)
        snprintf(out, outsz,
                 "Landlock denials not counted: audit is off (audit=0), so they are "
                 "recorded nowhere");
    else
        snprintf(out, outsz,
                 "Landlock denials not counted: the kernel logs them only to its "
                 "audit log, which refgate-run does not read");
}

/* ------------------------------------------------------------------------ */
/* The thread                                                                */
/* ------------------------------------------------------------------------ */

/* Receive the listener; -1 on the stop byte or when none comes. */
static int notify_receive(sandbox_notify *s)
{
    struct pollfd p[2] = {{s->stop[0], POLLIN, 0}, {s->sock, POLLIN, 0}};
    char byte;
    size_t nfds;
    int fd = -1;

    while (poll(p, 2, -1) < 0)
        if (errno != EINTR)
            return -1;
    if (p[0].revents)
        return -1;
    if (sandbox_fdpass_recv(s->sock, &byte, 1, &fd, 1, &nfds) <= 0) {
        if (nfds == 1)
            close(fd);
        return -1;
    }
    return nfds == 1 ? fd : -1;
}

/* The caller's name, read while the notification is still pending, so the
 * pid cannot have been reused in between (checked after reading). */
static void notify_comm(char *out, size_t outsz, int fd, const struct seccomp_notif *req)
{
    char path[64];
    ssize_t n;
    int cfd;

    out[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%u/comm", req->pid);
    cfd = open(path, O_RDONLY | O_CLOEXEC);
    if (cfd < 0)
        return;
    n = read(cfd, out, outsz - 1);
    close(cfd);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    if (seccomp_notify_id_valid(fd, req->id) != 0)
        out[0] = '\0';
}

/* Answer one notification; 0, or -1 when the listener failed. */
static int notify_serve_one(sandbox_notify *s, int fd, struct seccomp_notif *req,
                            struct seccomp_notif_resp *resp)
{
    const char *name;
    char comm[16] = "";
    int e;

    memset(req, 0, sizeof(*req));
    if (seccomp_notify_receive(fd, req) != 0)
        return -1;
    e = sandbox_seccomp_decide(&name, (int)req->data.nr, req->data.args);
    /* A call the table does not explain (cannot happen: the filter is the
     * table) is denied all the same. */
    if (e == 0) {
        e = EPERM;
        name = "unlisted call";
    }
    if (s->tally.n < SANDBOX_NOTIFY_NAMES_MAX)
        notify_comm(comm, sizeof(comm), fd, req);
    memset(resp, 0, sizeof(*resp));
    resp->id = req->id;
    resp->error = -e;
    resp->val = 0;
    resp->flags = 0; /* never SECCOMP_USER_NOTIF_FLAG_CONTINUE */
    /* A caller killed meanwhile (ENOENT) was denied all the same. */
    seccomp_notify_respond(fd, resp);
    sandbox_notify_tally_add(&s->tally, name, (pid_t)req->pid, comm);
    return 0;
}

static void *notify_main(void *arg)
{
    sandbox_notify *s = arg;
    struct seccomp_notif *req = NULL;
    struct seccomp_notif_resp *resp = NULL;
    struct pollfd p[2];
    int fd, failures = 0;

    fd = notify_receive(s);
    if (fd < 0)
        return NULL;
    if (seccomp_notify_alloc(&req, &resp) != 0)
        goto done;
    p[0] = (struct pollfd){s->stop[0], POLLIN, 0};
    p[1] = (struct pollfd){fd, POLLIN, 0};
    /* Bounded: each round answers one denied call (the caller waits for
     * it) or ends; the tally is of fixed size. It ends on the stop byte,
     * when no process is left under the filter (POLLHUP), or after
     * NOTIFY_FAILURES_MAX failed receives in a row. */
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents)
            break;
        if (!(p[1].revents & POLLIN))
            break;
        if (notify_serve_one(s, fd, req, resp) == 0)
            failures = 0;
        else if (++failures >= NOTIFY_FAILURES_MAX)
            break;
    }
done:
    seccomp_notify_free(req, resp);
    /* Closed: a call denied from now on fails with ENOSYS. */
    close(fd);
    return NULL;
}

int sandbox_notify_start(sandbox_notify **out, int sock, rg_error *err)
{
    sandbox_notify *s = calloc(1, sizeof(*s));
    sigset_t all, saved;
    int rc = 0;

    *out = NULL;
    if (s == NULL) {
        close(sock);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    s->sock = sock;
    s->stop[0] = s->stop[1] = -1;
    if (pipe2(s->stop, O_CLOEXEC) < 0) {
        rc = rg_error_set(err, -errno, "pipe: %s", strerror(errno));
        goto done;
    }
    /* The runner's signals are for its main thread (see net.c). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    rc = -pthread_create(&s->thread, NULL, notify_main, s);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (rc < 0) {
        rg_error_set(err, rc, "starting the seccomp supervisor: %s", strerror(-rc));
        goto done;
    }
    s->started = 1;
done:
    if (rc < 0) {
        sandbox_notify_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void notify_stop(sandbox_notify *s)
{
    if (!s->started)
        return;
    if (write(s->stop[1], "x", 1) < 0) {
        /* A full pipe holds a stop byte already. */
    }
    pthread_join(s->thread, NULL);
    s->started = 0;
}

void sandbox_notify_tally_get(sandbox_notify_tally *out, sandbox_notify *n)
{
    memset(out, 0, sizeof(*out));
    if (n == NULL)
        return;
    /* Joined: what the thread counted is ours to read. */
    notify_stop(n);
    *out = n->tally;
}

void sandbox_notify_free(sandbox_notify *n)
{
    if (n == NULL)
        return;
    notify_stop(n);
    if (n->stop[0] >= 0)
        close(n->stop[0]);
    if (n->stop[1] >= 0)
        close(n->stop[1]);
    if (n->sock >= 0)
        close(n->sock);
    free(n);
}

/* ------------------------------------------------------------------------ */
/* The command's side                                                        */
/* ------------------------------------------------------------------------ */

int sandbox_notify_install(int bpf_fd, int sock, rg_error *err)
{
    ssize_t n;
    int fd = -1, rc;

    rc = sandbox_seccomp_load_listener(&fd, bpf_fd, err);
    if (rc < 0)
        goto done;
    n = sandbox_fdpass_send(sock, "l", 1, &fd, 1);
    if (n != 1)
        rc = rg_error_set(err, -EPIPE, "passing the seccomp listener to the runner: %s",
                          n < 0 ? strerror((int)-n) : "short write");
done:
    /* The command never holds either. */
    if (fd >= 0)
        close(fd);
    close(sock);
    return rc;
}
