/*
 * Landlock rulesets; see landlock.h. The system calls are made directly:
 * glibc has no wrappers, and the installed <linux/landlock.h> may predate
 * the rights used here (Debian 12 ships 6.1 headers, ABI 2), so the newer
 * constants are defined below with the values of the kernel's uapi header.
 */
#include "sandbox/landlock.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/home.h"

/* ------------------------------------------------------------------------ */
/* Kernel interface                                                          */
/* ------------------------------------------------------------------------ */

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

/* ABI 3 (Linux 6.2). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
/* ABI 5 (Linux 6.10). */
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
/* ABI 6 (Linux 6.12). */
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/*
 * struct landlock_ruleset_attr as of ABI 6. The kernel is told how many
 * bytes are meant, so an older kernel reads only the fields it knows.
 */
typedef struct landlock_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; /* ABI 4; network is a later layer: always 0 */
    uint64_t scoped;             /* ABI 6 */
} landlock_attr;

/* ABI 1 rights: those before REFER. */
#define LL_FS_ABI1 ((LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1)

#define LL_FS_READ                                                                                 \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/*
 * Writing a tree. MAKE_CHAR and MAKE_BLOCK are handled but never granted: a
 * device node made in the fork by a privileged command would open the raw
 * disk or memory.
 */
#define LL_FS_WRITE                                                                                \
    (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                               \
     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |  \
     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SYM |   \
     LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)

#define LL_FS_DEV                                                                                  \
    (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |  \
     LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* The rights that mean something on a file that is not a directory. */
#define LL_FS_FILE                                                                                 \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |   \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

#define LL_FS_ALL (LL_FS_ABI1 | LL_FS_WRITE | LL_FS_DEV)

/* ------------------------------------------------------------------------ */
/* Probe and plan                                                            */
/* ------------------------------------------------------------------------ */

int sandbox_landlock_probe(int *out, int cap, rg_error *err)
{
    long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

    if (abi < 0) {
        if (errno == EOPNOTSUPP)
            rg_error_set(err, -EOPNOTSUPP,
                         "Landlock is disabled: add \"landlock\" to the lsm= kernel boot "
                         "parameter (or CONFIG_LSM)");
        else
            rg_error_set(err, -errno,
                         "Landlock is not available: this kernel was built without "
                         "CONFIG_SECURITY_LANDLOCK (%s)",
                         strerror(errno));
        abi = 0;
    }
    if (cap >= 0 && abi > cap) {
        abi = cap;
        if (abi == 0)
            rg_error_set(err, -EOPNOTSUPP,
                         "Landlock is not available (simulated by --debug-landlock-abi=0)");
    }
    *out = (int)abi;
    return 0;
}

static void plan_degrade(sandbox_landlock_plan *p, const char *what)
{
    if (p->ndegraded < SANDBOX_LANDLOCK_DEGRADED_MAX)
        p->degraded[p->ndegraded++] = what;
}

int sandbox_landlock_plan_make(sandbox_landlock_plan *out, int abi, unsigned accept, rg_error *err)
{
    sandbox_landlock_plan p;
    char why[480] = "";
    int any = !!(accept & SANDBOX_LANDLOCK_ACCEPT_ANY);
    size_t len = 0;

    memset(&p, 0, sizeof(p));
    p.kernel_abi = abi;
    p.abi = abi > SANDBOX_LANDLOCK_ABI_LAST ? SANDBOX_LANDLOCK_ABI_LAST : abi;
    if (p.abi <= 0) {
        p.abi = 0;
        if (!any)
            return rg_error_set(err, RG_E_DENIED,
                                "refusing to run without Landlock, since nothing would keep "
                                "the command from reading secrets or writing outside the "
                                "fork; --allow-unconfined runs it anyway");
        p.loud = 1;
        plan_degrade(&p, "no Landlock: the command can read and write everything you can");
        *out = p;
        return 0;
    }
    p.enforce = 1;
    p.handled_fs = LL_FS_ALL;
    p.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
    /* Best effort, as sandboxer.c: each case removes what that ABI lacks
     * and falls through to the older ones. */
    switch (p.abi) {
    case 1:
        /* Without REFER every cross-directory rename or link is denied:
         * stricter, so this loses function, not safety. */
        p.handled_fs &= ~LANDLOCK_ACCESS_FS_REFER;
        plan_degrade(&p, "Landlock ABI 1 has no REFER right: renaming or linking a file into "
                         "another directory fails with EXDEV, even inside the fork");
        __attribute__((fallthrough));
    case 2:
        p.handled_fs &= ~LANDLOCK_ACCESS_FS_TRUNCATE;
        plan_degrade(&p, "truncate(2) is not confined (ABI < 3): the command can truncate "
                         "any file you may write, outside the fork too");
        if (!(accept & (SANDBOX_LANDLOCK_ACCEPT_NO_TRUNCATE | SANDBOX_LANDLOCK_ACCEPT_ANY)))
            len += (size_t)snprintf(why + len, sizeof(why) - len,
                                    "%struncate(2) cannot be confined (--no-truncate-control "
                                    "accepts that)",
                                    len ? "; " : "");
        else if (!(accept & SANDBOX_LANDLOCK_ACCEPT_NO_TRUNCATE))
            p.loud = 1;
        __attribute__((fallthrough));
    case 3:
    case 4:
        /* ABI 4 brought TCP rules; the network is a later layer. */
        p.handled_fs &= ~LANDLOCK_ACCESS_FS_IOCTL_DEV;
        plan_degrade(&p, "ioctl on devices is not confined (ABI < 5); only the terminal and "
                         "/dev/null-like devices can be opened");
        __attribute__((fallthrough));
    case 5:
        p.scoped = 0;
        plan_degrade(&p, "signals and abstract unix sockets are not scoped (ABI < 6): the "
                         "command can signal, and connect to, processes outside the sandbox");
        if (!(accept & (SANDBOX_LANDLOCK_ACCEPT_NO_SCOPE | SANDBOX_LANDLOCK_ACCEPT_ANY)))
            len += (size_t)snprintf(why + len, len < sizeof(why) ? sizeof(why) - len : 0,
                                    "%ssignals and abstract unix sockets cannot be scoped "
                                    "(--no-scope accepts that)",
                                    len ? "; " : "");
        else if (!(accept & SANDBOX_LANDLOCK_ACCEPT_NO_SCOPE))
            p.loud = 1;
        __attribute__((fallthrough));
    case 6:
    case SANDBOX_LANDLOCK_ABI_LAST:
        /* ABI 7 adds audit logging flags only; nothing to mask. */
        break;
    }
    if (len > 0)
        return rg_error_set(err, RG_E_DENIED, "refusing to run with Landlock ABI %d: %s%s", p.abi,
                            why, "; --allow-unconfined accepts every loss");
    *out = p;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Rulesets                                                                  */
/* ------------------------------------------------------------------------ */

struct sandbox_landlock {
    sandbox_landlock_plan plan;
    int fd; /* the ruleset; -1 when not enforcing */
    size_t rules;
    void (*trace)(void *ctx, const char *path, const char *what);
    void *trace_ctx;
};

int sandbox_landlock_new(sandbox_landlock **out, const sandbox_landlock_plan *plan, rg_error *err)
{
    landlock_attr attr = {plan->handled_fs, 0, plan->scoped};
    sandbox_landlock *ll;
    size_t size;
    long fd = -1;

    ll = calloc(1, sizeof(*ll));
    if (ll == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    ll->plan = *plan;
    ll->fd = -1;
    if (plan->enforce) {
        /* Only the fields this ABI knows, so an older kernel sees a struct
         * it accepts. */
        size = plan->abi >= 6   ? sizeof(attr)
               : plan->abi >= 4 ? 2 * sizeof(uint64_t)
                                : sizeof(uint64_t);
        fd = syscall(__NR_landlock_create_ruleset, &attr, size, 0);
        if (fd < 0) {
            int e = errno;

            free(ll);
            return rg_error_set(err, -e, "creating a Landlock ruleset (ABI %d): %s", plan->abi,
                                strerror(e));
        }
        ll->fd = (int)fd;
    }
    *out = ll;
    return 0;
}

void sandbox_landlock_set_trace(sandbox_landlock *ll,
                                void (*trace)(void *ctx, const char *path, const char *what),
                                void *ctx)
{
    ll->trace = trace;
    ll->trace_ctx = ctx;
}

size_t sandbox_landlock_count(const sandbox_landlock *ll)
{
    return ll->rules;
}

static uint64_t landlock_rights(const sandbox_landlock *ll, unsigned access, int is_dir)
{
    uint64_t r = 0;

    if (access & (SANDBOX_LANDLOCK_READ | SANDBOX_LANDLOCK_WRITE))
        r |= LL_FS_READ;
    if (access & SANDBOX_LANDLOCK_WRITE)
        r |= LL_FS_WRITE;
    if (access & SANDBOX_LANDLOCK_DEV)
        r |= LL_FS_DEV | (is_dir ? LANDLOCK_ACCESS_FS_READ_DIR : 0);
    if (!is_dir)
        r &= LL_FS_FILE;
    return r & ll->plan.handled_fs;
}

static const char *landlock_what(unsigned access)
{
    if (access & SANDBOX_LANDLOCK_DEV)
        return "device";
    return (access & SANDBOX_LANDLOCK_WRITE) ? "write" : "read";
}

/* Add a rule for `fd` (an O_PATH descriptor, not consumed). */
static int landlock_add(sandbox_landlock *ll, int fd, const char *path, unsigned access,
                        const struct stat *st, rg_error *err)
{
    struct landlock_path_beneath_attr pb;

    pb.allowed_access = landlock_rights(ll, access, S_ISDIR(st->st_mode));
    pb.parent_fd = fd;
    if (pb.allowed_access == 0)
        return 0;
    if (syscall(__NR_landlock_add_rule, ll->fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
        return rg_error_set(err, -errno, "adding a Landlock rule for %s: %s", path,
                            strerror(errno));
    ll->rules++;
    if (ll->trace)
        ll->trace(ll->trace_ctx, path, landlock_what(access));
    return 0;
}

int sandbox_landlock_allow(sandbox_landlock *ll, const char *path, unsigned access, rg_error *err)
{
    int optional = !!(access & SANDBOX_LANDLOCK_OPTIONAL);
    struct stat st;
    int fd, rc = 0;

    if (!ll->plan.enforce)
        return 0;
    fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (optional && (errno == ENOENT || errno == ENOTDIR || errno == EACCES))
            return 0;
        return rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (S_ISLNK(st.st_mode)) {
        /* Rules hold inodes; a rule on a link would grant nothing useful,
         * and following it here could grant somewhere unexpected. */
        if (!optional)
            rc = rg_error_set(err, -ELOOP, "%s is a symlink; give the path it points to", path);
        goto done;
    }
    rc = landlock_add(ll, fd, path, access, &st, err);
done:
    close(fd);
    return rc;
}

static int landlock_listed(const char *path, const char *const *list, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (strcmp(path, list[i]) == 0)
            return 1;
    return 0;
}

static int landlock_on_the_way(const char *path, const char *const *hidden, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (sandbox_home_relate(path, hidden[i]) == SANDBOX_HOME_CONTAINS)
            return 1;
    return 0;
}

typedef struct landlock_walk {
    sandbox_landlock *ll;
    const char *const *hidden;
    size_t nhidden;
    const char *const *skip;
    size_t nskip;
    char path[PATH_MAX];
    rg_error *err;
} landlock_walk;

/* Grant the entries of directory `dfd` (consumed) whose path is w->path. */
static int landlock_walk_dir(landlock_walk *w, int dfd, int depth)
{
    size_t base = strlen(w->path);
    struct dirent *de;
    struct stat st;
    DIR *d;
    int rc = 0, fd;

    d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        /* An unreadable directory on the way to a hidden path stays
         * unlisted, and so do its entries: stricter, not looser. */
        return 0;
    }
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (snprintf(w->path + base, sizeof(w->path) - base, "%s%s", base > 1 ? "/" : "",
                     de->d_name) >= (int)(sizeof(w->path) - base))
            continue;
        if (landlock_listed(w->path, w->hidden, w->nhidden) ||
            landlock_listed(w->path, w->skip, w->nskip))
            continue;
        fd = openat(dirfd(d), de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue; /* gone since readdir */
        if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode)) {
            /* Never follow: a link beside the home directory may point
             * into it. Its target is granted, or not, where it lives. */
            close(fd);
            continue;
        }
        if (S_ISDIR(st.st_mode) && landlock_on_the_way(w->path, w->hidden, w->nhidden)) {
            int sub;

            close(fd);
            if (depth >= 64)
                continue;
            sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                rc = landlock_walk_dir(w, sub, depth + 1);
            w->path[base] = '\0';
            continue;
        }
        rc = landlock_add(w->ll, fd, w->path, SANDBOX_LANDLOCK_READ, &st, w->err);
        close(fd);
    }
    w->path[base] = '\0';
    closedir(d);
    return rc;
}

int sandbox_landlock_allow_all_except(sandbox_landlock *ll, const char *const *hidden,
                                      size_t nhidden, const char *const *skip, size_t nskip,
                                      rg_error *err)
{
    landlock_walk w;
    int fd;

    if (!ll->plan.enforce)
        return 0;
    memset(&w, 0, sizeof(w));
    w.ll = ll;
    w.hidden = hidden;
    w.nhidden = nhidden;
    w.skip = skip;
    w.nskip = nskip;
    w.err = err;
    strcpy(w.path, "/");
    fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return rg_error_set(err, -errno, "/: %s", strerror(errno));
    return landlock_walk_dir(&w, fd, 0);
}

int sandbox_landlock_enforce(sandbox_landlock *ll, rg_error *err)
{
    if (!ll->plan.enforce)
        return 0;
    if (syscall(__NR_landlock_restrict_self, ll->fd, 0) < 0)
        return rg_error_set(err, -errno, "enforcing the Landlock ruleset: %s", strerror(errno));
    return 0;
}

void sandbox_landlock_free(sandbox_landlock *ll)
{
    if (ll == NULL)
        return;
    if (ll->fd >= 0)
        close(ll->fd);
    free(ll);
}
