/*
 * Starting and waiting for the command; see proc.h.
 */
#include "sandbox/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/pty.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

static const int proc_forwarded[] = {SIGINT,  SIGTERM,  SIGHUP,  SIGQUIT, SIGUSR1,
                                     SIGUSR2, SIGWINCH, SIGTSTP, SIGCONT};
#define PROC_NFORWARDED (sizeof(proc_forwarded) / sizeof(proc_forwarded[0]))

/* The command's pid, for the handler; 0 while there is none. */
static volatile sig_atomic_t proc_child_pid;
static struct sigaction proc_saved[PROC_NFORWARDED];
static sigset_t proc_saved_mask;
static int proc_installed;
/* The child is a pid namespace's init, which forwards to the command. */
static int proc_via_init;
/* Where that init reports the command's wait status; -1 without one. */
static int proc_status_fd = -1;
/* The caller's terminal modes while it is raw for the run's pty. */
static struct termios proc_saved_tty;
static int proc_tty_raw;
/* In the command: the run's pty to take; empty without one. */
static char proc_pty_name[64];

static void proc_forward(int sig)
{
    pid_t pid = (pid_t)proc_child_pid;
    int saved = errno, to = sig;
    struct sigaction sa;

    /*
     * Job control: the command's group is orphaned (its parent is in
     * another session), so the kernel would discard SIGTSTP sent to it;
     * stop it with SIGSTOP, then stop this process the default way (the
     * signal is blocked in its handler, so it fires on return). SIGCONT
     * from the shell's `fg` continues both and re-arms the handler.
     */
    if (sig == SIGTSTP && !proc_via_init)
        to = SIGSTOP;
    /* The whole group, as a terminal would; the child may not have
     * called setsid() yet, then only itself. An init in a pid namespace
     * gets the signal itself and passes it on (SIGTSTP as SIGSTOP). */
    if (pid > 0 && (proc_via_init || kill(-pid, to) < 0))
        kill(pid, to);
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sig == SIGTSTP) {
        /* The shell gets its terminal back as it was. Then stop with
         * SIGSTOP, not SIGTSTP: in an orphaned process group (started by
         * setsid, a supervisor, a script without job control) the kernel
         * discards a default-action SIGTSTP, which would leave the command
         * stopped and refgate-run running. SIGCONT resumes both. */
        if (proc_tty_raw)
            tcsetattr(0, TCSADRAIN, &proc_saved_tty);
        raise(SIGSTOP);
    } else if (sig == SIGCONT) {
        struct termios raw = proc_saved_tty;

        if (proc_tty_raw) {
            cfmakeraw(&raw);
            tcsetattr(0, TCSADRAIN, &raw);
        }
        sa.sa_handler = proc_forward;
        sigaction(SIGTSTP, &sa, NULL);
    }
    errno = saved;
}

static void proc_restore(void)
{
    size_t i;

    if (proc_tty_raw)
        sandbox_pty_restore(0, &proc_saved_tty);
    proc_tty_raw = 0;
    if (!proc_installed)
        return;
    for (i = 0; i < PROC_NFORWARDED; i++)
        sigaction(proc_forwarded[i], &proc_saved[i], NULL);
    sigprocmask(SIG_SETMASK, &proc_saved_mask, NULL);
    proc_installed = 0;
    proc_child_pid = 0;
}

/* ------------------------------------------------------------------------ */
/* The child                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct proc_report {
    int exit; /* 125, 126 or 127 */
    int code;
    char msg[sizeof(((rg_error *)0)->msg)];
} proc_report;

/* Mark every descriptor above 2 close-on-exec. */
static int proc_cloexec_all(void)
{
    struct dirent *de;
    DIR *d;

    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return 0;
    /* Before Linux 5.11: go through what is open. */
    d = opendir("/proc/self/fd");
    if (d == NULL)
        return -errno;
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);

        if (fd > 2)
            fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    closedir(d);
    return 0;
}

/*
 * Whether `cmd` exists as given or in a PATH directory. execvp() reports
 * EACCES when a PATH directory could not be searched even if the command
 * is simply nowhere, and a shell calls that "not found" (127), not "cannot
 * run" (126). stat() is not subject to Landlock, so this sees past it.
 */
static int proc_found(const char *cmd)
{
    const char *path = getenv("PATH"), *p, *end;
    char buf[4096];
    struct stat st;

    if (strchr(cmd, '/') != NULL)
        return stat(cmd, &st) == 0;
    for (p = path ? path : "/usr/bin:/bin"; *p; p = *end ? end + 1 : end) {
        end = strchrnul(p, ':');
        if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)(end - p), end > p ? p : ".", cmd) <
                (int)sizeof(buf) &&
            stat(buf, &st) == 0 && S_ISREG(st.st_mode))
            return 1;
    }
    return 0;
}

static void proc_child_fail(int wfd, int exit_code, const rg_error *e)
{
    proc_report r;
    ssize_t n;

    memset(&r, 0, sizeof(r));
    r.exit = exit_code;
    r.code = e->code;
    memcpy(r.msg, e->msg, sizeof(r.msg));
    do
        n = write(wfd, &r, sizeof(r));
    while (n < 0 && errno == EINTR);
    _exit(exit_code);
}

static void proc_child(int wfd, const sandbox_proc_opts *opts)
{
    rg_error e = RG_ERROR_INIT;
    size_t i;
    int saved;

    for (i = 0; i < PROC_NFORWARDED; i++)
        sigaction(proc_forwarded[i], &proc_saved[i], NULL);
    sigprocmask(SIG_SETMASK, &proc_saved_mask, NULL);
    if (setsid() < 0) {
        rg_error_set(&e, -errno, "starting a new session: %s", strerror(errno));
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    }
    if (proc_pty_name[0] != '\0' && sandbox_pty_attach(proc_pty_name, &e) < 0)
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    if (opts->cwd != NULL && chdir(opts->cwd) < 0) {
        rg_error_set(&e, -errno, "%s: %s", opts->cwd, strerror(errno));
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    }
    if (proc_cloexec_all() < 0) {
        rg_error_set(&e, -errno, "closing descriptors: %s", strerror(errno));
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    }
    if (opts->confine != NULL && opts->confine(opts->ctx, &e) < 0)
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    environ = (char **)opts->envp;
    execvp(opts->argv[0], opts->argv);
    saved = errno;
    if (saved == ENOENT || (saved == EACCES && !proc_found(opts->argv[0]))) {
        rg_error_set(&e, -ENOENT, "%s: command not found", opts->argv[0]);
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_NOTFOUND, &e);
    }
    rg_error_set(&e, -saved, "cannot run %s: %s%s", opts->argv[0], strerror(saved),
                 saved == EACCES ? " (a program in the home directory, or its interpreter "
                                   "or libraries there, needs -r)"
                                 : "");
    proc_child_fail(wfd, SANDBOX_PROC_EXIT_NOEXEC, &e);
}

/* ------------------------------------------------------------------------ */
/* A pid namespace's init                                                    */
/* ------------------------------------------------------------------------ */

/* The command, for init's handler. */
static volatile sig_atomic_t proc_init_cmd;
/* The pty's master and the caller's terminal, for SIGWINCH; -1 without. */
static volatile sig_atomic_t proc_init_master = -1, proc_init_tty = -1;
/* Init's SIGCHLD pipe, which wakes the relay. */
static int proc_init_wake[2] = {-1, -1};

static void proc_init_chld(int sig)
{
    int saved = errno;
    ssize_t n;

    (void)sig;
    n = write(proc_init_wake[1], "c", 1);
    (void)n;
    errno = saved;
}

static void proc_init_forward(int sig)
{
    pid_t pid = (pid_t)proc_init_cmd;
    int saved = errno, to = sig == SIGTSTP ? SIGSTOP : sig;

    /* The pty's new size makes the kernel signal the command's group. */
    if (sig == SIGWINCH && proc_init_master >= 0) {
        sandbox_pty_copy_size(proc_init_tty, proc_init_master);
        errno = saved;
        return;
    }

    /* Its group is orphaned too: stop it with SIGSTOP (see proc_forward). */
    if (pid > 0 && kill(-pid, to) < 0)
        kill(pid, to);
    errno = saved;
}

/*
 * Run as init: start the command, forward signals, reap every child, and
 * when the command is gone, report its status on `sfd` and exit (the
 * kernel then kills what is left in the namespace).
 */
static void __attribute__((noreturn)) proc_init(int wfd, int sfd, const sandbox_proc_opts *opts)
{
    struct sigaction sa;
    rg_error e = RG_ERROR_INIT;
    sigset_t block;
    pid_t cmd, pid;
    size_t i;
    int status = 0, cmd_status = 0, master = -1, in = 0, out = 0, done = 0;
    ssize_t n;
    char c;

    /* Its own session, so the terminal's signals reach the runner only
     * (which forwards them once) and not init as well. */
    if (setsid() < 0) {
        rg_error_set(&e, -errno, "starting a new session: %s", strerror(errno));
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    }
    if (opts->setup != NULL && opts->setup(opts->ctx, &e) < 0)
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    /* Taking the run's ids (a root caller's become nobody's) cleared the
     * parent-death signal: set it again, then make sure the runner did not
     * die meanwhile (its end of the status pipe closed: POLLERR here). */
    {
        struct pollfd p = {sfd, POLLOUT, 0};

        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || poll(&p, 1, 0) < 0 ||
            (p.revents & (POLLERR | POLLHUP)))
            _exit(SANDBOX_PROC_EXIT_FAILED);
    }
    if (opts->pty) {
        /* Output goes to the caller's terminal: stdout, else stderr, else stdin. */
        out = isatty(1) ? 1 : isatty(2) ? 2 : 0;
        if (sandbox_pty_open(&master, proc_pty_name, sizeof(proc_pty_name), 0, &e) < 0 ||
            pipe2(proc_init_wake, O_CLOEXEC | O_NONBLOCK) < 0) {
            if (e.code == 0)
                rg_error_set(&e, -errno, "pipe: %s", strerror(errno));
            proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
        }
    }
    sigemptyset(&block);
    for (i = 0; i < PROC_NFORWARDED; i++)
        sigaddset(&block, proc_forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, NULL);
    cmd = fork();
    if (cmd < 0) {
        rg_error_set(&e, -errno, "fork: %s", strerror(errno));
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    }
    if (cmd == 0) {
        close(sfd);
        if (master >= 0)
            close(master);
        proc_child(wfd, opts);
    }
    /* The runner learns that exec succeeded when the command closes the
     * last write end of the report pipe. */
    close(wfd);
    proc_init_cmd = cmd;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = proc_init_forward;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < PROC_NFORWARDED; i++)
        sigaction(proc_forwarded[i], &sa, NULL);
    if (master >= 0) {
        proc_init_master = master;
        proc_init_tty = in;
        sa.sa_handler = proc_init_chld;
        sigaction(SIGCHLD, &sa, NULL);
    }
    sigprocmask(SIG_UNBLOCK, &block, NULL);
    /* Bounded: each round reaps a child or relays a buffer; it ends when
     * the command has exited. */
    while (!done) {
        pid = waitpid(-1, &status, master >= 0 ? WNOHANG : 0);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            break; /* no child left (cannot happen before the command) */
        if (pid == cmd) {
            cmd_status = status;
            done = 1;
        } else if (pid == 0) {
            /* Nothing to reap: relay until something changes. */
            if (sandbox_pty_relay(&in, out, &master, proc_init_wake[0]) < 0)
                break;
            while (read(proc_init_wake[0], &c, 1) > 0)
                ;
            if (master < 0)
                proc_init_master = -1;
        }
    }
    if (master >= 0)
        sandbox_pty_drain(master, out);
    do
        n = write(sfd, &cmd_status, sizeof(cmd_status));
    while (n < 0 && errno == EINTR);
    _exit(0);
}

/* ------------------------------------------------------------------------ */
/* The parent                                                                */
/* ------------------------------------------------------------------------ */

/*
 * In the child just created: wait for the runner's go (the id maps are
 * written), then build the sandbox and run the command, as init of a new
 * pid namespace or directly.
 */
static void __attribute__((noreturn))
proc_sandbox_child(int wfd, int gfd, int sfd, const sandbox_proc_opts *opts)
{
    rg_error e = RG_ERROR_INIT;
    ssize_t n;
    char go = 0;

    if (gfd >= 0) {
        do
            n = read(gfd, &go, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1)
            _exit(SANDBOX_PROC_EXIT_FAILED); /* the runner gave up and said why */
        close(gfd);
    }
    if (opts->clone_flags & CLONE_NEWPID) {
        /* Nothing of the run may outlive the runner either. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
            rg_error_set(&e, -errno, "PR_SET_PDEATHSIG: %s", strerror(errno));
            proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
        }
        proc_init(wfd, sfd, opts);
    }
    if (sfd >= 0)
        close(sfd);
    if (opts->setup != NULL && opts->setup(opts->ctx, &e) < 0)
        proc_child_fail(wfd, SANDBOX_PROC_EXIT_FAILED, &e);
    proc_child(wfd, opts);
    _exit(SANDBOX_PROC_EXIT_FAILED);
}

int sandbox_proc_spawn(pid_t *out, int *out_exit, const sandbox_proc_opts *opts, rg_error *err)
{
    struct sigaction sa;
    proc_report r;
    sigset_t block;
    pid_t pid = -1;
    ssize_t n;
    size_t i, got = 0;
    int pfd[2] = {-1, -1}, gfd[2] = {-1, -1}, sfd[2] = {-1, -1}, rc = 0, status;
    int ns = opts->clone_flags != 0;

    *out_exit = SANDBOX_PROC_EXIT_FAILED;
    if (pipe2(pfd, O_CLOEXEC) < 0 || (ns && pipe2(gfd, O_CLOEXEC) < 0) ||
        ((opts->clone_flags & CLONE_NEWPID) && pipe2(sfd, O_CLOEXEC) < 0)) {
        rc = rg_error_set(err, -errno, "pipe: %s", strerror(errno));
        goto done;
    }
    /* The pty's line discipline edits now; the caller's terminal passes
     * every key through. */
    if (opts->pty) {
        rc = sandbox_pty_raw(0, &proc_saved_tty, err);
        if (rc < 0)
            goto done;
        proc_tty_raw = 1;
    }
    /* Signals wait until the pid is known, so none is lost or misdirected. */
    sigemptyset(&block);
    for (i = 0; i < PROC_NFORWARDED; i++)
        sigaddset(&block, proc_forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &proc_saved_mask);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = proc_forward;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < PROC_NFORWARDED; i++)
        sigaction(proc_forwarded[i], &sa, &proc_saved[i]);
    proc_installed = 1;

    /* clone() as fork(): a null stack means the child runs on a copy of ours. */
    if (ns)
        pid = (pid_t)syscall(SYS_clone, opts->clone_flags | SIGCHLD, NULL, NULL, NULL, NULL);
    else
        pid = fork();
    if (pid < 0) {
        rc = rg_error_set(err, ns ? SANDBOX_PROC_E_NAMESPACE : -errno, "%s: %s",
                          ns ? "creating the namespaces" : "fork", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        close(pfd[0]);
        if (gfd[1] >= 0)
            close(gfd[1]);
        if (sfd[0] >= 0)
            close(sfd[0]);
        proc_sandbox_child(pfd[1], gfd[0], sfd[1], opts);
    }
    proc_child_pid = pid;
    proc_via_init = (opts->clone_flags & CLONE_NEWPID) != 0;
    sigprocmask(SIG_SETMASK, &proc_saved_mask, NULL);
    sigprocmask(SIG_UNBLOCK, &block, NULL);
    close(pfd[1]);
    pfd[1] = -1;
    if (sfd[1] >= 0) {
        close(sfd[1]);
        sfd[1] = -1;
    }
    if (ns) {
        close(gfd[0]);
        gfd[0] = -1;
        if (opts->map != NULL && (rc = opts->map(opts->ctx, pid, err)) < 0) {
            /* Closing the go pipe unwritten makes the child exit. */
            close(gfd[1]);
            gfd[1] = -1;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            proc_restore();
            goto done;
        }
        do
            n = write(gfd[1], "g", 1);
        while (n < 0 && errno == EINTR);
        close(gfd[1]);
        gfd[1] = -1;
    }
    if (opts->started != NULL)
        opts->started(opts->ctx);
    memset(&r, 0, sizeof(r));
    while (got < sizeof(r)) {
        n = read(pfd[0], (char *)&r + got, sizeof(r) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == 0) {
        *out = pid;
        proc_status_fd = sfd[0];
        sfd[0] = -1;
        goto done;
    }
    /* The child failed before exec and has exited (with it, its namespaces). */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *out_exit = got == sizeof(r) ? r.exit : SANDBOX_PROC_EXIT_FAILED;
    rc = rg_error_set(err, got == sizeof(r) && r.code < 0 ? r.code : -EIO, "%s",
                      got == sizeof(r) ? r.msg : "the sandboxed child failed");
    proc_restore();
done:
    if (rc < 0 && pid < 0)
        proc_restore();
    for (i = 0; i < 2; i++) {
        if (pfd[i] >= 0)
            close(pfd[i]);
        if (gfd[i] >= 0)
            close(gfd[i]);
        if (sfd[i] >= 0)
            close(sfd[i]);
    }
    return rc;
}

int sandbox_proc_wait(int *out, pid_t pid, rg_error *err)
{
    int status, cmd_status, rc = 0;
    size_t got = 0;
    ssize_t n;

    while (waitpid(pid, &status, 0) < 0) {
        if (errno == EINTR)
            continue;
        rc = rg_error_set(err, -errno, "waiting for the command: %s", strerror(errno));
        break;
    }
    /* Through an init: the command's own status, if init lived to send it. */
    if (rc == 0 && proc_status_fd >= 0) {
        while (got < sizeof(cmd_status)) {
            n = read(proc_status_fd, (char *)&cmd_status + got, sizeof(cmd_status) - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got == sizeof(cmd_status))
            status = cmd_status;
    }
    if (proc_status_fd >= 0)
        close(proc_status_fd);
    proc_status_fd = -1;
    proc_via_init = 0;
    proc_restore();
    if (rc == 0)
        *out = status;
    return rc;
}

int sandbox_proc_status_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return SANDBOX_PROC_EXIT_FAILED;
}
