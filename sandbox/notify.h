/*
 * The seccomp supervisor: what the deny-list refused, counted. The command
 * installs the filter with a listener (seccomp.h) and passes the listener
 * out to the runner over a socketpair (SCM_RIGHTS) before it execs, so the
 * command never holds it; a thread of the runner, outside the sandbox,
 * receives each denied call, answers it with the errno the plain filter
 * would have returned (never letting it through), and counts it by name
 * with the first caller's pid (as seen outside) and name. The end-of-run
 * summary says what was counted.
 *
 * If the supervisor is gone (the runner died), the kernel fails each
 * denied call with ENOSYS: still denied. If it cannot be set up before the
 * run, the runner exports the plain errno filter and says the accounting
 * is off; if the command cannot pass the listener out, the run fails.
 */
#ifndef RG_SANDBOX_NOTIFY_H
#define RG_SANDBOX_NOTIFY_H

#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

/* Distinct call names counted, at most (the deny-list has fewer). */
#define SANDBOX_NOTIFY_NAMES_MAX 64

typedef struct sandbox_notify_count {
    const char *name; /* static: the deny-list's name of the call */
    unsigned long n;
    pid_t pid;     /* the first caller, outside the pid namespace */
    char comm[16]; /* its name then ("" when it could not be read) */
} sandbox_notify_count;

/* The denials counted, in the order their calls were first denied. */
typedef struct sandbox_notify_tally {
    sandbox_notify_count c[SANDBOX_NOTIFY_NAMES_MAX];
    size_t n;
    unsigned long total;
} sandbox_notify_tally;

/* Count one denial of `name` (static) by `pid` called `comm`. */
void sandbox_notify_tally_add(sandbox_notify_tally *t, const char *name, pid_t pid,
                              const char *comm);

/* "keyctl x3, ptrace (by keyutil, pid 812), bpf (by strace, pid 813)":
 * each call's count, and the first caller of a run of calls with the same
 * first caller after the last of them; cut to fit; "" when nothing was
 * counted. */
void sandbox_notify_tally_format(char *out, size_t outsz, const sandbox_notify_tally *t);

/*
 * Why Landlock's denials are not in the summary, for it: the kernel
 * reports them only to its audit log (Linux 6.15 and later, with audit
 * on), which refgate-run does not read; or, when this kernel has no audit
 * or it is off at boot, they are recorded nowhere.
 */
void sandbox_notify_landlock_why(char *out, size_t outsz);

typedef struct sandbox_notify sandbox_notify;

/*
 * Runner side: start the supervisor's thread on `sock` (consumed), the
 * runner's end of the socketpair the listener arrives on. Until it
 * arrives the thread waits; sandbox_notify_tally_get stops it.
 */
int sandbox_notify_start(sandbox_notify **out, int sock, rg_error *err);

/* Stop the thread (once) and copy what it counted. NULL: nothing. */
void sandbox_notify_tally_get(sandbox_notify_tally *out, sandbox_notify *n);

void sandbox_notify_free(sandbox_notify *n);

/*
 * Command side, last before exec: load the filter program read from
 * `bpf_fd` with a listener, send the listener on `sock` and close both
 * the listener and `sock`. A runner that is not there fails it.
 */
int sandbox_notify_install(int bpf_fd, int sock, rg_error *err);

#endif
