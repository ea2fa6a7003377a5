/*
 * The run's view of the files: the namespaces checked, the mounts it plans
 * (planned in the runner, where paths are resolved and refusals can still
 * be made cleanly) and the Landlock ruleset granting the same paths inside.
 */
#include "runner/runner.h"

/* Other mounts of the home directory hidden, at most. */
#define RUN_ALIASES_MAX 256

/* /proc/self/mountinfo read, at most. */
#define RUN_MOUNTINFO_MAX (4 * 1024 * 1024)

/*
 * Agent and daemon sockets outside the home directory a command could use
 * to act as the user (ssh-agent, gpg-agent, D-Bus, container engines).
 * The home and /tmp are private already; these live in /run.
 */
static const char *const run_hidden_sockets[] = {
    "/run/dbus/system_bus_socket",
    "/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/user",
    "/run/snapd.socket",
    "/run/systemd/private",
    NULL,
};

/* Variables naming sockets or credential files to hide wherever they are. */
static const char *const run_hidden_vars[] = {
    "XDG_RUNTIME_DIR",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "KRB5CCNAME",
    "DOCKER_HOST",
    "DBUS_SESSION_BUS_ADDRESS",
    NULL,
};

/* Devices the command may open: the bit buckets, randomness, terminals. */
static const struct {
    const char *path;
    unsigned access;
} run_devices[] = {
    {"/dev/null", SANDBOX_LANDLOCK_DEV},     {"/dev/zero", SANDBOX_LANDLOCK_DEV},
    {"/dev/full", SANDBOX_LANDLOCK_DEV},     {"/dev/random", SANDBOX_LANDLOCK_READ},
    {"/dev/urandom", SANDBOX_LANDLOCK_READ}, {"/dev/tty", SANDBOX_LANDLOCK_DEV},
    {"/dev/ptmx", SANDBOX_LANDLOCK_DEV},     {"/dev/pts", SANDBOX_LANDLOCK_DEV},
    {"/dev/shm", SANDBOX_LANDLOCK_WRITE},
};

/* In the sandbox's first process, after the mounts: the Landlock ruleset. */
int run_build_rules(run_state *s, rg_error *err)
{
    const char *skip[] = {"/dev"};
    char buf[PATH_MAX];
    size_t i;
    int rc;

    rc = sandbox_landlock_new(&s->ll, &s->plan, err);
    if (rc < 0)
        return rc;
    if (run_verbose)
        sandbox_landlock_set_trace(s->ll, run_trace_rule, NULL);
    /* Everything outside the home directory and the hidden secrets... */
    rc = sandbox_landlock_allow_all_except(s->ll, (const char *const *)s->home.hidden,
                                           s->home.nhidden, skip, 1, err);
    /* ...but of /dev only what a command needs, not raw disks or memory. */
    for (i = 0; rc == 0 && i < sizeof(run_devices) / sizeof(run_devices[0]); i++)
        rc = sandbox_landlock_allow(s->ll, run_devices[i].path,
                                    run_devices[i].access | SANDBOX_LANDLOCK_OPTIONAL, err);
    for (i = 0; rc == 0 && sandbox_home_readable_names[i]; i++) {
        char path[PATH_MAX];

        snprintf(path, sizeof(path), "%s/%s", s->home.path, sandbox_home_readable_names[i]);
        /* A toolchain path may be a symlink (dotfiles); grant where it points,
         * unless that is a secret. */
        if (realpath(path, buf) == NULL)
            continue;
        if (sandbox_home_conflict(&s->home, buf) != NULL) {
            verbose("not granting %s: it resolves to %s", path, buf);
            continue;
        }
        rc = sandbox_landlock_allow(s->ll, buf, SANDBOX_LANDLOCK_READ | SANDBOX_LANDLOCK_OPTIONAL,
                                    err);
    }
    if (rc == 0)
        rc = sandbox_caches_allow(&s->caches, s->ll, (s->o.ns & SANDBOX_NS_MOUNT) != 0, err);
    if (rc == 0)
        rc = sandbox_toolconf_allow(&s->conf, s->ll, (s->o.ns & SANDBOX_NS_MOUNT) != 0, err);
    for (i = 0; rc == 0 && s->reads[i] != NULL; i++)
        rc = sandbox_landlock_allow(s->ll, s->reads[i], SANDBOX_LANDLOCK_READ, err);
    for (i = 0; rc == 0 && s->binds[i].dst != NULL; i++)
        rc = sandbox_landlock_allow(s->ll, s->binds[i].dst,
                                    s->binds[i].ro ? SANDBOX_LANDLOCK_READ : SANDBOX_LANDLOCK_WRITE,
                                    err);
    for (i = 0; rc == 0 && i < s->o.nwrites; i++)
        rc = sandbox_landlock_allow(s->ll, s->writes[i], SANDBOX_LANDLOCK_WRITE, err);
    if (rc == 0)
        rc = sandbox_landlock_allow(s->ll, s->shown, SANDBOX_LANDLOCK_WRITE, err);
    if (rc == 0)
        rc = sandbox_landlock_allow(s->ll, s->tmpdir, SANDBOX_LANDLOCK_WRITE, err);
    /* The private /tmp is the run's own: tools that ignore TMPDIR work. */
    if (rc == 0 && (s->o.ns & SANDBOX_NS_MOUNT))
        rc = sandbox_landlock_allow(s->ll, "/tmp", SANDBOX_LANDLOCK_WRITE, err);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Namespaces and mounts                                                     */
/* ------------------------------------------------------------------------ */

int run_check_ns(run_state *s)
{
    rg_error err = RG_ERROR_INIT;
    int rc;

    rc = sandbox_ns_check(s->o.ns, geteuid() == 0, &err);
    if (rc == 0 && (s->o.ns & s->o.debug_no_ns))
        rc = sandbox_ns_explain(s->o.ns & s->o.debug_no_ns, s->o.debug_no_ns, EPERM, &err);
    if (rc < 0) {
        say("%s", err.msg);
        return rc;
    }
    s->root_mapped = geteuid() == 0 && (s->o.ns & SANDBOX_NS_USER);
    /* Without the mount namespace there is no id-mapped mount: nobody could
     * not write a fork root owns. */
    if (s->root_mapped && !(s->o.ns & SANDBOX_NS_MOUNT)) {
        say("run as root, the user namespace needs the mount namespace: the command is nobody "
            "outside and gets its fork through an id-mapped mount; share both "
            "(--share=user,mount) or neither");
        return -EINVAL;
    }
    return 0;
}

/* Hide `path` (resolved) if it exists; a missing one has nothing to hide. */
static int run_hide(run_state *s, const char *path, rg_error *err)
{
    char buf[PATH_MAX];

    if (path == NULL || path[0] != '/' || realpath(path, buf) == NULL)
        return 0;
    verbose("hidden: %s", buf);
    return sandbox_mount_plan_add(&s->mounts, SANDBOX_MOUNT_HIDE, NULL, buf, 0, err);
}

/* The path inside a socket address or credential cache name: from the
 * first '/' to the first ',' or ':' (unix:path=/run/x,guid=..., FILE:/tmp/y,
 * unix:///run/docker.sock, /run/gpg:1234:1). */
static int run_hide_var(run_state *s, const char *value, rg_error *err)
{
    char buf[PATH_MAX];
    const char *p = value ? strchr(value, '/') : NULL;
    size_t len;

    if (p == NULL)
        return 0;
    while (p[1] == '/')
        p++;
    len = strcspn(p, ",:;");
    if (len >= sizeof(buf))
        return 0;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return run_hide(s, buf, err);
}

/* Hide every other mount through which `dir` is visible. */
static int run_hide_aliases(run_state *s, const char *text, const char *dir, rg_error *err)
{
    char **aliases = NULL;
    size_t n = 0, i;
    int rc;

    rc = sandbox_mount_aliases(&aliases, &n, text, dir, RUN_ALIASES_MAX, err);
    for (i = 0; i < n; i++) {
        if (rc == 0) {
            verbose("%s is also mounted at %s: hidden there", dir, aliases[i]);
            rc = sandbox_mount_plan_add(&s->mounts, SANDBOX_MOUNT_HIDE, NULL, aliases[i], 0, err);
        }
        free(aliases[i]);
    }
    free(aliases);
    return rc;
}

static char *run_read_mountinfo(void)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap + 1), *grown;
    ssize_t n;
    int fd;

    if (buf == NULL)
        return NULL;
    fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return NULL;
    }
    /* Bounded: RUN_MOUNTINFO_MAX bytes. */
    while ((n = read(fd, buf + len, cap - len)) > 0) {
        len += (size_t)n;
        if (len == cap) {
            if (cap >= RUN_MOUNTINFO_MAX)
                break;
            grown = realloc(buf, cap * 2 + 1);
            if (grown == NULL)
                break;
            buf = grown;
            cap *= 2;
        }
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

/*
 * The seccomp supervisor, when this kernel can give the command a listener;
 * else the plain filter (the same denials), and the summary says why they
 * are not counted.
 */
int run_plan_notify(run_state *s)
{
    rg_error why = RG_ERROR_INIT;

    if (sandbox_seccomp_notify_probe(&why) < 0) {
        snprintf(s->notify_off, sizeof(s->notify_off), "seccomp denials not counted: %s", why.msg);
        verbose("%s", s->notify_off);
        return 0;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s->notifysock) < 0) {
        say("socketpair: %s", strerror(errno));
        return -errno;
    }
    s->notify = 1;
    return 0;
}

/*
 * The mount namespace's layout (see mount.h): planned here, in the runner,
 * where the paths are resolved and refusals can still be made cleanly.
 */
int run_plan_mounts(run_state *s)
{
    /* A root caller's command is nobody outside: what it is given, root's
     * files included, must appear as its own (id-mapped), or a 0700 ~/.cargo
     * or a root-owned fork would be out of its reach. */
    const unsigned idmap = s->root_mapped ? SANDBOX_MOUNT_IDMAP : 0;
    const unsigned rw = SANDBOX_MOUNT_RW | idmap;
    sandbox_mount_plan *p = &s->mounts;
    rg_error err = RG_ERROR_INIT;
    char buf[PATH_MAX], path[PATH_MAX], *pwhome = NULL, *info = NULL;
    struct passwd *pw;
    size_t i;
    int rc, userns_fd = -1;

    if (!(s->o.ns & SANDBOX_NS_MOUNT))
        return 0;
    /* Writable: the private /tmp, then TMPDIR, the fork and -w paths in it. */
    rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, "/tmp", 0, &err);
    if (rc == 0)
        rc = s->tmp_inside
                 ? sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, s->tmpdir,
                                          SANDBOX_MOUNT_PRIVATE, &err)
                 : sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->tmpdir, s->tmpdir, rw, &err);
    /* The fork over the directory it was forked from (run_place_fork). */
    if (rc == 0)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->workdir, s->shown, rw, &err);
    if (rc == 0 && s->fork.src != NULL)
        rc = fork_exclude_plan_mounts(p, &s->excl, s->fork.src, s->shown, idmap, &err);
    /* -d DIR's .git: read-only, and a mount point nothing can replace (dirgit.h). */
    if (rc == 0 && s->dirgit.existed)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->dirgit.git, s->dirgit.git, idmap,
                                    &err);
    for (i = 0; rc == 0 && i < s->o.nwrites; i++)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->writes[i], s->writes[i], rw, &err);
    for (i = 0; rc == 0 && s->reads[i] != NULL; i++)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->reads[i], s->reads[i], idmap, &err);
    for (i = 0; rc == 0 && s->binds[i].dst != NULL; i++)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, s->binds[i].src, s->binds[i].dst,
                                    s->binds[i].ro ? idmap : rw, &err);
    /* The home directory: a tmpfs with only the toolchain paths in it. */
    if (rc == 0)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, s->home.path, 0, &err);
    /* Before the toolchain paths: the first entry for a path wins. */
    if (rc == 0)
        rc = sandbox_caches_mount(&s->caches, p, idmap, &err);
    if (rc == 0)
        rc = sandbox_toolconf_mount(&s->conf, p, idmap, &err);
    for (i = 0; rc == 0 && sandbox_home_readable_names[i]; i++) {
        snprintf(path, sizeof(path), "%s/%s", s->home.path, sandbox_home_readable_names[i]);
        if (realpath(path, buf) == NULL || sandbox_home_conflict(&s->home, buf) != NULL)
            continue;
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, buf, path, SANDBOX_MOUNT_OPTIONAL, &err);
    }
    /* The passwd entry's home around $HOME: emptied too, so the rest of
     * the real home (shell history, agents' credentials) is not there. */
    pw = getpwuid(getuid());
    if (rc == 0 && pw != NULL && pw->pw_dir[0] == '/' && (pwhome = realpath(pw->pw_dir, NULL)) &&
        strcmp(pwhome, "/") != 0 &&
        sandbox_home_relate(pwhome, s->home.path) == SANDBOX_HOME_CONTAINS)
        rc = sandbox_mount_plan_add(p, SANDBOX_MOUNT_TMPFS, NULL, pwhome, 0, &err);
    /* Secrets outside the home directory (and the passwd home apart from it). */
    for (i = 1; rc == 0 && i < s->home.nhidden; i++)
        rc = run_hide(s, s->home.hidden[i], &err);
    for (i = 0; rc == 0 && run_hidden_sockets[i]; i++)
        rc = run_hide(s, run_hidden_sockets[i], &err);
    for (i = 0; rc == 0 && run_hidden_vars[i]; i++)
        rc = run_hide_var(s, getenv(run_hidden_vars[i]), &err);
    for (i = 0; rc == 0 && i < s->o.nhides; i++) {
        if (realpath(s->o.hides[i], buf) == NULL) {
            verbose("--hide %s: %s; nothing to hide", s->o.hides[i], strerror(errno));
            continue;
        }
        rc = run_hide(s, buf, &err);
    }
    /* The home directory mounted elsewhere too (a bind mount, the disk twice). */
    info = rc == 0 ? run_read_mountinfo() : NULL;
    if (rc == 0 && info == NULL) {
        rc = -EIO;
        rg_error_set(&err, rc, "cannot read /proc/self/mountinfo to find other mounts of %s",
                     s->home.path);
    }
    if (rc == 0)
        rc = run_hide_aliases(s, info, s->home.path, &err);
    if (rc == 0 && pwhome != NULL && strcmp(pwhome, s->home.path) != 0 && strcmp(pwhome, "/"))
        rc = run_hide_aliases(s, info, pwhome, &err);
    if (rc == 0)
        rc = sandbox_mount_plan_finish(p, &err);
    if (rc == 0 && s->root_mapped)
        rc = sandbox_ns_idmap_userns(&userns_fd, SANDBOX_NS_ROOT_UID, SANDBOX_NS_ROOT_GID, &err);
    if (rc == 0 && geteuid() == 0)
        rc = sandbox_mount_prepare(p, userns_fd, &err);
    if (userns_fd >= 0)
        close(userns_fd);
    free(info);
    free(pwhome);
    if (rc < 0)
        say("%s", err.msg);
    return rc;
}
