/*
 * sandbox/seccomp.c: the deny-list names every call the design lists, and,
 * installed in a child, those calls fail with the planned errno (setuid and
 * setgid bits included) while ordinary work (files and modes, AF_INET and
 * AF_UNIX sockets, plain fork) goes on.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/notify.h"
#include "sandbox/seccomp.h"

static int seccomp_denies(const char *name)
{
    size_t i;

    for (i = 0; sandbox_seccomp_rules[i].name != NULL; i++)
        if (strcmp(sandbox_seccomp_rules[i].name, name) == 0)
            return 1;
    return 0;
}

Test(seccomp, the_table_denies_what_the_design_lists)
{
    static const char *const denied[] = {
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "bpf",
        "perf_event_open",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "keyctl",
        "add_key",
        "request_key",
        "userfaultfd",
        "open_by_handle_at",
        "init_module",
        "finit_module",
        "delete_module",
        "kexec_load",
        "kexec_file_load",
        "mount",
        "umount2",
        "pivot_root",
        "unshare",
        "setns",
        "fsopen",
        "fsmount",
        "move_mount",
        "open_tree",
        "clone",
        "clone3",
        "ioctl",
    };
    size_t i;

    for (i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
        cr_assert(seccomp_denies(denied[i]), "%s is not denied", denied[i]);
    cr_assert(sandbox_seccomp_family_allowed(AF_UNIX));
    cr_assert(sandbox_seccomp_family_allowed(AF_INET));
    cr_assert(sandbox_seccomp_family_allowed(AF_INET6));
    cr_assert_not(sandbox_seccomp_family_allowed(AF_PACKET));
    cr_assert_not(sandbox_seccomp_family_allowed(AF_NETLINK));
    cr_assert_not(sandbox_seccomp_family_allowed(AF_VSOCK));
}

/* errno of a call, or 0 when it succeeded. */
static int seccomp_errno(long rc)
{
    return rc < 0 ? errno : 0;
}

/* Bit i of the child's exit code: check i failed. */
static int seccomp_child_checks(void)
{
    int fails = 0, fd, status;
    pid_t pid;

    if (seccomp_errno(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0)) != EPERM)
        fails |= 1 << 0;
    if (seccomp_errno(syscall(SYS_clone3, NULL, 0)) != ENOSYS)
        fails |= 1 << 1;
    if (seccomp_errno(unshare(CLONE_NEWUSER)) != EPERM)
        fails |= 1 << 2;
    if (seccomp_errno(socket(AF_PACKET, SOCK_RAW, 0)) != EAFNOSUPPORT)
        fails |= 1 << 3;
    if (seccomp_errno(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT)) != EAFNOSUPPORT)
        fails |= 1 << 4;
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        fails |= 1 << 5;
    else
        close(fd);
    fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    if (fd < 0)
        fails |= 1 << 5;
    else
        close(fd);
    if (seccomp_errno(ioctl(0, TIOCSTI, "x")) != EPERM)
        fails |= 1 << 6;
    if (seccomp_errno(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0)) != EPERM)
        fails |= 1 << 7;
    /* A plain fork (clone without namespace flags) still works. */
    pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        fails |= 1 << 8;
    if (seccomp_errno(syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, NULL)) != EPERM)
        fails |= 1 << 9;
    /* Setuid and setgid bits, by chmod or at creation; plain modes pass. */
    fd = open("/tmp", O_TMPFILE | O_WRONLY, 04755);
    if (seccomp_errno(fd) != EPERM)
        fails |= 1 << 10;
    fd = open("/tmp", O_TMPFILE | O_WRONLY, 0755);
    if (fd < 0 || seccomp_errno(fchmod(fd, 02755)) != EPERM || fchmod(fd, 0700) < 0)
        fails |= 1 << 11;
    if (fd >= 0)
        close(fd);
    if (seccomp_errno(syscall(SYS_openat2, AT_FDCWD, "/tmp", NULL, 0)) != ENOSYS)
        fails |= 1 << 12;
    return fails;
}

Test(seccomp, installed_the_listed_calls_fail_and_ordinary_work_goes_on)
{
    rg_error err = RG_ERROR_INIT;
    int status;
    pid_t pid;

    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (sandbox_seccomp_install(&err) < 0)
            _exit(255);
        _exit(seccomp_child_checks());
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child was killed by signal %d", WTERMSIG(status));
    cr_assert_neq(WEXITSTATUS(status), 255, "the filter could not be installed");
    cr_assert_eq(WEXITSTATUS(status), 0, "failed checks (bit mask): %#x", WEXITSTATUS(status));
}

/* Bit i of the child's exit code: socket kind i was not refused as it should. */
static int seccomp_child_socket_checks(void)
{
    int fails = 0, fd;

    /* Raw and packet sockets forge traffic; MPTCP opens paths of its own
     * (262: IPPROTO_MPTCP). Flags in the type do not hide the kind. */
    if (seccomp_errno(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)) != EPERM)
        fails |= 1 << 0;
    if (seccomp_errno(socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6)) != EPERM)
        fails |= 1 << 1;
    if (seccomp_errno(socket(AF_INET, SOCK_PACKET, 0)) != EPERM)
        fails |= 1 << 2;
    if (seccomp_errno(socket(AF_INET, SOCK_STREAM, 262)) != EPROTONOSUPPORT)
        fails |= 1 << 3;
    if (seccomp_errno(socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 262)) != EPROTONOSUPPORT)
        fails |= 1 << 4;
    /* TCP and UDP go on. */
    fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        fails |= 1 << 5;
    else
        close(fd);
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0)
        fails |= 1 << 6;
    else
        close(fd);
    return fails;
}

Test(seccomp, installed_raw_packet_and_mptcp_sockets_fail_tcp_and_udp_work)
{
    rg_error err = RG_ERROR_INIT;
    int status;
    pid_t pid;

    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (sandbox_seccomp_install(&err) < 0)
            _exit(255);
        _exit(seccomp_child_socket_checks());
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child was killed by signal %d", WTERMSIG(status));
    cr_assert_neq(WEXITSTATUS(status), 255, "the filter could not be installed");
    cr_assert_eq(WEXITSTATUS(status), 0, "failed checks (bit mask): %#x", WEXITSTATUS(status));
}

Test(seccomp, exported_by_the_runner_and_loaded_by_the_command_it_is_the_same_filter)
{
    rg_error err = RG_ERROR_INIT;
    int pfd[2], status;
    pid_t pid;

    cr_assert_eq(pipe(pfd), 0);
    cr_assert_eq(sandbox_seccomp_export(pfd[1], &err), 0, "%s", err.msg);
    close(pfd[1]);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (sandbox_seccomp_load(pfd[0], &err) < 0)
            _exit(255);
        _exit(seccomp_child_checks());
    }
    close(pfd[0]);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child was killed by signal %d", WTERMSIG(status));
    cr_assert_neq(WEXITSTATUS(status), 255, "the exported filter could not be loaded");
    cr_assert_eq(WEXITSTATUS(status), 0, "failed checks (bit mask): %#x", WEXITSTATUS(status));
}

/* The count of `name` in `t`, 0 when absent. */
static unsigned long seccomp_counted(const sandbox_notify_tally *t, const char *name)
{
    size_t i;

    for (i = 0; i < t->n; i++)
        if (strcmp(t->c[i].name, name) == 0)
            return t->c[i].n;
    return 0;
}

/* Under the notifying filter and its supervisor, checks `which` (0: the
 * calls, 1: the sockets) give the same errnos as the plain filter, and
 * the supervisor counts them by name. */
static void seccomp_supervised(int which, sandbox_notify_tally *out)
{
    rg_error err = RG_ERROR_INIT;
    sandbox_notify *n = NULL;
    int pfd[2], sv[2], status;
    pid_t pid;

    cr_assert_eq(sandbox_seccomp_notify_probe(&err), 0, "%s", err.msg);
    cr_assert_eq(pipe(pfd), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(sandbox_seccomp_export_notify(pfd[1], &err), 0, "%s", err.msg);
    close(pfd[1]);
    cr_assert_eq(sandbox_notify_start(&n, sv[0], &err), 0, "%s", err.msg);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (sandbox_notify_install(pfd[0], sv[1], &err) < 0)
            _exit(255);
        _exit(which == 0 ? seccomp_child_checks() : seccomp_child_socket_checks());
    }
    close(pfd[0]);
    close(sv[1]);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child was killed by signal %d", WTERMSIG(status));
    cr_assert_neq(WEXITSTATUS(status), 255, "the notifying filter could not be installed");
    cr_assert_eq(WEXITSTATUS(status), 0, "failed checks (bit mask): %#x", WEXITSTATUS(status));
    sandbox_notify_tally_get(out, n);
    sandbox_notify_free(n);
}

Test(seccomp, supervised_the_listed_calls_fail_as_before_and_are_counted)
{
    sandbox_notify_tally t;

    seccomp_supervised(0, &t);
    cr_assert_eq(seccomp_counted(&t, "keyctl"), 1);
    cr_assert_eq(seccomp_counted(&t, "clone3"), 0, "a libc fallback, not sent to the supervisor");
    cr_assert_eq(seccomp_counted(&t, "unshare"), 1);
    cr_assert_eq(seccomp_counted(&t, "ptrace"), 1);
    cr_assert_eq(seccomp_counted(&t, "ioctl"), 1, "TIOCSTI");
    cr_assert_eq(seccomp_counted(&t, "clone"), 1, "clone with CLONE_NEWNS, not the plain fork");
    cr_assert_eq(seccomp_counted(&t, "socket"), 2, "AF_PACKET and netlink audit");
    cr_assert_eq(seccomp_counted(&t, "openat2"), 0, "a libc fallback, not sent to the supervisor");
    cr_assert_geq(seccomp_counted(&t, "fchmod"), 1);
    cr_assert_eq(t.c[0].pid > 0, 1);
}

Test(seccomp, supervised_raw_packet_and_mptcp_sockets_fail_as_before_and_are_counted)
{
    sandbox_notify_tally t;

    seccomp_supervised(1, &t);
    cr_assert_eq(seccomp_counted(&t, "socket"), 5);
    cr_assert_eq(t.total, 5, "TCP and UDP are not denied");
}

/* Under a filter that has a supervisor already (a container's, say), a
 * second listener is refused: the probe says so, and the runner exports
 * the plain filter instead of a run that would fail. */
Test(seccomp, the_probe_refuses_under_a_filter_with_a_listener)
{
    rg_error err = RG_ERROR_INIT;
    int pfd[2], status, fd;
    pid_t pid;

    cr_assert_eq(pipe(pfd), 0);
    cr_assert_eq(sandbox_seccomp_export_notify(pfd[1], &err), 0, "%s", err.msg);
    close(pfd[1]);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (sandbox_seccomp_load_listener(&fd, pfd[0], &err) < 0)
            _exit(2);
        if (sandbox_seccomp_notify_probe(&err) == 0)
            _exit(3);
        _exit(strstr(err.msg, "already has a supervisor") != NULL ? 0 : 4);
    }
    close(pfd[0]);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child was killed by signal %d", WTERMSIG(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "2: no listener, 3: probe passed, 4: wrong reason (%d)",
                 WEXITSTATUS(status));
}

/* The supervisor's answer for a call is the plain filter's. */
Test(seccomp, decide_gives_the_plain_filters_errno)
{
    const unsigned long long none[6] = {0};
    unsigned long long a[6] = {0};
    const char *name;

    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_keyctl, none), EPERM);
    cr_assert_str_eq(name, "keyctl");
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_clone3, none), ENOSYS);
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_getpid, none), 0);
    cr_assert_null(name);
    a[1] = TIOCSTI;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_ioctl, a), EPERM);
    a[1] = TIOCSTI | 0x100000000ULL; /* garbage in the high half: still TIOCSTI */
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_ioctl, a), EPERM);
    a[1] = TCGETS;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_ioctl, a), 0);
    a[0] = CLONE_NEWUSER | SIGCHLD;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_clone, a), EPERM);
    a[0] = SIGCHLD;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_clone, a), 0);
    memset(a, 0, sizeof(a));
    a[1] = O_CREAT | O_WRONLY;
    a[2] = 04755;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_openat, a), 0,
                 "openat's flags are its third argument");
    a[2] = O_CREAT | O_WRONLY;
    a[3] = 04755;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_openat, a), EPERM);
    a[3] = 0755;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_openat, a), 0);
    memset(a, 0, sizeof(a));
    a[0] = AF_PACKET;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_socket, a), EAFNOSUPPORT);
    cr_assert_str_eq(name, "socket");
    a[0] = AF_NETLINK;
    a[2] = NETLINK_ROUTE;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_socket, a), 0);
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_socketpair, a), EAFNOSUPPORT);
    a[0] = AF_INET;
    a[1] = SOCK_RAW | SOCK_CLOEXEC;
    a[2] = 0;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_socket, a), EPERM);
    a[1] = SOCK_STREAM;
    a[2] = 262;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_socket, a), EPROTONOSUPPORT);
    a[2] = 0;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_socket, a), 0);
    a[0] = AF_UNIX;
    cr_assert_eq(sandbox_seccomp_decide(&name, SYS_socketpair, a), 0);
}

Test(seccomp, a_missing_or_short_program_is_refused)
{
    rg_error err = RG_ERROR_INIT;
    int pfd[2];

    cr_assert_eq(pipe(pfd), 0);
    close(pfd[1]);
    cr_assert_lt(sandbox_seccomp_load(pfd[0], &err), 0, "an empty pipe is refused");
    cr_assert(strstr(err.msg, "no usable filter") != NULL, "%s", err.msg);
    close(pfd[0]);
    cr_assert_eq(pipe(pfd), 0);
    cr_assert_eq(write(pfd[1], "abc", 3), 3);
    close(pfd[1]);
    cr_assert_lt(sandbox_seccomp_load(pfd[0], &err), 0, "a partial instruction is refused");
    close(pfd[0]);
}
