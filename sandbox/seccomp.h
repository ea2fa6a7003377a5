/*
 * The seccomp deny-list: the last layer, installed just before exec, after
 * namespaces, Landlock and no_new_privs. It closes kernel interfaces the
 * other layers do not cover: the keyrings (keyctl reads the session and
 * persistent keyrings whatever the filesystem says), other processes'
 * memory (ptrace, process_vm_*), kernel attack surface the command has no
 * use for (bpf, perf_event_open, io_uring, userfaultfd, modules, kexec),
 * rearranging the sandbox's own mounts or namespaces (mount API, unshare,
 * setns, clone with namespace flags; clone3 answers ENOSYS so libc falls
 * back to clone, whose flags a filter can read), typing into a terminal
 * (TIOCSTI, TIOCLINUX), socket families other than unix, IPv4, IPv6 and
 * route netlink, raw, packet and MPTCP sockets (only TCP and UDP reach the
 * gateway's relay, and the net namespace keeps UDP on the inside loopback),
 * and setting the setuid or setgid bit (chmod, creating a
 * file with it): a root caller's fork and -w paths are id-mapped, so a file
 * the command makes there is root's on disk, and a setuid one would be a
 * way to root for whoever runs it outside.
 *
 * The rule table is data (sandbox_seccomp_rules) so a test can check what
 * it denies without installing it.
 */
#ifndef RG_SANDBOX_SECCOMP_H
#define RG_SANDBOX_SECCOMP_H

#include <stddef.h>

#include "util/error.h"

typedef enum sandbox_seccomp_match {
    SANDBOX_SECCOMP_ALWAYS = 0, /* every call */
    SANDBOX_SECCOMP_ARG_BITS,   /* calls whose argument `arg` has any bit of `value` */
    SANDBOX_SECCOMP_ARG_EQ,     /* calls whose argument `arg` (32 bits) equals `value` */
    SANDBOX_SECCOMP_CREATE,     /* flags `arg` create a file (O_CREAT, O_TMPFILE) whose
                                   mode, argument `arg` + 1, has any bit of `value` */
} sandbox_seccomp_match;

typedef struct sandbox_seccomp_rule {
    const char *name; /* the system call, as libseccomp names it */
    int nr;           /* or its number, for calls newer than libseccomp (0: by name) */
    int err;          /* the errno the call fails with */
    sandbox_seccomp_match match;
    unsigned arg;
    unsigned long long value;
    const char *why;
} sandbox_seccomp_rule;

/* The deny-list, terminated by a NULL name. */
extern const sandbox_seccomp_rule sandbox_seccomp_rules[];

/* The socket families the command may open: AF_UNIX, AF_INET, AF_INET6. */
int sandbox_seccomp_family_allowed(int family);

/*
 * Install the filter on the calling thread: the table above, plus socket()
 * and socketpair() failing with EAFNOSUPPORT for other families, and
 * AF_NETLINK other than NETLINK_ROUTE (glibc's getaddrinfo asks the routing
 * table which address families are configured). Calls a kernel does not
 * know are skipped. Sets no_new_privs. Syscalls of another architecture
 * (i386, x32) kill the process, so the table cannot be bypassed through
 * them.
 */
int sandbox_seccomp_install(rg_error *err);

/*
 * The same filter in two halves, so the runner can compile it while the
 * sandbox is being set up: sandbox_seccomp_export writes the compiled BPF
 * program to `fd` (a pipe), sandbox_seccomp_load reads it from `fd` until
 * end of file (at most SANDBOX_SECCOMP_BPF_MAX bytes) and installs it. A
 * missing, short or oversized program is an error, so a failed export
 * fails the run.
 */
#define SANDBOX_SECCOMP_BPF_MAX 65536
int sandbox_seccomp_export(int fd, rg_error *err);
int sandbox_seccomp_load(int fd, rg_error *err);

/*
 * With a supervisor (notify.h): the same filter, but each call it denies is
 * sent to the supervisor (SCMP_ACT_NOTIFY) instead of failing at once. The
 * supervisor counts it and answers with the errno sandbox_seccomp_decide
 * gives, the one the plain filter returns; it never lets a call through.
 * Calls the filter allows cost what they cost before. The ENOSYS rules
 * (clone3, openat2) stay plain errnos: they make libc fall back, they deny
 * nothing, and glibc makes them at every thread and spawn.
 *
 * sandbox_seccomp_notify_probe says whether this process's children can
 * get a listener (0), or why not: a kernel older than 5.0, or refgate-run
 * itself under a filter that has a listener already. The runner then
 * exports the plain filter.
 *
 * sandbox_seccomp_load_listener loads the program read from `fd` as
 * sandbox_seccomp_load does and stores the listener (close-on-exec) in
 * *out; a kernel that refuses the listener fails it.
 */
int sandbox_seccomp_export_notify(int fd, rg_error *err);
int sandbox_seccomp_notify_probe(rg_error *why);
int sandbox_seccomp_load_listener(int *out, int fd, rg_error *err);

/*
 * The errno the deny-list answers system call `nr` (of this architecture)
 * with arguments `args`, with the rule's name (the call's, "socket" for
 * the socket families) in *out_name; 0 and NULL when the filter allows it.
 * No I/O: it reads the table and libseccomp's names of the calls.
 */
int sandbox_seccomp_decide(const char **out_name, int nr, const unsigned long long args[6]);

#endif
