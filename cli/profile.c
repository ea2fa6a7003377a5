/*
 * The agent profiles of `refgate run` and the per-run copy of an agent's
 * configuration; see profile.h. The hosts are only those the agent needs
 * to talk to its model's API (and to refresh a subscription login), not
 * its telemetry or error reporting, which the agents tolerate losing.
 */
#include "cli/profile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* The table                                                                */
/* ------------------------------------------------------------------------ */

static const char *const claude_commands[] = {"claude", NULL};
/* api.anthropic.com: the Messages API. console.anthropic.com: where a
 * Claude subscription login's OAuth token is refreshed. */
static const char *const claude_hosts[] = {"api.anthropic.com:443", "console.anthropic.com:443",
                                           NULL};
static const char *const claude_env[] = {"ANTHROPIC_*",
                                         "CLAUDE_CODE_*",
                                         "DISABLE_TELEMETRY",
                                         "DISABLE_ERROR_REPORTING",
                                         "DISABLE_AUTOUPDATER",
                                         "NODE_EXTRA_CA_CERTS",
                                         NULL};
/* Transcripts, prompt history and snapshots of every other project: the
 * run needs none of them and they may hold what another repository's
 * sandbox must not see. */
static const char *const claude_skip[] = {
    "projects", "history.jsonl", "shell-snapshots", "todos", "file-history", "session-env",
    "statsig",  "ide",           "debug",           NULL};

static const char *const codex_commands[] = {"codex", NULL};
/* api.openai.com: the API with an API key. chatgpt.com: the backend a
 * ChatGPT sign-in talks to. auth.openai.com: where that sign-in is refreshed. */
static const char *const codex_hosts[] = {"api.openai.com:443", "chatgpt.com:443",
                                          "auth.openai.com:443", NULL};
static const char *const codex_env[] = {"OPENAI_*", "CODEX_*", NULL};
static const char *const codex_skip[] = {"sessions", "archived_sessions", "history.jsonl", "log",
                                         NULL};

static const cli_profile claude = {
    .name = "claude",
    .commands = claude_commands,
    .hosts = claude_hosts,
    .env = claude_env,
    .base_url_env = "ANTHROPIC_BASE_URL",
    .config_env = "CLAUDE_CONFIG_DIR",
    .config_dir = ".claude",
    .config_file = ".claude.json",
    .config_file_new = "{}\n",
    .config_skip = claude_skip,
};

static const cli_profile codex = {
    .name = "codex",
    .commands = codex_commands,
    .hosts = codex_hosts,
    .env = codex_env,
    .base_url_env = "OPENAI_BASE_URL",
    .config_env = "CODEX_HOME",
    .config_dir = ".codex",
    .config_file = NULL,
    .config_file_new = NULL,
    .config_skip = codex_skip,
};

const cli_profile *const cli_profiles[] = {&claude, &codex, NULL};

/* ------------------------------------------------------------------------ */
/* Selection                                                                */
/* ------------------------------------------------------------------------ */

int cli_profile_select(const cli_profile **out, const char *opt, const char *cmd, rg_error *err)
{
    const char *base;
    size_t i, j;

    *out = NULL;
    if (opt != NULL) {
        if (!strcmp(opt, "none"))
            return 0;
        for (i = 0; cli_profiles[i]; i++)
            if (!strcmp(cli_profiles[i]->name, opt)) {
                *out = cli_profiles[i];
                return 0;
            }
        return rg_error_set(err, -EINVAL, "--profile %s: no such profile (claude, codex, none)",
                            opt);
    }
    if (cmd == NULL)
        return 0;
    base = strrchr(cmd, '/');
    base = base ? base + 1 : cmd;
    for (i = 0; cli_profiles[i]; i++)
        for (j = 0; cli_profiles[i]->commands[j]; j++)
            if (!strcmp(cli_profiles[i]->commands[j], base)) {
                *out = cli_profiles[i];
                return 0;
            }
    return 0;
}

int cli_profile_env_match(const cli_profile *p, const char *entry)
{
    const char *eq = strchr(entry, '=');
    size_t namelen, n, i;

    if (p == NULL || eq == NULL || eq == entry)
        return 0;
    namelen = (size_t)(eq - entry);
    /* The copy's location is refgate run's to set, never the caller's. */
    if (strlen(p->config_env) == namelen && !strncmp(entry, p->config_env, namelen))
        return 0;
    for (i = 0; p->env[i]; i++) {
        n = strlen(p->env[i]);
        if (n > 0 && p->env[i][n - 1] == '*') {
            if (namelen >= n - 1 && !strncmp(entry, p->env[i], n - 1))
                return 1;
        } else if (n == namelen && !strncmp(entry, p->env[i], n)) {
            return 1;
        }
    }
    return 0;
}

int cli_profile_url_host(char *out, size_t cap, const char *url)
{
    const char *h, *end, *colon;
    size_t hlen;
    long port = 443;

    if (strncmp(url, "https://", 8) != 0)
        return -EINVAL;
    h = url + 8;
    end = h + strcspn(h, "/?#");
    /* userinfo or an IPv6 literal: not worth guessing at; refuse. */
    if (memchr(h, '@', (size_t)(end - h)) != NULL || *h == '[')
        return -EINVAL;
    colon = memchr(h, ':', (size_t)(end - h));
    hlen = (size_t)((colon ? colon : end) - h);
    if (colon != NULL) {
        char *pe;

        port = strtol(colon + 1, &pe, 10);
        if (pe != end || port < 1 || port > 65535)
            return -EINVAL;
    }
    if (hlen == 0 || hlen + 7 > cap)
        return -EINVAL;
    snprintf(out, cap, "%.*s:%ld", (int)hlen, h, port);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The copy                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct copy_budget {
    size_t entries;
    long long bytes;
} copy_budget;

static int copy_charge(copy_budget *b, long long bytes, rg_error *err)
{
    if (++b->entries > CLI_PROFILE_COPY_ENTRIES || (b->bytes += bytes) > CLI_PROFILE_COPY_BYTES)
        return rg_error_set(err, -EFBIG,
                            "the agent's configuration is larger than %d entries or %ld MiB; "
                            "run with --profile none",
                            CLI_PROFILE_COPY_ENTRIES, CLI_PROFILE_COPY_BYTES >> 20);
    return 0;
}

/*
 * Copy the regular file `name` of directory fd `sfd` to `dname` in `dfd`,
 * keeping the owner's permission bits; through a symbolic link when `follow`.
 */
static int copy_file(int sfd, const char *name, int dfd, const char *dname, const char *shown,
                     int follow, rg_error *err)
{
    char buf[65536];
    struct stat st;
    int in = -1, outfd = -1, rc = 0;
    long long left;
    ssize_t n;

    /* O_NONBLOCK: a fifo put in its place would not hang the open; it is refused below. */
    in = openat(sfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (in < 0 || fstat(in, &st) < 0) {
        rc = rg_error_set(err, -errno, "%s: %s", shown, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = rg_error_set(err, -EINVAL, "%s: not a regular file", shown);
        goto done;
    }
    outfd =
        openat(dfd, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0700);
    if (outfd < 0) {
        rc = rg_error_set(err, -errno, "copying %s: %s", shown, strerror(errno));
        goto done;
    }
    /* Bounded: at most the size charged to the budget, should the file grow meanwhile. */
    for (left = st.st_size; left > 0; left -= n) {
        n = read(in, buf, left < (long long)sizeof(buf) ? (size_t)left : sizeof(buf));
        if (n < 0 && errno == EINTR) {
            n = 0;
            continue;
        }
        if (n == 0)
            break;
        if (n < 0 || write(outfd, buf, (size_t)n) != n) {
            rc = rg_error_set(err, -EIO, "copying %s: %s", shown, strerror(errno));
            goto done;
        }
    }
done:
    if (in >= 0)
        close(in);
    if (outfd >= 0)
        close(outfd);
    explicit_bzero(buf, sizeof(buf));
    return rc;
}

static int copy_skipped(const char *const *skip, const char *name)
{
    for (; skip != NULL && *skip; skip++)
        if (!strcmp(*skip, name))
            return 1;
    return 0;
}

/* Copy the entries of directory fd `sfd` into `dfd`; `skip` applies at the top only. */
static int copy_dir(int sfd, int dfd, const char *shown, const char *const *skip, int depth,
                    copy_budget *b, rg_error *err)
{
    char sub[PATH_MAX], link[PATH_MAX];
    struct dirent *d;
    struct stat st, target;
    DIR *dir = NULL;
    int dup_fd, rc = 0, s2 = -1, d2 = -1;
    ssize_t n;

    if (depth > CLI_PROFILE_COPY_DEPTH)
        return rg_error_set(err, -EFBIG, "%s: deeper than %d levels", shown,
                            CLI_PROFILE_COPY_DEPTH);
    dup_fd = dup(sfd);
    if (dup_fd < 0 || (dir = fdopendir(dup_fd)) == NULL) {
        if (dup_fd >= 0)
            close(dup_fd);
        return rg_error_set(err, -errno, "%s: %s", shown, strerror(errno));
    }
    /* Bounded: every entry is charged to the budget, which stops the walk. */
    while (rc == 0 && (d = readdir(dir)) != NULL) {
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") || copy_skipped(skip, d->d_name))
            continue;
        snprintf(sub, sizeof(sub), "%s/%s", shown, d->d_name);
        if (fstatat(sfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if ((rc = copy_charge(b, S_ISREG(st.st_mode) ? st.st_size : 0, err)) < 0)
            break;
        if (S_ISREG(st.st_mode)) {
            rc = copy_file(sfd, d->d_name, dfd, d->d_name, sub, 0, err);
        } else if (S_ISLNK(st.st_mode) && fstatat(sfd, d->d_name, &target, 0) == 0 &&
                   S_ISREG(target.st_mode)) {
            /* A settings file kept elsewhere (a dotfiles checkout) and linked
             * in: its target is not in the run, so copy what it says. */
            if ((rc = copy_charge(b, target.st_size, err)) == 0)
                rc = copy_file(sfd, d->d_name, dfd, d->d_name, sub, 1, err);
        } else if (S_ISLNK(st.st_mode)) {
            n = readlinkat(sfd, d->d_name, link, sizeof(link) - 1);
            if (n < 0)
                continue;
            link[n] = '\0';
            if (symlinkat(link, dfd, d->d_name) < 0)
                rc = rg_error_set(err, -errno, "copying %s: %s", sub, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            if (mkdirat(dfd, d->d_name, 0700) < 0 ||
                (s2 = openat(sfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
                    0 ||
                (d2 = openat(dfd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                rc = rg_error_set(err, -errno, "copying %s: %s", sub, strerror(errno));
            else
                rc = copy_dir(s2, d2, sub, NULL, depth + 1, b, err);
            if (s2 >= 0)
                close(s2);
            if (d2 >= 0)
                close(d2);
            s2 = d2 = -1;
        }
        /* Sockets, fifos and devices: an agent's running instance, not its configuration. */
    }
    closedir(dir);
    return rc;
}

int cli_profile_copy_config(const char *dest, const cli_profile *p, const char *src_dir,
                            const char *src_file, rg_error *err)
{
    copy_budget b = {0, 0};
    int sfd = -1, dfd = -1, cfd = -1, rc = 0;
    struct stat st;

    dfd = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || mkdirat(dfd, CLI_PROFILE_COPY_DIR, 0700) < 0 ||
        (cfd = openat(dfd, CLI_PROFILE_COPY_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
            0) {
        rc = rg_error_set(err, -errno, "%s: %s", dest, strerror(errno));
        goto done;
    }
    sfd = open(src_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sfd >= 0)
        rc = copy_dir(sfd, cfd, src_dir, p->config_skip, 0, &b, err);
    else if (errno != ENOENT)
        rc = rg_error_set(err, -errno, "%s: %s", src_dir, strerror(errno));
    if (rc < 0 || src_file == NULL)
        goto done;
    if (stat(src_file, &st) == 0 && S_ISREG(st.st_mode)) {
        if ((rc = copy_charge(&b, st.st_size, err)) == 0)
            rc = copy_file(AT_FDCWD, src_file, dfd, CLI_PROFILE_COPY_FILE, src_file, 1, err);
    } else {
        int fd = openat(dfd, CLI_PROFILE_COPY_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        const char *init = p->config_file_new ? p->config_file_new : "";

        if (fd < 0 || write(fd, init, strlen(init)) != (ssize_t)strlen(init))
            rc = rg_error_set(err, -EIO, "%s/%s: %s", dest, CLI_PROFILE_COPY_FILE, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
done:
    if (sfd >= 0)
        close(sfd);
    if (cfd >= 0)
        close(cfd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}
