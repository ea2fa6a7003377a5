/*
 * The mount namespace's layout; see mount.h. The plan functions are pure;
 * sandbox_mount_prepare runs in the runner and sandbox_mount_apply in the
 * sandbox's first process, which holds CAP_SYS_ADMIN over the new
 * namespace and nothing outside it.
 */
#include "sandbox/mount.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/home.h"

/* Devices bound from the host's /dev: what any program expects to open. */
static const char *const mount_devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
#define MOUNT_NDEVICES (sizeof(mount_devices) / sizeof(mount_devices[0]))

/* Lines of /proc/self/mountinfo read, at most (a bound against a mount storm). */
#define MOUNT_INFO_LINES_MAX 100000

/* ------------------------------------------------------------------------ */
/* The plan                                                                  */
/* ------------------------------------------------------------------------ */

int sandbox_mount_plan_add(sandbox_mount_plan *p, sandbox_mount_kind kind, const char *src,
                           const char *dst, unsigned flags, rg_error *err)
{
    sandbox_mount_op *grown, *op;
    size_t i;

    if (dst == NULL || dst[0] != '/' || (kind == SANDBOX_MOUNT_BIND && src == NULL))
        return rg_error_set(err, -EINVAL, "mount plan: a target must be an absolute path");
    for (i = 0; i < p->n; i++)
        if (p->ops[i].kind == kind && strcmp(p->ops[i].dst, dst) == 0)
            return 0;
    grown = realloc(p->ops, (p->n + 1) * sizeof(*grown));
    if (grown == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    p->ops = grown;
    op = &p->ops[p->n];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->flags = flags;
    op->fd = -1;
    op->dst = strdup(dst);
    op->src = src ? strdup(src) : NULL;
    if (op->dst == NULL || (src != NULL && op->src == NULL)) {
        free(op->dst);
        free(op->src);
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    p->n++;
    return 0;
}

static size_t mount_depth(const char *path)
{
    size_t d = 0;

    for (; *path; path++)
        if (*path == '/' && path[1] != '\0')
            d++;
    return d;
}

int sandbox_mount_plan_finish(sandbox_mount_plan *p, rg_error *err)
{
    sandbox_mount_op tmp;
    size_t i, j;

    /* A hide or tmpfs that covers a writable bind would take the fork or a
     * -w path away from the command: refuse rather than guess. */
    for (i = 0; i < p->n; i++) {
        if (p->ops[i].kind == SANDBOX_MOUNT_BIND)
            continue;
        for (j = 0; j < p->n; j++) {
            sandbox_home_relation r;

            if (p->ops[j].kind != SANDBOX_MOUNT_BIND || !(p->ops[j].flags & SANDBOX_MOUNT_RW))
                continue;
            r = sandbox_home_relate(p->ops[i].dst, p->ops[j].dst);
            if (p->ops[i].kind == SANDBOX_MOUNT_HIDE &&
                (r == SANDBOX_HOME_SAME || r == SANDBOX_HOME_CONTAINS))
                return rg_error_set(err, RG_E_DENIED,
                                    "%s must stay hidden, but it is or contains %s, which the "
                                    "command is to write",
                                    p->ops[i].dst, p->ops[j].dst);
        }
    }
    /* Insertion sort by depth: stable, and plans are a few dozen entries. */
    for (i = 1; i < p->n; i++) {
        tmp = p->ops[i];
        for (j = i; j > 0 && mount_depth(p->ops[j - 1].dst) > mount_depth(tmp.dst); j--)
            p->ops[j] = p->ops[j - 1];
        p->ops[j] = tmp;
    }
    return 0;
}

void sandbox_mount_plan_free(sandbox_mount_plan *p)
{
    size_t i;

    if (p == NULL)
        return;
    for (i = 0; i < p->n; i++) {
        free(p->ops[i].src);
        free(p->ops[i].dst);
        if (p->ops[i].fd >= 0)
            close(p->ops[i].fd);
    }
    free(p->ops);
    p->ops = NULL;
    p->n = 0;
}

/* ------------------------------------------------------------------------ */
/* Other mounts of a directory                                               */
/* ------------------------------------------------------------------------ */

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void mount_unescape(char *s)
{
    char *w = s;

    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *w++ = *s;
        }
    }
    *w = '\0';
}

typedef struct mount_info {
    char dev[32];
    char root[PATH_MAX];
    char point[PATH_MAX];
} mount_info;

/* Parse fields 3-5 of one mountinfo line; 0 or -1 when malformed. */
static int mount_info_parse(mount_info *out, const char *line, size_t len)
{
    char buf[3 * PATH_MAX + 128], *f[5], *save = NULL;
    size_t i;

    if (len >= sizeof(buf))
        return -1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    for (i = 0; i < 5; i++) {
        f[i] = strtok_r(i == 0 ? buf : NULL, " ", &save);
        if (f[i] == NULL)
            return -1;
    }
    if (strlen(f[2]) >= sizeof(out->dev) || strlen(f[3]) >= sizeof(out->root) ||
        strlen(f[4]) >= sizeof(out->point))
        return -1;
    strcpy(out->dev, f[2]);
    strcpy(out->root, f[3]);
    strcpy(out->point, f[4]);
    mount_unescape(out->root);
    mount_unescape(out->point);
    return 0;
}

/* dir + rest, where rest is empty or starts with '/'; NULL when too long. */
static char *mount_join(const char *dir, const char *rest)
{
    char buf[PATH_MAX];
    int n;

    if (*rest == '\0')
        n = snprintf(buf, sizeof(buf), "%s", dir);
    else
        n = snprintf(buf, sizeof(buf), "%s%s", strcmp(dir, "/") ? dir : "", rest);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return NULL;
    return strdup(buf);
}

int sandbox_mount_aliases(char ***out, size_t *n, const char *mountinfo, const char *path,
                          size_t max, rg_error *err)
{
    mount_info cur, best;
    const char *line, *eol;
    char fspath[PATH_MAX], **list = NULL, *alias;
    size_t count = 0, lines, bestlen = 0;
    int found = 0, rc = 0;

    *out = NULL;
    *n = 0;
    /* The mount `path` is reached through: the longest mount point above it. */
    lines = 0;
    /* Bounded: MOUNT_INFO_LINES_MAX lines. */
    for (line = mountinfo; *line && lines < MOUNT_INFO_LINES_MAX; line = *eol ? eol + 1 : eol) {
        eol = strchrnul(line, '\n');
        lines++;
        if (mount_info_parse(&cur, line, (size_t)(eol - line)) < 0)
            continue;
        switch (sandbox_home_relate(cur.point, path)) {
        case SANDBOX_HOME_SAME:
        case SANDBOX_HOME_CONTAINS:
            if (strlen(cur.point) >= bestlen) {
                best = cur;
                bestlen = strlen(cur.point);
                found = 1;
            }
            break;
        default:
            break;
        }
    }
    if (!found)
        return 0;
    /* Where `path` is inside its filesystem. */
    alias = mount_join(best.root, path + (strcmp(best.point, "/") ? strlen(best.point) : 0));
    if (alias == NULL)
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
    snprintf(fspath, sizeof(fspath), "%s", alias);
    free(alias);
    lines = 0;
    /* Bounded: MOUNT_INFO_LINES_MAX lines, `max` aliases. */
    for (line = mountinfo; *line && lines < MOUNT_INFO_LINES_MAX && count < max;
         line = *eol ? eol + 1 : eol) {
        char **grown;

        eol = strchrnul(line, '\n');
        lines++;
        if (mount_info_parse(&cur, line, (size_t)(eol - line)) < 0 ||
            strcmp(cur.dev, best.dev) != 0)
            continue;
        switch (sandbox_home_relate(cur.root, fspath)) {
        case SANDBOX_HOME_SAME:
        case SANDBOX_HOME_INSIDE:
            alias = strdup(cur.point);
            break;
        case SANDBOX_HOME_CONTAINS:
            alias = mount_join(cur.point, fspath + (strcmp(cur.root, "/") ? strlen(cur.root) : 0));
            break;
        default:
            continue;
        }
        if (alias == NULL) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        /* The path itself, or a mount below it, is hidden with it already. */
        if (sandbox_home_relate(path, alias) != SANDBOX_HOME_UNRELATED &&
            sandbox_home_relate(path, alias) != SANDBOX_HOME_INSIDE) {
            free(alias);
            continue;
        }
        grown = realloc(list, (count + 1) * sizeof(*grown));
        if (grown == NULL) {
            free(alias);
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        list = grown;
        list[count++] = alias;
    }
    if (rc < 0) {
        while (count > 0)
            free(list[--count]);
        free(list);
        return rc;
    }
    *out = list;
    *n = count;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Building it                                                               */
/* ------------------------------------------------------------------------ */

static int mount_setflags(int fd, unsigned long long set, int recursive, rg_error *err,
                          const char *what)
{
    struct mount_attr attr;

    memset(&attr, 0, sizeof(attr));
    attr.attr_set = set;
    if (mount_setattr(fd, fd == AT_FDCWD ? what : "",
                      (fd == AT_FDCWD ? 0 : AT_EMPTY_PATH) | (recursive ? AT_RECURSIVE : 0), &attr,
                      sizeof(attr)) < 0)
        return rg_error_set(err, -errno, "cannot set the mount attributes of %s: %s", what,
                            strerror(errno));
    return 0;
}

/* Open every bind source not opened yet; see sandbox_mount_prepare. */
static int mount_open_sources(sandbox_mount_plan *p, int userns_fd, rg_error *err)
{
    struct mount_attr attr;
    size_t i;
    int fd, rc;

    for (i = 0; i < p->n; i++) {
        sandbox_mount_op *op = &p->ops[i];

        if (op->kind != SANDBOX_MOUNT_BIND || op->fd >= 0)
            continue;
        fd = open_tree(AT_FDCWD, op->src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0) {
            if ((op->flags & SANDBOX_MOUNT_OPTIONAL) && errno == ENOENT)
                continue;
            return rg_error_set(err, -errno, "%s: cannot copy the mount: %s", op->src,
                                strerror(errno));
        }
        rc = mount_setflags(fd,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                ((op->flags & SANDBOX_MOUNT_RW) ? 0 : MOUNT_ATTR_RDONLY),
                            1, err, op->src);
        if (rc < 0) {
            close(fd);
            return rc;
        }
        op->fd = fd;
        if (!(op->flags & SANDBOX_MOUNT_IDMAP) || userns_fd < 0)
            continue;
        memset(&attr, 0, sizeof(attr));
        attr.attr_set = MOUNT_ATTR_IDMAP;
        attr.userns_fd = (unsigned long long)userns_fd;
        /* Not recursive: an id-mapped mount cannot hold others below it. */
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
            int e = errno;

            /* A toolchain path the filesystem cannot id-map stays as it is:
             * readable if its modes allow, never more. */
            if (op->flags & SANDBOX_MOUNT_OPTIONAL)
                continue;

            return rg_error_set(err, -e,
                                "%s: cannot id-map it for the sandbox's uid: %s (%s); "
                                "--share=user runs as root instead",
                                op->src, strerror(e),
                                e == EINVAL ? "this filesystem cannot id-map mounts, or "
                                              "something is mounted below it"
                                            : "refused");
        }
    }
    return 0;
}

int sandbox_mount_prepare(sandbox_mount_plan *p, int userns_fd, rg_error *err)
{
    return mount_open_sources(p, userns_fd, err);
}

/* Make `path` exist as a directory (or, `dir` 0, a file) to mount on. */
static int mount_mkpoint(const char *path, int dir, rg_error *err)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t i, len = strlen(path);
    int fd;

    if (lstat(path, &st) == 0)
        return 0;
    if (len >= sizeof(buf))
        return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", path);
    memcpy(buf, path, len + 1);
    for (i = 1; i < len; i++) {
        if (buf[i] != '/')
            continue;
        buf[i] = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return rg_error_set(err, -errno, "cannot make the mount point %s: %s%s", buf,
                                strerror(errno),
                                errno == EACCES ? " (run as root, the command is nobody outside: "
                                                  "the directories above its fork, HOME and -r/-w "
                                                  "paths must be searchable by others)"
                                                : "");
        buf[i] = '/';
    }
    if (dir) {
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return rg_error_set(err, -errno, "cannot make the mount point %s: %s", path,
                                strerror(errno));
        return 0;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return rg_error_set(err, -errno, "cannot make the mount point %s: %s", path,
                            strerror(errno));
    close(fd);
    return 0;
}

static int mount_attach(int fd, const char *dst, rg_error *err)
{
    if (move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return rg_error_set(err, -errno, "cannot mount on %s: %s", dst, strerror(errno));
    return 0;
}

/*
 * A detached tmpfs holding an empty directory "d" and file "f", mode 0,
 * under a root of mode 0. It must not be closed detached: dropping the last
 * reference to a detached mount unmounts it, and an unmount waits for an RCU
 * grace period (~0.7 ms here, a quarter of a run's start-up). So
 * sandbox_mount_apply attaches it over the first directory it hides.
 */
static int mount_hide_source(int *out, rg_error *err)
{
    int fsfd, mfd = -1, fd, rc = 0;

    *out = -1;
    fsfd = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fsfd < 0)
        return rg_error_set(err, -errno, "tmpfs: %s", strerror(errno));
    if (fsconfig(fsfd, FSCONFIG_SET_STRING, "size", "16k", 0) < 0 ||
        fsconfig(fsfd, FSCONFIG_SET_STRING, "mode", "0", 0) < 0 ||
        fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0) {
        rc = rg_error_set(err, -errno, "tmpfs: %s", strerror(errno));
        goto done;
    }
    if (mkdirat(mfd, "d", 0) < 0 ||
        (fd = openat(mfd, "f", O_CREAT | O_WRONLY | O_CLOEXEC, 0)) < 0) {
        rc = rg_error_set(err, -errno, "tmpfs: %s", strerror(errno));
        goto done;
    }
    close(fd);
    *out = mfd;
    mfd = -1;
done:
    if (mfd >= 0)
        close(mfd);
    close(fsfd);
    return rc;
}

/* Hide dst; the first directory hidden gets the source itself (*parked). */
static int mount_hide(int hide_fd, int *parked, const char *dst, rg_error *err)
{
    struct stat st;
    int fd, rc;

    if (stat(dst, &st) < 0)
        return 0; /* nothing there: nothing to hide */
    if (S_ISDIR(st.st_mode) && !*parked) {
        rc = mount_setflags(
            hide_fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            0, err, dst);
        if (rc == 0)
            rc = mount_attach(hide_fd, dst, err);
        if (rc < 0)
            return rg_error_wrap(err, "hiding %s", dst);
        *parked = 1;
        return 0;
    }
    fd = open_tree(hide_fd, S_ISDIR(st.st_mode) ? "d" : "f", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "hiding %s: %s", dst, strerror(errno));
    rc = mount_setflags(
        fd, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, 0, err,
        dst);
    if (rc == 0)
        rc = mount_attach(fd, dst, err);
    close(fd);
    if (rc < 0)
        rg_error_wrap(err, "hiding %s", dst);
    return rc;
}

static int mount_dev(const int *devs, rg_error *err)
{
    static const char *const links[][2] = {
        {"pts/ptmx", "/dev/ptmx"},          {"/proc/self/fd", "/dev/fd"},
        {"/proc/self/fd/0", "/dev/stdin"},  {"/proc/self/fd/1", "/dev/stdout"},
        {"/proc/self/fd/2", "/dev/stderr"},
    };
    char path[64];
    size_t i;
    int rc = 0;

    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
        return rg_error_set(err, -errno, "a tmpfs on /dev: %s", strerror(errno));
    for (i = 0; rc == 0 && i < MOUNT_NDEVICES; i++) {
        if (devs[i] < 0)
            continue;
        snprintf(path, sizeof(path), "/dev/%s", mount_devices[i]);
        rc = mount_mkpoint(path, 0, err);
        if (rc == 0)
            rc = mount_attach(devs[i], path, err);
    }
    if (rc < 0)
        return rc;
    /* A devpts of its own: the host's terminals do not exist inside. */
    if (mkdir("/dev/pts", 0755) < 0 || mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                                             "newinstance,ptmxmode=0666,mode=0620") < 0)
        return rg_error_set(err, -errno, "a new devpts instance on /dev/pts: %s", strerror(errno));
    if (mkdir("/dev/shm", 01777) < 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
        return rg_error_set(err, -errno, "a tmpfs on /dev/shm: %s", strerror(errno));
    for (i = 0; i < sizeof(links) / sizeof(links[0]); i++)
        if (symlink(links[i][0], links[i][1]) < 0)
            return rg_error_set(err, -errno, "%s: %s", links[i][1], strerror(errno));
    return 0;
}

int sandbox_mount_apply(sandbox_mount_plan *p, const sandbox_mount_opts *opts, rg_error *err)
{
    int devs[MOUNT_NDEVICES], hide_fd = -1, parked = 0, rc = 0;
    struct stat st;
    char path[64];
    size_t i;

    for (i = 0; i < MOUNT_NDEVICES; i++)
        devs[i] = -1;
    /* Nothing done here may reach the host's mounts. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        rc = rg_error_set(err, -errno, "making the mounts private: %s", strerror(errno));
        goto done;
    }
    /* Every source first, as later mounts may cover where it lies: those
     * sandbox_mount_prepare did not open outside (it needs root there). */
    rc = mount_open_sources(p, -1, err);
    for (i = 0; rc == 0 && i < MOUNT_NDEVICES; i++) {
        snprintf(path, sizeof(path), "/dev/%s", mount_devices[i]);
        devs[i] = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (devs[i] < 0 && errno != ENOENT)
            rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    }
    if (rc == 0)
        rc = mount_hide_source(&hide_fd, err);
    if (rc < 0)
        goto done;
    /* The host tree: read-only, no setuid, no devices, all the way down. */
    rc = mount_setflags(AT_FDCWD, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 1, err,
                        "/");
    if (rc < 0)
        goto done;
    if (opts->proc && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        rc = rg_error_set(err, -errno, "a new /proc: %s", strerror(errno));
        goto done;
    }
    rc = mount_dev(devs, err);
    /* Parents before children (sandbox_mount_plan_finish sorted them). */
    for (i = 0; rc == 0 && i < p->n; i++) {
        sandbox_mount_op *op = &p->ops[i];

        switch (op->kind) {
        case SANDBOX_MOUNT_TMPFS:
            rc = mount_mkpoint(op->dst, 1, err);
            if (rc == 0 &&
                mount("tmpfs", op->dst, "tmpfs", MS_NOSUID | MS_NODEV,
                      (op->flags & SANDBOX_MOUNT_PRIVATE) ? "mode=0700" : "mode=0755") < 0)
                rc = rg_error_set(err, -errno, "a tmpfs on %s: %s", op->dst, strerror(errno));
            break;
        case SANDBOX_MOUNT_BIND:
            if (op->fd < 0)
                break; /* an optional source that does not exist */
            if (fstat(op->fd, &st) < 0) {
                rc = rg_error_set(err, -errno, "%s: %s", op->src, strerror(errno));
                break;
            }
            rc = mount_mkpoint(op->dst, S_ISDIR(st.st_mode), err);
            if (rc == 0)
                rc = mount_attach(op->fd, op->dst, err);
            break;
        case SANDBOX_MOUNT_HIDE:
            rc = mount_hide(hide_fd, &parked, op->dst, err);
            break;
        }
    }
done:
    for (i = 0; i < MOUNT_NDEVICES; i++)
        if (devs[i] >= 0)
            close(devs[i]);
    if (hide_fd >= 0)
        close(hide_fd);
    for (i = 0; i < p->n; i++) {
        if (p->ops[i].fd >= 0)
            close(p->ops[i].fd);
        p->ops[i].fd = -1;
    }
    return rc;
}
