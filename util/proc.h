/*
 * Child processes: the one place that starts a program, moves bytes through
 * its pipes and waits for it. The gateway runs the real git this way
 * (receive-pack, upload-pack, index-pack, clone/fetch, merge-base), and the
 * demo runs the real git client. Every wait has an absolute deadline on the
 * monotonic clock; a child that overstays it is ended with its whole
 * process group (SIGTERM, then SIGKILL), so a git that hangs, or a hook it
 * started, cannot hold a request or a pipe forever. stderr is never kept
 * whole: only its last RG_PROC_TAIL_MAX bytes, for the error message.
 *
 * Every descriptor the parent holds is close-on-exec, so a child gets only
 * its three pipes (or /dev/null). Writing to a child that stopped reading
 * fails with -EPIPE, which needs SIGPIPE ignored, as both programs do.
 */
#ifndef RG_UTIL_PROC_H
#define RG_UTIL_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/error.h"

/* How much of a child's stderr is kept: its last lines are what a message needs. */
#define RG_PROC_TAIL_MAX 4096

/* Room for rg_proc_why's line: one reason, short enough for a report's ng line. */
#define RG_PROC_WHY_MAX 256

/* How long a child has to exit after SIGTERM before its group gets SIGKILL. */
#define RG_PROC_TERM_GRACE_MS 2000

typedef struct rg_proc rg_proc;

enum {
    RG_PROC_STDIN = 1 << 0,          /* give the child a stdin pipe (else /dev/null) */
    RG_PROC_STDOUT = 1 << 1,         /* capture stdout (else /dev/null) */
    RG_PROC_STDERR = 1 << 2,         /* keep the tail of stderr (else inherited) */
    RG_PROC_INHERIT_STDOUT = 1 << 3, /* without RG_PROC_STDOUT: inherit, not /dev/null */
    RG_PROC_GROUP = 1 << 4,          /* own process group: a kill reaches its children too */
};

/*
 * Receives stdout while the caller writes stdin or waits (never during
 * rg_proc_read, which hands stdout to its caller). A negative return stops
 * the deliveries; the output is still drained, so the child never blocks on
 * a full pipe, and rg_proc_finish returns the error.
 */
typedef int (*rg_proc_sink)(void *ctx, const char *data, size_t len, rg_error *err);

typedef struct rg_proc_spec {
    const char *const *argv; /* argv[0] is searched in PATH */
    const char *const *envp; /* exactly the child's environment */
    const char *cwd;         /* NULL: the current directory */
    unsigned flags;          /* RG_PROC_* */
    int stdin_fd;            /* >= 0: the child's stdin is this descriptor (borrowed),
                              * e.g. a spooled body; instead of RG_PROC_STDIN */
    rg_proc_sink on_stdout;  /* NULL: stdout outside rg_proc_read is dropped */
    void *ctx;               /* for on_stdout */
} rg_proc_spec;

#define RG_PROC_SPEC_INIT                                                                          \
    {                                                                                              \
        NULL, NULL, NULL, 0, -1, NULL, NULL                                                        \
    }

/* An absolute deadline `seconds` from now on the monotonic clock, in ns. */
int64_t rg_proc_deadline(int64_t seconds);

/* Start the program; *out is freed with rg_proc_free. */
int rg_proc_start(rg_proc **out, const rg_proc_spec *spec, rg_error *err);

/*
 * Write all `len` bytes to the child's stdin, draining its stdout (to the
 * sink) and stderr meanwhile so neither side can block the other. -EPIPE
 * when the child stopped reading (its status then tells why); -ETIMEDOUT
 * when the deadline passed, the child then ended.
 */
int rg_proc_write(rg_proc *p, const void *data, size_t len, int64_t deadline, rg_error *err);

/* Signal end of input. */
void rg_proc_close_stdin(rg_proc *p);

/*
 * Read what the child writes on stdout next into buf: the bytes read, 0 at
 * its end, or a negative code (-ETIMEDOUT: the deadline passed and the
 * child was ended). Keeps the stderr tail meanwhile.
 */
ssize_t rg_proc_read(rg_proc *p, char *buf, size_t max, int64_t deadline, rg_error *err);

/*
 * Close stdin, drain stdout (to the sink) and stderr to their end and wait
 * for the child, all before `deadline`. *status (may be NULL) is the exit
 * code, or 128 + the signal that ended it. Returns 0 once the child is
 * reaped, whatever its status; -ETIMEDOUT when it overstayed (it and its
 * group are then ended; the message names the program and its stderr tail),
 * or the sink's error.
 */
int rg_proc_finish(rg_proc *p, int *status, int64_t deadline, rg_error *err);

/*
 * After rg_proc_finish: 0 when the child exited with 0, else `code` with a
 * message naming the program, how it ended (exit status, signal, deadline)
 * and what it said on stderr (see rg_proc_why).
 */
int rg_proc_check(const rg_proc *p, int code, rg_error *err);

/*
 * What the child said, for a message: the first "fatal:" line of its stderr
 * tail (later ones tend to be generic), else the last non-empty line, with
 * anything unprintable replaced by '?'. Empty when it said nothing.
 */
void rg_proc_why(const rg_proc *p, char *out, size_t outsz);

/* "git index-pack", "sh": the name messages use. */
const char *rg_proc_name(const rg_proc *p);

/*
 * Run a program to completion before `deadline`, its stdout appended to
 * `out` (NULL: dropped; past out->max the run fails). With `status` NULL
 * a nonzero exit is an error (as rg_proc_check, code RG_E_CHILD); else
 * *status is the exit code and only a failure to run is an error.
 */
int rg_proc_run(int *status, rg_buf *out, const rg_proc_spec *spec, int64_t deadline,
                rg_error *err);

/*
 * End the child if it is still running (its whole group with RG_PROC_GROUP:
 * SIGTERM, then SIGKILL after RG_PROC_TERM_GRACE_MS), reap it, close the
 * pipes and wipe the stderr tail (it may echo a secret). Accepts NULL.
 */
void rg_proc_free(rg_proc *p);

#endif
