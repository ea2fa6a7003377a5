/*
 * The names of a fork and its side files; see layout.h. Pure string work:
 * no I/O, so it can be linked by anything that needs the names (its own
 * library, rg_fork_layout, keeps the sandbox out of such links).
 */
#include "fork/layout.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of `path` without trailing slashes (but "/" stays "/"). */
static size_t layout_trimmed_len(const char *path)
{
    size_t n = strlen(path);

    while (n > 1 && path[n - 1] == '/')
        n--;
    return n;
}

/* Where the last component of path[0, n) starts. */
static size_t layout_name_start(const char *path, size_t n)
{
    size_t start = n;

    while (start > 0 && path[start - 1] != '/')
        start--;
    return start;
}

static bool layout_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int fork_layout_fork(char **out, const char *dir, unsigned n, rg_error *err)
{
    size_t len = layout_trimmed_len(dir);

    *out = NULL;
    if (layout_name_start(dir, len) == len)
        return rg_error_set(err, -EINVAL, "%s: no directory name to put a fork beside", dir);
    /* asprintf() leaves its pointer undefined on failure. */
    if (asprintf(out, "%.*s.%u", (int)len, dir, n) < 0) {
        *out = NULL;
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int fork_layout_side_path(char **out, const char *fork, fork_layout_side side, rg_error *err)
{
    static const char *const suffix[] = {
        [FORK_LAYOUT_BASE] = ".base",
        [FORK_LAYOUT_EXCLUDED] = ".excluded",
        [FORK_LAYOUT_RUN] = ".run",
    };
    size_t len = layout_trimmed_len(fork), start = layout_name_start(fork, len);
    size_t namelen = len - start;

    *out = NULL;
    if ((unsigned)side >= sizeof(suffix) / sizeof(suffix[0]))
        return rg_error_set(err, -EINVAL, "no such file beside a fork");
    /* "." and ".." name a directory by where it is, not what it is
     * called: no fork is called that, and ".{.}.base" would be no base. */
    if (namelen == 0 || (namelen == 1 && fork[start] == '.') ||
        (namelen == 2 && fork[start] == '.' && fork[start + 1] == '.'))
        return rg_error_set(err, -EINVAL, "%s: not a fork directory name", fork);
    if (asprintf(out, "%.*s.%.*s%s", (int)start, fork, (int)namelen, fork + start, suffix[side]) <
        0) {
        *out = NULL;
        return rg_error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int fork_layout_parse(char **out_dir, unsigned *out_n, const char *fork, rg_error *err)
{
    size_t len = layout_trimmed_len(fork), dot = len, p;
    unsigned long v = 0;

    *out_dir = NULL;
    *out_n = 0;
    while (dot > 0 && layout_is_digit(fork[dot - 1]))
        dot--;
    if (dot == len || dot < 2 || fork[dot - 1] != '.' || fork[dot - 2] == '/')
        return rg_error_set(err, -EINVAL, "%s: does not end in .<N>", fork);
    /* Bounded: at most one digit more than FORK_LAYOUT_MAX_N has is read. */
    for (p = dot; p < len && v <= FORK_LAYOUT_MAX_N; p++)
        v = v * 10 + (unsigned long)(fork[p] - '0');
    *out_dir = strndup(fork, dot - 1);
    if (*out_dir == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    if (fork[dot] != '0' && p == len && v <= FORK_LAYOUT_MAX_N)
        *out_n = (unsigned)v;
    return 0;
}
