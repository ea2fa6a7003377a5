/*
 * Where a run works and where it is shown; see place.h.
 */
#include "fork/place.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fork/fork.h"

/* Directories looked at on the way up from the working directory, at most. */
#define PLACE_DEPTH_MAX 256

const char *fork_place_below(const char *path, const char *top)
{
    size_t n = strlen(top);

    if (strcmp(top, "/") == 0)
        return path[0] == '/' ? path + 1 : NULL;
    if (strncmp(path, top, n) != 0)
        return NULL;
    if (path[n] == '\0')
        return path + n;
    return path[n] == '/' ? path + n + 1 : NULL;
}

/* The parent of canonical `path` in place ("/a/b" -> "/a", "/a" -> "/"). */
static void place_up(char *path)
{
    char *slash = strrchr(path, '/');

    if (slash == path)
        path[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
}

/* The fork canonical `cwd` is or lies inside, into buf; 0 when none. */
static int place_enclosing_fork(char *buf, size_t cap, const char *cwd)
{
    unsigned depth;

    if (strlen(cwd) >= cap)
        return 0;
    memcpy(buf, cwd, strlen(cwd) + 1);
    /* Bounded: PLACE_DEPTH_MAX levels. */
    for (depth = 0; depth < PLACE_DEPTH_MAX && strcmp(buf, "/") != 0; depth++) {
        if (fork_is_fork(buf))
            return 1;
        place_up(buf);
    }
    return 0;
}

/*
 * A submodule's top (its .git a gitfile into <super>/.git/modules/...)
 * becomes its superproject's, in place: a fork of the submodule alone
 * would be made inside the superproject's work tree (untracked files
 * there), while a fork of the superproject holds the submodule with its
 * repository (.git/modules). Bounded: PLACE_DEPTH_MAX nesting levels.
 */
static void place_superproject(char *top, size_t cap)
{
    char probe[PATH_MAX + 8], line[PATH_MAX + 16], joined[2 * PATH_MAX + 2], real[PATH_MAX];
    unsigned depth;
    ssize_t n;
    char *mod;
    int fd;

    for (depth = 0; depth < PLACE_DEPTH_MAX; depth++) {
        snprintf(probe, sizeof(probe), "%s/.git", top);
        fd = open(probe, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return;
        n = read(fd, line, sizeof(line) - 1);
        close(fd);
        if (n <= 8 || strncmp(line, "gitdir: ", 8) != 0)
            return;
        line[n] = '\0';
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(joined, sizeof(joined), "%s%s%s", line[8] == '/' ? "" : top,
                 line[8] == '/' ? "" : "/", line + 8);
        if (realpath(joined, real) == NULL || (mod = strstr(real, "/.git/modules/")) == NULL)
            return;
        *mod = '\0';
        /* Only a superproject around the submodule, not a repository elsewhere. */
        if (strcmp(real, top) == 0 || fork_place_below(top, real) == NULL || strlen(real) >= cap)
            return;
        memcpy(top, real, strlen(real) + 1);
    }
}

/* The top of the work tree around `cwd` (see place.h), into buf. */
static void place_worktree_top(char *buf, size_t cap, const char *cwd)
{
    char probe[PATH_MAX + 8];
    struct stat st, here;
    unsigned depth;

    snprintf(buf, cap, "%s", cwd);
    if (stat(buf, &here) < 0)
        return;
    /* Bounded: PLACE_DEPTH_MAX levels. Like git, no mount is crossed. */
    for (depth = 0; depth < PLACE_DEPTH_MAX; depth++) {
        snprintf(probe, sizeof(probe), "%s/.git", strcmp(buf, "/") ? buf : "");
        if (lstat(probe, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
            place_superproject(buf, cap);
            return;
        }
        if (strcmp(buf, "/") == 0)
            break;
        place_up(buf);
        if (stat(buf, &st) < 0 || st.st_dev != here.st_dev)
            break;
    }
    snprintf(buf, cap, "%s", cwd);
}

int fork_place_find(fork_place *out, const char *cwd, const char *fork, int continuing,
                    const sandbox_home *h, rg_error *err)
{
    char buf[PATH_MAX];
    const char *sub;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (continuing && fork != NULL) {
        if (realpath(fork, buf) == NULL)
            return rg_error_set(err, -errno, "--continue %s: %s", fork, strerror(errno));
        if (!fork_is_fork(buf))
            return rg_error_set(err, -EINVAL,
                                "--continue %s: not a fork made by refgate-run (a directory "
                                "<dir>.<N> with .<dir>.<N>.base beside it)",
                                buf);
        out->is_fork = 1;
    } else if (place_enclosing_fork(buf, sizeof(buf), cwd)) {
        out->is_fork = 1;
        out->implicit = !continuing;
    } else if (continuing) {
        return rg_error_set(err, -EINVAL,
                            "--continue: %s is not in a fork made by refgate-run; name the fork: "
                            "--continue DIR.N",
                            cwd);
    } else {
        place_worktree_top(buf, sizeof(buf), cwd);
        /* A dotfiles repository around the home directory: the cwd, as it is. */
        if (h != NULL && strcmp(buf, cwd) != 0 && sandbox_home_conflict(h, buf) != NULL &&
            sandbox_home_conflict(h, cwd) == NULL) {
            snprintf(buf, sizeof(buf), "%s", cwd);
            out->narrowed = 1;
        }
    }
    sub = fork_place_below(cwd, buf);
    out->top = strdup(buf);
    out->sub = strdup(sub ? sub : "");
    if (out->top == NULL || out->sub == NULL) {
        rc = rg_error_set(err, -ENOMEM, "out of memory");
        fork_place_free(out);
    }
    return rc;
}

void fork_place_free(fork_place *p)
{
    if (p == NULL)
        return;
    free(p->top);
    free(p->sub);
    p->top = p->sub = NULL;
}

int fork_place_normalise(char **out, const char *path)
{
    size_t len = strlen(path), i = 0, o = 0, n;
    char *buf;

    *out = NULL;
    if (path[0] != '/')
        return -EINVAL;
    buf = malloc(len + 2);
    if (buf == NULL)
        return -ENOMEM;
    /* Bounded: one pass over the path. */
    while (i < len) {
        while (path[i] == '/')
            i++;
        if (path[i] == '\0')
            break;
        n = strcspn(path + i, "/");
        if ((n == 1 && path[i] == '.') || (n == 2 && path[i] == '.' && path[i + 1] == '.')) {
            free(buf);
            return -EINVAL;
        }
        buf[o++] = '/';
        memcpy(buf + o, path + i, n);
        o += n;
        i += n;
    }
    if (o == 0)
        buf[o++] = '/';
    buf[o] = '\0';
    *out = buf;
    return 0;
}

int fork_place_bind_parse(char **out_src, char **out_dst, const char *spec, const char *opt,
                          rg_error *err)
{
    const char *colon = strchr(spec, ':');
    int rc;

    *out_src = *out_dst = NULL;
    if (colon == NULL || colon == spec || colon[1] == '\0')
        return rg_error_set(err, -EINVAL, "%s %s: expected SRC:DST", opt, spec);
    rc = fork_place_normalise(out_dst, colon + 1);
    if (rc == -EINVAL)
        return rg_error_set(
            err, rc, "%s %s: DST must be an absolute path without . or .. components", opt, spec);
    if (rc == 0 && (*out_src = strndup(spec, (size_t)(colon - spec))) == NULL)
        rc = -ENOMEM;
    if (rc < 0) {
        free(*out_dst);
        *out_dst = NULL;
        return rg_error_set(err, rc, "out of memory");
    }
    return 0;
}

int fork_place_bind_resolve(sandbox_bind *out, const char *spec, int ro, const sandbox_home *h,
                            int force, const char **exposed, rg_error *err)
{
    const char *opt = ro ? "--ro-bind" : "--bind", *secret, *rest = NULL;
    char *src = NULL, *dst = NULL, buf[PATH_MAX];
    int rc;

    memset(out, 0, sizeof(*out));
    *exposed = NULL;
    rc = fork_place_bind_parse(&src, &dst, spec, opt, err);
    if (rc < 0)
        return rc;
    if (realpath(src, buf) == NULL) {
        rc = rg_error_set(err, -errno, "%s %s: %s", opt, src, strerror(errno));
        goto done;
    }
    secret = sandbox_home_conflict(h, buf);
    if (secret != NULL && !force) {
        rc = rg_error_set(err, RG_E_DENIED,
                          "refusing %s %s: it is, contains or lies inside %s, which must stay "
                          "unreadable; --force grants it anyway",
                          opt, buf, secret);
        goto done;
    }
    *exposed = secret;
    free(src);
    src = strdup(buf);
    if (strcmp(dst, "/") == 0) {
        rc = rg_error_set(err, -EINVAL, "%s %s: nothing can be bound over /", opt, spec);
        goto done;
    }
    /* Inside, the home directory is a fresh tmpfs at its canonical path. */
    if (h->env != NULL && h->env[0] == '/')
        rest = fork_place_below(dst, h->env);
    if (rest == NULL)
        rest = fork_place_below(dst, h->path);
    if (rest != NULL)
        rc = (size_t)snprintf(buf, sizeof(buf), "%s%s%s", h->path, rest[0] ? "/" : "", rest) >=
                     sizeof(buf)
                 ? -ENAMETOOLONG
                 : 0;
    else if (realpath(dst, buf) == NULL)
        rc = rg_error_set(err, -errno,
                          "%s %s: %s: %s (outside the home directory, whose tmpfs is made "
                          "for the run, DST must exist: the host's tree is read-only inside)",
                          opt, spec, dst, strerror(errno));
    if (rc == -ENAMETOOLONG)
        rg_error_set(err, rc, "%s %s: path too long", opt, dst);
    if (rc < 0)
        goto done;
    free(dst);
    dst = strdup(buf);
    if (src == NULL || dst == NULL)
        rc = rg_error_set(err, -ENOMEM, "out of memory");
done:
    if (rc < 0) {
        free(src);
        free(dst);
        return rc;
    }
    out->src = src;
    out->dst = dst;
    out->ro = ro;
    return 0;
}

void fork_place_bind_free(sandbox_bind *b)
{
    if (b == NULL)
        return;
    free(b->src);
    free(b->dst);
    b->src = b->dst = NULL;
}

void fork_place_sibling(char *out, size_t cap, const char *name, const char *alt)
{
    char self[PATH_MAX];
    ssize_t n;
    char *slash;

    out[0] = '\0';
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    snprintf(out, cap, "%s/%s", self, name);
    if (access(out, X_OK) == 0)
        return;
    if (alt != NULL && (size_t)snprintf(out, cap, "%s/%s/%s", self, alt, name) < cap &&
        access(out, X_OK) == 0 && realpath(out, self) != NULL) {
        snprintf(out, cap, "%s", self);
        return;
    }
    out[0] = '\0';
}
