/*
 * What a fork leaves out; see exclude.h.
 */
#include "fork/exclude.h"

#include "fork/layout.h"
#include "util/fs.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* `git ls-files` output read, at most (a bound against a huge tree). */
#define EXCLUDE_GIT_OUTPUT_MAX (16u << 20)

/*
 * Fetched dependencies: a read-only view serves a run that builds or tests
 * with them, and the run could not fetch them again (no network). Not here:
 * build outputs (target, build, dist), whose tools write into them, and
 * virtualenvs (.venv), which pip writes into and which hold absolute paths.
 */
const char *const fork_exclude_ignored_names[] = {
    "node_modules", "bower_components", "jspm_packages", ".pnpm-store", "vendor", NULL,
};

extern char **environ;

/* ------------------------------------------------------------------------ */
/* Patterns                                                                  */
/* ------------------------------------------------------------------------ */

static int exclude_push(char ***list, size_t *n, const char *s, size_t len)
{
    char **grown, *copy;

    copy = strndup(s, len);
    if (copy == NULL)
        return -ENOMEM;
    grown = realloc(*list, (*n + 1) * sizeof(*grown));
    if (grown == NULL) {
        free(copy);
        return -ENOMEM;
    }
    grown[(*n)++] = copy;
    *list = grown;
    return 0;
}

/* What is wrong with the segments of `p`: "" when every one names something
 * (no "", "." or ".."; one trailing '/' allowed). */
static const char *exclude_bad_segments(const char *p)
{
    const char *seg;
    size_t n;

    for (seg = p; *seg;) {
        n = strcspn(seg, "/");
        if (n == 0 && seg[0] == '/' && seg[1] != '\0')
            return "an empty path segment";
        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return "'.' and '..' are not allowed; patterns are relative to the forked directory";
        seg += n;
        if (*seg == '/')
            seg++;
    }
    return "";
}

int fork_exclude_add_pattern(fork_exclude *x, const char *pattern, rg_error *err)
{
    const char *p = pattern, *why;
    size_t len = strlen(pattern);

    if (len == 0 || len >= PATH_MAX)
        return rg_error_set(err, -EINVAL, "--exclude '%s': empty or too long", pattern);
    if (*p == '/')
        p++;
    if (*p == '\0' || *p == '/')
        return rg_error_set(err, -EINVAL, "--exclude '%s': names nothing", pattern);
    if (*(why = exclude_bad_segments(p)) != '\0')
        return rg_error_set(err, -EINVAL, "--exclude '%s': %s", pattern, why);
    if (exclude_push(&x->patterns, &x->npatterns, pattern, len) < 0)
        return rg_error_set(err, -ENOMEM, "out of memory");
    return 0;
}

/* Whether the segment [p, p+plen) matches [s, s+slen), as fnmatch does. */
static int exclude_seg_match(const char *p, size_t plen, const char *s, size_t slen)
{
    char pb[PATH_MAX], sb[PATH_MAX];

    if (plen >= sizeof(pb) || slen >= sizeof(sb))
        return 0;
    memcpy(pb, p, plen);
    pb[plen] = '\0';
    memcpy(sb, s, slen);
    sb[slen] = '\0';
    /* As in .gitignore, a wildcard matches a leading dot too. */
    return fnmatch(pb, sb, 0) == 0;
}

/* Segment-wise match of `pat` against `path` (both without a leading or
 * trailing slash); `**` takes any number of segments, none included. The
 * recursion is bounded by the number of `**` segments, each of which
 * walks the path once. */
static int exclude_walk(const char *pat, const char *path)
{
    size_t plen, slen;
    const char *q;

    if (*pat == '\0')
        return *path == '\0';
    plen = strcspn(pat, "/");
    if (plen == 2 && pat[0] == '*' && pat[1] == '*') {
        const char *rest = pat[2] == '/' ? pat + 3 : pat + 2;

        if (*rest == '\0')
            return 1;
        for (q = path; q != NULL; q = strchr(q, '/') ? strchr(q, '/') + 1 : NULL)
            if (*q != '\0' && exclude_walk(rest, q))
                return 1;
        return 0;
    }
    if (*path == '\0')
        return 0;
    slen = strcspn(path, "/");
    if (!exclude_seg_match(pat, plen, path, slen))
        return 0;
    pat += plen + (pat[plen] == '/');
    path += slen + (path[slen] == '/');
    if (*pat == '\0')
        return *path == '\0';
    return exclude_walk(pat, path);
}

int fork_exclude_pattern_match(const char *pattern, const char *path, int is_dir)
{
    char pat[PATH_MAX + 4];
    size_t len = strlen(pattern);
    int anchored;

    if (len > 0 && pattern[len - 1] == '/') {
        if (!is_dir)
            return 0;
        len--;
    }
    if (len > 0 && pattern[0] == '/') {
        pattern++;
        len--;
        anchored = 1;
    } else {
        anchored = memchr(pattern, '/', len) != NULL;
    }
    if (len == 0 || len >= PATH_MAX)
        return 0;
    /* An unanchored pattern is the same pattern under any directory. */
    snprintf(pat, sizeof(pat), "%s%.*s", anchored ? "" : "**/", (int)len, pattern);
    return exclude_walk(pat, path);
}

int fork_exclude_matches(const fork_exclude *x, const char *path, int is_dir)
{
    const char *name = strrchr(path, '/');
    size_t i;

    name = name ? name + 1 : path;
    if (strcmp(name, ".git") == 0)
        return 0;
    for (i = 0; is_dir && i < x->npaths; i++)
        if (strcmp(x->paths[i], path) == 0)
            return 1;
    for (i = 0; i < x->npatterns; i++)
        if (fork_exclude_pattern_match(x->patterns[i], path, is_dir))
            return 1;
    return 0;
}

int fork_exclude_tree_cb(void *ctx, const char *path, const struct stat *st)
{
    fork_exclude *x = ctx;

    if (!fork_exclude_matches(x, path, S_ISDIR(st->st_mode)))
        return 0;
    if (x->nexcluded >= FORK_EXCLUDE_MAX)
        return -E2BIG;
    if (exclude_push(&x->excluded, &x->nexcluded, path, strlen(path)) < 0)
        return -ENOMEM;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* What git ignores                                                          */
/* ------------------------------------------------------------------------ */

static int exclude_is_dependency_dir(const char *entry, size_t len)
{
    const char *name;
    size_t i, n;

    /* "a/node_modules/" -> "node_modules". */
    if (len < 2 || entry[len - 1] != '/')
        return 0;
    len--;
    for (name = entry + len; name > entry && name[-1] != '/'; name--)
        ;
    n = (size_t)(entry + len - name);
    for (i = 0; fork_exclude_ignored_names[i]; i++)
        if (strlen(fork_exclude_ignored_names[i]) == n &&
            memcmp(fork_exclude_ignored_names[i], name, n) == 0)
            return 1;
    return 0;
}

/* Run git with `argv` in `dir`; its stdout (capped) into *out, *len. */
static int exclude_git(char **out, size_t *len, const char *const argv[], rg_error *err)
{
    posix_spawn_file_actions_t fa;
    char *buf = NULL, *grown;
    size_t cap = 65536, n = 0;
    ssize_t got;
    int pipefd[2] = {-1, -1}, status = 0, rc = 0, fa_inited = 0;
    pid_t pid = -1;

    buf = malloc(cap);
    if (buf == NULL || pipe2(pipefd, O_CLOEXEC) < 0) {
        rc = rg_error_set(err, -ENOMEM, "cannot run git: %s", strerror(errno));
        goto done;
    }
    if ((rc = posix_spawn_file_actions_init(&fa)) != 0) {
        rc = rg_error_set(err, -rc, "cannot run git: %s", strerror(rc));
        goto done;
    }
    fa_inited = 1;
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    /* posix_spawnp takes char *const[] for history; it writes nothing. */
    rc = posix_spawnp(&pid, "git", &fa, NULL, (char *const *)argv, environ);
    if (rc != 0) {
        pid = -1;
        rc = rg_error_set(err, -ENOENT, "cannot run git: %s", strerror(rc));
        goto done;
    }
    close(pipefd[1]);
    pipefd[1] = -1;
    /* Bounded: EXCLUDE_GIT_OUTPUT_MAX bytes, then git is stopped. */
    for (;;) {
        if (n == cap) {
            if (cap >= EXCLUDE_GIT_OUTPUT_MAX) {
                kill(pid, SIGKILL);
                rc =
                    rg_error_set(err, RG_E_TOO_BIG, "git lists more than %u bytes of ignored paths",
                                 EXCLUDE_GIT_OUTPUT_MAX);
                goto done;
            }
            grown = realloc(buf, cap * 2);
            if (grown == NULL) {
                rc = rg_error_set(err, -ENOMEM, "out of memory");
                goto done;
            }
            buf = grown;
            cap *= 2;
        }
        got = read(pipefd[0], buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
done:
    if (pid > 0) {
        if (rc < 0)
            kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            rc = rg_error_set(err, -ENOENT, "not a git work tree (git ls-files failed)");
    }
    if (fa_inited)
        posix_spawn_file_actions_destroy(&fa);
    if (pipefd[0] >= 0)
        close(pipefd[0]);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

int fork_exclude_add_ignored(size_t *out_n, fork_exclude *x, const char *dir, rg_error *err)
{
    /* git runs in the user's own directory, as the user, before the run,
     * but that directory may have been written by an earlier `-d` run: the
     * one setting ls-files would run (core.fsmonitor) is forced off. */
    const char *const argv[] = {
        "git",         "-C", dir,        "-c",        "core.fsmonitor=false",
        "ls-files",    "-z", "--others", "--ignored", "--exclude-standard",
        "--directory", NULL,
    };
    char *out = NULL;
    size_t len = 0, off, n;
    int rc;

    *out_n = 0;
    rc = exclude_git(&out, &len, argv, err);
    if (rc < 0)
        return rc;
    /* Entries are NUL-terminated, relative to `dir`; a directory ends in '/'. */
    for (off = 0; off < len; off += n + 1) {
        n = strnlen(out + off, len - off);
        if (off + n == len)
            break; /* unterminated: cut short */
        if (!exclude_is_dependency_dir(out + off, n) || out[off] == '/' ||
            strncmp(out + off, "../", 3) == 0)
            continue;
        if (exclude_push(&x->paths, &x->npaths, out + off, n - 1) < 0) {
            rc = rg_error_set(err, -ENOMEM, "out of memory");
            break;
        }
        (*out_n)++;
    }
    free(out);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The record                                                                */
/* ------------------------------------------------------------------------ */

int fork_exclude_record_path(char **out, const char *fork, rg_error *err)
{
    const char *slash = strrchr(fork, '/');
    int rc;

    *out = NULL;
    /* Only a path with a directory part and a last component: a bare name
     * or a trailing slash, which layout would take, is refused as before. */
    if (slash == NULL || slash[1] == '\0')
        return rg_error_set(err, -EINVAL, "%s: not a fork path", fork);
    rc = fork_layout_side_path(out, fork, FORK_LAYOUT_EXCLUDED, NULL);
    if (rc == -EINVAL)
        return rg_error_set(err, rc, "%s: not a fork path", fork);
    if (rc < 0)
        return rg_error_set(err, rc, "out of memory");
    return 0;
}

int fork_exclude_record(const fork_exclude *x, const char *fork, rg_error *err)
{
    static const char head[] = "# refgate-run: paths left out of this fork, NUL-terminated\n";
    char *path = NULL;
    FILE *f = NULL;
    size_t i;
    int fd, rc;

    rc = fork_exclude_record_path(&path, fork, err);
    if (rc < 0)
        return rc;
    /* A record left by a fork of the same name, removed by hand, is not
     * this fork's. */
    if (unlink(path) < 0 && errno != ENOENT) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (x->nexcluded == 0)
        goto done;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
        rc = rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        goto done;
    }
    fputs(head, f);
    for (i = 0; i < x->nexcluded; i++)
        fwrite(x->excluded[i], 1, strlen(x->excluded[i]) + 1, f);
    if (fflush(f) != 0 || ferror(f))
        rc = rg_error_set(err, -EIO, "%s: %s", path, strerror(errno));
    if (fclose(f) != 0 && rc == 0)
        rc = rg_error_set(err, -EIO, "%s: %s", path, strerror(errno));
    if (rc < 0)
        unlink(path);
done:
    free(path);
    return rc;
}

int fork_exclude_load(fork_exclude *x, const char *fork, rg_error *err)
{
    static const char head[] = "# refgate-run: ";
    rg_buf body = RG_BUF_INIT((size_t)FORK_EXCLUDE_MAX * PATH_MAX + 4096);
    const char *nl, *p, *end;
    char *path = NULL;
    struct stat st;
    int rc;

    rc = fork_exclude_record_path(&path, fork, err);
    if (rc < 0)
        return rc;
    if (lstat(path, &st) < 0) {
        rc = errno == ENOENT ? 0 : rg_error_set(err, -errno, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, -EINVAL, "%s: not a regular file", path);
        goto done;
    }
    rc = rg_fs_read_file(&body, path, err);
    if (rc < 0)
        goto done;
    nl = memchr(body.data, '\n', body.len);
    if (nl == NULL || strncmp(body.data, head, sizeof(head) - 1) != 0) {
        rc = rg_error_set(err, -EINVAL, "%s: not a refgate-run record", path);
        goto done;
    }
    end = body.data + body.len;
    for (p = nl + 1; rc == 0 && p < end; p += strlen(p) + 1) {
        if (memchr(p, '\0', (size_t)(end - p)) == NULL || *p == '\0' || *p == '/' ||
            *exclude_bad_segments(p) != '\0' || x->nexcluded >= FORK_EXCLUDE_MAX)
            rc = rg_error_set(err, -EINVAL, "%s: not a refgate-run record", path);
        else if (exclude_push(&x->excluded, &x->nexcluded, p, strlen(p)) < 0)
            rc = rg_error_set(err, -ENOMEM, "out of memory");
    }
done:
    rg_buf_free(&body);
    free(path);
    return rc;
}

int fork_exclude_plan_mounts(sandbox_mount_plan *p, const fork_exclude *x, const char *src,
                             const char *fork, unsigned flags, rg_error *err)
{
    char from[PATH_MAX], to[PATH_MAX];
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < x->nexcluded; i++) {
        if ((size_t)snprintf(from, sizeof(from), "%s/%s", src, x->excluded[i]) >= sizeof(from) ||
            (size_t)snprintf(to, sizeof(to), "%s/%s", fork, x->excluded[i]) >= sizeof(to))
            return rg_error_set(err, -ENAMETOOLONG, "%s: path too long", x->excluded[i]);
        rc =
            sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, from, to, flags & ~SANDBOX_MOUNT_RW, err);
    }
    return rc;
}

static void exclude_list_free(char **list, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

void fork_exclude_free(fork_exclude *x)
{
    if (x == NULL)
        return;
    exclude_list_free(x->patterns, x->npatterns);
    exclude_list_free(x->paths, x->npaths);
    exclude_list_free(x->excluded, x->nexcluded);
    memset(x, 0, sizeof(*x));
}
