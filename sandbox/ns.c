/*
 * Namespace lists, maps and probes; see ns.h.
 */
#include "sandbox/ns.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct {
    const char *name;
    unsigned bit;
    unsigned long flag;
    const char *share; /* the option that runs without it */
    const char *hint;  /* the usual cause of a refusal */
} ns_table[] = {
    {"user", SANDBOX_NS_USER, CLONE_NEWUSER, "--share=user (root only)",
     "unprivileged user namespaces are off (sysctl kernel.unprivileged_userns_clone, "
     "user.max_user_namespaces, or an AppArmor/container policy)"},
    {"mount", SANDBOX_NS_MOUNT, CLONE_NEWNS, "--share=mount", "a container policy forbids it"},
    {"pid", SANDBOX_NS_PID, CLONE_NEWPID, "--share=pid", "user.max_pid_namespaces is 0"},
    {"ipc", SANDBOX_NS_IPC, CLONE_NEWIPC, "--share=ipc", "user.max_ipc_namespaces is 0"},
    {"uts", SANDBOX_NS_UTS, CLONE_NEWUTS, "--share=uts", "user.max_uts_namespaces is 0"},
    {"net", SANDBOX_NS_NET, CLONE_NEWNET, "--share=net", "user.max_net_namespaces is 0"},
};
#define NS_COUNT (sizeof(ns_table) / sizeof(ns_table[0]))

int sandbox_ns_parse(unsigned *out, const char *list, const char *opt, rg_error *err)
{
    const char *p = list, *end;
    unsigned set = 0;
    size_t i, len;

    /* Bounded: one name per comma of a command-line argument. */
    while (*p) {
        end = strchrnul(p, ',');
        len = (size_t)(end - p);
        if (len == 3 && memcmp(p, "all", 3) == 0) {
            set |= SANDBOX_NS_ALL;
        } else if (len == 4 && memcmp(p, "none", 4) == 0) {
            /* nothing */
        } else {
            for (i = 0; i < NS_COUNT; i++)
                if (strlen(ns_table[i].name) == len && memcmp(ns_table[i].name, p, len) == 0)
                    break;
            if (i == NS_COUNT)
                return rg_error_set(err, -EINVAL,
                                    "%s: unknown namespace '%.*s' (expected user, mount, pid, "
                                    "ipc, uts, net, all or none)",
                                    opt, (int)len, p);
            set |= ns_table[i].bit;
        }
        p = *end ? end + 1 : end;
    }
    *out = set;
    return 0;
}

void sandbox_ns_names(char *out, size_t len, unsigned set)
{
    size_t i, used = 0;

    if (len == 0)
        return;
    out[0] = '\0';
    for (i = 0; i < NS_COUNT; i++) {
        int n;

        if (!(set & ns_table[i].bit))
            continue;
        n = snprintf(out + used, len - used, "%s%s", used ? "," : "", ns_table[i].name);
        if (n < 0 || (size_t)n >= len - used)
            return;
        used += (size_t)n;
    }
    if (used == 0)
        snprintf(out, len, "none");
}

unsigned long sandbox_ns_clone_flags(unsigned set)
{
    unsigned long flags = 0;
    size_t i;

    for (i = 0; i < NS_COUNT; i++)
        if (set & ns_table[i].bit)
            flags |= ns_table[i].flag;
    return flags;
}

int sandbox_ns_check(unsigned set, int is_root, rg_error *err)
{
    char names[64];

    if (is_root || (set & SANDBOX_NS_USER) || set == 0)
        return 0;
    sandbox_ns_names(names, sizeof(names), set);
    return rg_error_set(err, -EINVAL,
                        "the %s namespace%s need%s a user namespace when not run as root; "
                        "drop --share=user, or share them too (--share=all)",
                        names, strchr(names, ',') ? "s" : "", strchr(names, ',') ? "" : "s");
}

/* Try to create the namespaces `flags` in a throwaway child: 0 or -errno. */
static int ns_try(unsigned long flags)
{
    int status, pfd[2], e = 0;
    pid_t pid;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return -e;
    }
    if (pid == 0) {
        e = unshare((int)flags) < 0 ? errno : 0;
        if (write(pfd[1], &e, sizeof(e)) < 0)
            _exit(1);
        _exit(0);
    }
    close(pfd[1]);
    if (read(pfd[0], &e, sizeof(e)) != (ssize_t)sizeof(e))
        e = EIO;
    close(pfd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return -e;
}

int sandbox_ns_explain(unsigned set, unsigned simulated, int errno_, rg_error *err)
{
    unsigned long with_user = (set & SANDBOX_NS_USER) ? CLONE_NEWUSER : 0;
    size_t i;
    int rc;

    for (i = 0; i < NS_COUNT; i++) {
        if (!(set & ns_table[i].bit))
            continue;
        if (simulated & ns_table[i].bit)
            return rg_error_set(err, -EPERM,
                                "refusing to run: cannot create the %s namespace (simulated by "
                                "--debug-ns-unavailable); %s runs without it",
                                ns_table[i].name, ns_table[i].share);
        /* The others need the user namespace when not root: try them in one. */
        rc = ns_try(ns_table[i].flag | (ns_table[i].bit == SANDBOX_NS_USER ? 0 : with_user));
        if (rc < 0)
            return rg_error_set(err, rc,
                                "refusing to run: cannot create the %s namespace: %s (usually: "
                                "%s); %s runs without it",
                                ns_table[i].name, strerror(-rc), ns_table[i].hint,
                                ns_table[i].share);
    }
    return rg_error_set(err, -errno_, "refusing to run: cannot create the namespaces: %s",
                        strerror(errno_));
}

int sandbox_ns_probe(unsigned set, unsigned simulated, rg_error *err)
{
    int rc;

    if (set & simulated)
        return sandbox_ns_explain(set, simulated, EPERM, err);
    rc = set ? ns_try(sandbox_ns_clone_flags(set)) : 0;
    if (rc < 0)
        return sandbox_ns_explain(set, 0, -rc, err);
    return 0;
}

static int ns_write(const char *path, const char *text, rg_error *err)
{
    int fd, rc = 0;
    ssize_t n;

    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    n = write(fd, text, strlen(text));
    if (n != (ssize_t)strlen(text))
        rc = rg_error_set(err, n < 0 ? -errno : -EIO, "writing '%s' to %s: %s", text, path,
                          n < 0 ? strerror(errno) : "short write");
    close(fd);
    return rc;
}

int sandbox_ns_write_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid,
                          gid_t outside_gid, rg_error *err)
{
    char path[64], map[64];
    int rc = 0;

    /* Unprivileged, the kernel wants setgroups denied before a gid map;
     * as root, the child needs it to shed root's supplementary groups. */
    if (geteuid() != 0) {
        snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
        rc = ns_write(path, "deny", err);
    }
    if (rc == 0) {
        snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)inside_uid, (unsigned)outside_uid);
        rc = ns_write(path, map, err);
    }
    if (rc == 0) {
        snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)inside_gid, (unsigned)outside_gid);
        rc = ns_write(path, map, err);
    }
    return rc;
}

int sandbox_ns_idmap_userns(int *out, uid_t uid, gid_t gid, rg_error *err)
{
    char path[64];
    int pfd[2], status, fd = -1, rc = 0;
    pid_t pid;

    *out = -1;
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return rg_error_set(err, -errno, "pipe: %s", strerror(errno));
    /* A child holds the namespace open while the maps are written and the
     * namespace file is opened; it waits for the pipe to close. */
    pid =
        (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), NULL, NULL, NULL, NULL);
    if (pid < 0) {
        rc = rg_error_set(err, -errno, "creating a user namespace for an id-mapped mount: %s",
                          strerror(errno));
        goto done;
    }
    if (pid == 0) {
        char c;

        close(pfd[1]);
        while (read(pfd[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(pfd[0]);
    pfd[0] = -1;
    rc = sandbox_ns_write_maps(pid, 0, uid, 0, gid, err);
    if (rc == 0) {
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    }
    close(pfd[1]);
    pfd[1] = -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *out = fd;
done:
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    return rc;
}

int sandbox_ns_loopback_up(rg_error *err)
{
    struct ifreq ifr;
    int fd, rc = 0;

    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return rg_error_set(err, -errno, "loopback: %s", strerror(errno));
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        rc = rg_error_set(err, -errno, "loopback: %s", strerror(errno));
    ifr.ifr_flags |= IFF_UP;
    if (rc == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
        rc = rg_error_set(err, -errno, "bringing up loopback: %s", strerror(errno));
    close(fd);
    return rc;
}
