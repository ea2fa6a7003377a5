/*
 * Starting the command and waiting for it. The child starts a new session
 * (so it has no controlling terminal and TIOCSTI cannot type into the
 * caller's), moves to the working directory, applies the confinement
 * layers through a callback (privileges, Landlock, seccomp), marks every
 * descriptor but 0-2 close-on-exec and execs with the built environment. A
 * failure before exec reaches the parent over a close-on-exec pipe, so
 * "started" means exec succeeded.
 *
 * With namespaces, the first child is created in them (clone), waits until
 * the runner has written its uid and gid maps, and builds the sandbox
 * (mounts) through a second callback. With a new pid namespace it is the
 * namespace's init: it starts the command as its child, forwards signals to
 * it, reaps orphans, and when the command exits reports its wait status to
 * the runner and exits itself, whereupon the kernel kills every process
 * left in the namespace, so nothing of the run outlives it. It dies with
 * the runner too (PR_SET_PDEATHSIG).
 *
 * The parent stays outside the sandbox to clean up afterwards; while it
 * waits it forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and
 * SIGWINCH to the command's process group, since in its own session the
 * command no longer gets them from the terminal, and proxies job control:
 * SIGTSTP (Ctrl-Z) stops the command and then the runner, SIGCONT resumes
 * both.
 */
#ifndef RG_SANDBOX_PROC_H
#define RG_SANDBOX_PROC_H

#include <sys/types.h>

#include "util/error.h"

/* Exit codes of the runner itself, as env(1) and timeout(1) use them. */
#define SANDBOX_PROC_EXIT_FAILED   125 /* refused, or the sandbox could not be set up */
#define SANDBOX_PROC_EXIT_NOEXEC   126 /* the command was found but cannot run */
#define SANDBOX_PROC_EXIT_NOTFOUND 127 /* the command was not found */

/* sandbox_proc_spawn's error when the kernel refused the namespaces. */
#define SANDBOX_PROC_E_NAMESPACE (-1100)

typedef struct sandbox_proc_opts {
    char *const *argv; /* argv[0] is searched in the PATH of envp */
    char *const *envp;
    const char *cwd;
    /* Runs in the child after setsid() and chdir(), before exec. */
    int (*confine)(void *ctx, rg_error *err);
    void *ctx;
    /* CLONE_NEW* flags: the namespaces the child is created in; 0: fork(). */
    unsigned long clone_flags;
    /* Runs in the runner once the child exists, before it goes on (the id maps). */
    int (*map)(void *ctx, pid_t child, rg_error *err);
    /* Runs in the child after map, before the command starts (the mounts);
     * in a new pid namespace, in its init. */
    int (*setup)(void *ctx, rg_error *err);
    /* With a new pid namespace and the run's own devpts: give the command
     * a pty of its own instead of the caller's terminal (see pty.h). */
    int pty;
    /* Runs in the runner once the child goes on, while it sets up: work
     * the child needs only at the end (compiling the seccomp filter). */
    void (*started)(void *ctx);
} sandbox_proc_opts;

#define SANDBOX_PROC_OPTS_INIT                                                                     \
    {                                                                                              \
        NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0, NULL                                       \
    }

/*
 * Start the command. Returns 0 with its pid in *out once exec succeeded.
 * Otherwise the child has been reaped, `err` says why, and *out_exit is
 * the exit code the runner should use (125, 126 or 127).
 */
int sandbox_proc_spawn(pid_t *out, int *out_exit, const sandbox_proc_opts *opts, rg_error *err);

/*
 * Wait for `pid`, forwarding signals to it, and store its wait status in
 * *out. Signal dispositions are restored before returning.
 */
int sandbox_proc_wait(int *out, pid_t pid, rg_error *err);

/* A shell's view of a wait status: the exit code, or 128 + the signal. */
int sandbox_proc_status_code(int status);

#endif
