/*
 * Starting and waiting for the command; see proc.h.
 */
#include "sandbox/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
    if (sig == SIGTSTP)
        to = SIGSTOP;
    /* The whole group, as a terminal would; the child may not have
     * called setsid() yet, then only itself. */
    if (pid > 0 && kill(-pid, to) < 0)
        kill(pid, to);
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sig == SIGTSTP) {
        sa.sa_handler = SIG_DFL;
        sigaction(SIGTSTP, &sa, NULL);
        raise(SIGTSTP);
    } else if (sig == SIGCONT) {
        sa.sa_handler = proc_forward;
        sigaction(SIGTSTP, &sa, NULL);
    }
    errno = saved;
}

static void proc_restore(void)
{
    size_t i;

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
/* The parent                                                                */
/* ------------------------------------------------------------------------ */

int sandbox_proc_spawn(pid_t *out, int *out_exit, const sandbox_proc_opts *opts, rg_error *err)
{
    struct sigaction sa;
    proc_report r;
    sigset_t block;
    pid_t pid;
    ssize_t n;
    size_t i, got = 0;
    int pfd[2] = {-1, -1}, rc = 0, status;

    *out_exit = SANDBOX_PROC_EXIT_FAILED;
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return rg_error_set(err, -errno, "pipe: %s", strerror(errno));
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

    pid = fork();
    if (pid < 0) {
        rc = rg_error_set(err, -errno, "fork: %s", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        close(pfd[0]);
        proc_child(pfd[1], opts);
    }
    proc_child_pid = pid;
    sigprocmask(SIG_SETMASK, &proc_saved_mask, NULL);
    sigprocmask(SIG_UNBLOCK, &block, NULL);
    close(pfd[1]);
    pfd[1] = -1;
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
        goto done;
    }
    /* The child failed before exec and has exited. */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *out_exit = got == sizeof(r) ? r.exit : SANDBOX_PROC_EXIT_FAILED;
    rc = rg_error_set(err, got == sizeof(r) && r.code < 0 ? r.code : -EIO, "%s",
                      got == sizeof(r) ? r.msg : "the sandboxed child failed");
    proc_restore();
done:
    if (rc < 0 && pid < 0)
        proc_restore();
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    return rc;
}

int sandbox_proc_wait(int *out, pid_t pid, rg_error *err)
{
    int status, rc = 0;

    while (waitpid(pid, &status, 0) < 0) {
        if (errno == EINTR)
            continue;
        rc = rg_error_set(err, -errno, "waiting for the command: %s", strerror(errno));
        break;
    }
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
