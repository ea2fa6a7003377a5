/* Child processes with pipes; see proc.h. */
#include "util/proc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int rg_proc_spawn(rg_proc *out, const char *const *argv, const char *const *envp, const char *cwd,
                  unsigned flags, rg_error *err)
{
    int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1}, devnull = -1, rc = 0;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    pid_t pid;

    *out = (rg_proc)RG_PROC_INIT;
    if (posix_spawnattr_init(&attr) != 0)
        return rg_error_set(err, -ENOMEM, "cannot start %s", argv[0]);
    if (posix_spawn_file_actions_init(&fa) != 0) {
        posix_spawnattr_destroy(&attr);
        return rg_error_set(err, -ENOMEM, "cannot start %s", argv[0]);
    }
    if (flags & RG_PROC_GROUP) {
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
    }
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || ((flags & RG_PROC_STDIN) && pipe2(in, O_CLOEXEC) < 0) ||
        ((flags & RG_PROC_STDOUT) && pipe2(o, O_CLOEXEC) < 0) ||
        ((flags & RG_PROC_STDERR) && pipe2(e, O_CLOEXEC) < 0)) {
        rc = rg_error_set(err, -errno, "cannot start %s: %s", argv[0], strerror(errno));
        goto done;
    }
    posix_spawn_file_actions_adddup2(&fa, (flags & RG_PROC_STDIN) ? in[0] : devnull, 0);
    if (flags & RG_PROC_STDOUT)
        posix_spawn_file_actions_adddup2(&fa, o[1], 1);
    else if (!(flags & RG_PROC_INHERIT_STDOUT))
        posix_spawn_file_actions_adddup2(&fa, devnull, 1);
    if (flags & RG_PROC_STDERR)
        posix_spawn_file_actions_adddup2(&fa, e[1], 2);
    if (cwd)
        posix_spawn_file_actions_addchdir_np(&fa, cwd);
    rc = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, (char *const *)envp);
    if (rc != 0) {
        rc = rg_error_set(err, -rc, "cannot start %s: %s", argv[0], strerror(rc));
        goto done;
    }
    out->pid = pid;
    out->group = (flags & RG_PROC_GROUP) != 0;
    out->in_fd = in[1];
    in[1] = -1;
    out->out_fd = o[0];
    o[0] = -1;
    out->err_fd = e[0];
    e[0] = -1;
done:
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close_fd(&devnull);
    close_fd(&in[0]);
    close_fd(&in[1]);
    close_fd(&o[0]);
    close_fd(&o[1]);
    close_fd(&e[0]);
    close_fd(&e[1]);
    return rc;
}

int rg_proc_wait(rg_proc *p, int *status)
{
    int st = 0;

    close_fd(&p->in_fd);
    close_fd(&p->out_fd);
    close_fd(&p->err_fd);
    if (p->pid <= 0)
        return -ECHILD;
    while (waitpid(p->pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    p->pid = -1;
    if (status)
        *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return 0;
}

/* Append what a pipe has to `b`; a full buffer keeps reading and drops. */
static int drain_one(int *fd, rg_buf *b)
{
    char chunk[16384];
    ssize_t n = read(*fd, chunk, sizeof(chunk));

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0) {
        close_fd(fd);
        return n < 0 ? -errno : 0;
    }
    if (b && b->len + (size_t)n <= b->max)
        return rg_buf_append(b, chunk, (size_t)n);
    if (b)
        return RG_E_TOO_BIG;
    return 0;
}

int rg_proc_drain(rg_proc *p, rg_buf *out, rg_buf *errout, rg_error *err)
{
    struct pollfd pf[2];
    int rc = 0, n;

    while (p->out_fd >= 0 || p->err_fd >= 0) {
        pf[0] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = p->err_fd, .events = POLLIN};
        n = poll(pf, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return rg_error_set(err, -errno, "poll: %s", strerror(errno));
        if (pf[0].revents && (rc = drain_one(&p->out_fd, out)) < 0)
            return rg_error_set(err, rc, "child output %s",
                                rc == RG_E_TOO_BIG ? "too large" : "failed");
        if (pf[1].revents && drain_one(&p->err_fd, errout) == RG_E_TOO_BIG)
            rc = 0; /* stderr past its cap is dropped, never fatal */
    }
    return 0;
}

int rg_proc_run(int *status, rg_buf *out, rg_buf *errout, const char *const *argv,
                const char *const *envp, const char *cwd, rg_error *err)
{
    rg_proc p;
    int rc;

    rc = rg_proc_spawn(&p, argv, envp, cwd, RG_PROC_STDOUT | RG_PROC_STDERR, err);
    if (rc < 0)
        return rc;
    rc = rg_proc_drain(&p, out, errout, err);
    if (rc < 0) {
        rg_proc_kill(&p);
        return rc;
    }
    return rg_proc_wait(&p, status);
}

void rg_proc_signal(rg_proc *p, int sig)
{
    if (p->pid > 0)
        kill(p->group ? -p->pid : p->pid, sig);
}

void rg_proc_kill(rg_proc *p)
{
    rg_proc_signal(p, SIGKILL);
    if (p->pid > 0)
        rg_proc_wait(p, NULL);
    close_fd(&p->in_fd);
    close_fd(&p->out_fd);
    close_fd(&p->err_fd);
}
