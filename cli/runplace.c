/*
 * Where `refgate run` works; see runplace.h.
 */
#include "cli/runplace.h"

#include <errno.h>
#include <git2.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "git/dirdiff.h"
#include "util/buf.h"

/* Directories looked at on the way up from the current directory, at most. */
#define RUNPLACE_DEPTH_MAX 256

/* 1 when canonical `path` is a fork: <name>.<N> with .<name>.<N>.base beside it. */
static int runplace_is_fork(const char *path)
{
    rg_buf base = RG_BUF_INIT(PATH_MAX), orig = RG_BUF_INIT(PATH_MAX);
    struct stat st;
    int yes;

    yes = rgit_dirdiff_default_original(&orig, path, NULL) == 0 &&
          rgit_dirdiff_default_base(&base, path, NULL) == 0 && lstat(base.data, &st) == 0 &&
          S_ISDIR(st.st_mode);
    rg_buf_free(&base);
    rg_buf_free(&orig);
    return yes;
}

/* The fork `path` is or lies inside, into out; 0 when none. */
static int runplace_fork_around(char *out, size_t cap, const char *path)
{
    char *slash;
    unsigned depth;

    if ((size_t)snprintf(out, cap, "%s", path) >= cap)
        return 0;
    /* Bounded: RUNPLACE_DEPTH_MAX levels. */
    for (depth = 0; depth < RUNPLACE_DEPTH_MAX && out[1] != '\0'; depth++) {
        if (runplace_is_fork(out))
            return 1;
        slash = strrchr(out, '/');
        if (slash == NULL)
            break;
        slash[slash == out ? 1 : 0] = '\0';
    }
    return 0;
}

/*
 * A submodule's top becomes its superproject's, as refgate-run decides
 * (sandbox/place.c): its .git is a gitfile into <super>/.git/modules/.
 * Bounded: RUNPLACE_DEPTH_MAX nesting levels.
 */
static void runplace_superproject(char *top, size_t cap)
{
    char probe[PATH_MAX + 8], line[PATH_MAX + 16], joined[2 * PATH_MAX + 2], real[PATH_MAX];
    unsigned depth;
    size_t n;
    char *mod;
    FILE *f;

    for (depth = 0; depth < RUNPLACE_DEPTH_MAX; depth++) {
        snprintf(probe, sizeof(probe), "%s/.git", top);
        f = fopen(probe, "re");
        if (f == NULL)
            return;
        n = fread(line, 1, sizeof(line) - 1, f);
        fclose(f);
        line[n] = '\0';
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "gitdir: ", 8) != 0)
            return;
        snprintf(joined, sizeof(joined), "%s%s%s", line[8] == '/' ? "" : top,
                 line[8] == '/' ? "" : "/", line + 8);
        if (realpath(joined, real) == NULL || (mod = strstr(real, "/.git/modules/")) == NULL)
            return;
        *mod = '\0';
        n = strlen(real);
        if (n >= cap || strncmp(top, real, n) != 0 || top[n] != '/')
            return;
        memcpy(top, real, n + 1);
    }
}

/* The work tree's top and the config with the remotes of the repository at `path`. */
static void runplace_repo(cli_runplace *out, const char *path)
{
    git_repository *repo = NULL;
    const char *wd, *common;
    size_t n;

    if (git_repository_open_ext(&repo, path, 0, NULL) < 0)
        return;
    wd = git_repository_workdir(repo);
    common = git_repository_commondir(repo);
    if (wd != NULL && out->fork[0] == '\0') {
        snprintf(out->top, sizeof(out->top), "%s", wd);
        n = strlen(out->top);
        while (n > 1 && out->top[n - 1] == '/')
            out->top[--n] = '\0';
        runplace_superproject(out->top, sizeof(out->top));
    }
    if (common != NULL)
        snprintf(out->config, sizeof(out->config), "%s%sconfig", common,
                 common[0] && common[strlen(common) - 1] == '/' ? "" : "/");
    git_repository_free(repo);
}

int cli_runplace_find(cli_runplace *out, const char *cwd, int continuing, const char *fork,
                      rg_error *err)
{
    char buf[PATH_MAX];

    memset(out, 0, sizeof(*out));
    snprintf(out->top, sizeof(out->top), "%s", cwd);
    if (continuing && fork != NULL) {
        if (realpath(fork, buf) == NULL)
            return rg_error_set(err, -errno, "--continue %s: %s", fork, strerror(errno));
        if (!runplace_is_fork(buf))
            return rg_error_set(err, -EINVAL,
                                "--continue %s: not a fork made by refgate-run (a directory "
                                "<dir>.<N> with .<dir>.<N>.base beside it)",
                                buf);
        snprintf(out->fork, sizeof(out->fork), "%s", buf);
    } else if (runplace_fork_around(buf, sizeof(buf), cwd)) {
        snprintf(out->fork, sizeof(out->fork), "%s", buf);
        out->implicit = !continuing;
    } else if (continuing) {
        return rg_error_set(err, -EINVAL,
                            "--continue: %s is not in a fork made by refgate-run; name the fork: "
                            "--continue DIR.N",
                            cwd);
    }
    if (out->fork[0] != '\0')
        snprintf(out->top, sizeof(out->top), "%s", out->fork);
    runplace_repo(out, out->fork[0] ? out->fork : cwd);
    return 0;
}
