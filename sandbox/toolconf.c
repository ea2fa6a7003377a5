/*
 * Toolchain configuration files; see toolconf.h. The tables below are the
 * policy: which files are looked at, and what an auth setting's name is.
 */
#include "sandbox/toolconf.h"

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/caches.h"
#include "sandbox/env.h"
#include "sandbox/landlock.h"
#include "sandbox/mount.h"

/* A config file larger than this is not a config file: hidden. */
#define TOOLCONF_MAX (256 * 1024)

/* The names of left-out settings said, at most (the rest is "..."). */
#define TOOLCONF_DROPPED_MAX 512

static const struct {
    const char *rel;
    const char *env;
    int npmrc;
} toolconf_files[] = {
    {".config/pip/pip.conf", NULL, 0}, {".pip/pip.conf", NULL, 0},
    {".cargo/config.toml", NULL, 0},   {".cargo/config", NULL, 0},
    {".config/go/env", NULL, 0},       {".npmrc", "NPM_CONFIG_USERCONFIG", 1},
};

/* npm's auth settings, bare or after a registry scope (`//host/:_auth`). */
static const char *const toolconf_npm_auth[] = {
    "_auth",    "_authtoken", "_password", "password", "username", "email",
    "certfile", "keyfile",    "cert",      "key",      "otp",      NULL,
};

/* Words that make a key in another tool's config a credential's. */
static const char *const toolconf_secret_words[] = {
    "token", "password", "passwd", "secret", "_auth", NULL,
};

/* ------------------------------------------------------------------------ */
/* Text                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct toolconf_line {
    const char *p;
    size_t len;
} toolconf_line;

/* The next line of text[*off..len), without its newline; 0 at the end. */
static int toolconf_next(toolconf_line *out, const char *text, size_t len, size_t *off)
{
    const char *nl;

    if (*off >= len)
        return 0;
    out->p = text + *off;
    nl = memchr(out->p, '\n', len - *off);
    out->len = nl ? (size_t)(nl - out->p) : len - *off;
    *off += out->len + (nl ? 1 : 0);
    return 1;
}

static void toolconf_trim(const char **p, size_t *len)
{
    while (*len > 0 && isspace((unsigned char)**p)) {
        (*p)++;
        (*len)--;
    }
    while (*len > 0 && isspace((unsigned char)(*p)[*len - 1]))
        (*len)--;
}

/* Split "key = value" (or "key: value" when `colon`); 0 when no key. */
static int toolconf_kv(const toolconf_line *l, const char **k, size_t *kl, const char **v,
                       size_t *vl)
{
    const char *eq = memchr(l->p, '=', l->len);

    *k = l->p;
    *kl = eq ? (size_t)(eq - l->p) : l->len;
    *v = eq ? eq + 1 : l->p + l->len;
    *vl = eq ? l->len - (size_t)(eq + 1 - l->p) : 0;
    toolconf_trim(k, kl);
    toolconf_trim(v, vl);
    return *kl > 0 && **k != '#' && **k != ';' && **k != '[';
}

static int toolconf_has_word(const char *s, size_t len, const char *word)
{
    size_t wl = strlen(word), i;

    for (i = 0; i + wl <= len; i++)
        if (strncasecmp(s + i, word, wl) == 0)
            return 1;
    return 0;
}

/* A URL with userinfo: "scheme://user[:pass]@host". */
static int toolconf_url_userinfo(const char *s, size_t len)
{
    size_t i, j;

    for (i = 0; i + 3 <= len; i++) {
        if (memcmp(s + i, "://", 3) != 0)
            continue;
        for (j = i + 3; j < len; j++) {
            if (s[j] == '@')
                return 1;
            if (s[j] == '/' || s[j] == '"' || s[j] == '\'' || isspace((unsigned char)s[j]))
                break;
        }
    }
    return 0;
}

/* Append a key's name to a ", "-separated list, capped. */
static int toolconf_note(char **list, const char *k, size_t kl)
{
    size_t have = *list ? strlen(*list) : 0;
    char *grown;

    if (have >= TOOLCONF_DROPPED_MAX)
        return 0;
    if (have + kl + 3 > TOOLCONF_DROPPED_MAX) {
        k = "...";
        kl = 3;
    }
    grown = realloc(*list, have + kl + 3);
    if (grown == NULL)
        return -ENOMEM;
    if (have > 0)
        memcpy(grown + have, ", ", 2), have += 2;
    memcpy(grown + have, k, kl);
    grown[have + kl] = '\0';
    *list = grown;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Classification                                                            */
/* ------------------------------------------------------------------------ */

static int toolconf_npm_is_auth(const char *k, size_t kl)
{
    const char *last = k;
    size_t i, ll;

    /* Everything scoped to a registry (`//host/:...`) is about auth. */
    if (kl >= 2 && k[0] == '/' && k[1] == '/')
        return 1;
    for (i = 0; i < kl; i++)
        if (k[i] == ':')
            last = k + i + 1;
    ll = kl - (size_t)(last - k);
    for (i = 0; toolconf_npm_auth[i]; i++)
        if (ll == strlen(toolconf_npm_auth[i]) && strncasecmp(last, toolconf_npm_auth[i], ll) == 0)
            return 1;
    return 0;
}

int sandbox_toolconf_filter_npmrc(char **out, char **dropped, const char *text, size_t len)
{
    toolconf_line l;
    const char *k, *v;
    size_t off = 0, kl, vl, n = 0;
    char *buf = malloc(len + 1);
    int left = 0;

    *out = NULL;
    *dropped = NULL;
    if (buf == NULL)
        return -ENOMEM;
    while (toolconf_next(&l, text, len, &off)) {
        if (toolconf_kv(&l, &k, &kl, &v, &vl) &&
            (toolconf_npm_is_auth(k, kl) || toolconf_url_userinfo(v, vl))) {
            left++;
            if (toolconf_note(dropped, k, kl) < 0) {
                free(buf);
                free(*dropped);
                *dropped = NULL;
                return -ENOMEM;
            }
            continue;
        }
        memcpy(buf + n, l.p, l.len);
        n += l.len;
        buf[n++] = '\n';
    }
    buf[n] = '\0';
    *out = buf;
    return left;
}

int sandbox_toolconf_has_credential(char **what, const char *text, size_t len)
{
    toolconf_line l;
    const char *k, *v;
    size_t off = 0, kl, vl, i;

    *what = NULL;
    while (toolconf_next(&l, text, len, &off)) {
        int hit = 0;

        if (!toolconf_kv(&l, &k, &kl, &v, &vl))
            continue;
        for (i = 0; !hit && toolconf_secret_words[i]; i++)
            hit = toolconf_has_word(k, kl, toolconf_secret_words[i]);
        if (hit || toolconf_url_userinfo(v, vl)) {
            *what = strndup(k, kl);
            return 1;
        }
    }
    return 0;
}

unsigned sandbox_toolconf_gpgsign(const char *text, size_t len)
{
    toolconf_line l;
    const char *k, *v;
    size_t off = 0, kl, vl;
    unsigned section = 0, found = 0;

    while (toolconf_next(&l, text, len, &off)) {
        const char *p = l.p;
        size_t pl = l.len;

        toolconf_trim(&p, &pl);
        if (pl > 0 && p[0] == '[') {
            const char *end = memchr(p, ']', pl);
            size_t sl = end ? (size_t)(end - p - 1) : 0;
            const char *s = p + 1;

            toolconf_trim(&s, &sl);
            section = (sl == 6 && strncasecmp(s, "commit", 6) == 0) ? SANDBOX_TOOLCONF_GPG_COMMIT
                      : (sl == 3 && strncasecmp(s, "tag", 3) == 0)  ? SANDBOX_TOOLCONF_GPG_TAG
                                                                    : 0;
            continue;
        }
        if (section == 0 || !toolconf_kv(&l, &k, &kl, &v, &vl))
            continue;
        if (kl != 7 || strncasecmp(k, "gpgsign", 7) != 0)
            continue;
        /* A bare key is true in git's syntax. */
        if (memchr(l.p, '=', l.len) == NULL || (vl == 4 && strncasecmp(v, "true", 4) == 0) ||
            (vl == 3 && strncasecmp(v, "yes", 3) == 0) ||
            (vl == 2 && strncasecmp(v, "on", 2) == 0) || (vl == 1 && v[0] == '1'))
            found |= section;
        else
            found &= ~section;
    }
    return found;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

/* Read a regular file (not through a symlink's target outside checks: the
 * caller resolved it), at most TOOLCONF_MAX bytes; -EFBIG when larger. */
static int toolconf_read(char **out, size_t *len, const char *path)
{
    struct stat st;
    char *buf;
    ssize_t n;
    size_t have = 0;
    int fd, rc = 0;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > TOOLCONF_MAX) {
        close(fd);
        return -EFBIG;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        close(fd);
        return -ENOMEM;
    }
    /* Bounded: st_size bytes. */
    while (have < (size_t)st.st_size && (n = read(fd, buf + have, (size_t)st.st_size - have)) > 0)
        have += (size_t)n;
    close(fd);
    buf[have] = '\0';
    *out = buf;
    *len = have;
    return rc;
}

/* Write `text` to dir/name through a temporary name and rename(). */
static int toolconf_write_copy(char **out, const char *dir, const char *name, const char *text,
                               rg_error *err)
{
    char tmp[PATH_MAX], path[PATH_MAX];
    size_t len = strlen(text), done = 0;
    ssize_t n;
    int fd;

    if (sandbox_caches_mkdirs(dir, 0700, err) < 0)
        return -EIO;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s/.%s.%ld", dir, name, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return rg_error_set(err, -errno, "cannot write %s: %s", tmp, strerror(errno));
    /* Bounded: len bytes. */
    while (done < len && (n = write(fd, text + done, len - done)) > 0)
        done += (size_t)n;
    if (done < len || close(fd) < 0) {
        unlink(tmp);
        return rg_error_set(err, -EIO, "cannot write %s", tmp);
    }
    if (rename(tmp, path) < 0) {
        unlink(tmp);
        return rg_error_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    }
    *out = strdup(path);
    return *out ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
}

static int toolconf_one(sandbox_toolconf *c, size_t i, const char *home, const char *copies,
                        rg_error *err)
{
    sandbox_toolconf_file *f = &c->v[c->n];
    char path[PATH_MAX], real[PATH_MAX], *text = NULL, *copy = NULL;
    size_t len = 0;
    struct stat st;
    int rc = 0;

    snprintf(path, sizeof(path), "%s/%s", home, toolconf_files[i].rel);
    if (lstat(path, &st) < 0)
        return 0;
    memset(f, 0, sizeof(*f));
    f->rel = toolconf_files[i].rel;
    f->env = toolconf_files[i].env;
    f->dst = strdup(path);
    if (f->dst == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    c->n++;
    /* A dotfile may be a symlink (dotfile managers): read where it points,
     * but only a regular file, and only one within reach of the checks. */
    if (realpath(path, real) == NULL || toolconf_read(&text, &len, real) < 0) {
        f->action = SANDBOX_TOOLCONF_HIDDEN;
        f->dropped = strdup("not a readable regular file under 256 KiB");
        goto done;
    }
    if (toolconf_files[i].npmrc) {
        rc = sandbox_toolconf_filter_npmrc(&copy, &f->dropped, text, len);
        if (rc < 0) {
            rc = rg_error_set(err, rc, "filtering %s: %s", path, strerror(-rc));
            goto done;
        }
        f->action = rc > 0 ? SANDBOX_TOOLCONF_FILTERED : SANDBOX_TOOLCONF_GIVE;
        rc = rc > 0 ? toolconf_write_copy(&f->src, copies, "npmrc", copy, err) : 0;
    } else if (sandbox_toolconf_has_credential(&f->dropped, text, len)) {
        f->action = SANDBOX_TOOLCONF_HIDDEN;
    }
    if (rc == 0 && f->action == SANDBOX_TOOLCONF_GIVE) {
        f->src = strdup(real);
        rc = f->src ? 0 : rg_error_set(err, -ENOMEM, "out of memory");
    }
done:
    if (text)
        explicit_bzero(text, len);
    if (copy)
        explicit_bzero(copy, strlen(copy));
    free(text);
    free(copy);
    return rc;
}

int sandbox_toolconf_scan(sandbox_toolconf *out, const char *home, const char *copies,
                          rg_error *err)
{
    static const char *const gitconfigs[] = {".gitconfig", ".config/git/config"};
    const size_t nfiles = sizeof(toolconf_files) / sizeof(toolconf_files[0]);
    sandbox_toolconf c = SANDBOX_TOOLCONF_INIT;
    char path[PATH_MAX], *text;
    size_t i, len;
    int rc = 0;

    c.v = calloc(nfiles, sizeof(*c.v));
    if (c.v == NULL)
        return rg_error_set(err, -ENOMEM, "out of memory");
    for (i = 0; rc == 0 && i < nfiles; i++)
        rc = toolconf_one(&c, i, home, copies, err);
    for (i = 0; rc == 0 && i < sizeof(gitconfigs) / sizeof(gitconfigs[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", home, gitconfigs[i]);
        if (toolconf_read(&text, &len, path) < 0)
            continue;
        c.gpgsign |= sandbox_toolconf_gpgsign(text, len);
        free(text);
    }
    if (rc < 0)
        sandbox_toolconf_free(&c);
    else
        *out = c;
    return rc;
}

int sandbox_toolconf_describe(char **out, const sandbox_toolconf *c)
{
    char *line = NULL, *grown;
    const char *sep;
    size_t i;
    int n;

    *out = NULL;
    for (i = 0; i < c->n; i++) {
        const sandbox_toolconf_file *f = &c->v[i];

        if (f->action == SANDBOX_TOOLCONF_GIVE)
            continue;
        sep = line ? "; " : "";
        if (f->action == SANDBOX_TOOLCONF_FILTERED)
            n = asprintf(&grown, "%s%s~/%s given without its auth settings (%s)", line ? line : "",
                         sep, f->rel, f->dropped);
        else
            /* `dropped` is a key's name, or a sentence when unreadable. */
            n = asprintf(&grown, "%s%s~/%s hidden (%s%s)", line ? line : "", sep, f->rel,
                         strchr(f->dropped, ' ') ? "" : "it sets ", f->dropped);
        free(line);
        if (n < 0)
            return -ENOMEM;
        line = grown;
    }
    *out = line;
    return 0;
}

void sandbox_toolconf_free(sandbox_toolconf *c)
{
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i < c->n; i++) {
        free(c->v[i].src);
        free(c->v[i].dst);
        free(c->v[i].dropped);
    }
    free(c->v);
    memset(c, 0, sizeof(*c));
}

int sandbox_toolconf_mount(const sandbox_toolconf *c, struct sandbox_mount_plan *p, unsigned flags,
                           rg_error *err)
{
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < c->n; i++)
        if (c->v[i].action != SANDBOX_TOOLCONF_HIDDEN)
            rc =
                sandbox_mount_plan_add(p, SANDBOX_MOUNT_BIND, c->v[i].src, c->v[i].dst, flags, err);
    return rc;
}

int sandbox_toolconf_allow(const sandbox_toolconf *c, struct sandbox_landlock *ll, int mounted,
                           rg_error *err)
{
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < c->n; i++)
        if (c->v[i].action != SANDBOX_TOOLCONF_HIDDEN)
            rc = sandbox_landlock_allow(ll, mounted ? c->v[i].dst : c->v[i].src,
                                        SANDBOX_LANDLOCK_READ | SANDBOX_LANDLOCK_OPTIONAL, err);
    return rc;
}

int sandbox_toolconf_env(const sandbox_toolconf *c, char ***env, int mounted, rg_error *err)
{
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && !mounted && i < c->n; i++)
        if (c->v[i].action == SANDBOX_TOOLCONF_FILTERED && c->v[i].env != NULL)
            rc = sandbox_env_setdefault(env, c->v[i].env, c->v[i].src, err);
    return rc;
}
