/*
 * Child processes with pipes: the gateway runs the real upstream
 * (`git receive-pack`) this way, and the demo runs the real git client.
 * Every descriptor the parent holds is close-on-exec, so a child gets only
 * its three pipes (or /dev/null).
 */
#ifndef RG_UTIL_PROC_H
#define RG_UTIL_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/error.h"

typedef struct rg_proc {
    pid_t pid;
    int in_fd;  /* write end of the child's stdin, or -1 */
    int out_fd; /* read end of the child's stdout, or -1 */
    int err_fd; /* read end of the child's stderr, or -1 */
    int group;  /* the child leads its own process group */
} rg_proc;

#define RG_PROC_INIT                                                                               \
    {                                                                                              \
        -1, -1, -1, -1, 0                                                                          \
    }

enum {
    RG_PROC_STDIN = 1 << 0,          /* give the child a stdin pipe (else /dev/null) */
    RG_PROC_STDOUT = 1 << 1,         /* capture stdout (else /dev/null) */
    RG_PROC_STDERR = 1 << 2,         /* capture stderr (else inherited) */
    RG_PROC_INHERIT_STDOUT = 1 << 3, /* without RG_PROC_STDOUT: inherit, not /dev/null */
    RG_PROC_GROUP = 1 << 4,          /* own process group: rg_proc_kill reaches its children too */
};

/*
 * Start argv[0] (searched in PATH) with exactly the environment `envp` in
 * directory `cwd` (NULL: the current one).
 */
int rg_proc_spawn(rg_proc *out, const char *const *argv, const char *const *envp, const char *cwd,
                  unsigned flags, rg_error *err);

/*
 * Close the stdin pipe, if still open, and wait for the child. *status is
 * the exit code, or 128 + signal. Closes the remaining pipes.
 */
int rg_proc_wait(rg_proc *p, int *status);

/* Read the child's stdout and stderr to the end into the two buffers
 * (either may be NULL to discard), without deadlocking on either pipe. */
int rg_proc_drain(rg_proc *p, rg_buf *out, rg_buf *errout, rg_error *err);

/*
 * Run a command to completion with no input; its stdout goes to `out` and
 * stderr to `errout` (either may be NULL to discard). *status as above.
 */
int rg_proc_run(int *status, rg_buf *out, rg_buf *errout, const char *const *argv,
                const char *const *envp, const char *cwd, rg_error *err);

/*
 * Kill and reap a child that is no longer wanted (with RG_PROC_GROUP, its
 * whole process group, so a grandchild holding a pipe cannot outlive it).
 * Accepts an unstarted one.
 */
void rg_proc_kill(rg_proc *p);

/* Send `sig` to the child (or its group) without waiting. */
void rg_proc_signal(rg_proc *p, int sig);

#endif
