/*
 * Child processes with pipes and deadlines; see proc.h.
 *
 * One loop (proc_pump) services the three pipes for every way of talking to
 * a child: writing its stdin, reading its stdout, or waiting for its end.
 * The exit itself is waited for on a pidfd, so a wait sleeps in poll until
 * the child ends or the deadline passes, with no polling interval.
 */
#include "util/proc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One read or write moves at most this much; pipes hold 64 KiB by default. */
#define PROC_CHUNK (64 * 1024)

/* Room for "git <subcommand>" in messages. */
#define PROC_NAME_MAX 64

/* poll() takes an int of milliseconds: a longer wait simply goes round again. */
#define PROC_POLL_MAX_MS (3600 * 1000)

#define PROC_NS_PER_MS  1000000LL
#define PROC_NS_PER_SEC 1000000000LL

/* Without a pidfd, how often a wait for the child's exit looks again. */
#define PROC_EXIT_POLL_MS 10

struct rg_proc {
    pid_t pid;       /* > 0 until reaped */
    int pidfd;       /* readable once the child has exited, or -1 */
    int in_fd;       /* write end of the child's stdin, or -1 */
    int out_fd;      /* read end of the child's stdout, or -1 */
    int err_fd;      /* read end of the child's stderr, or -1 */
    int group;       /* the child leads its own process group */
    int status;      /* exit code, or 128 + signal, once reaped */
    int signal;      /* the signal that ended it, or 0 */
    int timed_out;   /* ended by us at a deadline */
    int sink_failed; /* on_stdout failed; its error is in sink_err */
    int64_t started; /* monotonic ns, for messages */
    int64_t ended;   /* when it was ended at a deadline */
    rg_proc_sink on_stdout;
    void *ctx;
    rg_error sink_err;
    char name[PROC_NAME_MAX];
    size_t tail_len;
    char tail[RG_PROC_TAIL_MAX];
};

static void proc_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static int64_t proc_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * PROC_NS_PER_SEC + ts.tv_nsec;
}

int64_t rg_proc_deadline(int64_t seconds)
{
    return proc_now_ns() + seconds * PROC_NS_PER_SEC;
}

/* Milliseconds left until `deadline` for poll(), rounded up; 0 once passed. */
static int proc_ms_left(int64_t deadline)
{
    int64_t left = deadline - proc_now_ns();

    if (left <= 0)
        return 0;
    if (left >= (int64_t)PROC_POLL_MAX_MS * PROC_NS_PER_MS)
        return PROC_POLL_MAX_MS;
    return (int)((left + PROC_NS_PER_MS - 1) / PROC_NS_PER_MS);
}

/* "git" is named with its subcommand, the first argument that is not an option. */
static void proc_set_name(rg_proc *p, const char *const *argv)
{
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];

    snprintf(p->name, sizeof(p->name), "%s", base);
    if (strcmp(base, "git") != 0)
        return;
    for (size_t i = 1; argv[i] != NULL; i++) {
        if (argv[i][0] != '-') {
            snprintf(p->name, sizeof(p->name), "git %s", argv[i]);
            return;
        }
    }
}

const char *rg_proc_name(const rg_proc *p)
{
    return p->name;
}

/* ---------------------------------------------------------------------------
 * Starting
 * ------------------------------------------------------------------------- */

int rg_proc_start(rg_proc **out, const rg_proc_spec *spec, rg_error *err)
{
    int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1}, devnull = -1, rc = 0;
    unsigned flags = spec->flags;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    rg_proc *p;
    pid_t pid;

    *out = NULL;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    p->pid = -1;
    p->pidfd = p->in_fd = p->out_fd = p->err_fd = -1;
    p->on_stdout = spec->on_stdout;
    p->ctx = spec->ctx;
    proc_set_name(p, spec->argv);
    if (posix_spawnattr_init(&attr) != 0) {
        free(p);
        return rg_error_set(err, -ENOMEM, "cannot start %s", spec->argv[0]);
    }
    if (posix_spawn_file_actions_init(&fa) != 0) {
        posix_spawnattr_destroy(&attr);
        free(p);
        return rg_error_set(err, -ENOMEM, "cannot start %s", spec->argv[0]);
    }
    if (flags & RG_PROC_GROUP) {
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
    }
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || ((flags & RG_PROC_STDIN) && pipe2(in, O_CLOEXEC) < 0) ||
        ((flags & RG_PROC_STDOUT) && pipe2(o, O_CLOEXEC) < 0) ||
        ((flags & RG_PROC_STDERR) && pipe2(e, O_CLOEXEC) < 0)) {
        rc = rg_error_set(err, -errno, "cannot start %s: %s", p->name, strerror(errno));
        goto done;
    }
    if (spec->stdin_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, spec->stdin_fd, 0);
    else
        posix_spawn_file_actions_adddup2(&fa, (flags & RG_PROC_STDIN) ? in[0] : devnull, 0);
    if (flags & RG_PROC_STDOUT)
        posix_spawn_file_actions_adddup2(&fa, o[1], 1);
    else if (!(flags & RG_PROC_INHERIT_STDOUT))
        posix_spawn_file_actions_adddup2(&fa, devnull, 1);
    if (flags & RG_PROC_STDERR)
        posix_spawn_file_actions_adddup2(&fa, e[1], 2);
    if (spec->cwd)
        posix_spawn_file_actions_addchdir_np(&fa, spec->cwd);
    rc = posix_spawnp(&pid, spec->argv[0], &fa, &attr, (char *const *)spec->argv,
                      (char *const *)spec->envp);
    if (rc != 0) {
        rc = rg_error_set(err, -rc, "cannot start %s: %s", p->name, strerror(rc));
        goto done;
    }
    p->pid = pid;
    p->started = proc_now_ns();
    p->group = (flags & RG_PROC_GROUP) != 0;
    /* Without a pidfd (kernels before 5.3) waits fall back to short polls. */
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    p->in_fd = in[1];
    in[1] = -1;
    /* Non-blocking, so a write larger than the pipe's room returns short
     * instead of stalling the loop that also drains the child's output. */
    if (p->in_fd >= 0)
        fcntl(p->in_fd, F_SETFL, fcntl(p->in_fd, F_GETFL) | O_NONBLOCK);
    p->out_fd = o[0];
    o[0] = -1;
    p->err_fd = e[0];
    e[0] = -1;
    *out = p;
    p = NULL;
done:
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    proc_close(&devnull);
    proc_close(&in[0]);
    proc_close(&in[1]);
    proc_close(&o[0]);
    proc_close(&o[1]);
    proc_close(&e[0]);
    proc_close(&e[1]);
    free(p);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Waiting and ending
 * ------------------------------------------------------------------------- */

static void proc_record(rg_proc *p, int st)
{
    p->pid = -1;
    p->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + p->signal;
}

/*
 * Wait until the child has exited or `deadline` passes, without reaping it
 * (so its pid, and the process group id, cannot be reused meanwhile).
 * Returns 1 when it has exited, 0 at the deadline.
 */
static int proc_wait_exit(rg_proc *p, int64_t deadline)
{
    siginfo_t si;
    int r;

    /* Bounded: every round waits in poll until the exit or the deadline. */
    for (;;) {
        memset(&si, 0, sizeof(si));
        r = waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && si.si_pid != 0)
            return 1;
        /* Already reaped by someone else (SIGCHLD ignored): it is gone. */
        if (r < 0 && errno == ECHILD)
            return 1;
        if (proc_now_ns() >= deadline)
            return 0;
        if (p->pidfd >= 0) {
            struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
            poll(&pf, 1, proc_ms_left(deadline));
        } else {
            struct timespec pause = {0, PROC_EXIT_POLL_MS * PROC_NS_PER_MS};
            nanosleep(&pause, NULL);
        }
    }
}

static void proc_reap(rg_proc *p)
{
    int st = 0;

    while (waitpid(p->pid, &st, 0) < 0) {
        if (errno != EINTR) {
            p->pid = -1;
            p->status = 128 + SIGKILL;
            return;
        }
    }
    proc_record(p, st);
}

static void proc_signal(rg_proc *p, int sig)
{
    kill(p->group ? -p->pid : p->pid, sig);
}

/*
 * End the child: SIGTERM lets git remove its temporary files; whatever is
 * still there after the grace gets SIGKILL. The group is killed before the
 * leader is reaped, while its id still names only this group.
 */
static void proc_terminate(rg_proc *p)
{
    if (p->pid <= 0)
        return;
    proc_signal(p, SIGTERM);
    if (!proc_wait_exit(p, proc_now_ns() + RG_PROC_TERM_GRACE_MS * PROC_NS_PER_MS) || p->group)
        proc_signal(p, SIGKILL);
    proc_reap(p);
}

static int proc_timed_out(rg_proc *p, rg_error *err)
{
    char why[RG_PROC_WHY_MAX];

    p->ended = proc_now_ns();
    proc_terminate(p);
    p->timed_out = 1;
    rg_proc_why(p, why, sizeof(why));
    return rg_error_set(err, -ETIMEDOUT, "%s ran past its deadline and was ended after %lld s%s%s",
                        p->name, (long long)((p->ended - p->started) / PROC_NS_PER_SEC),
                        why[0] ? ": " : "", why);
}

/* ---------------------------------------------------------------------------
 * The pipes
 * ------------------------------------------------------------------------- */

/* Keep the last RG_PROC_TAIL_MAX bytes the child wrote on stderr. */
static void proc_tail_append(rg_proc *p, const char *data, size_t n)
{
    if (n >= RG_PROC_TAIL_MAX) {
        memcpy(p->tail, data + n - RG_PROC_TAIL_MAX, RG_PROC_TAIL_MAX);
        p->tail_len = RG_PROC_TAIL_MAX;
        return;
    }
    if (p->tail_len + n > RG_PROC_TAIL_MAX) {
        size_t drop = p->tail_len + n - RG_PROC_TAIL_MAX;
        memmove(p->tail, p->tail + drop, p->tail_len - drop);
        p->tail_len -= drop;
    }
    memcpy(p->tail + p->tail_len, data, n);
    p->tail_len += n;
}

static void proc_deliver(rg_proc *p, const char *data, size_t n)
{
    if (p->sink_failed || p->on_stdout == NULL)
        return;
    if (p->on_stdout(p->ctx, data, n, &p->sink_err) < 0) {
        p->sink_failed = 1;
        if (p->sink_err.code == 0)
            p->sink_err.code = -EIO;
    }
}

/* Read once from a ready pipe: the byte count, or 0 at its end (then closed). */
static ssize_t proc_read_fd(int *fd, char *buf, size_t max)
{
    ssize_t n = read(*fd, buf, max);

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return -EAGAIN;
    if (n <= 0) {
        proc_close(fd);
        return 0;
    }
    return n;
}

/*
 * Wait until a pipe is ready or the deadline passes and service what is
 * ready: write from (*in, *in_len) to stdin, read stdout into rbuf (when
 * given; *got its length) or to the sink, keep the stderr tail.
 * Returns 0, -EPIPE (stdin's reader went away) or -ETIMEDOUT.
 */
static int proc_pump(rg_proc *p, const char **in, size_t *in_len, char *rbuf, size_t rmax,
                     size_t *got, int64_t deadline)
{
    struct pollfd pf[3];
    char chunk[PROC_CHUNK];
    ssize_t n;
    int rc;

    pf[0] = (struct pollfd){.fd = in_len && *in_len ? p->in_fd : -1, .events = POLLOUT};
    pf[1] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
    pf[2] = (struct pollfd){.fd = p->err_fd, .events = POLLIN};
    rc = poll(pf, 3, proc_ms_left(deadline));
    if (rc < 0 && errno != EINTR)
        return -errno;
    if (rc == 0 && proc_now_ns() >= deadline)
        return -ETIMEDOUT;
    if (rc <= 0)
        return 0;
    if (pf[0].revents) {
        n = write(p->in_fd, *in, *in_len < PROC_CHUNK ? *in_len : PROC_CHUNK);
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            proc_close(&p->in_fd);
            return -EPIPE;
        }
        if (n > 0) {
            *in += n;
            *in_len -= (size_t)n;
        }
    }
    if (pf[2].revents && (n = proc_read_fd(&p->err_fd, chunk, sizeof(chunk))) > 0)
        proc_tail_append(p, chunk, (size_t)n);
    if (pf[1].revents) {
        if (rbuf != NULL) {
            n = proc_read_fd(&p->out_fd, rbuf, rmax);
            if (n > 0)
                *got = (size_t)n;
        } else if ((n = proc_read_fd(&p->out_fd, chunk, sizeof(chunk))) > 0) {
            proc_deliver(p, chunk, (size_t)n);
        }
    }
    return 0;
}

int rg_proc_write(rg_proc *p, const void *data, size_t len, int64_t deadline, rg_error *err)
{
    const char *in = data;
    int rc = 0;

    /* Bounded: every round moves bytes or waits in poll until the deadline. */
    while (len > 0) {
        if (p->in_fd < 0)
            return rg_error_set(err, -EPIPE, "%s stopped reading its input", p->name);
        rc = proc_pump(p, &in, &len, NULL, 0, NULL, deadline);
        if (rc == -ETIMEDOUT)
            return proc_timed_out(p, err);
        if (rc == -EPIPE)
            return rg_error_set(err, -EPIPE, "%s stopped reading its input", p->name);
        if (rc < 0)
            return rg_error_set(err, rc, "%s: %s", p->name, strerror(-rc));
    }
    return 0;
}

void rg_proc_close_stdin(rg_proc *p)
{
    proc_close(&p->in_fd);
}

ssize_t rg_proc_read(rg_proc *p, char *buf, size_t max, int64_t deadline, rg_error *err)
{
    size_t got = 0;
    int rc;

    if (max == 0)
        return 0;
    /* Bounded: every round reads or waits in poll until the deadline. */
    while (got == 0 && p->out_fd >= 0) {
        rc = proc_pump(p, NULL, NULL, buf, max, &got, deadline);
        if (rc == -ETIMEDOUT)
            return proc_timed_out(p, err);
        if (rc < 0)
            return rg_error_set(err, rc, "%s: %s", p->name, strerror(-rc));
    }
    return (ssize_t)got;
}

int rg_proc_finish(rg_proc *p, int *status, int64_t deadline, rg_error *err)
{
    int rc = 0;

    proc_close(&p->in_fd);
    /* Bounded: every round reads or waits in poll until the deadline. */
    while (rc == 0 && (p->out_fd >= 0 || p->err_fd >= 0))
        rc = proc_pump(p, NULL, NULL, NULL, 0, NULL, deadline);
    if (rc == 0 && p->pid > 0 && !proc_wait_exit(p, deadline))
        rc = -ETIMEDOUT;
    if (rc == -ETIMEDOUT)
        rc = proc_timed_out(p, err);
    else if (rc < 0)
        return rg_error_set(err, rc, "%s: %s", p->name, strerror(-rc));
    else if (p->pid > 0)
        proc_reap(p);
    /* Also after a deadline: how the child ended is known once it is reaped. */
    if (status)
        *status = p->status;
    if (rc < 0)
        return rc;
    if (p->sink_failed) {
        if (err)
            *err = p->sink_err;
        return p->sink_err.code;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------- */

void rg_proc_why(const rg_proc *p, char *out, size_t outsz)
{
    size_t start = p->tail_len, end = p->tail_len, n, i;

    if (outsz == 0)
        return;
    for (size_t pos = 0; pos < p->tail_len;) {
        size_t eol = pos;

        while (eol < p->tail_len && p->tail[eol] != '\n' && p->tail[eol] != '\r')
            eol++;
        if (eol > pos) {
            start = pos;
            end = eol;
            if (eol - pos > 6 && !memcmp(p->tail + pos, "fatal:", 6))
                break;
        }
        pos = eol + 1;
    }
    n = end - start < outsz - 1 ? end - start : outsz - 1;
    for (i = 0; i < n; i++) {
        char c = p->tail[start + i];
        out[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    out[n] = '\0';
}

int rg_proc_check(const rg_proc *p, int code, rg_error *err)
{
    char why[RG_PROC_WHY_MAX];

    if (!p->timed_out && p->signal == 0 && p->status == 0)
        return 0;
    rg_proc_why(p, why, sizeof(why));
    if (p->timed_out)
        return rg_error_set(err, code, "%s ran past its deadline and was ended after %lld s%s%s",
                            p->name, (long long)((p->ended - p->started) / PROC_NS_PER_SEC),
                            why[0] ? ": " : "", why);
    if (p->signal != 0)
        return rg_error_set(err, code, "%s was killed by signal %d%s%s", p->name, p->signal,
                            why[0] ? ": " : "", why);
    return rg_error_set(err, code, "%s exited with status %d%s%s", p->name, p->status,
                        why[0] ? ": " : "", why);
}

/* ---------------------------------------------------------------------------
 * Run to completion
 * ------------------------------------------------------------------------- */

static int proc_buf_sink(void *ctx, const char *data, size_t len, rg_error *err)
{
    rg_buf *b = ctx;

    if (b->len + len > b->max)
        return rg_error_set(err, RG_E_TOO_BIG, "output larger than %zu bytes", b->max);
    if (rg_buf_append(b, data, len) < 0)
        return rg_error_set(err, -ENOMEM, "out of memory");
    return 0;
}

int rg_proc_run(int *status, rg_buf *out, const rg_proc_spec *spec, int64_t deadline, rg_error *err)
{
    rg_proc_spec s = *spec;
    rg_proc *p = NULL;
    int rc;

    s.flags |= RG_PROC_STDOUT | RG_PROC_STDERR;
    s.on_stdout = out ? proc_buf_sink : NULL;
    s.ctx = out;
    rc = rg_proc_start(&p, &s, err);
    if (rc < 0)
        return rc;
    rc = rg_proc_finish(p, status, deadline, err);
    if (rc == 0 && status == NULL)
        rc = rg_proc_check(p, RG_E_CHILD, err);
    else if (rc < 0 && rc != -ETIMEDOUT)
        rg_error_wrap(err, "%s", p->name);
    rg_proc_free(p);
    return rc;
}

void rg_proc_free(rg_proc *p)
{
    if (p == NULL)
        return;
    proc_close(&p->in_fd);
    proc_close(&p->out_fd);
    proc_close(&p->err_fd);
    proc_terminate(p);
    proc_close(&p->pidfd);
    explicit_bzero(p->tail, sizeof(p->tail));
    explicit_bzero(&p->sink_err, sizeof(p->sink_err));
    free(p);
}
