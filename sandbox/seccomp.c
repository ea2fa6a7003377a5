/*
 * The seccomp deny-list; see seccomp.h. The table is what a reviewer reads:
 * each line says what the call would give a confined command.
 */
#include "sandbox/seccomp.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

/* Every namespace flag clone() accepts (CLONE_NEWTIME is clone3/unshare only). */
#define SECCOMP_CLONE_NS                                                                           \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |     \
     CLONE_NEWCGROUP)

/* fchmodat2 (Linux 6.6) is newer than Debian 12's libseccomp: by number,
 * which new system calls share on every architecture. */
#define SECCOMP_NR_FCHMODAT2 452

/* The bits a file must not get: the kernel keeps them for root's files. */
#define SECCOMP_SETID (S_ISUID | S_ISGID)

/* socket()'s type argument: the kind, below the SOCK_CLOEXEC and
 * SOCK_NONBLOCK flags. */
#define SECCOMP_SOCK_TYPE_MASK 0xf

/* Older libc headers lack it (Linux 5.6). */
#define SECCOMP_IPPROTO_MPTCP 262

#ifndef __O_TMPFILE
#define __O_TMPFILE 020000000
#endif

const sandbox_seccomp_rule sandbox_seccomp_rules[] = {
    /* Other processes' memory and registers; Landlock scoping covers signals only. */
    {"ptrace", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "reads and writes another process"},
    {"process_vm_readv", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "reads another process"},
    {"process_vm_writev", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "writes another process"},
    /* Kernel keyrings: not files, so neither namespaces nor Landlock hide them. */
    {"keyctl", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "reads the session and user keyrings"},
    {"add_key", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "writes a keyring"},
    {"request_key", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "reads a keyring"},
    /* Kernel attack surface no build or agent needs. */
    {"bpf", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "loads programs into the kernel"},
    {"perf_event_open", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "observes other processes"},
    {"userfaultfd", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "widens kernel race windows"},
    {"io_uring_setup", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "bypasses this filter"},
    {"io_uring_enter", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "bypasses this filter"},
    {"io_uring_register", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "bypasses this filter"},
    {"open_by_handle_at", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "opens a file past its path"},
    {"init_module", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "loads a kernel module"},
    {"finit_module", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "loads a kernel module"},
    {"delete_module", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "unloads a kernel module"},
    {"kexec_load", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "replaces the kernel"},
    {"kexec_file_load", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "replaces the kernel"},
    /* The sandbox's own layout: a command that could remount could uncover
     * what the mount namespace hides. */
    {"mount", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "uncovers hidden paths"},
    {"umount2", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "uncovers hidden paths"},
    {"pivot_root", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "changes the root"},
    {"fsopen", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "mounts"},
    {"fsconfig", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "mounts"},
    {"fsmount", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "mounts"},
    {"fspick", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "reconfigures a mount"},
    {"move_mount", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "mounts"},
    {"open_tree", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "copies a mount"},
    {"mount_setattr", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "makes a mount writable"},
    {"unshare", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "a namespace of its own"},
    {"setns", 0, EPERM, SANDBOX_SECCOMP_ALWAYS, 0, 0, "joins another namespace"},
    {"clone", 0, EPERM, SANDBOX_SECCOMP_ARG_BITS, 0, SECCOMP_CLONE_NS, "a namespace of its own"},
    /* clone3 passes its flags in memory a filter cannot read: ENOSYS makes
     * glibc fall back to clone(), which the line above checks. */
    {"clone3", 0, ENOSYS, SANDBOX_SECCOMP_ALWAYS, 0, 0, "flags out of the filter's sight"},
    /* Typing into, or reading the console through, a terminal. */
    {"ioctl", 0, EPERM, SANDBOX_SECCOMP_ARG_EQ, 1, TIOCSTI, "types into a terminal"},
    {"ioctl", 0, EPERM, SANDBOX_SECCOMP_ARG_EQ, 1, TIOCLINUX, "reads and types on the console"},
    /* setuid and setgid files: on an id-mapped fork they are root's outside. */
    {"chmod", 0, EPERM, SANDBOX_SECCOMP_ARG_BITS, 1, SECCOMP_SETID, "makes a setuid file"},
    {"fchmod", 0, EPERM, SANDBOX_SECCOMP_ARG_BITS, 1, SECCOMP_SETID, "makes a setuid file"},
    {"fchmodat", 0, EPERM, SANDBOX_SECCOMP_ARG_BITS, 2, SECCOMP_SETID, "makes a setuid file"},
    {"fchmodat2", SECCOMP_NR_FCHMODAT2, EPERM, SANDBOX_SECCOMP_ARG_BITS, 2, SECCOMP_SETID,
     "makes a setuid file"},
    {"creat", 0, EPERM, SANDBOX_SECCOMP_ARG_BITS, 1, SECCOMP_SETID, "makes a setuid file"},
    {"mknod", 0, EPERM, SANDBOX_SECCOMP_ARG_BITS, 1, SECCOMP_SETID, "makes a setuid file"},
    {"mknodat", 0, EPERM, SANDBOX_SECCOMP_ARG_BITS, 2, SECCOMP_SETID, "makes a setuid file"},
    {"open", 0, EPERM, SANDBOX_SECCOMP_CREATE, 1, SECCOMP_SETID, "makes a setuid file"},
    {"openat", 0, EPERM, SANDBOX_SECCOMP_CREATE, 2, SECCOMP_SETID, "makes a setuid file"},
    /* openat2 passes its mode in memory a filter cannot read; libc falls back. */
    {"openat2", 0, ENOSYS, SANDBOX_SECCOMP_ALWAYS, 0, 0, "a mode out of the filter's sight"},
    {NULL, 0, 0, 0, 0, 0, NULL},
};

int sandbox_seccomp_family_allowed(int family)
{
    return family == AF_UNIX || family == AF_INET || family == AF_INET6;
}

/* The action of a rule that denies with `e`: that errno, or, with a
 * supervisor, a notification it answers with that errno. ENOSYS stays a
 * plain errno: it is no denial but a way to make libc fall back to a call
 * the filter can read (glibc tries clone3 at every thread and posix_spawn),
 * so counting it would be noise, and a round trip per process started. */
static uint32_t seccomp_act(int notify, int e)
{
    return notify && e != ENOSYS ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO((uint32_t)e);
}

static int seccomp_add(scmp_filter_ctx ctx, int notify, const sandbox_seccomp_rule *r)
{
    int nr = r->nr ? r->nr : seccomp_syscall_resolve_name(r->name);
    struct scmp_arg_cmp cmp, both[2];

    /* A call libseccomp does not know on this architecture does not exist
     * here (open and creat on arm64); calls newer than it carry a number. */
    if (nr == __NR_SCMP_ERROR)
        return 0;
    switch (r->match) {
    case SANDBOX_SECCOMP_ALWAYS:
        return seccomp_rule_add(ctx, seccomp_act(notify, r->err), nr, 0);
    case SANDBOX_SECCOMP_ARG_EQ:
        /* ioctl's request is an int: compare the low 32 bits only, or a
         * request with garbage in the high half would slip through. */
        cmp = (struct scmp_arg_cmp)SCMP_CMP(r->arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, r->value);
        return seccomp_rule_add_array(ctx, seccomp_act(notify, r->err), nr, 1, &cmp);
    case SANDBOX_SECCOMP_CREATE: {
        static const unsigned long long creating[] = {O_CREAT, __O_TMPFILE};
        unsigned long long bit;
        size_t i;
        int rc = 0;

        /* "creates, and any of these mode bits": one rule per pair. */
        for (i = 0; rc == 0 && i < sizeof(creating) / sizeof(creating[0]); i++) {
            for (bit = 1; rc == 0 && bit != 0; bit <<= 1) {
                if (!(r->value & bit))
                    continue;
                both[0] = (struct scmp_arg_cmp)SCMP_CMP(r->arg, SCMP_CMP_MASKED_EQ, creating[i],
                                                        creating[i]);
                both[1] = (struct scmp_arg_cmp)SCMP_CMP(r->arg + 1, SCMP_CMP_MASKED_EQ, bit, bit);
                rc = seccomp_rule_add_array(ctx, seccomp_act(notify, r->err), nr, 2, both);
            }
        }
        return rc;
    }
    case SANDBOX_SECCOMP_ARG_BITS: {
        unsigned long long bit;
        int rc = 0;

        /* One rule per bit: "any of these bits" is "this bit" for some bit. */
        for (bit = 1; rc == 0 && bit != 0; bit <<= 1) {
            if (!(r->value & bit))
                continue;
            cmp = (struct scmp_arg_cmp)SCMP_CMP(r->arg, SCMP_CMP_MASKED_EQ, bit, bit);
            rc = seccomp_rule_add_array(ctx, seccomp_act(notify, r->err), nr, 1, &cmp);
        }
        return rc;
    }
    }
    return -EINVAL;
}

/* socket() and socketpair(): only the allowed families, and route netlink. */
static int seccomp_add_families(scmp_filter_ctx ctx, int notify)
{
    const int calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};
    size_t i;
    int family, rc = 0;

    /* One rule per family up to netlink's, then one for all past it: fewer
     * rules make a smaller filter, compiled and run faster. */
    for (i = 0; rc == 0 && i < sizeof(calls) / sizeof(calls[0]); i++) {
        for (family = 0; rc == 0 && family < AF_NETLINK; family++) {
            if (sandbox_seccomp_family_allowed(family))
                continue;
            rc = seccomp_rule_add(ctx, seccomp_act(notify, EAFNOSUPPORT), calls[i], 1,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)family));
        }
        if (rc == 0)
            rc = seccomp_rule_add(ctx, seccomp_act(notify, EAFNOSUPPORT), calls[i], 1,
                                  SCMP_A0(SCMP_CMP_GT, AF_NETLINK));
    }
    /* Netlink: the routing table only (glibc's getaddrinfo reads it). */
    if (rc == 0)
        rc =
            seccomp_rule_add(ctx, seccomp_act(notify, EAFNOSUPPORT), SCMP_SYS(socket), 2,
                             SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, seccomp_act(notify, EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_NETLINK));
    /* IPv4 and IPv6: TCP and UDP only. A raw or packet socket forges any
     * traffic (and is kernel surface), MPTCP opens subflows on other paths
     * the relay never sees; the type's low bits, past SOCK_CLOEXEC and
     * SOCK_NONBLOCK, name the kind. */
    for (i = 0; rc == 0 && i < 2; i++) {
        const int fam = i == 0 ? AF_INET : AF_INET6;

        rc = seccomp_rule_add(ctx, seccomp_act(notify, EPERM), SCMP_SYS(socket), 2,
                              SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam),
                              SCMP_A1(SCMP_CMP_MASKED_EQ, SECCOMP_SOCK_TYPE_MASK, SOCK_RAW));
        if (rc == 0)
            rc = seccomp_rule_add(ctx, seccomp_act(notify, EPERM), SCMP_SYS(socket), 2,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam),
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, SECCOMP_SOCK_TYPE_MASK, SOCK_PACKET));
        if (rc == 0)
            rc = seccomp_rule_add(ctx, seccomp_act(notify, EPROTONOSUPPORT), SCMP_SYS(socket), 2,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam),
                                  SCMP_A2(SCMP_CMP_EQ, SECCOMP_IPPROTO_MPTCP));
    }
    return rc;
}

/* The filter, built; NULL with `err` set on failure. */
static scmp_filter_ctx seccomp_build(int notify, rg_error *err)
{
    scmp_filter_ctx ctx;
    size_t i;
    int rc = 0;

    ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) {
        rg_error_set(err, -ENOMEM, "seccomp: cannot create a filter");
        return NULL;
    }
    /* Another architecture's calls (i386 int 0x80, x32) would skip the table. */
    rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    for (i = 0; rc == 0 && sandbox_seccomp_rules[i].name != NULL; i++) {
        rc = seccomp_add(ctx, notify, &sandbox_seccomp_rules[i]);
        if (rc < 0)
            rg_error_set(err, rc, "seccomp: cannot add the rule for %s: %s",
                         sandbox_seccomp_rules[i].name, strerror(-rc));
    }
    if (rc == 0) {
        rc = seccomp_add_families(ctx, notify);
        if (rc < 0)
            rg_error_set(err, rc, "seccomp: cannot add the socket rules: %s", strerror(-rc));
    }
    if (rc < 0) {
        seccomp_release(ctx);
        return NULL;
    }
    return ctx;
}

int sandbox_seccomp_install(rg_error *err)
{
    scmp_filter_ctx ctx = seccomp_build(0, err);
    int rc;

    if (ctx == NULL)
        return err && err->code ? err->code : -EINVAL;
    rc = seccomp_load(ctx);
    if (rc < 0)
        rg_error_set(err, rc, "seccomp: cannot load the filter: %s", strerror(-rc));
    seccomp_release(ctx);
    return rc;
}

static int seccomp_export(int fd, int notify, rg_error *err)
{
    scmp_filter_ctx ctx = seccomp_build(notify, err);
    int rc;

    if (ctx == NULL)
        return err && err->code ? err->code : -EINVAL;
    rc = seccomp_export_bpf(ctx, fd);
    if (rc < 0)
        rg_error_set(err, rc, "seccomp: cannot export the filter: %s", strerror(-rc));
    seccomp_release(ctx);
    return rc;
}

int sandbox_seccomp_export(int fd, rg_error *err)
{
    return seccomp_export(fd, 0, err);
}

int sandbox_seccomp_export_notify(int fd, rg_error *err)
{
    return seccomp_export(fd, 1, err);
}

/* Load the program read from `fd`; with `listener`, ask the kernel for the
 * notification descriptor and store it there. */
static int seccomp_load_fd(int *listener, int fd, rg_error *err)
{
    struct sock_filter *buf;
    struct sock_fprog prog;
    size_t got = 0;
    ssize_t n;
    int rc = 0, lfd;

    buf = malloc(SANDBOX_SECCOMP_BPF_MAX);
    if (buf == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    /* Bounded: SANDBOX_SECCOMP_BPF_MAX bytes. */
    while (got < SANDBOX_SECCOMP_BPF_MAX) {
        n = read(fd, (char *)buf + got, SANDBOX_SECCOMP_BPF_MAX - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = rg_error_set(err, -errno, "seccomp: reading the filter: %s", strerror(errno));
            goto done;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == 0 || got % sizeof(*buf) != 0 || got == SANDBOX_SECCOMP_BPF_MAX) {
        rc = rg_error_set(err, -EINVAL, "seccomp: the runner sent no usable filter (%zu bytes)",
                          got);
        goto done;
    }
    prog.len = (unsigned short)(got / sizeof(*buf));
    prog.filter = buf;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        rc = rg_error_set(err, -errno, "seccomp: no_new_privs: %s", strerror(errno));
        goto done;
    }
    lfd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                       listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
    if (lfd < 0)
        rc = rg_error_set(err, -errno, "seccomp: cannot load the filter%s: %s",
                          listener ? " with a listener" : "", strerror(errno));
    else if (listener)
        *listener = lfd;
done:
    free(buf);
    return rc;
}

int sandbox_seccomp_load(int fd, rg_error *err)
{
    return seccomp_load_fd(NULL, fd, err);
}

int sandbox_seccomp_load_listener(int *out, int fd, rg_error *err)
{
    *out = -1;
    return seccomp_load_fd(out, fd, err);
}

/* ------------------------------------------------------------------------ */
/* The supervisor's side                                                     */
/* ------------------------------------------------------------------------ */

int sandbox_seccomp_notify_probe(rg_error *why)
{
    struct seccomp_notif_sizes sizes;
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {1, &allow};
    int status, fd;
    pid_t pid;

    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
        return rg_error_set(why, -errno, "this kernel has no seccomp user notification (%s)",
                            strerror(errno));
    /* Under no filter at all, nothing stands in the way of a listener. */
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0)
        return 0;
    /* Under someone else's filters (a container's), a listener is refused
     * when one of them has one already (EBUSY): try in a throwaway child. */
    pid = fork();
    if (pid < 0)
        return rg_error_set(why, -errno, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
            _exit(1);
        fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                          &prog);
        _exit(fd < 0 ? 1 : 0);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return rg_error_set(why, -errno, "waitpid: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return rg_error_set(why, -EBUSY,
                            "refgate-run itself runs under a seccomp filter that already has a "
                            "supervisor");
    return 0;
}

/* Whether a rule's argument test matches `args`, as the filter does. */
static int seccomp_rule_matches(const sandbox_seccomp_rule *r, const unsigned long long *args)
{
    switch (r->match) {
    case SANDBOX_SECCOMP_ALWAYS:
        return 1;
    case SANDBOX_SECCOMP_ARG_EQ:
        return (args[r->arg] & 0xffffffffULL) == r->value;
    case SANDBOX_SECCOMP_ARG_BITS:
        return (args[r->arg] & r->value) != 0;
    case SANDBOX_SECCOMP_CREATE:
        return (args[r->arg] & (O_CREAT | __O_TMPFILE)) != 0 && (args[r->arg + 1] & r->value) != 0;
    }
    return 0;
}

/* socket() and socketpair(), as seccomp_add_families writes them. */
static int seccomp_socket_errno(int is_pair, const unsigned long long *args)
{
    unsigned long long family = args[0];

    if (family < AF_NETLINK && !sandbox_seccomp_family_allowed((int)family))
        return EAFNOSUPPORT;
    if (family > AF_NETLINK)
        return EAFNOSUPPORT;
    if (family == AF_NETLINK)
        return is_pair || args[2] != NETLINK_ROUTE ? EAFNOSUPPORT : 0;
    if (is_pair || (family != AF_INET && family != AF_INET6))
        return 0;
    if ((args[1] & SECCOMP_SOCK_TYPE_MASK) == SOCK_RAW ||
        (args[1] & SECCOMP_SOCK_TYPE_MASK) == SOCK_PACKET)
        return EPERM;
    return args[2] == SECCOMP_IPPROTO_MPTCP ? EPROTONOSUPPORT : 0;
}

int sandbox_seccomp_decide(const char **out_name, int nr, const unsigned long long args[6])
{
    const sandbox_seccomp_rule *r;
    char *name;
    int e = 0;

    *out_name = NULL;
    if (nr == SCMP_SYS(socket) || nr == SCMP_SYS(socketpair)) {
        e = seccomp_socket_errno(nr == SCMP_SYS(socketpair), args);
        if (e != 0)
            *out_name = nr == SCMP_SYS(socket) ? "socket" : "socketpair";
        return e;
    }
    name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
    for (r = sandbox_seccomp_rules; e == 0 && r->name != NULL; r++) {
        if (r->nr ? r->nr != nr : name == NULL || strcmp(r->name, name) != 0)
            continue;
        if (seccomp_rule_matches(r, args)) {
            *out_name = r->name;
            e = r->err;
        }
    }
    free(name);
    return e;
}
