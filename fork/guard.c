/*
 * The fork's guardian; see guard.h.
 */
#include "fork/guard.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/fdpass.h"
#include "fork/gitconf.h"
#include "util/buf.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* The summary of what the guardian neutralised, at most. */
#define GUARD_TOLD_MAX 2048

struct fork_guard {
    pid_t pid;   /* the guardian */
    int sock;    /* the runner's end */
    int watched; /* the pidfd was sent */
};

/* ------------------------------------------------------------------------ */
/* The guardian                                                              */
/* ------------------------------------------------------------------------ */

typedef struct guard_told {
    rg_buf b;
    int full;
} guard_told;

static void guard_tell(void *ctx, const char *where, const char *what)
{
    guard_told *t = ctx;

    if (!t->full && rg_buf_printf(&t->b, "%s%s%s%s", t->b.len ? ", " : "", where,
                                  where[0] ? ": " : "", what) < 0)
        t->full = 1;
}

/* Close every descriptor above 2 but `a` and `b`. */
static void guard_close_others(int a, int b)
{
    int lo = a < b ? a : b, hi = a < b ? b : a;

    if (lo < 3)
        lo = hi; /* no second descriptor to keep */

    if (lo > 3)
        close_range(3, (unsigned)lo - 1, 0);
    if (hi > lo + 1)
        close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
    close_range((unsigned)hi + 1, ~0U, 0);
}

/* The next message: its byte, and a descriptor it carried in *fd (else
 * -1); 0 at end of file. */
static int guard_recv(int sock, int *fd)
{
    char byte = 0;
    size_t nfds;

    *fd = -1;
    if (sandbox_fdpass_recv(sock, &byte, 1, fd, 1, &nfds) <= 0) {
        if (nfds == 1)
            close(*fd);
        *fd = -1;
        return 0;
    }
    return byte;
}

static void __attribute__((noreturn))
guard_main(int sock, int lock_fd, const char *fork_path, const char *base)
{
    static const int ignored[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU};
    guard_told t = {RG_BUF_INIT(GUARD_TOLD_MAX), 0};
    rg_error err = RG_ERROR_INIT;
    struct pollfd p;
    size_t i;
    int pidfd = -1, fd, c, n = 0, null;

    /* Out of the runner's session and process group, so a signal to
     * either (the terminal's, kill -- -PGID) does not reach it. */
    setsid();
    for (i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        signal(ignored[i], SIG_IGN);
    /* stdin and stdout: not held, so a caller reading refgate-run's
     * output sees its end when the runner ends; stderr for the report. */
    null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    guard_close_others(sock, lock_fd);
    /* Bounded: the runner sends one pidfd and one word. */
    while ((c = guard_recv(sock, &fd)) != 0) {
        if (c == 'p' && pidfd < 0 && fd >= 0)
            pidfd = fd;
        else if (fd >= 0)
            close(fd);
        if (c == 'd')
            _exit(0);
    }
    /* The runner is gone: wait for the run, then harden the fork. */
    if (pidfd >= 0) {
        p = (struct pollfd){pidfd, POLLIN, 0};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
    }
    if (fork_gitconf_neutralise(&n, fork_path, base, guard_tell, &t, &err) < 0)
        fprintf(stderr,
                "refgate-run: WARNING: the runner ended before hardening the fork, and %s; "
                "do not run git in %s before checking its .git\n",
                err.msg, fork_path);
    else
        fprintf(stderr,
                "refgate-run: the runner ended before hardening the fork; its guardian "
                "neutralised %d thing%s in %s/.git%s%s\n",
                n, n == 1 ? "" : "s", fork_path, n > 0 ? ": " : "",
                n == 0                       ? ""
                : t.full || t.b.data == NULL ? "(too many to list)"
                                             : t.b.data);
    _exit(0);
}

/* ------------------------------------------------------------------------ */
/* The runner's side                                                         */
/* ------------------------------------------------------------------------ */

int fork_guard_start(fork_guard **out, const char *fork_path, const char *base, int lock_fd,
                     rg_error *err)
{
    fork_guard *g;
    int sv[2];
    pid_t pid;

    *out = NULL;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        free(g);
        return rg_error_set(err, -errno, "socketpair: %s", strerror(errno));
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        free(g);
        return rg_error_set(err, -errno, "starting the fork's guardian: %s", strerror(errno));
    }
    if (pid == 0) {
        close(sv[0]);
        guard_main(sv[1], lock_fd, fork_path, base);
    }
    close(sv[1]);
    g->pid = pid;
    g->sock = sv[0];
    *out = g;
    return 0;
}

int fork_guard_watch(fork_guard *g, pid_t pid, rg_error *err)
{
    ssize_t n;
    int fd, rc = 0;

    if (g == NULL || g->watched)
        return 0;
    fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return rg_error_set(err, -errno, "pidfd_open: %s", strerror(errno));
    n = sandbox_fdpass_send(g->sock, "p", 1, &fd, 1);
    if (n != 1)
        rc = rg_error_set(err, -EPIPE, "the fork's guardian is gone: %s",
                          n < 0 ? strerror((int)-n) : "short write");
    else
        g->watched = 1;
    close(fd);
    return rc;
}

void fork_guard_free(fork_guard *g)
{
    ssize_t n;

    if (g == NULL)
        return;
    do
        n = send(g->sock, "d", 1, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    close(g->sock);
    while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    free(g);
}
